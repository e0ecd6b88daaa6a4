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
from kiln.http import judge_request as request
from kiln.judge import numbers
from kiln.http.api import App
from kiln.http.metrics import Metrics
from kiln.http.validate import RUN_LIMITS
from kiln.judge import compare, judge, scoring
from kiln.judge.files import FILE_ID
from kiln.judge.request import GIVEN_FILES
from kiln.log import Log
from kiln.run.pool import Busy, NoWarmSlot, ShuttingDown, WarmSlot
from kiln.run.turns import Turns
from kiln.units import format_duration_ms, format_size
from kiln.wire import protocol
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
    types = {name: field.get("type") for name, field in schema["properties"].items()}
    assert types == {
        "lang_slug": "string",
        "solution_text": "string",
        "checker_text": ["string", "null"],
        "asserts": ["string", "array", "object", "null"],
        "timeout": ["string", "null"],
        "stdin": ["string", "null"],
        "limits": None,  # anyOf: RunLimits or null
    }
    assert schema["properties"]["timeout"]["pattern"] == "^[0-9]+(ms|s|m)$"
    # /run's limits (kiln/http/validate.py _run_limits): memory, pids, output; any other key a 400
    assert schema["properties"]["limits"]["anyOf"] == [{"$ref": "#/components/schemas/RunLimits"}, {"type": "null"}]
    limits = DOC["components"]["schemas"]["RunLimits"]
    assert tuple(limits["properties"]) == RUN_LIMITS and limits["additionalProperties"] is False
    for name, low in (("memory", 1 << 20), ("output", 1)):
        assert (limits["properties"][name]["type"], limits["properties"][name]["pattern"], limits["properties"][name]["minimum"]) == (["integer", "string", "null"], "^[0-9]+[kKmMgG]?$", low)
    assert (limits["properties"]["pids"]["type"], limits["properties"]["pids"]["minimum"]) == (["integer", "null"], 1)


