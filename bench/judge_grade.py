"""What judge-grade builds cost and give (issue 33 item 4): /judge's build and a test's run for
C++, Rust and Java, with the judge build kiln had before (Codebattle's /run flags: C++ -O0 with
the prelude force-included, Rust in Cargo's dev profile, Java's JVM with C1 alone) against the
judge-grade one now (Codeforces' flags: C++ -O2 with the PCH of <bits/stdc++.h>, Rust rustc -O;
DOMjudge's JVM: both JIT tiers, a 64 MiB stack).

Bare, outside kiln: each build runs its workspace's own `build` command, each run its `exec` (`make -n -s build`, by
`sh -e -c`) in a copy of langs/<slug> (entries linked, Rust's target/ copied, since Cargo writes
it), the "before" copy with the Makefile (and Cargo.toml) of commit BEFORE; kiln adds the same
sandbox around either, so the difference is the build's own. Two programs: a+b
(tests/langs/judge/<slug>/ab, a new comment each round so nothing is reused) for the build's
cost, and a loop of 3e8 steps (a sum over a vector's elements, indexed: what a solution's inner
loop looks like) for what a test runs. Rounds alternate before/after; medians.

    .venv/bin/python bench/judge_grade.py [--rounds 5] [--before 8d733ea]

Writes bench/results/judge_grade.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from kiln import langs  # noqa: E402

LOOP = {
    "cpp": ("main.cpp", "#include <iostream>\n#include <vector>\nint main() { long n; std::cin >> n; std::vector<unsigned long> a(1 << 16);\n"
            "  for (unsigned long i = 0; i < a.size(); i++) a[i] = i * 7;\n  unsigned long s = 0;\n"
            "  for (long i = 0; i < n; i++) s += a[i & 65535] ^ (unsigned long)i;\n  std::cout << s << '\\n'; }\n"),
    "rust": ("main.rs", "use std::io::Read;\nfn main() { let mut s = String::new(); std::io::stdin().read_to_string(&mut s).unwrap();\n"
             "  let n: u64 = s.trim().parse().unwrap(); let a: Vec<u64> = (0..1u64 << 16).map(|i| i * 7).collect();\n  let mut sum: u64 = 0;\n"
             "  for i in 0..n { sum = sum.wrapping_add(a[(i & 65535) as usize] ^ i); }\n  println!(\"{}\", sum); }\n"),
    "java": ("Main.java", "public class Main { public static void main(String[] a) { long n = new java.util.Scanner(System.in).nextLong();\n"
             "  long[] v = new long[1 << 16]; for (int i = 0; i < v.length; i++) v[i] = i * 7L; long s = 0;\n"
             "  for (long i = 0; i < n; i++) s += v[(int) (i & 65535)] ^ i;\n  System.out.println(s); } }\n"),
}  # fmt: skip
FROM_COMMIT = {"cpp": ("Makefile",), "rust": ("Makefile", "Cargo.toml"), "java": ("Makefile",)}  # what "before" takes from BEFORE
STEPS = "300000000"
STDCXX_AB = "#include <bits/stdc++.h>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << '\\n'; }\n"  # what most C++ submissions include


def workspace_copy(slug: str, into: Path, before: str | None) -> Path:
    source = REPO / "langs" / slug
    copy = into / slug
    copy.mkdir(parents=True)
    taken = FROM_COMMIT[slug] if before else ()
    for entry in source.iterdir():
        if entry.name in taken or entry.name == "judge":
            continue
        if entry.name in ("target", "Cargo.lock"):  # Cargo writes them
            if entry.is_dir():
                shutil.copytree(entry, copy / entry.name, symlinks=True)
            else:
                shutil.copy2(entry, copy / entry.name)
        else:
            (copy / entry.name).symlink_to(entry)
    for name in taken:
        (copy / name).write_bytes(subprocess.run(["git", "show", f"{before}:langs/{slug}/{name}"], cwd=REPO, check=True, capture_output=True).stdout)
    return copy


def command(copy: Path, target: str) -> str:
    return subprocess.run(["make", "--no-print-directory", "-n", "-s", target], cwd=copy, check=True, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}).stdout


def environment(slug: str, copy: Path) -> dict[str, str]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LC_ALL": "C"}
    env.update({key: value.replace("/sandbox", str(copy)) for key, value in langs.LANGUAGES[slug].env})
    return env


def build(slug: str, copy: Path, script: str, source: str) -> tuple[float, float]:
    """One build of `source` as the judge file: (wall s, CPU s of the build's processes)."""
    judge = copy / "judge"
    shutil.rmtree(judge, ignore_errors=True)
    judge.mkdir()
    (judge / langs.LANGUAGES[slug].judge_file).write_text(source)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(["/bin/sh", "-e", "-c", script], cwd=copy, env=environment(slug, copy), capture_output=True, text=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{slug}: the build failed:\n{script}\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run(slug: str, copy: Path, script: str, stdin: str) -> float:
    """One run of the workspace's exec command on what the last build left."""
    started = time.monotonic()
    subprocess.run(["/bin/sh", "-e", "-c", script], cwd=copy, env=environment(slug, copy), input=stdin, capture_output=True, text=True, check=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", default="8d733ea", help="the commit whose judge builds were /run's (default: 8d733ea)")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="kiln-judge-grade-") as folder:
        for slug in ("cpp", "rust", "java"):
            copies = {side: workspace_copy(slug, Path(folder) / side, args.before if side == "before" else None) for side in ("before", "after")}
            scripts = {side: command(copy, "build") for side, copy in copies.items()}
            execs = {side: command(copy, "exec") for side, copy in copies.items()}
            ab = (REPO / "tests/langs/judge" / slug / "ab" / langs.LANGUAGES[slug].judge_file).read_text()
            if slug == "cpp":  # the judge build without its PCH of <bits/stdc++.h>, to show what the PCH saves
                copies["after, no PCH"], scripts["after, no PCH"], execs["after, no PCH"] = copies["after"], scripts["after"].replace("-I judge-pch ", ""), execs["after"]
            figures = {side: {"build_wall": [], "build_cpu": [], "stdcxx_build_wall": [], "ab_run": [], "loop_build_wall": [], "loop_run": []} for side in copies}
            for round_ in range(args.rounds):
                for side in (list(copies) if round_ % 2 == 0 else list(copies)[::-1]):
                    wall, cpu = build(slug, copies[side], scripts[side], ab + f"\n// round {round_}\n")
                    figures[side]["ab_run"].append(run(slug, copies[side], execs[side], "1 2\n"))
                    figures[side]["build_wall"].append(wall)
                    figures[side]["build_cpu"].append(cpu)
                    if slug == "cpp":
                        figures[side]["stdcxx_build_wall"].append(build(slug, copies[side], scripts[side], STDCXX_AB + f"\n// round {round_}\n")[0])
                    wall, _ = build(slug, copies[side], scripts[side], LOOP[slug][1] + f"\n// round {round_}\n")
                    figures[side]["loop_build_wall"].append(wall)
                    figures[side]["loop_run"].append(run(slug, copies[side], execs[side], STEPS))
            results[slug] = {side: {"build": scripts[side].strip(), "exec": execs[side].strip(), **{k: round(statistics.median(v), 3) for k, v in f.items() if v}} for side, f in figures.items()}
            for side, row in results[slug].items():
                stdcxx = f", <bits/stdc++.h> a+b {row['stdcxx_build_wall']:.2f} s" if "stdcxx_build_wall" in row else ""
                print(f"{slug:5} {side:13} a+b build {row['build_wall']:.2f} s wall, {row['build_cpu']:.2f} s CPU{stdcxx}; a+b run {row['ab_run']:.3f} s; loop of 3e8: {row['loop_run']:.2f} s\n      build: {row['build']}\n      exec:  {row['exec']}")
    out = REPO / "bench/results/judge_grade.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
