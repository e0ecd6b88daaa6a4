"""The tests every language has, as tables: one row a language, what it sends and what it gets
back kept as data (`Case`), one test function a table. A language's own tests are in its
test_<slug>.py; what the languages are and how they are served, in langcase.py.

The tables (rows in alphabetical order; a language without a row does not have the test):
the example a+b; an infinite loop; an error in one call; each call's output; a compile error;
runs at once in both slots; UTF-8 output (JVM and Mono); the original runner's payload, stdin
(harness languages); the install's environment (golang, rust).

Over 400 lines: what makes it long is the tables' rows, each language's snippets, not logic."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import ANY

import pytest

from kiln import langs
from kilntest import REPO
from langcase import ITEM_KEYS, LANGS, SECONDS, Lang, example, ran


def rows(table: dict) -> pytest.MarkDecorator:
    """Run the test for each language of the table (test ids: test_x[<slug>])."""
    return pytest.mark.parametrize("slug", list(table), scope="session")


@dataclass(frozen=True)
class Case:
    """A language's row of a table: the solution it sends with `fields` (timeout, asserts,
    arguments...), and what comes back: `expect`, the report's items as (type, value, output)
    (ANY where the test does not look), and texts that are part of stderr."""

    solution: str
    fields: dict = field(default_factory=dict)
    expect: Any = None
    stderr: tuple[str, ...] = ()
    exit_code: int | None = None  # a compile error's status (None: any failure)

    def run(self, lang: Lang, server) -> dict:
        return lang.run(server, self.solution, **self.fields)


def case(solution: str, *, expect: Any = None, stderr: tuple[str, ...] | str = (), exit_code: int | None = None, **fields: Any) -> Case:
    return Case(solution, fields, expect, (stderr,) if isinstance(stderr, str) else stderr, exit_code)


class Containing:
    """Equal to any text that contains this one."""

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.text in other

    def __repr__(self) -> str:
        return f"<containing {self.text!r}>"


def arguments(slug: str) -> list:
    """The argument lists of examples/<slug>/asserts.json."""
    return json.loads(example(slug, "asserts.json"))["arguments"]


def harness_asserts(slug: str) -> str:
    """examples/<slug>/asserts.json as sent by the harness languages' a+b: the text itself."""
    return example(slug, "asserts.json").strip()


NO_ARGUMENTS = '{"arguments": [[]]}'  # one call of a solution that takes none


def additions(pairs: list, output: str = "adding {a} and {b}\n") -> list[tuple]:
    """(type, value, output) of the example a+b for each pair: a result a + b, which printed
    output (formatted with a and b; "" for examples that print nothing)."""
    return [("result", a + b, output.format(a=a, b=b)) for a, b in pairs]


# -- the example a+b ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sum:
    """The example a+b's report: one result per pair, a + b, whose output is `output` formatted
    with a and b ("" for examples that print nothing), timed to 7 decimals; key_order: each item's
    keys in the protocol's order; quiet: nothing on stderr (no compiler chatter, no warning)."""

    pairs: list
    output: str = "adding {a} and {b}\n"
    key_order: bool = False
    quiet: bool = True
    fields: dict = field(default_factory=dict)


JVM_PAIRS = [[1, 2], [10, 20], [-5, 5]]  # the java, kotlin and csharp example client harnesses'
OWN_PAIRS = [[1, 2], [3, 4], [10, -7], [0, 0]]  # the dart, haskell and swift example client harnesses'
A_PLUS_B = {
    "clojure": Sum(arguments("clojure"), key_order=True),
    "cpp": Sum(arguments("cpp"), key_order=True),  # quiet: no "PCH not used" warning either
    "csharp": Sum(JVM_PAIRS, key_order=True),
    "dart": Sum(OWN_PAIRS, "", quiet=False),
    "elixir": Sum(arguments("elixir"), fields={"asserts": harness_asserts("elixir")}),
    "golang": Sum(arguments("golang")),
    "haskell": Sum(OWN_PAIRS, ""),  # quiet: no linker warning either
    "java": Sum(JVM_PAIRS, key_order=True),
    "kotlin": Sum(JVM_PAIRS, key_order=True),
    "php": Sum(arguments("php"), fields={"asserts": harness_asserts("php")}),
    "ruby": Sum(arguments("ruby"), fields={"asserts": harness_asserts("ruby")}),
    "rust": Sum(arguments("rust")),  # quiet: dependencies prebuilt, no "Compiling serde ..."
    "swift": Sum(OWN_PAIRS, "", quiet=False),
    "ts": Sum(arguments("ts"), fields={"asserts": harness_asserts("ts")}),
    "zig": Sum(arguments("zig")),
}


