"""Where the CPU of a run goes: per run, the front, the zygote, the slots with their tasks, and
the rest of the machine (kernel threads, the load generator), with the page faults of the
zygote and of the slots.

Starts its own kiln (root needed) with the no-op workspace (`true`), loads it with `--clients`
keep-alive clients for `--seconds`, and reads /proc before and after: the front's and the
zygote's own times, the zygote's children's (slots, reaped with their tasks), /proc/stat for
the whole machine. It is what bounds the runs a second at saturation, component by component.

    .venv/bin/python bench/cpu.py [--seconds 8] [--clients 8] [--server-env NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from client import add_load_argument, rate  # noqa: E402 - bench/ is this script's folder
from kilntest import Server  # noqa: E402
from latency import AB_ASSERTS, AB_JS, AB_SOLUTION  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def process_times(pid: int) -> dict[str, float]:
    """Seconds of CPU (own, and of reaped children) and page faults, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) / TICKS for x in fields[11:15])
    return {"own": utime + stime, "children": cutime + cstime, "faults": int(fields[7]), "children_faults": int(fields[8])}


def templates(zygote: int) -> dict[int, dict[str, float]]:
    """The language templates (the zygote's children running a `template` command): they live
    through the measurement, their CPU is their own (forking the slots)."""
    found = {}
    for child in Path(f"/proc/{zygote}/task/{zygote}/children").read_text().split():
        try:
            if Path(f"/proc/{child}/cmdline").read_bytes().endswith(b"--template\0"):
                found[int(child)] = process_times(int(child))
        except OSError:
            pass
    return found


def machine_busy() -> float:
    """Seconds of CPU the whole machine spent neither idle nor waiting on I/O nor stolen."""
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) / TICKS for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9])
    return user + nice + system + irq + softirq


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--workload", choices=("no-op", "python-ab", "js-ab"), default="no-op", help="python-ab, js-ab: latency.py's a+b in plain slots (--server-env RUN_PRESTART=true: prestarted)")
    add_load_argument(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp, "noop")
        (workspace / "check").mkdir(parents=True)
        (workspace / "Makefile").write_text(".PHONY: test\ntest:\n\t@true\n")
        env = {"RUN_CONCURRENCY": str(args.concurrency), "RUN_LOG_FORMAT": "json", "RUN_WORKSPACE": str(workspace)}
        payload = json.dumps({"lang_slug": "python", "solution_text": ""}).encode()
        if args.workload != "no-op":
            env = {"RUN_CONCURRENCY": str(args.concurrency), "RUN_LOG_FORMAT": "json", "RUN_PRESTART": "false"}
            slug, solution = ("python", AB_SOLUTION) if args.workload == "python-ab" else ("js", AB_JS)
            payload = json.dumps({"lang_slug": slug, "solution_text": solution, "asserts": AB_ASSERTS}).encode()
        server = Server({**env, **dict(item.split("=", 1) for item in args.server_env)}).wait_ready()
        try:
            pids = server.pids()
            rate(server.port, payload, args.clients, 2, args.load)  # warm-up
            before = {name: process_times(pid) for name, pid in pids.items()}, machine_busy(), templates(pids["zygote"])
            measured = rate(server.port, payload, args.clients, args.seconds, args.load)
            after = {name: process_times(pid) for name, pid in pids.items()}, machine_busy(), templates(pids["zygote"])
        finally:
            server.stop()
    runs, errors, seconds = measured["runs"], measured["errors"], measured["seconds"]
    if errors:
        print(f"{errors} errors; the first: {measured['first_error']}", file=sys.stderr)
    delta = lambda name, key: after[0][name][key] - before[0][name][key]  # noqa: E731
    per_run_ms = {
        "front": delta("front", "own"),
        "zygote": delta("zygote", "own"),
        "slots and tasks": delta("zygote", "children"),
        "templates": sum(after[2][pid]["own"] - times["own"] for pid, times in before[2].items() if pid in after[2]),
    }
    per_run_ms["rest of the machine"] = after[1] - before[1] - sum(per_run_ms.values())
    per_run_ms = {name: round(1000 * value / runs, 3) for name, value in per_run_ms.items()}
    report = {
        "runs": runs,
        "runs_per_s": round(runs / seconds, 1),
        "errors": errors,
        "load_generator": args.load,
        "cpu_ms_per_run": per_run_ms,
        "cpu_ms_per_run_total": round(sum(per_run_ms.values()), 3),
        "page_faults_per_run": {"zygote": round(delta("zygote", "faults") / runs, 1), "slots and tasks": round(delta("zygote", "children_faults") / runs, 1)},
        "server_env": args.server_env,
        "workload": args.workload,
    }
    print(f"{runs} {args.workload} runs in {seconds:.1f} s at {args.clients} clients ({args.load}): {report['runs_per_s']} runs/s, {errors} errors")
    print("CPU ms per run: " + ", ".join(f"{name} {value}" for name, value in per_run_ms.items()) + f" (total {report['cpu_ms_per_run_total']})")
    print("page faults per run: " + ", ".join(f"{name} {value}" for name, value in report["page_faults_per_run"].items()))
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "cpu.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
