"""The front: gevent's WSGI server running the API, unprivileged, talking to slots directly."""

from __future__ import annotations

import errno
import os
import signal
import socket
import time
import uuid

import gevent
import gevent.socket
from gevent.pywsgi import Input, WSGIHandler, WSGIServer, format_date_time

from kiln import systemd
from kiln.http.api import App
from kiln.http.connections import Connections
from kiln.http.head import direct_run_environ
from kiln.http.metrics import Metrics
from kiln.http.responses import STATUS_LINE_START, Answer, ReadTimeout, error_response
from kiln.log import ACCESS_BATCH_S, Log
from kiln.run.pool import SlotPool
from kiln.runtime import Runtime

ZYGOTE_EXIT_WAIT_S = 10.0
LINGER_S = 1.0  # how long the rest of a request answered unread is drained before the close
LINGER_BYTES = 16 << 20  # and how much of it at most
COALESCE_MAX = 256 * 1024  # a body up to this is copied behind its head and sent with it


def _canned(status: str, error: str, request_id: str | None = None) -> bytes:
    """A whole response the front writes itself before any request was read (with a fresh
    X-Request-Id, as every response has), then closes the connection; its body is every
    error's (`error` may quote the client's bytes)."""
    body = error_response(int(status.split()[0]), error).body
    return STATUS_LINE_START + b"%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nX-Request-Id: %s\r\nConnection: close\r\n\r\n%s" % (
        status.encode(), len(body), (request_id or uuid.uuid4().hex).encode(), body,
    )  # fmt: skip


OVERLOADED = ("503 Service Unavailable", "overloaded")
TOO_MANY_CONNECTIONS = ("503 Service Unavailable", "too many connections")
REQUEST_TIMEOUT = ("408 Request Timeout", "request timeout")
REQUEST_LINE_TOO_LONG = ("414 URI Too Long", "request line too long")


