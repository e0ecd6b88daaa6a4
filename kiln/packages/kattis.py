"""A Kattis problem package (problemarchive.org's problem package format) as `kiln judge
PACKAGE_DIR` reads it:

    problem.yaml       validation: default | custom [interactive] (or type: pass-fail | scoring | interactive)
                       validator_flags: "float_tolerance 1e-6 case_sensitive"
                       limits: {memory: 256 (MiB), time_limit: 2 (seconds)}
    .timelimit         the time limit in seconds, where problem.yaml gives none
    data/sample/*.in, *.ans     data/secret/**/*.in, *.ans     testdata.yaml per folder
    output_validators/<name>/   a custom output validator (C++, usually with validate.h)

Tests are taken in Kattis's order: each folder's entries (test files and subfolders) in
lexicographic order of name, sample before secret. Default validation becomes a compare mode
(with ignore_case unless case_sensitive) where kiln's is exactly the default validator's
(kattis_validation.py); a C++ output validator is
bridged as the request's checker (kattis_validation.py); an interactive problem's validator (C++
or Python) as its interactor (kattis_interactive.py). Multi-pass problems are refused. Scoring problems: each folder that holds
tests is a group, its tests worth testdata.yaml's accept_score, summed (grader_flags sum, the
default) or all-or-nothing (grader_flags min). What does not map is a PackageError naming it.
"""

from __future__ import annotations

from pathlib import Path


from kiln.packages import kattis_interactive, kattis_validation
from kiln.packages.common import Package, PackageError, PackageTest, number, yaml_mapping

LAYOUT = "Kattis"
PRETESTS = False  # whether its format has pretests (`kiln judge --pretests` judges them alone)
PROBLEM_YAML = "problem.yaml"
TIMELIMIT = ".timelimit"
DATA_FOLDERS = ("sample", "secret")
MIB = 1 << 20
# grader_flags kiln takes: how a group's test scores add up, and verdict rules that are kiln's own
AGGREGATIONS = {"sum": "sum", "min": "all"}
VERDICT_FLAGS = ("first_error",)
TESTDATA_KEYS = ("accept_score", "reject_score", "grader_flags", "on_reject", "range", "grading", "input_validator_flags")


def is_package(folder: Path) -> bool:
    return (folder / PROBLEM_YAML).is_file() and (folder / "data").is_dir()


def read(folder: Path) -> Package:
    where = folder / PROBLEM_YAML
    config = yaml_mapping(where, "name:, validation:, limits:")
    scoring, custom, interactive = _problem_type(config, where)
    limits = config.get("limits") or {}
    if not isinstance(limits, dict):
        raise PackageError(f"{where}: limits is not a mapping (limits: {{memory: 256, time_limit: 2}})")
    memory = number(limits.get("memory"), "limits.memory (MiB)", where, float)
    seconds = number(limits.get("time_limit"), "limits.time_limit (seconds)", where, float)
    notes = []
    if seconds is None and (folder / TIMELIMIT).is_file():
        seconds = number((folder / TIMELIMIT).read_text().strip(), "the time limit (seconds)", folder / TIMELIMIT, float)
    if seconds is None:
        notes.append("no time_limit in problem.yaml and no .timelimit: Kattis derives it from its judge solutions' times; give --time")
    flags = str(config.get("validator_flags") or "").split()
    tests, groups = _data(folder, scoring)
    compare, tolerance, ignore_case, checker, interactor = None, {}, False, None, None
    if interactive:
        interactor = kattis_interactive.bridged_interactor(folder, flags)
    elif custom:
        checker = kattis_validation.bridged_validator(folder, flags)
    else:
        compare, tolerance, ignore_case = kattis_validation.compare_mode(flags, where)
    return Package(
        layout=LAYOUT,
        tests=tests,
        groups=groups,
        time_ms=round(seconds * 1000) if seconds is not None else None,
        memory_bytes=round(memory * MIB) if memory is not None else None,
        checker=checker,
        interactor=interactor,
        compare=compare,
        tolerance=tolerance,
        ignore_case=ignore_case,
        notes=tuple(notes),
    )


