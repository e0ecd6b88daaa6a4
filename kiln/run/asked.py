"""Warm when asked: which slots a prestarting language just asked for keeps warm.

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
slots converted for it back to plain, and a slowly starting one not asked for in REST_S its last
too: at rest, no runtime's memory is held (a prestarted JVM with its compiler warm holds 80-250
MiB). Decided in a greenlet of its own, off the request's path.

The pool (kiln/run/pool.py) owns the slots and tells this policy what happens (a request took a
slot, a run ended, a slot settled, a warm-up failed); the policy converts and gives back slots
through the pool, which it sees through a small Protocol.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Protocol

import gevent

from kiln.log import Log
from kiln.run.events import PoolEvents

RESERVE_SHARE = 0.25  # of the slots, never converted for a language asked for (plain for the others)
IDLE_S = 30.0  # a language not asked for this long gives back the slots converted for it
REST_S = 300.0  # a language whose slots warm slowly, not asked for this long, keeps none
FAILED_S = 30.0  # no conversion for a language whose prestarted slot failed to warm this recently
WARM_MARGIN, WARM_LAG_S = 1.25, 0.01  # a replacement is ready this much later than measured
LOADING_S = 0.1  # a language whose slots take longer to settle counts as starting slowly
LOADING_MAX = max(1, (os.cpu_count() or 2) // 2)  # a language's slots converted while its commands start: no more at once
SMOOTH = 0.5  # weight of the newest think, run or warm-up time in a language's averages


class Slots(Protocol):
    """What the policy sees of the pool."""

    concurrency: int
    closing: bool
    log: Log
    warm: list  # the warm slots (kiln.run.pool.WarmSlot), in arrival order
    next_of: dict[int, str | None]  # per slot index, the language its next slot is warmed for
    traded_for: dict[int, object]  # slot indexes whose next slot a waiting request traded for: its own
    forking: frozenset[str]
    events: PoolEvents

    def demand(self, index: int, slug: str | None) -> None: ...


def _smooth(average: float | None, value: float) -> float:
    return value if average is None else SMOOTH * value + (1 - SMOOTH) * average


@dataclass
class Asked:
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
    rest: object = None  # the greenlet that gives a slowly warming language's last slots back

    def target(self, least: int) -> int:
        """The slots the language should have (warm, warming or running) for its next request to
        find one warm: the one its last request took, plus one per cycle (think time and run) that
        a replacement's warm-up spans; at least `least`, and that until both are known."""
        if self.warm is None or self.think is None or self.run is None:
            return least
        # the measured warm-up leaves out the zygote's reap and the hand-over: a margin
        return max(least, 1 + math.ceil((self.warm * WARM_MARGIN + WARM_LAG_S) / max(self.think + self.run, 1e-3)))


