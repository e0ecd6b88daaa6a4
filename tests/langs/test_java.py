"""java through the real HTTP API and the real sandbox: langs/java compiles the client's
Checker.java with Solution.java (both `package solution`, gson on the class path) and runs
solution.Checker, javac and the client harness in one JVM (kiln.Run); the client harness prints the protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import langcase

pytestmark = langcase.only("java")
JAVA = langcase.LANGS["java"]


def test_a_client_harness_error_names_its_file(lang_server):
    body = JAVA.run(lang_server, JAVA.solution, client_harness=JAVA.client_harness.replace("int[][] pairs", "int[][] pairs = 1; int[][] other"))
    assert body["exit_code"] == 1
    assert "check/Checker.java:" in body["stderr"] and "error:" in body["stderr"]


def test_an_uncaught_exception_ends_as_java_reports_it(lang_server):
    client_harness = 'package solution;\n\npublic class Checker {\n    public static void main(String[] args) {\n        System.out.println("before");\n        throw new IllegalStateException("boom");\n    }\n}\n'
    body = JAVA.run(lang_server, JAVA.solution, client_harness=client_harness)
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    # the launcher's own frames are not in the trace
    assert body["stderr"] == 'Exception in thread "main" java.lang.IllegalStateException: boom\n\tat solution.Checker.main(Checker.java:6)\n'


def test_the_client_harness_exit_status_is_the_runs(lang_server):
    client_harness = "package solution;\n\npublic class Checker {\n    public static void main(String[] args) {\n        System.exit(new Solution().solution(1, 2));\n    }\n}\n"
    body = JAVA.run(lang_server, JAVA.solution, client_harness=client_harness)
    assert (body["exit_code"], body["stdout"]) == (3, "adding 1 and 2\n")


def test_a_codebattle_style_client_harness_with_gson_compiles_unchanged(lang_server):
    """The shape of the client harnesses (checkers) Codebattle generates: private fields serialised by gson, typed
    arguments (Map, List), one JSON object per line."""
    solution = (
        "package solution;\n\nimport java.util.*;\n\npublic class Solution {\n"
        "    public List<String> solution(Integer a, String b, Map<String, Integer> c, List<Double> d) {\n"
        "        System.out.println(b);\n"
        "        List<String> out = new ArrayList<>(c.keySet());\n"
        "        out.add(a + \":\" + d.size());\n"
        "        return out;\n    }\n}\n"
    )
    client_harness = (
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
    body = JAVA.run(lang_server, solution, client_harness=client_harness)
    langcase.assert_gson_report(body)
