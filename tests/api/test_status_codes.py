"""Every row of DESIGN.md's status table, against a real server. Two rows are where their
scenario is: 500 when a slot is lost mid-run (tests/faults) and 503 while shutting down
(tests/ops, the in-flight run that finishes; here, the run the grace period ends)."""

from __future__ import annotations

import json
import signal
import threading
import time

import httpx
import pytest
from kilntest import wait_until

SLOW = "import time\nprint('started', flush=True)\ntime.sleep({seconds})\nprint('done')\n"


def post_raw(server, body: bytes, headers: dict | None = None) -> httpx.Response:
    return server.client.post("/run", content=body, headers={"Content-Type": "application/json", **(headers or {})})


def test_200_result_has_the_contract_keys_in_order(server):
    response = server.run(solution_text="print(2 + 3)")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert list(response.json()) == ["exit_code", "stdout", "stderr", "stats"]
    assert response.text.startswith('{"exit_code":0,"stdout":"5\\n","stderr":"","stats":{"outcome":"exited",')
    stats = response.json()["stats"]
    assert list(stats) == ["outcome", "wall_ms", "cpu_ms", "memory_peak_bytes", "signal"]
    assert stats["signal"] is None and stats["wall_ms"] > 0 and stats["memory_peak_bytes"] > 0


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"{not json", "body is not valid JSON"),
        (b"", "body is not valid JSON"),
        (b"\xff\xfe", "body is not UTF-8"),
        (b"[1, 2]", "body must be a JSON object"),
        (b'"text"', "body must be a JSON object"),
        (b'{"solution_text": "x"}', "lang_slug is required"),
        (b'{"lang_slug": null, "solution_text": "x"}', "lang_slug is required"),
        (b'{"lang_slug": 7, "solution_text": "x"}', "lang_slug must be a string"),
        (b'{"lang_slug": "python"}', "solution_text is required"),
        (b'{"lang_slug": "python", "solution_text": ["x"]}', "solution_text must be a string"),
        (b'{"lang_slug": "python", "solution_text": "x", "checker_text": 1}', "checker_text must be a string or null"),
        (b'{"lang_slug": "python", "solution_text": "x", "stdin": {}}', "stdin must be a string or null"),
        (b'{"lang_slug": "python", "solution_text": "x", "asserts": 5}', "asserts must be a string, an array, an object or null"),
        (b'{"lang_slug": "python", "solution_text": "x", "timeout": 10}', 'timeout must be a duration string such as "500ms", "2s" or "1m"'),
        (b'{"lang_slug": "python", "solution_text": "\\ud800"}', "solution_text is not valid UTF-8 text (it contains a lone surrogate)"),
        (b'{"lang_slug": "python", "solution_text": "x", "stdin": "\\udfff"}', "stdin is not valid UTF-8 text (it contains a lone surrogate)"),
        (b'{"lang_slug": "python", "solution_text": "x", "asserts": [NaN]}', "body is not valid JSON"),
        # valid JSON a double cannot hold: a 400 that says so (was a 500)
        (b'{"lang_slug": "python", "solution_text": "x", "asserts": {"arguments": [[1e400]]}}', "asserts holds a number out of the range of a 64-bit float; send asserts as a string to pass it verbatim"),
        # a client's lone surrogate quoted in the error: escaped, still a JSON 400 (was no answer)
        (b'{"lang_slug": "python", "solution_text": "x", "limits": {"\\ud800": 1}}', "limits.\ud800: /run takes only memory, pids and output (a time limit is its timeout)"),
    ],
)
def test_400_bad_bodies(server, body, error):
    response = post_raw(server, body)
    assert response.status_code == 400
    assert response.json() == {"error": error}


@pytest.mark.parametrize("timeout", ["10", "1h", "1.5s", "", "-1s", "0s", "0ms", " 1s", "1 s", "5m1s", "301s", "6m"])
def test_400_bad_or_too_long_timeouts(server, timeout):
    response = server.run(solution_text="print(1)", timeout=timeout)
    assert response.status_code == 400
    assert "timeout" in response.json()["error"]


@pytest.mark.parametrize("timeout", ["900ms", "2s", "1m", "5m", "300s", "007s", "0000000000001s"])
def test_good_timeouts(server, timeout):
    assert server.run(solution_text="print(1)", timeout=timeout).status_code == 200


