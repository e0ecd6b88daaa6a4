"""swift through the real HTTP API and the real sandbox: swiftc builds the client's
check/checker.swift with check/solution.swift (langs/swift), the checker prints the protocol.

Skipped where no Swift toolchain is installed: Debian 12 (glibc 2.36) has no package for it,
Debian 13's swiftlang needs glibc >= 2.38 (langs/swift/README.md)."""

from __future__ import annotations

import os
import shutil

import pytest

import langcase
from kilntest import REPO

SOLUTION = langcase.example("swift", "solution.swift")
# swiftc with Foundation: runs get a minute
SWIFT = langcase.Lang("swift", checker=langcase.example("swift", "checker.swift"), timeout="60s", one_line=False)
PAIRS = [[1, 2], [3, 4], [10, -7], [0, 0]]  # the example checker's


def _missing() -> str | None:
    if shutil.which("swiftc", path=langcase.SANDBOX_PATH) is None:
        glibc = os.confstr("CS_GNU_LIBC_VERSION") or "glibc unknown"
        return f"no Swift toolchain on this host ({glibc}; Debian 13's swiftlang needs glibc >= 2.38; langs/swift/README.md)"
    if not (REPO / "langs" / "swift" / ".kiln-installed").is_file():
        return "langs/swift/.module-cache is not filled: run langs/swift/install.sh"
    return None


@pytest.fixture(scope="module")
def server():
    yield from SWIFT.serve(_missing())


def test_a_plus_b_with_the_example_checker(server):
    langcase.assert_a_plus_b(SWIFT, SWIFT.run(server, SOLUTION), PAIRS, "")


def test_output_is_captured_per_call(server):
    solution = 'func solution(_ a: Int, _ b: Int) -> Int {\n    print("adding \\(a) and \\(b) été")\n    return a + b\n}\n'
    got = SWIFT.items(SWIFT.run(server, solution))
    assert [(i["type"], i["value"], i["output"]) for i in got] == langcase.additions(PAIRS, "adding {a} and {b} été\n")


def test_a_trap_in_a_call_ends_the_checker(server):
    """Swift has no exceptions to catch: a runtime trap kills the checker (SIGILL or SIGTRAP)."""
    body = SWIFT.run(server, 'func solution(_ a: Int, _ b: Int) -> Int {\n    if a == 3 { fatalError("three") }\n    return a + b\n}\n')
    assert body["exit_code"] not in (0, None)
    assert body["stats"]["outcome"] == "signaled"


def test_a_compile_error_is_a_failed_run_with_the_compiler_message(server):
    body = SWIFT.run(server, 'func solution(_ a: Int, _ b: Int) -> Int {\n    return a + "b"\n}\n')
    langcase.assert_compile_error(body, "solution.swift:2:", "error")


def test_an_infinite_loop_times_out(server):
    langcase.assert_timed_out(SWIFT.run(server, "func solution(_ a: Int, _ b: Int) -> Int {\n    while true {}\n}\n", timeout="5s"))


def test_two_runs_at_once_in_both_slots(server):
    langcase.assert_four_runs_in_two_slots(SWIFT, server, SOLUTION, [3, 7, 3, 0])
