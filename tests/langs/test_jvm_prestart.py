"""java and kotlin in prestarted slots: the workspace's `prestart` command starts the JVM and
warms the compiler on runner/warmup before the request, then compiles and runs check/ as `test`
does. Through the real API and sandbox, every answer here is compared with the same request's
answer from a server that does not prestart (RUN_PRESTART=false, the test command itself):
compile errors, exceptions, exit codes, stack overflow, out of memory, and a probe of what the
client harness can see (its class loader, the warm-up's classes, system properties, threads, the files
of /sandbox and /tmp, the environment). The prestarted side's runs are checked to be prestarted,
both with the warm-up finished (the JVM quiet) and with the go arriving while it runs."""

from __future__ import annotations

import difflib
import re
import time

import pytest

import langcase
from kilntest import Server

SLUGS = ("java", "kotlin")

# solution, client harness (None: the example's) per language and case
JAVA_SOLUTION = langcase.example("java", "Solution.java")
KOTLIN_SOLUTION = langcase.example("kotlin", "solution.kt")


def java_harness(body: str, imports: str = "") -> str:
    return f"package solution;\n\n{imports}public class Checker {{\n    public static void main(String[] args) throws Exception {{\n{body}    }}\n}}\n"


def kotlin_harness(body: str, imports: str = "") -> str:
    return f"package solution\n\n{imports}fun main() {{\n{body}}}\n"


JAVA_PROBE = java_harness(
    '        System.out.println("loader " + (Checker.class.getClassLoader() == ClassLoader.getSystemClassLoader()));\n'
    '        System.out.println("sum " + new Solution().solution(2, 3));\n'
    "        for (String name : new String[] {\"solution.Item\", \"solution.Checker\", \"kiln.Run\"}) {\n"
    "            try { Class.forName(name); System.out.println(\"class \" + name); } catch (ClassNotFoundException e) { System.out.println(\"no class \" + name); }\n"
    "        }\n"
    '        new TreeMap<>(System.getProperties()).forEach((k, v) -> System.out.println("property " + k + "=" + v));\n'
    '        new TreeMap<>(System.getenv()).forEach((k, v) -> System.out.println("env " + k + "=" + v));\n'
    '        Thread.getAllStackTraces().keySet().stream().map(t -> "thread " + t.getName() + " " + t.isDaemon()).sorted().forEach(System.out::println);\n'
    '        for (String dir : new String[] {"/tmp", "/sandbox", "/sandbox/check", "/sandbox/runner"}) {\n'
    "            String[] names = new File(dir).list();\n"
    "            Arrays.sort(names);\n"
    '            System.out.println("files " + dir + ": " + String.join(" ", names));\n'
    "        }\n",
    imports="import java.io.File;\nimport java.util.*;\n\n",
)
KOTLIN_PROBE = kotlin_harness(
    '    println("loader " + (Class.forName("solution.CheckerKt").classLoader === ClassLoader.getSystemClassLoader()))\n'
    '    println("sum " + solution(2, 3))\n'
    '    for (name in listOf("solution.Item", "solution.CheckerKt", "kiln.Run")) {\n'
    '        try { Class.forName(name); println("class $name") } catch (e: ClassNotFoundException) { println("no class $name") }\n'
    "    }\n"
    '    System.getProperties().entries.map { "property ${it.key}=${it.value}" }.sorted().forEach(::println)\n'
    '    System.getenv().entries.map { "env ${it.key}=${it.value}" }.sorted().forEach(::println)\n'
    '    Thread.getAllStackTraces().keys.map { "thread ${it.name} ${it.isDaemon}" }.sorted().forEach(::println)\n'
    '    for (dir in listOf("/tmp", "/sandbox", "/sandbox/check", "/sandbox/runner")) {\n'
    '        println("files $dir: " + File(dir).list()!!.sorted().joinToString(" "))\n'
    "    }\n",
    imports="import java.io.File\n\n",
)

