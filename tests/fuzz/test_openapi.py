"""kiln/http/openapi.json: a valid OpenAPI 3.1 document that describes every route and status of
the implementation, served at GET /openapi.json.

Routes come from the App's own url_map, and statuses from driving the App in-process (werkzeug's
test client, a stand-in slot pool whose "slot" is a socket pair answering scripted result frames),
so a route or status added to kiln/http/api.py without documenting it fails here.
"""

from __future__ import annotations

import dataclasses
import io
import importlib.metadata
import json
import os
import re
import socket
import threading
import time
from pathlib import Path

import gevent
import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import OpenAPIV31SpecValidator, validate
from werkzeug.test import Client

from kiln import config, runtime
from kiln.http import api
from kiln.http.api import App
from kiln.http.pool import Busy, NoWarmSlot, WarmSlot
from kiln.log import Log
from kiln.zygote import protocol

REPO = Path(__file__).resolve().parents[2]
DOCUMENT_PATH = REPO / "kiln" / "http" / "openapi.json"
DOC = json.loads(DOCUMENT_PATH.read_text())
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

# DESIGN.md's HTTP contract, per operation. The in-process run below must observe exactly these.
CONTRACT = {
    ("/run", "post"): {200, 400, 401, 408, 413, 415, 429, 500, 503},
    ("/health", "get"): {200, 500, 503},
    ("/languages", "get"): {200, 401, 500},
    ("/metrics", "get"): {200, 500},
    ("/shutdown", "post"): {200, 401, 404, 500},
    ("/openapi.json", "get"): {200, 500},
    ("/files", "post"): {200, 201, 400, 401, 408, 413, 415, 500, 507},
    ("/files/{file_id}", "get"): {200, 400, 401, 404, 500},
    ("/files/{file_id}", "delete"): {204, 400, 401, 404, 500},
}


def deref(node: dict) -> dict:
    """Follow a local `$ref` (components/responses, components/headers...) to its target."""
    while "$ref" in node:
        target = DOC
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def operations() -> dict[tuple[str, str], dict]:
    return {(path, method): op for path, item in DOC["paths"].items() for method, op in item.items() if method in METHODS}


def documented_statuses(path: str, method: str) -> set[int]:
    return {int(status) for status in DOC["paths"][path][method]["responses"]}


def body_validator(schema: dict) -> Draft202012Validator:
    # the components travel with the schema, so its "#/components/..." references resolve
    return Draft202012Validator({**schema, "components": DOC["components"]})


# --- the document itself -----------------------------------------------------------------


def test_the_document_is_valid_openapi_3_1():
    assert DOC["openapi"].startswith("3.1.")
    validate(DOC, cls=OpenAPIV31SpecValidator)


