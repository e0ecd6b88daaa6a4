"""An interactive test's verdict by who ended first (kiln/judge/judge.py interactive_verdict): the
rule on the two results' stamps alone, ties and missing stamps included (tests/api/
test_judge_who_ended_first.py runs it through a real server)."""

from __future__ import annotations

import pytest

from kiln.judge.judge import interactive_verdict
from kiln.judge import request
from kiln.wire.protocol import RunResult

LIMITS = request.TestLimits(time_ms=1000, wall_time_ms=2000, memory=64 << 20, output=1 << 20, pids=64)


def ran(outcome: str, exit_code: int | None, ended_ms: float, cpu_ms: float = 1.0) -> RunResult:
    return RunResult(exit_code, outcome, 1.0, cpu_ms, 0, None, False, b"", b"", ended_ms=ended_ms)


@pytest.mark.parametrize(
    ("submission", "interactor", "verdict"),
    [
        (ran("exited", 1, 20.0), ran("exited", 1, 10.0), "WA"),  # it failed on the closed pipe after the WA
        (ran("signaled", 141, 20.0), ran("exited", 2, 10.0), "PE"),  # SIGPIPE after the PE
        (ran("timed_out", None, 2000.0, cpu_ms=5.0), ran("exited", 1, 10.0), "WA"),  # stopped by kiln after the WA
        (ran("exited", 0, 20.0, cpu_ms=1500.0), ran("exited", 1, 10.0), "WA"),  # its CPU past the limit, after the WA
        (ran("exited", 1, 10.0), ran("exited", 1, 20.0), "RE"),  # it ended first: its own verdict
        (ran("timed_out", None, 10.0), ran("exited", 1, 20.0), "TLE"),  # its time ran out first
        (ran("exited", 1, 10.0), ran("exited", 1, 10.0), "RE"),  # a tie is no "first"
        (ran("exited", 1, 20.0), ran("exited", 1, 0.0), "RE"),  # no stamp: no "first"
        (ran("exited", 1, 20.0), ran("exited", 0, 10.0), "RE"),  # an AC first hides nothing
        (ran("exited", 1, 20.0), ran("exited", 3, 10.0), "RE"),  # nor does an IE first
        (ran("infrastructure_failure", None, 20.0), ran("exited", 1, 10.0), "IE"),  # kiln's failure stands
        (ran("exited", 0, 20.0), ran("exited", 1, 10.0), "WA"),
        (ran("exited", 0, 10.0), ran("exited", 0, 20.0), "AC"),
    ],
)
def test_who_ended_first(submission, interactor, verdict):
    assert interactive_verdict(submission, interactor, LIMITS) == verdict
