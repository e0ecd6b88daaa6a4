"""Output printed while a harness loads the solution reaches stdout however the load ends: the
harness holds it for its report's "output" item, and a load ended abruptly (the runtime's own
immediate exit, a kill, the timeout, an OOM) never reaches the report. Through the real API, per
harness language (python, js and ts, ruby, php here; clojure and elixir in tests/langs, their servers
being slow to start): the solution prints "loading", then its load ends one of these ways with
asserts.json in harness shape, and the client's stdout is "loading\\n". (How: kiln/native/kiln.h
HELD_STDOUT.) Languages with a client harness too (cpp, golang, rust), where the load is the solution's static
initialisation (a C++ global, Go's init, Rust's .init_array) and nothing holds its output but the
runtime's stdout buffer: C++'s prelude makes it unbuffered until main (langs/cpp/prelude's
HoldLoadOutput), Go writes at once, Rust's stdout flushes each line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kiln.runtime import workspace_problem
from kilntest import Server

HARNESS = {"arguments": [[1]]}

# languages with a client harness: the solution's static initialisation prints "loading\n" without a flush,
# then WAY (its end, or nothing); `solution` is never called
LOADS = {
    # a global's initialiser, before the client harness's main ("\n", not std::endl, as most print)
    "cpp": (
        "#include <bits/stdc++.h>\n#include <signal.h>\n#include <unistd.h>\n"
        'static int loaded = [] { std::cout << "loading\\n"; WAY return 0; }();\n'
        "int solution(int n) { return n; }\n"
    ),
    # init(), before main
    "golang": (
        'package main\n\nimport (\n\t"fmt"\n\t"os"\n\t"syscall"\n)\n\nvar _, _ = os.Exit, syscall.Kill\n\n'
        'func init() {\n\tfmt.Print("loading\\n")\n\tWAY\n}\n\nfunc solution(n int64) int64 { return n }\n'
    ),
    # Rust has no code before main but what .init_array runs
    "rust": (
        '#[used]\n#[link_section = ".init_array"]\nstatic LOAD: extern "C" fn() = load;\n\n'
        'extern "C" fn load() {\n    print!("loading\\n");\n    WAY\n}\n\npub fn solution(n: i64) -> i64 {\n    n\n}\n'
    ),
}
# the ends, per language
ENDS = {
    "cpp": {
        "exit": "_exit(3);",
        "kill": "kill(getpid(), SIGKILL);",
        "timeout": "for (volatile int i = 0;; i = 0) {}",
        "oom": "std::vector<char> kept(1 << 30, 'x');",
    },
    "golang": {
        "exit": "os.Exit(3)",
        "kill": "syscall.Kill(os.Getpid(), syscall.SIGKILL)",
        "timeout": "for {\n\t}",
        "oom": "kept := [][]byte{}\n\tfor {\n\t\tkept = append(kept, make([]byte, 1<<20))\n\t\tfor i := range kept[len(kept)-1] {\n\t\t\tkept[len(kept)-1][i] = 1\n\t\t}\n\t}",
    },
    "rust": {
        "exit": "unsafe { libc::_exit(3) };",
        "kill": "unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };",
        "timeout": "loop {}",
        "oom": "let mut kept = Vec::new();\n    loop {\n        kept.push(vec![1u8; 1 << 20]);\n    }",
    },
}
# the client harness: solution(n) for each argument list, in kiln's protocol (time and output left out)
CLIENT_HARNESSES = {
    "cpp": (
        '#include "solution.cpp"\n'
        "int main() {\n"
        "    kiln::Report report;\n"
        "    for (const auto& args : kiln::arguments()) report.call([&] { return solution(args[0].get<int>()); });\n"
        "    report.print();\n"
        "}\n"
    ),
    "golang": (
        'package main\n\nimport (\n\t"encoding/json"\n\t"fmt"\n\t"os"\n)\n\n'
        'func main() {\n\tvar asserts struct{ Arguments [][]int64 }\n\tdata, _ := os.ReadFile("check/asserts.json")\n'
        '\tjson.Unmarshal(data, &asserts)\n\tfor _, args := range asserts.Arguments {\n'
        '\t\tfmt.Printf("[{\\"type\\":\\"result\\",\\"value\\":%d}]\\n", solution(args[0]))\n\t}\n}\n'
    ),
    "rust": (
        "mod solution;\n\nfn main() {\n"
        '    let text = std::fs::read_to_string("check/asserts.json").unwrap();\n'
        "    let asserts: serde_json::Value = serde_json::from_str(&text).unwrap();\n"
        '    for args in asserts["arguments"].as_array().unwrap() {\n'
        '        println!("[{{\\"type\\":\\"result\\",\\"value\\":{}}}]", solution::solution(args[0].as_i64().unwrap()));\n'
        "    }\n}\n"
    ),
}
# the compilers need more than the harness languages' 128m and 3s
# compiled languages build inside the run's own limits: g++ maps cpp's 141 MB precompiled
# prelude, which a first build after it left the page cache faults into the run's cgroup (at
# 128m it thrashed to its 3 s timeout in CI-like runs; in the emulated stock VM a first build
# takes over 10 s); Go's and Rust's compilers need as much memory
LIMITS = {"cpp": ("512m", "30s"), "golang": ("512m", "10s"), "rust": ("512m", "10s")}

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
}
OUTCOMES = {"exit": ("exited", 3), "kill": ("signaled", 137), "timeout": ("timed_out", None), "oom": ("out_of_memory", 137)}
for slug, ends in ENDS.items():
    WAYS[slug] = {way: (LOADS[slug].replace("WAY", end), *OUTCOMES[way]) for way, end in ends.items()}
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


# a compiled language's run that never ends waits its whole timeout, which must also cover its
# build: three times what a build of the same load took here (measured once a module, when the
# page cache holds the compiler: the `exit` case's, or a run of its own), at least 3 s, at most
# the language's timeout
_builds: dict[str, float] = {}


def loop_timeout(server: Server, slug: str) -> str:
    memory, most = LIMITS[slug]
    if slug not in _builds:
        started = time.monotonic()
        server.run(lang_slug=slug, solution_text=WAYS[slug]["exit"][0], checker_text=CLIENT_HARNESSES.get(slug), asserts=HARNESS, timeout=most, limits={"memory": memory})
        _builds[slug] = time.monotonic() - started
    return f"{int(1000 * min(float(most.removesuffix('s')), max(3.0, 3 * _builds[slug])))}ms"


@pytest.mark.parametrize(("slug", "way"), CASES, ids=[f"{slug}-{way}" for slug, way in CASES])
def test_what_loading_printed_reaches_stdout_however_the_load_ends(harness_server, slug, way):
    served(slug)
    solution, outcome, exit_code = WAYS[slug][way]
    memory, timeout = LIMITS.get(slug, ("128m", "3s"))
    if slug in LIMITS and way == "timeout":
        timeout = loop_timeout(harness_server, slug)
    if way != "timeout" and slug not in LIMITS:  # a load that ends by itself (a memory filled to its limit too) ends so
        timeout = "10s"  # however slow the host: no deadline first (node's start took over 3 s in the emulated stock VM)
    started = time.monotonic()
    response = harness_server.run(
        lang_slug=slug, solution_text=solution, checker_text=CLIENT_HARNESSES.get(slug), asserts=HARNESS, timeout=timeout, limits={"memory": memory}
    )
    if slug in LIMITS and way == "exit":  # a build and a run that ends at once: loop_timeout's figure
        _builds.setdefault(slug, time.monotonic() - started)
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


@pytest.mark.parametrize("slug", list(CLIENT_HARNESSES))
def test_a_client_harness_languages_load_that_ends_well_prints_before_the_report_once(harness_server, slug):
    """Written at once while loading, buffered again after: the load's line comes once, before
    the report, and the calls' output is still their own."""
    served(slug)
    solution = LOADS[slug].replace("WAY", "")
    body = harness_server.run(lang_slug=slug, solution_text=solution, checker_text=CLIENT_HARNESSES[slug], asserts=HARNESS).json()
    assert body["exit_code"] == 0, body
    assert body["stdout"].startswith('loading\n[{"type":"result","value":1'), body
    assert body["stdout"].count("loading") == 1, body


def test_held_output_past_the_output_limit_is_output_too_large(harness_server):
    """What loading printed counts as stdout: past RUN_OUTPUT_MAX (1 MiB) the contract's 413, as
    if it had been printed live."""
    solution = "import os\nprint('x' * (2 << 20))\nos._exit(0)\ndef solution(n):\n    return n\n"
    response = harness_server.run(lang_slug="python", solution_text=solution, asserts=HARNESS)
    assert (response.status_code, response.json()) == (413, {"error": "output too large"})
