"""What a task pays for kiln's seccomp filter (bench/seccomp_load.c, compiled here): its load, and
a syscall the filter decides each time, against an allow-all filter, in forked children, the
filters alternating round by round.

    .venv/bin/python bench/seccomp_load.py [--rounds 300] [--calls 20000] [--against REV ...]

--against REV also measures the filter kiln/sandbox/seccomp.py compiled at git revision REV
(e.g. 4b546c3, the last one built with libseccomp).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from kiln.sandbox import seccomp  # noqa: E402


def filter_at(rev: str, folder: Path) -> bytes:
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:kiln/sandbox/seccomp.py"], check=True, capture_output=True).stdout
    path = folder / f"seccomp_{rev}.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location(f"seccomp_{rev}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compile_filter()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--against", action="append", default=[], metavar="REV")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        binary = folder / "seccomp_load"
        subprocess.run(["gcc", "-O2", "-Wall", "-o", str(binary), str(BENCH / "seccomp_load.c")], check=True)
        filters = {"allow-all": "-"}
        for name, program in [("this tree", seccomp.compile_filter()), *[(rev, filter_at(rev, folder)) for rev in args.against]]:
            path = folder / f"{len(filters)}.bpf"
            path.write_bytes(program)
            filters[name] = str(path)
        done = subprocess.run([str(binary), str(args.rounds), str(args.calls), *filters.values()], capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr or done.stdout, file=sys.stderr)
        return 1
    names = {path: name for name, path in filters.items()}
    print(f"{args.rounds} loads per filter in forked children, alternating; medians (p10-p90)")
    print(f"{'filter':>12} {'insns':>5} {'load us':>20} {'prlimit64 ns':>20} {'io_uring_setup ns':>20} {'getppid ns':>20}")
    for line in done.stdout.splitlines():
        path, length, *figures = line.split()
        cells = [f"{figures[i]} ({figures[i + 1]}-{figures[i + 2]})" for i in range(0, len(figures), 3)]
        print(f"{names[path]:>12} {length:>5} " + " ".join(f"{cell:>20}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
