"""kiln/http/openapi.json: a valid OpenAPI 3.1 document that describes every route and status of
the implementation, served at GET /openapi.json.

Routes come from the App's own url_map, and statuses from driving the App in-process (werkzeug's
test client, a stand-in slot pool whose "slot" is a socket pair answering scripted result frames),
so a route or status added to kiln/http/api.py without documenting it fails here. POST /judge is
also fuzzed (schemathesis) against a real server serving python only, with few cases: each valid
one builds and runs its tests in the sandbox (tests/fuzz/test_schemathesis.py fuzzes every
operation, /judge included, without steering it into the sandbox).
"""

from __future__ import annotations

import dataclasses
import hashlib
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
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.validators import extend
from openapi_spec_validator import OpenAPIV31SpecValidator, validate
from werkzeug.test import Client

from kiln import config, runtime
from kiln.http import api
from kiln.http.api import App
from kiln.http.pool import Busy, NoWarmSlot, WarmSlot
from kiln.judge import compare, judge, request
from kiln.judge.files import FILE_ID
from kiln.log import Log
from kiln.units import format_duration_ms
from kiln.zygote import protocol
from kilntest import Server

REPO = Path(__file__).resolve().parents[2]
DOCUMENT_PATH = REPO / "kiln" / "http" / "openapi.json"
DOC = json.loads(DOCUMENT_PATH.read_text())
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

