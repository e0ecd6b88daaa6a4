"""rust through the real HTTP API and the real sandbox: cargo builds the client's checker.rs (the
binary's root, `mod solution;`) against prebuilt serde/serde_json/libc/serde_with (langs/rust),
offline, and the checker prints the harness protocol."""

from __future__ import annotations

import pytest

import langcase
from kilntest import REPO

ARGUMENTS = [[1, 2], [3, 4], [-5, 5], [100, 23]]
SOLUTION = langcase.example("rust", "solution.rs")
RUST = langcase.Lang("rust", checker=langcase.example("rust", "checker.rs"), asserts={"arguments": ARGUMENTS}, ready_timeout=120, one_line=False)
WORKSPACE = REPO / "langs" / "rust"


@pytest.fixture(scope="module")
def server():
    yield from RUST.serve(langcase.missing(
        "run langs/install-toolchains.sh rust",
        programs=("cargo", "rustc", "cc"),
        paths=(
            (WORKSPACE / "target" / "debug" / "checker", "the dependencies are not prebuilt"),
            (WORKSPACE / ".installed", "the workspace is not marked prepared"),
        ),
    ))


def test_a_plus_b_with_the_example_checker(server):
    body = RUST.run(server, SOLUTION)
    assert body["stderr"] == ""  # dependencies prebuilt: no "Compiling serde ..." and no warning
    langcase.assert_a_plus_b(RUST, body, ARGUMENTS)


def test_output_is_captured_per_call(server):
    solution = (
        "use std::io::Write;\n\n"
        "pub fn solution(a: i64, b: i64) -> i64 {\n"
        "    if a == 3 {\n        print!(\"three {}\", b);\n    }\n"
        "    if a < 0 {\n        std::io::stdout().write_all(format!(\"negative {}\", a).as_bytes()).unwrap();\n    }\n"
        "    a * b\n"
        "}\n"
    )
    got = RUST.items(RUST.run(server, solution))
    assert [(i["value"], i["output"]) for i in got] == [(2, ""), (12, "three 4"), (-25, "negative -5"), (2300, "")]


def test_a_panic_in_one_call_leaves_the_others(server):
    solution = (
        "pub fn solution(a: i64, b: i64) -> i64 {\n"
        "    print!(\"before\");\n"
        "    if a == 3 {\n        panic!(\"three is not allowed\");\n    }\n"
        "    a - b\n"
        "}\n"
    )
    body = RUST.run(server, solution)
    langcase.assert_only_the_failing_call_fails(RUST, body, "three is not allowed")
    assert "three is not allowed" in body["stderr"]  # the default panic hook's report


def test_values_go_through_serde_json(server):
    solution = (
        "use std::collections::HashMap;\n\n"
        "pub fn solution(a: i64, b: i64) -> HashMap<String, Vec<i64>> {\n"
        "    HashMap::from([(String::from(\"range\"), vec![a, b]), (String::from(\"sum\"), vec![a + b])])\n"
        "}\n"
    )
    got = RUST.items(RUST.run(server, solution, arguments=[[1, 2]]))
    assert got[0]["value"] == {"range": [1, 2], "sum": [3]}


def test_a_checker_in_codebattles_shape_compiles_unchanged(server):
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
    body = RUST.run(server, solution, checker=checker)
    got = RUST.items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [("result", 3, "adding 1 and 2\n"), ("result", 42, "adding 30 and 12\n")]
    for item in got:  # DurationSecondsWithFrac<String>: the seconds as the text of an f64
        assert isinstance(item["time"], str) and 0 <= float(item["time"]) < 60


def test_two_runs_at_once_each_with_its_own_copy(server):
    langcase.assert_each_run_has_its_own_copy(RUST, server, SOLUTION)


def test_install_builds_with_the_tasks_environment():
    langcase.assert_install_builds_with_the_tasks_environment("rust", "cargo_env")


def test_a_compile_error_is_the_compilers_message_and_status(server):
    body = RUST.run(server, "pub fn solution(a: i64, b: i64) -> i64 {\n    a +\n}\n")
    langcase.assert_compile_error(body, "check/solution.rs", "error")


def test_an_infinite_loop_times_out(server):
    solution = (
        "pub fn solution(a: i64, b: i64) -> i64 {\n"
        "    eprintln!(\"looping\");\n"
        "    let mut n = a;\n"
        "    loop {\n        n = std::hint::black_box(n.wrapping_add(b));\n    }\n"
        "}\n"
    )
    body = RUST.run(server, solution, timeout="15s")  # building takes part of it; the loop the rest
    langcase.assert_timed_out(body, "looping")
