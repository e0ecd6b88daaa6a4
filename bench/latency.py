"""kiln vs the bare command: latency at one connection, throughput at several.

Starts its own kiln servers (root needed), then for each workload alternates a kiln request and
the same command run bare, so drift of a shared machine hits both sides alike. Prints a table
and writes it as JSON (bench/results/latest.json).

    .venv/bin/python bench/latency.py [--runs 300] [--clients 8] [--seconds 10] [--paced-runs 40 --pause 0.2]

"paced" columns: one connection again, each run of either side after `--pause` seconds idle.
"loaded" columns: at --clients connections (kiln) and the bare command at as many at once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from client import KilnClient, add_load_argument, rate  # noqa: E402 - bench/ is this script's folder
from kilntest import Server  # noqa: E402 - the tests' server harness starts kiln the same way

AB_SOLUTION = "import json\n\nwith open('asserts.json') as f:\n    data = json.load(f)\nprint(data['a'] + data['b'])\n"
AB_ASSERTS = '{"a": 2, "b": 3}'
AB_JS = "const d = JSON.parse(require('fs').readFileSync('asserts.json', 'utf8'));\nconsole.log(d.a + d.b);\n"


class Connection(KilnClient):
    def run(self, payload: bytes) -> tuple[float, int]:
        elapsed, answer = self.post_run(payload)
        return elapsed, answer["exit_code"]


# what a task gets from kiln: nothing of this machine's environment (NODE_EXTRA_CA_CERTS alone
# costs node ~20 ms at startup)
BARE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def bare_env(cwd: str) -> dict[str, str]:
    return {**BARE_ENV, "HOME": cwd}


def bare(argv: list[str], cwd: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one bare run."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=bare_env(cwd))
    _, _status, rusage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return time.perf_counter() - started, rusage.ru_utime + rusage.ru_stime


def bare_load(argv: list[str], cwd: str, clients: int, seconds: float) -> dict:
    """The bare command at `clients` at once for `seconds` (a thread each, spawning and waiting
    with the GIL released): its latencies under the same saturation as kiln's loaded figures.
    Its p99 against its p50 is the machine's tail, whatever runs the command."""
    walls: list[float] = []
    stop = time.monotonic() + seconds
    env = bare_env(cwd)
    # as bare(): stdin and stdout /dev/null (posix_spawn has no cwd: the process's own, below)
    devnull = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]

    def loop() -> None:
        own = []
        while time.monotonic() < stop:
            started = time.perf_counter()
            pid = os.posix_spawn(argv[0], argv, env, file_actions=devnull)
            os.waitpid(pid, 0)
            own.append(time.perf_counter() - started)
        walls.extend(own)

    threads = [threading.Thread(target=loop) for _ in range(clients)]
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        os.chdir(previous)
    return {"bare_loaded_p50_ms": round(percentile(walls, 0.5) * 1000, 2), "bare_loaded_p99_ms": round(percentile(walls, 0.99) * 1000, 2)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(port: int, payload: bytes, argv: list[str], cwd: str, runs: int, block: int, pause: float = 0.0) -> dict:
    """Alternating kiln and bare so drift hits both; `block` runs of one before switching.
    block=1 alternates every run. On a VM whose idle vCPUs the host deschedules, a run that
    follows a pause is slower in wall time (not CPU) whoever runs it; longer blocks measure both
    sides "hot", and the table says which was used. `pause`: seconds idle before each run of
    either side, as a client that is not a benchmark leaves (a player pressing "check"): what
    the kernel lets go of when idle (an RCU grace period's readiness, a vCPU) is paid again."""
    conn = Connection(port)
    for _ in range(10):  # warm both paths
        conn.run(payload)
        bare(argv, cwd)
    kiln_s, bare_s, bare_cpu = [], [], []
    while len(kiln_s) < runs:
        for _ in range(block):
            time.sleep(pause)
            kiln_s.append(conn.run(payload)[0])
        for _ in range(block):
            time.sleep(pause)
            wall, cpu = bare(argv, cwd)
            bare_s.append(wall)
            bare_cpu.append(cpu)
    ms = lambda v: round(v * 1000, 3)  # noqa: E731
    return {
        "p50_ms": ms(percentile(kiln_s, 0.5)),
        "p90_ms": ms(percentile(kiln_s, 0.9)),
        "p99_ms": ms(percentile(kiln_s, 0.99)),
        "bare_p50_ms": ms(percentile(bare_s, 0.5)),
        "bare_p90_ms": ms(percentile(bare_s, 0.9)),
        "bare_cpu_ms": ms(statistics.median(bare_cpu)),
        "added_p50_ms": ms(percentile(kiln_s, 0.5) - percentile(bare_s, 0.5)),
        "ratio_p50": round(percentile(kiln_s, 0.5) / percentile(bare_s, 0.5), 2),
    }


def memory(server, payload: bytes, runs: int, clients: int) -> dict:
    """USS of a warm slot, and of the front and zygote before and after `runs` runs."""
    import psutil  # noqa: PLC0415

    pids = server.pids()
    zygote = psutil.Process(pids["zygote"])
    slots = [p.memory_full_info().uss for p in zygote.children()]
    before = {name: psutil.Process(pid).memory_full_info().uss for name, pid in pids.items()}
    done = [0]

    def client(count: int) -> None:
        conn = Connection(server.port)
        for _ in range(count):
            conn.run(payload)
        done[0] += count

    threads = [threading.Thread(target=client, args=(runs // clients,)) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = {name: psutil.Process(pid).memory_full_info().uss for name, pid in pids.items()}
    mib = lambda n: round(n / 2**20, 2)  # noqa: E731
    return {
        "runs": done[0],
        "warm_slot_uss_mib": mib(statistics.median(slots)) if slots else None,
        "front_uss_mib": [mib(before["front"]), mib(after["front"])],
        "zygote_uss_mib": [mib(before["zygote"]), mib(after["zygote"])],
        "front_growth_mib": mib(after["front"] - before["front"]),
        "zygote_growth_mib": mib(after["zygote"] - before["zygote"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--only", help="comma-separated workload names")
    parser.add_argument("--block", type=int, default=1, help="runs of one side before switching to the other (1: strict alternation)")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE", help="extra kiln setting for every workload, for A/B runs (e.g. RUN_PRESTART=false); repeatable")
    parser.add_argument("--paced-runs", type=int, default=40, help="runs of each side with --pause before each (0: none)")
    parser.add_argument("--pause", type=float, default=0.2, help="seconds idle before each paced run")
    parser.add_argument("--memory-runs", type=int, default=0, help="also measure memory across this many no-op runs (10000 for the issue's figure)")
    add_load_argument(parser)
    args = parser.parse_args()
    if args.load == "python":
        print("note: the rate is measured with the Python load generator, whose own CPU is taken from the cores kiln runs on (~0.2 ms a run here); install wrk for the figure", file=sys.stderr)
    cpus = len(os.sched_getaffinity(0))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        noop_ws = Path(tmp, "noop")
        (noop_ws / "check").mkdir(parents=True)
        (noop_ws / "Makefile").write_text(".PHONY: test\ntest:\n\t@true\n")
        ab_dir = Path(tmp, "ab")
        ab_dir.mkdir()
        (ab_dir / "solution.py").write_text(AB_SOLUTION)
        (ab_dir / "asserts.json").write_text(AB_ASSERTS)
        (ab_dir / "solution.js").write_text(AB_JS)
        workloads = [
            ("no-op", {"RUN_WORKSPACE": str(noop_ws)}, {"lang_slug": "python", "solution_text": ""}, ["/usr/bin/true"], tmp),
            ("python a+b", {}, {"lang_slug": "python", "solution_text": AB_SOLUTION, "asserts": AB_ASSERTS}, ["/usr/bin/python3", "solution.py"], str(ab_dir)),
            ("python a+b (plain slots)", {"RUN_PRESTART": "false"}, {"lang_slug": "python", "solution_text": AB_SOLUTION, "asserts": AB_ASSERTS}, ["/usr/bin/python3", "solution.py"], str(ab_dir)),
            ("js a+b", {}, {"lang_slug": "js", "solution_text": AB_JS, "asserts": AB_ASSERTS}, ["/usr/bin/node", "solution.js"], str(ab_dir)),
            ("js a+b (plain slots)", {"RUN_PRESTART": "false"}, {"lang_slug": "js", "solution_text": AB_JS, "asserts": AB_ASSERTS}, ["/usr/bin/node", "solution.js"], str(ab_dir)),
        ]
        if args.only:
            workloads = [w for w in workloads if w[0] in args.only.split(",")]
        for name, env, body, argv, cwd in workloads:
            server = Server({"RUN_CONCURRENCY": str(args.concurrency), "RUN_LOG_FORMAT": "json", **env, **dict(item.split("=", 1) for item in args.server_env)}).wait_ready()
            try:
                payload = json.dumps(body).encode()
                if name == "no-op" and args.memory_runs:
                    memory_row = memory(server, payload, args.memory_runs, args.clients)
                row = {"workload": name, "block": args.block, **latency(server.port, payload, argv, cwd, args.runs, args.block)}
                if args.paced_runs:
                    paced = latency(server.port, payload, argv, cwd, args.paced_runs, 1, args.pause)
                    row.update(paced_p50_ms=paced["p50_ms"], paced_bare_p50_ms=paced["bare_p50_ms"], paced_ratio_p50=paced["ratio_p50"])
                load = rate(server.port, payload, args.clients, args.seconds, args.load)
                row.update(clients=args.clients, runs_per_s=load["runs_per_s"], errors=load["errors"], loaded_p50_ms=load["p50_ms"], loaded_p99_ms=load.get("p99_ms"), load_generator=load["load_generator"])
                row.update(bare_load(argv, cwd, args.clients, args.seconds))
                bare_rate = cpus / (row["bare_cpu_ms"] / 1000) if row["bare_cpu_ms"] else None
                row["bare_cpu_bound_runs_per_s"] = round(bare_rate, 1) if bare_rate else None
                row["rate_vs_bare"] = round(load["runs_per_s"] / bare_rate, 3) if bare_rate else None
                if load["first_error"]:
                    row["first_error"] = load["first_error"]
                results.append(row)
            finally:
                server.stop()
    columns = ["workload", "block", "p50_ms", "p90_ms", "p99_ms", "bare_p50_ms", "added_p50_ms", "ratio_p50", "paced_p50_ms", "paced_bare_p50_ms", "paced_ratio_p50", "clients", "loaded_p50_ms", "loaded_p99_ms", "bare_loaded_p50_ms", "bare_loaded_p99_ms", "runs_per_s", "bare_cpu_bound_runs_per_s", "rate_vs_bare", "errors"]
    print(" | ".join(columns))
    for row in results:
        print(" | ".join(str(row.get(c)) for c in columns))
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    report = {"cpus": cpus, "load_average": os.getloadavg(), "server_env": args.server_env, "load_generator": args.load, "results": results}
    if args.memory_runs:
        report["memory"] = memory_row
        print("memory:", json.dumps(memory_row))
    (out / "latest.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
