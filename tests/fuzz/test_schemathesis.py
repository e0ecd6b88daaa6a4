"""Schemathesis against a real kiln server: generated requests (valid and invalid) for every
operation of kiln/http/openapi.json, and every response checked: no 5xx, a documented status,
content type, headers and body, plus kiln's own rules (X-Request-Id, a coherent result).

The server is started once for the module, with short timeouts so that fuzzed runs stay short,
ALLOW_SHUTDOWN off (POST /shutdown answers 404) and RUN_API_KEYS unset (the open API).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kilntest import Server

REPO = Path(__file__).resolve().parents[2]
DOC = json.loads((REPO / "kiln" / "http" / "openapi.json").read_text())
SERVED = ("python", "js")
# fuzzing cases per operation (split between valid and invalid ones); KILN_FUZZ_EXAMPLES for a longer run
MAX_EXAMPLES = int(os.environ.get("KILN_FUZZ_EXAMPLES", "100"))

CONFIG = schemathesis.Config.from_dict(
    {
        "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "database": "none"},
        "phases": {"examples": {"enabled": True}, "coverage": {"enabled": True}, "fuzzing": {"enabled": True}, "stateful": {"enabled": False}},
        "checks": {
            # positive_data_acceptance: a well-formed request is still a 400 for an unserved slug or a
            # timeout over RUN_TIMEOUT_MAX, which the contract (and the document) says on purpose.
            "positive_data_acceptance": {"enabled": False},
            # ignored_auth: RUN_API_KEYS is unset here, so the open API is what the contract asks for.
            "ignored_auth": {"enabled": False},
        },
        "request-timeout": 30,
    }
)
schema = schemathesis.openapi.from_dict(DOC, config=CONFIG)


# Generation steering, never checking: the document says lang_slug is any string (anything not
# served is a 400), timeout any <digits><unit> (zero or above RUN_TIMEOUT_MAX is a 400) and
# Content-Encoding any string (anything but identity is a 415), so plain generation would seldom
# reach a sandbox. These hooks swap in served slugs, usable timeouts and encodings for a share of
# the cases; each swap keeps a field's validity as it was, so no case changes its mode.
USABLE_TIMEOUTS = ["1ms", "50ms", "1s", "2s"]


@schema.hook
def flatmap_body(context, body):
    if context.operation.path != "/run" or not isinstance(body, dict):
        return st.just(body)
    strategy = st.just(body)
    if isinstance(body.get("lang_slug"), str):
        strategy = strategy.flatmap(lambda b: st.sampled_from([*SERVED, b["lang_slug"]]).map(lambda slug: {**b, "lang_slug": slug}))
    if isinstance(body.get("timeout"), str) and re.fullmatch(r"[0-9]+(ms|s|m)", body["timeout"]):
        strategy = strategy.flatmap(lambda b: st.sampled_from([*USABLE_TIMEOUTS, b["timeout"]]).map(lambda timeout: {**b, "timeout": timeout}))
    return strategy


@schema.hook
def flatmap_headers(context, headers):
    if not headers or "Content-Encoding" not in headers:
        return st.just(headers)
    choices = [None, "identity", "IDENTITY", headers["Content-Encoding"]]
    return st.sampled_from(choices).map(lambda value: _with_encoding(headers, value))


def _with_encoding(headers: dict, value: str | None) -> dict:
    headers = {k: v for k, v in headers.items() if k != "Content-Encoding"}
    return headers if value is None else {**headers, "Content-Encoding": value}


@pytest.fixture(scope="module")
def kiln():
    server = Server({"RUN_CONCURRENCY": "4", "RUN_TIMEOUT_MAX": "2s", "RUN_LANGS": ",".join(SERVED), "ALLOW_SHUTDOWN": "0"}).wait_ready()
    yield server
    server.stop()


# --- kiln's own checks, run on every response ---------------------------------------------

_USABLE_REQUEST_ID = re.compile(r"[\x20-\x7e]{1,200}")


def request_id_is_echoed_or_fresh(ctx, response, case):
    """Every response carries X-Request-Id: the client's when usable, else a fresh 32-hex id."""
    got = response.headers.get("x-request-id")
    assert got, "no X-Request-Id on the response"
    assert len(got) == 1, f"several X-Request-Id headers: {got}"
    sent = response.request.headers.get("X-Request-Id")
    if sent is not None:
        sent = sent.strip(" \t")  # HTTP drops the whitespace around a field value
    if sent is not None and _USABLE_REQUEST_ID.fullmatch(sent):
        assert got[0] == sent, f"X-Request-Id {sent!r} was not echoed (got {got[0]!r})"
    else:
        assert re.fullmatch(r"[0-9a-f]{32}", got[0]), f"X-Request-Id {got[0]!r} is not a fresh id (sent {sent!r})"


def run_result_is_coherent(ctx, response, case):
    """A 200 from /run: exit_code null exactly on a timeout or an infrastructure failure,
    128+N when signal N ended the task, a signal only when one did."""
    if case.path != "/run" or response.status_code != 200:
        return
    result = json.loads(response.content)
    stats, exit_code = result["stats"], result["exit_code"]
    if stats["outcome"] in ("timed_out", "infrastructure_failure"):
        assert exit_code is None, result
    else:
        assert isinstance(exit_code, int) and 0 <= exit_code <= 255, result
    if stats["outcome"] == "exited":
        assert stats["signal"] is None, result
    if stats["outcome"] == "signaled":
        assert stats["signal"] is not None and exit_code == 128 + stats["signal"], result


KILN_CHECKS = [request_id_is_echoed_or_fresh, run_result_is_coherent]


@schema.parametrize()
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
def test_api_conforms_to_its_document(case, kiln):
    FUZZED[case.path] = FUZZED.get(case.path, 0) + 1
    case.call_and_validate(base_url=kiln.url, additional_checks=KILN_CHECKS)


FUZZED: dict[str, int] = {}  # cases sent, by path


# --- findings, kept as regression tests ----------------------------------------------------


@pytest.mark.parametrize("field", ["asserts", "unknown"])
def test_deeply_nested_json_is_a_400(kiln, field):
    """Found by fuzzing: json's decoder raises RecursionError past ~1000 levels, which was a 500."""
    depth = 1000
    body = '{"lang_slug":"python","solution_text":"","%s":%s%s}' % (field, "[" * depth, "]" * depth)
    response = kiln.client.post("/run", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text


def test_the_server_survived_the_fuzzing(kiln):
    """Last in the module: still serving, no shutdown, and no 500 logged other than the xfail'd ones."""
    assert kiln.proc.poll() is None
    assert kiln.client.get("/health").text.startswith("ok")
    assert not kiln.logged("shutting down")
    assert kiln.logged("internal error") == []
    if FUZZED.get("/run"):  # the steering above works: fuzzed runs reached every served language
        assert {r["lang"] for r in kiln.logged("request") if r.get("status") == 200 and r.get("lang")} == set(SERVED)
    run = httpx.post(f"{kiln.url}/run", json={"lang_slug": "python", "solution_text": "print(6 * 7)"}, timeout=30)
    assert run.status_code == 200 and run.json()["stdout"] == "42\n"