def test_400_unsupported_lang_slug(server):
    assert server.run(lang_slug="cobol", solution_text="x").json() == {"error": "unsupported lang_slug"}
    # a slug of the table that this server does not serve (no workspace for it in langs/)
    unserved = [u["slug"] for u in server.client.get("/languages").json()["unserved"]]
    assert unserved, "expected at least one unserved slug on this host"
    response = server.run(lang_slug=unserved[0], solution_text="x", checker_text="")
    assert response.status_code == 400 and response.json() == {"error": "unsupported lang_slug"}


def test_400_order_type_errors_before_slug_before_checker(start_server, workspace):
    srv = start_server(RUN_WORKSPACE=workspace("@cat check/checker.cpp"))  # every slug served
    assert srv.run(lang_slug="cobol", solution_text="x", timeout="1h").json()["error"].startswith("timeout")
    assert srv.run(lang_slug="cobol", solution_text="x").json() == {"error": "unsupported lang_slug"}
    assert srv.run(lang_slug="cobol", solution_text="x", limits=5).json() == {"error": "limits must be an object (memory, pids, output)"}
    assert srv.run(lang_slug="cpp", solution_text="x", limits=[]).json() == {"error": "limits must be an object (memory, pids, output)"}
    assert srv.run(lang_slug="cpp", solution_text="x").json() == {"error": "checker_text is required"}
    assert srv.run(lang_slug="cpp", solution_text="x", checker_text=None).json() == {"error": "checker_text is required"}
    ok = srv.run(lang_slug="cpp", solution_text="x", checker_text="// checker")
    assert ok.status_code == 200 and ok.json()["stdout"] == "// checker"
    # a language without a checker ignores checker_text
    assert srv.run(lang_slug="python", solution_text="x", checker_text="ignored").status_code == 200


def test_401_with_api_keys(start_server):
    srv = start_server(RUN_API_KEYS="first-key,second-key")
    body = {"lang_slug": "python", "solution_text": "print(1)"}
    assert srv.client.post("/run", json=body).json() == {"error": "unauthorized"}
    assert srv.client.post("/run", json=body).status_code == 401
    assert srv.client.post("/run", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert srv.client.post("/run", json=body, headers={"Authorization": "Basic first-key"}).status_code == 401
    # 401 comes before every other check
    assert srv.client.post("/run", content=b"{bad", headers={"Content-Encoding": "gzip"}).status_code == 401
    assert srv.client.get("/languages").status_code == 401
    assert srv.client.get("/health").status_code == 200  # health checks need no key
    for key in ("first-key", "second-key"):
        response = srv.client.post("/run", json=body, headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 200
        assert response.json()["stdout"] == "1\n"
    assert srv.client.get("/languages", headers={"Authorization": "Bearer second-key"}).status_code == 200


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "x-unknown"])
def test_415_content_encoding(server, encoding):
    response = post_raw(server, b"{}", {"Content-Encoding": encoding})
    assert response.status_code == 415
    assert response.json() == {"error": "content-encoding not supported"}


def test_identity_encoding_is_accepted(server):
    response = post_raw(server, json.dumps({"lang_slug": "python", "solution_text": "print(1)"}).encode(), {"Content-Encoding": "identity"})
    assert response.status_code == 200


def _body_of_size(size: int) -> bytes:
    base = {"lang_slug": "python", "solution_text": ""}
    padding = size - len(json.dumps(base, separators=(",", ":")))
    body = json.dumps({"lang_slug": "python", "solution_text": "#" * padding}, separators=(",", ":")).encode()
    assert len(body) == size
    return body


def test_413_payload_too_large_and_exactly_the_limit_is_fine(start_server):
    srv = start_server(RUN_INPUT_MAX="2k")
    assert post_raw(srv, _body_of_size(2048)).status_code == 200
    too_large = post_raw(srv, _body_of_size(2049))
    assert too_large.status_code == 413
    assert too_large.json() == {"error": "payload too large"}

    def chunks(body):
        for i in range(0, len(body), 500):
            yield body[i : i + 500]

    # without Content-Length (chunked transfer encoding) the limit still holds
    assert srv.client.post("/run", content=chunks(_body_of_size(2048))).status_code == 200
    assert srv.client.post("/run", content=chunks(_body_of_size(4000))).status_code == 413