def test_judge_request_fields_are_exactly_the_contracts():
    """DESIGN.md's Judge API table, and the patterns, enums and defaults of kiln/http/judge_request.py."""
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
        "absolute_epsilon": ["number", "null"],
        "relative_epsilon": ["number", "null"],
        "float_rule": ["string", "null"],
        "ignore_case": ["boolean", "null"],
        "limits": None,  # anyOf: JudgeLimits or null
        "compile_timeout": ["string", "null"],
        "stop_on_failure": ["boolean", "null"],
        "checker": ["object", "null"],
        "interactor": ["object", "null"],
        "groups": ["array", "null"],
    }
    assert fields["files"]["propertyNames"]["pattern"] == f"^{request.FILE_NAME.pattern}$"
    content = {"$ref": "#/components/schemas/JudgeFileContent"}  # text, or {"file": id} of the store
    assert fields["files"]["maxProperties"] == request.FILES_MAX and fields["files"]["additionalProperties"] == content
    assert schemas["JudgeFileContent"]["oneOf"][1]["properties"]["file"]["pattern"] == f"^{FILE_ID.pattern}$"
    assert fields["tests"]["minItems"] == 1 and "maxItems" not in fields["tests"]  # RUN_JUDGE_TESTS_MAX is the server's
    assert fields["compare"]["enum"] == [*compare.MODES, None] and fields["compare"]["default"] == "tokens"
    assert fields["ignore_case"]["default"] is False and all(f"`{mode}`" in fields["ignore_case"]["description"] for mode in compare.BYTE_MODES)
    assert (fields["epsilon"]["default"], fields["epsilon"]["minimum"]) == (numbers.DEFAULT_EPSILON, 0)
    assert all(fields[name]["minimum"] == 0 for name in ("absolute_epsilon", "relative_epsilon"))
    assert fields["float_rule"]["enum"] == [*numbers.RULES, None] and fields["float_rule"]["default"] == numbers.RULES[0]
    assert all(f"`{mode}`" in fields["compare"]["description"] for mode in compare.FLOAT_MODES)
    assert fields["compile_timeout"]["default"] == format_duration_ms(request.COMPILE_TIMEOUT_MS)
    assert fields["stop_on_failure"]["default"] is False
    assert fields["limits"]["anyOf"] == [{"$ref": "#/components/schemas/JudgeLimits"}, {"type": "null"}]
    for program in ("checker", "interactor"):  # served: the document says what they get and how they decide
        assert fields[program]["required"] == ["lang_slug", "source"]
        assert set(fields[program]["properties"]) == {"lang_slug", "source", "files"}
        program_files = fields[program]["properties"]["files"]
        assert (program_files["propertyNames"], program_files["maxProperties"], program_files["additionalProperties"]) == (fields["files"]["propertyNames"], request.FILES_MAX, content)
        assert all(f"`{name}`" in program_files["description"] for name in GIVEN_FILES[program])
        assert "exit 0 `AC`, 1 `WA`, 2 `PE`" in fields[program]["description"] or "(0 `AC`, 1 `WA`, 2 `PE`" in fields[program]["description"]
    assert judge.CHECKER_VERDICTS == {0: "AC", 1: "WA", 2: "PE"}  # testlib's: anything else IE
    assert "`judge/input judge/output judge/answer`" in fields["checker"]["description"] and GIVEN_FILES["checker"] == ("input", "output", "answer")
    assert "`judge/input judge/record`" in fields["interactor"]["description"] and GIVEN_FILES["interactor"] == ("input", "record", "answer")
    assert "not supported by this server yet" not in DOCUMENT_PATH.read_text().lower()
    test = schemas["JudgeTest"]
    assert set(test["properties"]) == {"stdin", "stdin_file", "expected", "expected_file", "points"} and "required" not in test
    group = schemas["JudgeGroup"]
    assert set(group["properties"]) == {"name", "tests", "points", "scoring", "depends"} and group["properties"]["scoring"]["enum"] == list(scoring.SCORINGS)
    for name in ("stdin_file", "expected_file"):
        assert test["properties"][name]["pattern"] == f"^{FILE_ID.pattern}$" == DOC["components"]["parameters"]["FileId"]["schema"]["pattern"]
    limits = schemas["JudgeLimits"]["properties"]
    assert tuple(limits) == request.LIMITS and schemas["JudgeLimits"]["additionalProperties"] is False  # an unknown limit: a 400
    duration = DOC["components"]["schemas"]["RunRequest"]["properties"]["timeout"]["pattern"]
    assert limits["time"]["pattern"] == limits["wall_time"]["pattern"] == fields["compile_timeout"]["pattern"] == duration
    for name, low in (("memory", 1 << 20), ("output", 1), ("address_space", 1 << 20)):
        assert (limits[name]["type"], limits[name]["pattern"], limits[name]["minimum"]) == (["integer", "string", "null"], "^[0-9]+[kKmMgG]?$", low)
    assert (limits["pids"]["type"], limits["pids"]["minimum"]) == (["integer", "null"], 1)
    # the answer: DESIGN.md's verdicts, the test's in kiln/judge/judge.py's order of precedence
    tested = schemas["JudgeTestResult"]
    assert tested["properties"]["verdict"]["enum"] == list(judge.VERDICTS)
    assert set(schemas["JudgeResult"]["properties"]["verdict"]["enum"]) == {"CE", *judge.VERDICTS} - {"SK"}
    assert schemas["JudgeResult"]["required"] == ["verdict", "passed", "total", "compile", "tests", "stats"]
    assert schemas["JudgeCompile"]["required"] == ["exit_code", "stdout", "stderr", "cached", "stats"]
    assert tested["required"] == ["verdict", "exit_code", "stdout", "stderr", "checker_message", "stats"]
    # a test's and the build's stats are /run's: the same schema, the same outcomes
    assert tested["properties"]["stats"]["anyOf"][0] == {"$ref": "#/components/schemas/RunStats"}
    assert schemas["JudgeCompile"]["properties"]["stats"] == {"$ref": "#/components/schemas/RunStats"}
    assert set(schemas["RunStats"]["properties"]["outcome"]["enum"]) == set(protocol.OUTCOMES)


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


