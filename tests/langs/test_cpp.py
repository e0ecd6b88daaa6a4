"""cpp through the real HTTP API and the real sandbox: g++ compiles the client's checker.cpp (which
includes solution.cpp) with kiln's precompiled prelude (langs/cpp), and the checker prints the
harness protocol."""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kilntest import REPO, Server

EXAMPLES = Path(__file__).parent / "examples" / "cpp"
CHECKER = (EXAMPLES / "checker.cpp").read_text()
SOLUTION = (EXAMPLES / "solution.cpp").read_text()
ARGUMENTS = [[1, 2], [3, 4], [-5, 5], [100, 23]]
TIMEOUT = "30s"  # compiling: generous, these tests assert behaviour, not speed
SECONDS = re.compile(r"^\d+\.\d{7}$")


def _missing() -> str | None:
    if shutil.which("g++", path="/usr/local/bin:/usr/bin:/bin") is None:
        return "g++ is not installed: run langs/install-toolchains.sh cpp"
    if not Path("/usr/include/nlohmann/json.hpp").is_file():
        return "nlohmann-json3-dev is not installed: run langs/install-toolchains.sh cpp"
    if not (REPO / "langs" / "cpp" / "prelude" / "kiln.hpp.gch").is_file():
        return "the prelude is not precompiled: run langs/install-toolchains.sh cpp"
    if not (REPO / "langs" / "cpp" / ".installed").is_file():
        return "the workspace is not marked prepared: run langs/install-toolchains.sh cpp"
    return None


@pytest.fixture(scope="module")
def cpp():
    reason = _missing()
    if reason:
        pytest.skip(f"cpp: {reason}")
    server = Server({"RUN_LANGS": "cpp", "RUN_CONCURRENCY": "2"}).wait_ready(120)
    yield server
    server.stop()


def run(server, solution: str, checker: str = CHECKER, arguments=ARGUMENTS, timeout: str = TIMEOUT) -> dict:
    response = server.run(lang_slug="cpp", solution_text=solution, checker_text=checker, asserts={"arguments": arguments}, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert body["exit_code"] == 0, body
    assert body["stats"]["outcome"] == "exited", body
    return json.loads(body["stdout"])


def test_a_plus_b_with_the_example_checker(cpp):
    body = run(cpp, SOLUTION)
    assert body["stderr"] == ""  # no compiler chatter, no "PCH not used" warning
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 3, "adding 1 and 2\n"),
        ("result", 7, "adding 3 and 4\n"),
        ("result", 0, "adding -5 and 5\n"),
        ("result", 123, "adding 100 and 23\n"),
    ]
    assert all(SECONDS.match(i["time"]) for i in got)
    assert list(got[0]) == ["type", "value", "time", "output"]


def test_output_is_captured_per_call_at_the_descriptor(cpp):
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
    got = items(run(cpp, solution))
    assert [(i["value"], i["output"]) for i in got] == [(2, ""), (12, "three 4"), (-25, "negative -5"), (2300, "raw")]


def test_an_exception_in_one_call_leaves_the_others(cpp):
    solution = (
        "#include <bits/stdc++.h>\n\nusing namespace std;\n\n"
        "int solution(int a, int b) {\n"
        "  cout << \"before\";\n"
        "  if (a == 3) throw runtime_error(\"three is not allowed\");\n"
        "  return a - b;\n"
        "}\n"
    )
    got = items(run(cpp, solution))
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", -1, "before"),
        ("error", "three is not allowed", "before"),
        ("result", -10, "before"),
        ("result", 77, "before"),
    ]


def test_values_go_through_nlohmann_json(cpp):
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
    got = items(run(cpp, solution, checker, arguments=[[1, 2]]))
    assert [i["value"] for i in got] == [{"range": [1, 2], "sum": [3]}, ["été", "x"]]


def test_a_checker_in_codebattles_shape_compiles_unchanged(cpp):
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
    body = run(cpp, SOLUTION, checker)
    assert body["exit_code"] == 0, body
    lines = [json.loads(line) for line in body["stdout"].splitlines() if line]
    assert [list(line) for line in lines] == [["type", "value", "output", "time"]] * 2  # insertion order
    assert [(line["value"], line["output"]) for line in lines] == [(3, "adding 1 and 2\n"), (42, "adding 30 and 12\n")]


def test_two_runs_at_once_each_with_its_own_copy(cpp):
    # two slots, two uids, one read-only workspace with its prebuilt caches underneath both
    with ThreadPoolExecutor(2) as pool:
        bodies = list(pool.map(lambda args: run(cpp, SOLUTION, arguments=args), [[[1, 2]], [[20, 22]]]))
    assert [[i["value"] for i in items(body)] for body in bodies] == [[3], [42]]


def test_a_compile_error_is_the_compilers_message_and_status(cpp):
    body = run(cpp, "int solution(int a, int b) {\n  return a + ;\n}\n")
    assert body["stats"]["outcome"] == "exited"
    assert body["exit_code"] not in (0, None)
    assert body["stdout"] == ""
    assert "solution.cpp:2" in body["stderr"] and "error" in body["stderr"]


def test_an_infinite_loop_times_out(cpp):
    solution = (
        "#include <bits/stdc++.h>\n\n"
        "int solution(int a, int b) {\n"
        "  std::fprintf(stderr, \"looping\\n\");\n"
        "  for (volatile unsigned long i = 0;; i = i + 1) {}\n"
        "}\n"
    )
    body = run(cpp, solution, timeout="15s")  # compiling takes part of it; the loop the rest
    assert body["stats"]["outcome"] == "timed_out"
    assert body["exit_code"] is None
    assert "looping" in body["stderr"]