@rows(A_PLUS_B)
def test_example_a_plus_b(lang, lang_server):
    row = A_PLUS_B[lang.slug]
    body = lang.run(lang_server, lang.solution, **row.fields)
    if row.quiet:
        assert body["stderr"] == ""
    got = lang.items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == additions(row.pairs, row.output)
    assert all(SECONDS.match(i["time"]) for i in got), got
    if row.key_order:
        assert [list(i) for i in got] == [ITEM_KEYS] * len(got)


# -- an infinite loop ---------------------------------------------------------------------------

LOOPS = {
    "clojure": case("(defn solution [a b]\n  (loop [] (recur)))\n", timeout="2s"),
    "cpp": case(
        "#include <bits/stdc++.h>\n\n"
        "int solution(int a, int b) {\n"
        "  std::fprintf(stderr, \"looping\\n\");\n"
        "  for (volatile unsigned long i = 0;; i = i + 1) {}\n"
        "}\n",
        timeout="15s",  # compiling takes part of it; the loop the rest
        stderr="looping",
    ),
    "csharp": case(LANGS["csharp"].solution.replace("return a + b;", "while (true) { }"), timeout="2s"),
    "dart": case("int solution(int a, int b) {\n  while (true) {}\n}\n", timeout="2s"),
    "elixir": case("defmodule Solution do\n  def solution, do: solution()\nend\n", asserts=NO_ARGUMENTS, timeout="2s"),
    "golang": case(
        "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n"
        "func solution(a int64, b int64) int64 {\n"
        "\tfmt.Fprintln(os.Stderr, \"looping\")\n"
        "\tfor {\n\t\ta++\n\t}\n"
        "}\n",
        timeout="5s",  # building takes part of it; the loop the rest
        stderr="looping",
    ),
    "haskell": case("module Solution where\n\nsolution :: Int -> Int -> Int\nsolution a _ = length (repeat a)\n", timeout="2s"),
    "java": case(LANGS["java"].solution.replace("return a + b;", "while (true) { }"), timeout="2s"),
    # long enough for the compiler to finish, so that it is the loop that times out
    "kotlin": case(LANGS["kotlin"].solution.replace("return a + b", "while (true) { }"), timeout="15s"),
    "php": case("<?php\nfunction solution() { while (true) {} }\n", asserts=NO_ARGUMENTS, timeout="2s"),
    "ruby": case("def solution\n  loop {}\nend\n", asserts=NO_ARGUMENTS, timeout="2s"),
    "rust": case(
        "pub fn solution(a: i64, b: i64) -> i64 {\n"
        "    eprintln!(\"looping\");\n"
        "    let mut n = a;\n"
        "    loop {\n        n = std::hint::black_box(n.wrapping_add(b));\n    }\n"
        "}\n",
        timeout="15s",  # building takes part of it; the loop the rest
        stderr="looping",
    ),
    "swift": case("func solution(_ a: Int, _ b: Int) -> Int {\n    while true {}\n}\n", timeout="5s"),
    "ts": case("export default (): never => {\n  for (;;) {}\n};\n", asserts=NO_ARGUMENTS, timeout="2s"),
    "zig": case(
        "const std = @import(\"std\");\n\n"
        "pub fn solution(a: i64, b: i64) i64 {\n"
        "    std.debug.print(\"looping\\n\", .{});\n"
        "    var n: i64 = a;\n"
        "    while (true) {\n        n +%= b;\n        std.mem.doNotOptimizeAway(n);\n    }\n"
        "}\n",
        timeout="15s",  # compiling takes part of it; the loop the rest
        stderr="looping",
    ),
}


