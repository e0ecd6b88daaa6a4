"""Soak: 16 clients for a while, mixing normal runs and judge requests (cached and new builds,
checker, interactor, both, big stored files) with every kind of misbehaviour.

`make test` runs it for 60 s; `make soak` for 10 minutes (`--soak-seconds`). Afterwards every
request must have had the answer its scenario calls for, every slot must be warm again, nothing
may be left behind, and the front's and zygote's memory must not have grown.
"""

from __future__ import annotations

import collections
import json
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import httpx
import psutil

from kilntest import Proc, Server, SlotView, alive, descendants

CLIENTS = 16
CONCURRENCY = 10
RSS_GROWTH_MAX = 5 * 2**20

AB = "def solution(a, b):\n    return a + b\n"
AB_ARGS = {"arguments": [[1, 2], [3, 4]]}
AB_JS = "module.exports = (a, b) => a + b;\n"


@dataclass(frozen=True)
class Scenario:
    name: str
    # None: a client that hangs up mid-run; "half-close": see half_close; a function of the
    # client's random numbers and the stored files' ids: a payload made afresh for each request
    payload: dict | str | None | Callable[[random.Random, dict], dict]
    expect: callable
    weight: int = 1
    path: str = "/run"


def _ok_json(values):
    def check(r: httpx.Response) -> bool:
        body = r.json()
        return r.status_code == 200 and body["exit_code"] == 0 and [i["value"] for i in json.loads(body["stdout"])] == values

    return check


def _outcome(outcome: str, stdout: str | None = None):
    def check(r: httpx.Response) -> bool:
        body = r.json()
        return r.status_code == 200 and body["stats"]["outcome"] == outcome and (stdout is None or body["stdout"] == stdout)

    return check


def _verdicts(verdicts: list[str]):
    return lambda r: r.status_code == 200 and [t["verdict"] for t in r.json()["tests"]] == verdicts


def _status(status: int, error: str):
    return lambda r: r.status_code == status and r.json() == {"error": error}


HUGE = "#" * 900_000 + "\nprint(len(open(__file__).read()))\n"
# the supervisor starved as a run once could (tests/security/test_supervisor.py): idle-scheduled
# and pinned to the CPU its spinners keep busy, while the program works on past its timeout. On
# this saturated host its deadline moves by the time it is starved of CPU by the other runs, up to
# 3 times its timeout (kiln-init's starve.c): it sleeps past even that
ESCAPE = (
    "import os, time\n"
    "for call, args in ((os.sched_setscheduler, (1, os.SCHED_IDLE, os.sched_param(0))), (os.sched_setaffinity, (1, {0}))):\n"
    "    try:\n        call(*args)\n    except OSError:\n        pass\n"
    "for _ in range(24):\n"
    "    if os.fork() == 0:\n        while True:\n            pass\n"
    "time.sleep(5)\n"
    "print('outlived its timeout', flush=True)\n"
)
JUDGED = "import sys\nn = int(sys.stdin.read())\nif n < 0:\n    x = bytearray(200 << 20)\nprint(n * 2)\n"
JUDGE_TESTS = [{"stdin": "1", "expected": "2"}, {"stdin": "2", "expected": "5"}, {"stdin": "-1", "expected": "0"}, {"stdin": "3", "expected": "6"}, {"stdin": "4", "expected": "8"}]
JUDGE_VERDICTS = ["AC", "WA", "MLE", "AC", "AC"]
# says a number to the submission and expects the next one back
INTERACTOR = "import sys\nn = int(open(sys.argv[1]).read())\nprint(n, flush=True)\nsys.exit(0 if int(sys.stdin.readline()) == n + 1 else 1)\n"
# a checker in testlib's convention: AC, WA, or PE for an empty answer
CHECKER = (
    "import sys\n"
    "given, said, answer = (open(path).read().split() for path in sys.argv[1:4])\n"
    "sys.exit(2 if not said else 0 if said == answer else 1)\n"
)
# an interactor that only talks and records what it heard; the problem's checker judges the record
RECORDER = "import sys\na, b = open(sys.argv[1]).read().split()\nprint(a, b, flush=True)\nopen(sys.argv[2], 'w').write(sys.stdin.readline())\n"
RECORD_CHECKER = "import sys\ngiven, record = (open(path).read().split() for path in sys.argv[1:3])\nsys.exit(0 if record == [str(int(given[0]) + int(given[1]))] else 1)\n"
SUMS = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"  # of a stored file of ones
CPP_DOUBLES = "#include <cstdio>\nint main() { long n; if (scanf(\"%ld\", &n) != 1) return 3; printf(\"%ld\\n\", 2 * n); }\n"
STORED_ONES = 1 << 20  # "1 " times this: a 2 MiB input, uploaded once to the file store


