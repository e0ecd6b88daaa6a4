"""csharp through the real HTTP API and the real sandbox: langs/csharp compiles the client's
Checker.cs with Solution.cs (Mono's mcs, Newtonsoft.Json referenced) and runs the client harness's entry
point, compiler and program in one Mono runtime (runner/run.exe); the client harness prints the
protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import re
import time

import pytest

import langcase
from kilntest import wait_until

pytestmark = langcase.only("csharp")
CSHARP = langcase.LANGS["csharp"]


def test_linq_numerics_and_tuples_are_available(lang_server):
    solution = (
        "using System;\nusing System.Linq;\nusing System.Numerics;\n\npublic class Solution\n{\n"
        "    public string solution(int a, int b)\n    {\n"
        "        var (x, y) = (a, b);\n"
        "        var sum = new[] { x, y }.Select(v => (long) v).Sum();\n"
        "        return (BigInteger.Pow(2, 70) + sum).ToString();\n    }\n}\n"
    )
    got = CSHARP.items(CSHARP.run(lang_server, solution))
    assert got[0]["value"] == str(2**70 + 3)


def test_compiler_warnings_stay_off_stdout(lang_server):
    solution = CSHARP.solution.replace("return a + b;", "int unused = 1;\n        return a + b;")
    body = CSHARP.run(lang_server, solution)
    CSHARP.items(body)
    assert "warning CS0219" in body["stderr"]


def test_an_uncaught_exception_ends_as_mono_reports_it(lang_server):
    client_harness = 'using System;\n\npublic class Checker\n{\n    public static void Main(string[] args)\n    {\n        Console.WriteLine("before");\n        throw new InvalidOperationException("boom");\n    }\n}\n'
    body = CSHARP.run(lang_server, CSHARP.solution, client_harness=client_harness)
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert body["stderr"].startswith("Unhandled Exception:\nSystem.InvalidOperationException: boom\n  at Checker.Main (System.String[] args)")
    assert "[ERROR] FATAL UNHANDLED EXCEPTION: System.InvalidOperationException: boom" in body["stderr"]
    assert "System.Reflection" not in body["stderr"]  # the launcher's frames are not in the trace


@pytest.mark.parametrize(
    ("main", "status"),
    [
        ("public static int Main() { return new Solution().solution(1, 2); }", 3),
        ("public static void Main() { Environment.ExitCode = new Solution().solution(2, 2); }", 4),
        ("public static void Main() { Environment.Exit(5); }", 5),
    ],
)
def test_the_client_harness_exit_status_is_the_runs(lang_server, main, status):
    body = CSHARP.run(lang_server, CSHARP.solution, client_harness=f"using System;\n\npublic class Checker\n{{\n    {main}\n}}\n")
    assert body["exit_code"] == status, body


def run_prestarted(server, solution: str, client_harness: str | None = None) -> dict:
    """POST /run until a slot prestarted for csharp served it (the Makefile's `prestart`: Mono up,
    a warm-up compile and run done, waiting for its go; a slot is prestarted for a language once
    it was asked for): the answer."""
    payload = {"checker_text": client_harness or CSHARP.client_harness, "timeout": CSHARP.timeout}
    deadline = time.monotonic() + 60
    while True:
        body, record = server.run_logged(lang_slug="csharp", solution_text=solution, **payload)
        if record["prestarted"]:
            return body
        assert time.monotonic() < deadline, ("no run was served prestarted", server.slots(), server.logged("prestart failed"))
        wait_until(lambda: server.warm_slots("csharp"), timeout=10)
        time.sleep(0.5)  # its warm-up done: a run given to a loading slot is prestarted too, only slower


def test_a_prestarted_run_reports_a_compile_error_as_mcs_does(lang_server):
    solution = CSHARP.solution.replace("return a + b;", "return a + c;")
    body = run_prestarted(lang_server, solution)
    line = next(n for n, text in enumerate(solution.splitlines(), 1) if "return a + c;" in text)
    column = solution.splitlines()[line - 1].index("c;") + 1
    expected = f"check/Solution.cs({line},{column}): error CS0103: The name `c' does not exist in the current context\n"
    assert (body["exit_code"], body["stdout"], body["stderr"]) == (1, "", expected)


def test_a_prestarted_run_leaves_no_trace_of_its_warm_up(lang_server):
    # the warm-up's program is not left in /tmp (where Mono keeps only its own mono.<pid>, plain
    # slots too), its console output is not the run's, nor its exit code
    client_harness = (
        "using System;\nusing System.IO;\n\npublic class Checker\n{\n    public static int Main()\n    {\n"
        '        Console.WriteLine(string.Join(",", Directory.GetFileSystemEntries("/tmp")));\n'
        "        Console.WriteLine(Environment.ExitCode);\n"
        "        return new Solution().solution(2, 3);\n    }\n}\n"
    )
    body = run_prestarted(lang_server, CSHARP.solution, client_harness=client_harness)
    tmp, code, output = body["stdout"].split("\n", 2)
    assert all(re.fullmatch(r"/tmp/mono\.\d+", entry) for entry in tmp.split(",") if entry), tmp
    assert (body["exit_code"], code, output, body["stderr"]) == (5, "0", "adding 2 and 3\n", ""), body


def test_a_prestarted_run_reports_an_uncaught_exception_as_mono_does(lang_server):
    client_harness = 'using System;\n\npublic class Checker\n{\n    public static void Main(string[] args)\n    {\n        Console.WriteLine("before");\n        throw new InvalidOperationException("boom");\n    }\n}\n'
    body = run_prestarted(lang_server, CSHARP.solution, client_harness=client_harness)
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert body["stderr"].startswith("Unhandled Exception:\nSystem.InvalidOperationException: boom\n  at Checker.Main (System.String[] args)")