class WarmWhenAsked:
    def __init__(self, pool: Slots):
        self.pool = pool
        self.languages: dict[str, Asked] = {}

    def failed(self, slug: str, at: float) -> None:
        """A slot prestarted for `slug` failed to warm: no conversion for it for FAILED_S."""
        if slug in self.languages:
            self.languages[slug].failed_at = at

    def asked_for(self, slug: str) -> None:
        """A request for `slug` took its slot: the time since the language's last one, and a
        look at its supply once the request is on its way."""
        now = time.monotonic()
        asked = self.languages.get(slug)
        if asked is None:
            asked = self.languages[slug] = Asked()
        elif asked.released is not None:
            think = max(0.0, now - asked.released) if asked.released >= asked.last else 0.0
            asked.think = _smooth(asked.think, think)
        asked.last = now
        if self._quick(slug, asked) and self._short(slug, asked):
            gevent.spawn(self._supply, slug)  # runs once the request's greenlet waits on its slot
        if asked.rest is None and not self._quick(slug, asked):
            asked.rest = gevent.spawn_later(REST_S, self._rest, slug)

    def _quick(self, slug: str, asked: Asked) -> bool:
        """Whether the language's slots warm quickly (forked from a template): converted as its
        requests come; else once their runs end, so that a runtime's start takes no CPU from the
        run. Until a slot says, whether its workspace has a template."""
        return asked.warm <= LOADING_S if asked.warm is not None else slug in self.pool.forking

    def ran(self, slot) -> None:
        """A run for a prestarting language ended (release): how long it took."""
        asked = self.languages.get(slot.asked_for)
        if asked is None:
            return
        now = time.monotonic()
        asked.released = now
        if not self._quick(slot.asked_for, asked) and self._short(slot.asked_for, asked):  # converted while the client reads the answer, not during the run
            gevent.spawn(self._supply, slot.asked_for)
        if slot.hot or not asked.hot:
            asked.run = _smooth(asked.run if asked.hot == slot.hot else None, now - slot.taken)
            asked.hot = slot.hot

    def _target(self, slug: str, asked: Asked) -> int:
        # a forked slot costs little (it shares its template's pages): one more to spare
        return asked.target(3 if self._quick(slug, asked) else 2)

    def _short(self, slug: str, asked: Asked) -> bool:
        """Whether `slug` has fewer slots than its target: a request whose language has its
        share spawns no supply greenlet (most of a steady stream's requests)."""
        return sum(1 for kind in self.pool.next_of.values() if kind == slug) < self._target(slug, asked)

    def _supply(self, slug: str) -> None:
        """Convert warm plain slots for `slug` up to its target, keeping RESERVE_SHARE plain."""
        asked = self.languages[slug]
        if self.pool.closing or time.monotonic() - asked.failed_at < FAILED_S:
            return
        destined = [self.pool.next_of.get(i) for i in range(self.pool.concurrency)]
        have, plain = destined.count(slug), destined.count(None)
        reserve = max(1, math.ceil(self.pool.concurrency * RESERVE_SHARE))
        target = self._target(slug, asked)
        self.pool.log.debug("warm when asked", lang=slug, have=have, target=target, plain=plain, warm_s=asked.warm, think_s=asked.think, run_s=asked.run, hot=asked.hot)
        # a runtime that starts slowly (a JVM) takes CPU from the runs: its slots are converted a
        # few at a time, each once the last ones settled (a forked one never says it is loading)
        loading = sum(1 for s in self.pool.warm if s.prestart == slug and s.loading)
        while have < target and plain > reserve and loading < LOADING_MAX:
            spare = next((s for s in reversed(self.pool.warm) if s.prestart is None and s.index not in self.pool.traded_for), None)
            if spare is None:
                break
            self.pool.warm.remove(spare)
            self.pool.demand(spare.index, slug)
            spare.sock.close()  # its init reads end-of-file and exits unused
            have, plain = have + 1, plain - 1
            loading += not self._quick(slug, asked)
            asked.converted += 1
            self.pool.events.converted(slug)
        if asked.converted and asked.decay is None:
            asked.decay = gevent.spawn_later(IDLE_S, self._give_back, slug)

    def _give_back(self, slug: str) -> None:
        """`slug` not asked for in IDLE_S: its warm slots (all but one) that were converted for
        it are closed, their index warmed plain again."""
        asked = self.languages[slug]
        asked.decay = self._until_idle(asked, IDLE_S, self._give_back, slug)
        if asked.decay is not None:
            return
        if self.pool.closing:
            return
        mine = [s for s in self.pool.warm if s.prestart == slug]
        for slot in mine[len(mine) - min(asked.converted, len(mine) - 1) :] if mine else ():
            self._to_plain(slot)
            asked.converted -= 1
        if sum(1 for kind in self.pool.next_of.values() if kind == slug) <= 1:
            asked.converted = 0  # (converted slots ran since, and their replacements are gone too)
        if asked.converted:  # some were running or warming: once they are warm
            asked.decay = gevent.spawn_later(IDLE_S, self._give_back, slug)

    def _rest(self, slug: str) -> None:
        """`slug`, whose slots warm slowly, not asked for in REST_S: every slot warm or to be
        warmed for it is plain again."""
        asked = self.languages[slug]
        asked.rest = self._until_idle(asked, REST_S, self._rest, slug)
        if asked.rest is not None:
            return
        if self.pool.closing or self._quick(slug, asked):
            return
        for slot in [s for s in self.pool.warm if s.prestart == slug]:
            self._to_plain(slot)
        for index, kind in list(self.pool.next_of.items()):
            if kind == slug:  # a slot of it running: its next one plain
                self.pool.demand(index, None)
        asked.converted = 0
        self.pool.log.info("warm when asked: at rest, no slot kept warm", lang=slug, idle_s=round(time.monotonic() - asked.last, 1))

    @staticmethod
    def _until_idle(asked: Asked, window: float, then, slug: str):
        """`then(slug)` called again once `asked` has not been asked for in `window` (its greenlet),
        or None: it has not, already."""
        left = window - (time.monotonic() - asked.last)
        return gevent.spawn_later(left, then, slug) if left > 0 else None

    def _to_plain(self, slot) -> None:
        """A warm slot of a language closed unused, its index warmed plain again."""
        self.pool.warm.remove(slot)
        self.pool.demand(slot.index, None)
        slot.sock.close()
        self.pool.events.converted(None)

    def warmed(self, slug, seconds: float) -> None:
        """A slot prestarted for `slug` took `seconds` from its spawn to being really warm. A
        slowly starting language still short of its target and asked for of late converts its
        next slot now (one loads at a time: the run that ended may have found one loading)."""
        asked = self.languages.get(slug) if isinstance(slug, str) else None
        if asked is None:
            return
        asked.warm = _smooth(asked.warm, seconds)
        if not self._quick(slug, asked) and time.monotonic() - asked.last < IDLE_S and self._short(slug, asked):
            gevent.spawn(self._supply, slug)
