"""The front's own memory and event loop under the judge's worst loads (issue 32 item 7).

Starts one kiln (root needed), then runs each load below while two threads watch the front: one
asks `GET /health` every 10 ms on its own keep-alive connection (its latency: how long the
front's one event loop was held), one reads /proc/<front>/status every 10 ms (VmRSS, RssAnon:
the front's own heap, not the page cache it maps). Per load: the front's RSS before and at its
highest, the anonymous part at its highest, /health's p50, p99 and worst, the front's CPU.

1. **idle**: nothing but /health, the baseline.
2. **1 MiB compared**: one judge request, python, 8 tests whose output is 1 MiB of tokens
   compared by tokens with a 1 MiB expected answer given inline (a 8 MiB body).
3. **48 MiB store files**: a 48 MiB file uploaded to /files once; one judge request of 4 tests,
   each with it as `stdin_file` (the solution reads it in 64 KiB pieces and prints its size)
   and as `expected_file` (a comparison that fails at the first token).
4. **many in flight**: 24 judge requests at once, each a 4 MiB body (4 tests of 1 MiB inline
   input the solution ignores), most of them waiting for admission (RUN_JUDGE_MAX).
5. **a 60 MiB build**: one C++ judge request whose program holds 60 MiB of initialised data
   (a file may not pass 64 MiB: RLIMIT_FSIZE), so its build leaves a 60 MiB binary: its layer
   received, parsed and written by the front.
6. **48 MiB checked**: a 48 MiB input and a 48 MiB answer uploaded to /files; one judge request
   of 4 tests with them as `stdin_file` and `expected_file` and a python checker (it reads the
   test's output, its input's and its answer's sizes): the checker's three files.

    .venv/bin/python bench/front.py [--loads 1,2,3,4,5,6] [--concurrency 4]

Writes bench/results/front.json. The figures are one run's: compare them within a run, and the
same load before and after a change on the same machine.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
from cpu import process_times  # noqa: E402 - bench/ is this script's folder
from kilntest import Server  # noqa: E402

MIB = 1 << 20
ECHO_TOKENS = "import sys\nsys.stdout.write('1 ' * (%d // 2))\n" % MIB  # 1 MiB of output, 524288 tokens
SIZE_OF_STDIN = "import sys\nn = 0\nwhile chunk := sys.stdin.buffer.read(65536):\n    n += len(chunk)\nprint(n)\n"
IGNORE_STDIN = "print(3)\n"


class Watch:
    """/health's latencies and the front's memory, sampled every 10 ms until stopped."""

    def __init__(self, port: int, front: int):
        self.port, self.front = port, front
        self.latencies: list[float] = []
        self.rss: list[int] = []
        self.anon: list[int] = []
        self.failures = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._health, daemon=True), threading.Thread(target=self._memory, daemon=True)]

    def __enter__(self) -> "Watch":
        self.cpu_before = process_times(self.front)["own"]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.cpu_s = process_times(self.front)["own"] - self.cpu_before

    def _health(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                conn.request("GET", "/health")
                conn.getresponse().read()
                self.latencies.append(time.perf_counter() - started)
            except (OSError, http.client.HTTPException):
                self.failures += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            self._stop.wait(0.01)

    def _memory(self) -> None:
        while not self._stop.is_set():
            status = front_status(self.front)
            self.rss.append(status["VmRSS"])
            self.anon.append(status["RssAnon"])
            self._stop.wait(0.01)

    def figures(self) -> dict:
        ms = sorted(1000 * s for s in self.latencies) or [0.0]
        return {
            "rss_peak_mib": round(max(self.rss, default=0) / 1024, 1),
            "anon_peak_mib": round(max(self.anon, default=0) / 1024, 1),
            "health_p50_ms": round(statistics.median(ms), 1),
            "health_p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 1),
            "health_max_ms": round(ms[-1], 1),
            "health_asked": len(self.latencies),
            "health_failed": self.failures,
            "front_cpu_s": round(self.cpu_s, 2),
        }


def front_status(pid: int) -> dict[str, int]:
    """The kB fields of /proc/<pid>/status."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if value.strip().endswith(" kB"):
            fields[name] = int(value.split()[0])
    return fields


