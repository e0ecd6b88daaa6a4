"""Turns: a bounded number of holders at once, and the one queue of those waiting for a place.

    turns.take(wait_s, gone)   # a place now, or queued for one (Busy, ClientGone, ShuttingDown)
    turns.give_back()          # the place to whoever waited longest, else free

The slot pool's turns are runs in flight (RUN_CONCURRENCY): every run takes one, a /run, a judge's
build, each test of a judge request, and gives it back when it ends, so a place freed by a test
goes to whoever waited longest, never back to the same request ahead of them. A judge request's
admission is turns of their own (RUN_JUDGE_MAX requests judged at once), so that the tests queued
for a run's turn are bounded: RUN_JUDGE_MAX x RUN_JUDGE_PARALLEL at most.

A request that may wait (`wait_s`) waits up to that long, in a queue of at most `queue_max` such
requests; past either it is refused (Busy: 429). A patient one (`wait_s` None: a judge's test,
whose request was admitted) waits as long as it takes and does not count against `queue_max`:
the judge's admission bounds those. A request of `needs` places (an interactive test's pair)
takes them together: what is free when it comes first in line is kept for it, and nobody behind it
overtakes it, so half-taken pairs never hold every place.

Shares: the queue is every client's (the API key's owner where keys are configured, else the peer
address; kiln/http/api.py `App._client`). A client may fill it while nobody else wants it; when it
is full, a request whose client holds fewer places in it than the client holding the most takes
that client's newest place, which is refused (Busy "queue share"), so one client's burst never
makes another's request 429 at once. Behind a balancer every request is the balancer's address
(one client): its own queue (deploy/haproxy.cfg, maxconn per host) does that part there. A judge
request's admission is held for all its tests, so it is given back by client (`Admissions`).
"""

from __future__ import annotations

import itertools
import time

import gevent
import gevent.event

SERVED_KEPT = 4096  # clients whose last admission Admissions remembers (the oldest forgotten first)


class Busy(Exception):
    """No turn for the request: every place was taken and the queue was full ("queue full",
    or "no queue" with a wait of 0), or its turn did not come in time ("queue wait")."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason  # "no queue", "queue full", "queue wait", "queue share"


class ClientGone(Exception):
    """The request's client left while it waited for its turn (or for a slot)."""


class ShuttingDown(Exception):
    """The service began to shut down while the request was queued."""


class _Turn:
    """A queued request's place: its event set once it was `granted` the places it `needs`
    (passed on by holders, one at a time), or refused."""

    __slots__ = ("client", "displaced", "event", "granted", "needs", "patient")

    def __init__(self, needs: int, patient: bool, client: str):
        self.event = gevent.event.Event()
        self.granted = 0
        self.needs = needs
        self.patient = patient  # waits as long as it takes, outside queue_max
        self.client = client
        self.displaced = False  # its place taken by another client's request (a full queue's share)


