"""The one place answers become JSON (DESIGN.md, "HTTP contract" and "Judge API"): /run's, and
/judge's plain answer and streamed lines (kiln/http/judge_stream.py) from the same functions.
Keys in the contract's order; optional keys (a test's and the answer's `score`, `max_score`,
`groups`) only where the request asked for points or groups, as an older client's answer had
none. Values as the core gave them (wall_ms and cpu_ms floats, scores integers when whole:
kiln/judge/scoring.py). tests/api/test_answer_shapes.py holds the shapes to the contract."""

from __future__ import annotations

from kiln.judge.answer import CompileResult, GroupResult, JudgeAnswer, TestResult
from kiln.run.stats import Stats
from kiln.wire.protocol import RunResult


def run_json(result: RunResult) -> dict:
    """/run's answer: the whole output (within RUN_OUTPUT_MAX), never cut."""
    return {"exit_code": result.exit_code, "stdout": result.stdout.decode("utf-8", "replace"), "stderr": result.stderr.decode("utf-8", "replace"), "stats": stats_json(Stats.of(result))}


def stats_json(stats: Stats | None) -> dict | None:
    if stats is None:
        return None
    return {"outcome": stats.outcome, "wall_ms": stats.wall_ms, "cpu_ms": stats.cpu_ms, "memory_peak_bytes": stats.memory_peak_bytes, "signal": stats.signal}


def compile_json(compiled: CompileResult) -> dict:
    return {"exit_code": compiled.exit_code, "stdout": compiled.stdout, "stderr": compiled.stderr, "cached": compiled.cached, "stats": stats_json(compiled.stats)}


def judged_test_json(test: TestResult) -> dict:
    shown = {"verdict": test.verdict, "exit_code": test.exit_code, "stdout": test.stdout, "stderr": test.stderr, "checker_message": test.checker_message, "stats": stats_json(test.stats)}
    if test.score is not None:
        shown["score"] = test.score
    return shown


def group_json(group: GroupResult) -> dict:
    return {"name": group.name, "verdict": group.verdict, "score": group.score, "max_score": group.max_score}


def judge_json(answer: JudgeAnswer) -> dict:
    """The whole answer; with points or groups, "score" and "max_score" after "total", and
    "groups" after "tests"."""
    scores = answer.scores
    shown: dict = {"verdict": answer.verdict, "passed": answer.passed, "total": answer.total}
    if scores is not None:
        shown.update(score=scores.score, max_score=scores.max_score)
    shown.update(compile=compile_json(answer.compile), tests=[judged_test_json(test) for test in answer.tests])
    if scores is not None and scores.groups:
        shown["groups"] = [group_json(group) for group in scores.groups]
    shown["stats"] = {"wall_ms": answer.wall_ms}
    return shown

