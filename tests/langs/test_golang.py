"""golang through the real HTTP API and the real sandbox: go builds the client's checker.go with
solution.go (both package main, langs/golang, warm build cache), and the checker prints the
harness protocol."""

from __future__ import annotations

import pytest

import langcase
from kilntest import REPO

ARGUMENTS = [[1, 2], [3, 4], [-5, 5], [100, 23]]
SOLUTION = langcase.example("golang", "solution.go")
GO = langcase.Lang("golang", checker=langcase.example("golang", "checker.go"), asserts={"arguments": ARGUMENTS}, ready_timeout=120, one_line=False)
WORKSPACE = REPO / "langs" / "golang"


@pytest.fixture(scope="module")
def server():
    yield from GO.serve(langcase.missing(
        "run langs/install-toolchains.sh golang",
        programs=("go",),
        paths=(
            (WORKSPACE / ".cache" / "go-build" / "README", "the Go build cache is not warm"),
            (WORKSPACE / ".installed", "the workspace is not marked prepared"),
        ),
    ))


def test_a_plus_b_with_the_example_checker(server):
    body = GO.run(server, SOLUTION)
    assert body["stderr"] == ""
    langcase.assert_a_plus_b(GO, body, ARGUMENTS)


def test_output_is_captured_per_call(server):
    solution = (
        "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n"
        "func solution(a int64, b int64) int64 {\n"
        "\tif a == 3 {\n\t\tfmt.Print(\"three \", b)\n\t}\n"
        "\tif a < 0 {\n\t\tfmt.Fprintf(os.Stdout, \"negative %d\", a)\n\t}\n"
        "\treturn a * b\n"
        "}\n"
    )
    got = GO.items(GO.run(server, solution))
    assert [(i["value"], i["output"]) for i in got] == [(2, ""), (12, "three 4"), (-25, "negative -5"), (2300, "")]


def test_a_panic_in_one_call_leaves_the_others(server):
    solution = (
        "package main\n\nimport \"fmt\"\n\n"
        "func solution(a int64, b int64) int64 {\n"
        "\tfmt.Print(\"before\")\n"
        "\tif a == 3 {\n\t\tpanic(\"three is not allowed\")\n\t}\n"
        "\treturn a - b\n"
        "}\n"
    )
    langcase.assert_only_the_failing_call_fails(GO, GO.run(server, solution), "three is not allowed")


def test_the_standard_library_is_there(server):
    solution = (
        "package main\n\nimport (\n\t\"math/big\"\n\t\"sort\"\n\t\"strings\"\n)\n\n"
        "func solution(a int64, b int64) string {\n"
        "\twords := strings.Fields(\"b c a\")\n\tsort.Strings(words)\n"
        "\tn := new(big.Int).Exp(big.NewInt(a), big.NewInt(b), nil)\n"
        "\treturn strings.Join(words, \"\") + n.String()\n"
        "}\n"
    )
    got = GO.items(GO.run(server, solution, arguments=[[2, 100]]))
    assert got[0]["value"] == "abc" + str(2**100)


def test_a_checker_in_codebattles_shape_compiles_unchanged(server):
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
    body = GO.run(server, SOLUTION, checker=checker)
    got = GO.items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [("result", 3, "adding 1 and 2\n")]


def test_two_runs_at_once_each_with_its_own_copy(server):
    langcase.assert_each_run_has_its_own_copy(GO, server, SOLUTION)


def test_install_builds_with_the_tasks_environment():
    langcase.assert_install_builds_with_the_tasks_environment("golang", "go_env")


def test_a_compile_error_is_the_compilers_message_and_status(server):
    body = GO.run(server, "package main\n\nfunc solution(a int64, b int64) int64 {\n\treturn a +\n}\n")
    langcase.assert_compile_error(body, "solution.go:5", "syntax error")


def test_an_infinite_loop_times_out(server):
    solution = (
        "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\n"
        "func solution(a int64, b int64) int64 {\n"
        "\tfmt.Fprintln(os.Stderr, \"looping\")\n"
        "\tfor {\n\t\ta++\n\t}\n"
        "}\n"
    )
    body = GO.run(server, solution, timeout="5s")  # building takes part of it; the loop the rest
    langcase.assert_timed_out(body, "looping")