@rows(LOOPS)
def test_an_infinite_loop_times_out(lang, lang_server):
    """Killed at its timeout (no exit status), after what it printed on stderr."""
    row = LOOPS[lang.slug]
    body = row.run(lang, lang_server)
    assert (body["stats"]["outcome"], body["exit_code"]) == ("timed_out", None), body
    for text in row.stderr:
        assert text in body["stderr"]


# -- an error in one call: that call's alone ------------------------------------------------------


def before_each(error: str) -> list:
    """A solution that prints "before", then fails with error for a == 3 and returns a - b
    otherwise, over the example's [[1, 2], [3, 4], [-5, 5], [100, 23]]."""
    return [("result", -1, "before"), ("error", error, "before"), ("result", -10, "before"), ("result", 77, "before")]


# a solution(a, b), an integer a / b, over [[7, 2], [1, 0], [9, 3]]: only the second call fails
DIVISIONS = {"asserts": '{"arguments": [[7, 2], [1, 0], [9, 3]]}'}


def divided(error: str) -> list:
    return [("result", 3, ANY), ("error", error, ANY), ("result", 3, ANY)]


def thrown_for_negative(error: str) -> list:
    """The example a+b over (1, 2), (10, 20), (-5, 5), throwing for a < 0: the third call's error."""
    return [("result", ANY, ANY), ("result", ANY, ANY), ("error", error, "adding -5 and 5\n")]


FAILING_CALLS = {
    "clojure": case(
        '(defn solution [a b]\n  (println "in" a)\n  (when (neg? a) (throw (ex-info "negative!" {:a a})))\n  (/ b a))\n',
        arguments=[[1, 2], [-5, 5], [0, 1], [2, 1]],
        expect=[
            ("result", 2, "in 1\n"),
            ("error", "negative!", "in -5\n"),
            ("error", "Divide by zero", "in 0\n"),
            ("result", 0.5, "in 2\n"),  # a ratio, as a JSON number
        ],
    ),
    "cpp": case(
        "#include <bits/stdc++.h>\n\nusing namespace std;\n\n"
        "int solution(int a, int b) {\n"
        "  cout << \"before\";\n"
        "  if (a == 3) throw runtime_error(\"three is not allowed\");\n"
        "  return a - b;\n"
        "}\n",
        expect=before_each("three is not allowed"),
    ),
    "csharp": case(
        LANGS["csharp"].solution.replace("return a + b;", 'if (a < 0) throw new ArgumentException("negative: " + a);\n        return a + b;'),
        expect=thrown_for_negative("negative: -5"),
    ),
    "dart": case(
        "int solution(int a, int b) {\n  if (a == 3) throw ArgumentError('three is not allowed');\n  return a - b;\n}\n",
        expect=[("result", -1, ANY), ("error", Containing("three is not allowed"), ANY), ("result", 17, ANY), ("result", 0, ANY)],
    ),
    "elixir": case(
        "defmodule Solution do\n  def solution(a, b), do: div(a, b)\nend\n",
        **DIVISIONS,
        expect=divided("ArithmeticError: bad argument in arithmetic expression"),
    ),
    "golang": case(
        "package main\n\nimport \"fmt\"\n\n"
        "func solution(a int64, b int64) int64 {\n"
        "\tfmt.Print(\"before\")\n"
        "\tif a == 3 {\n\t\tpanic(\"three is not allowed\")\n\t}\n"
        "\treturn a - b\n"
        "}\n",
        expect=before_each("three is not allowed"),
    ),
    "haskell": case(
        "module Solution where\n\nsolution :: Int -> Int -> Int\nsolution a b\n  | a == 3 = error \"three is not allowed\"\n  | otherwise = a `div` b\n",
        expect=[("result", 0, ANY), ("error", "three is not allowed", ANY), ("result", -2, ANY), ("error", "divide by zero", ANY)],
    ),
    "java": case(
        LANGS["java"].solution.replace("return a + b;", 'if (a < 0) throw new IllegalArgumentException("negative: " + a);\n        return a + b;'),
        expect=thrown_for_negative("java.lang.IllegalArgumentException: negative: -5"),
    ),
    "kotlin": case(
        LANGS["kotlin"].solution.replace("return a + b", 'require(a >= 0) { "negative: $a" }\n    return a + b'),
        expect=thrown_for_negative("java.lang.IllegalArgumentException: negative: -5"),
    ),
    "php": case("<?php\nfunction solution($a, $b) { return intdiv($a, $b); }\n", **DIVISIONS, expect=divided("DivisionByZeroError: Division by zero")),
    "ruby": case("def solution(a, b)\n  a / b\nend\n", **DIVISIONS, expect=divided("ZeroDivisionError: divided by 0")),
    "rust": case(
        "pub fn solution(a: i64, b: i64) -> i64 {\n"
        "    print!(\"before\");\n"
        "    if a == 3 {\n        panic!(\"three is not allowed\");\n    }\n"
        "    a - b\n"
        "}\n",
        expect=before_each("three is not allowed"),
        stderr="three is not allowed",  # the default panic hook's report
    ),
    "ts": case(
        "export default (a: number, b: number): number => {\n  if (b === 0) throw new RangeError('b is zero');\n  return Math.trunc(a / b);\n};\n",
        **DIVISIONS,
        expect=divided("b is zero"),
    ),
    "zig": case(
        "const std = @import(\"std\");\n\n"
        "pub fn solution(a: i64, b: i64) !i64 {\n"
        "    try std.fs.File.stdout().writeAll(\"before\");\n"
        "    if (a == 3) return error.ThreeIsNotAllowed;\n"
        "    return a - b;\n"
        "}\n",
        expect=before_each("ThreeIsNotAllowed"),
    ),
}


