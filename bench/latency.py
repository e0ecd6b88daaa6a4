"""kiln vs the bare command: latency at one connection, throughput at several.

Starts its own kiln servers (root needed), then for each workload alternates a kiln request and
the same command run bare, so drift of a shared machine hits both sides alike. Prints a table
and writes it as JSON (bench/results/latest.json).

    .venv/bin/python bench/latency.py [--runs 300] [--clients 8] [--seconds 10]
"""

from __future__ import annotations

import argparse
import http.client
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
from kilntest import Server  # noqa: E402 - the tests' server harness starts kiln the same way

AB_SOLUTION = "import json\n\nwith open('asserts.json') as f:\n    data = json.load(f)\nprint(data['a'] + data['b'])\n"
AB_ASSERTS = '{"a": 2, "b": 3}'


class Connection:
    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def run(self, payload: bytes) -> tuple[float, int]:
        started = time.perf_counter()
        self.conn.request("POST", "/run", payload, {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"kiln answered {response.status}: {body[:200]!r}")
        return elapsed, json.loads(body)["exit_code"]


def bare(argv: list[str], cwd: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one bare run."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    _, _status, rusage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return time.perf_counter() - started, rusage.ru_utime + rusage.ru_stime


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(port: int, payload: bytes, argv: list[str], cwd: str, runs: int) -> dict:
    conn = Connection(port)
    for _ in range(10):  # warm both paths
        conn.run(payload)
        bare(argv, cwd)
    kiln_s, bare_s, bare_cpu = [], [], []
    for _ in range(runs):
        kiln_s.append(conn.run(payload)[0])
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


def throughput(port: int, payload: bytes, clients: int, seconds: float) -> dict:
    done, errors = [], []
    stop = time.monotonic() + seconds

    def client() -> None:
        conn = Connection(port)
        while time.monotonic() < stop:
            try:
                done.append(conn.run(payload)[0])
            except Exception as error:  # noqa: BLE001 - counted and shown
                errors.append(repr(error))
                conn = Connection(port)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    return {"runs_per_s": round(len(done) / elapsed, 1), "errors": len(errors), "first_error": errors[0] if errors else None, "p50_ms": round(percentile(done, 0.5) * 1000, 2) if done else None}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()
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
        workloads = [
            ("no-op", {"RUN_WORKSPACE": str(noop_ws)}, {"lang_slug": "python", "solution_text": ""}, ["/usr/bin/true"], tmp),
            ("python a+b", {}, {"lang_slug": "python", "solution_text": AB_SOLUTION, "asserts": AB_ASSERTS}, ["/usr/bin/python3", "solution.py"], str(ab_dir)),
        ]
        for name, env, body, argv, cwd in workloads:
            server = Server({"RUN_CONCURRENCY": str(args.concurrency), "RUN_LOG_FORMAT": "json", **env}).wait_ready()
            try:
                payload = json.dumps(body).encode()
                row = {"workload": name, **latency(server.port, payload, argv, cwd, args.runs)}
                load = throughput(server.port, payload, args.clients, args.seconds)
                row.update(clients=args.clients, runs_per_s=load["runs_per_s"], errors=load["errors"], loaded_p50_ms=load["p50_ms"])
                bare_rate = cpus / (row["bare_cpu_ms"] / 1000) if row["bare_cpu_ms"] else None
                row["bare_cpu_bound_runs_per_s"] = round(bare_rate, 1) if bare_rate else None
                row["rate_vs_bare"] = round(load["runs_per_s"] / bare_rate, 3) if bare_rate else None
                if load["first_error"]:
                    row["first_error"] = load["first_error"]
                results.append(row)
            finally:
                server.stop()
    columns = ["workload", "p50_ms", "p90_ms", "p99_ms", "bare_p50_ms", "added_p50_ms", "ratio_p50", "clients", "runs_per_s", "bare_cpu_bound_runs_per_s", "rate_vs_bare", "errors"]
    print(" | ".join(columns))
    for row in results:
        print(" | ".join(str(row.get(c)) for c in columns))
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "latest.json").write_text(json.dumps({"cpus": cpus, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