def judge(port: int, body: bytes) -> tuple[int, str]:
    """(status, verdict or the error) of one POST /judge on a connection of its own."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request("POST", "/judge", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        answer = json.loads(response.read() or b"{}")
        return response.status, answer.get("verdict") or str(answer.get("error"))[:80]
    finally:
        conn.close()


def upload(port: int, data: bytes) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/files", data, {"Content-Type": "application/octet-stream"})
    response = conn.getresponse()
    answer = json.loads(response.read())
    if response.status not in (200, 201):
        raise RuntimeError(f"/files answered {response.status}: {answer}")
    return answer["id"]


def request(solution: str, tests: list[dict], **fields) -> bytes:
    return json.dumps({"lang_slug": "python", "solution_text": solution, "tests": tests, "limits": {"time": "5s", "memory": "256m"}, **fields}).encode()


def load_compared(port: int) -> list[tuple[int, str]]:
    expected = "1 " * (MIB // 2)
    return [judge(port, request(ECHO_TOKENS, [{"stdin": "", "expected": expected}] * 8))]


def load_store_files(port: int) -> list[tuple[int, str]]:
    file_id = upload(port, b"7 " * (24 * MIB))
    return [judge(port, request(SIZE_OF_STDIN, [{"stdin_file": file_id, "expected_file": file_id}] * 4))]


def load_in_flight(port: int) -> list[tuple[int, str]]:
    body = request(IGNORE_STDIN, [{"stdin": "x" * MIB, "expected": "3"}] * 4)
    with concurrent.futures.ThreadPoolExecutor(24) as pool:
        return list(pool.map(lambda _: judge(port, body), range(24)))


def load_big_build(port: int) -> list[tuple[int, str]]:
    solution = "#include <cstdio>\nchar big[60 << 20] = {1};\nint main() { std::printf(\"%d\\n\", big[0] + 2); }\n"
    body = json.dumps({"lang_slug": "cpp", "solution_text": solution, "tests": [{"stdin": "", "expected": "3"}], "limits": {"time": "5s", "memory": "512m"}, "compile_timeout": "120s"}).encode()
    return [judge(port, body)]


# the checker: the test's output must be its input's size, and the answer must be there whole
CHECKS_SIZES = "import os, sys\nsys.exit(0 if open(sys.argv[2]).read().split() == [str(os.path.getsize(sys.argv[1]))] and os.path.getsize(sys.argv[3]) == %d else 1)\n" % (48 * MIB)


def load_checked(port: int) -> list[tuple[int, str]]:
    given, answer = upload(port, b"7 " * (24 * MIB)), upload(port, b"1\n" * (24 * MIB))
    checker = {"compare": "checker", "checker": {"lang_slug": "python", "source": CHECKS_SIZES}}
    return [judge(port, request(SIZE_OF_STDIN, [{"stdin_file": given, "expected_file": answer}] * 4, **checker))]


LOADS = {
    "1": ("idle", lambda port: (time.sleep(2), [])[1]),
    "2": ("1 MiB compared", load_compared),
    "3": ("48 MiB store files", load_store_files),
    "4": ("many in flight", load_in_flight),
    "5": ("a 60 MiB build", load_big_build),
    "6": ("48 MiB checked", load_checked),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", default="1,2,3,4,5,6")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    env = {"RUN_LANGS": "python,cpp" if "5" in args.loads.split(",") else "python", "RUN_CONCURRENCY": str(args.concurrency), "RUN_FILE_MAX": "64m", **dict(item.split("=", 1) for item in args.server_env)}
    server = Server(env).wait_ready()
    report = {"server_env": env, "loads": {}}
    try:
        front = server.pids()["front"]
        judge(server.port, request(IGNORE_STDIN, [{"stdin": "", "expected": "3"}]))  # the build cached, the code paths warm
        for key in args.loads.split(","):
            name, run = LOADS[key]
            before = front_status(front)
            started = time.monotonic()
            with Watch(server.port, front) as watch:
                answers = run(server.port)
            figures = {"rss_before_mib": round(before["VmRSS"] / 1024, 1), **watch.figures(), "seconds": round(time.monotonic() - started, 1)}
            figures["hwm_mib"] = round(front_status(front)["VmHWM"] / 1024, 1)
            figures["answers"] = {f"{status} {verdict}": sum(1 for a in answers if a == (status, verdict)) for status, verdict in sorted(set(answers))}
            report["loads"][name] = figures
            print(
                f"{name:20} RSS {figures['rss_before_mib']:6.1f} -> peak {figures['rss_peak_mib']:6.1f} MiB (anon peak {figures['anon_peak_mib']:6.1f}, HWM {figures['hwm_mib']:6.1f});"
                f" /health p50 {figures['health_p50_ms']:6.1f} p99 {figures['health_p99_ms']:7.1f} max {figures['health_max_ms']:7.1f} ms ({figures['health_asked']} asked, {figures['health_failed']} failed);"
                f" front CPU {figures['front_cpu_s']:.2f} s in {figures['seconds']} s; answers {figures['answers']}",
                flush=True,
            )
    finally:
        server.stop()
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "front.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
