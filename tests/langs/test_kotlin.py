"""kotlin through the real HTTP API and the real sandbox: langs/kotlin compiles the client's
checker.kt with solution.kt (both `package solution`, gson on the class path) and runs
solution.CheckerKt, the compiler and the checker in one JVM (kiln.Run); the checker prints the
protocol."""

from __future__ import annotations

import pytest

import langcase
from kilntest import REPO

SOLUTION = langcase.example("kotlin", "solution.kt")
# the Kotlin compiler takes seconds: runs get a minute
KOTLIN = langcase.Lang("kotlin", checker=langcase.example("kotlin", "checker.kt"), timeout="60s", ready_timeout=120)


@pytest.fixture(scope="module")
def server():
    yield from KOTLIN.serve(langcase.missing(
        "run langs/kotlin/install.sh",
        programs=("kotlinc", "java"),
        paths=(
            ("/usr/share/java/gson.jar", "gson is not installed"),
            (REPO / "langs" / "kotlin" / "runner" / "run.jar", "the workspace is not prepared (runner/run.jar)"),
        ),
    ))


def test_a_plus_b_with_the_example_checker(server):
    body = KOTLIN.run(server, SOLUTION)
    assert body["stderr"] == ""
    langcase.assert_a_plus_b(KOTLIN, body, [[1, 2], [10, 20], [-5, 5]], key_order=True)


def test_an_exception_in_one_call_is_that_calls_error(server):
    solution = SOLUTION.replace("return a + b", 'require(a >= 0) { "negative: $a" }\n    return a + b')
    langcase.assert_an_exception_is_that_calls_error(KOTLIN, KOTLIN.run(server, solution), "java.lang.IllegalArgumentException: negative: -5")


def test_output_is_utf8_whatever_the_locale(server):
    solution = 'package solution\n\nfun solution(a: Int, b: Int): String {\n    println("héllo ✓ $a")\n    return "привет ${a + b}"\n}\n'
    langcase.assert_utf8_output(KOTLIN, KOTLIN.run(server, solution))


def test_a_compile_error_is_a_failed_run_with_the_compilers_message(server):
    body = KOTLIN.run(server, SOLUTION.replace("return a + b", 'return "not an int"'))
    langcase.assert_compile_error(body, "check/solution.kt:", "error:", exit_code=1)


def test_an_uncaught_exception_ends_as_the_jvm_reports_it(server):
    checker = 'package solution\n\nfun main() {\n    println("before")\n    throw IllegalStateException("boom")\n}\n'
    body = KOTLIN.run(server, SOLUTION, checker=checker)
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    # the launcher's own frames are not in the trace
    assert body["stderr"] == (
        'Exception in thread "main" java.lang.IllegalStateException: boom\n'
        "\tat solution.CheckerKt.main(checker.kt:5)\n"
        "\tat solution.CheckerKt.main(checker.kt)\n"
    )


def test_the_checkers_exit_status_is_the_runs(server):
    checker = "package solution\n\nimport kotlin.system.exitProcess\n\nfun main() {\n    exitProcess(solution(1, 2))\n}\n"
    body = KOTLIN.run(server, SOLUTION, checker=checker)
    assert (body["exit_code"], body["stdout"]) == (3, "adding 1 and 2\n")


def test_a_codebattle_style_checker_with_gson_compiles_unchanged(server):
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
    body = KOTLIN.run(server, solution, checker=checker)
    langcase.assert_gson_report(body)


def test_an_infinite_loop_times_out(server):
    # long enough for the compiler to finish, so that it is the loop that times out
    body = KOTLIN.run(server, SOLUTION.replace("return a + b", "while (true) { }"), timeout="15s")
    langcase.assert_timed_out(body)