def result_frame(stdout: bytes = b"out \xff\n", layer: bytes | None = None, stderr: bytes = b"", **overrides) -> tuple[dict, list[bytes]]:
    header = {"op": "result", "exit_code": 0, "outcome": "exited", "wall_ms": 12.5, "cpu_ms": 3.0, "memory_peak_bytes": 4096, "signal": None, "output_overflow": False, "next": False, "address_space_reached": False, "ended_ms": 1000.0}
    return {**header, **overrides}, [stdout, stderr] + ([] if layer is None else [layer])


# what a judge's build leaves: judge/main.pyc (a layer that is not empty is kept by the build cache)
LAYER = b"".join(protocol.LAYER_ENTRY.pack(kind, 0o755, len(path), len(data)) + path + data for kind, path, data in ((b"d", b"judge", b""), (b"f", b"judge/main.pyc", b"\x00" * 16)))


class Pool:
    """Stands in for SlotPool: what acquire() does next is scripted by the test."""

    def __init__(self):
        self.in_flight = 0
        self.warm_count = 4
        self.warm: list = []  # the warm slots /metrics counts by language (none here)
        self.queue: list = []
        self.turns = Turns(1 << 16, 0)  # never queues
        self.judges = Turns(1 << 16, 0)  # every judge request admitted at once
        self.next: Exception | tuple | list | None = None  # a list: one answer per slot taken, in turn
        self.released = 0
        self.slots: list[Slot] = []  # every slot taken, in turn: each has the job it was sent
        self.wants: list[str | None] = []  # the prestarted language each acquire asked for

    def acquire(self, want: str | None = None, wait_s: float | None = 0.0, gone=None, client: str = "") -> WarmSlot:
        self.wants.append(want)
        answer = self.next.pop(0) if isinstance(self.next, list) else self.next
        if isinstance(answer, Exception):
            raise answer
        slot = Slot(answer)
        self.slots.append(slot)
        self.in_flight += 1
        return WarmSlot(index=0, pid=0, sock=slot.front)

    def acquire_pair(self, gone=None) -> tuple[WarmSlot, WarmSlot]:
        first = self.acquire(None, None, gone)
        try:
            return first, self.acquire(None, None, gone)
        except BaseException:
            self.release(first)
            raise

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
        metrics = Metrics(runtime_.config.concurrency, runtime_.workloads)
        metrics.watch(pool)
        app = App(runtime_, pool, metrics, quiet_log, lambda: None)
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
        if response.mimetype == "application/x-ndjson":  # a stream: every line one documented object
            lines = response.get_data().split(b"\n")
            assert lines[-1] == b"" and all(lines[:-1]), "one JSON object a line, each ended by a newline"
            for line in lines[:-1]:
                body_validator(media_types["application/x-ndjson"]["schema"]).validate(json.loads(line))
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


def test_run_limits_are_documented(make_app, observed):
    """/run's `limits` (memory, pids, output; none above the server's): sent with the job, a run
    with its own memory or pids in a plain slot; over limits.output the 413 of RUN_OUTPUT_MAX;
    each wrong value a 400 that names the field (kiln/http/validate.py _run_limits)."""
    app, pool, client = make_app()
    check = lambda response, status: (observed.check("/run", "post", response), assert_status(response, status))  # noqa: E731
    python = app.runtime.workloads["python"]
    pool.next = result_frame()
    check(post_run(client, {**PYTHON, "limits": {"memory": "64m", "pids": 16, "output": 1000}}), 200)
    pool.slots[-1].join(5)
    assert pool.slots[-1].job[0]["limits"] == [0, 64 << 20, 16, 1000, 0] and pool.wants[-1] is None  # a plain slot
    pool.next = result_frame()
    check(post_run(client, {**PYTHON, "limits": {"output": "1k", "memory": None}}), 200)  # null: the server's
    pool.slots[-1].join(5)
    assert pool.slots[-1].job[0]["limits"] == [0, 0, 0, 1024, 0]
    pool.next = result_frame(output_overflow=True)  # over limits.output: as over RUN_OUTPUT_MAX
    response = post_run(client, {**PYTHON, "limits": {"output": 1}})
    check(response, 413)
    assert response.get_json() == {"error": "output too large"}
    over_memory, over_output = python.memory_max + 1, app.config.output_max + 1
    bad = [
        ([], "limits must be an object (memory, pids, output)"),
        ({"time": "1s"}, "limits.time: /run takes only memory, pids and output (a time limit is its timeout)"),
        ({"memory": over_memory}, f"limits.memory {over_memory} is above its maximum of {format_size(python.memory_max)}"),
        ({"memory": "1k"}, "limits.memory must be at least 1m"),
        ({"pids": 0}, "limits.pids must be a whole number >= 1"),
        ({"pids": python.pids_max + 1}, f"limits.pids {python.pids_max + 1} is above its maximum of {python.pids_max}"),
        ({"output": 0}, "limits.output must be at least 1"),
        ({"output": over_output}, f"limits.output {over_output} is above its maximum of {format_size(app.config.output_max)}"),
        ({"output": "1 m"}, "limits.output '1 m' is not a size such as 65536, \"64k\", \"256m\" or \"1g\""),
    ]
    for limits, error in bad:
        response = post_run(client, {**PYTHON, "limits": limits})
        check(response, 400)
        assert response.get_json() == {"error": error}
    assert pool.in_flight == 0 and len(pool.slots) == 3


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


