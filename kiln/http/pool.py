"""The front's view of the slots: warm slots handed over by the zygote, and runs in flight.

RUN_CONCURRENCY bounds the runs in flight. A request that finds no warm slot while fewer runs
are in flight waits (briefly) for the replacement the zygote is warming; only a request that
would exceed RUN_CONCURRENCY is refused at once.

A slot is plain, or prestarted for one language (its workspace's prestart command already
running). A request takes a slot prestarted for its language if one is warm, else a plain one;
if only slots prestarted for other languages are warm, it closes one unused and waits for its
replacement. Each slot's replacement is warmed for the language of the request it served, so
the mix of warm slots follows the mix of requests.
"""

from __future__ import annotations

import os
import socket as stdlib_socket
import time
from dataclasses import dataclass

import gevent
import gevent.event
import gevent.socket

from kiln.log import Log
from kiln.zygote import protocol
from kiln.zygote.protocol import ProtocolError

WARM_WAIT_S = 2.0


class Busy(Exception):
    """RUN_CONCURRENCY runs are in flight."""


class NoWarmSlot(Exception):
    """No slot became warm in time (warm-ups failing or far behind)."""


@dataclass
class WarmSlot:
    index: int
    pid: int
    sock: gevent.socket.socket
    prestart: str | None = None  # the language it is prestarted for; None: plain


class SlotPool:
    def __init__(self, zygote: stdlib_socket.socket, concurrency: int, log: Log, on_zygote_lost):
        self.zygote = gevent.socket.socket(fileno=zygote.detach())
        self.concurrency = concurrency
        self.log = log
        self.on_zygote_lost = on_zygote_lost
        self.warm: list[WarmSlot] = []  # in arrival order
        self._waiters: list[gevent.event.Event] = []
        self.in_flight = 0
        self.all_warm = gevent.event.Event()
        self.last_warm_error: str | None = None
        self.last_warm_error_at = 0.0
        self.last_warm_ok = 0.0
        self.on_warm = lambda seconds: None  # /metrics observes warm-up durations
        self.on_trade = lambda: None  # and counts prestarted slots closed unused
        self.reader = gevent.spawn(self._read_zygote)

    def acquire(self, want: str | None = None) -> WarmSlot:
        """A warm slot for a request that a slot prestarted for `want` can serve (None: the
        request needs a plain slot)."""
        if self.in_flight >= self.concurrency:
            raise Busy
        self.in_flight += 1
        deadline = time.monotonic() + WARM_WAIT_S
        gave_up_one = False
        while True:
            slot = self._take(want)
            if slot is not None:
                if slot.prestart != want:  # its replacement follows the demand
                    self._tell_zygote({"op": "demand", "index": slot.index, "slug": want})
                return slot
            if not gave_up_one and self.warm:  # all warm for other languages: trade one in
                unfit = self.warm.pop(0)
                self._tell_zygote({"op": "demand", "index": unfit.index, "slug": want})
                unfit.sock.close()  # its init reads end-of-file and exits unused
                gave_up_one = True
                self.on_trade()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.in_flight -= 1
                raise NoWarmSlot(self.last_warm_error or "no slot became warm in time")
            waiter = gevent.event.Event()
            self._waiters.append(waiter)
            try:
                waiter.wait(remaining)
            finally:
                self._waiters.remove(waiter)

    def _take(self, want: str | None) -> WarmSlot | None:
        plain = None
        for slot in self.warm:
            if slot.prestart == want:
                self.warm.remove(slot)
                return slot
            if plain is None and slot.prestart is None:
                plain = slot
        if plain is not None:
            self.warm.remove(plain)
        return plain

    def _put(self, slot: WarmSlot) -> None:
        self.warm.append(slot)
        for waiter in self._waiters:
            waiter.set()

    def _tell_zygote(self, header: dict) -> None:
        try:
            protocol.send_frame(self.zygote, header)
        except OSError:
            pass  # the zygote is gone: the reader notices and ends the front

    def release(self, slot: WarmSlot) -> None:
        self.in_flight -= 1
        slot.sock.close()

    @property
    def warm_count(self) -> int:
        return len(self.warm)

    def healthy(self) -> tuple[bool, str]:
        if self.warm_count or self.in_flight:
            return True, "ok"
        if self.last_warm_error and self.last_warm_error_at > self.last_warm_ok:
            return False, f"no warm slot: {self.last_warm_error}"
        return True, "ok"

    def send_shutdown(self) -> None:
        try:
            protocol.send_frame(self.zygote, {"op": "shutdown"})
        except OSError:
            pass
        while self.warm:
            self.warm.pop().sock.close()

    def _read_zygote(self) -> None:
        fds: list[int] = []
        while True:
            try:
                frame = protocol.recv_frame(self.zygote, protocol.MAX_HEADER + 8, fds)
            except ConnectionResetError:
                frame = None  # the zygote exited with our last message unread
            except (ProtocolError, OSError) as error:
                self.log.error("bad frame from the zygote", error=str(error))
                frame = None
            if frame is None:
                self.on_zygote_lost()
                return
            header = frame[0]
            op = header.get("op")
            if op == "slot" and fds:
                sock = gevent.socket.socket(fileno=fds.pop(0))
                prestart = header.get("prestart")
                self._put(WarmSlot(header["index"], header["pid"], sock, prestart if isinstance(prestart, str) else None))
                self.last_warm_ok = time.monotonic()
                self.on_warm(float(header.get("warm_ms", 0.0)) / 1000)
            elif op == "warm_failed":
                self.last_warm_error = str(header.get("error"))
                self.last_warm_error_at = time.monotonic()
            elif op == "ready":
                self.all_warm.set()
            for stray in fds:  # a descriptor without its message: never keep it open
                os.close(stray)
            fds.clear()