CASES = {
    "java": {
        "a+b": (JAVA_SOLUTION, None),
        "probe": (JAVA_SOLUTION, JAVA_PROBE),
        "compile error in the solution": (JAVA_SOLUTION.replace("return a + b;", "return a + ;"), None),
        "compile error in the client harness": (JAVA_SOLUTION, java_harness("        int x = \"text\";\n        undefined();\n")),
        "a note from javac, exit 0": (
            JAVA_SOLUTION,
            java_harness('        java.util.List raw = new java.util.ArrayList();\n        raw.add("x");\n        System.out.println(raw + " ünï ✓");\n'),
        ),
        "an exception with a cause": (
            JAVA_SOLUTION,
            java_harness('        System.out.println("before");\n        throw new IllegalStateException("outer", new ArithmeticException("inner"));\n'),
        ),
        "exit status": (JAVA_SOLUTION, java_harness('        System.out.print("bye");\n        System.err.print("err");\n        System.exit(new Solution().solution(1, 2));\n')),
        "stack overflow": (
            JAVA_SOLUTION,
            "package solution;\n\npublic class Checker {\n    static int deep(int n) {\n        return deep(n + 1) + 1;\n    }\n\n"
            "    public static void main(String[] args) {\n        System.out.println(\"down\");\n        deep(0);\n    }\n}\n",
        ),
        "out of memory": (
            JAVA_SOLUTION,
            java_harness("        java.util.List<long[]> kept = new java.util.ArrayList<>();\n        while (true) {\n            kept.add(new long[1 << 24]);\n        }\n"),
        ),
    },
    "kotlin": {
        "a+b": (KOTLIN_SOLUTION, None),
        "probe": (KOTLIN_SOLUTION, KOTLIN_PROBE),
        "compile error in the solution": (KOTLIN_SOLUTION.replace("return a + b", "return a + undefinedName"), None),
        "compile error in the client harness": (KOTLIN_SOLUTION, kotlin_harness('    val x: Int = "text"\n    println(x)\n')),
        "an exception with a cause": (KOTLIN_SOLUTION, kotlin_harness('    println("before ünï ✓")\n    throw IllegalStateException("outer", ArithmeticException("inner"))\n')),
        "exit status": (
            KOTLIN_SOLUTION,
            kotlin_harness('    print("bye")\n    System.err.print("err")\n    exitProcess(solution(1, 2))\n', imports="import kotlin.system.exitProcess\n\n"),
        ),
        "stack overflow": (KOTLIN_SOLUTION, "package solution\n\nfun deep(n: Int): Int = deep(n + 1) + 1\n\nfun main() {\n    println(\"down\")\n    deep(0)\n}\n"),
        "out of memory": (KOTLIN_SOLUTION, kotlin_harness("    val kept = ArrayList<LongArray>()\n    while (true) {\n        kept.add(LongArray(1 shl 24))\n    }\n")),
    },
}


@pytest.fixture(scope="module")
def servers(request):
    """(prestarting server, plain server) of one language, two slots each."""
    slug = request.param
    reason = langcase.LANGS[slug].missing()
    if reason:
        pytest.skip(f"{slug}: {reason}")
    prestarting = Server({"RUN_LANGS": slug, "RUN_CONCURRENCY": "2"})
    plain = Server({"RUN_LANGS": slug, "RUN_CONCURRENCY": "2", "RUN_PRESTART": "false"})
    try:
        prestarting.wait_ready(120), plain.wait_ready(120)
        yield slug, prestarting, plain
    finally:
        prestarting.stop()
        plain.stop()


def payload(slug: str, solution: str, client_harness: str | None) -> dict:
    lang = langcase.LANGS[slug]
    return {"lang_slug": slug, "solution_text": solution, "checker_text": client_harness or lang.client_harness, "timeout": "60s"}


each_language = pytest.mark.parametrize("servers", SLUGS, indirect=True)


def answer(body: dict) -> tuple:
    """What reaches the user, the run's measurements aside; stdout's item times masked."""
    stdout = re.sub(r'"time":"\d+\.\d{7}"', '"time":"T"', body["stdout"])
    # jansi (the Kotlin compiler's) unpacks its library into /tmp under a random name, test's too
    stdout = re.sub(r"(libjansi-[^ ]*-)\d+(\.so)", r"\1N\2", stdout)
    return body["exit_code"], stdout, body["stderr"], body["stats"]["outcome"], body["stats"]["signal"]


def assert_same(got: tuple, expected: tuple) -> None:
    """got == expected, the lines that differ in the message."""
    differ = [line for line in difflib.unified_diff(str(expected[1]).splitlines(), str(got[1]).splitlines(), "plain", "prestarted", lineterm="", n=0)]
    assert got == expected, "\n".join(differ[:40]) + f"\nstderr: {expected[2][:2000]!r} vs {got[2][:2000]!r}"


def run_prestarted(server: Server, slug: str, solution: str, client_harness: str | None, *, settled: bool = True) -> dict:
    """A run in a slot prestarted for slug (settled: once its warm-up is over); a first run of the
    language, if need be, makes the slots' replacements prestarted."""
    deadline = time.monotonic() + 180
    while settled and not server.settled(slug):  # its command settled, as the zygote tells the front
        assert time.monotonic() < deadline, server.slots()
        if not server.warm_slots(slug):
            server.run_logged(**payload(slug, *CASES[slug]["a+b"]))
        time.sleep(0.1)
    while not settled and not server.warm_slots(slug):  # the last run's replacement, handed over
        assert time.monotonic() < deadline, server.slots()
        time.sleep(0.05)
    body, record = server.run_logged(**payload(slug, solution, client_harness))
    assert record["prestarted"] is True, record
    return body


