"""The front: gevent's WSGI server running the API, unprivileged, talking to slots directly."""

from __future__ import annotations

import errno
import os
import signal
import socket

import gevent
import gevent.socket
from gevent.pywsgi import WSGIHandler, WSGIServer

from kiln import systemd
from kiln.http.api import App
from kiln.http.pool import SlotPool
from kiln.log import Log
from kiln.runtime import Runtime

ZYGOTE_EXIT_WAIT_S = 10.0


class Handler(WSGIHandler):
    """Exposes the client's socket, so a run is cancelled when its client hangs up."""

    def handle(self):
        # headers and body leave in separate writes: without NODELAY, Nagle holds the body back
        # until the client's delayed ACK (40 ms) on every keep-alive request after the first
        if self.socket.family in (socket.AF_INET, socket.AF_INET6):
            self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return super().handle()

    def get_environ(self):
        environ = super().get_environ()
        environ["kiln.socket"] = self.socket
        return environ


OVERLOADED_BODY = b'{"error":"overloaded"}'
OVERLOADED = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(OVERLOADED_BODY), OVERLOADED_BODY)


class Server(WSGIServer):
    """Keeps one descriptor in reserve: out of descriptors, it still accepts a connection,
    answers 503 overloaded and closes it, instead of leaving clients hanging in the backlog."""

    def __init__(self, *args, on_overload, **kwargs):
        super().__init__(*args, **kwargs)
        self.on_overload = on_overload
        self._reserve = _open_reserve()

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
                os.write(fd, OVERLOADED)
            except OSError:
                pass
            finally:
                os.close(fd)
            self.on_overload()
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
        self.pool = SlotPool(zygote, runtime.config.concurrency, log, self._zygote_lost)
        self.app = App(runtime, self.pool, log, self.shutdown, no_cgroups_reason)
        listener = gevent.socket.socket(fileno=listener.detach())  # cooperative accept()
        self.server = Server(listener, self.app, handler_class=Handler, log=None, error_log=None, on_overload=self._overloaded)
        self.exit_code = 0

    def run(self, uid: int, gid: int) -> int:
        drop_privileges(uid, gid)
        gevent.signal_handler(signal.SIGTERM, lambda: gevent.spawn(self.shutdown))
        gevent.signal_handler(signal.SIGINT, lambda: gevent.spawn(self.shutdown))
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
        """Stop taking runs, let those in flight finish (up to RUN_SHUTDOWN_GRACE), stop the
        zygote (it kills what is left and cleans up), then stop serving."""
        if self.app.shutting_down:
            return
        self.app.shutting_down = True
        systemd.notify(self.runtime.config.systemd.notify_socket, "STOPPING=1")
        grace_s = self.runtime.config.shutdown_grace_ms / 1000
        self.log.info("shutting down", in_flight=self.pool.in_flight, grace_s=grace_s)
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

    def _overloaded(self) -> None:
        self.app.metrics.overload_refusals.inc()
        self.log.warning("out of file descriptors: answered 503 overloaded")

    def _zygote_lost(self) -> None:
        if self.app.shutting_down:
            return  # expected: the zygote exits at the end of a shutdown
        self.log.error("the zygote died; exiting so the service restarts whole")
        os._exit(1)


def drop_privileges(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
