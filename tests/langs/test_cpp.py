"""cpp through the real HTTP API and the real sandbox: g++ compiles the client's checker.cpp (which
includes solution.cpp) with kiln's precompiled prelude (langs/cpp), and the client harness prints the
harness protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import json
import re

import langcase

pytestmark = langcase.only("cpp")
CPP = langcase.LANGS["cpp"]


def test_values_go_through_nlohmann_json(lang_server):
    solution = (
        "#include <bits/stdc++.h>\n\nusing namespace std;\n\n"
        "map<string, vector<int>> solution(int a, int b) {\n"
        "  return {{\"range\", {a, b}}, {\"sum\", {a + b}}};\n"
        "}\n"
    )
    client_harness = (
        '#include "solution.cpp"\n\n'
        "int main() {\n"
        "    kiln::Report report;\n"
        "    for (const auto& args : kiln::arguments())\n"
        "        report.call([&] { return solution(args[0].get<int>(), args[1].get<int>()); });\n"
        "    report.call([] { return std::vector<std::string>{\"\\u00e9t\\u00e9\", \"x\"}; });\n"
        "    report.print();\n"
        "}\n"
    )
    got = CPP.items(CPP.run(lang_server, solution, client_harness=client_harness, arguments=[[1, 2]]))
    assert [i["value"] for i in got] == [{"range": [1, 2], "sum": [3]}, ["été", "x"]]


def test_a_client_harness_in_codebattles_shape_compiles_unchanged(lang_server):
    # The shape Codebattle generates: "../json.hpp" and "../fifo_map.hpp" from check/, its own
    # global fifo_map/json aliases, `using namespace std`, std::cout swapped for a stringstream.
    client_harness = (
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
    body = CPP.run(lang_server, CPP.solution, client_harness=client_harness)
    assert body["exit_code"] == 0, body
    lines = [json.loads(line) for line in body["stdout"].splitlines() if line]
    assert [list(line) for line in lines] == [["type", "value", "output", "time"]] * 2  # insertion order
    assert [(line["value"], line["output"]) for line in lines] == [(3, "adding 1 and 2\n"), (42, "adding 30 and 12\n")]


def test_the_json_literals_work_from_the_library(lang_server):
    # prelude/nlohmann-json.hpp declares them, libkiln.a defines them as nlohmann's header does
    solution = (
        "using namespace nlohmann::literals;\n\n"
        "int solution(int a, int b) {\n"
        '  auto doc = R"({"a": [1, 2]})"_json;\n'
        '  return a + b + doc["/a/1"_json_pointer].get<int>();\n'
        "}\n"
    )
    got = CPP.items(CPP.run(lang_server, solution, arguments=[[1, 2]]))
    assert got[0]["value"] == 5


def test_an_error_inside_nlohmann_json_quotes_its_header_as_debian_ships_it(lang_server):
    # the prelude's copy of json.hpp keeps the header's path and line numbers (#line) and every
    # line of kiln.hpp keeps its number: g++'s message is what it was with <nlohmann/json.hpp>
    solution = "int solution(int a, int b) {\n  kiln::json j = a;\n  std::thread t = j.get<std::thread>();\n  return a + b;\n}\n"
    body = CPP.run(lang_server, solution)
    assert (body["exit_code"], body["stdout"]) == (1, ""), body
    assert body["stderr"].startswith("In file included from check/checker.cpp:7:\ncheck/solution.cpp: In function ‘int solution(int, int)’:\ncheck/solution.cpp:3:37: error: no matching function for call to")
    assert "\nIn file included from prelude/kiln.hpp:28:\n/usr/include/nlohmann/json.hpp:1731:10: note: candidate:" in body["stderr"]
    assert "\n 1731 |     auto get() const noexcept(\n" in body["stderr"]


def test_a_link_error_is_lds_message_and_status(lang_server):
    # linker/ld links with mold and, when that fails, runs ld.bfd itself: the message is ld's
    solution = "int helper(int);\n\nint solution(int a, int b) {\n  return helper(a) + b;\n}\n"
    body = CPP.run(lang_server, solution)
    assert (body["exit_code"], body["stdout"]) == (1, ""), body
    assert re.fullmatch(
        r"/usr/bin/ld: /tmp/cc\w+\.o: in function `solution\(int, int\)':\n"
        r"checker\.cpp:\(\.text\+0x\w+\): undefined reference to `helper\(int\)'\n"
        r"collect2: error: ld returned 1 exit status\n",
        body["stderr"],
    ), body["stderr"]


def test_nlohmann_json_members_come_from_the_library_as_they_were(lang_server):
    # nlohmann::json's and ordered_json's members are libkiln.a's (extern template): same
    # values, same exceptions with the same words and ids, insertion order kept
    solution = (
        "std::string solution(int a, int b) {\n"
        '  nlohmann::ordered_json o = nlohmann::ordered_json::parse(R"({"b": 1, "a": [true, null, 1.5]})");\n'
        '  nlohmann::json j = {{"y", {a, b}}};\n'
        '  o["c"] = nlohmann::ordered_json::parse(j.dump());\n'
        "  std::string out = o.dump();\n"
        '  try { o.at("zzz"); } catch (const nlohmann::json::exception& e) { out += std::string(" ") + e.what() + " " + std::to_string(e.id); }\n'
        '  try { j.at("y").at(9); } catch (const std::exception& e) { out += std::string(" ") + e.what(); }\n'
        "  return out;\n"
        "}\n"
    )
    got = CPP.items(CPP.run(lang_server, solution, arguments=[[1, 2]]))
    assert got[0]["value"] == (
        '{"b":1,"a":[true,null,1.5],"c":{"y":[1,2]}}'
        " [json.exception.out_of_range.403] key 'zzz' not found 403"
        " [json.exception.out_of_range.401] array index 9 is out of range"
    )
