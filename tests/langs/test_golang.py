"""golang through the real HTTP API and the real sandbox: go builds the client's checker.go with
solution.go (both package main, langs/golang, warm build cache), and the checker prints the
harness protocol."""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kiln import langs
from kilntest import REPO, Server

EXAMPLES = Path(__file__).parent / "examples" / "golang"
CHECKER = (EXAMPLES / "checker.go").read_text()
SOLUTION = (EXAMPLES / "solution.go").read_text()
ARGUMENTS = [[1, 2], [3, 4], [-5, 5], [100, 23]]
TIMEOUT = "30s"  # compiling: generous, these tests assert behaviour, not speed
SECONDS = re.compile(r"^\d+\.\d{7}$")


def _missing() -> str | None:
    if shutil.which("go", path="/usr/local/bin:/usr/bin:/bin") is None:
        return "go is not installed: run langs/install-toolchains.sh golang"
    if not (REPO / "langs" / "golang" / ".cache" / "go-build" / "README").is_file():
        return "the Go build cache is not warm: run langs/install-toolchains.sh golang"
    if not (REPO / "langs" / "golang" / ".installed").is_file():
        return "the workspace is not marked prepared: run langs/install-toolchains.sh golang"
    return None


@pytest.fixture(scope="module")
def go():
    reason = _missing()
    if reason:
        pytest.skip(f"golang: {reason}")
    server = Server({"RUN_LANGS": "golang", "RUN_CONCURRENCY": "2"}).wait_ready(120)
    yield server
    server.stop()


def run(server, solution: str, checker: str = CHECKER, arguments=ARGUMENTS, timeout: str = TIMEOUT) -> dict:
    response = server.run(lang_slug="golang", solution_text=solution, checker_text=checker, asserts={"arguments": arguments}, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert body["exit_code"] == 0, body
    assert body["stats"]["outcome"] == "exited", body
    return json.loads(body["stdout"])


def test_a_plus_b_with_the_example_checker(go):
    body = run(go, SOLUTION)
    assert body["stderr"] == ""
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 3, "adding 1 and 2\n"),
        ("result", 7, "adding 3 and 4\n"),
        ("result", 0, "adding -5 and 5\n"),
        ("result", 123, "adding 100 and 23\n"),
    ]
    assert all(SECONDS.match(i["time"]) for i in got)


def test_output_is_captured_per_call(go):
    solution = (
        "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n"
        "func solution(a int64, b int64) int64 {\n"
        "\tif a == 3 {\n\t\tfmt.Print(\"three \", b)\n\t}\n"
        "\tif a < 0 {\n\t\tfmt.Fprintf(os.Stdout, \"negative %d\", a)\n\t}\n"
        "\treturn a * b\n"
        "}\n"
    )
    got = items(run(go, solution))
    assert [(i["value"], i["output"]) for i in got] == [(2, ""), (12, "three 4"), (-25, "negative -5"), (2300, "")]


def test_a_panic_in_one_call_leaves_the_others(go):
    solution = (
        "package main\n\nimport \"fmt\"\n\n"
        "func solution(a int64, b int64) int64 {\n"
        "\tfmt.Print(\"before\")\n"
        "\tif a == 3 {\n\t\tpanic(\"three is not allowed\")\n\t}\n"
        "\treturn a - b\n"
        "}\n"
    )
    got = items(run(go, solution))
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", -1, "before"),
        ("error", "three is not allowed", "before"),
        ("result", -10, "before"),
        ("result", 77, "before"),
    ]


def test_the_standard_library_is_there(go):
    solution = (
        "package main\n\nimport (\n\t\"math/big\"\n\t\"sort\"\n\t\"strings\"\n)\n\n"
        "func solution(a int64, b int64) string {\n"
        "\twords := strings.Fields(\"b c a\")\n\tsort.Strings(words)\n"
        "\tn := new(big.Int).Exp(big.NewInt(a), big.NewInt(b), nil)\n"
        "\treturn strings.Join(words, \"\") + n.String()\n"
        "}\n"
    )
    got = items(run(go, solution, arguments=[[2, 100]]))
    assert got[0]["value"] == "abc" + str(2**100)


