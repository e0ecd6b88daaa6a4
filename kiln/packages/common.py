"""What every problem package reader gives `kiln judge` (kiln/judgecli.py): the tests, their
points and groups, the limits, how outputs are compared, the checker and the interactor, all as
/judge takes them (DESIGN.md, "Judge API, round 2"). A reader maps its judge's layout onto these
types; what it cannot map exactly is a PackageError that names the file and says what to do,
never a silent approximation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml


class PackageError(Exception):
    """The package cannot be judged as it is: the message names the file and what to do."""


@dataclass(frozen=True)
class Helper:
    """A checker or interactor: its language, its main source's text, and the files built with
    it (name in the build -> the file here, uploaded once by content: testlib.h, validate.h)."""

    lang: str
    source: str
    files: tuple[tuple[str, Path], ...] = ()


@dataclass(frozen=True)
class PackageTest:
    name: str  # as shown in the table ("01", "secret/group1/003")
    input: Path
    answer: Path | None
    points: float | None


@dataclass(frozen=True)
class Package:
    layout: str  # the judge whose layout this is, as the progress line names it ("Polygon")
    tests: tuple[PackageTest, ...]
    groups: tuple[dict, ...]  # as /judge's `groups` ({"name", "tests", "points", "scoring", "depends"})
    time_ms: int | None
    memory_bytes: int | None
    checker: Helper | None
    interactor: Helper | None
    compare: str | None = None  # the package's own comparison when it has no checker (tokens, line_tokens, exact, a float mode)
    # with a float mode: the request's tolerance fields (epsilon or absolute_epsilon and relative_epsilon, float_rule)
    tolerance: dict = field(default_factory=dict)
    ignore_case: bool = False  # with its compare: ASCII letters folded (Kattis's default validator)
    notes: tuple[str, ...] = ()  # what the reader did not take, said on the progress lines


def read_text(path: Path, what: str) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as error:
        raise PackageError(f"cannot read the {what} {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise PackageError(f"the {what} {path} is not UTF-8 text: save it as UTF-8") from None


def number(value, what: str, where: Path, as_type):
    """A limit or points value as `as_type` (int or float), None when absent; a negative or a
    non-number is an error naming `what` in `where`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise PackageError(f"{where}: {what} {value!r} is not a number")
    try:
        result = as_type(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise PackageError(f"{where}: {what} {value!r} is not a number") from None
    if result < 0:
        raise PackageError(f"{where}: {what} {value!r} is below 0")
    return result


def dependencies_first(groups: dict[str, dict], where: Path) -> tuple[dict, ...]:
    """The groups in an order where each comes after those it depends on (kiln's rule), the
    package's order otherwise."""
    ordered: list[dict] = []
    while len(ordered) < len(groups):
        done = [o["name"] for o in ordered]
        ready = [g for g in groups.values() if g not in ordered and all(d in done for d in g["depends"])]
        if not ready:
            left = [g["name"] for g in groups.values() if g not in ordered]
            unknown = [d for n in left for d in groups[n]["depends"] if d not in groups]
            raise PackageError(f"{where}: group dependencies " + (f"name no group: {unknown[0]!r}" if unknown else f"make a cycle among {left}"))
        ordered.append(ready[0])
    return tuple(ordered)


def yaml_mapping(where: Path, shape: str, keys: tuple[str, ...] | None = None, hint: str = "") -> dict:
    """A package's YAML file as a mapping (empty: {}); with `keys`, one it does not take is refused
    naming them (`hint` says why, in parentheses before the list)."""
    try:
        config = yaml.safe_load(where.read_text(encoding="utf-8")) or {}
    except OSError as error:
        raise PackageError(f"cannot read {where}: {error.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise PackageError(f"{where} is not YAML: {error}") from None
    if not isinstance(config, dict):
        raise PackageError(f"{where} is not a mapping of keys ({shape})")
    for key in config if keys is not None else ():
        if key not in keys:
            raise PackageError(f"{where}: kiln does not take {key!r} ({hint}it takes {', '.join(keys)})")
    return config