def test_files_statuses_are_documented(make_app, observed, tmp_path):
    from kiln.judge.footprint import Footprint

    # room for two files of 1000 bytes, as the store counts them (blocks and an inode each), not three
    (tmp_path / "files").mkdir(exist_ok=True)
    app, pool, client = make_app(file_max=1000, file_store_max=2 * Footprint.of(tmp_path / "files").charge(1000, 1))
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
    with app.files.pinned([file_id, other]):
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


JUDGE = {"lang_slug": "python", "solution_text": "print(3)", "tests": [{"stdin": "1 2\n", "expected": "3\n"}]}
CHECKER = {"lang_slug": "python", "source": "import sys\nsys.exit(open(sys.argv[2]).read() != open(sys.argv[3]).read())\n"}
INTERACTOR = {"lang_slug": "python", "source": "import sys\nprint(5, flush=True)\nsys.exit(input() != '5')\n"}
ONE_SLOT = "interactor: this server runs one slot (RUN_CONCURRENCY=1); an interactive test needs two at once"


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
    assert answer["compile"]["cached"] is False and answer["tests"][-1]["stats"] is None and answer["tests"][4]["stats"]["outcome"] == "exited"
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
           ({**JUDGE, "tests": [{"stdin": ""}]}, "tests[0]: expected or expected_file is required (unless compare is checker or none, or an interactor is given)"),
           ({**JUDGE, "limits": {"time": "20s"}}, "limits.time 20s is above its maximum of 10s"),
           ({**JUDGE, "limits": {"time": "1s", "cpu": "1s"}}, "limits.cpu: not a limit (one of time, wall_time, memory, output, pids, address_space)"),
           ({**JUDGE, "compare": "checker"}, "checker is required when compare is checker"),
           ({**JUDGE, "checker": CHECKER}, "checker is given: compare must be checker (got tokens)"),
           ({**JUDGE, "compare": "lines", "checker": CHECKER}, "checker is given: compare must be checker (got lines)"),
           ({**JUDGE, "compare": "checker", "checker": {**CHECKER, "lang_slug": "cobol"}}, "checker.lang_slug: unsupported lang_slug"),
           ({**JUDGE, "compare": "checker", "checker": {"lang_slug": "python"}}, "checker.source is required"),
           ({**JUDGE, "interactor": {**INTERACTOR, "lang_slug": "cobol"}}, "interactor.lang_slug: unsupported lang_slug"),
           ({**JUDGE, "interactor": INTERACTOR, "compare": "tokens"}, "interactor is given: compare must not be (the interactor gives the verdict)"),
           ({**JUDGE, "tests": [{"stdin_file": unknown, "expected": ""}]}, f"unknown file {unknown}")]  # fmt: skip
    for body, error in bad:
        response = post_judge(client, body)
        check(response, 400)
        assert response.get_json() == {"error": error}  # DESIGN.md's words exactly
    workloads = dict(app.runtime.workloads)
    workloads["js"] = dataclasses.replace(workloads["js"], build_argv=None)
    app.runtime = dataclasses.replace(app.runtime, workloads=workloads)
    response = post_judge(client, {**JUDGE, "lang_slug": "js"})
    check(response, 400)
    assert response.get_json()["error"] == "lang_slug js cannot judge"
    response = post_judge(client, {**JUDGE, "compare": "checker", "checker": {**CHECKER, "lang_slug": "js"}})
    check(response, 400)
    assert response.get_json()["error"] == "checker.lang_slug js cannot judge"
    languages = client.get("/languages")
    observed.check("/languages", "get", languages)
    served = {lang["slug"]: lang for lang in languages.get_json()["languages"]}
    assert (served["js"]["judge"], served["js"]["judge_file"], served["js"]["judge_time"]) == (False, None, None)
    assert (served["python"]["judge"], served["python"]["judge_file"], served["python"]["judge_time"]) == (True, "main.py", "1s")
    assert (served["python"]["judge_address_space"], served["js"]["judge_address_space"]) == (True, None)
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


