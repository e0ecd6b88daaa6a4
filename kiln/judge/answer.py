"""A judged request's answer as data (DESIGN.md, "Judge API"): what kiln/judge/judge.py builds and
kiln/http/answers.py alone turns into the contract's JSON, in the contract's key order, for the
plain answer and the streamed lines alike; kiln/http/metrics.py counts its fields.

    JudgeAnswer
      compile   CompileResult     the build's (a cache hit repeats it, cached=True)
      tests     TestResult, ...   in the request's order; SK ones too
      scores    Scores | None      with points or groups: score, max_score, groups (GroupResult)
"""

from __future__ import annotations

from dataclasses import dataclass

from kiln.run.stats import Stats
from kiln.wire.protocol import RunResult

CUT = 4096  # bytes of a test's or the compile's stdout and stderr in the answer


@dataclass(frozen=True)
class CompileResult:
    exit_code: int | None
    stdout: str  # cut (CUT)
    stderr: str
    cached: bool
    stats: Stats

    @classmethod
    def of(cls, result: RunResult) -> CompileResult:
        return cls(result.exit_code, cut(result.stdout), cut(result.stderr), False, Stats.of(result))


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # not a pytest class where a test module imports it

    verdict: str
    exit_code: int | None
    stdout: str  # cut (CUT)
    stderr: str
    checker_message: str | None  # None where no checker or interactor ran
    stats: Stats | None  # None where nothing of its run is known (SK, a slot lost)
    partial: float | None = None  # the checker's points (testlib's quitp): never shown, `score` says it
    score: float | None = None  # with points or groups, what it scored, as shown (scoring.shown_test)

    @classmethod
    def of(cls, verdict: str, result: RunResult, message: str | None, partial: float | None) -> TestResult:
        return cls(verdict, result.exit_code, cut(result.stdout), cut(result.stderr), message, Stats.of(result), partial)

    @classmethod
    def not_run(cls, verdict: str = "SK") -> TestResult:
        """A test's answer when nothing of its run is known: SK, or IE when its slot was lost."""
        return cls(verdict, None, "", "", None, None)


@dataclass(frozen=True)
class GroupResult:
    name: str
    verdict: str
    score: float
    max_score: float


@dataclass(frozen=True)
class Scores:
    """The answer's scores with points or groups (kiln/judge/scoring.py `score_answer`)."""

    score: float
    max_score: float
    groups: tuple[GroupResult, ...] = ()  # with groups only


@dataclass(frozen=True)
class JudgeAnswer:
    verdict: str  # CE, else AC when every test is, else the first (by index) neither AC nor SK
    compile: CompileResult
    tests: tuple[TestResult, ...]
    wall_ms: float  # the whole request's, its build included
    scores: Scores | None = None

    @property
    def passed(self) -> int:
        return sum(test.verdict == "AC" for test in self.tests)

    @property
    def total(self) -> int:
        return len(self.tests)


def cut(data: bytes, limit: int = CUT) -> str:
    """The first `limit` bytes as text: invalid bytes replaced, never more than `limit` bytes of
    UTF-8, never a character cut in two."""
    encoded = data[: limit * 3].decode("utf-8", "replace").encode("utf-8")
    if len(encoded) <= limit:
        return encoded.decode("utf-8")
    end = limit
    while end > 0 and (encoded[end] & 0xC0) == 0x80:  # a continuation byte: back to the character's start
        end -= 1
    return encoded[:end].decode("utf-8")
