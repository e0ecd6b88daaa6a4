"""Output printed while a harness loads the solution reaches stdout however the load ends: the
harness holds it for its report's "output" item, and a load ended abruptly (the runtime's own
immediate exit, a kill, the timeout, an OOM) never reaches the report. Through the real API, per
harness language (python, js and ts, ruby, php here; clojure and elixir in tests/langs, their servers
being slow to start): the solution prints "loading", then its load ends one of these ways with
asserts.json in harness shape, and the client's stdout is "loading\\n". (How: kiln/native/kiln.h
HELD_STDOUT.) Checker languages too, where the load is the solution's static initialisation and
nothing holds its output but the runtime's stdout buffer (C++: langs/cpp/prelude's
HoldLoadOutput)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kiln.runtime import workspace_problem
from kilntest import Server

HARNESS = {"arguments": [[1]]}

# a global whose initialiser prints without a flush (as most do: "\\n", not std::endl), then ends
# its load the way given
CPP_LOAD = (
    "#include <bits/stdc++.h>\n#include <signal.h>\n#include <unistd.h>\n"
    "static int loaded = [] {{ std::cout << \"loading\\n\"; {} return 0; }}();\n"
    "int solution(int n) {{ return n; }}\n"
)
# the checker languages' checker: it calls solution(n) for each argument list, in kiln's protocol
CHECKERS = {
    "cpp": (
        '#include "solution.cpp"\n'
        "int main() {\n"
        "    kiln::Report report;\n"
        "    for (const auto& args : kiln::arguments()) report.call([&] { return solution(args[0].get<int>()); });\n"
        "    report.print();\n"
        "}\n"
    ),
}

# slug -> way -> (solution, the outcome, the exit code); each prints "loading\n" first, and
# defines `solution`, which is never called
WAYS = {
    "python": {
        "exit": ("print('loading')\nimport os\nos._exit(3)\ndef solution(n):\n    return n\n", "exited", 3),
        "kill": ("print('loading')\nimport os\nos.kill(os.getpid(), 9)\ndef solution(n):\n    return n\n", "signaled", 137),
        "timeout": ("print('loading')\nwhile True:\n    pass\ndef solution(n):\n    return n\n", "timed_out", None),
        "oom": ("print('loading')\nx = b'x' * (400 << 20)\ndef solution(n):\n    return n\n", "out_of_memory", 137),
    },
    "js": {
        "exit": ("console.log('loading');\nprocess.reallyExit(3);\nmodule.exports = (n) => n;\n", "exited", 3),
        "kill": ("console.log('loading');\nprocess.kill(process.pid, 'SIGKILL');\nmodule.exports = (n) => n;\n", "signaled", 137),
        "timeout": ("console.log('loading');\nfor (;;) {}\nmodule.exports = (n) => n;\n", "timed_out", None),
        "oom": ("console.log('loading');\nconst kept = [];\nfor (;;) kept.push(Buffer.alloc(1 << 20, 1));\n", "out_of_memory", 137),
    },
    "ts": {
        "exit": ("console.log('loading');\nprocess.reallyExit(3);\nexport default (n: number): number => n;\n", "exited", 3),
        "kill": ("console.log('loading');\nprocess.kill(process.pid, 'SIGKILL');\nexport default (n: number): number => n;\n", "signaled", 137),
    },
    "ruby": {
        "exit": ("puts 'loading'\nexit!(3)\ndef solution(n) = n\n", "exited", 3),
        "kill": ("puts 'loading'\nProcess.kill(:KILL, Process.pid)\ndef solution(n) = n\n", "signaled", 137),
        "timeout": ("puts 'loading'\nloop {}\ndef solution(n) = n\n", "timed_out", None),
        "oom": ("puts 'loading'\nx = 'x' * (400 << 20)\ndef solution(n) = n\n", "out_of_memory", 137),
    },
    "php": {
        "kill": ("<?php\necho \"loading\\n\";\nposix_kill(posix_getpid(), 9);\nfunction solution($n) { return $n; }\n", "signaled", 137),
        "timeout": ("<?php\necho \"loading\\n\";\nwhile (true) {}\nfunction solution($n) { return $n; }\n", "timed_out", None),
        "oom": ("<?php\necho \"loading\\n\";\n$x = str_repeat('x', 400 << 20);\nfunction solution($n) { return $n; }\n", "out_of_memory", 137),
    },
    # checker languages: the load is the solution's static initialisation, before the checker's
    # main (CHECKERS); what it prints is stdout as a plain program's
    "cpp": {
        "exit": (CPP_LOAD.format("_exit(3);"), "exited", 3),
        "kill": (CPP_LOAD.format("kill(getpid(), SIGKILL);"), "signaled", 137),
        "timeout": (CPP_LOAD.format("for (volatile int i = 0;; i = 0) {}"), "timed_out", None),
        "oom": (CPP_LOAD.format("std::vector<char> kept(400 << 20, 'x');"), "out_of_memory", 137),
    },
}
CASES = [(slug, way) for slug, ways in WAYS.items() for way in ways]
LANGS = Path(__file__).resolve().parents[2] / "langs"
# why this host cannot serve a language (its workspace not prepared: the stock VM has python, js
# and cpp), else None
UNSERVED = {slug: workspace_problem(LANGS / slug) for slug in WAYS}


@pytest.fixture(scope="module")
def harness_server():
    served = [slug for slug in WAYS if UNSERVED[slug] is None]
    server = Server({"RUN_LANGS": ",".join(served), "RUN_CONCURRENCY": "2"}).wait_ready()
    yield server
    server.stop()


def served(slug: str) -> None:
    if UNSERVED[slug] is not None:
        pytest.skip(f"{slug}: {UNSERVED[slug]}")


@pytest.mark.parametrize(("slug", "way"), CASES, ids=[f"{slug}-{way}" for slug, way in CASES])
def test_what_loading_printed_reaches_stdout_however_the_load_ends(harness_server, slug, way):
    served(slug)
    solution, outcome, exit_code = WAYS[slug][way]
    response = harness_server.run(
        lang_slug=slug, solution_text=solution, checker_text=CHECKERS.get(slug), asserts=HARNESS, timeout="3s", limits={"memory": "128m"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["stdout"], body["stats"]["outcome"], body["exit_code"]) == ("loading\n", outcome, exit_code), body


# what each harness language's load prints when it ends well
LOADS_WELL = {
    "python": "print('loading')\ndef solution(n):\n    return n\n",
    "js": "console.log('loading');\nmodule.exports = (n) => n;\n",
    "ts": "console.log('loading');\nexport default (n: number): number => n;\n",
    "ruby": "puts 'loading'\ndef solution(n) = n\n",
    "php": "<?php\necho \"loading\\n\";\nfunction solution($n) { return $n; }\n",
}


@pytest.mark.parametrize("slug", list(LOADS_WELL))
def test_a_load_that_ends_well_keeps_its_output_in_the_report_alone(harness_server, slug):
    """The held output is the report's first item, and is not passed on a second time."""
    served(slug)
    body = harness_server.run(lang_slug=slug, solution_text=LOADS_WELL[slug], asserts=HARNESS).json()
    assert body["exit_code"] == 0, body
    assert body["stdout"].startswith('[{"type":"output","value":"loading\\n"},{"type":"result","value":1,'), body
    assert body["stdout"].count("loading") == 1, body


@pytest.mark.parametrize("slug", list(CHECKERS))
def test_a_checker_languages_load_that_ends_well_prints_before_the_report_once(harness_server, slug):
    """Written at once while loading, buffered again after: the load's line comes once, before
    the report, and the calls' output is still their own."""
    served(slug)
    solution = WAYS[slug]["exit"][0].replace("_exit(3);", "")
    body = harness_server.run(lang_slug=slug, solution_text=solution, checker_text=CHECKERS[slug], asserts=HARNESS).json()
    assert body["exit_code"] == 0, body
    assert body["stdout"].startswith('loading\n[{"type":"result","value":1,'), body
    assert body["stdout"].count("loading") == 1, body


def test_held_output_past_the_output_limit_is_output_too_large(harness_server):
    """What loading printed counts as stdout: past RUN_OUTPUT_MAX (1 MiB) the contract's 413, as
    if it had been printed live."""
    solution = "import os\nprint('x' * (2 << 20))\nos._exit(0)\ndef solution(n):\n    return n\n"
    response = harness_server.run(lang_slug="python", solution_text=solution, asserts=HARNESS)
    assert (response.status_code, response.json()) == (413, {"error": "output too large"})
