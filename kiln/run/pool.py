"""The front's view of the slots: warm slots handed over by the zygote, and runs in flight.

RUN_CONCURRENCY bounds the runs in flight. A request that finds them all in flight queues for its
turn, first come first served, for up to RUN_QUEUE_WAIT (never past its own timeout) in a queue of
at most RUN_QUEUE_MAX; past either it is refused (Busy: 429). One that has its turn but finds no
warm slot waits for the replacement the zygote is warming: a slow warm-up under load never fails
a request (up to WARM_WAIT_S), warm-ups that keep failing do, after WARM_FAILING_S (NoWarmSlot).
A request whose client leaves while it waits leaves the queue (ClientGone).

A slot is plain, or prestarted for one language (its workspace's prestart command already
running). A request takes a slot prestarted for its language if one is warm, else a plain one;
if only slots prestarted for other languages are warm, it closes one unused and waits for its
replacement. Each slot's replacement is warmed for the language of the request it served, so
the mix of warm slots follows the mix of requests.

Warm when asked: a client that sends one language's runs one after another (a player pressing
"check") takes a prestarted slot each time, and that slot's replacement is still warming when the
next run comes. So a language just asked for keeps more slots than the one being replaced:
enough that one is warm when its next run is due (1 + its warm-up time / its cycle, the time
from a run's end to the next request plus a run in a warm slot, all measured here; 2 until
known), made by closing warm plain slots unused and demanding the language for their index (a
conversion). A prestarted slot is handed over as soon as its command is started; the zygote says
when the command has settled (waits for its go), which is the warm-up time counted here, and a
request takes a settled slot of its language before one still loading. A language whose slots
warm slowly (a runtime started afresh, over LOADING_S) is converted for once a run ends (its
start then takes no CPU from the run), at most LOADING_MAX of its slots loading at once; one
forked from a template, as its requests come. Never below RESERVE_SHARE of the slots left plain,
nor for a language whose warm-up failed of late; a language not asked for in IDLE_S gives the
slots converted for it back to plain. Decided in a greenlet of its own, off the request's path.
"""

from __future__ import annotations

import math
import os
import socket as stdlib_socket
import time
from collections.abc import Callable
from dataclasses import dataclass

import gevent
import gevent.event
import gevent.socket

from kiln.log import Log
from kiln.zygote import protocol
from kiln.zygote.protocol import ProtocolError

