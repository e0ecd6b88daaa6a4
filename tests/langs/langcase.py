"""What the tests in tests/langs/ share: each test_<slug>.py runs one language through the real HTTP
API and the real sandbox (a kiln server of its own, serving only that language).

A language's file says what is its own: what its tests need on the host (the skip reason when it
is missing), its example files and arguments, the snippets each check sends and what they print.
This module holds the rest:
- Lang: a language's payload defaults (checker, asserts, timeout), its server fixture's body
  (`serve`), `run` (POST /run, status 200) and `items` (the report of a run that exited 0);
- the checks written the same way for several languages (assert_*), and small builders
  (`additions`, `ran`).

Keep the top-level literals ARGUMENTS (checker languages that get asserts.json) and AB (harness
languages) in the language files: bench/langs.py reads them to post each example's a+b.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kiln import langs
from kilntest import REPO, Server

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
EXAMPLES = Path(__file__).parent / "examples"
SECONDS = re.compile(r"^\d+\.\d{7}$")  # an item's "time": seconds with 7 decimals
ITEM_KEYS = ["type", "value", "time", "output"]  # a result item's keys, in the protocol's order
RUNNER_PAYLOAD_ASSERTS = '{"a": 2, "b": 3}'  # the original runner's asserts.json: not the harness's shape


def example(slug: str, name: str) -> str:
    """tests/langs/examples/<slug>/<name>."""
    return (EXAMPLES / slug / name).read_text()


def missing(hint: str, programs: tuple[str, ...] = (), paths: tuple[tuple[Path | str, str], ...] = ()) -> str | None:
    """Why this host cannot run a language's tests (None when it can): the first of programs not on
    the sandbox's PATH ("<program> is not installed: <hint>"), else the first of paths (path, what
    its absence means) that does not exist ("<what>: <hint>")."""
    for name in programs:
        if shutil.which(name, path=SANDBOX_PATH) is None:
            return f"{name} is not installed: {hint}"
    for path, what in paths:
        if not Path(path).exists():
            return f"{what}: {hint}"
    return None


@dataclass(frozen=True)
class Lang:
    """A language under test and what its runs send unless a test says otherwise."""

    slug: str
    timeout: str = "30s"  # generous (compilers, JVMs): these tests assert behaviour, not speed
    checker: str | None = None  # checker_text: the example checker
    asserts: Any = None  # asserts: the example's argument lists (None: not sent)
    ready_timeout: float = 60  # for the server's slots to be warm
    one_line: bool = True  # items(): the report is a single line, "\n"-terminated
    timed: bool = False  # items(): every call's item has a 7-decimal "time"

    def serve(self, missing_reason: str | None) -> Iterator[Server]:
        """The body of a language's module-scoped server fixture (`yield from LANG.serve(reason)`,
        the reason from `missing`): skips every test of the module, saying why, when the host
        lacks what the language needs; else a server of this language only, two slots."""
        if missing_reason:
            pytest.skip(f"{self.slug}: {missing_reason}")
        server = Server({"RUN_LANGS": self.slug, "RUN_CONCURRENCY": "2"}).wait_ready(self.ready_timeout)
        yield server
        server.stop()

    def run(self, server: Server, solution: str, *, checker: str | None = None, arguments: list | None = None, **fields: Any) -> dict:
        """POST /run: solution, checker (by default the language's), asserts {"arguments": arguments}
        (by default the language's asserts) and other fields (one given as None is not sent).
        The response's body (status 200)."""
        payload = {"checker_text": checker or self.checker, "asserts": self.asserts, "timeout": self.timeout, **fields}
        if arguments is not None:
            payload["asserts"] = {"arguments": arguments}
        sent = {key: value for key, value in payload.items() if value is not None}
        response = server.run(lang_slug=self.slug, solution_text=solution, **sent)
        assert response.status_code == 200, response.text
        return response.json()

    def items(self, body: dict) -> list[dict]:
        """The protocol's items a run printed: it exited 0, its stdout is one JSON array."""
        assert (body["exit_code"], body["stats"]["outcome"]) == (0, "exited"), body
        if self.one_line:
            assert body["stdout"].endswith("\n") and body["stdout"].count("\n") == 1, body
        got = json.loads(body["stdout"])
        if self.timed:
            for item in got:
                if item["type"] != "output":
                    assert SECONDS.match(item["time"]), item
        return got


def ran(body: dict) -> tuple:
    """(exit_code, stdout, stderr) of a run."""
    return body["exit_code"], body["stdout"], body["stderr"]


def additions(pairs: list, output: str = "adding {a} and {b}\n") -> list[tuple]:
    """(type, value, output) of the example a+b for each pair: a result a + b, which printed
    output (formatted with a and b; "" for examples that print nothing)."""
    return [("result", a + b, output.format(a=a, b=b)) for a, b in pairs]


def assert_a_plus_b(lang: Lang, body: dict, pairs: list, output: str = "adding {a} and {b}\n", *, key_order: bool = False) -> None:
    """The example a+b's report: one result per pair (see additions), each timed to 7 decimals;
    key_order: each item's keys in the protocol's order."""
    got = lang.items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == additions(pairs, output)
    assert all(SECONDS.match(i["time"]) for i in got), got
    if key_order:
        assert [list(i) for i in got] == [ITEM_KEYS] * len(got)


def assert_compile_error(body: dict, *in_stderr: str, exit_code: int | None = None) -> None:
    """A compile error: the compiler's status (exit_code, or any failure when None), its message
    (each of in_stderr is part of stderr), nothing on stdout."""
    assert body["stats"]["outcome"] == "exited", body
    if exit_code is None:
        assert body["exit_code"] not in (0, None), body
    else:
        assert body["exit_code"] == exit_code, body
    assert body["stdout"] == "", body
    for text in in_stderr:
        assert text in body["stderr"], body["stderr"]


def assert_timed_out(body: dict, in_stderr: str = "") -> None:
    """The run was killed at its timeout (no exit status); in_stderr: what it printed before."""
    assert (body["stats"]["outcome"], body["exit_code"]) == ("timed_out", None), body
    assert in_stderr in body["stderr"]


# -- checker languages given asserts.json: cpp, golang, rust, zig ------------------------------


def assert_only_the_failing_call_fails(lang: Lang, body: dict, error: str) -> None:
    """A solution that prints "before", then fails with error for a == 3 and returns a - b
    otherwise, over [[1, 2], [3, 4], [-5, 5], [100, 23]]: the error is that call's alone."""
    assert [(i["type"], i["value"], i["output"]) for i in lang.items(body)] == [
        ("result", -1, "before"),
        ("error", error, "before"),
        ("result", -10, "before"),
        ("result", 77, "before"),
    ]


def assert_each_run_has_its_own_copy(lang: Lang, server: Server, solution: str) -> None:
    """Two runs of a+b at once: two slots, two uids, one read-only workspace with its prebuilt
    caches underneath both."""
    with ThreadPoolExecutor(2) as pool:
        bodies = list(pool.map(lambda args: lang.run(server, solution, arguments=args), [[[1, 2]], [[20, 22]]]))
    assert [[i["value"] for i in lang.items(body)] for body in bodies] == [[3], [42]]


def assert_install_builds_with_the_tasks_environment(slug: str, env_function: str) -> None:
    """The prebuilt caches only help when langs/<slug>/install.sh built them with the environment
    the task gets: the variables its shell function env_function sets are the language's."""
    script = (REPO / "langs" / slug / "install.sh").read_text()
    body = re.search(rf"^{env_function}\(\) {{\n(.*?)^}}", script, re.S | re.M).group(1)
    built_with = dict(re.findall(r"\b([A-Z_]+)=(\S*)", body))
    assert built_with.pop("HOME") == "/sandbox"
    for key, value in langs.LANGUAGES[slug].env:
        assert built_with.get(key) == value, key


# -- checker languages whose example checker has its own cases: dart, haskell, swift -----------


def assert_four_runs_in_two_slots(lang: Lang, server: Server, solution: str, values: list) -> None:
    """Four runs of solution at once in the two slots, each slot its own uid: each run reports values."""
    with ThreadPoolExecutor(2) as pool:
        bodies = list(pool.map(lambda _: lang.run(server, solution), range(4)))
    for body in bodies:
        assert [i["value"] for i in lang.items(body)] == values


# -- JVM and Mono languages: clojure, csharp, java, kotlin ------------------------------------


def assert_an_exception_is_that_calls_error(lang: Lang, body: dict, error: str) -> None:
    """The example a+b over (1, 2), (10, 20), (-5, 5), throwing for a < 0: the third call's error."""
    got = lang.items(body)
    assert [i["type"] for i in got] == ["result", "result", "error"]
    assert got[2]["value"] == error
    assert got[2]["output"] == "adding -5 and 5\n"


def assert_utf8_output(lang: Lang, body: dict) -> None:
    """A solution that prints "héllo ✓ <a>" and returns "привет <a + b>": both UTF-8, whatever the locale."""
    got = lang.items(body)
    assert got[0]["value"] == "привет 3"
    assert got[0]["output"] == "héllo ✓ 1\n"


def assert_gson_report(body: dict) -> None:
    """The report of a Codebattle-shaped checker (one gson object a line) around a solution that
    prints b and returns the sorted keys of c and "a:<len(d)>", called with 7, "bee", {k, j}, [1.5, 2.5]."""
    assert body["exit_code"] == 0, body
    got = json.loads(body["stdout"])
    assert got["type"] == "result"
    assert got["value"] == ["j", "k", "7:2"]
    assert got["output"] == "bee\n"


# -- harness languages (no checker): elixir, php, ruby, ts -----------------------------------


def assert_example_a_plus_b(lang: Lang, server: Server, example_name: str, ab: str) -> None:
    """The example solution (examples/<slug>/<example_name>) over ab's argument lists prints
    nothing on stderr and reports a + b for each (see additions)."""
    body = lang.run(server, example(lang.slug, example_name), asserts=ab)
    assert body["stderr"] == ""
    assert_a_plus_b(lang, body, json.loads(ab)["arguments"])


def assert_division_by_zero_fails_alone(lang: Lang, server: Server, solution: str, error: str) -> None:
    """solution(a, b), an integer a / b, over [[7, 2], [1, 0], [9, 3]]: only the second call fails."""
    got = lang.items(lang.run(server, solution, asserts='{"arguments": [[7, 2], [1, 0], [9, 3]]}'))
    assert [(i["type"], i["value"]) for i in got] == [("result", 3), ("error", error), ("result", 3)]


def assert_output_per_call(lang: Lang, server: Server, solution: str, also: str = "") -> None:
    """A solution that prints "loading" while loading and "call <n>" (then also) in solution(n),
    over [[1], [2]]: the loading output is an item of its own, first; each call has its own."""
    got = lang.items(lang.run(server, solution, asserts='{"arguments": [[1], [2]]}'))
    assert [(i["type"], i.get("output"), i["value"]) for i in got] == [
        ("output", None, "loading\n"),
        ("result", f"call 1\n{also}", 1),
        ("result", f"call 2\n{also}", 2),
    ]


def assert_runner_payload_runs(lang: Lang, server: Server, solution: str) -> None:
    """The original runner's payload, a plain program that reads asserts.json ({"a": 2, "b": 3})
    and prints a + b, runs as such."""
    assert ran(lang.run(server, solution, asserts=RUNNER_PAYLOAD_ASSERTS)) == (0, "5\n", "")


def assert_stdin_reaches_a_plain_program(lang: Lang, server: Server, solution: str) -> None:
    """solution prints its stdin upper-cased."""
    body = lang.run(server, solution, stdin="kiln\n")
    assert (body["exit_code"], body["stdout"]) == (0, "KILN\n")