def test_a_checker_in_codebattles_shape_compiles_unchanged(go):
    # The shape Codebattle generates: a result struct, os.Stdout swapped for a pipe around each
    # call, one json.Encoder for the whole array.
    checker = (
        "package main\n\nimport (\n\t\"encoding/json\"\n\t\"fmt\"\n\t\"io\"\n\t\"os\"\n\t\"time\"\n)\n\n"
        "type result struct {\n"
        "\tType   string `json:\"type\"`\n\tValue  any    `json:\"value\"`\n"
        "\tTime   string `json:\"time\"`\n\tOutput string `json:\"output,omitempty\"`\n}\n\n"
        "func main() {\n"
        "\tvar (\n\t\tstart_ time.Time\n\t\tresult_ result\n\t\treader_ *os.File\n\t\twriter_ *os.File\n\t\terr_ error\n"
        "\t\tstdout_ = os.Stdout\n\t\tencoder_ = json.NewEncoder(os.Stdout)\n\t\tresults_ = make([]result, 0, 2)\n\t)\n"
        "\tresult_.Type = \"result\"\n"
        "\tvar a1 int64 = 1\n\tvar b1 int64 = 2\n"
        "\treader_, writer_, err_ = os.Pipe()\n"
        "\tif err_ != nil {\n\t\tfmt.Fprintf(os.Stderr, \"pipe: %v\", err_)\n\t} else {\n\t\tos.Stdout = writer_\n\t}\n"
        "\tstart_ = time.Now()\n"
        "\tresult_.Value = solution(a1, b1)\n"
        "\tresult_.Time = fmt.Sprintf(\"%.7f\", time.Since(start_).Seconds())\n"
        "\twriter_.Close()\n"
        "\tout_, _ := io.ReadAll(reader_)\n\tresult_.Output = string(out_)\n\treader_.Close()\n"
        "\tos.Stdout = stdout_\n"
        "\tresults_ = append(results_, result_)\n"
        "\tif err_ = encoder_.Encode(results_); err_ != nil {\n\t\tfmt.Fprintln(stdout_, \"Marshaler error\")\n\t}\n"
        "}\n"
    )
    body = run(go, SOLUTION, checker)
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [("result", 3, "adding 1 and 2\n")]


def test_two_runs_at_once_each_with_its_own_copy(go):
    # two slots, two uids, one read-only workspace with its prebuilt caches underneath both
    with ThreadPoolExecutor(2) as pool:
        bodies = list(pool.map(lambda args: run(go, SOLUTION, arguments=args), [[[1, 2]], [[20, 22]]]))
    assert [[i["value"] for i in items(body)] for body in bodies] == [[3], [42]]


def test_install_builds_with_the_tasks_environment():
    # the prebuilt caches only help when install.sh built them with the environment the task gets
    script = (REPO / "langs" / "golang" / "install.sh").read_text()
    body = re.search(r"^go_env\(\) {\n(.*?)^}", script, re.S | re.M).group(1)
    built_with = dict(re.findall(r"\b([A-Z_]+)=(\S*)", body))
    assert built_with.pop("HOME") == "/sandbox"
    for key, value in langs.LANGUAGES["golang"].env:
        assert built_with.get(key) == value, key


def test_a_compile_error_is_the_compilers_message_and_status(go):
    body = run(go, "package main\n\nfunc solution(a int64, b int64) int64 {\n\treturn a +\n}\n")
    assert body["stats"]["outcome"] == "exited"
    assert body["exit_code"] not in (0, None)
    assert body["stdout"] == ""
    assert "solution.go:5" in body["stderr"] and "syntax error" in body["stderr"]


def test_an_infinite_loop_times_out(go):
    solution = (
        "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n"
        "func solution(a int64, b int64) int64 {\n"
        "\tfmt.Fprintln(os.Stderr, \"looping\")\n"
        "\tfor {\n\t\ta++\n\t}\n"
        "}\n"
    )
    body = run(go, solution, timeout="5s")  # building takes part of it; the loop the rest
    assert body["stats"]["outcome"] == "timed_out"
    assert body["exit_code"] is None
    assert "looping" in body["stderr"]
