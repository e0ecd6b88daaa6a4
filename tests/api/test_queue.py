"""The admission queue: a run that finds every slot busy waits its turn (first come, first served)
instead of a 429, up to RUN_QUEUE_WAIT and never past its own timeout, in a queue of at most
RUN_QUEUE_MAX; bursts larger than the slots are answered whole. Real bursts, real slots."""

from __future__ import annotations

import json
import socket
import threading

import httpx
import pytest

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
    # each run long enough that the burst lands while both slots are busy, in the emulated VM too
    # (at 0.3 s one of eight came after a slot was free there), and a queue wait that the last
    # of them, three rounds behind, never reaches (it is about being answered, not refused)
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2", RUN_QUEUE_WAIT="60s")
    answers = burst(srv, 8, lang_slug="python", solution_text=SLEEPER.format(seconds=1))
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
    assert line["status"] == 499 and line.get("slot_index") is None  # it never ran
    long_run.join()
    assert srv.run(solution_text="print('after')").json()["stdout"] == "after\n"


# --- judge requests take turns with every other run ----------------------------------------------


def judge_on_a_socket(srv, tests: int, seconds: float = 0.2, source: str = "127.0.0.2") -> socket.socket:
    """A /judge request of `tests` tests that each sleep `seconds`, sent from `source` (another
    client than the tests' own 127.0.0.1) on a socket the test closes to hang up (it cancels)."""
    body = json.dumps({"lang_slug": "python", "solution_text": SLEEPER.format(seconds=seconds), "tests": [{"stdin": ""}] * tests, "compare": "none"}).encode()
    conn = socket.create_connection(("127.0.0.1", srv.port), source_address=(source, 0))
    conn.sendall(b"POST /judge HTTP/1.1\r\nHost: q\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    return conn


def answered(conn: socket.socket, timeout: float) -> bytes:
    """What the server said on `conn` within `timeout` (b"" if nothing)."""
    conn.settimeout(timeout)
    try:
        return conn.recv(65536)
    except (TimeoutError, socket.timeout):
        return b""


def test_a_run_is_served_within_its_queue_wait_while_two_1000_test_judge_requests_run(start_server):
    """Two judge requests of 1000 tests (100 s of tests each on their 2 slots) hold every slot of
    the server; a /run of another client gets the first slot a test gives back, since each test
    takes its turn in the one queue. 20 s of queue wait is generous: a test sleeps 0.2 s, so the
    run waits about one test (a python start on a busy 2-core machine included); without turns
    the slots would stay with the judges for minutes and the run be refused (429) after 20 s."""
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="4", RUN_QUEUE_WAIT="20s")  # RUN_JUDGE_PARALLEL: 2
    judges = [judge_on_a_socket(srv, 1000) for _ in range(2)]
    try:
        assert wait_until(lambda: len(srv.busy_slots()) == 4, timeout=60)  # the judges' tests run
        run = httpx.post(f"{srv.url}/run", json={"lang_slug": "python", "solution_text": "print('mine')"}, timeout=60)
        assert run.status_code == 200 and run.json()["stdout"] == "mine\n"
        assert [answered(conn, 0.01) for conn in judges] == [b"", b""]  # still judging
    finally:
        for conn in judges:
            conn.close()
    assert wait_until(lambda: metric(srv, "kiln_runs_in_flight") == 0, timeout=30)  # hung up: their tests stop


def test_judge_requests_past_their_bound_wait_for_admission_not_in_the_queue_of_runs(start_server):
    """Judge requests whose build is cached need no slot to start: past RUN_JUDGE_MAX (here the
    default, RUN_CONCURRENCY / RUN_JUDGE_PARALLEL = 2) they wait for admission, so their tests do
    not fill RUN_QUEUE_MAX and a /run is still queued and served, not refused at once."""
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2", RUN_JUDGE_PARALLEL="1", RUN_QUEUE_MAX="2", RUN_QUEUE_WAIT="20s")
    cached = judge_on_a_socket(srv, 1, seconds=0)  # builds it once: the others find it cached
    assert b" 200 " in answered(cached, 60)
    cached.close()
    judges = [judge_on_a_socket(srv, 1000) for _ in range(4)]
    try:
        assert wait_until(lambda: len(srv.busy_slots()) == 2, timeout=30)
        # every judge request is in: 2 judged, 2 waiting (for admission; without it, their tests for a turn)
        assert wait_until(lambda: queued(srv) + metric(srv, "kiln_judge_queue_length") == 2, timeout=30)
        run = httpx.post(f"{srv.url}/run", json={"lang_slug": "python", "solution_text": "print('mine')"}, timeout=60)
        assert run.status_code == 200 and run.json()["stdout"] == "mine\n"
    finally:
        for conn in judges:
            conn.close()
    assert wait_until(lambda: metric(srv, "kiln_runs_in_flight") == 0, timeout=30)


def test_a_judge_request_past_RUN_JUDGE_MAX_waits_its_turn_then_is_refused_or_judged(start_server):
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2", RUN_JUDGE_MAX="1", RUN_QUEUE_WAIT="2s")
    first = judge_on_a_socket(srv, 1000)
    assert wait_until(lambda: len(srv.busy_slots()) >= 1, timeout=30)
    one_test = {"lang_slug": "python", "solution_text": "print(1)", "tests": [{"stdin": "", "expected": "1"}]}
    refused = httpx.post(f"{srv.url}/judge", json=one_test, timeout=60)
    assert refused.status_code == 429 and refused.json() == {"error": "runner busy"} and refused.headers["retry-after"] == "1"
    assert answered(first, 0.01) == b""  # refused while the first was judged
    first.close()
    assert wait_until(lambda: metric(srv, "kiln_runs_in_flight") == 0, timeout=30)
    judged = httpx.post(f"{srv.url}/judge", json=one_test, timeout=60)
    assert judged.status_code == 200 and judged.json()["verdict"] == "AC"