@rows(FAILING_CALLS)
def test_an_error_in_one_call_leaves_the_others(lang, lang_server):
    """(swift has no exceptions to catch: test_swift.py's trap ends the client harness.)"""
    row = FAILING_CALLS[lang.slug]
    body = row.run(lang, lang_server)
    assert [(i["type"], i["value"], i.get("output")) for i in lang.items(body)] == row.expect
    for text in row.stderr:
        assert text in body["stderr"]


# -- each call's output is that call's ------------------------------------------------------------

# a solution that prints "loading" while loading and "call <n>" (then `also`) in solution(n), over
# [[1], [2]]: the loading output is an item of its own, first; each call has its own
PER_CALL = {"asserts": '{"arguments": [[1], [2]]}'}


# the example a+b printing "adding <a> and <b> été" over the example client harness's pairs
ADDING_ETE = additions(OWN_PAIRS, "adding {a} and {b} été\n")


def loading_then_calls(also: str = "") -> list:
    return [("output", "loading\n", None), ("result", 1, f"call 1\n{also}"), ("result", 2, f"call 2\n{also}")]


PRINTING = {
    # iostream, C stdio and write(2) all land in the output of the call that printed them
    "cpp": case(
        "#include <bits/stdc++.h>\n#include <unistd.h>\n\nusing namespace std;\n\n"
        "int solution(int a, int b) {\n"
        "  if (a == 3) cout << \"three \" << b;\n"
        "  if (a < 0) printf(\"negative %d\", a);\n"
        "  if (b == 23) write(1, \"raw\", 3);\n"
        "  return a * b;\n"
        "}\n",
        expect=[(ANY, 2, ""), (ANY, 12, "three 4"), (ANY, -25, "negative -5"), (ANY, 2300, "raw")],
    ),
    "dart": case("int solution(int a, int b) {\n  print('adding $a and $b été');\n  return a + b;\n}\n", expect=ADDING_ETE),
    "elixir": case('IO.puts("loading")\ndefmodule Solution do\n  def solution(n) do\n    IO.puts("call #{n}")\n    n\n  end\nend\n', **PER_CALL, expect=loading_then_calls()),
    "golang": case(
        "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n"
        "func solution(a int64, b int64) int64 {\n"
        "\tif a == 3 {\n\t\tfmt.Print(\"three \", b)\n\t}\n"
        "\tif a < 0 {\n\t\tfmt.Fprintf(os.Stdout, \"negative %d\", a)\n\t}\n"
        "\treturn a * b\n"
        "}\n",
        expect=[(ANY, 2, ""), (ANY, 12, "three 4"), (ANY, -25, "negative -5"), (ANY, 2300, "")],
    ),
    "haskell": case(
        "module Solution where\n\n"
        "import System.IO.Unsafe (unsafePerformIO)\n\n"
        "{-# NOINLINE solution #-}\n"
        "solution :: Int -> Int -> Int\n"
        "solution a b = unsafePerformIO $ do\n"
        '  putStrLn ("adding " ++ show a ++ " and " ++ show b ++ " \\233t\\233")\n'
        "  pure (a + b)\n",
        expect=ADDING_ETE,
    ),
    "php": case(
        "<?php\necho \"loading\\n\";\nfunction solution($n) {\n    echo \"call $n\\n\";\n    fwrite(STDOUT, \"stdout\\n\");\n    system('echo child');\n    return $n;\n}\n",
        **PER_CALL,
        expect=loading_then_calls(also="stdout\nchild\n"),
    ),
    "ruby": case("puts 'loading'\ndef solution(n)\n  puts \"call #{n}\"\n  system('echo child')\n  n\nend\n", **PER_CALL, expect=loading_then_calls(also="child\n")),
    "rust": case(
        "use std::io::Write;\n\n"
        "pub fn solution(a: i64, b: i64) -> i64 {\n"
        "    if a == 3 {\n        print!(\"three {}\", b);\n    }\n"
        "    if a < 0 {\n        std::io::stdout().write_all(format!(\"negative {}\", a).as_bytes()).unwrap();\n    }\n"
        "    a * b\n"
        "}\n",
        expect=[(ANY, 2, ""), (ANY, 12, "three 4"), (ANY, -25, "negative -5"), (ANY, 2300, "")],
    ),
    "swift": case('func solution(_ a: Int, _ b: Int) -> Int {\n    print("adding \\(a) and \\(b) été")\n    return a + b\n}\n', expect=ADDING_ETE),
    "ts": case("console.log('loading');\nexport default (n: number): number => {\n  console.log(`call ${n}`);\n  return n;\n};\n", **PER_CALL, expect=loading_then_calls()),
    "zig": case(
        "const std = @import(\"std\");\n\n"
        "pub fn solution(a: i64, b: i64) i64 {\n"
        "    const out = std.fs.File.stdout();\n"
        "    if (a == 3) out.deprecatedWriter().print(\"three {d}\", .{b}) catch {};\n"
        "    if (a < 0) out.writeAll(\"negative\") catch {};\n"
        "    return a * b;\n"
        "}\n",
        expect=[(ANY, 2, ""), (ANY, 12, "three 4"), (ANY, -25, "negative"), (ANY, 2300, "")],
    ),
}