class Turns:
    def __init__(self, capacity: int, queue_max: int, on_queued=lambda seconds: None):
        self.capacity = capacity
        self.queue_max = queue_max  # of the requests that may be refused; patient ones apart
        self.held = 0  # places taken (a pool's: runs in flight, and slots being killed)
        self.queue: list[_Turn] = []  # requests waiting for their turn, first come first
        self.waiting = 0  # ... of them, those counted against queue_max (not patient)
        self.waiting_of: dict[str, int] = {}  # ... and those by client
        self.closing = False  # shutting down: nobody is queued any more
        self.on_queued = on_queued  # /metrics: how long queued requests waited

    def take(self, wait_s: float | None, gone: gevent.event.Event | None = None, needs: int = 1, client: str = "") -> None:
        """Hold `needs` places, at once if they are free and nobody is queued ahead, else once
        holders give theirs back (give_back). `wait_s`: how long it may wait (None: patient);
        `client`: whose request it is (the queue's shares)."""
        if self.held + needs <= self.capacity and not self.queue:
            self.held += needs
            return
        if needs > self.capacity:
            raise ValueError(f"{needs} places at once of {self.capacity}")
        if wait_s is not None and (wait_s <= 0 or not self.queue_max):
            raise Busy("no queue")
        if wait_s is not None and self.waiting >= self.queue_max and not self._make_room_for(client):
            raise Busy("queue full")
        turn = _Turn(needs, wait_s is None, client)
        if not self.queue:  # first in line: what is free now is its own
            turn.granted = max(0, self.capacity - self.held)
            self.held += turn.granted
        self.queue.append(turn)
        if not turn.patient:
            self.waiting += 1
            self.waiting_of[client] = self.waiting_of.get(client, 0) + 1
        started = time.monotonic()
        try:
            gevent.wait([turn.event] + ([gone] if gone is not None else []), timeout=wait_s, count=1)
        finally:
            if not turn.event.is_set():
                self._leave(turn)
            self.on_queued(time.monotonic() - started)
        left = gone is not None and gone.is_set()
        if turn.granted == turn.needs and not left:
            return
        for _ in range(turn.granted):  # refused or left with places granted: the next one's
            self.give_back()
        if self.closing:
            raise ShuttingDown
        if left:
            raise ClientGone
        raise Busy("queue share" if turn.displaced else "queue wait")

    def give_back(self, client: str = "") -> None:
        """A place, free again: to the next queued request (`_next`), else no longer held.
        `client`: whose place it was (Admissions counts them)."""
        if self.queue:
            turn = self._next()
            turn.granted += 1
            if turn.granted == turn.needs:
                self._leave(turn)
                turn.event.set()
        else:
            self.held -= 1

    def _next(self) -> _Turn:
        """Who gets a place given back: whoever waited longest."""
        return self.queue[0]

    def _leave(self, turn: _Turn) -> None:
        self.queue.remove(turn)
        if not turn.patient:
            self.waiting -= 1
            self.waiting_of[turn.client] -= 1
            if not self.waiting_of[turn.client]:
                del self.waiting_of[turn.client]

    def _make_room_for(self, client: str) -> bool:
        """The queue is full: when `client` holds fewer places in it than the client holding the
        most, less one (else the two would only trade places), that client's newest request is
        refused and its place is `client`'s. Whether it was."""
        most, heaviest = max((count, holder) for holder, count in self.waiting_of.items())
        if most < self.waiting_of.get(client, 0) + 2:
            return False
        newest = next(turn for turn in reversed(self.queue) if not turn.patient and turn.client == heaviest)
        self._leave(newest)
        newest.displaced = True
        newest.event.set()
        return True

    def close(self) -> None:
        """Shutting down: every queued request is refused (ShuttingDown), none is queued again;
        a patient one (a judge's test: its request is in flight) keeps its place."""
        self.closing = True
        self.queue_max = 0
        for turn in [turn for turn in self.queue if not turn.patient]:
            self._leave(turn)
            turn.event.set()


class Admissions(Turns):
    """Judge requests admitted (RUN_JUDGE_MAX at once). A request holds its place for all its
    tests, minutes maybe, so first come first served would let one client's requests sent
    together keep every place for their whole length while another client's waited out their
    turn: a place given back goes to the waiting request of the client holding the fewest places,
    among those the client admitted longest ago, then to whoever waited longest."""

    def __init__(self, capacity: int, queue_max: int):
        super().__init__(capacity, queue_max)
        self.held_of: dict[str, int] = {}
        self.admitted_at: dict[str, int] = {}  # client -> the ticket of its last admission, oldest first
        self._tickets = itertools.count(1)

    def take(self, wait_s: float | None, gone: gevent.event.Event | None = None, needs: int = 1, client: str = "") -> None:
        super().take(wait_s, gone, needs, client)
        self.held_of[client] = self.held_of.get(client, 0) + needs
        self.admitted_at.pop(client, None)  # (re-inserted last: the dict stays oldest first)
        self.admitted_at[client] = next(self._tickets)
        if len(self.admitted_at) > SERVED_KEPT:
            del self.admitted_at[next(iter(self.admitted_at))]

    def give_back(self, client: str = "") -> None:
        held = self.held_of.get(client)
        if held is not None:  # (None: a place granted to a request that left before it knew)
            if held > 1:
                self.held_of[client] = held - 1
            else:
                del self.held_of[client]
        super().give_back(client)

    def _next(self) -> _Turn:
        return min(self.queue, key=lambda turn: (self.held_of.get(turn.client, 0), self.admitted_at.get(turn.client, 0)))
