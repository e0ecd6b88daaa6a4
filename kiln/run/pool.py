"""The front's view of the slots: warm slots handed over by the zygote, and who may run when.

RUN_CONCURRENCY bounds the runs in flight: each run takes its turn (kiln/run/turns.py: first come,
first served, up to RUN_QUEUE_WAIT in a queue of RUN_QUEUE_MAX, then Busy: 429) and gives it back
when it ends; a judge request is admitted first, against RUN_JUDGE_MAX judge requests at once
(`judges`, turns of their own), and its tests then take their turns as patient runs. One that has
its turn but finds no warm slot waits for the replacement the zygote is warming: a slow warm-up
under load never fails a request (up to WARM_WAIT_S), warm-ups that keep failing do, after
WARM_FAILING_S (NoWarmSlot). A request whose client leaves while it waits leaves the queue
(ClientGone). A pair of jobs that run at once (an interactive test) takes its two turns together.

A slot is plain, or prestarted for one language (its workspace's prestart command already
running). A request takes a slot prestarted for its language if one is warm, else a plain one;
if only slots prestarted for other languages are warm, it closes one unused and waits for its
replacement, which is then its own: no other request takes it meanwhile (a python one would take
a plain slot traded for a plain request, leaving that one to wait for a slot nobody warms). Each
slot's replacement is warmed for the language of the request it served, so the mix of warm
slots follows the mix of requests.

Which slots a language just asked for keeps warm is kiln/run/asked.py's (warm when asked).
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
from kiln.run.asked import WarmWhenAsked
from kiln.run.events import PoolEvents
from kiln.run.turns import Admissions, Busy, ClientGone, ShuttingDown, Turns
from kiln.wire import messages, protocol
from kiln.wire.protocol import ProtocolError

WARM_WAIT_S = 30.0  # the longest a request with its turn waits for a slot to warm
WARM_FAILING_S = 2.0  # ... when the zygote reports warm-ups failing and none succeeding


class NoWarmSlot(Exception):
    """No slot became warm in time (warm-ups failing or far behind)."""


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


class SlotPool:
    def __init__(
        self, zygote: stdlib_socket.socket, concurrency: int, log: Log, on_zygote_lost, queue_max: int = 0, judge_max: int = 1,
        events: PoolEvents | None = None, forking: frozenset[str] = frozenset(),
    ):  # fmt: skip
        """`events` hears what happens to the slots (/metrics); `forking`: the languages whose
        slots are forked from a template (their warm-up is short)."""
        self.zygote = gevent.socket.socket(fileno=zygote.detach())
        self.events = events or PoolEvents()
        self.turns = Turns(concurrency, queue_max, on_queued=self.events.queued)  # runs in flight, and slots being killed until they are gone
        self.judges = Admissions(judge_max, queue_max)  # judge requests admitted (kiln.run.runner.Runner.admitted)
        self.log = log
        self.on_zygote_lost = on_zygote_lost
        self.warm: list[WarmSlot] = []  # in arrival order
        self._waiters: list[gevent.event.Event] = []  # requests with their turn, waiting for a warm slot
        self.traded_for: dict[int, object] = {}  # slot index -> the waiting request that closed its slot
        self.condemned: dict[int, int] = {}  # slot index -> init's pid, until the zygote says "ended"
        self.all_warm = gevent.event.Event()
        self.last_warm_error: str | None = None
        self.last_warm_error_at = 0.0
        self.last_warm_ok = 0.0
        self.warm_changed_at = time.monotonic()  # a slot came or went: with none warm and none busy, one is due
        # per slot index, the language its next slot is warmed for, as the zygote was told (None: plain)
        self.next_of: dict[int, str | None] = {}
        self.forking = forking
        self.asked = WarmWhenAsked(self)
        self.reader = gevent.spawn(self._read_zygote)

    def acquire(self, want: str | None = None, wait_s: float | None = 0.0, gone: gevent.event.Event | None = None, client: str = "") -> WarmSlot:
        """A warm slot for a request that a slot prestarted for `want` can serve (None: the
        request needs a plain slot). `wait_s`: how long it may queue for its turn (None: as long
        as it takes, whatever RUN_QUEUE_MAX: a judge's test, whose request was admitted with its
        build); `gone`: set when its client leaves; `client`: whose it is (the queue's shares).
        Raises Busy, NoWarmSlot, ClientGone or ShuttingDown."""
        self.turns.take(wait_s, gone, client=client)
        return self._slot_for(want, gone)

    def acquire_pair(self, gone: gevent.event.Event | None = None) -> tuple[WarmSlot, WarmSlot]:
        """Two plain slots for two patient jobs that run at once, their turns taken together."""
        self.turns.take(None, gone, needs=2)
        try:
            first = self._slot_for(None, gone)
        except BaseException:
            self.turns.give_back()  # the second one's
            raise
        try:
            return first, self._slot_for(None, gone)
        except BaseException:
            self.release(first)
            raise

    def _slot_for(self, want: str | None, gone: gevent.event.Event | None) -> WarmSlot:
        """A warm slot for a request that has its turn; its turn passed on if it gets none."""
        started = time.monotonic()
        deadline = started + WARM_WAIT_S
        claim = object()  # this request's, on the slot it trades in
        traded: int | None = None  # that slot's index: a request trades once
        try:
            while True:
                slot = self._take(want, claim)
                if slot is not None:
                    return self._taken(slot, want)
                if traded is None:
                    traded = self._trade_in(want, claim)
                else:
                    self._trade_again(traded, want)
                now = time.monotonic()
                failing = self.last_warm_error_at > self.last_warm_ok and now - started >= WARM_FAILING_S
                left = gone is not None and gone.is_set()
                if now >= deadline or failing or left:
                    self.turns.give_back()
                    if left:
                        raise ClientGone
                    raise NoWarmSlot(self.last_warm_error or "no slot became warm in time")
                waiter = gevent.event.Event()
                self._waiters.append(waiter)
                try:
                    gevent.wait([waiter] + ([gone] if gone is not None else []), timeout=min(deadline - now, WARM_FAILING_S), count=1)
                finally:
                    self._waiters.remove(waiter)
        finally:
            if traded is not None:
                del self.traded_for[traded]

    def _taken(self, slot: WarmSlot, want: str | None) -> WarmSlot:
        if slot.prestart != want:  # its replacement follows the demand
            self.demand(slot.index, want)
        if want is not None:
            slot.asked_for, slot.hot, slot.taken = want, slot.prestart == want and not slot.loading, time.monotonic()
            self.asked.asked_for(want)
        return slot

    def _trade_in(self, want: str | None, claim: object) -> int | None:
        """All warm slots are for other languages (or traded for by other requests): one closed
        unused, its index warmed for `want`, its replacement `claim`'s. Its index, or None when
        none is warm to trade."""
        unfit = next((w for w in self.warm if w.index not in self.traded_for), None)
        if unfit is None:
            return None
        self.traded_for[unfit.index] = claim
        self._close_unused(unfit, want)
        return unfit.index

    def _trade_again(self, index: int, want: str | None) -> None:
        """The traded slot's replacement came back unfit (the slot died by itself as it was
        traded in, and was replaced before the zygote read the demand): closed in turn."""
        unfit = next((w for w in self.warm if w.index == index), None)
        if unfit is not None:
            self._close_unused(unfit, want)

    def _close_unused(self, unfit: WarmSlot, want: str | None) -> None:
        self._remove(unfit)
        self.demand(unfit.index, want)
        unfit.sock.close()  # its init reads end-of-file and exits unused
        self.events.traded()

    def close_queue(self) -> None:
        """Shutting down: every queued request is refused (ShuttingDown), none is queued again;
        a patient one (a judge's test: its request is in flight) keeps its place."""
        self.turns.close()
        self.judges.close()

    # what the rest of the front reads of the turns (/metrics, /health, the shutdown's wait)
    @property
    def concurrency(self) -> int:
        return self.turns.capacity

    @property
    def in_flight(self) -> int:
        return self.turns.held

    @property
    def queue(self) -> list:
        return self.turns.queue

    @property
    def closing(self) -> bool:
        return self.turns.closing

    def _take(self, want: str | None, claim: object) -> WarmSlot | None:
        """One prestarted for `want` whose command is waiting, else one whose command is still
        starting (ahead of a plain slot's cold start), else a plain one; never one another
        request traded for (`claim`: the asking request's)."""
        loading = plain = None
        for slot in self.warm:
            if self.traded_for.get(slot.index, claim) is not claim:
                continue
            if slot.prestart == want:
                if not slot.loading:
                    self._remove(slot)
                    return slot
                loading = loading or slot
            elif plain is None and slot.prestart is None:
                plain = slot
        slot = loading or plain
        if slot is not None:
            self._remove(slot)
        return slot

    def _remove(self, slot: WarmSlot) -> None:
        self.warm.remove(slot)
        self.warm_changed_at = time.monotonic()

    def _put(self, slot: WarmSlot) -> None:
        self.warm.append(slot)
        self.warm_changed_at = time.monotonic()
        for waiter in self._waiters:
            waiter.set()

    def demand(self, index: int, slug: str | None) -> None:
        """Slot `index`'s next slot is to be warmed for `slug` (None: plain): the zygote is told."""
        self.next_of[index] = slug
        self._tell_zygote(messages.Demand(index, slug))

    def _settled(self, index, pid, slug, seconds: float) -> None:
        slot = next((w for w in self.warm if w.index == index and w.pid == pid), None)
        if slot is not None:  # (one in use since: its run's CPU, not its start, said nothing)
            slot.loading = False
            self.asked.warmed(slug, seconds)

    def _tell_zygote(self, message: messages.ToZygote) -> None:
        try:
            protocol.send_frame(self.zygote, messages.encode(message))
        except OSError:
            pass  # the zygote is gone: the reader notices and ends the front

    def release(self, slot: WarmSlot) -> None:
        slot.sock.close()
        if slot.asked_for is not None:
            self.asked.ran(slot)
        self.turns.give_back()

    def condemn(self, slot: WarmSlot) -> None:
        """Instead of release, for a slot whose run outstayed its timeout: the zygote kills its
        whole cgroup and its init, and its capacity counts as taken until they are gone."""
        slot.sock.close()
        self.condemned[slot.index] = slot.pid
        self._tell_zygote(messages.Kill(slot.index, slot.pid))

    def _ended(self, index, pid) -> None:
        if self.condemned.get(index) == pid:
            del self.condemned[index]
            self.turns.give_back()

    @property
    def warm_count(self) -> int:
        return len(self.warm)

    def healthy(self) -> tuple[bool, str]:
        """ok while a slot is warm or busy, or one is due within WARM_WAIT_S; not while
        warm-ups fail, or none came that long (a stuck zygote: the watchdog then lapses)."""
        if self.warm_count or self.in_flight:
            return True, "ok"
        if self.last_warm_error and self.last_warm_error_at > self.last_warm_ok:
            return False, f"no warm slot: {self.last_warm_error}"
        waited = time.monotonic() - self.warm_changed_at
        if waited > WARM_WAIT_S:
            return False, f"no warm slot: none has come for {waited:.0f} s"
        return True, "ok"

    def send_shutdown(self) -> None:
        try:
            protocol.send_frame(self.zygote, messages.encode(messages.Shutdown()))
        except OSError:
            pass
        while self.warm:
            self.warm.pop().sock.close()

    def _slot_warm(self, message: messages.SlotWarm, fd: int) -> None:
        # family and type told: else the socket asks the kernel for them, 3 syscalls a run
        sock = gevent.socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM, 0, fileno=fd)
        warm_s = message.warm_ms / 1000
        self.next_of[message.index] = message.prestart  # the zygote warms its next one alike
        if not message.settles:  # else its command is still starting: see Settled
            self.asked.warmed(message.prestart, warm_s)
        self._put(WarmSlot(message.index, message.pid, sock, message.prestart, loading=message.settles))
        self.last_warm_ok = time.monotonic()
        self.events.warmed(warm_s)

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
            try:
                message = messages.decode(frame[0], messages.TO_FRONT)
            except ProtocolError as error:
                self.log.error("bad message from the zygote", error=str(error))
                message = None
            match message:
                case messages.SlotWarm() if fds:
                    self._slot_warm(message, fds.pop(0))
                case messages.Settled():
                    self._settled(message.index, message.pid, message.prestart, message.ms / 1000)
                case messages.WarmFailed(prestart=str()):
                    # most likely its language's command: the zygote logged why and retries the index
                    # plain, whose failure, if the slot itself is at fault, counts below. Until then a
                    # request waiting for a slot waits on, as for any slow warm-up.
                    self.next_of[message.index] = None
                    self.asked.failed(message.prestart, time.monotonic())
                    self.events.prestart_failed(message.prestart)
                case messages.WarmFailed():
                    self.last_warm_error = message.error
                    self.last_warm_error_at = time.monotonic()
                case messages.TemplateFailed():
                    self.events.template_failed(message.slug)
                case messages.AllReady():
                    self.all_warm.set()
                case messages.Ended():
                    self._ended(message.index, message.pid)
            for stray in fds:  # a descriptor without its message: never keep it open
                os.close(stray)
            fds.clear()