WARM_WAIT_S = 30.0  # the longest a request with its turn waits for a slot to warm
WARM_FAILING_S = 2.0  # ... when the zygote reports warm-ups failing and none succeeding
RESERVE_SHARE = 0.25  # of the slots, never converted for a language asked for (plain for the others)
IDLE_S = 30.0  # a language not asked for this long gives back the slots converted for it
FAILED_S = 30.0  # no conversion for a language whose prestarted slot failed to warm this recently
WARM_MARGIN, WARM_LAG_S = 1.25, 0.01  # a replacement is ready this much later than measured
LOADING_S = 0.1  # a language whose slots take longer to settle counts as starting slowly
LOADING_MAX = max(1, (os.cpu_count() or 2) // 2)  # a language's slots converted while its commands start: no more at once
SMOOTH = 0.5  # weight of the newest think, run or warm-up time in a language's averages


class Busy(Exception):
    """No turn for the request: every slot was in flight and the queue was full ("queue full",
    or "no queue" with RUN_QUEUE_WAIT=0), or its turn did not come in time ("queue wait")."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class NoWarmSlot(Exception):
    """No slot became warm in time (warm-ups failing or far behind)."""


class ClientGone(Exception):
    """The request's client left while it waited for a slot."""


class ShuttingDown(Exception):
    """The service began to shut down while the request was queued."""


@dataclass
class WarmSlot:
    index: int
    pid: int
    sock: gevent.socket.socket
    prestart: str | None = None  # the language it is prestarted for; None: plain
    loading: bool = False  # its prestart command is still starting (the zygote says when it settled)
    asked_for: str | None = None  # taken by a request for this prestarting language
    hot: bool = False  # ... prestarted for it, its command waiting
    taken: float = 0.0


def _smooth(average: float | None, value: float) -> float:
    return value if average is None else SMOOTH * value + (1 - SMOOTH) * average


class _Turn:
    """A queued request's place: `granted` once a run in flight passed its capacity on."""

    __slots__ = ("event", "granted", "patient")

    def __init__(self, patient: bool = False):
        self.event = gevent.event.Event()
        self.granted = False
        self.patient = patient  # waits as long as it takes (Runner.run patient)


@dataclass
class _Asked:
    """What the pool knows of a prestarting language's demand: its requests' timing, its runs'
    and its slots' warm-ups' lengths (averages), the slots converted for it."""

    last: float = 0.0  # its last request took a slot
    released: float | None = None  # its last run ended
    think: float | None = None  # from a run's end to the next request (0 when they overlap)
    run: float | None = None  # a run in a slot warm for it (else the last run in any slot)
    hot: bool = False  # `run` is from warm slots
    warm: float | None = None  # a slot's spawn to its command waiting for its go
    converted: int = 0
    failed_at: float = float("-inf")
    decay: object = None  # the greenlet that gives converted slots back

    def target(self, least: int) -> int:
        """The slots the language should have (warm, warming or running) for its next request to
        find one warm: the one its last request took, plus one per cycle (think time and run) that
        a replacement's warm-up spans; at least `least`, and that until both are known."""
        if self.warm is None or self.think is None or self.run is None:
            return least
        # the measured warm-up leaves out the zygote's reap and the hand-over: a margin
        return max(least, 1 + math.ceil((self.warm * WARM_MARGIN + WARM_LAG_S) / max(self.think + self.run, 1e-3)))


class SlotPool:
    def __init__(self, zygote: stdlib_socket.socket, concurrency: int, log: Log, on_zygote_lost, queue_max: int = 0):
        self.zygote = gevent.socket.socket(fileno=zygote.detach())
        self.concurrency = concurrency
        self.queue_max = queue_max
        self.log = log
        self.on_zygote_lost = on_zygote_lost
        self.warm: list[WarmSlot] = []  # in arrival order
        self._waiters: list[gevent.event.Event] = []  # requests with their turn, waiting for a warm slot
        self.queue: list[_Turn] = []  # requests waiting for their turn, first come first
        self.closing = False  # shutting down: nobody is queued any more
        self.in_flight = 0  # runs in flight, and slots being killed (condemned) until they are gone
        self.condemned: dict[int, int] = {}  # slot index -> init's pid, until the zygote says "ended"
        self.all_warm = gevent.event.Event()
        self.last_warm_error: str | None = None
        self.last_warm_error_at = 0.0
        self.last_warm_ok = 0.0
        self.on_warm = lambda seconds: None  # /metrics observes warm-up durations
        self.on_trade = lambda: None  # and counts prestarted slots closed unused
        self.on_prestart_failed: Callable[[str], None] = lambda slug: None  # a prestarted slot or its command failed
        self.on_template_failed: Callable[[str], None] = lambda slug: None  # a language's template failed
        self.on_queued = lambda seconds: None  # and how long queued requests waited
        self.on_convert: Callable[[str | None], None] = lambda slug: None  # a warm slot closed to warm one for slug (None: back to plain)
        # per slot index, the language its next slot is warmed for, as the zygote was told (None: plain)
        self.next_of: dict[int, str | None] = {}
        self.asked: dict[str, _Asked] = {}
        self.forking: frozenset[str] = frozenset()  # languages with a template (the Runner says)
        self.reader = gevent.spawn(self._read_zygote)

    def acquire(self, want: str | None = None, wait_s: float | None = 0.0, gone: gevent.event.Event | None = None) -> WarmSlot:
        """A warm slot for a request that a slot prestarted for `want` can serve (None: the
        request needs a plain slot). `wait_s`: how long it may queue for its turn (None: as long
        as it takes, whatever RUN_QUEUE_MAX: a judge's test, whose request was admitted with its
        build); `gone`: set when its client leaves. Raises Busy, NoWarmSlot, ClientGone or
        ShuttingDown."""
        self._take_turn(wait_s, gone)
        started = time.monotonic()
        deadline = started + WARM_WAIT_S
        gave_up_one = False
        while True:
            slot = self._take(want)
            if slot is not None:
                if slot.prestart != want:  # its replacement follows the demand
                    self._demand(slot.index, want)
                if want is not None:
                    slot.asked_for, slot.hot, slot.taken = want, slot.prestart == want and not slot.loading, time.monotonic()
                    self._asked_for(want)
                return slot
            if not gave_up_one and self.warm:  # all warm for other languages: trade one in
                unfit = self.warm.pop(0)
                self._demand(unfit.index, want)
                unfit.sock.close()  # its init reads end-of-file and exits unused
                gave_up_one = True
                self.on_trade()
            now = time.monotonic()
            failing = self.last_warm_error_at > self.last_warm_ok and now - started >= WARM_FAILING_S
            left = gone is not None and gone.is_set()
            if now >= deadline or failing or left:
                self._pass_turn()
                if left:
                    raise ClientGone
                raise NoWarmSlot(self.last_warm_error or "no slot became warm in time")
            waiter = gevent.event.Event()
            self._waiters.append(waiter)
            try:
                gevent.wait([waiter] + ([gone] if gone is not None else []), timeout=min(deadline - now, WARM_FAILING_S), count=1)
            finally:
                self._waiters.remove(waiter)

    def _take_turn(self, wait_s: float | None, gone: gevent.event.Event | None) -> None:
        """Count the request in flight, at once if there is room and nobody queued ahead of it,
        else once a run in flight passes its capacity on (_pass_turn)."""
        if self.in_flight < self.concurrency and not self.queue:
            self.in_flight += 1
            return
        if wait_s is not None and (wait_s <= 0 or len(self.queue) >= self.queue_max):
            raise Busy("no queue" if wait_s <= 0 or not self.queue_max else "queue full")
        turn = _Turn(patient=wait_s is None)
        self.queue.append(turn)
        started = time.monotonic()
        try:
            gevent.wait([turn.event] + ([gone] if gone is not None else []), timeout=wait_s, count=1)
        finally:
            if not turn.event.is_set():
                self.queue.remove(turn)
            self.on_queued(time.monotonic() - started)
        left = gone is not None and gone.is_set()
        if turn.granted:
            if not left:
                return
            self._pass_turn()  # its client left as its turn came: the next one's
        if self.closing:
            raise ShuttingDown
        if left:
            raise ClientGone
        raise Busy("queue wait")

    def _pass_turn(self) -> None:
        """A run's capacity, free again: to the first queued request, else no longer in flight."""
        if self.queue:
            turn = self.queue.pop(0)
            turn.granted = True
            turn.event.set()
        else:
            self.in_flight -= 1

    def close_queue(self) -> None:
        """Shutting down: every queued request is refused (ShuttingDown), none is queued again;
        a patient one (a judge's test: its request is in flight) keeps its place."""
        self.closing = True
        self.queue_max = 0
        for turn in self.queue:
            if not turn.patient:
                turn.event.set()
        self.queue[:] = [turn for turn in self.queue if turn.patient]

    def _take(self, want: str | None) -> WarmSlot | None:
        """One prestarted for `want` whose command is waiting, else one whose command is still
        starting (ahead of a plain slot's cold start), else a plain one."""
        loading = plain = None
        for slot in self.warm:
            if slot.prestart == want:
                if not slot.loading:
                    self.warm.remove(slot)
                    return slot
                loading = loading or slot
            elif plain is None and slot.prestart is None:
                plain = slot
        slot = loading or plain
        if slot is not None:
            self.warm.remove(slot)
        return slot

    def _put(self, slot: WarmSlot) -> None:
        self.warm.append(slot)
        for waiter in self._waiters:
            waiter.set()

    def _demand(self, index: int, slug: str | None) -> None:
        self.next_of[index] = slug
        self._tell_zygote({"op": "demand", "index": index, "slug": slug})

    # -- warm when asked ------------------------------------------------------------------
    def _asked_for(self, slug: str) -> None:
        """A request for `slug` took its slot: the time since the language's last one, and a
        look at its supply once the request is on its way."""
        now = time.monotonic()
        asked = self.asked.get(slug)
        if asked is None:
            asked = self.asked[slug] = _Asked()
        elif asked.released is not None:
            think = max(0.0, now - asked.released) if asked.released >= asked.last else 0.0
            asked.think = _smooth(asked.think, think)
        asked.last = now
        if self._quick(slug, asked):
            gevent.spawn(self._supply, slug)  # runs once the request's greenlet waits on its slot

    def _quick(self, slug: str, asked: _Asked) -> bool:
        """Whether the language's slots warm quickly (forked from a template): converted as its
        requests come; else once their runs end, so that a runtime's start takes no CPU from the
        run. Until a slot says, whether its workspace has a template."""
        return asked.warm <= LOADING_S if asked.warm is not None else slug in self.forking

    def _ran(self, slot: WarmSlot) -> None:
        """A run for a prestarting language ended (release): how long it took."""
        asked = self.asked.get(slot.asked_for)
        if asked is None:
            return
        now = time.monotonic()
        asked.released = now
        if not self._quick(slot.asked_for, asked):  # its conversions start while the client reads the answer, not during the run
            gevent.spawn(self._supply, slot.asked_for)
        if slot.hot or not asked.hot:
            asked.run = _smooth(asked.run if asked.hot == slot.hot else None, now - slot.taken)
            asked.hot = slot.hot

    def _supply(self, slug: str) -> None:
        """Convert warm plain slots for `slug` up to its target, keeping RESERVE_SHARE plain."""
        asked = self.asked[slug]
        if self.closing or time.monotonic() - asked.failed_at < FAILED_S:
            return
        destined = [self.next_of.get(i) for i in range(self.concurrency)]
        have, plain = destined.count(slug), destined.count(None)
        reserve = max(1, math.ceil(self.concurrency * RESERVE_SHARE))
        # a forked slot costs little (it shares its template's pages): one more to spare
        target = asked.target(3 if self._quick(slug, asked) else 2)
        self.log.debug("warm when asked", lang=slug, have=have, target=target, plain=plain, warm_s=asked.warm, think_s=asked.think, run_s=asked.run, hot=asked.hot)
        # a runtime that starts slowly (a JVM) takes CPU from the runs: its slots are converted a
        # few at a time, each once the last ones settled (a forked one never says it is loading)
        loading = sum(1 for s in self.warm if s.prestart == slug and s.loading)
        while have < target and plain > reserve and loading < LOADING_MAX:
            spare = next((s for s in reversed(self.warm) if s.prestart is None), None)
            if spare is None:
                break
            self.warm.remove(spare)
            self._demand(spare.index, slug)
            spare.sock.close()  # its init reads end-of-file and exits unused
            have, plain = have + 1, plain - 1
            loading += not self._quick(slug, asked)
            asked.converted += 1
            self.on_convert(slug)
        if asked.converted and asked.decay is None:
            asked.decay = gevent.spawn_later(IDLE_S, self._give_back, slug)

    def _give_back(self, slug: str) -> None:
        """`slug` not asked for in IDLE_S: its warm slots (all but one) that were converted for
        it are closed, their index warmed plain again."""
        asked = self.asked[slug]
        asked.decay = None
        idle = time.monotonic() - asked.last
        if idle < IDLE_S:
            asked.decay = gevent.spawn_later(IDLE_S - idle, self._give_back, slug)
            return
        if self.closing:
            return
        mine = [s for s in self.warm if s.prestart == slug]
        for slot in mine[len(mine) - min(asked.converted, len(mine) - 1) :] if mine else ():
            self.warm.remove(slot)
            self._demand(slot.index, None)
            slot.sock.close()
            asked.converted -= 1
            self.on_convert(None)
        if sum(1 for kind in self.next_of.values() if kind == slug) <= 1:
            asked.converted = 0  # (converted slots ran since, and their replacements are gone too)
        if asked.converted:  # some were running or warming: once they are warm
            asked.decay = gevent.spawn_later(IDLE_S, self._give_back, slug)

    def _settled(self, index, pid, slug, seconds: float) -> None:
        slot = next((w for w in self.warm if w.index == index and w.pid == pid), None)
        if slot is not None:  # (one in use since: its run's CPU, not its start, said nothing)
            slot.loading = False
            self._warmed(slug, seconds)

    def _warmed(self, slug, seconds: float) -> None:
        """A slot prestarted for `slug` took `seconds` from its spawn to being really warm."""
        asked = self.asked.get(slug) if isinstance(slug, str) else None
        if asked is not None:
            asked.warm = _smooth(asked.warm, seconds)

    def _tell_zygote(self, header: dict) -> None:
        try:
            protocol.send_frame(self.zygote, header)
        except OSError:
            pass  # the zygote is gone: the reader notices and ends the front

    def release(self, slot: WarmSlot) -> None:
        slot.sock.close()
        if slot.asked_for is not None:
            self._ran(slot)
        self._pass_turn()

    def condemn(self, slot: WarmSlot) -> None:
        """Instead of release, for a slot whose run outstayed its timeout: the zygote kills its
        whole cgroup and its init, and its capacity counts as taken until they are gone."""
        slot.sock.close()
        self.condemned[slot.index] = slot.pid
        self._tell_zygote({"op": "kill", "index": slot.index, "pid": slot.pid})

    def _ended(self, index, pid) -> None:
        if self.condemned.get(index) == pid:
            del self.condemned[index]
            self._pass_turn()

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
                prestart = prestart if isinstance(prestart, str) else None
                warm_s = float(header.get("warm_ms", 0.0)) / 1000
                self.next_of[header["index"]] = prestart  # the zygote warms its next one alike
                if not header.get("settles"):  # else its command is still starting: see "settled"
                    self._warmed(prestart, warm_s)
                self._put(WarmSlot(header["index"], header["pid"], sock, prestart, loading=bool(header.get("settles"))))
                self.last_warm_ok = time.monotonic()
                self.on_warm(warm_s)
            elif op == "settled":
                self._settled(header.get("index"), header.get("pid"), header.get("prestart"), float(header.get("ms", 0.0)) / 1000)
            elif op == "warm_failed":
                self.last_warm_error = str(header.get("error"))
                self.last_warm_error_at = time.monotonic()
                if isinstance(header.get("prestart"), str):
                    self.next_of[header.get("index")] = None  # the zygote retries it plain
                    if header["prestart"] in self.asked:
                        self.asked[header["prestart"]].failed_at = self.last_warm_error_at
                    self.on_prestart_failed(header["prestart"])
            elif op == "template_failed" and isinstance(header.get("slug"), str):
                self.on_template_failed(header["slug"])
            elif op == "ready":
                self.all_warm.set()
            elif op == "ended":
                self._ended(header.get("index"), header.get("pid"))
            for stray in fds:  # a descriptor without its message: never keep it open
                os.close(stray)
            fds.clear()