def test_judge_streamed_answers_are_documented(make_app, observed):
    """Accept: application/x-ndjson: the compile line, a line per test, the whole answer (the
    plain answer's, exactly); a failure before the compile line keeps its status; one after it is
    the error line that ends the stream."""
    app, pool, client = make_app(judge_parallel=1)
    stream = {"Accept": "application/x-ndjson"}
    tests = [{"stdin": "1 2\n", "expected": "3\n"}] * 3
    pool.next = [result_frame(b"", layer=LAYER), result_frame(b"3\n"), result_frame(), None]  # AC, WA, the slot lost: IE
    response = post_judge(client, {**JUDGE, "tests": tests}, headers={**stream, "X-Request-Id": "stream-1"})
    observed.check("/judge", "post", response, request_id="stream-1")
    lines = [json.loads(line) for line in response.get_data().splitlines()]
    assert [(line["event"], line.get("index")) for line in lines] == [("compile", None), ("test", 0), ("test", 1), ("test", 2), ("done", None)]
    pool.next = [result_frame(b"3\n"), result_frame(), None]  # the same again, plain: its build cached
    plain = post_judge(client, {**JUDGE, "tests": tests}).get_json()
    done = {key: value for key, value in lines[-1].items() if key != "event"}
    assert list(done) == list(plain) and [t["verdict"] for t in done["tests"]] == [t["verdict"] for t in plain["tests"]] == ["AC", "WA", "IE"]
    assert done["tests"] == [{k: v for k, v in line.items() if k not in ("event", "index")} for line in lines[1:4]]
    pool.next = Busy("queue wait")  # before the compile line: the plain refusal
    response = post_judge(client, {**JUDGE, "solution_text": "print(5)"}, headers=stream)
    observed.check("/judge", "post", response)
    assert response.status_code == 429 and response.get_json() == {"error": "runner busy"}
    pool.next = [result_frame(b"", layer=LAYER), ShuttingDown()]  # after it: the error line, the end
    response = post_judge(client, {**JUDGE, "solution_text": "print(6)", "tests": tests}, headers=stream)
    observed.check("/judge", "post", response)
    lines = [json.loads(line) for line in response.get_data().splitlines()]
    assert response.status_code == 200 and [line["event"] for line in lines] == ["compile", "error"] and lines[-1]["error"] == "shutting down"
    assert pool.in_flight == 0


def jobs(pool: Pool, first: int = 0) -> list[tuple[dict, list[bytes]]]:
    """The job frames the stand-in slots were sent, from the `first` slot taken on."""
    for slot in pool.slots[first:]:
        slot.join(5)
    return [slot.job for slot in pool.slots[first:]]


