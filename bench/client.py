"""The benches' HTTP client: one keep-alive connection to a kiln on loopback, and a load of
many at once."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time


class KilnClient:
    def __init__(self, port: int, timeout_s: float = 120):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)

    def get(self, path: str) -> bytes:
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status} {body[:300]!r}")
        return body

    def settle(self, slots: int = 0, timeout_s: float = 30.0) -> None:
        """Until no run is in flight and at least `slots` slots are warm (GET /metrics): no
        re-warm, nor a run a load generator left behind, competes with what comes next."""
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.get("/metrics").decode()
            warm = re.search(r'^kiln_slots\{state="warm"\} (\S+)$', text, re.M)
            busy = re.search(r"^kiln_runs_in_flight (\S+)$", text, re.M)
            if warm and float(warm.group(1)) >= slots and (not busy or float(busy.group(1)) == 0):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"kiln not settled (runs in flight, or fewer than {slots} slots warm) after {timeout_s}s")
            time.sleep(0.005)

    def post_run(self, payload: bytes) -> tuple[float, dict]:
        """(seconds from sending the request to the end of the answer, the answer)."""
        return self.post("/run", payload)

    def post(self, path: str, payload: bytes) -> tuple[float, dict]:
        """POST a JSON payload: (seconds from sending it to the end of the answer, the answer)."""
        started = time.perf_counter()
        self.conn.request("POST", path, payload, {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"{path} answered {response.status}: {body[:500]!r}")
        return elapsed, json.loads(body)


def load(connect, run_once, clients: int, seconds: float) -> tuple[list, list[str], float]:
    """`clients` threads, each with its own client (`connect()`), calling `run_once(client)`
    back to back for `seconds`. Returns what the runs returned, the errors (a run that raised;
    its thread then connects again) and the seconds it took."""
    done, errors = [], []
    stop = time.monotonic() + seconds

    def client() -> None:
        conn = connect()
        while time.monotonic() < stop:
            try:
                done.append(run_once(conn))
            except Exception as error:  # noqa: BLE001 - counted and shown
                errors.append(repr(error))
                conn = connect()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done, errors, time.monotonic() - started


# wrk's Lua hooks: every answer checked (a 200 whose body starts with exit code 0), the counts
# and the latency percentiles printed as one line for wrk_load to read
_WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [{level}[{payload}]{level}]
local threads = {{}}
function setup(thread) table.insert(threads, thread) end
function init(args) ok = 0; bad = 0; first_bad = "" end
function response(status, headers, body)
  if status == 200 and string.find(body, '^{{"exit_code":0,') then
    ok = ok + 1
  else
    bad = bad + 1
    if first_bad == "" then first_bad = status .. " " .. string.sub(body, 1, 200) end
  end
end
function done(summary, latency, requests)
  local ok_all, bad_all, first = 0, 0, ""
  for _, t in ipairs(threads) do
    ok_all = ok_all + t:get("ok")
    bad_all = bad_all + t:get("bad")
    if first == "" then first = t:get("first_bad") end
  end
  local e = summary.errors
  io.write(string.format("KILN %d %d %d %d %d %d %d %s\\n", ok_all, bad_all, e.connect + e.read + e.write + e.timeout,
    summary.duration, latency:percentile(50), latency:percentile(90), latency:percentile(99), first))
end
"""


def add_load_argument(parser) -> None:
    parser.add_argument("--load", choices=("wrk", "python"), default="wrk" if shutil.which("wrk") else "python", help="what makes the load (default: wrk when installed; `make bench` installs it)")


def rate(port: int, payload: bytes, clients: int, seconds: float, generator: str) -> dict:
    """Runs a second with `clients` keep-alive connections posting `payload` back to back,
    made by wrk or by load(); an answer that is not a run that exited 0 counts as an error."""
    if generator == "wrk":
        return wrk_load(port, payload, clients, seconds)

    def run_once(client: KilnClient) -> float:
        elapsed, answer = client.post_run(payload)
        if answer["exit_code"] != 0:
            raise RuntimeError(f"the run exited {answer['exit_code']}")
        return elapsed

    done, errors, elapsed = load(lambda: KilnClient(port), run_once, clients, seconds)
    done.sort()
    return {
        "runs": len(done),
        "seconds": elapsed,
        "runs_per_s": round(len(done) / elapsed, 1),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "p50_ms": round(done[len(done) // 2] * 1000, 2) if done else None,
        "load_generator": "python",
    }


def wrk_load(port: int, payload: bytes, clients: int, seconds: float) -> dict:
    """The load of load(), made by wrk (C, epoll, one thread): the Python generator's own CPU
    (~0.2 ms a request here, 8 threads under one GIL) is taken from the 2 cores kiln runs on.
    Returns runs/s (answers of a run that exited 0), errors (anything else, and socket
    errors), the first bad answer, and the latency percentiles wrk saw."""
    body = payload.decode()
    level = "=" * next(n for n in range(1, 100) if f"]{'=' * n}]" not in body)
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(_WRK_SCRIPT.format(level=level, payload=body))
        script.flush()
        argv = ["wrk", "-t1", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--timeout", "60s", "-s", script.name, f"http://127.0.0.1:{port}/run"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120)
    KilnClient(port).settle()  # wrk leaves with requests in flight: kiln cancels them, and counts them until it has
    line = next((line for line in done.stdout.splitlines() if line.startswith("KILN ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    fields = line.split(" ", 8)
    ok, bad, socket_errors, duration_us, p50, p90, p99 = (int(x) for x in fields[1:8])
    return {
        "runs": ok,
        "seconds": duration_us / 1e6,
        "runs_per_s": round(ok / (duration_us / 1e6), 1),
        "errors": bad + socket_errors,
        "first_error": (fields[8] if len(fields) > 8 else "") or None,
        "p50_ms": round(p50 / 1000, 2),
        "p90_ms": round(p90 / 1000, 2),
        "p99_ms": round(p99 / 1000, 2),
        "load_generator": "wrk",
    }


def run_facts(started_at: float, load_start: tuple, load_end: tuple) -> dict:
    """What a bench's JSON report says of its run: when, how long, the machine and its load."""
    return {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
        "elapsed_s": round(time.time() - started_at, 1),
        "cpus": len(os.sched_getaffinity(0)),
        "kernel": os.uname().release,
        "loadavg_start": [round(v, 2) for v in load_start],
        "loadavg_end": [round(v, 2) for v in load_end],
    }