def test_413_output_too_large_kills_the_run_at_once(start_server):
    srv = start_server(RUN_OUTPUT_MAX="1k")
    started = time.monotonic()
    response = srv.run(solution_text="import sys, time\nsys.stdout.write('x' * 5000)\nsys.stdout.flush()\ntime.sleep(60)\n", timeout="2m")
    assert response.status_code == 413
    assert response.json() == {"error": "output too large"}
    assert time.monotonic() - started < 30  # not the 60 s the program would sleep
    # stderr has its own cap
    assert srv.run(solution_text="import sys\nsys.stderr.write('e' * 2000)\n").status_code == 413
    # exactly the cap is fine
    exact = srv.run(solution_text="import sys\nsys.stdout.write('x' * 1024)\n")
    assert exact.status_code == 200 and len(exact.json()["stdout"]) == 1024


def test_output_cap_zero_lifts_it(start_server):
    srv = start_server(RUN_OUTPUT_MAX="0")
    response = srv.run(solution_text="import sys\nsys.stdout.write('y' * (3 * 1024 * 1024))\n")
    assert response.status_code == 200 and len(response.json()["stdout"]) == 3 * 1024 * 1024


def test_429_at_once_when_every_slot_runs_and_there_is_no_queue(start_server):
    """RUN_QUEUE_WAIT=0: the original runner's immediate refusal."""
    srv = start_server(RUN_CONCURRENCY="1", RUN_QUEUE_WAIT="0s")
    slow = threading.Thread(target=srv.run, kwargs={"solution_text": SLOW.format(seconds=3)})
    slow.start()
    _wait_for_busy(srv, 1)
    with httpx.Client(base_url=srv.url) as other:
        response = other.post("/run", json={"lang_slug": "python", "solution_text": "print(1)"})
    assert response.status_code == 429
    assert response.json() == {"error": "runner busy"}
    assert response.headers["retry-after"] == "1"
    assert slow.is_alive()  # refused at once, not after the slot freed
    slow.join()
    assert srv.run(solution_text="print(1)").status_code == 200
    assert 'kiln_busy_refusals_total{reason="no queue"} 1.0' in srv.client.get("/metrics").text


def _wait_for_busy(srv, count: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(srv.busy_slots()) >= count:
            return
        time.sleep(0.01)
    raise AssertionError("runs did not start")



def test_404_and_405(server):
    assert server.client.get("/nope").status_code == 404
    assert server.client.get("/nope").json() == {"error": "not found"}
    wrong = server.client.get("/run")
    assert wrong.status_code == 405 and wrong.json() == {"error": "method not allowed"}
    assert "POST" in wrong.headers["allow"]
    assert server.client.post("/health").status_code == 405
    assert server.client.post("/shutdown").status_code == 404  # ALLOW_SHUTDOWN is off


def test_request_id_is_echoed_or_made(server):
    given = server.client.post("/run", json={"lang_slug": "python", "solution_text": "print(1)"}, headers={"X-Request-Id": "abc-123"})
    assert given.status_code == 200, given.text
    assert given.headers["x-request-id"] == "abc-123"
    made = server.client.get("/health").headers["x-request-id"]
    assert len(made) >= 16
    assert server.client.get("/nope").headers["x-request-id"]
    assert post_raw(server, b"{").headers["x-request-id"]
    # the access log line is written once the answer is out, and read here from kiln's stdout
    assert wait_until(lambda: any(r.get("request_id") == "abc-123" and r.get("status") == 200 for r in server.logged("request")), 5), server.logged("request")[-8:]


def test_a_run_killed_when_the_grace_period_ends_is_a_503_a_balancer_retries(start_server):
    srv = start_server(RUN_SHUTDOWN_GRACE="1s")
    results = {}
    slow = threading.Thread(target=lambda: results.update(r=srv.run(solution_text=SLOW.format(seconds=30), timeout="1m")))
    slow.start()
    _wait_for_busy(srv, 1)
    srv.proc.send_signal(signal.SIGTERM)
    slow.join(30)
    assert results["r"].status_code == 503 and results["r"].json() == {"error": "shutting down"}
    assert srv.proc.wait(30) == 0