def test_judge_checker_answers_are_documented(make_app, observed):
    """compare checker: the checker built first, then the submission; after each test whose run
    gave no verdict of its own, the checker in a slot of its own with the test's input, output and
    answer as its three files; its exit code in testlib's convention (0 AC, 1 WA, 2 PE, else IE),
    its stdout then stderr the test's checker_message. Each answer checked against the document."""
    app, pool, client = make_app(judge_parallel=1)
    check = lambda response, status: (observed.check("/judge", "post", response), assert_status(response, status))  # noqa: E731
    checked = {  # a test's run exits 0 (it has no verdict of its own): the checker's answer -> verdict, checker_message
        "AC": (result_frame(b"ok 3\n"), "ok 3\n"),
        "WA": (result_frame(b"wrong answer: expected 3, found 4\n", exit_code=1), "wrong answer: expected 3, found 4\n"),
        "PE": (result_frame(b"", stderr=b"wrong output format: expected an integer\n", exit_code=2), "wrong output format: expected an integer\n"),
        "IE": (result_frame(b"FAIL the answer is not an integer\n", exit_code=3), "FAIL the answer is not an integer\n"),  # testlib's checker failure
    }
    ie_timed_out = (result_frame(b"", outcome="timed_out", exit_code=None, signal=9), "kiln: the checker ended timed_out")
    ie_lost = (None, "kiln: the checker's sandbox was lost")
    both_streams = (result_frame(b"ok ", stderr=b"3 \xff"), "ok 3 \ufffd")
    tests = [{"stdin": f"{i}\n", "expected": "3\n"} for i in range(len(checked) + 3)] + [{"stdin": "7\n"}, {"stdin": "8\n", "expected": "3\n"}]
    script = [result_frame(b"", layer=LAYER), result_frame(b"", layer=LAYER)]  # the checker's build, then the submission's
    for frame, _message in (*checked.values(), ie_timed_out, ie_lost, both_streams):
        script += [result_frame(b"3\n"), frame]
    script += [result_frame(b"3\n"), checked["AC"][0], result_frame(b"", exit_code=1)]  # a test without an answer; a test that is RE: no checker
    pool.next = script
    response = post_judge(client, {**JUDGE, "tests": tests, "compare": "checker", "checker": CHECKER})
    check(response, 200)
    answer = response.get_json()
    verdicts = [*checked, "IE", "IE", "AC", "AC", "RE"]
    assert [t["verdict"] for t in answer["tests"]] == verdicts and (answer["verdict"], answer["passed"]) == ("WA", 3), answer
    messages = [message for _frame, message in (*checked.values(), ie_timed_out, ie_lost, both_streams)] + ["ok 3\n", None]
    assert [t["checker_message"] for t in answer["tests"]] == messages
    assert all(t["stdout"] == "3\n" for t in answer["tests"][:-1]) and answer["tests"][-1]["exit_code"] == 1
    assert pool.in_flight == 0 and pool.next == []
    sent = jobs(pool)
    checker_build, build, runs = sent[0], sent[1], sent[2:]
    assert (checker_build[0]["command"], checker_build[0]["files"], checker_build[1]) == ("build", ["main.py"], [CHECKER["source"].encode()])
    assert (build[0]["command"], build[1]) == ("build", [JUDGE["solution_text"].encode()])
    run_0, checker_0 = runs[0], runs[1]
    assert (checker_0[0]["command"], checker_0[0]["slug"], checker_0[0]["files"], checker_0[0]["stdin"]) == ("exec", "python", list(GIVEN_FILES["checker"]), False)
    assert checker_0[1] == [b"0\n", b"3\n", b"3\n"]  # the test's input, the submission's output, the expected answer
    assert checker_0[0]["layer"] != run_0[0]["layer"] and checker_0[0]["limits"] == [0, 0, 0, 0, 0]  # its own build, its language's limits
    no_answer = runs[-2]  # the checker of the test without an answer
    assert no_answer[1] == [b"7\n", b"3\n", b""]  # no expected answer: an empty file
    assert len(runs) == 2 * (len(tests) - 1) + 1  # the RE test: no checker run
    # the same checker again: cached, its build skipped; the submission's too
    first = len(pool.slots)
    pool.next = [result_frame(b"3\n"), checked["PE"][0]]
    response = post_judge(client, {**JUDGE, "compare": "checker", "checker": CHECKER})
    check(response, 200)
    assert (response.get_json()["verdict"], response.get_json()["compile"]["cached"]) == ("PE", True)
    assert [job[0]["command"] for job in jobs(pool, first)] == ["exec", "exec"]
    # a checker that does not build: 400 with its compiler's words; the submission is not built
    pool.next = [result_frame(b"  File \"judge/main.py\", line 1\n", stderr=b"SyntaxError: invalid syntax\n", exit_code=1)]
    response = post_judge(client, {**JUDGE, "solution_text": "print(5)", "compare": "checker", "checker": {**CHECKER, "source": "import sys\nif\n"}})
    check(response, 400)
    assert response.get_json() == {"error": "checker does not build", "detail": '  File "judge/main.py", line 1\nSyntaxError: invalid syntax\n'}
    assert pool.next == [] and pool.in_flight == 0