def uncached(source: str, comment: str):
    """A payload whose source differs on every request (a new comment): its build is never cached."""
    return lambda rng, stored: {**PAYLOADS[source], "solution_text": PAYLOADS[source]["solution_text"] + f"{comment} {rng.getrandbits(64)}\n"}


PAYLOADS = {
    "python": {"lang_slug": "python", "solution_text": JUDGED, "tests": JUDGE_TESTS, "limits": {"memory": "64m"}},
    "cpp": {"lang_slug": "cpp", "solution_text": CPP_DOUBLES, "tests": [{"stdin": "21", "expected": "42"}, {"stdin": "x", "expected": "0"}, {"stdin": "5", "expected": "11"}]},
}
SCENARIOS = [
    Scenario("python a+b", {"lang_slug": "python", "solution_text": AB, "asserts": AB_ARGS}, _ok_json([3, 7]), 6),
    Scenario("js a+b", {"lang_slug": "js", "solution_text": AB_JS, "asserts": AB_ARGS}, _ok_json([3, 7]), 3),
    Scenario("plain program", {"lang_slug": "python", "solution_text": "import json\nd = json.load(open('asserts.json'))\nprint(d['a'] + d['b'])\n", "asserts": '{"a": 2, "b": 3}'}, _outcome("exited", "5\n"), 3),
    Scenario("timeout", {"lang_slug": "python", "solution_text": "print('x', flush=True)\nwhile True: pass\n", "timeout": "500ms"}, _outcome("timed_out", "x\n")),
    Scenario("memory bomb", {"lang_slug": "python", "solution_text": "x = []\nwhile True:\n    x.append(bytearray(8 << 20))\n"}, _outcome("out_of_memory")),
    Scenario("fork bomb", {"lang_slug": "python", "solution_text": "import os, time\nwhile True:\n    try:\n        if os.fork() == 0:\n            time.sleep(30)\n    except OSError:\n        break\nprint('stopped')\n", "timeout": "5s"}, _outcome("pids_limit")),
    Scenario("output flood", {"lang_slug": "python", "solution_text": "import sys\nwhile True:\n    sys.stdout.write('y' * 65536)\n"}, _status(413, "output too large")),
    Scenario("seccomp violation", {"lang_slug": "python", "solution_text": "import ctypes\nprint('before', flush=True)\nctypes.CDLL(None).unshare(0x10000000)\nprint('after')\n"}, _outcome("policy_violation", "before\n")),
    Scenario("kill -1", {"lang_slug": "python", "solution_text": "import os, signal, subprocess\nsubprocess.Popen(['sleep', '30'])\nos.kill(-1, signal.SIGKILL)\nprint('alive')\n"}, _outcome("exited", "alive\n")),
    Scenario("huge input", {"lang_slug": "python", "solution_text": HUGE}, _outcome("exited", f"{len(HUGE)}\n")),
    Scenario("bad request", {"lang_slug": "cobol", "solution_text": ""}, _status(400, "unsupported lang_slug")),
    Scenario("hang-up", None, lambda r: r is None),
    Scenario("timeout escape", {"lang_slug": "python", "solution_text": ESCAPE, "timeout": "1s", "stdin": ""}, _outcome("timed_out", "")),
    Scenario("timeout escape, prestarted", {"lang_slug": "python", "solution_text": ESCAPE, "timeout": "1s"}, _outcome("timed_out", "")),
    Scenario("half-close", "half-close", lambda r: r is None),
    # a judge's tests one after another in kept slots: a failing test between passing ones, and
    # one killed for memory, must leave the next tests' verdicts their own
    Scenario("judge", {"lang_slug": "python", "solution_text": JUDGED, "tests": JUDGE_TESTS, "limits": {"memory": "64m"}}, _verdicts(JUDGE_VERDICTS), 2, "/judge"),
    Scenario("interactive judge", {"lang_slug": "python", "solution_text": "print(int(input()) + 1, flush=True)\n", "tests": [{"stdin": "41"}, {"stdin": "1"}],
                                   "interactor": {"lang_slug": "python", "source": INTERACTOR}}, _verdicts(["AC", "AC"]), 1, "/judge"),
    # builds that miss the cache, each its own: a python one and a compiled one
    Scenario("judge, new build", uncached("python", "#"), _verdicts(JUDGE_VERDICTS), 1, "/judge"),
    Scenario("judge, new C++ build", uncached("cpp", "//"), _verdicts(["AC", "RE", "WA"]), 1, "/judge"),
    Scenario("judge, checker", {"lang_slug": "python", "solution_text": "n = input()\nif n != '0':\n    print(n)\n", "compare": "checker", "checker": {"lang_slug": "python", "source": CHECKER},
                                "tests": [{"stdin": "7", "expected": "7"}, {"stdin": "8", "expected": "9"}, {"stdin": "0", "expected": "0"}]}, _verdicts(["AC", "WA", "PE"]), 1, "/judge"),
    Scenario("judge, interactor and checker", {"lang_slug": "python", "solution_text": "a, b = map(int, input().split())\nprint(a + b if a != 5 else a - b, flush=True)\n",
                                               "tests": [{"stdin": "1 2"}, {"stdin": "5 5"}], "interactor": {"lang_slug": "python", "source": RECORDER},
                                               "checker": {"lang_slug": "python", "source": RECORD_CHECKER}}, _verdicts(["AC", "WA"]), 1, "/judge"),
    # tests whose input and answers are big files of the store
    Scenario("judge, stored files", lambda rng, stored: {"lang_slug": "python", "solution_text": SUMS, "tests": [
        {"stdin_file": stored["ones"], "expected_file": stored["count"]}, {"stdin_file": stored["ones"], "expected": "0"}]}, _verdicts(["AC", "WA"]), 1, "/judge"),
]


