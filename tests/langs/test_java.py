"""java through the real HTTP API and the real sandbox: langs/java compiles the client's
Checker.java with Solution.java (both `package solution`, gson on the class path) and runs
solution.Checker, javac and the checker in one JVM (kiln.Run); the checker prints the protocol."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from kilntest import REPO, Server

EXAMPLES = Path(__file__).parent / "examples" / "java"
CHECKER = (EXAMPLES / "Checker.java").read_text()
SOLUTION = (EXAMPLES / "Solution.java").read_text()
TIMEOUT = "30s"  # compiling: generous, these tests assert behaviour, not speed
SECONDS = re.compile(r"^\d+\.\d{7}$")


def _missing() -> str | None:
    for exe in ("javac", "java"):
        if shutil.which(exe, path="/usr/local/bin:/usr/bin:/bin") is None:
            return f"{exe} is not installed: run langs/java/install.sh"
    if not Path("/usr/share/java/gson.jar").is_file():
        return "gson is not installed: run langs/java/install.sh"
    if not (REPO / "langs" / "java" / "runner" / "run.jar").is_file():
        return "the workspace is not prepared (runner/run.jar): run langs/java/install.sh"
    return None


@pytest.fixture(scope="module")
def java():
    reason = _missing()
    if reason:
        pytest.skip(f"java: {reason}")
    server = Server({"RUN_LANGS": "java", "RUN_CONCURRENCY": "2"}).wait_ready(120)
    yield server
    server.stop()


def run(server, solution: str, checker: str = CHECKER, timeout: str = TIMEOUT) -> dict:
    response = server.run(lang_slug="java", solution_text=solution, checker_text=checker, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert body["exit_code"] == 0, body
    assert body["stats"]["outcome"] == "exited", body
    assert body["stdout"].count("\n") == 1, body
    return json.loads(body["stdout"])


def test_a_plus_b_with_the_example_checker(java):
    body = run(java, SOLUTION)
    assert body["stderr"] == ""
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 3, "adding 1 and 2\n"),
        ("result", 30, "adding 10 and 20\n"),
        ("result", 0, "adding -5 and 5\n"),
    ]
    assert all(SECONDS.match(i["time"]) for i in got), got
    assert [list(i) for i in got] == [["type", "value", "time", "output"]] * 3


def test_an_exception_in_one_call_is_that_calls_error(java):
    solution = SOLUTION.replace("return a + b;", 'if (a < 0) throw new IllegalArgumentException("negative: " + a);\n        return a + b;')
    got = items(run(java, solution))
    assert [i["type"] for i in got] == ["result", "result", "error"]
    assert got[2]["value"] == "java.lang.IllegalArgumentException: negative: -5"
    assert got[2]["output"] == "adding -5 and 5\n"


def test_output_is_utf8_whatever_the_locale(java):
    solution = SOLUTION.replace('"adding " + a + " and " + b', '"héllo ✓ " + a').replace("public int solution", "public Object solution").replace("return a + b;", 'return "привет " + (a + b);')
    got = items(run(java, solution))
    assert got[0]["value"] == "привет 3"
    assert got[0]["output"] == "héllo ✓ 1\n"


def test_a_compile_error_is_a_failed_run_with_javacs_message(java):
    body = run(java, SOLUTION.replace("return a + b;", 'return "not an int";'))
    assert body["exit_code"] == 1
    assert body["stdout"] == ""
    assert "check/Solution.java:" in body["stderr"]
    assert "error: incompatible types: String cannot be converted to int" in body["stderr"]


def test_a_checker_error_names_the_checker_file(java):
    body = run(java, SOLUTION, checker=CHECKER.replace("int[][] pairs", "int[][] pairs = 1; int[][] other"))
    assert body["exit_code"] == 1
    assert "check/Checker.java:" in body["stderr"] and "error:" in body["stderr"]


def test_an_uncaught_exception_ends_as_java_reports_it(java):
    checker = 'package solution;\n\npublic class Checker {\n    public static void main(String[] args) {\n        System.out.println("before");\n        throw new IllegalStateException("boom");\n    }\n}\n'
    body = run(java, SOLUTION, checker=checker)
    assert body["exit_code"] == 1
    assert body["stdout"] == "before\n"
    # the launcher's own frames are not in the trace
    assert body["stderr"] == 'Exception in thread "main" java.lang.IllegalStateException: boom\n\tat solution.Checker.main(Checker.java:6)\n'


def test_the_checkers_exit_status_is_the_runs(java):
    checker = "package solution;\n\npublic class Checker {\n    public static void main(String[] args) {\n        System.exit(new Solution().solution(1, 2));\n    }\n}\n"
    body = run(java, SOLUTION, checker=checker)
    assert body["exit_code"] == 3
    assert body["stdout"] == "adding 1 and 2\n"


def test_a_codebattle_style_checker_with_gson_compiles_unchanged(java):
    """The shape of checkers Codebattle generates: private fields serialised by gson, typed
    arguments (Map, List), one JSON object per line."""
    solution = (
        "package solution;\n\nimport java.util.*;\n\npublic class Solution {\n"
        "    public List<String> solution(Integer a, String b, Map<String, Integer> c, List<Double> d) {\n"
        "        System.out.println(b);\n"
        "        List<String> out = new ArrayList<>(c.keySet());\n"
        "        out.add(a + \":\" + d.size());\n"
        "        return out;\n    }\n}\n"
    )
    checker = (
        "package solution;\n\nimport java.io.*;\nimport java.util.*;\nimport static java.util.Map.entry;\n\n"
        "import com.google.gson.Gson;\n\npublic class Checker {\n"
        "    public static void main(String... _args) {\n"
        "        PrintStream _oldOut = System.out;\n"
        "        List<AssertResult> results_ = new ArrayList<AssertResult>();\n"
        "        Solution instance_ = new Solution();\n"
        "        ByteArrayOutputStream baos_ = new ByteArrayOutputStream();\n"
        "        System.setOut(new PrintStream(baos_));\n"
        "        Integer a1 = 7;\n        String b1 = \"bee\";\n"
        "        Map<String, Integer> c1 = new TreeMap<>(Map.ofEntries(entry(\"k\", 1), entry(\"j\", 2)));\n"
        "        List<Double> d1 = List.of(1.5, 2.5);\n"
        "        long start_ = System.nanoTime();\n"
        "        Object result1_ = instance_.solution(a1, b1, c1, d1);\n"
        "        String time_ = String.format(\"%.7f\", (System.nanoTime() - start_) / 1_000_000_000.0);\n"
        "        System.out.flush();\n"
        "        results_.add(new AssertResult(result1_, baos_.toString(), time_));\n"
        "        System.setOut(_oldOut);\n"
        "        results_.forEach(r -> System.out.println(r));\n    }\n}\n\n"
        "class AssertResult {\n    private String type;\n    private Object value;\n    private String output;\n    private String time;\n\n"
        "    public AssertResult(Object value, String output, String time) {\n"
        "        this.type = \"result\";\n        this.value = value;\n        this.output = output;\n        this.time = time;\n    }\n\n"
        "    @Override\n    public String toString() {\n        return new Gson().toJson(this);\n    }\n}\n"
    )
    body = run(java, solution, checker=checker)
    assert body["exit_code"] == 0, body
    got = json.loads(body["stdout"])
    assert got["type"] == "result"
    assert got["value"] == ["j", "k", "7:2"]
    assert got["output"] == "bee\n"


def test_an_infinite_loop_times_out(java):
    body = run(java, SOLUTION.replace("return a + b;", "while (true) { }"), timeout="2s")
    assert body["stats"]["outcome"] == "timed_out", body
    assert body["exit_code"] is None
