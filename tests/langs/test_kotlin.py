"""kotlin through the real HTTP API and the real sandbox: langs/kotlin compiles the client's
checker.kt with solution.kt (both `package solution`, gson on the class path) and runs
solution.CheckerKt, the compiler and the checker in one JVM (kiln.Run); the checker prints the
protocol."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from kilntest import REPO, Server

EXAMPLES = Path(__file__).parent / "examples" / "kotlin"
CHECKER = (EXAMPLES / "checker.kt").read_text()
SOLUTION = (EXAMPLES / "solution.kt").read_text()
TIMEOUT = "60s"  # the Kotlin compiler takes seconds: generous, these tests assert behaviour
SECONDS = re.compile(r"^\d+\.\d{7}$")


def _missing() -> str | None:
    for exe in ("kotlinc", "java"):
        if shutil.which(exe, path="/usr/local/bin:/usr/bin:/bin") is None:
            return f"{exe} is not installed: run langs/kotlin/install.sh"
    if not Path("/usr/share/java/gson.jar").is_file():
        return "gson is not installed: run langs/kotlin/install.sh"
    if not (REPO / "langs" / "kotlin" / "runner" / "run.jar").is_file():
        return "the workspace is not prepared (runner/run.jar): run langs/kotlin/install.sh"
    return None


@pytest.fixture(scope="module")
def kotlin():
    reason = _missing()
    if reason:
        pytest.skip(f"kotlin: {reason}")
    server = Server({"RUN_LANGS": "kotlin", "RUN_CONCURRENCY": "2"}).wait_ready(120)
    yield server
    server.stop()


def run(server, solution: str, checker: str = CHECKER, timeout: str = TIMEOUT) -> dict:
    response = server.run(lang_slug="kotlin", solution_text=solution, checker_text=checker, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert body["exit_code"] == 0, body
    assert body["stats"]["outcome"] == "exited", body
    assert body["stdout"].count("\n") == 1, body
    return json.loads(body["stdout"])


def test_a_plus_b_with_the_example_checker(kotlin):
    body = run(kotlin, SOLUTION)
    assert body["stderr"] == ""
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 3, "adding 1 and 2\n"),
        ("result", 30, "adding 10 and 20\n"),
        ("result", 0, "adding -5 and 5\n"),
    ]
    assert all(SECONDS.match(i["time"]) for i in got), got
    assert [list(i) for i in got] == [["type", "value", "time", "output"]] * 3


def test_an_exception_in_one_call_is_that_calls_error(kotlin):
    solution = SOLUTION.replace("return a + b", 'require(a >= 0) { "negative: $a" }\n    return a + b')
    got = items(run(kotlin, solution))
    assert [i["type"] for i in got] == ["result", "result", "error"]
    assert got[2]["value"] == "java.lang.IllegalArgumentException: negative: -5"
    assert got[2]["output"] == "adding -5 and 5\n"


def test_output_is_utf8_whatever_the_locale(kotlin):
    solution = 'package solution\n\nfun solution(a: Int, b: Int): String {\n    println("héllo ✓ $a")\n    return "привет ${a + b}"\n}\n'
    got = items(run(kotlin, solution))
    assert got[0]["value"] == "привет 3"
    assert got[0]["output"] == "héllo ✓ 1\n"


def test_a_compile_error_is_a_failed_run_with_the_compilers_message(kotlin):
    body = run(kotlin, SOLUTION.replace("return a + b", 'return "not an int"'))
    assert body["exit_code"] == 1
    assert body["stdout"] == ""
    assert "check/solution.kt:" in body["stderr"]
    assert "error:" in body["stderr"]


def test_an_uncaught_exception_ends_as_the_jvm_reports_it(kotlin):
    checker = 'package solution\n\nfun main() {\n    println("before")\n    throw IllegalStateException("boom")\n}\n'
    body = run(kotlin, SOLUTION, checker=checker)
    assert body["exit_code"] == 1
    assert body["stdout"] == "before\n"
    # the launcher's own frames are not in the trace
    assert body["stderr"] == (
        'Exception in thread "main" java.lang.IllegalStateException: boom\n'
        "\tat solution.CheckerKt.main(checker.kt:5)\n"
        "\tat solution.CheckerKt.main(checker.kt)\n"
    )


def test_the_checkers_exit_status_is_the_runs(kotlin):
    checker = "package solution\n\nimport kotlin.system.exitProcess\n\nfun main() {\n    exitProcess(solution(1, 2))\n}\n"
    body = run(kotlin, SOLUTION, checker=checker)
    assert body["exit_code"] == 3
    assert body["stdout"] == "adding 1 and 2\n"


def test_a_codebattle_style_checker_with_gson_compiles_unchanged(kotlin):
    """The shape of checkers Codebattle generates: a data class serialised by gson, typed
    arguments, one JSON object per line."""
    solution = (
        "package solution\n\nimport kotlin.collections.*\n\n"
        "fun solution(a: Int, b: String, c: Map<String, Int>, d: List<Double>): List<String> {\n"
        "    println(b)\n    return c.keys.sorted() + \"$a:${d.size}\"\n}\n"
    )
    checker = (
        "package solution\n\nimport kotlin.collections.*\nimport java.io.*\nimport java.util.*\n"
        "import com.google.gson.Gson;\n\n"
        "fun main(args: Array<String>) {\n"
        "  var oldOut_: PrintStream = System.out\n"
        "  var results_: ArrayList<AssertResult> = ArrayList<AssertResult>()\n"
        "  var baos_: ByteArrayOutputStream = ByteArrayOutputStream()\n"
        "  System.setOut(PrintStream(baos_))\n"
        "  var a1: Int = 7;\n  var b1: String = \"bee\";\n"
        "  var c1: Map<String, Int> = mapOf(\"k\" to 1, \"j\" to 2);\n  var d1: List<Double> = listOf(1.5, 2.5);\n"
        "  var start_ = System.nanoTime()\n"
        "  var result1_: Any = solution(a1, b1, c1, d1)\n"
        "  var time_ = String.format(\"%.7f\", (System.nanoTime() - start_) / 1_000_000_000.0)\n"
        "  System.out.flush()\n"
        "  results_.add(AssertResult(result1_, baos_.toString(), time_))\n"
        "  System.setOut(oldOut_)\n"
        "  results_.forEach { message -> println(message) }\n}\n\n"
        "data class AssertResult(val value: Any?, val output: String, val time: String) {\n"
        "    private val type = \"result\"\n"
        "    override fun toString(): String = Gson().toJson(this)\n}\n"
    )
    body = run(kotlin, solution, checker=checker)
    assert body["exit_code"] == 0, body
    got = json.loads(body["stdout"])
    assert got["type"] == "result"
    assert got["value"] == ["j", "k", "7:2"]
    assert got["output"] == "bee\n"


def test_an_infinite_loop_times_out(kotlin):
    # long enough for the compiler to finish, so that it is the loop that times out
    body = run(kotlin, SOLUTION.replace("return a + b", "while (true) { }"), timeout="15s")
    assert body["stats"]["outcome"] == "timed_out", body
    assert body["exit_code"] is None
