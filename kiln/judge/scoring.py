"""Points and groups (DESIGN.md, "Judge API, round 2": IOI subtasks, Polygon's groups): what a
test scores, what a group scores, which tests need not run, and the answer's score fields. Pure
functions over verdicts; kiln/judge/judge.py asks them while its tests run and at the end.

A test's full points are its `points`, 1 where it has none. It scores them when AC, nothing when
it fails, and the checker's score when the checker gave one (testlib's `quitp`: exit code 7, the
score on the first line of what it printed, after testlib's word "points"): PT between 0 and its
points. A group scores by its `scoring`: `all` its points when every test is AC; `min` its points
x the lowest of its tests' fractions; `sum` its tests' scores (its maximum: their points). A group
whose dependency did not pass, some test of it not AC, is skipped: its tests SK, its score 0. For a
group with points that is "scored less than its maximum"; a group of 0 points counts too, which is
how DMOJ's 0-point cases and Polygon's sample group stop what depends on them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from kiln.judge.answer import GroupResult, Scores, TestResult

POINTS_EXIT_CODE = 7  # testlib's _points
SCORINGS = ("all", "min", "sum")
_SCORE = re.compile(r"\s*(?:points\s+)?([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?:\s|$)")


@dataclass(frozen=True)
class Group:
    name: str
    tests: tuple[int, ...]  # indexes into the request's tests, ascending
    points: float
    scoring: str  # one of SCORINGS
    depends: tuple[str, ...]  # names of groups given before it


@dataclass(frozen=True)
class Scoring:
    """A request's points and groups; `scored` False: an old client's request, answered as before."""

    points: tuple[float | None, ...]  # per test, as given
    groups: tuple[Group, ...] = ()

    @property
    def scored(self) -> bool:
        return bool(self.groups) or any(p is not None for p in self.points)

    def full(self, index: int) -> float:
        given = self.points[index]
        return 1.0 if given is None else given

    def group_of(self, index: int) -> Group | None:
        return next((g for g in self.groups if index in g.tests), None)


def checker_score(message: str) -> float | None:
    """The score a checker gave with exit code 7: the number on the first line of what it printed
    (testlib's quitp writes "points <score> <message>"); None when there is none."""
    found = _SCORE.match(message.split("\n", 1)[0])
    if not found:
        return None
    value = float(found.group(1))
    return value if math.isfinite(value) else None


def partial_verdict(score: float, full: float) -> str:
    """A checker's partial score as a verdict: AC at the test's full points, WA at 0, else PT."""
    return "AC" if score >= full else "WA" if score <= 0 else "PT"


def test_score(test: TestResult, full: float) -> float:
    """What one test's answer scores (its checker's score when it gave one)."""
    if test.verdict == "AC":
        return full
    if test.verdict == "PT":
        return min(full, max(0.0, test.partial or 0.0))
    return 0.0


def not_to_run(scoring: Scoring, index: int, answers: list[TestResult | None], stop_on_failure: bool) -> bool:
    """Whether test `index` may be left SK now, from the answers known so far: its group skipped
    for a dependency that has failed (known at its first test answered not AC), or an earlier test
    of its `all` group (or, with stop_on_failure, of its group or of the tests outside every
    group) failed."""
    group = scoring.group_of(index)
    if group is not None:
        for name in group.depends:
            if any(answers[i] is not None and answers[i].verdict != "AC" for i in _named(scoring, name).tests):
                return True
    if group is None and not stop_on_failure:
        return False
    earlier = [i for i in (group.tests if group is not None else range(len(answers))) if i < index and (group is not None or scoring.group_of(i) is None)]
    failed = any(answer is not None and answer.verdict not in ("AC", "SK") for answer in (answers[i] for i in earlier))
    return failed and (stop_on_failure or group.scoring == "all")


def score_answer(scoring: Scoring, tests: list[TestResult]) -> tuple[Scores, list[TestResult]]:
    """The answer's scores (with groups, each group's) and the tests as shown, with theirs; the
    tests of a group skipped for its dependencies become SK, and so do those after the first
    failure (by index) of an `all` group: whether one had started when the failure was known is
    the scheduler's chance, and the answer is the same every time (DMOJ's batches short-circuit
    them). Such a test is shown as a test that did not run, whatever its run was (DESIGN.md: an
    SK test has no exit code, output or stats)."""
    tests = list(tests)
    for group in scoring.groups:  # in order: a group's dependencies are before it, final already
        if not all(_passed(_named(scoring, name), tests) for name in group.depends):
            skips = list(group.tests)
        else:
            failed = next((n for n, i in enumerate(group.tests) if tests[i].verdict not in ("AC", "SK")), None)
            skips = list(group.tests[failed + 1 :]) if group.scoring == "all" and failed is not None else []
        for i in skips:
            tests[i] = TestResult.not_run()
    total = max_total = 0.0
    group_answers = []
    for group in scoring.groups:
        score, maximum = _final(scoring, group, tests)
        verdicts = [tests[i].verdict for i in group.tests]
        verdict = next((v for v in verdicts if v not in ("AC", "SK")), "SK" if all(v == "SK" for v in verdicts) else "AC")
        group_answers.append(GroupResult(group.name, verdict, _round(score), _round(maximum)))
        total, max_total = total + score, max_total + maximum
    for i, test in enumerate(tests):
        if scoring.group_of(i) is None:
            total, max_total = total + test_score(test, scoring.full(i)), max_total + scoring.full(i)
    scores = Scores(_round(total), _round(max_total), tuple(group_answers))
    return scores, [shown_test(scoring, i, test) for i, test in enumerate(tests)]


def shown_test(scoring: Scoring, index: int, test: TestResult) -> TestResult:
    """A test as the answer (and a stream's test event) shows it: with points or groups, with its
    score (the checker's raw `partial` is never shown: the score says it)."""
    return replace(test, score=_round(test_score(test, scoring.full(index)))) if scoring.scored else test


def _named(scoring: Scoring, name: str) -> Group:
    return next(g for g in scoring.groups if g.name == name)


def _passed(group: Group, answers) -> bool:
    """Whether a group passed, as its dependents need it: every test AC."""
    return all(answers[i].verdict == "AC" for i in group.tests)


def _final(scoring: Scoring, group: Group, answers) -> tuple[float, float]:
    fractions = [test_score(answers[i], scoring.full(i)) / scoring.full(i) if scoring.full(i) > 0 else 1.0 for i in group.tests]
    if group.scoring == "sum":
        return sum(test_score(answers[i], scoring.full(i)) for i in group.tests), sum(scoring.full(i) for i in group.tests)
    if group.scoring == "min":
        return group.points * min(fractions, default=1.0), group.points
    return (group.points if all(answers[i].verdict == "AC" for i in group.tests) else 0.0), group.points


def _round(value: float) -> float | int:
    """A score as JSON shows it: a whole number as an integer, else rounded to 6 places."""
    value = round(value, 6)
    return int(value) if value == int(value) else value
