"""The admission queue: a run that finds every slot busy waits its turn (first come, first served)
instead of a 429, up to RUN_QUEUE_WAIT and never past its own timeout, in a queue of at most
RUN_QUEUE_MAX; bursts larger than the slots are answered whole. Real bursts, real slots."""

from __future__ import annotations

import json
import socket
import threading

import httpx

from kilntest import burst, wait_until

SLEEPER = "import time\ntime.sleep({seconds})\nprint('ok')\n"


def metric(srv, name: str) -> float:
    for line in srv.client.get("/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def queued(srv) -> float:
    return metric(srv, "kiln_queue_length")


def test_a_burst_larger_than_the_slots_is_answered_whole(start_server):
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2")
    answers = burst(srv, 8, lang_slug="python", solution_text=SLEEPER.format(seconds=0.3))
    assert [r.status_code for r in answers] == [200] * 8
    assert all(r.json()["stdout"] == "ok\n" for r in answers)
    assert metric(srv, "kiln_queue_wait_seconds_count") >= 6  # all but the first two waited
    assert metric(srv, "kiln_busy_refusals_total") == 0


def test_past_the_queue_or_its_wait_runs_are_refused_with_retry_after(start_server):
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="1", RUN_QUEUE_MAX="1", RUN_QUEUE_WAIT="1s")
    long_run = threading.Thread(target=srv.run, kwargs={"solution_text": SLEEPER.format(seconds=4)})
    long_run.start()
    assert wait_until(lambda: metric(srv, "kiln_runs_in_flight") == 1)
    results = {}
    waiting = threading.Thread(target=lambda: results.update(queued=httpx.post(f"{srv.url}/run", json={"lang_slug": "python", "solution_text": "print(1)"}, timeout=30)))
    waiting.start()
    assert wait_until(lambda: queued(srv) == 1)
    full = httpx.post(f"{srv.url}/run", json={"lang_slug": "python", "solution_text": "print(2)"}, timeout=30)
    assert full.status_code == 429 and full.json() == {"error": "runner busy"} and full.headers["retry-after"] == "1"
    waiting.join()
    assert results["queued"].status_code == 429 and results["queued"].headers["retry-after"] == "1"  # waited 1 s
    assert long_run.is_alive()  # both refused while the slot was still busy
    long_run.join()
    text = srv.client.get("/metrics").text
    assert 'kiln_busy_refusals_total{reason="queue full"} 1.0' in text and 'kiln_busy_refusals_total{reason="queue wait"} 1.0' in text


def test_a_queued_run_never_waits_past_its_own_timeout(start_server):
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="1", RUN_QUEUE_WAIT="30s")
    long_run = threading.Thread(target=srv.run, kwargs={"solution_text": SLEEPER.format(seconds=5)})
    long_run.start()
    assert wait_until(lambda: metric(srv, "kiln_runs_in_flight") == 1)
    refused = httpx.post(f"{srv.url}/run", json={"lang_slug": "python", "solution_text": "print(1)", "timeout": "1s"}, timeout=30)
    assert refused.status_code == 429
    assert long_run.is_alive()  # refused after its own 1 s, not when the slot freed
    long_run.join()


def test_a_client_that_hangs_up_while_queued_leaves_the_queue(start_server):
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="1", RUN_QUEUE_WAIT="30s")
    long_run = threading.Thread(target=srv.run, kwargs={"solution_text": SLEEPER.format(seconds=3)})
    long_run.start()
    assert wait_until(lambda: metric(srv, "kiln_runs_in_flight") == 1)
    body = json.dumps({"lang_slug": "python", "solution_text": "print('never')"}).encode()
    conn = socket.create_connection(("127.0.0.1", srv.port))
    conn.sendall(b"POST /run HTTP/1.1\r\nHost: q\r\nX-Request-Id: queued-1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    assert wait_until(lambda: queued(srv) == 1)
    conn.close()
    assert wait_until(lambda: queued(srv) == 0, timeout=5)
    assert long_run.is_alive()  # it left before any slot was free
    # its log line is written once its handler has ended, a moment after it left the queue
    assert wait_until(lambda: any(r.get("request_id") == "queued-1" for r in srv.logged("request")), timeout=5)
    [line] = [r for r in srv.logged("request") if r.get("request_id") == "queued-1"]
    assert line["status"] == 499 and line.get("slot") is None  # it never ran
    long_run.join()
    assert srv.run(solution_text="print('after')").json()["stdout"] == "after\n"
