"""swift through the real HTTP API and the real sandbox: swiftc builds the client's
check/checker.swift with check/solution.swift (langs/swift), the checker prints the protocol.

Skipped where no Swift toolchain is installed: Debian 12 (glibc 2.36) has no package for it,
Debian 13's swiftlang needs glibc >= 2.38 (langs/swift/README.md)."""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kilntest import REPO, Server

EXAMPLES = Path(__file__).parent / "examples" / "swift"
CHECKER = (EXAMPLES / "checker.swift").read_text()
SOLUTION = (EXAMPLES / "solution.swift").read_text()
TIMEOUT = "60s"  # swiftc with Foundation: generous, these tests assert behaviour, not speed


def _missing() -> str | None:
    if shutil.which("swiftc", path="/usr/local/bin:/usr/bin:/bin") is None:
        glibc = os.confstr("CS_GNU_LIBC_VERSION") or "glibc unknown"
        return f"no Swift toolchain on this host ({glibc}; Debian 13's swiftlang needs glibc >= 2.38; langs/swift/README.md)"
    if not (REPO / "langs" / "swift" / ".kiln-installed").is_file():
        return "langs/swift/.module-cache is not filled: run langs/swift/install.sh"
    return None


@pytest.fixture(scope="module")
def swift():
    reason = _missing()
    if reason:
        pytest.skip(f"swift: {reason}")
    server = Server({"RUN_LANGS": "swift", "RUN_CONCURRENCY": "2"}).wait_ready()
    yield server
    server.stop()


def run(server, solution: str, checker: str = CHECKER, timeout: str = TIMEOUT) -> dict:
    response = server.run(lang_slug="swift", solution_text=solution, checker_text=checker, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert body["exit_code"] == 0, body
    return json.loads(body["stdout"])


def test_a_plus_b_with_the_example_checker(swift):
    body = run(swift, SOLUTION)
    assert body["stats"]["outcome"] == "exited"
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 3, ""),
        ("result", 7, ""),
        ("result", 3, ""),
        ("result", 0, ""),
    ]
    assert all(float(i["time"]) >= 0 and len(i["time"].split(".")[1]) == 7 for i in got)


def test_output_is_captured_per_call(swift):
    solution = 'func solution(_ a: Int, _ b: Int) -> Int {\n    print("adding \\(a) and \\(b) été")\n    return a + b\n}\n'
    got = items(run(swift, solution))
    assert [i["value"] for i in got] == [3, 7, 3, 0]
    assert [i["output"] for i in got] == [
        "adding 1 and 2 été\n",
        "adding 3 and 4 été\n",
        "adding 10 and -7 été\n",
        "adding 0 and 0 été\n",
    ]


def test_a_trap_in_a_call_ends_the_checker(swift):
    """Swift has no exceptions to catch: a runtime trap kills the checker (SIGILL or SIGTRAP)."""
    body = run(swift, 'func solution(_ a: Int, _ b: Int) -> Int {\n    if a == 3 { fatalError("three") }\n    return a + b\n}\n')
    assert body["exit_code"] not in (0, None)
    assert body["stats"]["outcome"] == "signaled"


def test_a_compile_error_is_a_failed_run_with_the_compiler_message(swift):
    body = run(swift, 'func solution(_ a: Int, _ b: Int) -> Int {\n    return a + "b"\n}\n')
    assert body["exit_code"] not in (0, None)
    assert body["stdout"] == ""
    assert "solution.swift:2:" in body["stderr"] and "error" in body["stderr"]


def test_an_infinite_loop_times_out(swift):
    body = run(swift, "func solution(_ a: Int, _ b: Int) -> Int {\n    while true {}\n}\n", timeout="5s")
    assert body["stats"]["outcome"] == "timed_out"
    assert body["exit_code"] is None


def test_two_runs_at_once_in_both_slots(swift):
    with ThreadPoolExecutor(2) as pool:
        bodies = list(pool.map(lambda _: run(swift, SOLUTION), range(4)))
    for body in bodies:
        assert [i["value"] for i in items(body)] == [3, 7, 3, 0]
