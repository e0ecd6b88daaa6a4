"""Verdicts on a saturated host: a run's wall-clock deadline moves on by the time it waited for a
CPU that other runs held (kiln-init's starve.c, up to twice slots/CPUs times its timeout), so that what ends it
is what it did, not how busy the host was. The host is saturated for real: spinning runs in the
other slots of the same server, each slot one entity to the scheduler, so a run's share of the
machine is its CPUs over the slots."""

from __future__ import annotations

import contextlib
import json
import os
import socket

import pytest

from kilntest import wait_until

SLOTS = 10
SPIN = "import threading\ndef spin():\n    while True:\n        pass\nfor _ in range(3):\n    threading.Thread(target=spin).start()\nspin()\n"


@pytest.fixture(scope="module")
def busy(request):
    from kilntest import Server

    srv = Server({"RUN_LANGS": "python", "RUN_CONCURRENCY": str(SLOTS)}).wait_ready()
    request.addfinalizer(srv.stop)
    return srv


@contextlib.contextmanager
def saturated(srv, runs: int = SLOTS - 1):
    """`runs` spinning runs in the other slots, until the block ends: their clients leave, and the
    runs are cancelled with them."""
    body = json.dumps({"lang_slug": "python", "solution_text": SPIN, "timeout": "60s"}).encode()
    clients = []
    try:
        for _ in range(runs):
            client = socket.create_connection(("127.0.0.1", srv.port))
            client.sendall(b"POST /run HTTP/1.1\r\nHost: kiln\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            clients.append(client)
        assert wait_until(lambda: len(srv.busy_slots()) >= runs, timeout=30), "the spinning runs did not start"
        yield
    finally:
        for client in clients:
            client.close()
        wait_until(lambda: not srv.busy_slots(), timeout=30)


def share(srv) -> float:
    """What a run in one slot has of the machine while the others spin."""
    return min(1.0, (os.cpu_count() or 1) / SLOTS)


def test_an_honest_submission_within_its_cpu_time_is_accepted_on_a_saturated_host(busy):
    # 0.8 s of CPU and the interpreter's start, under a limit a quarter above what it takes alone:
    # its wall limit (2 x time + 1 s) gives it, at a tenth of the CPUs each (two CPUs, ten busy
    # slots), well under that; TLE by wall time when the deadline did not move
    work = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.8:\n    pass\nprint(3)\n"
    if 3 * share(busy) > 0.8 * 0.9:
        pytest.skip(f"{os.cpu_count()} CPUs: {SLOTS} slots do not saturate them")
    test = [{"stdin": "", "expected": "3"}]
    alone = busy.client.post("/judge", json={"lang_slug": "python", "solution_text": work, "tests": test, "limits": {"time": "10s"}}, timeout=120).json()["tests"][0]
    assert alone["verdict"] == "AC", alone
    time_ms = max(1000, -(-int(1.25 * alone["stats"]["cpu_ms"]) // 100) * 100)
    with saturated(busy):
        body = busy.client.post("/judge", json={"lang_slug": "python", "solution_text": work, "tests": test, "limits": {"time": f"{time_ms}ms"}}, timeout=300).json()
    result = body["tests"][0]
    assert result["verdict"] == "AC", (time_ms, result)
    assert result["stats"]["wall_ms"] > 2 * time_ms + 1000, f"it was not starved past its wall limit: the test proves nothing here: {time_ms} {result}"


def test_a_memory_bomb_on_a_saturated_host_is_out_of_memory_not_out_of_time(busy):
    # its timeout is three times what it takes alone to reach its limit: alone it is out of memory
    # in time; at a tenth of the CPUs it needs five times as long or more (in CI, beside nine
    # spinning runs, a bomb needed four times the CPU it needs alone), and is TLE if its deadline
    # did not move far enough
    bomb = "x = []\nwhile True:\n    x.append(bytearray(8 << 20))\n"
    alone = busy.run("python", bomb, limits={"memory": "256m"}, timeout="60s").json()["stats"]
    assert alone["outcome"] == "out_of_memory", alone
    timeout_ms = max(500, int(3 * alone["wall_ms"]))
    with saturated(busy):
        stats = busy.run("python", bomb, limits={"memory": "256m"}, timeout=f"{timeout_ms}ms").json()["stats"]
    assert stats["outcome"] == "out_of_memory", (timeout_ms, stats)
    assert stats["wall_ms"] > timeout_ms, f"it was not starved past its timeout: the test proves nothing here: {timeout_ms} {stats}"


def test_a_run_whose_own_threads_outnumber_the_cpus_is_not_given_their_waits(busy):
    # its threads wait for each other, not for other runs: that is its own time. Its deadline may
    # move only by time in which none of them ran, which is at most its wall time less its CPU
    # time over the CPUs (on a quiet host, none: it is timed out at its timeout)
    stats = busy.run("python", SPIN.replace("range(3)", "range(7)"), timeout="1s").json()["stats"]
    none_ran_at_most = stats["wall_ms"] - stats["cpu_ms"] / (os.cpu_count() or 1)
    assert stats["outcome"] == "timed_out" and stats["wall_ms"] - 1000 <= max(0, none_ran_at_most) + 250, stats
