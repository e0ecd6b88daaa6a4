"""A streamed /judge answer (DESIGN.md, "Judge API, round 2", Streaming): with `Accept:
application/x-ndjson`, the compile object, then each test as it ends, then the whole answer, one
JSON object a line, read line by line from a real server as a site's client reads it."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from kilntest import Server, wait_until

AB = "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n"
NDJSON = {"Accept": "application/x-ndjson"}
# the test whose input is "wait" sleeps until it is killed: the tests before it end meanwhile
WAITS = "import sys, time\nline = sys.stdin.read().strip()\nif line == 'wait':\n    time.sleep(60)\nprint(line)\n"


@pytest.fixture(scope="module")
def server():
    srv = Server({"RUN_LANGS": "python", "RUN_CONCURRENCY": "4", "RUN_JUDGE_TESTS_MAX": "20"}).wait_ready()
    yield srv
    srv.stop()


def body(solution=AB, tests=None, **fields) -> dict:
    tests = tests if tests is not None else [{"stdin": "1 2\n", "expected": "3\n"}]
    return {"lang_slug": "python", "solution_text": solution, "tests": tests, **fields}


def streamed(srv, request: dict) -> tuple[httpx.Response, list[dict]]:
    with srv.client.stream("POST", "/judge", json=request, headers=NDJSON) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line]
    return response, lines


def test_a_streamed_answer_is_the_compile_then_each_test_as_it_ends_then_the_whole_answer(server):
    tests = [{"stdin": "1 2", "expected": "3"}, {"stdin": "2 2", "expected": "5"}, {"stdin": "5 5", "expected": "10"}]
    response, lines = streamed(server, body(tests=tests))
    assert response.status_code == 200 and response.headers["content-type"] == "application/x-ndjson"
    assert response.headers.get("transfer-encoding") == "chunked" and response.headers.get("x-request-id")
    assert [line["event"] for line in lines] == ["compile", "test", "test", "test", "done"]
    compile_, *test_lines, done = lines
    assert set(compile_) == {"event", "exit_code", "stdout", "stderr", "cached", "stats"} and compile_["exit_code"] == 0
    assert sorted(line["index"] for line in test_lines) == [0, 1, 2]
    by_index = {line.pop("index"): {k: v for k, v in line.items() if k != "event"} for line in test_lines}
    done.pop("event")
    plain = server.client.post("/judge", json=body(tests=tests)).json()
    assert list(done) == list(plain) and done["verdict"] == plain["verdict"] == "WA"
    assert done["tests"] == [by_index[i] for i in range(3)]  # the same objects, in the tests' order
    assert done["compile"] == {k: v for k, v in compile_.items() if k != "event"}


def test_a_line_comes_as_its_test_ends_and_a_client_that_leaves_mid_stream_cancels_the_rest(server):
    request = json.dumps(body(WAITS, [{"stdin": "fast", "expected": "fast"}, {"stdin": "wait", "expected": "x"}], limits={"time": "10s", "wall_time": "60s"})).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as client:
        client.sendall(b"POST /judge HTTP/1.1\r\nHost: x\r\nAccept: application/x-ndjson\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(request) + request)
        reader = client.makefile("rb")
        assert reader.readline().startswith(b"HTTP/1.1 200")
        while reader.readline() not in (b"\r\n", b""):
            pass
        events = []
        while len(events) < 2:  # chunked: a size line, the chunk (one JSON line), its CRLF
            size = int(reader.readline(), 16)
            events.append(json.loads(reader.read(size)))
            reader.readline()
        assert [e["event"] for e in events] == ["compile", "test"] and events[1]["index"] == 0 and events[1]["verdict"] == "AC"
        assert server.busy_slots()  # test 1 still runs: its line is not there, nor the answer
        reader.close()
    assert wait_until(lambda: not server.busy_slots() and len(server.warm_slots()) == 4, timeout=20)
    assert wait_until(lambda: [r for r in server.logged("request") if r.get("path") == "/judge" and r.get("status") == 499])
    [logged] = [r for r in server.logged("request") if r.get("path") == "/judge" and r.get("status") == 499]
    assert logged["outcome"] == "cancelled"
    assert server.client.post("/judge", json=body()).json()["verdict"] == "AC"


def test_a_streamed_compile_error_is_the_compile_then_every_test_skipped(server):
    response, lines = streamed(server, body("print(", [{"stdin": "1 2", "expected": "3"}] * 2))
    assert response.status_code == 200
    assert [line["event"] for line in lines] == ["compile", "test", "test", "done"]
    assert lines[0]["exit_code"] != 0 and "SyntaxError" in lines[0]["stdout"] + lines[0]["stderr"]
    assert [(line["index"], line["verdict"]) for line in lines[1:3]] == [(0, "SK"), (1, "SK")]
    assert lines[-1]["verdict"] == "CE"


def test_with_points_each_test_line_carries_its_score_as_the_answer_does(server):
    tests = [{"stdin": "1 2", "expected": "3", "points": 30}, {"stdin": "1 1", "expected": "3", "points": 70}]
    _, lines = streamed(server, body(tests=tests))
    scores = {line["index"]: line["score"] for line in lines if line["event"] == "test"}
    assert scores == {0: 30, 1: 0}
    assert (lines[-1]["score"], lines[-1]["max_score"]) == (30, 100) and [t["score"] for t in lines[-1]["tests"]] == [30, 0]


@pytest.mark.parametrize(
    "request_fields, status, error",
    [
        ({"tests": "no"}, 400, "tests"),
        ({"compare": "checker", "checker": {"lang_slug": "python", "source": "print("}}, 400, "checker does not build"),
    ],
)
def test_errors_found_before_the_stream_starts_keep_their_status_and_plain_body(server, request_fields, status, error):
    with server.client.stream("POST", "/judge", json={**body(), **request_fields}, headers=NDJSON) as response:
        answer = json.loads(response.read())
    assert response.status_code == status and response.headers["content-type"] == "application/json"
    assert error in answer["error"]


@pytest.mark.parametrize("accept", [None, "*/*", "application/json", "application/x-ndjson;q=0"])
def test_without_asking_for_the_stream_the_answer_is_whole_as_before(server, accept):
    response = server.client.post("/judge", json=body(), headers={"Accept": accept} if accept else {})
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert "content-length" in response.headers and response.json()["verdict"] == "AC"
