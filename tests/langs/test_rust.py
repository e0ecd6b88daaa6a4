"""rust through the real HTTP API and the real sandbox: cargo builds the client's checker.rs (the
binary's root, `mod solution;`) against prebuilt serde/serde_json/libc/serde_with (langs/rust),
offline, and the checker prints the harness protocol."""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kiln import langs
from kilntest import REPO, Server

EXAMPLES = Path(__file__).parent / "examples" / "rust"
CHECKER = (EXAMPLES / "checker.rs").read_text()
SOLUTION = (EXAMPLES / "solution.rs").read_text()
ARGUMENTS = [[1, 2], [3, 4], [-5, 5], [100, 23]]
TIMEOUT = "30s"  # compiling: generous, these tests assert behaviour, not speed
SECONDS = re.compile(r"^\d+\.\d{7}$")


def _missing() -> str | None:
    for exe in ("cargo", "rustc", "cc"):
        if shutil.which(exe, path="/usr/local/bin:/usr/bin:/bin") is None:
            return f"{exe} is not installed: run langs/install-toolchains.sh rust"
    if not (REPO / "langs" / "rust" / "target" / "debug" / "checker").is_file():
        return "the dependencies are not prebuilt: run langs/install-toolchains.sh rust"
    if not (REPO / "langs" / "rust" / ".installed").is_file():
        return "the workspace is not marked prepared: run langs/install-toolchains.sh rust"
    return None


@pytest.fixture(scope="module")
def rust():
    reason = _missing()
    if reason:
        pytest.skip(f"rust: {reason}")
    server = Server({"RUN_LANGS": "rust", "RUN_CONCURRENCY": "2"}).wait_ready(120)
    yield server
    server.stop()


def run(server, solution: str, checker: str = CHECKER, arguments=ARGUMENTS, timeout: str = TIMEOUT) -> dict:
    response = server.run(lang_slug="rust", solution_text=solution, checker_text=checker, asserts={"arguments": arguments}, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert body["exit_code"] == 0, body
    assert body["stats"]["outcome"] == "exited", body
    return json.loads(body["stdout"])


def test_a_plus_b_with_the_example_checker(rust):
    body = run(rust, SOLUTION)
    assert body["stderr"] == ""  # dependencies prebuilt: no "Compiling serde ..." and no warning
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 3, "adding 1 and 2\n"),
        ("result", 7, "adding 3 and 4\n"),
        ("result", 0, "adding -5 and 5\n"),
        ("result", 123, "adding 100 and 23\n"),
    ]
    assert all(SECONDS.match(i["time"]) for i in got)


def test_output_is_captured_per_call(rust):
    solution = (
        "use std::io::Write;\n\n"
        "pub fn solution(a: i64, b: i64) -> i64 {\n"
        "    if a == 3 {\n        print!(\"three {}\", b);\n    }\n"
        "    if a < 0 {\n        std::io::stdout().write_all(format!(\"negative {}\", a).as_bytes()).unwrap();\n    }\n"
        "    a * b\n"
        "}\n"
    )
    got = items(run(rust, solution))
    assert [(i["value"], i["output"]) for i in got] == [(2, ""), (12, "three 4"), (-25, "negative -5"), (2300, "")]


def test_a_panic_in_one_call_leaves_the_others(rust):
    solution = (
        "pub fn solution(a: i64, b: i64) -> i64 {\n"
        "    print!(\"before\");\n"
        "    if a == 3 {\n        panic!(\"three is not allowed\");\n    }\n"
        "    a - b\n"
        "}\n"
    )
    body = run(rust, solution)
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", -1, "before"),
        ("error", "three is not allowed", "before"),
        ("result", -10, "before"),
        ("result", 77, "before"),
    ]
    assert "three is not allowed" in body["stderr"]  # the default panic hook's report


def test_values_go_through_serde_json(rust):
    solution = (
        "use std::collections::HashMap;\n\n"
        "pub fn solution(a: i64, b: i64) -> HashMap<String, Vec<i64>> {\n"
        "    HashMap::from([(String::from(\"range\"), vec![a, b]), (String::from(\"sum\"), vec![a + b])])\n"
        "}\n"
    )
    got = items(run(rust, solution, arguments=[[1, 2]]))
    assert got[0]["value"] == {"range": [1, 2], "sum": [3]}