@rows(PRINTING)
def test_output_is_captured_per_call(lang, lang_server):
    """(clojure's: test_clojure.py, output while loading; csharp's, java's and kotlin's: UTF-8 below.)"""
    row = PRINTING[lang.slug]
    assert [(i["type"], i["value"], i.get("output")) for i in lang.items(row.run(lang, lang_server))] == row.expect


# -- a compile error ------------------------------------------------------------------------------

COMPILE_ERRORS = {
    "cpp": case("int solution(int a, int b) {\n  return a + ;\n}\n", stderr=("solution.cpp:2", "error")),
    "csharp": case(
        LANGS["csharp"].solution.replace("return a + b;", 'return "not an int";'),
        stderr=("check/Solution.cs(", "error CS0029: Cannot implicitly convert type `string' to `int'"),
        exit_code=1,
    ),
    "dart": case("int solution(int a, int b) {\n  return a + 'b';\n}\n", stderr=("solution.dart", "Error")),
    "golang": case("package main\n\nfunc solution(a int64, b int64) int64 {\n\treturn a +\n}\n", stderr=("solution.go:5", "syntax error")),
    "haskell": case("module Solution where\n\nsolution :: Int -> Int -> Int\nsolution a b = a + \"b\"\n", stderr=("Solution.hs:4:", "error")),
    "java": case(
        LANGS["java"].solution.replace("return a + b;", 'return "not an int";'),
        stderr=("check/Solution.java:", "error: incompatible types: String cannot be converted to int"),
        exit_code=1,
    ),
    "kotlin": case(LANGS["kotlin"].solution.replace("return a + b", 'return "not an int"'), stderr=("check/solution.kt:", "error:"), exit_code=1),
    "rust": case("pub fn solution(a: i64, b: i64) -> i64 {\n    a +\n}\n", stderr=("check/solution.rs", "error")),
    "swift": case('func solution(_ a: Int, _ b: Int) -> Int {\n    return a + "b"\n}\n', stderr=("solution.swift:2:", "error")),
    "ts": case("let a x = 1;\n", asserts=NO_ARGUMENTS, stderr=('[ERROR] Expected ";" but found "x"', "solution.js:1:6:"), exit_code=1),
    "zig": case("pub fn solution(a: i64, b: i64) i64 {\n    return a +;\n}\n", stderr=("solution.zig:2", "error")),
}


