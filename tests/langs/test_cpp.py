"""cpp through the real HTTP API and the real sandbox: g++ compiles the client's checker.cpp (which
includes solution.cpp) with kiln's precompiled prelude (langs/cpp), and the checker prints the
harness protocol."""

from __future__ import annotations

import json

import pytest

import langcase
from kilntest import REPO

ARGUMENTS = [[1, 2], [3, 4], [-5, 5], [100, 23]]
SOLUTION = langcase.example("cpp", "solution.cpp")
CPP = langcase.Lang("cpp", checker=langcase.example("cpp", "checker.cpp"), asserts={"arguments": ARGUMENTS}, ready_timeout=120, one_line=False)
WORKSPACE = REPO / "langs" / "cpp"


@pytest.fixture(scope="module")
def server():
    yield from CPP.serve(langcase.missing(
        "run langs/install-toolchains.sh cpp",
        programs=("g++",),
        paths=(
            ("/usr/include/nlohmann/json.hpp", "nlohmann-json3-dev is not installed"),
            (WORKSPACE / "prelude" / "kiln.hpp.gch", "the prelude is not precompiled"),
            (WORKSPACE / ".installed", "the workspace is not marked prepared"),
        ),
    ))


def test_a_plus_b_with_the_example_checker(server):
    body = CPP.run(server, SOLUTION)
    assert body["stderr"] == ""  # no compiler chatter, no "PCH not used" warning
    langcase.assert_a_plus_b(CPP, body, ARGUMENTS, key_order=True)


def test_output_is_captured_per_call_at_the_descriptor(server):
    # iostream, C stdio and write(2) all land in the output of the call that printed them
    solution = (
        "#include <bits/stdc++.h>\n#include <unistd.h>\n\nusing namespace std;\n\n"
        "int solution(int a, int b) {\n"
        "  if (a == 3) cout << \"three \" << b;\n"
        "  if (a < 0) printf(\"negative %d\", a);\n"
        "  if (b == 23) write(1, \"raw\", 3);\n"
        "  return a * b;\n"
        "}\n"
    )
    got = CPP.items(CPP.run(server, solution))
    assert [(i["value"], i["output"]) for i in got] == [(2, ""), (12, "three 4"), (-25, "negative -5"), (2300, "raw")]


def test_an_exception_in_one_call_leaves_the_others(server):
    solution = (
        "#include <bits/stdc++.h>\n\nusing namespace std;\n\n"
        "int solution(int a, int b) {\n"
        "  cout << \"before\";\n"
        "  if (a == 3) throw runtime_error(\"three is not allowed\");\n"
        "  return a - b;\n"
        "}\n"
    )
    langcase.assert_only_the_failing_call_fails(CPP, CPP.run(server, solution), "three is not allowed")


def test_values_go_through_nlohmann_json(server):
    solution = (
        "#include <bits/stdc++.h>\n\nusing namespace std;\n\n"
        "map<string, vector<int>> solution(int a, int b) {\n"
        "  return {{\"range\", {a, b}}, {\"sum\", {a + b}}};\n"
        "}\n"
    )
    checker = (
        '#include "solution.cpp"\n\n'
        "int main() {\n"
        "    kiln::Report report;\n"
        "    for (const auto& args : kiln::arguments())\n"
        "        report.call([&] { return solution(args[0].get<int>(), args[1].get<int>()); });\n"
        "    report.call([] { return std::vector<std::string>{\"\\u00e9t\\u00e9\", \"x\"}; });\n"
        "    report.print();\n"
        "}\n"
    )
    got = CPP.items(CPP.run(server, solution, checker=checker, arguments=[[1, 2]]))
    assert [i["value"] for i in got] == [{"range": [1, 2], "sum": [3]}, ["été", "x"]]


def test_a_checker_in_codebattles_shape_compiles_unchanged(server):
    # The shape Codebattle generates: "../json.hpp" and "../fifo_map.hpp" from check/, its own
    # global fifo_map/json aliases, `using namespace std`, std::cout swapped for a stringstream.
    checker = (
        "#include <iostream>\n#include <string>\n#include <sstream>\n#include <vector>\n"
        "#include <chrono>\n#include <map>\n\n"
        '#include "../json.hpp"\n#include "../fifo_map.hpp"\n\n#include "solution.cpp"\n\n'
        "using namespace std;\n\n"
        "template<class K, class V, class dummy_compare, class A>\n"
        "using fifo_map = nlohmann::fifo_map<K, V, nlohmann::fifo_map_compare<K>, A>;\n"
        "using json = nlohmann::basic_json<fifo_map>;\n\n"
        "template <typename T>\n"
        "json Message(string type, T value, string output, double took) {\n"
        "  json j;\n  j[\"type\"] = type;\n  j[\"value\"] = value;\n  j[\"output\"] = output;\n  j[\"time\"] = took;\n  return j;\n"
        "}\n\n"
        "int main() {\n"
        "  std::stringstream buffer_;\n"
        "  std::streambuf* old_ = std::cout.rdbuf(buffer_.rdbuf());\n"
        "  vector<json> results_;\n"
        "  try {\n"
        "    int a1 = 1;\n    int b1 = 2;\n"
        "    auto start1_ = std::chrono::system_clock::now();\n"
        "    auto result1_ = solution(a1, b1);\n"
        "    auto took1_ = (std::chrono::system_clock::now() - start1_).count();\n"
        "    results_.push_back(Message(\"result\", result1_, buffer_.str(), took1_));\n"
        "    buffer_.str(\"\");\n"
        "    int a2 = 30;\n    int b2 = 12;\n"
        "    auto result2_ = solution(a2, b2);\n"
        "    results_.push_back(Message(\"result\", result2_, buffer_.str(), 0.5));\n"
        "  } catch (const std::exception& e) {\n"
        "    json error;\n    error[\"type\"] = \"error\";\n    error[\"value\"] = e.what();\n    results_.push_back(error);\n"
        "  }\n"
        "  std::cout.rdbuf(old_);\n"
        "  for (auto& r : results_) cout << r << \"\\n\";\n"
        "}\n"
    )
    body = CPP.run(server, SOLUTION, checker=checker)
    assert body["exit_code"] == 0, body
    lines = [json.loads(line) for line in body["stdout"].splitlines() if line]
    assert [list(line) for line in lines] == [["type", "value", "output", "time"]] * 2  # insertion order
    assert [(line["value"], line["output"]) for line in lines] == [(3, "adding 1 and 2\n"), (42, "adding 30 and 12\n")]


def test_two_runs_at_once_each_with_its_own_copy(server):
    langcase.assert_each_run_has_its_own_copy(CPP, server, SOLUTION)


def test_a_compile_error_is_the_compilers_message_and_status(server):
    body = CPP.run(server, "int solution(int a, int b) {\n  return a + ;\n}\n")
    langcase.assert_compile_error(body, "solution.cpp:2", "error")


def test_an_infinite_loop_times_out(server):
    solution = (
        "#include <bits/stdc++.h>\n\n"
        "int solution(int a, int b) {\n"
        "  std::fprintf(stderr, \"looping\\n\");\n"
        "  for (volatile unsigned long i = 0;; i = i + 1) {}\n"
        "}\n"
    )
    body = CPP.run(server, solution, timeout="15s")  # compiling takes part of it; the loop the rest
    langcase.assert_timed_out(body, "looping")