def test_a_checker_in_codebattles_shape_compiles_unchanged(rust):
    # The shape Codebattle generates: serde_with's #[serde_as] for the time, libc pipes around
    # each call, std::os::fd (Rust 1.66+), #![allow(warnings)], `mod solution;`.
    checker = (
        "#![allow(warnings)]\n\n"
        "use libc::c_int;\nuse serde::Serialize;\nuse serde_with::{DurationSecondsWithFrac, serde_as};\n"
        "use std::{\n    collections::HashMap,\n    fs::File,\n    io::{self, Read, Write},\n"
        "    os::fd::{AsRawFd, FromRawFd},\n    process::exit,\n    time::{self, Duration},\n};\n\n"
        "mod solution;\n\n"
        "#[serde_as]\n#[derive(Serialize, Debug)]\n"
        "struct Result<T> {\n"
        "    #[serde(rename = \"type\")]\n    typ: String,\n    value: T,\n"
        "    #[serde_as(as = \"DurationSecondsWithFrac<String>\")]\n    time: Duration,\n"
        "    #[serde(skip_serializing_if = \"String::is_empty\")]\n    output: String,\n}\n\n"
        "fn pipe() -> std::io::Result<(File, File)> {\n"
        "    let mut fds: [c_int; 2] = [0; 2];\n"
        "    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {\n"
        "        return Err(io::Error::new(io::ErrorKind::Other, \"pipe\"));\n    }\n"
        "    Ok(unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) })\n}\n\n"
        "fn main() {\n"
        "    let mut stdout_ = unsafe { File::from_raw_fd(libc::dup(io::stdout().as_raw_fd())) };\n"
        "    let mut results_ = Vec::with_capacity(2);\n"
        "    for (a, b) in [(1i64, 2i64), (30, 12)] {\n"
        "        let (reader_, writer_) = match pipe() { Ok((r, w)) => (Some(r), Some(w)), Err(_) => (None, None) };\n"
        "        if let Some(w) = writer_ { unsafe { libc::dup2(w.as_raw_fd(), io::stdout().as_raw_fd()); } };\n"
        "        let start_ = time::Instant::now();\n"
        "        let mut result_ = Result { typ: String::from(\"result\"), value: solution::solution(a, b), time: start_.elapsed(), output: String::new() };\n"
        "        if let Some(mut r) = reader_ {\n"
        "            let _ = io::stdout().flush();\n"
        "            unsafe { libc::dup2(stdout_.as_raw_fd(), io::stdout().as_raw_fd()); }\n"
        "            let _ = r.read_to_string(&mut result_.output);\n"
        "        };\n"
        "        results_.push(result_);\n"
        "    }\n"
        "    if let Err(_) = serde_json::to_writer(&mut stdout_, &results_) {\n"
        "        eprintln!(\"Encoding error\");\n        exit(0);\n    }\n"
        "}\n"
    )
    solution = (
        "use std::collections::HashMap;\n\n"
        "pub fn solution(a: i64, b: i64) -> i64 {\n"
        "    let mut ans: i64 = a + b;\n"
        "    println!(\"adding {} and {}\", a, b);\n"
        "    return ans;\n"
        "}\n"
    )
    body = run(rust, solution, checker)
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [("result", 3, "adding 1 and 2\n"), ("result", 42, "adding 30 and 12\n")]
    for item in got:  # DurationSecondsWithFrac<String>: the seconds as the text of an f64
        assert isinstance(item["time"], str) and 0 <= float(item["time"]) < 60


def test_two_runs_at_once_each_with_its_own_copy(rust):
    # two slots, two uids, one read-only workspace with its prebuilt caches underneath both
    with ThreadPoolExecutor(2) as pool:
        bodies = list(pool.map(lambda args: run(rust, SOLUTION, arguments=args), [[[1, 2]], [[20, 22]]]))
    assert [[i["value"] for i in items(body)] for body in bodies] == [[3], [42]]


def test_install_builds_with_the_tasks_environment():
    # the prebuilt caches only help when install.sh built them with the environment the task gets
    script = (REPO / "langs" / "rust" / "install.sh").read_text()
    body = re.search(r"^cargo_env\(\) {\n(.*?)^}", script, re.S | re.M).group(1)
    built_with = dict(re.findall(r"\b([A-Z_]+)=(\S*)", body))
    assert built_with.pop("HOME") == "/sandbox"
    for key, value in langs.LANGUAGES["rust"].env:
        assert built_with.get(key) == value, key


def test_a_compile_error_is_the_compilers_message_and_status(rust):
    body = run(rust, "pub fn solution(a: i64, b: i64) -> i64 {\n    a +\n}\n")
    assert body["stats"]["outcome"] == "exited"
    assert body["exit_code"] not in (0, None)
    assert body["stdout"] == ""
    assert "check/solution.rs" in body["stderr"] and "error" in body["stderr"]


def test_an_infinite_loop_times_out(rust):
    solution = (
        "pub fn solution(a: i64, b: i64) -> i64 {\n"
        "    eprintln!(\"looping\");\n"
        "    let mut n = a;\n"
        "    loop {\n        n = std::hint::black_box(n.wrapping_add(b));\n    }\n"
        "}\n"
    )
    body = run(rust, solution, timeout="15s")  # building takes part of it; the loop the rest
    assert body["stats"]["outcome"] == "timed_out"
    assert body["exit_code"] is None
    assert "looping" in body["stderr"]
