"""What a judge request asks for, as typed objects: built from POST /judge's body by
kiln/http/judge_request.py (which checks every field), read by kiln/judge/judge.py."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kiln.judge.numbers import Tolerance
from kiln.judge.scoring import Scoring

# a file beside the judge file: header.c file_name() checks the same in kiln-init
FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
# the files kiln writes beside a checker's or an interactor's build for each test, whose paths
# are its arguments in this order (testlib's): its own `files` may not take these names
GIVEN_FILES = {"checker": ("input", "output", "answer"), "interactor": ("input", "record", "answer")}


@dataclass(frozen=True)
class Source:
    """A test's input or expected answer, or a source file of a build: inline text, or a file of
    the store."""

    text: bytes | None = None
    file_id: str | None = None


@dataclass(frozen=True)
class Test:
    stdin: Source
    expected: Source | None
    index: int = 0  # its place in the request's tests


@dataclass(frozen=True)
class TestLimits:
    time_ms: int  # CPU time of the whole test
    wall_time_ms: int
    memory: int  # bytes
    output: int  # bytes of stdout
    pids: int
    address_space: int = 0  # bytes, RLIMIT_AS of the submission's tests (DMOJ's and Codeforces' memory); 0 none


@dataclass(frozen=True)
class Program:
    """A checker or an interactor: its language, source and files, built once like a submission
    (and cached)."""

    role: str  # "checker" or "interactor": its field in the request
    slug: str
    files: tuple[tuple[str, Source], ...]  # its source as the language's judge file, then its `files`


@dataclass(frozen=True)
class JudgeRequest:
    slug: str
    files: tuple[tuple[str, Source], ...]  # (name in the judge dir, content): the judge file first
    tests: tuple[Test, ...]
    compare: str
    tolerance: Tolerance  # the float modes' numbers
    limits: TestLimits
    compile_timeout_ms: int
    stop_on_failure: bool
    ignore_case: bool = False  # compare ASCII letters folded (Kattis's default validator)
    checker: Program | None = None  # compare "checker" (with an interactor: it judges the interactor's record)
    interactor: Program | None = None  # it talks with the submission; compare "interactor" without a checker
    scoring: Scoring = field(default_factory=lambda: Scoring(points=()))  # points and groups, where given

    @property
    def file_ids(self) -> tuple[str, ...]:
        """The store's files the request names (its tests', then its `files` objects'), each once."""
        ids = [s.file_id for t in self.tests for s in (t.stdin, t.expected) if s is not None and s.file_id]
        return tuple(dict.fromkeys(ids + [file_id for file_id in self.named_files()]))

    def named_files(self) -> dict[str, str]:
        """The store's files of its `files` objects: id -> the first field that names it
        (`files.<name>`, `checker.files.<name>`, `interactor.files.<name>`), for errors."""
        named: dict[str, str] = {}
        for where, files in (("", self.files), *((f"{p.role}.", p.files) for p in (self.checker, self.interactor) if p)):
            for name, source in files:
                if source.file_id is not None:
                    named.setdefault(source.file_id, f"{where}files.{name}")
        return named
