"""The HTTP contract of DESIGN.md as a WSGI application (werkzeug routing, gevent underneath)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import gevent
from werkzeug.exceptions import MethodNotAllowed, NotFound
from werkzeug.routing import Map, PathConverter, Rule
from werkzeug.wrappers import Response
from werkzeug.wsgi import ClosingIterator

from kiln.http import files_api, judge_stream
from kiln.http.answers import judge_json, run_json
from kiln.http.bodies import BodyBudget, declared_length
from kiln.http.judge_request import parse_judge
from kiln.http.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from kiln.http.metrics import Metrics
from kiln.http.responses import CLIENT_GONE, CLOSE, TEXT, Answer, ApiError, ReadTimeout, error_response, json_response
from kiln.http.validate import RunRequest, parse_run
from kiln.http.watch import ClientWatch
from kiln.judge.builds import Builds
from kiln.judge.files import FileStore, UnknownFile
from kiln.judge.builds import NoRoom
from kiln.judge.answer import JudgeAnswer, cut
from kiln.judge.judge import DoesNotBuild, Judge
from kiln.judge.sources import TooMuchSource
from kiln.log import Log
from kiln.run.pool import Busy, NoWarmSlot, ShuttingDown, SlotPool
from kiln.run.runner import Cancelled, Ran, Runner, SlotLost
from kiln.runtime import Runtime
from kiln.units import format_duration_ms

OPENAPI_DOCUMENT = Path(__file__).with_name("openapi.json")
STREAM_END_KEYS = ("status", "outcome", "wall_ms", "tests", "passed", "bytes_out")


class AnyText(PathConverter):
    """Any text, newlines and nothing too: whatever follows /files/ is an id, or a 400 that says so."""

    regex = r"[\s\S]*"
    part_isolating = False  # slashes too (werkzeug would infer True: no "/" in the pattern)


class App:
    def __init__(self, runtime: Runtime, pool: SlotPool, metrics: Metrics, log: Log, request_shutdown, no_cgroups_reason: str | None = None):
        self.runtime = runtime
        self.config = runtime.config
        self.pool = pool
        self.log = log
        self.metrics = metrics
        self.request_shutdown = request_shutdown
        # said on every /health: an operator must not miss that limits are not enforced, or what
        # a rootless sandbox lacks
        notes = [f"NO CGROUPS: memory and pids limits are not enforced: {no_cgroups_reason}"] if no_cgroups_reason else []
        if runtime.user_namespace is not None:
            notes.append("ROOTLESS, weaker than under root: " + "; ".join(runtime.user_namespace.weaker()))
        self.health_note = "".join(f" ({note})" for note in notes)
        self.cgroups = not no_cgroups_reason
        self.shutting_down = False
        self.runner = Runner(pool, runtime, log)
        self.bodies = BodyBudget(runtime.config.judge_bodies_max)
        self._files: FileStore | None = None
        self.judge = Judge(self.runner, runtime, Builds(runtime.layers_dir, runtime.config.build_cache_max, log), log, runtime.config.judge_parallel)
        self.openapi = OPENAPI_DOCUMENT.read_bytes()  # GET /openapi.json: read once, served as is
        self.url_map = Map(
            [
                Rule("/run", endpoint="run", methods=["POST"]),
                Rule("/judge", endpoint="judge", methods=["POST"]),
                Rule("/files", endpoint="files", methods=["POST"]),
                Rule("/files/<anything:file_id>", endpoint="file", methods=["GET", "DELETE"]),
                Rule("/health", endpoint="health", methods=["GET"]),
                Rule("/languages", endpoint="languages", methods=["GET"]),
                Rule("/metrics", endpoint="metrics", methods=["GET"]),
                Rule("/shutdown", endpoint="shutdown", methods=["POST"]),
                Rule("/openapi.json", endpoint="openapi", methods=["GET"]),
            ],
            converters={"anything": AnyText},
        )

    @property
    def files(self) -> FileStore:
        """The file store, made on first use: after the front has dropped to RUN_FRONT_USER, so
        that what it creates in RUN_FILE_STORE is the front's own. The index is rebuilt then."""
        if self._files is None:
            self._files = FileStore(self.config.file_store, self.config.file_max, self.config.file_store_max, self.log)
        return self._files

    # -- entries ---------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        """WSGI: every route."""
        response, done = self.answer(environ)
        if isinstance(response, Answer):
            response = response.to_werkzeug()
        # the access log line is written once the response is out (the server closes the body
        # after sending it): a write to the log's pipe or socket wakes its reader, which is no
        # part of the client's wait. (Not Response.call_on_close: a passthrough body, a /files
        # download's, is returned without the response's own close.)
        return ClosingIterator(response(environ, start_response), done)

    def answer(self, environ, endpoint: str | None = None) -> tuple[Answer | Response, Callable[[], None]]:
        """The answer to one request, and what to call once it is sent (the access log line).
        `endpoint` when the caller has routed it already (server.py's direct POST /run)."""
        started = time.monotonic()
        request_id = _request_id(environ.get("HTTP_X_REQUEST_ID"))
        info: dict = {}
        route = "unknown"
        try:
            args = {}
            if endpoint is None:
                endpoint, args = self.url_map.bind_to_environ(environ).match()
            route = endpoint
            response = getattr(self, f"on_{endpoint}")(environ, info, **args)
        except ApiError as error:
            response = error_response(error.status, error.error)
            response.headers.update(error.headers)
        except NotFound:
            response = error_response(404, "not found")
        except MethodNotAllowed as error:
            response = error_response(405, "method not allowed")
            response.headers["Allow"] = ", ".join(error.valid_methods or ())
        except Exception as error:  # noqa: BLE001 - any bug is a logged 500, never a dropped connection
            self.log.error("internal error", request_id=request_id, error=repr(error))
            response = error_response(500, "internal")
        response.headers["X-Request-Id"] = request_id
        status = info.get("status", response.status_code)
        self.metrics.requests.labels(route, str(status), info.get("lang", "")).inc()
        record = dict(
            method=environ.get("REQUEST_METHOD"),
            path=environ.get("PATH_INFO"),
            status=status,
            lang=info.get("lang"),
            outcome=info.get("outcome"),
            wall_ms=info.get("wall_ms"),
            duration_ms=round((time.monotonic() - started) * 1000, 2),
            slot_index=info.get("slot_index"),
            prestarted=info.get("prestarted"),
            tests=info.get("tests"),
            passed=info.get("passed"),
            bytes_in=info.get("bytes_in"),
            bytes_out=response.content_length,
            request_id=request_id,
        )
        if self.log.debug_enabled:
            self.log.debug("request headers", request_id=request_id, headers={k[5:]: v for k, v in environ.items() if k.startswith("HTTP_") and k != "HTTP_AUTHORIZATION"})
        if "streamed" in info:  # a streamed answer's outcome, figures and length are known at its end
            return response, lambda: self.log.access(**{**record, **{key: info.get(key) for key in STREAM_END_KEYS}, "duration_ms": round((time.monotonic() - started) * 1000, 2)})
        return response, lambda: self.log.access(**record)

    # -- routes -----------------------------------------------------------------------------
    def on_run(self, environ, info) -> Answer:
        """parse -> run -> respond"""
        owner = self.authorize(environ)
        raw = self._read_body(environ, info)
        info["bytes_in"] = len(raw)
        request = parse_run(raw, self.runtime)
        info["lang"] = request.slug
        if self.shutting_down:
            raise ApiError(503, "shutting down")
        watch = ClientWatch(environ)
        try:
            ran = self.runner.run(request.job, watch.gone, client=_client(owner, environ))
        except (Busy, NoWarmSlot, ShuttingDown, Cancelled, SlotLost) as failure:
            return self._run_failure(failure, info)
        finally:
            watch.stop()
        return self._result_response(ran, request, info)

    def _run_failure(self, failure: Exception, info) -> Answer:
        """What the Runner could not do, as the contract's answer (a SlotLost is a 500)."""
        if isinstance(failure, Busy):
            self.metrics.busy_refusals.labels(failure.reason).inc()
            raise ApiError(429, "runner busy", headers={"Retry-After": "1"})
        if isinstance(failure, NoWarmSlot):
            self.log.error("no warm slot", error=str(failure))
            raise ApiError(503, "no warm slot")
        if isinstance(failure, ShuttingDown):
            raise ApiError(503, "shutting down")
        if isinstance(failure, Cancelled):
            info.update(status=CLIENT_GONE, outcome="cancelled")
            return error_response(500, "internal")  # never read: the client is gone
        if self.shutting_down:  # SlotLost: killed at the end of the grace period: let a balancer retry it
            raise ApiError(503, "shutting down")
        raise failure

    def on_judge(self, environ, info) -> Answer | Response:
        """parse -> judge -> respond (kiln/judge/); with Accept: application/x-ndjson, streamed
        as things end (kiln/http/judge_stream.py)"""
        owner = self.authorize(environ)
        held = self.bodies.hold(environ, self.config.judge_input_max)
        streamed = False
        try:
            raw = self._read_body(environ, info, self.config.judge_input_max)
            info["bytes_in"] = len(raw)
            request = parse_judge(raw, self.runtime)
            info["lang"] = request.slug
            if self.shutting_down:
                raise ApiError(503, "shutting down")
            files = self.files if request.file_ids else None
            watch = ClientWatch(environ)

            def judged(progress=None) -> JudgeAnswer:
                try:
                    with files.pinned(request.file_ids, owner) if files else contextlib.nullcontext():
                        return self.judge.run(request, files, watch.gone, _client(owner, environ), progress)
                finally:
                    held.release()  # a streamed answer's judging ends here, in its own greenlet

            def refused(failure: BaseException) -> Answer:
                return self._judge_failure(failure, request, info)

            def finished(answer: JudgeAnswer) -> dict:
                info.update(outcome=answer.verdict, wall_ms=answer.wall_ms, tests=answer.total, passed=answer.passed)
                self.metrics.judged(request.slug, answer)
                return judge_json(answer)

            if judge_stream.wanted(environ):
                streamed = True
                return judge_stream.answer(judged, watch, info, refused, finished, self.log)
            try:
                answer = judged()
            except Exception as failure:  # noqa: BLE001 - refused() answers the known ones, raises the rest
                return refused(failure)
            finally:
                watch.stop()
            return json_response(200, finished(answer))
        finally:
            if not streamed:
                held.release()

    def _judge_failure(self, failure: BaseException, request, info) -> Answer:
        """A judge request's failure as the contract's answer (an ApiError raised, or an Answer);
        any other exception raised again (a bug: a logged 500)."""
        if isinstance(failure, UnknownFile):  # DESIGN.md's words: upload it and retry; a `files` object's, with its field
            field = request.named_files().get(failure.file_id)
            raise ApiError(400, f"{field}: unknown file {failure}" if field else f"unknown file {failure}") from None
        if isinstance(failure, TooMuchSource):
            raise ApiError(400, str(failure)) from None
        if isinstance(failure, DoesNotBuild):
            info.update(outcome=f"{failure.what} does not build")
            return json_response(400, {"error": str(failure), "detail": cut(failure.detail.encode())})
        if isinstance(failure, NoRoom):
            info.update(outcome="no room for the build")
            raise ApiError(503, str(failure), headers={"Retry-After": "5"}) from None
        if isinstance(failure, (Busy, NoWarmSlot, ShuttingDown, Cancelled, SlotLost)):
            return self._run_failure(failure, info)
        raise failure

    def on_files(self, environ, info) -> Answer:
        """POST /files: one file into the store (kiln/http/files_api.py)."""
        return files_api.on_upload(self, environ, info)

    def on_file(self, environ, info, file_id: str) -> Answer | Response:
        """GET or DELETE /files/<id> (kiln/http/files_api.py)."""
        return files_api.on_file(self, environ, info, file_id)

    def on_health(self, environ, info) -> Answer:
        if self.shutting_down:
            return Answer(503, b"shutting down\n", TEXT)
        healthy, text = self.pool.healthy()
        return Answer(200 if healthy else 503, (text + self.health_note + "\n").encode(), TEXT)

    def on_languages(self, environ, info) -> Answer:
        self.authorize(environ)
        config = self.config
        served = [
            {
                "slug": w.slug,
                "checker": w.language.has_client_harness,  # the API's name: checker_text required
                "version": self.runtime.versions.get(w.slug),
                "tmp_size_bytes": w.tmp_size,
                "memory_max_bytes": w.memory_max,
                "pids_max": w.pids_max,
                "prestart": w.prestart_argv is not None,
                "judge": w.judges,
                "judge_file": w.language.judge_file if w.judges else None,
                "judge_time": format_duration_ms(w.language.judge_time_ms) if w.judges else None,
                "judge_build": w.build_script if w.judges else None,
                "judge_exec": w.exec_script if w.judges else None,
                "judge_address_space": w.language.address_space if w.judges else None,
            }
            for w in self.runtime.workloads.values()
        ]
        body = {
            "languages": served,
            "unserved": [{"slug": u.slug, "reason": u.reason} for u in self.runtime.unserved],
            "limits": {
                "timeout_max_ms": config.timeout_max_ms, "input_max_bytes": config.input_max, "output_max_bytes": config.output_max,
                "concurrency": config.concurrency, "cgroups": self.cgroups, "judge_input_max_bytes": config.judge_input_max,
                "judge_tests_max": config.judge_tests_max, "judge_time_max_ms": config.judge_time_max_ms, "judge_parallel": config.judge_parallel,
                "file_max_bytes": config.file_max,
            },  # fmt: skip
        }
        return json_response(200, body)

    def on_metrics(self, environ, info) -> Answer:
        return Answer(200, self.metrics.render(), METRICS_CONTENT_TYPE)

    def on_openapi(self, environ, info) -> Answer:
        return Answer(200, self.openapi)

    def on_shutdown(self, environ, info) -> Answer:
        if not self.config.allow_shutdown:
            raise NotFound()
        self.authorize(environ)
        self.request_shutdown()
        return json_response(200, {"status": "shutting down"})

    # -- helpers ----------------------------------------------------------------------------
    def authorize(self, environ) -> str:
        """The client, as the file store names owners: "" where no API keys are configured, else
        a digest of its key (never the key itself, which the store would keep on disk). The
        queue's shares take it as the client, else (no keys) the peer address, REMOTE_ADDR."""
        keys = self.config.api_keys
        if not keys:
            return ""
        scheme, _, given = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
        given = given.strip().encode()
        if scheme.lower() != "bearer" or not any(hmac.compare_digest(given, key.encode()) for key in keys):
            raise ApiError(401, "unauthorized")
        return hashlib.sha256(b"kiln file owner\0" + given).hexdigest()[:32]

    def _read_body(self, environ, info, limit: int | None = None) -> bytes:
        """The whole body, at most `limit` bytes (RUN_INPUT_MAX unless told; 413 past it), within
        what is left of the request's RUN_READ_TIMEOUT (408 after, the connection closed). A
        client that hangs up mid-body is a client error (logged 499)."""
        limit = self.config.input_max if limit is None else limit
        length = declared_length(environ, limit)
        stream = environ["wsgi.input"]
        deadline = environ.get("kiln.read_deadline")
        try:
            with gevent.Timeout(max(0.0, deadline - time.monotonic()) if deadline else None, ReadTimeout):
                data = stream.read(length) if length is not None else stream.read(limit + 1)
        except ReadTimeout:
            raise ApiError(408, "request timeout", headers=CLOSE) from None
        except OSError:  # pywsgi: "unexpected end of file while reading request"
            info["status"] = CLIENT_GONE
            raise ApiError(400, "the request body ended before its length", headers=CLOSE) from None
        if len(data) > limit:
            raise ApiError(413, "payload too large", headers=CLOSE)
        return data

    def _result_response(self, ran: Ran, request: RunRequest, info) -> Answer:
        result = ran.result
        outcome = "output_too_large" if result.output_overflow else result.outcome
        info.update(outcome=outcome, wall_ms=result.wall_ms, slot_index=ran.slot_index, prestarted=ran.prestarted)
        self.metrics.runs.labels(request.slug, outcome).inc()
        self.metrics.run_seconds.labels(request.slug).observe(result.wall_ms / 1000)
        if ran.prestarted:
            self.metrics.prestarted_runs.labels(request.slug).inc()
        if result.output_overflow:
            return error_response(413, "output too large")
        return json_response(200, run_json(result))


def _client(owner: str, environ) -> str:
    """Whose request it is, for the queue's shares (kiln/run/turns.py): its API key's owner where
    keys are configured, else its peer address (behind a balancer, the balancer's)."""
    return owner or environ.get("REMOTE_ADDR", "")


def _request_id(given: str | None) -> str:
    if given and len(given) <= 200 and given.isascii() and given.isprintable():
        return given
    return uuid.uuid4().hex

