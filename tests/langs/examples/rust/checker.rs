//! An example checker for kiln's rust workspace: check/checker.rs is the root of the `checker`
//! binary and declares `mod solution;` (check/solution.rs). For each argument list of
//! check/asserts.json ({"arguments": [[a, b], ...]}) it calls solution(a, b) and prints the
//! protocol: one JSON array with one item per call,
//! {"type":"result","value":...,"time":"0.0000123","output":"<what the call printed>"},
//! or an "error" item when the call panics (the next calls still run).
use serde_json::{json, Value};
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::panic::{self, AssertUnwindSafe};
use std::time::Instant;

mod solution;

/// Runs `call` with fd 1 redirected to a memory file; returns its value (or panic message),
/// the elapsed seconds and what it printed.
fn captured<T>(call: impl FnOnce() -> T) -> (Result<T, String>, f64, String) {
    io::stdout().flush().ok();
    let name = CString::new("output").unwrap();
    let mut file = unsafe { File::from_raw_fd(libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC)) };
    let saved = unsafe { libc::dup(libc::STDOUT_FILENO) };
    unsafe { libc::dup2(file.as_raw_fd(), libc::STDOUT_FILENO) };
    let started = Instant::now();
    let result = panic::catch_unwind(AssertUnwindSafe(call));
    let elapsed = started.elapsed().as_secs_f64();
    io::stdout().flush().ok();
    unsafe {
        libc::dup2(saved, libc::STDOUT_FILENO);
        libc::close(saved);
    }
    let mut output = String::new();
    file.seek(SeekFrom::Start(0)).unwrap();
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).unwrap();
    output.push_str(&String::from_utf8_lossy(&bytes));
    let result = result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|text| text.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string())
    });
    (result, elapsed, output)
}

fn main() {
    let asserts: Value = std::fs::read_to_string("check/asserts.json")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    let mut items = Vec::new();
    for args in asserts["arguments"].as_array().cloned().unwrap_or_default() {
        let (a, b) = (args[0].as_i64().unwrap(), args[1].as_i64().unwrap());
        let (result, elapsed, output) = captured(|| solution::solution(a, b));
        let (kind, value) = match result {
            Ok(value) => ("result", json!(value)),
            Err(message) => ("error", json!(message)),
        };
        items.push(json!({"type": kind, "value": value, "time": format!("{:.7}", elapsed), "output": output}));
    }
    println!("{}", Value::Array(items));
}