def test_judge_interactor_answers_are_documented(make_app, observed):
    """An interactor: built first, then per test two slots at once, the submission's and the
    interactor's (their pipes sent with the jobs); the submission's own verdict if it has one,
    else the interactor's exit code in testlib's convention; its stderr the checker_message."""
    app, pool, client = make_app(judge_parallel=1)
    check = lambda response, status: (observed.check("/judge", "post", response), assert_status(response, status))  # noqa: E731
    ran = result_frame(b"5\n")  # the submission's run: exited 0, no verdict of its own
    pairs = [  # (the submission's answer, the interactor's) -> the test's verdict and checker_message
        (ran, result_frame(b"5\n", stderr=b"found in 1 query\n"), "AC", "found in 1 query\n"),
        (ran, result_frame(b"5\n", stderr=b"wrong guess\n", exit_code=1), "WA", "wrong guess\n"),
        (ran, result_frame(b"5\n", stderr=b"expected an integer\n", exit_code=2), "PE", "expected an integer\n"),
        (ran, result_frame(b"5\n", exit_code=7), "IE", ""),
        (ran, result_frame(b"5\n", outcome="timed_out", exit_code=None, signal=9), "IE", ""),
        (result_frame(b"", outcome="timed_out", exit_code=None, signal=9), result_frame(b"5\n", stderr=b"no answer\n", exit_code=1), "TLE", "no answer\n"),
        (None, result_frame(b"5\n"), "IE", None),  # the submission's slot lost
    ]
    script = [result_frame(b"", layer=LAYER), result_frame(b"", layer=LAYER)]  # the interactor's build, then the submission's
    for submission, interactor, _verdict, _message in pairs:
        script += [submission, interactor]
    pool.next = script
    tests = [{"stdin": f"{i}\n"} for i in range(len(pairs) - 1)] + [{"stdin": "9\n", "expected": "unused\n"}]
    body = {**JUDGE, "solution_text": "print(input())", "tests": tests, "interactor": INTERACTOR, "limits": {"time": "1s", "wall_time": "3s"}}
    response = post_judge(client, body)
    check(response, 200)
    answer = response.get_json()
    assert [(t["verdict"], t["checker_message"]) for t in answer["tests"]] == [(verdict, message) for _s, _i, verdict, message in pairs]
    assert (answer["verdict"], answer["passed"]) == ("WA", 1) and answer["tests"][0]["stdout"] == "5\n"  # what the submission wrote
    assert answer["tests"][-1]["stats"] is None and pool.in_flight == 0 and pool.next == []
    sent = jobs(pool)
    submission, interactor = sent[2], sent[3]
    assert (submission[0]["command"], submission[0]["pipes"], submission[0]["stdin"], submission[0]["files"]) == ("exec", True, False, [])
    assert (interactor[0]["command"], interactor[0]["pipes"], interactor[0]["files"], interactor[1]) == ("exec", True, ["input", "record"], [b"0\n", b""])
    assert interactor[0]["layer"] != submission[0]["layer"] and submission[0]["limits"][0] == 1000
    assert interactor[0]["timeout_ms"] == judge.CHECKER_WALL_MS  # 10 s, or the test's wall time + 1 s when longer
    # an interactor that does not build: 400 with its compiler's words
    pool.next = [result_frame(b"", stderr=b"SyntaxError: invalid syntax\n", exit_code=1)]
    response = post_judge(client, {**JUDGE, "interactor": {**INTERACTOR, "source": "if\n"}, "tests": [{"stdin": ""}]})
    check(response, 400)
    assert response.get_json() == {"error": "interactor does not build", "detail": "SyntaxError: invalid syntax\n"}
    assert pool.next == [] and pool.in_flight == 0
    # a server of one slot: an interactive test needs two at once
    app, pool, client = make_app(concurrency=1, judge_parallel=1)
    response = post_judge(client, {**JUDGE, "interactor": INTERACTOR})
    check(response, 400)
    assert response.get_json() == {"error": ONE_SLOT} and pool.slots == []


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
# slug, a real program, usable limits, no checker or interactor or a real one, the ids of files the
# store has and an expected answer; each swap keeps the case as valid or invalid as it was (a value
# is swapped only when it is valid, for another valid one).

