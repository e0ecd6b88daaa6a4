"""golang through the real HTTP API and the real sandbox: go builds the client's checker.go with
solution.go (both package main, langs/golang, warm build cache), and the client harness prints the
harness protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import langcase

pytestmark = langcase.only("golang")
GO = langcase.LANGS["golang"]


def test_the_standard_library_is_there(lang_server):
    solution = (
        "package main\n\nimport (\n\t\"math/big\"\n\t\"sort\"\n\t\"strings\"\n)\n\n"
        "func solution(a int64, b int64) string {\n"
        "\twords := strings.Fields(\"b c a\")\n\tsort.Strings(words)\n"
        "\tn := new(big.Int).Exp(big.NewInt(a), big.NewInt(b), nil)\n"
        "\treturn strings.Join(words, \"\") + n.String()\n"
        "}\n"
    )
    got = GO.items(GO.run(lang_server, solution, arguments=[[2, 100]]))
    assert got[0]["value"] == "abc" + str(2**100)


def test_a_client_harness_in_codebattles_shape_compiles_unchanged(lang_server):
    # The shape Codebattle generates: a result struct, os.Stdout swapped for a pipe around each
    # call, one json.Encoder for the whole array.
    client_harness = (
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
    body = GO.run(lang_server, GO.solution, client_harness=client_harness)
    got = GO.items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [("result", 3, "adding 1 and 2\n")]
