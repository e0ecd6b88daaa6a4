"""A client that leaves is noticed however it leaves, and one that stays is answered however it
waits (kiln/http/watch.py): over HTTP/1.0 as over HTTP/1.1, after sending bytes of a next
request, while its judge answer streams. Raw sockets, so that each byte is sent exactly when the
test says; "noticed" is the request's slot freed and its access line a 499 "cancelled"."""

from __future__ import annotations

import json
import socket
import time
import uuid

import pytest

from kilntest import wait_until

# runs until its wall time (12 s, past any wait here): a request still running at the end was not
# cancelled (and one left running by a failed test is gone before the next test starts)
SLOW = "import time\nprint('up', flush=True)\ntime.sleep(30)\n"
SLOW_TESTS = [{"stdin": f"{i}\n", "expected": "x"} for i in range(4)]
WALL_TIME = "12s"


@pytest.fixture(scope="module")
def srv():
    from kilntest import Server

    server = Server({"RUN_LANGS": "python", "RUN_CONCURRENCY": "2"}).wait_ready()
    yield server
    server.stop()


def request_bytes(path: str, body: dict, request_id: str, version: str = "HTTP/1.1", accept: str = "application/json") -> bytes:
    raw = json.dumps(body).encode()
    return b"POST %s %s\r\nHost: kiln\r\nX-Request-Id: %s\r\nAccept: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        path.encode(), version.encode(), request_id.encode(), accept.encode(), len(raw), raw,
    )  # fmt: skip


def run_body(source: str) -> dict:
    return {"lang_slug": "python", "solution_text": source, "timeout": WALL_TIME}


def judge_body(source: str, tests: list[dict]) -> dict:
    return {"lang_slug": "python", "solution_text": source, "tests": tests, "limits": {"time": "10s", "wall_time": WALL_TIME}}


def read_all(conn: socket.socket) -> bytes:
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


def access_line(srv, request_id: str) -> dict:
    assert wait_until(lambda: any(r.get("request_id") == request_id for r in srv.logged("request")), timeout=10)
    [line] = [r for r in srv.logged("request") if r.get("request_id") == request_id]
    return line


def leave(conn: socket.socket, how: str) -> None:
    if how == "pipelined":  # a byte of a next request, apart (in the socket, not in what the front buffered), then gone
        conn.sendall(b"P")
        time.sleep(0.3)
    conn.close()


WAYS = [("HTTP/1.1", "closes"), ("HTTP/1.0", "closes"), ("HTTP/1.1", "pipelined"), ("HTTP/1.0", "pipelined")]


@pytest.mark.parametrize(("version", "how"), WAYS)
@pytest.mark.parametrize("path", ["/run", "/judge"])
def test_a_client_that_leaves_cancels_its_request(srv, path, version, how):
    assert wait_until(lambda: not srv.busy_slots(), timeout=40), "an earlier test's request still runs"
    request_id = f"gone-{uuid.uuid4().hex[:8]}"
    body = run_body(SLOW) if path == "/run" else judge_body(SLOW, SLOW_TESTS)
    conn = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    conn.sendall(request_bytes(path, body, request_id, version))
    assert wait_until(srv.busy_slots, timeout=30), "the request did not start"
    time.sleep(0.5)  # the front has read the whole request and watches its client
    leave(conn, how)
    assert wait_until(lambda: not srv.busy_slots(), timeout=10), "the request was not cancelled"
    line = access_line(srv, request_id)
    assert (line["status"], line["outcome"]) == (499, "cancelled") and line["duration_ms"] < 15_000


@pytest.mark.parametrize("version", ["HTTP/1.0", "HTTP/1.1"])
def test_a_client_that_half_closes_gets_its_whole_answer(srv, version):
    conn = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    conn.sendall(request_bytes("/run", run_body("import time\ntime.sleep(1)\nprint(42)\n"), uuid.uuid4().hex, version))
    conn.shutdown(socket.SHUT_WR)
    data = read_all(conn)
    conn.close()
    assert data.startswith(b"HTTP/1.1 200 OK\r\n"), data[:80]  # what was sent early is not sent twice, no interim
    assert json.loads(data.partition(b"\r\n\r\n")[2])["stdout"] == "42\n"


def test_a_client_that_pipelines_its_next_request_and_half_closes_gets_both_answers(srv):
    conn = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    first = request_bytes("/run", run_body("import time\ntime.sleep(1)\nprint('first')\n"), "first-" + uuid.uuid4().hex)
    second = request_bytes("/run", run_body("print('second')"), "second-" + uuid.uuid4().hex).replace(b"Host: kiln", b"Host: kiln\r\nConnection: close")
    conn.sendall(first)
    time.sleep(0.3)
    conn.sendall(second)  # apart: the watch finds it in the socket, leaves it for the next parser
    conn.shutdown(socket.SHUT_WR)
    answers = read_all(conn).split(b"HTTP/1.1 ")
    conn.close()
    assert answers[0] == b"" and len(answers) == 3, answers
    assert [json.loads(a.partition(b"\r\n\r\n")[2])["stdout"] for a in answers[1:]] == ["first\n", "second\n"]


def test_a_client_that_half_closes_mid_stream_reads_a_well_formed_stream(srv):
    """Once a streamed answer has begun, nothing but the answer is written into it (an interim
    answer sent at the client's end-of-file broke its chunked body)."""
    tests = [{"stdin": f"{i}\n", "expected": f"{i}"} for i in range(4)]
    conn = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    source = "import sys, time\ntime.sleep(0.4)\nprint(sys.stdin.read().strip())\n"
    conn.sendall(request_bytes("/judge", judge_body(source, tests), uuid.uuid4().hex, accept="application/x-ndjson"))
    reader = conn.makefile("rb")
    assert reader.readline().startswith(b"HTTP/1.1 200")
    while reader.readline() not in (b"\r\n", b""):
        pass
    conn.shutdown(socket.SHUT_WR)  # after the head: the rest of the answer is streamed to a half-closed client
    events = []
    while (size := int(reader.readline(), 16)) > 0:  # chunked: a size line, the chunk (one JSON line), its CRLF
        events.append(json.loads(reader.read(size)))
        assert reader.readline() == b"\r\n"
    reader.close()
    conn.close()
    assert [e["event"] for e in events] == ["compile"] + ["test"] * 4 + ["done"] and events[-1]["verdict"] == "AC"