JUDGE_FUZZ_EXAMPLES = int(os.environ.get("KILN_JUDGE_FUZZ_EXAMPLES", "25"))
# RUN_TIMEOUT_MAX: above a checker's and an interactor's wall limit (judge.CHECKER_WALL_MS, 10 s), which no job may pass
JUDGE_FUZZ_ENV = {"RUN_LANGS": "python", "RUN_CONCURRENCY": "4", "RUN_JUDGE_TESTS_MAX": "3", "RUN_JUDGE_TIME_MAX": "1s", "RUN_TIMEOUT_MAX": "11s", "ALLOW_SHUTDOWN": "0"}
STORED = {b"1 2\n": None, b"3\n": None}  # uploaded before fuzzing: id -> its bytes
STORED = {"sha256:" + hashlib.sha256(data).hexdigest(): data for data in STORED}
PROGRAMS = [
    "a, b = map(int, input().split())\nprint(a + b)\n",  # AC on 1 2 -> 3
    "import sys\nsys.stdout.write(sys.stdin.read())\n",
    "print(1\n",  # CE
    "raise SystemExit(3)\n",  # RE
]
# a checker (WA unless the output's tokens are the answer's) and an interactor (it sends the test's
# input, then AC when the answer is 3), each built once (then cached) and run per test
FUZZ_CHECKER = {"lang_slug": "python", "source": "import sys\nsys.exit(open(sys.argv[2]).read().split() != open(sys.argv[3]).read().split())\n"}
FUZZ_INTERACTOR = {"lang_slug": "python", "source": "import sys\nsys.stdout.write(open(sys.argv[1]).read())\nsys.stdout.close()\ngot = sys.stdin.read().split()\nprint('got', got[:3], file=sys.stderr)\nsys.exit(got != ['3'])\n"}
_program = lambda value: isinstance(value, dict) and all(isinstance(value.get(key), str) for key in ("lang_slug", "source"))  # noqa: E731
_DURATION = re.compile(r"[0-9]+(ms|s|m)")
_SIZE = re.compile(r"[0-9]+[kKmMgG]?")
_duration = lambda value: isinstance(value, str) and _DURATION.fullmatch(value) is not None  # noqa: E731
_whole = lambda low: lambda value: type(value) is int and value >= low  # noqa: E731
# field -> (when a value is valid, what may replace it): a share of the cases gets a usable value
STEERED = {
    "lang_slug": (lambda value: isinstance(value, str), ["python", "python"]),
    "solution_text": (lambda value: isinstance(value, str), PROGRAMS),
    "compare": (lambda value: value in compare.MODES, ["tokens", "lines", "exact", "float", "none"]),
    "checker": (_program, [None, FUZZ_CHECKER]),  # with compare checker (else a 400)
    "interactor": (_program, [None, FUZZ_INTERACTOR]),  # without compare (else a 400)
    "compile_timeout": (_duration, ["5s"]),
}
STEERED_LIMITS = {
    "time": (_duration, ["200ms", "1s"]),
    "wall_time": (_duration, ["3s"]),
    "memory": (lambda value: _whole(1 << 20)(value) or isinstance(value, str) and _SIZE.fullmatch(value) is not None, [64 << 20, "64m"]),
    "output": (_whole(1), [1 << 16]),
    "pids": (_whole(1), [32]),
    "address_space": (lambda value: _whole(1 << 20)(value) or isinstance(value, str) and _SIZE.fullmatch(value) is not None, [256 << 20, "256m"]),
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
            # answer, an unknown file, a limit over the server's maximum, a checker without compare
            # checker (or the reverse), an interactor with a compare, or a checker or interactor that
            # does not build, as the document says. ignored_auth: RUN_API_KEYS is unset here (the open API).
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