# DESIGN.md's HTTP contract, per operation. The in-process run below must observe exactly these.
CONTRACT = {
    ("/run", "post"): {200, 400, 401, 408, 413, 415, 429, 500, 503},
    ("/judge", "post"): {200, 400, 401, 408, 413, 415, 429, 500, 503},
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


def test_judge_request_fields_are_exactly_the_contracts():
    """DESIGN.md's Judge API table, and the patterns, enums and defaults of kiln/judge/request.py."""
    schemas = DOC["components"]["schemas"]
    schema = schemas["JudgeRequest"]
    assert schema["required"] == ["lang_slug", "solution_text", "tests"]
    assert schema["additionalProperties"] is True  # unknown fields are ignored
    fields = schema["properties"]
    types = {name: field.get("type") for name, field in fields.items()}
    assert types == {
        "lang_slug": "string",
        "solution_text": "string",
        "files": ["object", "null"],
        "tests": "array",
        "compare": ["string", "null"],
        "epsilon": ["number", "null"],
        "limits": None,  # anyOf: JudgeLimits or null
        "compile_timeout": ["string", "null"],
        "stop_on_failure": ["boolean", "null"],
        "checker": ["object", "null"],
        "interactor": ["object", "null"],
    }
    assert fields["files"]["propertyNames"]["pattern"] == f"^{request.FILE_NAME.pattern}$"
    assert fields["files"]["maxProperties"] == request.FILES_MAX and fields["files"]["additionalProperties"] == {"type": "string"}
    assert fields["tests"]["minItems"] == 1 and "maxItems" not in fields["tests"]  # RUN_JUDGE_TESTS_MAX is the server's
    assert fields["compare"]["enum"] == [*compare.MODES, None] and fields["compare"]["default"] == "tokens"
    assert (fields["epsilon"]["default"], fields["epsilon"]["minimum"]) == (request.DEFAULT_EPSILON, 0)
    assert fields["compile_timeout"]["default"] == format_duration_ms(request.COMPILE_TIMEOUT_MS)
    assert fields["stop_on_failure"]["default"] is False
    assert fields["limits"]["anyOf"] == [{"$ref": "#/components/schemas/JudgeLimits"}, {"type": "null"}]
    for program in ("checker", "interactor"):
        assert fields[program]["required"] == ["lang_slug", "source"]
    for soon in SOON:  # in the contract, answered 400 by this server: said so
        assert "NOT SUPPORTED BY THIS SERVER YET" in fields[soon]["description"]
    test = schemas["JudgeTest"]
    assert set(test["properties"]) == {"stdin", "stdin_file", "expected", "expected_file"} and "required" not in test
    for name in ("stdin_file", "expected_file"):
        assert test["properties"][name]["pattern"] == f"^{FILE_ID.pattern}$" == DOC["components"]["parameters"]["FileId"]["schema"]["pattern"]
    limits = schemas["JudgeLimits"]["properties"]
    assert set(limits) == {"time", "wall_time", "memory", "output", "pids"}
    duration = DOC["components"]["schemas"]["RunRequest"]["properties"]["timeout"]["pattern"]
    assert limits["time"]["pattern"] == limits["wall_time"]["pattern"] == fields["compile_timeout"]["pattern"] == duration
    for name, low in (("memory", 1 << 20), ("output", 0)):
        assert (limits[name]["type"], limits[name]["pattern"], limits[name]["minimum"]) == (["integer", "string", "null"], "^[0-9]+[kKmMgG]?$", low)
    assert (limits["pids"]["type"], limits["pids"]["minimum"]) == (["integer", "null"], 1)
    # the answer: DESIGN.md's verdicts, the test's in kiln/judge/judge.py's order of precedence
    tested = schemas["JudgeTestResult"]
    assert tested["properties"]["verdict"]["enum"] == list(judge.VERDICTS)
    assert set(schemas["JudgeResult"]["properties"]["verdict"]["enum"]) == {"CE", *judge.VERDICTS} - {"SK"}
    assert schemas["JudgeResult"]["required"] == ["verdict", "passed", "total", "compile", "tests", "stats"]
    assert schemas["JudgeCompile"]["required"] == ["exit_code", "stdout", "stderr", "cached", "stats"]
    assert tested["required"] == ["verdict", "exit_code", "stdout", "stderr", "checker_message", "stats"]
    outcomes = schemas["JudgeRunStats"]["properties"]["outcome"]["enum"]
    assert outcomes == [*schemas["RunStats"]["properties"]["outcome"]["enum"], "output_too_large"]
    assert set(outcomes) == {*protocol.OUTCOMES, "output_too_large"}


def test_the_security_scheme_is_optional_bearer_on_the_guarded_routes():
    bearer = DOC["components"]["securitySchemes"]["bearer"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer") and "RUN_API_KEYS" in bearer["description"]
    guarded = {("/run", "post"), ("/judge", "post"), ("/languages", "get"), ("/shutdown", "post"), ("/files", "post"), ("/files/{file_id}", "get"), ("/files/{file_id}", "delete")}
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


def result_frame(stdout: bytes = b"out \xff\n", layer: bytes | None = None, **overrides) -> tuple[dict, list[bytes]]:
    header = {"op": "result", "exit_code": 0, "outcome": "exited", "wall_ms": 12.5, "cpu_ms": 3.0, "memory_peak_bytes": 4096, "signal": None, "output_overflow": False}
    return {**header, **overrides}, [stdout, b""] + ([] if layer is None else [layer])


# what a judge's build leaves: judge/main.pyc (a layer that is not empty is kept by the build cache)
LAYER = b"".join(protocol.LAYER_ENTRY.pack(kind, 0o755, len(path), len(data)) + path + data for kind, path, data in ((b"d", b"judge", b""), (b"f", b"judge/main.pyc", b"\x00" * 16)))


class Pool:
    """Stands in for SlotPool: what acquire() does next is scripted by the test."""

    def __init__(self):
        self.in_flight = 0
        self.warm_count = 4
        self.queue: list = []
        self.next: Exception | tuple | list | None = None  # a list: one answer per slot taken, in turn
        self.released = 0

    def acquire(self, want: str | None = None, wait_s: float | None = 0.0, gone=None) -> WarmSlot:
        answer = self.next.pop(0) if isinstance(self.next, list) else self.next
        if isinstance(answer, Exception):
            raise answer
        slot = Slot(answer)
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
        (tmp_path / "run" / "layers").mkdir(parents=True, exist_ok=True)  # the judge's builds (Runtime.layers_dir)
        runtime_ = dataclasses.replace(rt, config=dataclasses.replace(rt.config, **settings), staging_dir=str(tmp_path / "run" / "staging"))
        app = App(runtime_, pool, quiet_log, lambda: None)
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


# checker and interactor: in the contract, answered 400 "not supported by this server yet" while here
SOON = getattr(request, "SOON", ())
JUDGE = {"lang_slug": "python", "solution_text": "print(3)", "tests": [{"stdin": "1 2\n", "expected": "3\n"}]}


def post_judge(client, body: bytes | dict, **kw):
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    return client.post("/judge", data=data, headers={"Content-Type": "application/json", **kw.pop("headers", {})}, **kw)


def test_judge_statuses_are_documented(make_app, observed):
    """Every status of POST /judge, each answer checked against the document: the 200 with every
    verdict a run can give (the stand-in slots answer the build, then each test in turn)."""
    app, pool, client = make_app(judge_parallel=1, judge_input_max=3000)
    check = lambda response, status: (observed.check("/judge", "post", response), assert_status(response, status))  # noqa: E731
    runs = {  # a test's run -> its verdict, in DESIGN.md's order
        "AC": result_frame(b"3\n"),
        "WA": result_frame(),
        "TLE": result_frame(outcome="timed_out", exit_code=None, signal=9),
        "MLE": result_frame(outcome="out_of_memory", exit_code=137, signal=9),
        "OLE": result_frame(output_overflow=True),
        "SV": result_frame(outcome="policy_violation", exit_code=159, signal=31),
        "RE": result_frame(exit_code=1),
        "IE": result_frame(b"", outcome="infrastructure_failure", exit_code=None, wall_ms=0.0, cpu_ms=0.0, memory_peak_bytes=0),
    }
    tests = [{"stdin": "1 2\n", "expected": "3\n"}] * (len(runs) + 1)
    pool.next = [result_frame(b"", layer=LAYER), *runs.values(), None]  # None: the last test's slot is lost (IE)
    response = post_judge(client, {**JUDGE, "tests": tests, "unknown": 1}, headers={"X-Request-Id": "judge-1"})
    observed.check("/judge", "post", response, request_id="judge-1")
    answer = response.get_json()
    assert [t["verdict"] for t in answer["tests"]] == [*runs, "IE"] and (answer["verdict"], answer["passed"], answer["total"]) == ("WA", 1, 9)
    assert answer["compile"]["cached"] is False and answer["tests"][-1]["stats"] is None and answer["tests"][4]["stats"]["outcome"] == "output_too_large"
    schemas = DOC["components"]["schemas"]  # the keys in the documented order
    assert list(answer) == schemas["JudgeResult"]["required"] and list(answer["compile"]) == schemas["JudgeCompile"]["required"]
    assert all(list(test) == schemas["JudgeTestResult"]["required"] for test in answer["tests"])
    pool.next = [result_frame(exit_code=1)]  # the same submission again: cached, the build's answer repeated
    response = post_judge(client, {**JUDGE, "tests": tests[:2], "stop_on_failure": True})
    check(response, 200)
    assert response.get_json()["compile"]["cached"] is True and [t["verdict"] for t in response.get_json()["tests"]] == ["RE", "SK"]
    pool.next = [result_frame(b"", exit_code=1)]  # the build fails: CE, nothing runs
    response = post_judge(client, {**JUDGE, "solution_text": "print(1", "tests": tests[:2]})
    check(response, 200)
    assert response.get_json()["verdict"] == "CE" and [t["verdict"] for t in response.get_json()["tests"]] == ["SK", "SK"]
    pool.next = [result_frame(b"", layer=LAYER), result_frame(b"3\n")]  # over RUN_INPUT_MAX (1k), within RUN_JUDGE_INPUT_MAX
    response = post_judge(client, {**JUDGE, "solution_text": "print(3)" + " " * 2000, "compare": "none"})
    check(response, 200)
    assert response.get_json()["verdict"] == "AC"
    assert pool.in_flight == 0 and pool.next == []
    # 400: the body, then field by field (the field named); a file the store lacks; a language without judge targets
    unknown = "sha256:" + "1" * 64
    bad = [(b"{", "body is not valid JSON"), ({"lang_slug": "cobol", "solution_text": "", "tests": []}, "unsupported lang_slug"),
           ({**JUDGE, "tests": [{"stdin": ""}]}, "tests[0]: expected or expected_file is required"),
           ({**JUDGE, "limits": {"time": "20s"}}, "limits.time 20s is above its maximum of 10s"),
           ({**JUDGE, "tests": [{"stdin_file": unknown, "expected": ""}]}, f"unknown file {unknown}")]  # fmt: skip
    bad += [({**JUDGE, soon: {"lang_slug": "python", "source": ""}}, f"{soon}: not supported by this server yet") for soon in SOON]
    for body, error in bad:
        response = post_judge(client, body)
        check(response, 400)
        assert response.get_json()["error"].startswith(error), response.get_json()
    workloads = dict(app.runtime.workloads)
    workloads["js"] = dataclasses.replace(workloads["js"], build_argv=None)
    app.runtime = dataclasses.replace(app.runtime, workloads=workloads)
    response = post_judge(client, {**JUDGE, "lang_slug": "js"})
    check(response, 400)
    assert response.get_json()["error"] == "lang_slug js cannot judge"
    languages = client.get("/languages")
    observed.check("/languages", "get", languages)
    served = {lang["slug"]: lang for lang in languages.get_json()["languages"]}
    assert (served["js"]["judge"], served["js"]["judge_file"], served["js"]["judge_time"]) == (False, None, None)
    assert (served["python"]["judge"], served["python"]["judge_file"], served["python"]["judge_time"]) == (True, "main.py", "1s")
    # before the body: 415, 413 (over RUN_JUDGE_INPUT_MAX), 408
    check(post_judge(client, b"{}", headers={"Content-Encoding": "gzip"}), 415)
    check(post_judge(client, {**JUDGE, "solution_text": "x" * 3000}), 413)
    data = json.dumps(JUDGE).encode()
    check(post_judge(client, data, environ_overrides={"wsgi.input": SlowBody(data), "kiln.read_deadline": time.monotonic() + 0.05}), 408)
    # no slot for the build: 429 (Retry-After), 503; the build's slot lost: 500; shutting down: 503
    pool.next = Busy("queue wait")
    response = post_judge(client, {**JUDGE, "solution_text": "print(4)"})
    check(response, 429)
    assert response.headers["Retry-After"] == "1"
    pool.next = NoWarmSlot("warm-up failed")
    check(post_judge(client, {**JUDGE, "solution_text": "print(4)"}), 503)
    pool.next = None
    check(post_judge(client, {**JUDGE, "solution_text": "print(4)"}), 500)
    app.shutting_down = True
    response = post_judge(client, JUDGE)
    check(response, 503)
    assert response.get_json() == {"error": "shutting down"}
    app, pool, client = make_app(api_keys=("k1",))
    check(post_judge(client, JUDGE), 401)
    check(post_judge(client, b"{", headers={"Authorization": "Bearer k1"}), 400)


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
    """Runs after the tests above that observe statuses (same module, in order)."""
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


# --- POST /judge fuzzed against a real server ------------------------------------------------
#
# Few cases (KILN_JUDGE_FUZZ_EXAMPLES, split between valid and invalid ones) and a small server:
# python only, at most 3 tests of at most 1 s CPU each, so that a valid case costs a build and a
# few short runs. The hooks steer generation, never checking: a share of the cases gets the served
# slug, a real program, usable limits, no checker, the ids of files the store has and an expected
# answer; each swap keeps the case as valid or invalid as it was (a value is swapped only when it
# is valid, for another valid one).

JUDGE_FUZZ_EXAMPLES = int(os.environ.get("KILN_JUDGE_FUZZ_EXAMPLES", "25"))
JUDGE_FUZZ_ENV = {"RUN_LANGS": "python", "RUN_CONCURRENCY": "4", "RUN_JUDGE_TESTS_MAX": "3", "RUN_JUDGE_TIME_MAX": "1s", "RUN_TIMEOUT_MAX": "5s", "ALLOW_SHUTDOWN": "0"}
STORED = {b"1 2\n": None, b"3\n": None}  # uploaded before fuzzing: id -> its bytes
STORED = {"sha256:" + hashlib.sha256(data).hexdigest(): data for data in STORED}
PROGRAMS = [
    "a, b = map(int, input().split())\nprint(a + b)\n",  # AC on 1 2 -> 3
    "import sys\nsys.stdout.write(sys.stdin.read())\n",
    "print(1\n",  # CE
    "raise SystemExit(3)\n",  # RE
]
_DURATION = re.compile(r"[0-9]+(ms|s|m)")
_SIZE = re.compile(r"[0-9]+[kKmMgG]?")
_duration = lambda value: isinstance(value, str) and _DURATION.fullmatch(value) is not None  # noqa: E731
_whole = lambda low: lambda value: type(value) is int and value >= low  # noqa: E731
# field -> (when a value is valid, what may replace it): a share of the cases gets a usable value
STEERED = {
    "lang_slug": (lambda value: isinstance(value, str), ["python", "python"]),
    "solution_text": (lambda value: isinstance(value, str), PROGRAMS),
    "compare": (lambda value: value in compare.MODES, ["tokens", "lines", "exact", "float", "none"]),  # checker: a 400 here
    "checker": (lambda value: isinstance(value, dict) and all(isinstance(value.get(key), str) for key in ("lang_slug", "source")), [None]),  # likewise
    "interactor": (lambda value: isinstance(value, dict) and all(isinstance(value.get(key), str) for key in ("lang_slug", "source")), [None]),
    "compile_timeout": (_duration, ["5s"]),
}
STEERED_LIMITS = {
    "time": (_duration, ["200ms", "1s"]),
    "wall_time": (_duration, ["3s"]),
    "memory": (lambda value: _whole(1 << 20)(value) or isinstance(value, str) and _SIZE.fullmatch(value) is not None, [64 << 20, "64m"]),
    "output": (_whole(0), [1 << 16]),
    "pids": (_whole(1), [32]),
}



def _pattern_to_the_end(validator, pattern, instance, schema):
    """`pattern` with `$` as the end of the string (ECMA 262's); Python's re also lets a last
    newline through, so a case made invalid by one would pass for valid and be steered."""
    if validator.is_type(instance, "string") and not re.search(pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


# whether a body is valid: only then may the hooks change more than a valid field's value
JUDGE_REQUEST = extend(Draft202012Validator, {"pattern": _pattern_to_the_end})({**DOC["components"]["schemas"]["JudgeRequest"], "components": DOC["components"]})

judge_schema = schemathesis.openapi.from_dict(
    json.loads(DOCUMENT_PATH.read_text()),  # its own copy: schemathesis may change what it is given
    config=schemathesis.Config.from_dict(
        {
            "generation": {"mode": "all", "max-examples": JUDGE_FUZZ_EXAMPLES, "database": "none"},
            # coverage: off, its boundary cases are many, each a build and its runs when valid
            "phases": {"examples": {"enabled": True}, "coverage": {"enabled": False}, "fuzzing": {"enabled": True}, "stateful": {"enabled": False}},
            # positive_data_acceptance: a well-formed request is still a 400 for a test without an
            # answer, an unknown file, a limit over the server's maximum, or a checker (not served
            # yet), as the document says. ignored_auth: RUN_API_KEYS is unset here (the open API).
            "checks": {"positive_data_acceptance": {"enabled": False}, "ignored_auth": {"enabled": False}},
            "request-timeout": 60,
        }
    ),
).include(path="/judge", method="POST")


@judge_schema.hook
def flatmap_body(context, body):
    if not isinstance(body, dict):
        return st.just(body)
    valid = JUDGE_REQUEST.is_valid(body)
    strategy = _steered(body, STEERED)
    if isinstance(body.get("tests"), list):
        tests = body["tests"][:3] if valid else body["tests"]  # RUN_JUDGE_TESTS_MAX here: more is a 400
        strategy = strategy.flatmap(lambda b: st.tuples(*(_steered_test(test, valid) for test in tests)).map(lambda tests: {**b, "tests": list(tests)}))
    if isinstance(body.get("limits"), dict):
        strategy = strategy.flatmap(lambda b: _steered(b["limits"], STEERED_LIMITS).map(lambda limits: {**b, "limits": limits}))
    return strategy


@judge_schema.hook
def flatmap_headers(context, headers):
    """Content-Encoding: any string in the document (anything but identity is a 415)."""
    if not headers or "Content-Encoding" not in headers:
        return st.just(headers)
    rest = {k: v for k, v in headers.items() if k != "Content-Encoding"}
    return st.sampled_from([None, "identity", headers["Content-Encoding"]]).map(lambda value: rest if value is None else {**rest, "Content-Encoding": value})


def _steered(fields: dict, steered: dict):
    """`fields` with, for each steered field whose value is valid, that value or a usable one."""
    strategy = st.just(fields)
    for field, (valid, choices) in steered.items():
        if field in fields and valid(fields[field]):
            strategy = strategy.flatmap(lambda f, field=field, choices=choices: st.sampled_from([*choices, f[field]]).map(lambda value: {**f, field: value}))
    return strategy


def _steered_test(test, valid: bool):
    """A test of a valid body (`valid`) may also lose one of two exclusive keys and gain an
    answer: changes that keep it valid."""
    if not isinstance(test, dict):
        return st.just(test)
    if valid:
        if test.get("stdin") is not None and test.get("stdin_file") is not None:
            test = {k: v for k, v in test.items() if k != "stdin_file"}
        if test.get("expected") is not None and test.get("expected_file") is not None:
            test = {k: v for k, v in test.items() if k != "expected_file"}
    is_id = lambda value: isinstance(value, str) and FILE_ID.fullmatch(value) is not None  # noqa: E731
    strategy = _steered(test, {"stdin_file": (is_id, list(STORED)), "expected_file": (is_id, list(STORED))})
    if test.get("expected") is None and test.get("expected_file") is None and (valid or not test.keys() & {"expected", "expected_file"}):
        # a test without an answer is a 400 (unless compare is none)
        strategy = strategy.flatmap(lambda t: st.sampled_from([None, "3\n"]).map(lambda expected: t if expected is None else {**t, "expected": expected}))
    return strategy


@pytest.fixture(scope="module")
def judge_server():
    server = Server(JUDGE_FUZZ_ENV).wait_ready()
    for file_id, data in STORED.items():
        assert server.client.post("/files", content=data).json()["id"] == file_id
    yield server
    server.stop()


def judge_answer_is_coherent(ctx, response, case):
    """A 200 from /judge: one test per test asked, `passed` its ACs, the overall verdict CE, AC
    or the first test's (by index) that is neither AC nor SK."""
    if response.status_code != 200:
        return
    JUDGED.append(answer := json.loads(response.content))
    tests = [t["verdict"] for t in answer["tests"]]
    assert answer["total"] == len(tests) == len(case.body["tests"]), answer
    assert answer["passed"] == tests.count("AC"), answer
    if answer["compile"]["exit_code"] != 0:  # a compile error, or its timeout (exit_code null)
        assert answer["verdict"] == "CE", answer
    if answer["verdict"] == "CE":
        assert set(tests) == {"SK"}, answer
    else:
        assert answer["verdict"] == next((v for v in tests if v not in ("AC", "SK")), "AC"), answer


JUDGED: list[dict] = []  # the 200s' answers


@judge_schema.parametrize()
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
def test_judge_conforms_to_its_document(case, judge_server):
    case.call_and_validate(base_url=judge_server.url, additional_checks=[judge_answer_is_coherent])


def test_the_judge_fuzzing_reached_the_sandbox(judge_server):
    """Runs after the fuzzing (same module, in order): the steering works (valid cases were judged:
    the document's own example at least, a python A+B that passes), and no 500 was logged."""
    assert any(answer["verdict"] == "AC" and answer["compile"]["exit_code"] == 0 for answer in JUDGED), JUDGED
    assert judge_server.logged("internal error") == []
    assert judge_server.proc.poll() is None
