"""The HTTP contract of DESIGN.md as a WSGI application (werkzeug routing, gevent underneath)."""

from __future__ import annotations

import hmac
import json
import time
import uuid
from pathlib import Path

import gevent
import gevent.socket
from werkzeug.exceptions import MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Response

from kiln.http.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from kiln.http.metrics import Metrics
from kiln.http.pool import Busy, ClientGone, NoWarmSlot, ShuttingDown, SlotPool, WarmSlot
from kiln.http.validate import ApiError, RunRequest, parse_run
from kiln.http.watch import ClientWatch
from kiln.log import Log
from kiln.runtime import Runtime
from kiln.zygote import protocol
from kiln.zygote.protocol import ProtocolError

JSON = "application/json"
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# A slot enforces the run's timeout itself and answers within its drain grace (2 s) after it;
# this bounds a slot that stopped answering, which is then killed from outside.
SLOT_SILENCE_GRACE_S = 5.0
CLIENT_GONE = 499  # logged only: nobody is left to read it
CLOSE = {"Connection": "close"}  # what is left of the request is not read: the connection ends
OPENAPI_DOCUMENT = Path(__file__).with_name("openapi.json")


class App:
    def __init__(self, runtime: Runtime, pool: SlotPool, log: Log, request_shutdown, no_cgroups_reason: str | None = None):
        self.runtime = runtime
        self.config = runtime.config
        self.pool = pool
        self.log = log
        self.metrics = Metrics(pool, runtime.config.concurrency)
        self.request_shutdown = request_shutdown
        # said on every /health: an operator must not miss that limits are not enforced
        self.health_note = f" (NO CGROUPS: memory and pids limits are not enforced: {no_cgroups_reason})" if no_cgroups_reason else ""
        self.shutting_down = False
        self.prestart_broken: set[str] = set()  # languages whose prestart command died unreleased
        self.result_limit = 2 * self.config.output_max + protocol.MAX_HEADER + 64
        self.openapi = OPENAPI_DOCUMENT.read_bytes()  # GET /openapi.json: read once, served as is
        self.url_map = Map(
            [
                Rule("/run", endpoint="run", methods=["POST"]),
                Rule("/health", endpoint="health", methods=["GET"]),
                Rule("/languages", endpoint="languages", methods=["GET"]),
                Rule("/metrics", endpoint="metrics", methods=["GET"]),
                Rule("/shutdown", endpoint="shutdown", methods=["POST"]),
                Rule("/openapi.json", endpoint="openapi", methods=["GET"]),
            ]
        )

    # -- WSGI entry -------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        started = time.monotonic()
        request_id = _request_id(environ.get("HTTP_X_REQUEST_ID"))
        info: dict = {}
        route = "unknown"
        try:
            endpoint, _args = self.url_map.bind_to_environ(environ).match()
            route = endpoint
            response = getattr(self, f"on_{endpoint}")(environ, info)
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
        self.log.info(
            "request",
            method=environ.get("REQUEST_METHOD"),
            path=environ.get("PATH_INFO"),
            status=status,
            lang=info.get("lang"),
            outcome=info.get("outcome"),
            wall_ms=info.get("wall_ms"),
            duration_ms=round((time.monotonic() - started) * 1000, 2),
            slot=info.get("slot"),
            prestarted=info.get("prestarted"),
            bytes_in=info.get("bytes_in"),
            bytes_out=response.content_length,
            request_id=request_id,
        )
        if self.log.debug_enabled:
            self.log.debug("request headers", request_id=request_id, headers={k[5:]: v for k, v in environ.items() if k.startswith("HTTP_") and k != "HTTP_AUTHORIZATION"})
        return response(environ, start_response)

    # -- routes -----------------------------------------------------------------------------
    def on_run(self, environ, info) -> Response:
        self._authorize(environ)
        raw = self._read_body(environ, info)
        info["bytes_in"] = len(raw)
        request = parse_run(raw, self.runtime)
        info["lang"] = request.slug
        if self.shutting_down:
            raise ApiError(503, "shutting down")
        watch = ClientWatch(environ)
        try:
            frame = self._run(request, self._prestart_kind(request), watch, info)
            if frame is not None and frame[0].get("op") == "prestart_failed":
                # the slot's prestart command had died before the request came: never prestart
                # this language again (until restart), and run the request in a plain slot
                self.prestart_broken.add(request.slug)
                self.log.error("prestart command failed; prestarting stops for this language", lang=request.slug, error=str(frame[0].get("error")))
                frame = self._run(request, None, watch, info)
        finally:
            watch.stop()
        if info.get("prestarted") and frame is not None:
            self.metrics.prestarted_runs.labels(request.slug).inc()
        return self._result_response(frame, request, info)

    def _run(self, request: RunRequest, want: str | None, watch: ClientWatch, info) -> tuple[dict, list[bytes]] | None:
        """One attempt: a slot (see SlotPool.acquire for `want`), the job, the slot's answer;
        None when the client left."""
        try:
            slot = self.pool.acquire(want, min(self.config.queue_wait_ms, request.timeout_ms) / 1000, watch.gone)
        except Busy as busy:
            self.metrics.busy_refusals.labels(busy.reason).inc()
            raise ApiError(429, "runner busy", headers={"Retry-After": "1"}) from None
        except NoWarmSlot as error:
            self.log.error("no warm slot", error=str(error))
            raise ApiError(503, "no warm slot") from None
        except ShuttingDown:
            raise ApiError(503, "shutting down") from None
        except ClientGone:
            return None
        info["slot"] = slot.index
        info["prestarted"] = slot.prestart is not None
        silent = False
        try:
            return self._run_on(slot, request, watch)
        except SlotSilent:
            silent = True
            raise
        except RuntimeError:
            if self.shutting_down:  # killed at the end of the grace period: let a balancer retry it
                raise ApiError(503, "shutting down") from None
            raise
        finally:  # before the response is written
            if silent:
                self.pool.condemn(slot)
            else:
                self.pool.release(slot)

    def on_health(self, environ, info) -> Response:
        if self.shutting_down:
            return Response("shutting down\n", 503, content_type="text/plain")
        healthy, text = self.pool.healthy()
        return Response(text + self.health_note + "\n", 200 if healthy else 503, content_type="text/plain")

    def on_languages(self, environ, info) -> Response:
        self._authorize(environ)
        config = self.config
        served = [
            {
                "slug": w.slug,
                "checker": w.language.has_checker,
                "version": self.runtime.versions.get(w.slug),
                "tmp_size_bytes": w.tmp_size,
                "memory_max_bytes": w.memory_max,
                "pids_max": w.pids_max,
                "prestart": w.prestart_argv is not None,
            }
            for w in self.runtime.workloads.values()
        ]
        body = {
            "languages": served,
            "unserved": [{"slug": u.slug, "reason": u.reason} for u in self.runtime.unserved],
            "limits": {"timeout_max_ms": config.timeout_max_ms, "input_max_bytes": config.input_max, "output_max_bytes": config.output_max, "concurrency": config.concurrency, "cgroups": not self.health_note},
        }
        return json_response(200, body)

    def on_metrics(self, environ, info) -> Response:
        return Response(self.metrics.render(), 200, content_type=METRICS_CONTENT_TYPE)

    def on_openapi(self, environ, info) -> Response:
        return Response(self.openapi, 200, content_type=JSON)

    def on_shutdown(self, environ, info) -> Response:
        if not self.config.allow_shutdown:
            raise NotFound()
        self._authorize(environ)
        gevent.spawn(self.request_shutdown)
        return json_response(200, {"status": "shutting down"})

    # -- helpers ----------------------------------------------------------------------------
    def _prestart_kind(self, request: RunRequest) -> str | None:
        """The language of the prestarted slot that can serve `request` (None: a plain slot)."""
        workload = self.runtime.workloads.get(request.slug)
        if workload is None or workload.prestart_argv is None or request.stdin is not None or request.slug in self.prestart_broken:
            return None
        return request.slug

    def _authorize(self, environ) -> None:
        keys = self.config.api_keys
        if not keys:
            return
        scheme, _, given = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
        given = given.strip().encode()
        if scheme.lower() != "bearer" or not any(hmac.compare_digest(given, key.encode()) for key in keys):
            raise ApiError(401, "unauthorized")

    def _read_body(self, environ, info) -> bytes:
        """The whole body, within what is left of the request's RUN_READ_TIMEOUT (408 after, the
        connection closed). A client that hangs up mid-body is a client error (logged 499)."""
        encoding = environ.get("HTTP_CONTENT_ENCODING", "").strip().lower()
        if encoding not in ("", "identity"):
            raise ApiError(415, "content-encoding not supported")
        limit = self.config.input_max
        length = environ.get("CONTENT_LENGTH") or None
        if length is not None:
            if not length.isdigit():
                raise ApiError(400, "Content-Length is not a number")
            if int(length) > limit:
                raise ApiError(413, "payload too large", headers=CLOSE)
        stream = environ["wsgi.input"]
        deadline = environ.get("kiln.read_deadline")
        try:
            with gevent.Timeout(max(0.0, deadline - time.monotonic()) if deadline else None, ReadTimeout):
                data = stream.read(int(length)) if length is not None else stream.read(limit + 1)
        except ReadTimeout:
            raise ApiError(408, "request timeout", headers=CLOSE) from None
        except OSError:  # pywsgi: "unexpected end of file while reading request"
            info["status"] = CLIENT_GONE
            raise ApiError(400, "the request body ended before its length", headers=CLOSE) from None
        if len(data) > limit:
            raise ApiError(413, "payload too large", headers=CLOSE)
        return data

    def _run_on(self, slot: WarmSlot, request: RunRequest, watch: ClientWatch) -> tuple[dict, list[bytes]] | None:
        names = [name for name, _ in request.files]
        blobs = [content for _, content in request.files]
        header = {"op": "job", "slug": request.slug, "timeout_ms": request.timeout_ms, "files": names, "stdin": request.stdin is not None}
        if request.stdin is not None:
            blobs.append(request.stdin)
        cancel = lambda _gone: _cancel(slot.sock)  # noqa: E731
        watch.gone.rawlink(cancel)
        frame, failure = None, None
        silence = gevent.Timeout(request.timeout_ms / 1000 + SLOT_SILENCE_GRACE_S)
        try:
            with silence:
                protocol.send_frame(slot.sock, header, blobs)
                frame = protocol.recv_frame(slot.sock, self.result_limit)
        except (OSError, ProtocolError, gevent.Timeout) as error:
            failure = error
        finally:
            watch.gone.unlink(cancel)
        if watch.gone.is_set():
            return None  # the client left and the run was cancelled
        if failure is silence:
            raise SlotSilent(f"slot {slot.index} gave no result {SLOT_SILENCE_GRACE_S:g} s after the run's timeout")
        if frame is None:
            raise RuntimeError(f"slot {slot.index} ended without a result ({failure!r})")
        return frame

    def _result_response(self, frame, request: RunRequest, info) -> Response:
        if frame is None:
            info.update(status=CLIENT_GONE, outcome="cancelled")
            return error_response(500, "internal")  # never read: the client is gone
        header, blobs = frame
        if header.get("op") != "result" or len(blobs) != 2:
            raise RuntimeError(f"slot answered {header!r}")
        outcome = "output_too_large" if header.get("output_overflow") else header["outcome"]
        info.update(outcome=outcome, wall_ms=header["wall_ms"])
        self.metrics.runs.labels(request.slug, outcome).inc()
        self.metrics.run_seconds.labels(request.slug).observe(header["wall_ms"] / 1000)
        if header.get("output_overflow"):
            return error_response(413, "output too large")
        body = {
            "exit_code": header["exit_code"],
            "stdout": blobs[0].decode("utf-8", "replace"),
            "stderr": blobs[1].decode("utf-8", "replace"),
            "stats": {
                "outcome": outcome,
                "wall_ms": header["wall_ms"],
                "cpu_ms": header["cpu_ms"],
                "memory_peak_bytes": header["memory_peak_bytes"],
                "signal": header["signal"],
            },
        }
        return json_response(200, body)


class SlotSilent(RuntimeError):
    """A slot gave no result long after its run's timeout: it is killed from outside."""


class ReadTimeout(Exception):
    """A request (its line and headers: server.Handler; its body: App._read_body) did not
    arrive within RUN_READ_TIMEOUT of its first byte."""


def _cancel(slot_sock) -> None:
    """The slot reads end-of-file: its init kills the run and exits without a result."""
    try:
        slot_sock.shutdown(gevent.socket.SHUT_WR)
    except OSError:
        pass


def _request_id(given: str | None) -> str:
    if given and len(given) <= 200 and given.isascii() and given.isprintable():
        return given
    return uuid.uuid4().hex


def json_response(status: int, body) -> Response:
    return Response(_compact(body), status, content_type=JSON)


def error_response(status: int, error: str) -> Response:
    return json_response(status, {"error": error})