@pytest.mark.parametrize(("servers", "case"), [(slug, case) for slug in SLUGS for case in CASES[slug]], indirect=["servers"])
def test_a_prestarted_run_answers_as_the_test_command(servers, case):
    slug, prestarting, plain = servers
    solution, client_harness = CASES[slug][case]
    expected = answer(plain.run_logged(**payload(slug, solution, client_harness))[0])
    got = answer(run_prestarted(prestarting, slug, solution, client_harness))
    assert_same(got, expected)


@each_language
def test_the_cases_are_what_they_say(servers):
    """The comparison above would pass for two equally broken servers: the plain side's answers
    are the ones expected of each case."""
    slug, _prestarting, plain = servers
    source = {"java": "check/Solution.java", "kotlin": "check/solution.kt"}[slug]
    runs = {case: plain.run_logged(**payload(slug, *CASES[slug][case]))[0] for case in ("compile error in the solution", "an exception with a cause", "stack overflow", "out of memory")}
    compile_error = runs["compile error in the solution"]
    assert (compile_error["exit_code"], compile_error["stdout"]) == (1, "") and source in compile_error["stderr"] and "error" in compile_error["stderr"]
    thrown = runs["an exception with a cause"]
    assert thrown["exit_code"] == 1 and thrown["stderr"].startswith('Exception in thread "main" java.lang.IllegalStateException: outer\n')
    assert "Caused by: java.lang.ArithmeticException: inner" in thrown["stderr"] and "kiln.Run" not in thrown["stderr"]
    overflow = runs["stack overflow"]
    assert (overflow["exit_code"], overflow["stdout"]) == (1, "down\n") and overflow["stderr"].startswith('Exception in thread "main" java.lang.StackOverflowError')
    oom = runs["out of memory"]
    assert oom["exit_code"] == 1 and oom["stderr"].startswith('Exception in thread "main" java.lang.OutOfMemoryError: Java heap space')


@each_language
def test_the_warm_up_leaves_nothing_the_run_sees(servers):
    """The probe's view, in a prestarted slot whose warm-up is over: the client harness is the class
    path's, none of the warm-up's classes (solution.Item) is found, no thread, file or system
    property of it is left, and the JVM's command is test's."""
    slug, prestarting, _plain = servers
    lines = answer(run_prestarted(prestarting, slug, *CASES[slug]["probe"]))[1].splitlines()
    assert lines[:3] == ["loader true", "adding 2 and 3", "sum 5"], lines[:3]
    assert "no class solution.Item" in lines
    assert not [line for line in lines if "kiln-warmup" in line or "keepalive" in line or "--prestarted" in line], lines
    files = {line.split(":")[0]: line.split(": ", 1)[1] if ": " in line else "" for line in lines if line.startswith("files ")}
    assert files["files /tmp"] in ("", "libjansi-1.9.25-release-852-N.so")
    assert "Item.class" not in files["files /sandbox/check"].split()
    assert "warmup" in files["files /sandbox/runner"].split()  # the probe sees what it should


@each_language
def test_a_go_during_the_warm_up_stops_it_and_runs_as_the_test_command(servers):
    """Runs one after another: each next one takes the last one's replacement while its JVM is
    still warming (the compiler's warm-up cancelled at its next step); same answers, nothing of
    the cancelled warm-up left in /tmp or check/."""
    slug, prestarting, plain = servers
    expected = answer(plain.run_logged(**payload(slug, *CASES[slug]["probe"]))[0])
    run_prestarted(prestarting, slug, *CASES[slug]["a+b"])
    for _ in range(2):
        got = answer(run_prestarted(prestarting, slug, *CASES[slug]["probe"], settled=False))
        assert_same(got, expected)


@each_language
def test_runs_are_counted_as_prestarted(servers):
    slug, prestarting, _plain = servers
    before = prestarting.metric(f'kiln_prestarted_runs_total{{lang="{slug}"}}')
    run_prestarted(prestarting, slug, *CASES[slug]["a+b"])
    assert prestarting.metric(f'kiln_prestarted_runs_total{{lang="{slug}"}}') >= before + 1
    assert {entry["slug"]: entry["prestart"] for entry in prestarting.client.get("/languages").json()["languages"]}[slug] is True