class Handler(WSGIHandler):
    """Bounds how long a connection may take to send a request (a slow client must not hold
    the front), and exposes the client's socket, so a run is cancelled when its client leaves.

    A connection waits up to RUN_IDLE_TIMEOUT for the first byte of a request (then it is closed
    quietly, as an idle keep-alive connection), and has RUN_READ_TIMEOUT from that byte to send
    the request line, the headers and the body (408 after; the body's part is App._read_body's,
    through environ["kiln.read_deadline"])."""

    read_deadline = 0.0
    _reading: gevent.Timeout | None = None  # the request line's and headers' share of the deadline
    peer = ""  # the client's address (a Unix socket's: ""), as REMOTE_ADDR: the connections' and the queue's shares
    idle = True  # waiting for a request's first byte: a connection the cap's shares may close (connections.py)
    answer_begun = False  # some of this request's answer is sent (by probe() or by the answer itself)
    _sent_early = b""  # what probe() sent of the answer before it was ready: the answer skips it
    _sending = False  # a part of the answer is being sent
    answer_ended = False  # the whole answer is sent

    def handle(self):
        # headers and body leave in separate writes: without NODELAY, Nagle holds the body back
        # until the client's delayed ACK (40 ms) on every keep-alive request after the first
        if self.socket.family in (socket.AF_INET, socket.AF_INET6):
            self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if isinstance(self.client_address, tuple):
            self.peer = str(self.client_address[0])
        if not self.server.admit(self):
            try:
                self.socket.sendall(_canned(*TOO_MANY_CONNECTIONS))
            except OSError:
                pass
            self.socket.close()
            return None
        try:
            return super().handle()
        finally:
            self.server.leave(self)

    def _answer_unread(self, answer: bytes) -> None:
        """An error answered before its request was read whole; then what the client sent past
        what was read, read and dropped for up to LINGER_S: a close with unread bytes resets the
        connection, and the client may lose the answer with it."""
        try:
            self.socket.sendall(answer)
        except OSError:
            return
        self._linger()

    def _linger(self) -> None:
        """The answer is out and the connection ends with what the client sent unread: stop
        sending, then read and drop what comes for up to LINGER_S (at most LINGER_BYTES), so that
        the close is no reset that could take the answer from the client still sending."""
        try:
            self.socket.shutdown(socket.SHUT_WR)
            dropped = 0
            with gevent.Timeout(LINGER_S, False):
                while dropped < LINGER_BYTES and (chunk := self.socket.recv(65536)):
                    dropped += len(chunk)
        except OSError:
            pass

    def handle_one_request(self):
        started = b""
        self.idle = True
        self.answer_begun, self.answer_ended, self._sent_early = False, False, b""
        with gevent.Timeout(self.server.idle_timeout_s, False):
            try:
                started = self.rfile.peek(1)  # buffered already, or the next byte from the client
            except OSError:
                pass
        if not started:
            return None  # idle past its time, closed, or closed for another address (connections.py): nothing was asked
        self.idle = False
        self.read_deadline = time.monotonic() + self.server.read_timeout_s
        direct = self._direct_run()
        if direct is not False:
            return direct
        # pywsgi reads the head from the socket as it comes: a timer bounds it (the direct path
        # took a head already buffered, and its body's read is bounded by the App)
        self._reading = gevent.Timeout(self.read_deadline - time.monotonic(), ReadTimeout)
        self._reading.start()
        self.command = self.path = None  # this request's once pywsgi has read its line
        try:
            answered = super().handle_one_request()
            if not isinstance(answered, tuple):
                return answered
            # the request unread: a 400 is _handle_client_error's answer, a 414 pywsgi's own
            self._answer_unread(answered[1] if answered[0] != "414" else self._refusal(*REQUEST_LINE_TOO_LONG))
            return None
        except ReadTimeout:
            return ("408", self._refusal(*REQUEST_TIMEOUT))
        finally:
            self._reading.close()

    def _refusal(self, status: str, error: str) -> bytes:
        """The answer to a request the front could not read whole (408, 400, 414), and its
        access line (with what pywsgi read of its request line), under one request id."""
        request_id = uuid.uuid4().hex
        path = self.path.split("?", 1)[0] if self.path else None
        self.server.on_unread(int(status.split()[0]), error, request_id, self.command, path)
        return _canned(status, error, request_id)

    def _direct_run(self):
        """A POST /run of the usual shape (head.py), answered without pywsgi's request parser,
        WSGI and werkzeug: True to read the next request, None to close; False when the request
        is of another shape (nothing of it read), for pywsgi."""
        parsed = direct_run_environ(self.rfile.peek(1))  # what the buffer holds, no more
        if parsed is None:
            return False
        environ, head_length, self.close_connection = parsed
        self.rfile.read(head_length)  # from the buffer
        self.wsgi_input = environ["wsgi.input"] = Input(self.rfile, int(environ["CONTENT_LENGTH"]))
        environ["kiln.socket"] = self.socket
        environ["kiln.probe"] = self.probe
        environ["kiln.read_deadline"] = self.read_deadline
        environ["REMOTE_ADDR"] = self.peer  # as pywsgi's environ has it: the client, for the queue's shares
        answer, sent = self.server.application.answer(environ, "run")
        try:
            self._send_answer(answer)
            self._finish_body()
        finally:
            sent()
        return None if self.close_connection else True

    def _send_answer(self, answer: Answer) -> None:
        if answer.closes():
            self.close_connection = True
        try:
            self.socket.sendall(self._rest_of_answer(answer.wire(format_date_time(time.time()))))
        except OSError:
            self.close_connection = True  # the client is gone

    def probe(self) -> None:
        """The client watch's probe of a connection at end-of-file (watch.py): bytes of the answer
        sent before their time, which a client that half-closed reads as part of its answer and a
        peer that closed altogether answers with a reset. Before the answer, its status line's
        first bytes (the answer then skips them); between two chunks of a streamed answer, a
        leading zero of the next chunk's size (`01a3` is `1a3`, `00` the last chunk); otherwise
        nothing (an answer being sent meets the reset itself). HTTP/1.0 and 1.1 alike."""
        if not self.answer_begun:
            self.answer_begun = True
            self.socket.sendall(STATUS_LINE_START)
            self._sent_early = STATUS_LINE_START
        elif self.response_use_chunked and self.headers_sent and not self._sending and not self.answer_ended:
            self.socket.sendall(b"0")

    def _rest_of_answer(self, data):
        """`data`, the answer's next bytes, less what probe() sent of them already."""
        self.answer_begun = True
        early, self._sent_early = self._sent_early, b""
        if not data.startswith(early):
            raise ValueError(f"an answer that does not begin with {early!r}, sent early: {bytes(data[:20])!r}")
        return data[len(early) :]

    def _sendall(self, data):
        self._sending = True  # each chunk whole: nothing of probe()'s between its bytes
        try:
            super()._sendall(self._rest_of_answer(data))
        finally:
            self._sending = False

    def process_result(self):
        try:
            super().process_result()
        finally:
            self.answer_ended = True  # its last chunk is out: nothing may follow it

    def _handle_client_error(self, ex):
        """A request line or header pywsgi cannot read: answered as every 400 (JSON, an
        X-Request-Id, an access line), where pywsgi's own answer had none of them."""
        if isinstance(ex, ReadTimeout):  # raised in read_request, where pywsgi takes it for a 400
            raise ex
        super()._handle_client_error(ex)
        said = getattr(ex, "formatted_message", None) or str(ex) or type(ex).__name__
        return ("400", self._refusal("400 Bad Request", f"malformed request: {said[:200]}"))

    def _read_time_left(self) -> float:
        return max(0.0, self.read_deadline - time.monotonic())

    def get_environ(self):
        self._reading.close()  # the request line and headers are in: the body's time is the app's
        environ = super().get_environ()
        environ["kiln.socket"] = self.socket
        environ["kiln.probe"] = self.probe
        environ["kiln.read_deadline"] = self.read_deadline
        return environ

    def _write_with_headers(self, data):
        """The head and the first part of the body in one send where they fit (a run's whole
        answer, as a rule): pywsgi sends them apart, a syscall and a TCP segment more per
        answer, each with its wake-up of the client."""
        if len(data) > COALESCE_MAX:
            return super()._write_with_headers(data)
        self.headers_sent = True
        self.finalize_headers()  # decides chunked or not: only a plain body is appended as it is
        head = bytearray(STATUS_LINE_START + b"%s\r\n" % self.status)
        for header, value in self.response_headers:
            head += b"%s: %s\r\n" % (header, value)
        head += b"\r\n"
        if self.response_use_chunked:
            self._sendall(head)
            self._write(data)
        else:
            head += data
            self._sendall(head)

    def run_application(self):
        try:
            super().run_application()
        finally:
            self._finish_body()

    def _finish_body(self) -> None:
        """pywsgi reads what the application left of a body before the next request: here, once
        the response is out, never past the read deadline, and not at all when the connection
        ends anyway (a refused body, a timeout)."""
        body = self.wsgi_input
        if not self.close_connection:
            with gevent.Timeout(self._read_time_left(), False):
                body._discard()
                return
            self.close_connection = True
        if body.chunked_input or (body.content_length or 0) > body.position:
            self._linger()  # a refused body (413), a timeout: the client may still be sending
        body.position, body.chunked_input = body.content_length or 0, False  # nothing left to read


