"""csharp through the real HTTP API and the real sandbox: langs/csharp compiles the client's
Checker.cs with Solution.cs (Mono's mcs, Newtonsoft.Json referenced) and runs the checker's entry
point, compiler and program in one Mono runtime (runner/run.exe); the checker prints the
protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import pytest

import langcase

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
    checker = 'using System;\n\npublic class Checker\n{\n    public static void Main(string[] args)\n    {\n        Console.WriteLine("before");\n        throw new InvalidOperationException("boom");\n    }\n}\n'
    body = CSHARP.run(lang_server, CSHARP.solution, checker=checker)
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
def test_the_checkers_exit_status_is_the_runs(lang_server, main, status):
    body = CSHARP.run(lang_server, CSHARP.solution, checker=f"using System;\n\npublic class Checker\n{{\n    {main}\n}}\n")
    assert body["exit_code"] == status, body
