"""The floor under issue 6's rate target: a slot's life with no Python in it (bench/slot_floor.c),
compiled here and run N times; compare with bench/cpu.py's zygote + slots-and-tasks for kiln.

    .venv/bin/python bench/slot_floor.py [--runs 2000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "slot_floor.c"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        binary, workspace, staging = Path(tmp, "slot_floor"), Path(tmp, "ws"), Path(tmp, "staging")
        workspace.mkdir()
        staging.mkdir()
        subprocess.run(["gcc", "-O2", "-Wall", "-o", str(binary), str(SOURCE)], check=True)
        done = subprocess.run([str(binary), str(args.runs), str(workspace), str(staging)], capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr or done.stdout, file=sys.stderr)
        return 1
    fields = dict(zip(*[iter(done.stdout.split())] * 2))
    print(f"{fields['runs']} slot lives in C: parent {fields['parent_cpu_ms']} ms of CPU a run, slot and task {fields['children_cpu_ms']} ms, {fields['wall_ms']} ms of wall time a run one after another")
    return 0


if __name__ == "__main__":
    sys.exit(main())