class Server(WSGIServer):
    """Counts its connections (past RUN_CONNECTIONS_MAX a new one is answered 503 and closed,
    unless an address holding more gives up an idle one: connections.py), and keeps one descriptor in
    reserve: out of descriptors, it still accepts a connection, answers 503 overloaded and
    closes it, instead of leaving clients hanging in the backlog."""

    def __init__(self, *args, config, on_overload, on_unread, **kwargs):
        super().__init__(*args, **kwargs)
        self.on_overload = on_overload
        self.on_unread = on_unread
        self.read_timeout_s = config.read_timeout_ms / 1000
        self.idle_timeout_s = config.idle_timeout_ms / 1000
        self.connections = Connections(config.connections_max)
        self._reserve = _open_reserve()

    def admit(self, handler: Handler) -> bool:
        if self.connections.admit(handler):
            return True
        self.on_overload("too many connections")
        return False

    def leave(self, handler: Handler) -> None:
        self.connections.leave(handler)

    def do_read(self):
        try:
            return super().do_read()
        except OSError as error:
            if error.errno not in (errno.EMFILE, errno.ENFILE) or self._reserve is None:
                raise
        self._shed_one()
        return None

    def _shed_one(self) -> None:
        os.close(self._reserve)
        self._reserve = None
        try:
            fd, _address = self.socket._accept()
        except OSError:
            fd = None
        if fd is not None:
            try:
                os.write(fd, _canned(*OVERLOADED))
            except OSError:
                pass
            finally:
                os.close(fd)
            self.on_overload("out of file descriptors")
        try:
            self._reserve = _open_reserve()
        except OSError:
            pass  # still none free: the next accept error tries again


def _open_reserve() -> int:
    return os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)


