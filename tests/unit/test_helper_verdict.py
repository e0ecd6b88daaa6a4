"""A checker's or an interactor's verdict from its run (kiln/judge/judge.py helper_verdict), the one
mapping both use: testlib's exit codes (0 AC, 1 WA, 2 PE), anything else IE (DESIGN.md)."""

from __future__ import annotations

import pytest

from kiln.judge.judge import helper_verdict
from kiln.wire.protocol import OUTCOMES, RunResult


def ran(outcome: str, exit_code: int | None) -> RunResult:
    return RunResult(exit_code, outcome, 1.0, 1.0, 0, None, False, b"", b"")


@pytest.mark.parametrize(("exit_code", "verdict"), [(0, "AC"), (1, "WA"), (2, "PE"), (3, "IE"), (4, "IE"), (255, "IE"), (137, "IE")])
def test_exit_codes(exit_code, verdict):
    assert helper_verdict(ran("exited", exit_code)) == verdict


@pytest.mark.parametrize("outcome", [o for o in OUTCOMES if o != "exited"])
def test_any_other_end_is_ie(outcome):
    # killed, timed out, out of memory, lost: IE whatever exit code it carries
    assert helper_verdict(ran(outcome, 0)) == "IE"
    assert helper_verdict(ran(outcome, None)) == "IE"
