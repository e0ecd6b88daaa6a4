"""csharp through the real HTTP API and the real sandbox: langs/csharp compiles the client's
Checker.cs with Solution.cs (Mono's mcs, Newtonsoft.Json referenced) and runs the checker's entry
point, compiler and program in one Mono runtime (runner/run.exe); the checker prints the
protocol."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from kilntest import REPO, Server

EXAMPLES = Path(__file__).parent / "examples" / "csharp"
CHECKER = (EXAMPLES / "Checker.cs").read_text()
SOLUTION = (EXAMPLES / "Solution.cs").read_text()
TIMEOUT = "30s"  # compiling: generous, these tests assert behaviour, not speed
SECONDS = re.compile(r"^\d+\.\d{7}$")


def _missing() -> str | None:
    for exe in ("mcs", "mono"):
        if shutil.which(exe, path="/usr/local/bin:/usr/bin:/bin") is None:
            return f"{exe} is not installed: run langs/csharp/install.sh"
    if not Path("/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll").is_file():
        return "Newtonsoft.Json is not installed: run langs/csharp/install.sh"
    if not (REPO / "langs" / "csharp" / "runner" / "run.exe").is_file():
        return "the workspace is not prepared (runner/run.exe): run langs/csharp/install.sh"
    return None


@pytest.fixture(scope="module")
def csharp():
    reason = _missing()
    if reason:
        pytest.skip(f"csharp: {reason}")
    server = Server({"RUN_LANGS": "csharp", "RUN_CONCURRENCY": "2"}).wait_ready(120)
    yield server
    server.stop()


def run(server, solution: str, checker: str = CHECKER, timeout: str = TIMEOUT) -> dict:
    response = server.run(lang_slug="csharp", solution_text=solution, checker_text=checker, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert body["exit_code"] == 0, body
    assert body["stats"]["outcome"] == "exited", body
    assert body["stdout"].count("\n") == 1, body
    return json.loads(body["stdout"])


def test_a_plus_b_with_the_example_checker(csharp):
    body = run(csharp, SOLUTION)
    assert body["stderr"] == ""
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 3, "adding 1 and 2\n"),
        ("result", 30, "adding 10 and 20\n"),
        ("result", 0, "adding -5 and 5\n"),
    ]
    assert all(SECONDS.match(i["time"]) for i in got), got
    assert [list(i) for i in got] == [["type", "value", "time", "output"]] * 3


def test_an_exception_in_one_call_is_that_calls_error(csharp):
    solution = SOLUTION.replace("return a + b;", 'if (a < 0) throw new ArgumentException("negative: " + a);\n        return a + b;')
    got = items(run(csharp, solution))
    assert [i["type"] for i in got] == ["result", "result", "error"]
    assert got[2]["value"] == "negative: -5"
    assert got[2]["output"] == "adding -5 and 5\n"


def test_output_is_utf8_whatever_the_locale(csharp):
    solution = 'using System;\n\npublic class Solution\n{\n    public string solution(int a, int b)\n    {\n        Console.WriteLine("héllo ✓ " + a);\n        return "привет " + (a + b);\n    }\n}\n'
    got = items(run(csharp, solution))
    assert got[0]["value"] == "привет 3"
    assert got[0]["output"] == "héllo ✓ 1\n"


def test_linq_numerics_and_tuples_are_available(csharp):
    solution = (
        "using System;\nusing System.Linq;\nusing System.Numerics;\n\npublic class Solution\n{\n"
        "    public string solution(int a, int b)\n    {\n"
        "        var (x, y) = (a, b);\n"
        "        var sum = new[] { x, y }.Select(v => (long) v).Sum();\n"
        "        return (BigInteger.Pow(2, 70) + sum).ToString();\n    }\n}\n"
    )
    got = items(run(csharp, solution))
    assert got[0]["value"] == str(2**70 + 3)


def test_a_compile_error_is_a_failed_run_with_mcss_message(csharp):
    body = run(csharp, SOLUTION.replace("return a + b;", 'return "not an int";'))
    assert body["exit_code"] == 1
    assert body["stdout"] == ""
    assert "check/Solution.cs(" in body["stderr"]
    assert "error CS0029: Cannot implicitly convert type `string' to `int'" in body["stderr"]


def test_compiler_warnings_stay_off_stdout(csharp):
    solution = SOLUTION.replace("return a + b;", "int unused = 1;\n        return a + b;")
    body = run(csharp, solution)
    items(body)
    assert "warning CS0219" in body["stderr"]


def test_an_uncaught_exception_ends_as_mono_reports_it(csharp):
    checker = 'using System;\n\npublic class Checker\n{\n    public static void Main(string[] args)\n    {\n        Console.WriteLine("before");\n        throw new InvalidOperationException("boom");\n    }\n}\n'
    body = run(csharp, SOLUTION, checker=checker)
    assert body["exit_code"] == 1
    assert body["stdout"] == "before\n"
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
def test_the_checkers_exit_status_is_the_runs(csharp, main, status):
    body = run(csharp, SOLUTION, checker=f"using System;\n\npublic class Checker\n{{\n    {main}\n}}\n")
    assert body["exit_code"] == status, body


def test_an_infinite_loop_times_out(csharp):
    body = run(csharp, SOLUTION.replace("return a + b;", "while (true) { }"), timeout="2s")
    assert body["stats"]["outcome"] == "timed_out", body
    assert body["exit_code"] is None
