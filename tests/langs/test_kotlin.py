"""kotlin through the real HTTP API and the real sandbox: langs/kotlin compiles the client's
checker.kt with solution.kt (both `package solution`, gson on the class path) and runs
solution.CheckerKt, the compiler and the client harness in one JVM (kiln.Run); the client harness prints the
protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import langcase

pytestmark = langcase.only("kotlin")
KOTLIN = langcase.LANGS["kotlin"]


def test_an_uncaught_exception_ends_as_the_jvm_reports_it(lang_server):
    client_harness = 'package solution\n\nfun main() {\n    println("before")\n    throw IllegalStateException("boom")\n}\n'
    body = KOTLIN.run(lang_server, KOTLIN.solution, client_harness=client_harness)
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    # the launcher's own frames are not in the trace
    assert body["stderr"] == (
        'Exception in thread "main" java.lang.IllegalStateException: boom\n'
        "\tat solution.CheckerKt.main(checker.kt:5)\n"
        "\tat solution.CheckerKt.main(checker.kt)\n"
    )


def test_the_client_harness_exit_status_is_the_runs(lang_server):
    client_harness = "package solution\n\nimport kotlin.system.exitProcess\n\nfun main() {\n    exitProcess(solution(1, 2))\n}\n"
    body = KOTLIN.run(lang_server, KOTLIN.solution, client_harness=client_harness)
    assert (body["exit_code"], body["stdout"]) == (3, "adding 1 and 2\n")


def test_a_codebattle_style_client_harness_with_gson_compiles_unchanged(lang_server):
    """The shape of the client harnesses (checkers) Codebattle generates: a data class serialised by gson, typed
    arguments, one JSON object per line."""
    solution = (
        "package solution\n\nimport kotlin.collections.*\n\n"
        "fun solution(a: Int, b: String, c: Map<String, Int>, d: List<Double>): List<String> {\n"
        "    println(b)\n    return c.keys.sorted() + \"$a:${d.size}\"\n}\n"
    )
    client_harness = (
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
    body = KOTLIN.run(lang_server, solution, client_harness=client_harness)
    langcase.assert_gson_report(body)
