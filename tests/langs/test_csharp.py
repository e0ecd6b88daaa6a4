"""csharp through the real HTTP API and the real sandbox: langs/csharp compiles the client's
Checker.cs with Solution.cs (Mono's mcs, Newtonsoft.Json referenced) and runs the checker's entry
point, compiler and program in one Mono runtime (runner/run.exe); the checker prints the
protocol."""

from __future__ import annotations

import pytest

import langcase
from kilntest import REPO

SOLUTION = langcase.example("csharp", "Solution.cs")
CSHARP = langcase.Lang("csharp", checker=langcase.example("csharp", "Checker.cs"), ready_timeout=120)


@pytest.fixture(scope="module")
def server():
    yield from CSHARP.serve(langcase.missing(
        "run langs/csharp/install.sh",
        programs=("mcs", "mono"),
        paths=(
            ("/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll", "Newtonsoft.Json is not installed"),
            (REPO / "langs" / "csharp" / "runner" / "run.exe", "the workspace is not prepared (runner/run.exe)"),
        ),
    ))


def test_a_plus_b_with_the_example_checker(server):
    body = CSHARP.run(server, SOLUTION)
    assert body["stderr"] == ""
    langcase.assert_a_plus_b(CSHARP, body, [[1, 2], [10, 20], [-5, 5]], key_order=True)


def test_an_exception_in_one_call_is_that_calls_error(server):
    solution = SOLUTION.replace("return a + b;", 'if (a < 0) throw new ArgumentException("negative: " + a);\n        return a + b;')
    langcase.assert_an_exception_is_that_calls_error(CSHARP, CSHARP.run(server, solution), "negative: -5")


def test_output_is_utf8_whatever_the_locale(server):
    solution = 'using System;\n\npublic class Solution\n{\n    public string solution(int a, int b)\n    {\n        Console.WriteLine("héllo ✓ " + a);\n        return "привет " + (a + b);\n    }\n}\n'
    langcase.assert_utf8_output(CSHARP, CSHARP.run(server, solution))


def test_linq_numerics_and_tuples_are_available(server):
    solution = (
        "using System;\nusing System.Linq;\nusing System.Numerics;\n\npublic class Solution\n{\n"
        "    public string solution(int a, int b)\n    {\n"
        "        var (x, y) = (a, b);\n"
        "        var sum = new[] { x, y }.Select(v => (long) v).Sum();\n"
        "        return (BigInteger.Pow(2, 70) + sum).ToString();\n    }\n}\n"
    )
    got = CSHARP.items(CSHARP.run(server, solution))
    assert got[0]["value"] == str(2**70 + 3)


def test_a_compile_error_is_a_failed_run_with_mcss_message(server):
    body = CSHARP.run(server, SOLUTION.replace("return a + b;", 'return "not an int";'))
    langcase.assert_compile_error(body, "check/Solution.cs(", "error CS0029: Cannot implicitly convert type `string' to `int'", exit_code=1)


def test_compiler_warnings_stay_off_stdout(server):
    solution = SOLUTION.replace("return a + b;", "int unused = 1;\n        return a + b;")
    body = CSHARP.run(server, solution)
    CSHARP.items(body)
    assert "warning CS0219" in body["stderr"]


def test_an_uncaught_exception_ends_as_mono_reports_it(server):
    checker = 'using System;\n\npublic class Checker\n{\n    public static void Main(string[] args)\n    {\n        Console.WriteLine("before");\n        throw new InvalidOperationException("boom");\n    }\n}\n'
    body = CSHARP.run(server, SOLUTION, checker=checker)
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
def test_the_checkers_exit_status_is_the_runs(server, main, status):
    body = CSHARP.run(server, SOLUTION, checker=f"using System;\n\npublic class Checker\n{{\n    {main}\n}}\n")
    assert body["exit_code"] == status, body


def test_an_infinite_loop_times_out(server):
    langcase.assert_timed_out(CSHARP.run(server, SOLUTION.replace("return a + b;", "while (true) { }"), timeout="2s"))