@dataclass
class Tally:
    latencies: dict = field(default_factory=lambda: collections.defaultdict(list))
    counts: collections.Counter = field(default_factory=collections.Counter)
    failures: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, scenario: str, outcome: str, seconds: float, failure: str | None = None) -> None:
        with self.lock:
            self.counts[(scenario, outcome)] += 1
            self.latencies[scenario].append(seconds)
            if failure:
                self.failures.append(failure)


def half_close(port: int) -> str | None:
    """A client that shuts its side once the request is sent, then reads the answer: it must get
    it whole (None), after any interim response; else what went wrong."""
    body = json.dumps({"lang_slug": "python", "solution_text": AB, "asserts": AB_ARGS}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        conn.sendall(b"POST /run HTTP/1.1\r\nHost: soak\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        conn.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    final = data.split(b"HTTP/1.1 100 Continue\r\n\r\n")[-1]
    if final.startswith(b"HTTP/1.1 429 "):
        return None
    if not final.startswith(b"HTTP/1.1 200 ") or [i["value"] for i in json.loads(json.loads(final.split(b"\r\n\r\n", 1)[1])["stdout"])] != [3, 7]:
        return f"half-close: {final[:300]!r}"
    return None


def hang_up(port: int) -> None:
    body = json.dumps({"lang_slug": "python", "solution_text": "import time\ntime.sleep(20)\n", "timeout": "30s"}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"POST /run HTTP/1.1\r\nHost: soak\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        time.sleep(0.2)


def client(server: Server, seed: int, stop_at: float, tally: Tally, stored: dict) -> None:
    rng = random.Random(seed)
    weights = [s.weight for s in SCENARIOS]
    with httpx.Client(base_url=server.url, timeout=60) as http:
        while time.monotonic() < stop_at:
            scenario = rng.choices(SCENARIOS, weights)[0]
            started = time.monotonic()
            try:
                if scenario.payload is None:
                    hang_up(server.port)
                    tally.record(scenario.name, "hung up", time.monotonic() - started)
                    continue
                if scenario.payload == "half-close":
                    failure = half_close(server.port)
                    tally.record(scenario.name, "unexpected" if failure else "as expected", time.monotonic() - started, failure)
                    continue
                payload = scenario.payload(rng, stored) if callable(scenario.payload) else scenario.payload
                response = http.post(scenario.path, json=payload)
            except httpx.HTTPError as error:
                tally.record(scenario.name, "transport error", time.monotonic() - started, f"{scenario.name}: {error!r}")
                continue
            elapsed = time.monotonic() - started
            if response.status_code == 429:
                tally.record(scenario.name, "429", elapsed)  # every slot busy: a valid answer
                time.sleep(0.05)
            elif scenario.expect(response):
                tally.record(scenario.name, "as expected", elapsed)
            else:
                tally.record(scenario.name, f"unexpected {response.status_code}", elapsed, f"{scenario.name}: {response.status_code} {response.text[:300]}")


def rss(pid: int) -> int:
    return psutil.Process(pid).memory_full_info().uss


def test_soak(request, tmp_path):
    seconds = request.config.getoption("--soak-seconds")
    server = Server({"RUN_CONCURRENCY": str(CONCURRENCY), "RUN_CGROUP_MEMORY_MAX": "128m", "RUN_PIDS_MAX": "64", "RUN_OUTPUT_MAX": "256k", "RUN_INPUT_MAX": "1m"}).wait_ready()
    try:
        pids = server.pids()
        mounts_before = len(Path("/proc/self/mountinfo").read_text().splitlines())
        tmp_before = set(Path("/tmp").iterdir())
        tally = Tally()
        stored = {name: server.client.post("/files", content=data).json()["id"] for name, data in (("ones", b"1 " * STORED_ONES), ("count", b"%d\n" % STORED_ONES))}
        # a first stretch so that the front's and zygote's lazy allocations happen before measuring:
        # long enough that the allocator has met the load's peaks (up to 16 answers of 2 x 256 KiB
        # output at once) — a 60 s run after a 10 s warm-up once measured a one-off 5.3 MiB step
        # where 240 s runs measure 1.3 MiB: arenas, not a leak
        warm_up_until = time.monotonic() + min(20.0, seconds / 3)
        threads = [threading.Thread(target=client, args=(server, i, warm_up_until, tally, stored)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rss_before = {name: rss(pid) for name, pid in pids.items()}
        stop_at = time.monotonic() + seconds
        threads = [threading.Thread(target=client, args=(server, 100 + i, stop_at, tally, stored)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print_summary(tally)
        assert not tally.failures, tally.failures[:10]
        assert sum(n for (_, outcome), n in tally.counts.items() if outcome == "as expected") > CLIENTS

        # every slot warm again (plain, or prestarted for a language), nothing busy: the zygote's
        # children are exactly the warm slots and one template per served language whose
        # workspace has one (a slot that just ended, a zombie, is neither), and under the slots
        # only the prestart commands
        templates = template_languages(server)

        def warm(children: list[Proc]) -> list[SlotView]:
            return [slot for slot in map(SlotView.of, children) if slot and slot.state == "warm"]

        def settled(children: list[Proc]) -> bool:
            running = [p for p in children if p.title.endswith(" --template")]
            return len(running) == templates and len(warm(children)) == CONCURRENCY == len(children) - templates

        deadline = time.monotonic() + 30
        while not settled(children := server.children()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert settled(children), children
        prestarted = sum(slot.lang is not None for slot in warm(children))
        # no task left under a slot: a prestarted slot holds its waiting task, a plain one its
        # task process made while warming (kiln/native/standby.c)
        assert len(descendants(pids["zygote"])) == CONCURRENCY + CONCURRENCY + templates
        growth = {name: rss(pid) - rss_before[name] for name, pid in pids.items()}
        print(f"memory (USS) growth after warm-up: front {growth['front'] / 2**20:.2f} MiB, zygote {growth['zygote'] / 2**20:.2f} MiB")
        assert all(g < RSS_GROWTH_MAX for g in growth.values()), growth
        assert server.client.get("/health").status_code == 200
    finally:
        assert server.stop() == 0
    # nothing left: processes, mounts, cgroups, runtime folder, temp files
    assert not alive(pids["zygote"])
    assert len(Path("/proc/self/mountinfo").read_text().splitlines()) <= mounts_before
    assert not Path(f"/run/{server.instance}").exists()
    leftover_cgroups = [p for p in Path("/sys/fs/cgroup").glob(f"*/**/{server.instance}") if p.is_dir()]
    assert leftover_cgroups == []
    new_tmp = {p for p in set(Path("/tmp").iterdir()) - tmp_before if server.instance in p.name}
    assert new_tmp == set()


def template_languages(server: Server) -> int:
    """The served languages whose workspace has a `template` target (each template command ends
    in --template, as the workspaces write them)."""
    served = [language["slug"] for language in server.client.get("/languages").json()["languages"]]
    langs = Path(__file__).resolve().parents[2] / "langs"
    return sum(1 for slug in served if "\ntemplate:" in (langs / slug / "Makefile").read_text())


def print_summary(tally: Tally) -> None:
    print(f"\n{'scenario':<30} {'answer':<26} {'runs':>6} {'p50 ms':>8} {'p99 ms':>8}")
    for (scenario, outcome), n in sorted(tally.counts.items()):
        lat = sorted(tally.latencies[scenario])
        p50, p99 = lat[len(lat) // 2] * 1000, lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
        print(f"{scenario:<30} {outcome:<26} {n:>6} {p50:>8.1f} {p99:>8.1f}")
    print(f"errors: {len(tally.failures)}")