# --- one client's share of the queue ---------------------------------------------------------


def run_on_a_socket(srv, source: str, key: str | None, solution: str) -> socket.socket:
    """A /run from `source` (with bearer `key`), answered on a socket the server then closes."""
    body = json.dumps({"lang_slug": "python", "solution_text": solution}).encode()
    auth = b"Authorization: Bearer %s\r\n" % key.encode() if key else b""
    conn = socket.create_connection(("127.0.0.1", srv.port), source_address=(source, 0), timeout=60)
    conn.sendall(b"POST /run HTTP/1.1\r\nHost: q\r\nConnection: close\r\n%sContent-Length: %d\r\n\r\n%s" % (auth, len(body), body))
    return conn


def status_of(conn: socket.socket) -> int:
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    conn.close()
    return int(data.split(b" ", 2)[1])


@pytest.mark.parametrize("by", ["address", "key"])
def test_one_clients_full_queue_gives_another_client_a_place_not_an_immediate_429(start_server, by):
    """A client is its API key where keys are configured, else its peer address. One client
    fills the queue (RUN_QUEUE_MAX 4, behind a 3 s run); another client's run takes the newest
    of those places (that one is refused, 429 "queue share") and is served in its turn."""
    keyed = by == "key"
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="1", RUN_QUEUE_MAX="4", RUN_QUEUE_WAIT="30s", **({"RUN_API_KEYS": "alpha,beta"} if keyed else {}))
    heavy = ("127.0.0.1", "alpha") if keyed else ("127.0.0.2", None)
    long_run = run_on_a_socket(srv, *heavy, SLEEPER.format(seconds=3))
    assert wait_until(lambda: metric(srv, "kiln_runs_in_flight") == 1)
    queued_runs = []
    for i in range(4):
        queued_runs.append(run_on_a_socket(srv, *heavy, f"print({i})"))
        assert wait_until(lambda: queued(srv) == i + 1)  # in this order
    headers = {"Authorization": "Bearer beta"} if keyed else {}
    other = httpx.post(f"{srv.url}/run", json={"lang_slug": "python", "solution_text": "print('other')"}, headers=headers, timeout=60)
    assert other.status_code == 200 and other.json()["stdout"] == "other\n"
    assert status_of(long_run) == 200
    assert [status_of(conn) for conn in queued_runs] == [200, 200, 200, 429]  # its newest gave its place
    assert 'kiln_busy_refusals_total{reason="queue share"} 1.0' in srv.client.get("/metrics").text


def test_a_judge_admission_given_back_goes_to_the_client_served_longest_ago(start_server):
    """RUN_JUDGE_MAX 1: one client's judge requests sent together (a short one, then two of 1000
    tests) would hold the admission for minutes each, first come first served; another client's
    request, queued after them, is admitted when the short one ends, ahead of them."""
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2", RUN_JUDGE_MAX="1", RUN_QUEUE_WAIT="30s")
    heavy = [judge_on_a_socket(srv, 5)]
    assert wait_until(lambda: len(srv.busy_slots()) >= 1, timeout=30)
    heavy += [judge_on_a_socket(srv, 1000) for _ in range(2)]
    try:
        assert wait_until(lambda: metric(srv, "kiln_judge_queue_length") == 2, timeout=30)
        one_test = {"lang_slug": "python", "solution_text": "print(1)", "tests": [{"stdin": "", "expected": "1"}]}
        other = httpx.post(f"{srv.url}/judge", json=one_test, timeout=60)
        assert other.status_code == 200 and other.json()["verdict"] == "AC"
        assert b" 200 " in answered(heavy[0], 30)  # the short one was judged first
        assert [answered(conn, 0.01) for conn in heavy[1:]] == [b"", b""]  # one judged, one waiting
    finally:
        for conn in heavy:
            conn.close()
    assert wait_until(lambda: metric(srv, "kiln_runs_in_flight") == 0, timeout=30)


def test_a_judge_request_waiting_for_admission_is_refused_when_kiln_shuts_down(start_server):
    """A queued judge request is new work, as a queued run is: 503 at shutdown (a balancer sends
    it elsewhere); the request being judged finishes or, its client gone, is cancelled."""
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2", RUN_JUDGE_MAX="1", RUN_QUEUE_WAIT="30s", ALLOW_SHUTDOWN="true")
    first = judge_on_a_socket(srv, 1000)
    try:
        assert wait_until(lambda: metric(srv, "kiln_judge_requests_admitted") == 1, timeout=30)
        waiting = judge_on_a_socket(srv, 1)
        assert wait_until(lambda: metric(srv, "kiln_judge_queue_length") == 1, timeout=30)
        assert srv.client.post("/shutdown").status_code == 200
        answer = answered(waiting, 30)
        assert b" 503 " in answer and answer.endswith(b'{"error":"shutting down"}')
    finally:
        first.close()
    assert srv.proc.wait(60) == 0