@rows(COMPILE_ERRORS)
def test_a_compile_error_is_the_compilers_message_and_status(lang, lang_server):
    """The compiler's status (exit_code, or any failure), its message (each of the row's texts is
    part of stderr), nothing on stdout."""
    row = COMPILE_ERRORS[lang.slug]
    body = row.run(lang, lang_server)
    assert body["stats"]["outcome"] == "exited", body
    if row.exit_code is None:
        assert body["exit_code"] not in (0, None), body
    else:
        assert body["exit_code"] == row.exit_code, body
    assert body["stdout"] == "", body
    for text in row.stderr:
        assert text in body["stderr"], body["stderr"]


# -- runs at once in both slots -------------------------------------------------------------------


@dataclass(frozen=True)
class AtOnce:
    """Runs of the example at once in the two slots (each slot its own uid): one a list of
    argument lists (None: the example's), and the values each reports."""

    arguments: list
    values: list


# two runs: two slots, two uids, one read-only workspace with its prebuilt caches underneath both
OWN_COPIES = AtOnce([[[1, 2]], [[20, 22]]], [[3], [42]])
# four runs: each slot runs as its own uid, the workspace must build for any of them
FOUR_RUNS = AtOnce([None] * 4, [[3, 7, 3, 0]] * 4)
AT_ONCE = {"cpp": OWN_COPIES, "dart": FOUR_RUNS, "golang": OWN_COPIES, "haskell": FOUR_RUNS, "rust": OWN_COPIES, "swift": FOUR_RUNS, "zig": OWN_COPIES}


@rows(AT_ONCE)
def test_runs_at_once_in_both_slots(lang, lang_server):
    row = AT_ONCE[lang.slug]
    with ThreadPoolExecutor(2) as pool:
        bodies = list(pool.map(lambda args: lang.run(lang_server, lang.solution, arguments=args), row.arguments))
    assert [[i["value"] for i in lang.items(body)] for body in bodies] == row.values


# -- UTF-8 output, whatever the locale: JVM and Mono languages --------------------------------------