class Front:
    def __init__(self, runtime: Runtime, zygote: socket.socket, zygote_pid: int, listener: socket.socket, log: Log, no_cgroups_reason: str | None):
        self.runtime = runtime
        self.zygote_pid = zygote_pid
        self.log = log
        config = runtime.config
        metrics = Metrics(config.concurrency, runtime.workloads)
        self.pool = SlotPool(
            zygote, config.concurrency, log, self._zygote_lost, queue_max=config.queue_max, judge_max=config.judge_max, events=metrics, forking=runtime.forking,
        )  # fmt: skip
        metrics.watch(self.pool)
        self.app = App(runtime, self.pool, metrics, log, self.shutdown, no_cgroups_reason)
        listener = gevent.socket.socket(fileno=listener.detach())  # cooperative accept()
        self.server = Server(
            listener, self.app, handler_class=Handler, log=None, error_log=None, config=runtime.config, on_overload=self._overloaded, on_unread=self._unread
        )
        self.exit_code = 0

    def run(self, uid: int, gid: int) -> int:
        drop_privileges(uid, gid)
        self.log.batch_access(lambda flush: gevent.spawn_later(ACCESS_BATCH_S, flush), busy=lambda: self.pool.in_flight > 0)
        gevent.signal_handler(signal.SIGTERM, self.shutdown)
        gevent.signal_handler(signal.SIGINT, self.shutdown)
        self.server.start()
        self.log.info("listening", address=f"{self.runtime.config.host}:{self.server.server_port}", uid=uid)
        gevent.spawn(self._announce_ready)
        self.server.serve_forever()  # returns once shutdown() stops the server
        return self.exit_code

    def _announce_ready(self) -> None:
        self.pool.all_warm.wait()
        self.log.info("slots warm", slots=self.runtime.config.concurrency)
        systemd.notify(self.runtime.config.systemd.notify_socket, "READY=1", f"STATUS=serving {len(self.runtime.workloads)} languages with {self.runtime.config.concurrency} slots")
        if self.runtime.config.systemd.watchdog_usec:
            gevent.spawn(self._watchdog, self.runtime.config.systemd.watchdog_usec / 2e6)

    def _watchdog(self, interval_s: float) -> None:
        """Pet systemd's watchdog while the event loop runs and slots can be served: a wedged
        front, or a zygote that can no longer warm slots, gets the service restarted."""
        while not self.app.shutting_down:
            if self.pool.healthy()[0]:
                systemd.notify(self.runtime.config.systemd.notify_socket, "WATCHDOG=1")
            gevent.sleep(interval_s)

    def shutdown(self) -> None:
        """Stop taking runs now (whoever asks hears back after it: a run or an upload sent next
        is refused), then, in a greenlet of its own, let those in flight finish (up to
        RUN_SHUTDOWN_GRACE), stop the zygote (it kills what is left and cleans up) and stop
        serving. Nothing here waits: a signal handler, in the hub, calls it too."""
        if self.app.shutting_down:
            return
        self.app.shutting_down = True
        self.pool.close_queue()  # a queued run is refused (503): a balancer retries it elsewhere
        systemd.notify(self.runtime.config.systemd.notify_socket, "STOPPING=1")
        grace_s = self.runtime.config.shutdown_grace_ms / 1000
        self.log.info("shutting down", in_flight=self.pool.in_flight, grace_s=grace_s)
        gevent.spawn(self._drain_and_stop, grace_s)

    def _drain_and_stop(self, grace_s: float) -> None:
        deadline = gevent.get_hub().loop.now() + grace_s
        while self.pool.in_flight and gevent.get_hub().loop.now() < deadline:
            gevent.sleep(0.02)
        self.pool.send_shutdown()
        self._wait_for_zygote()
        self.server.stop(timeout=1)
        self.log.info("stopped", exit_code=self.exit_code)

    def _wait_for_zygote(self) -> None:
        for _ in range(int(ZYGOTE_EXIT_WAIT_S / 0.01)):
            pid, status = os.waitpid(self.zygote_pid, os.WNOHANG)
            if pid:
                if os.waitstatus_to_exitcode(status) != 0:
                    self.exit_code = 1
                return
            gevent.sleep(0.01)
        self.log.error("the zygote did not exit in time")
        self.exit_code = 1

    def _overloaded(self, why: str) -> None:
        self.app.metrics.overload_refusals.labels(why).inc()
        self.log.warning("connection refused: answered 503", reason=why)

    def _unread(self, status: int, error: str, request_id: str, method: str | None, path: str | None) -> None:
        """A request answered before it was read whole: counted and logged as every request."""
        self.app.metrics.requests.labels("unknown", str(status), "").inc()
        self.log.access(method=method, path=path, status=status, error=error, request_id=request_id)

    def _zygote_lost(self) -> None:
        if self.app.shutting_down:
            return  # expected: the zygote exits at the end of a shutdown
        self.log.error("the zygote died; exiting so the service restarts whole")
        os._exit(1)


def drop_privileges(uid: int, gid: int) -> None:
    if (uid, gid) == (os.geteuid(), os.getegid()):
        return  # rootless with one id mapped: nothing to drop to (and setgroups is denied there)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