def test_every_schema_in_the_document_is_valid_json_schema_2020_12():
    for schema in DOC["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)


def test_the_version_is_kilns():
    assert DOC["info"]["version"] == importlib.metadata.version("kiln")


def test_the_document_ships_with_the_package():
    """A wheel must carry it too (package data), not only the source tree."""
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^"kiln\.http" = \[.*"openapi\.json".*\]', pyproject, re.MULTILINE)


def test_every_operation_documents_x_request_id_and_json_errors():
    for (path, method), op in operations().items():
        assert {"$ref": "#/components/parameters/X-Request-Id"} in op["parameters"], (path, method)
        for status, response in op["responses"].items():
            response = deref(response)
            assert response["headers"]["X-Request-Id"] == {"$ref": "#/components/headers/X-Request-Id"}, (path, method, status)
            if int(status) >= 400 and not (path == "/health" and status == "503"):
                schema = response["content"]["application/json"]["schema"]
                assert schema["required"] == ["error"] and schema["properties"]["error"]["type"] == "string", (path, method, status)
    assert deref({"$ref": "#/components/headers/X-Request-Id"})["required"] is True


def test_run_request_fields_are_exactly_the_contracts():
    schema = DOC["components"]["schemas"]["RunRequest"]
    assert schema["required"] == ["lang_slug", "solution_text"]
    assert schema["additionalProperties"] is True  # unknown fields are ignored
    types = {name: field["type"] for name, field in schema["properties"].items()}
    assert types == {
        "lang_slug": "string",
        "solution_text": "string",
        "checker_text": ["string", "null"],
        "asserts": ["string", "array", "object", "null"],
        "timeout": ["string", "null"],
        "stdin": ["string", "null"],
    }
    assert schema["properties"]["timeout"]["pattern"] == "^[0-9]+(ms|s|m)$"


def test_the_security_scheme_is_optional_bearer_on_the_guarded_routes():
    bearer = DOC["components"]["securitySchemes"]["bearer"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer") and "RUN_API_KEYS" in bearer["description"]
    guarded = {("/run", "post"), ("/languages", "get"), ("/shutdown", "post"), ("/files", "post"), ("/files/{file_id}", "get"), ("/files/{file_id}", "delete")}
    for key, op in operations().items():
        assert op["security"] == ([{}, {"bearer": []}] if key in guarded else []), key


# --- the document against the implementation -----------------------------------------------


class Slot(threading.Thread):
    """The far end of a WarmSlot: reads the job frame, answers one scripted result (or hangs up)."""

    def __init__(self, answer: tuple[dict, list[bytes]] | None):
        super().__init__(daemon=True)
        self.front, self.far = socket.socketpair()
        self.answer = answer
        self.job = None
        self.start()

    def run(self) -> None:
        with self.far:
            self.job = protocol.recv_frame(self.far, 1 << 22)
            if self.answer is not None:
                protocol.send_frame(self.far, *self.answer)


def result_frame(**overrides) -> tuple[dict, list[bytes]]:
    header = {"op": "result", "exit_code": 0, "outcome": "exited", "wall_ms": 12.5, "cpu_ms": 3.0, "memory_peak_bytes": 4096, "signal": None, "output_overflow": False}
    return {**header, **overrides}, [b"out \xff\n", b""]


class Pool:
    """Stands in for SlotPool: what acquire() does next is scripted by the test."""

    def __init__(self):
        self.in_flight = 0
        self.warm_count = 4
        self.queue: list = []
        self.next: Exception | tuple | None = None
        self.released = 0

    def acquire(self, want: str | None = None, wait_s: float = 0.0, gone=None) -> WarmSlot:
        if isinstance(self.next, Exception):
            raise self.next
        slot = Slot(self.next)
        self.in_flight += 1
        return WarmSlot(index=0, pid=0, sock=slot.front)

    def release(self, slot: WarmSlot) -> None:
        self.in_flight -= 1
        self.released += 1
        slot.sock.close()

    def healthy(self) -> tuple[bool, str]:
        return True, "ok"


@pytest.fixture(scope="module")
def rt():
    return runtime.build(config.load({"RUN_LANGS": "python,js", "RUN_INPUT_MAX": "1k", "RUN_TIMEOUT_MAX": "10s"}, REPO))


@pytest.fixture(scope="module")
def quiet_log():
    fd = os.open(os.devnull, os.O_WRONLY)
    yield Log(fmt="json", fd=fd)
    os.close(fd)


@pytest.fixture
def make_app(rt, quiet_log, tmp_path):
    def make(**settings) -> tuple[App, Pool, Client]:
        settings = {"file_store": tmp_path / "files", **settings}
        pool = Pool()
        app = App(dataclasses.replace(rt, config=dataclasses.replace(rt.config, **settings)), pool, quiet_log, lambda: None)
        return app, pool, Client(app)

    return make


class Observed:
    """Every (path, method, status) seen, each response checked against its documented form."""

    def __init__(self):
        self.seen: set[tuple[str, str, int]] = set()

    def check(self, path: str, method: str, response, request_id: str | None = None) -> None:
        op = DOC["paths"][path][method]
        status = response.status_code
        assert str(status) in op["responses"], f"{method.upper()} {path} answered an undocumented {status}: {response.get_data()!r}"
        documented = deref(op["responses"][str(status)])
        # X-Request-Id: present, of the documented form, the client's own when it sent a usable one
        given = response.headers.get("X-Request-Id")
        assert given is not None
        body_validator(deref(documented["headers"]["X-Request-Id"])["schema"]).validate(given)
        if request_id is not None:
            assert given == request_id
        else:
            assert re.fullmatch(r"[0-9a-f]{32}", given)
        if "content" not in documented:  # 204
            assert response.get_data() == b"" and "Content-Type" not in response.headers
            self.seen.add((path, method, status))
            return
        media_types = documented["content"]
        assert response.mimetype in media_types, (path, method, status, response.content_type)
        if response.mimetype == "application/json":
            body_validator(media_types["application/json"]["schema"]).validate(json.loads(response.get_data()))
        self.seen.add((path, method, status))


@pytest.fixture(scope="module")
def observed():
    return Observed()


def post_run(client, body: bytes | dict, **headers):
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    return client.post("/run", data=data, headers={"Content-Type": "application/json", **headers})


PYTHON = {"lang_slug": "python", "solution_text": "print(1)"}


class SlowBody(io.BytesIO):
    def read(self, *args):
        gevent.sleep(1)
        return super().read(*args)


def post_run_slowly(client, body: dict):
    """A body that takes longer than what is left of the request's RUN_READ_TIMEOUT: 408."""
    data = json.dumps(body).encode()
    overrides = {"wsgi.input": SlowBody(data), "kiln.read_deadline": time.monotonic() + 0.05}
    response = client.post("/run", data=data, headers={"Content-Type": "application/json"}, environ_overrides=overrides)
    assert response.status_code == 408 and response.headers["Connection"] == "close"
    return response


def test_run_statuses_are_documented(make_app, observed):
    app, pool, client = make_app()
    pool.next = result_frame()
    response = post_run(client, {**PYTHON, "stdin": "in", "asserts": {"arguments": [[1]]}, "unknown": 1}, **{"X-Request-Id": "trace-me-1"})
    observed.check("/run", "post", response, request_id="trace-me-1")
    assert response.status_code == 200 and response.get_json()["stdout"] == "out \ufffd\n"
    for answer in (result_frame(outcome="timed_out", exit_code=None, signal=9), result_frame(outcome="signaled", exit_code=137, signal=9),
                   result_frame(outcome="infrastructure_failure", exit_code=None, wall_ms=0.0, cpu_ms=0.0, memory_peak_bytes=0)):
        pool.next = answer
        response = post_run(client, PYTHON)
        observed.check("/run", "post", response)
        assert response.status_code == 200
    pool.next = result_frame(output_overflow=True)
    response = post_run(client, PYTHON)
    observed.check("/run", "post", response)
    assert response.get_json() == {"error": "output too large"}
    pool.next = None  # the slot hangs up without a result
    observed.check("/run", "post", post_run(client, PYTHON))
    for body in (b"{", b"[]", {"lang_slug": "cobol", "solution_text": ""}, {**PYTHON, "timeout": "11s"}):
        response = post_run(client, body)
        observed.check("/run", "post", response)
        assert response.status_code == 400
    response = post_run(client, b"{}", **{"Content-Encoding": "gzip"})
    observed.check("/run", "post", response)
    assert response.status_code == 415
    response = post_run(client, {**PYTHON, "solution_text": "x" * 2000})
    observed.check("/run", "post", response)
    assert response.status_code == 413
    pool.next = Busy("queue wait")
    response = post_run(client, PYTHON)
    observed.check("/run", "post", response)
    assert response.headers["Retry-After"] == "1"
    observed.check("/run", "post", post_run_slowly(client, PYTHON))
    pool.next = NoWarmSlot("warm-up failed")
    observed.check("/run", "post", post_run(client, PYTHON))
    app.shutting_down = True
    observed.check("/run", "post", post_run(client, PYTHON))
    assert pool.in_flight == 0 and pool.released == 6
    app, pool, client = make_app(api_keys=("k1",))
    observed.check("/run", "post", post_run(client, PYTHON))
    observed.check("/run", "post", post_run(client, b"{", Authorization="Bearer k1"))


def test_other_statuses_are_documented(make_app, observed):
    app, pool, client = make_app()
    for path in ("/health", "/languages", "/metrics", "/openapi.json"):
        observed.check(path, "get", client.get(path))
    observed.check("/shutdown", "post", client.post("/shutdown"))
    app.shutting_down = True
    observed.check("/health", "get", client.get("/health"))
    app, pool, client = make_app(api_keys=("k1",), allow_shutdown=True)
    observed.check("/languages", "get", client.get("/languages"))
    observed.check("/shutdown", "post", client.post("/shutdown", headers={"Authorization": "Bearer nope"}))
    observed.check("/shutdown", "post", client.post("/shutdown", headers={"Authorization": "Bearer k1"}))
    observed.check("/openapi.json", "get", client.get("/openapi.json"))  # never needs a key


def test_files_statuses_are_documented(make_app, observed):
    from kiln.http import files_api

    app, pool, client = make_app(file_max=1000, file_store_max=2000)
    post = lambda data=b"", **kw: client.post("/files", data=data, **kw)
    one = lambda method, file_id: client.open(f"/files/{file_id}", method=method)
    check = lambda method, path, response, status: (observed.check(path, method, response), assert_status(response, status))
    check("post", "/files", post(b"x" * 1000, headers={"Content-Type": "text/plain"}), 201)
    check("post", "/files", post(b"x" * 1000), 200)
    file_id = post(b"x" * 1000).get_json()["id"]
    check("post", "/files", post(environ_overrides={"CONTENT_LENGTH": "12a"}), 400)
    check("post", "/files", post(environ_overrides={"CONTENT_LENGTH": "10", "wsgi.input": io.BytesIO(b"short")}), 400)
    check("post", "/files", post(b"x" * 1001), 413)
    check("post", "/files", post(b"x", headers={"Content-Encoding": "gzip"}), 415)
    data = b"slow"
    check("post", "/files", client.post("/files", data=data, environ_overrides={"wsgi.input": SlowBody(data), "kiln.read_deadline": time.monotonic() + 0.05}), 408)
    other = post(b"y" * 1000).get_json()["id"]
    with files_api.store_of(app).pinned([file_id, other]):
        check("post", "/files", post(b"z" * 10), 507)
    check("get", "/files/{file_id}", one("GET", file_id), 200)
    check("get", "/files/{file_id}", one("GET", "sha256:" + "A" * 64), 400)
    check("get", "/files/{file_id}", one("GET", "sha256:" + "1" * 64), 404)
    check("delete", "/files/{file_id}", one("DELETE", file_id), 204)
    check("delete", "/files/{file_id}", one("DELETE", file_id), 404)
    check("delete", "/files/{file_id}", one("DELETE", "nope"), 400)
    app, pool, client = make_app(api_keys=("k1",))
    check("post", "/files", client.post("/files", data=b"x"), 401)
    check("get", "/files/{file_id}", client.get(f"/files/{file_id}"), 401)
    check("delete", "/files/{file_id}", client.delete(f"/files/{file_id}"), 401)


def assert_status(response, status):
    assert response.status_code == status, (response.status_code, response.get_data())


def test_any_route_that_fails_answers_the_documented_500(make_app, observed):
    app, pool, client = make_app(allow_shutdown=True)

    def broken(environ, info):
        raise RuntimeError("injected")

    for (path, method) in operations():
        endpoint = app.url_map.bind("localhost").match(path, method=method.upper())[0]
        setattr(app, f"on_{endpoint}", broken)
        response = client.open(path.replace("{file_id}", "sha256:" + "0" * 64), method=method.upper())
        observed.check(path, method, response)
        assert response.status_code == 500


def test_the_statuses_seen_are_exactly_the_documented_ones(observed):
    """Runs after the three tests above (same module, in order)."""
    documented = {(path, method, status) for (path, method) in operations() for status in documented_statuses(path, method)}
    assert observed.seen == documented
    assert {key: documented_statuses(*key) for key in operations()} == CONTRACT


def test_every_route_of_the_implementation_is_documented_and_nothing_else(make_app):
    app, _pool, _client = make_app()
    implemented = set()
    for rule in app.url_map.iter_rules():
        methods = set(rule.methods)
        if "GET" in methods:
            methods.discard("HEAD")  # werkzeug serves HEAD wherever GET is: implicit, not an operation
        implemented |= {(re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule), method.lower()) for method in methods}
    assert implemented == set(operations())
    assert {endpoint for endpoint in dir(app) if endpoint.startswith("on_")} == {f"on_{rule.endpoint}" for rule in app.url_map.iter_rules()}


def test_openapi_is_served_from_memory_as_application_json(make_app, monkeypatch):
    app, _pool, client = make_app()
    monkeypatch.setattr(api, "OPENAPI_DOCUMENT", Path("/nonexistent/openapi.json"))  # never read again
    response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.get_data() == DOCUMENT_PATH.read_bytes()
    assert client.head("/openapi.json").status_code == 200
    response = client.post("/openapi.json")
    assert response.status_code == 405 and set(response.headers["Allow"].split(", ")) == {"GET", "HEAD"}


def test_a_live_server_serves_the_document_without_a_key(start_server):
    server = start_server(RUN_LANGS="python", RUN_API_KEYS="k1")
    response = server.client.get("/openapi.json", headers={"X-Request-Id": "live-1"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-request-id"] == "live-1"
    assert response.content == DOCUMENT_PATH.read_bytes()
    assert server.client.get("/languages").status_code == 401