# a solution that prints "héllo ✓ <a>" and returns "привет <a + b>"
UTF8 = {
    "csharp": 'using System;\n\npublic class Solution\n{\n    public string solution(int a, int b)\n    {\n        Console.WriteLine("héllo ✓ " + a);\n        return "привет " + (a + b);\n    }\n}\n',
    "java": LANGS["java"].solution.replace('"adding " + a + " and " + b', '"héllo ✓ " + a').replace("public int solution", "public Object solution").replace("return a + b;", 'return "привет " + (a + b);'),
    "kotlin": 'package solution\n\nfun solution(a: Int, b: Int): String {\n    println("héllo ✓ $a")\n    return "привет ${a + b}"\n}\n',
}


@rows(UTF8)
def test_output_is_utf8_whatever_the_locale(lang, lang_server):
    got = lang.items(lang.run(lang_server, UTF8[lang.slug]))
    assert got[0]["value"] == "привет 3"
    assert got[0]["output"] == "héllo ✓ 1\n"


# -- plain programs: harness languages (and clojure) ----------------------------------------------

# the original runner's payload: a plain program that reads asserts.json ({"a": 2, "b": 3}) and
# prints a + b
RUNNER_PAYLOADS = {
    "clojure": '(require \'[clojure.data.json :as json])\n(let [d (json/read-str (slurp "asserts.json"))]\n  (println (+ (d "a") (d "b"))))\n',
    "elixir": '[_, a, b] = Regex.run(~r/"a":\\s*(\\d+),\\s*"b":\\s*(\\d+)/, File.read!("asserts.json"))\nIO.puts(String.to_integer(a) + String.to_integer(b))\n',
    "php": "<?php\n$data = json_decode(file_get_contents('asserts.json'), true);\necho $data['a'] + $data['b'], \"\\n\";\n",
    "ruby": "require 'json'\ndata = JSON.parse(File.read('asserts.json'))\nputs data['a'] + data['b']\n",
    "ts": "import * as fs from 'fs';\nconst data: { a: number; b: number } = JSON.parse(fs.readFileSync('asserts.json', 'utf8'));\nconsole.log(data.a + data.b);\n",
}


@rows(RUNNER_PAYLOADS)
def test_the_original_runner_payload_runs_as_a_plain_program(lang, lang_server):
    assert ran(lang.run(lang_server, RUNNER_PAYLOADS[lang.slug], asserts='{"a": 2, "b": 3}')) == (0, "5\n", "")


# a plain program that prints its stdin upper-cased
UPPER_CASE = {
    "elixir": "IO.write(String.upcase(IO.read(:stdio, :eof)))\n",
    "php": "<?php\necho strtoupper(stream_get_contents(STDIN));\n",
    "ruby": "puts $stdin.read.upcase\n",
}


@rows(UPPER_CASE)
def test_stdin_reaches_a_plain_program(lang, lang_server):
    body = lang.run(lang_server, UPPER_CASE[lang.slug], stdin="kiln\n")
    assert (body["exit_code"], body["stdout"]) == (0, "KILN\n")


# -- the install's environment --------------------------------------------------------------------

# the shell function of langs/<slug>/install.sh that sets the build's environment
ENV_FUNCTIONS = {"golang": "go_env", "rust": "cargo_env"}


@rows(ENV_FUNCTIONS)
def test_install_builds_with_the_tasks_environment(lang):
    """The prebuilt caches only help when langs/<slug>/install.sh built them with the environment
    the task gets: the variables its env function sets are the language's. (No server.)"""
    script = (REPO / "langs" / lang.slug / "install.sh").read_text()
    body = re.search(rf"^{ENV_FUNCTIONS[lang.slug]}\(\) {{\n(.*?)^}}", script, re.S | re.M).group(1)
    built_with = dict(re.findall(r"\b([A-Z_]+)=(\S*)", body))
    assert built_with.pop("HOME") == "/sandbox"
    for key, value in langs.LANGUAGES[lang.slug].env:
        assert built_with.get(key) == value, key