def _problem_type(config: dict, where: Path) -> tuple[bool, bool, bool]:
    """(scoring, custom validator, interactive) from `validation` (legacy: `custom interactive`)
    or `type` (2023 format: `interactive`, whose validator is always custom)."""
    validation = str(config.get("validation", "default")).split()
    kinds = config.get("type", "pass-fail")
    kinds = kinds.split() if isinstance(kinds, str) else [str(k) for k in kinds]
    if "multi-pass" in kinds or "multi-pass" in validation:
        raise PackageError(f"{where}: a multi-pass Kattis problem (the validator's nextpass.in feeds the submission a second run): kiln runs each test once and does not judge multi-pass problems")
    if validation[:1] not in (["default"], ["custom"]) or any(v not in ("custom", "score", "interactive") for v in validation[1:]):
        raise PackageError(f"{where}: validation {config.get('validation')!r} is none of default, custom, custom interactive, custom score")
    if "score" in validation:
        raise PackageError(f"{where}: validation 'custom score' (a validator that gives scores in score.txt): kiln does not take validator scores; use default or custom pass-fail validation")
    interactive = "interactive" in validation or "interactive" in kinds
    scoring = "scoring" in kinds or config.get("type") == "scoring"
    return scoring, validation[0] == "custom" or interactive, interactive


def _data(folder: Path, scoring: bool) -> tuple[tuple[PackageTest, ...], tuple[dict, ...]]:
    data = folder / "data"
    tests: list[PackageTest] = []
    groups: dict[str, dict] = {}
    inherited = _testdata(data, {}) if scoring else {}
    for name in DATA_FOLDERS:
        if (data / name).is_dir():
            _walk(data / name, data, inherited, scoring, tests, groups)
    if not tests:
        raise PackageError(f"{data} holds no tests: put them as data/sample/NAME.in and data/secret/NAME.in with NAME.ans beside each")
    return tuple(tests), tuple(groups.values())


def _walk(here: Path, data: Path, parent: dict, scoring: bool, tests: list[PackageTest], groups: dict[str, dict]) -> None:
    """The tests of `here` and of its subfolders in Kattis's order; with scoring, `here` a group
    when it holds tests."""
    settings = _testdata(here, parent) if scoring else {}
    entries = sorted((p for p in here.iterdir() if p.is_dir() or p.suffix == ".in"), key=lambda p: p.stem if p.suffix == ".in" else p.name)
    mine = []
    for entry in entries:
        if entry.is_dir():
            if scoring and settings.get("aggregation", "sum") != "sum":
                raise PackageError(f"{here}: grader_flags min on a folder with subfolders: kiln's groups do not nest; flatten the group or use sum")
            _walk(entry, data, settings, scoring, tests, groups)
            continue
        answer = entry.with_suffix(".ans")
        if not answer.is_file():
            raise PackageError(f"{entry} has no {answer.name} beside it: every Kattis test needs its answer file")
        mine.append(len(tests))
        points = settings["accept_score"] if scoring else None
        tests.append(PackageTest(str(entry.relative_to(data).with_suffix("")), entry, answer, points))
    if scoring and mine:
        name = str(here.relative_to(data))
        each = settings["accept_score"]
        scoring_rule = settings.get("aggregation", "sum")
        points = each if scoring_rule == "all" else each * len(mine)
        groups[name] = {"name": name, "tests": mine, "points": points, "scoring": scoring_rule, "depends": []}


def _testdata(here: Path, parent: dict) -> dict:
    """A folder's grading settings: its testdata.yaml over those it inherits."""
    settings = dict(parent)
    where = here / "testdata.yaml"
    if not where.is_file():
        settings.setdefault("accept_score", 1.0)
        return settings
    given = yaml_mapping(where, "accept_score:, grader_flags:", TESTDATA_KEYS)
    if given.get("grading", "default") != "default":
        raise PackageError(f"{where}: grading {given['grading']!r} (a custom grader): kiln sums or takes the minimum only; use grader_flags sum or min")
    if number(given.get("reject_score"), "reject_score", where, float) not in (None, 0):
        raise PackageError(f"{where}: reject_score {given['reject_score']!r}: kiln scores a rejected test 0; remove it")
    accept = number(given.get("accept_score"), "accept_score", where, float)
    settings["accept_score"] = accept if accept is not None else settings.get("accept_score", 1.0)
    for flag in str(given.get("grader_flags") or "").split():
        if flag in AGGREGATIONS:
            settings["aggregation"] = AGGREGATIONS[flag]
        elif flag not in VERDICT_FLAGS:
            raise PackageError(f"{where}: grader_flags {flag!r}: kiln takes {', '.join([*AGGREGATIONS, *VERDICT_FLAGS])}")
    return settings
