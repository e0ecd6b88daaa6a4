#!/bin/sh
# Installs Rust from Debian packages (rustc-web/cargo-web 1.85 where the archive has them, else
# rustc/cargo) with the packaged crate sources checkers use (serde, serde_derive, serde_json,
# libc), and prebuilds the `checker` crate's dependencies into target/ with this folder mounted at
# /sandbox in a private mount namespace (cargo keys its fingerprints on absolute paths), with the
# environment kiln gives the task (the rust entry of kiln/langs.py: keep cargo_env in sync), so a
# request compiles only check/checker.rs and check/solution.rs. Idempotent, and silent when the
# build is already in place for this toolchain (a stamp holds a fingerprint of the inputs).
set -eu
cd "$(dirname "$0")"
export PATH=/usr/local/bin:/usr/bin:/bin LC_ALL=C
workspace=$(pwd -P)
stamp=.kiln-installed
registry=/usr/share/cargo/registry

cargo_env() {
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/sandbox LC_ALL=C \
        CARGO_HOME=/sandbox/.cargo CARGO_BUILD_JOBS=2 CARGO_INCREMENTAL=0 CARGO_NET_OFFLINE=true \
        CARGO_TERM_COLOR=never "$@"
}

have_toolchain() {
    command -v cargo >/dev/null 2>&1 && command -v rustc >/dev/null 2>&1 \
        && ls -d "$registry"/serde_json-* "$registry"/serde_derive-* "$registry"/libc-* >/dev/null 2>&1
}

fingerprint() {
    {
        cat install.sh Makefile Cargo.toml .cargo/config.toml shims/*/Cargo.toml shims/*/src/*.rs
        rustc -vV 2>/dev/null || true
        cargo -V 2>/dev/null || true
        ls "$registry" 2>/dev/null || true
    } | sha256sum | cut -d' ' -f1
}

if have_toolchain && [ -f target/debug/checker ] && [ "$(cat "$stamp" 2>/dev/null || true)" = "$(fingerprint)" ]; then
    exit 0
fi

if ! have_toolchain; then
    # rustc-web (Debian 12's newer Rust, built for the browsers) runs what Codebattle's checkers
    # need, e.g. std::os::fd (Rust 1.66+); plain rustc is 1.63 on Debian 12.
    if apt-cache show rustc-web >/dev/null 2>&1 && apt-cache show cargo-web >/dev/null 2>&1; then
        compiler="rustc-web cargo-web"
    else
        compiler="rustc cargo"
    fi
    crates="librust-serde-dev librust-serde-derive-dev librust-serde-json-dev librust-libc-dev"
    echo "langs/rust/install.sh: installing $compiler $crates (apt)"
    log=$(mktemp)
    # shellcheck disable=SC2086 # word lists
    if ! apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $compiler $crates >"$log" 2>&1; then
        echo "langs/rust/install.sh: rust not installed: apt-get install $compiler failed: $(tail -n 1 "$log")"
        rm -f "$log"
        exit 0
    fi
    rm -f "$log"
fi

echo "langs/rust/install.sh: prebuilding serde, serde_json, libc and serde_with into langs/rust/target"
rm -rf target Cargo.lock "$stamp"
mkdir -p check
# A checker in the shape Codebattle generates (serde_as, libc pipes, std::os::fd) and a
# solution: building and running it checks the toolchain and the stand-ins end to end.
cat > check/solution.rs <<'EOF'
use std::collections::HashMap;

pub fn solution(a: i64, b: i64) -> i64 {
    let _seen: HashMap<i64, i64> = HashMap::new();
    print!("{}", a);
    a + b
}
EOF
cat > check/checker.rs <<'EOF'
use serde::{Deserialize, Serialize};
use serde_with::{serde_as, DurationSecondsWithFrac};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

mod solution;

#[serde_as]
#[derive(Serialize, Deserialize)]
struct Item<T> {
    #[serde(rename = "type")]
    kind: String,
    value: T,
    #[serde_as(as = "DurationSecondsWithFrac<String>")]
    time: Duration,
    output: String,
}

fn main() {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let saved = unsafe { libc::dup(io::stdout().as_raw_fd()) };
    unsafe { libc::dup2(fds[1], io::stdout().as_raw_fd()) };
    let started = Instant::now();
    let value = solution::solution(1, 2);
    let time = started.elapsed();
    io::stdout().flush().unwrap();
    unsafe {
        libc::dup2(saved, io::stdout().as_raw_fd());
        libc::close(fds[1]);
    }
    let mut output = String::new();
    unsafe { std::fs::File::from_raw_fd(fds[0]) }.read_to_string(&mut output).unwrap();
    let items = vec![Item { kind: "result".into(), value, time, output }];
    let text = serde_json::to_string(&items).unwrap();
    let back: Vec<Item<i64>> = serde_json::from_str(&text).unwrap();
    println!("{}", serde_json::json!([back[0].value, back[0].output]));
}
EOF
[ -d /sandbox ] || mkdir /sandbox
cargo_env unshare --mount --propagation private sh -euc '
    mount --bind "$1" /sandbox
    cd /sandbox
    cargo build --quiet --offline
    [ "$(./target/debug/checker)" = "[3,\"1\"]" ]
' sh "$workspace"
rm -f check/solution.rs check/checker.rs
rmdir check 2>/dev/null || true
# cargo's own state in CARGO_HOME (lock files, its cache tracker) is the task's to create
find .cargo -mindepth 1 ! -name config.toml -exec rm -rf {} +
# Every uid may write the build (overlayfs copies a file up when the task writes it).
chmod -R a+rwX target
chmod a+rwx .cargo
chmod a+rw Cargo.lock
fingerprint > "$stamp"
