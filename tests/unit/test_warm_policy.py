"""Warm when asked (kiln/run/asked.py) as a policy: how many slots a language just asked for
keeps, which slots it converts and gives back, through a pool of plain records. That the zygote
warms what it is told and requests then find those slots is tested for real in
tests/api/test_warm.py."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace
from dataclasses import dataclass, field

import gevent

from kiln.log import Log
from kiln.run import asked as policy
from kiln.run.asked import Asked, WarmWhenAsked


@dataclass
class Slot:
    index: int
    prestart: str | None = None
    loading: bool = False
    closed: bool = False

    @property
    def sock(self):
        return self

    def close(self) -> None:
        self.closed = True


@dataclass
class Pool:
    """What the policy sees of kiln/run/pool.py's SlotPool, and what it told it."""

    concurrency: int
    forking: frozenset[str] = frozenset({"js"})
    closing: bool = False
    log: Log = field(default_factory=lambda: Log("logfmt", False))
    warm: list = field(default_factory=list)
    next_of: dict = field(default_factory=dict)
    traded_for: dict = field(default_factory=dict)
    demanded: list = field(default_factory=list)
    converted: list = field(default_factory=list)

    def __post_init__(self):
        self.warm = [Slot(i) for i in range(self.concurrency)]
        self.next_of = {i: None for i in range(self.concurrency)}
        self.events = SimpleNamespace(converted=self.converted.append)

    def demand(self, index: int, slug: str | None) -> None:
        self.next_of[index] = slug
        self.demanded.append((index, slug))


def test_the_target_is_one_slot_per_cycle_a_warm_up_spans_and_the_least_until_all_is_known():
    assert Asked().target(2) == 2
    assert Asked(warm=0.4, think=None, run=0.1).target(2) == 2
    asked = Asked(warm=0.4, think=0.1, run=0.1)  # a replacement needs 2.5+ cycles: 1 + 3
    assert asked.target(2) == 1 + math.ceil((0.4 * policy.WARM_MARGIN + policy.WARM_LAG_S) / 0.2) == 4
    assert Asked(warm=0.05, think=1.0, run=0.01).target(2) == 2  # quick enough: the least


def test_a_forked_language_asked_for_converts_plain_slots_up_to_its_target_leaving_a_reserve():
    pool = Pool(concurrency=8)
    warm = WarmWhenAsked(pool)
    pool.next_of[0] = "js"  # the slot the request took is warmed again for js
    warm.asked_for("js")
    gevent.sleep(0)  # the supply runs in its own greenlet, off the request's path
    assert [slug for _, slug in pool.demanded] == ["js", "js"] and pool.converted == ["js", "js"]  # 3 for a forked language
    assert sum(slot.closed for slot in pool.warm) == 0 and len(pool.warm) == 6  # closed ones left the warm list
    assert list(pool.next_of.values()).count(None) == 5 >= math.ceil(8 * policy.RESERVE_SHARE)


def test_a_plain_slot_a_waiting_request_traded_for_is_not_converted():
    pool = Pool(concurrency=8)
    pool.traded_for[7] = object()  # warm again, its request not yet woken to take it
    warm = WarmWhenAsked(pool)
    pool.next_of[0] = "js"
    warm.asked_for("js")
    gevent.sleep(0)
    assert pool.demanded == [(6, "js"), (5, "js")]
    assert 7 in [slot.index for slot in pool.warm]


def test_never_below_the_reserve_of_plain_slots():
    pool = Pool(concurrency=4)
    warm = WarmWhenAsked(pool)
    warm.languages["js"] = Asked(warm=0.09, think=0.0, run=0.001)  # quick, and would want many
    pool.next_of[0] = "js"
    warm.asked_for("js")
    gevent.sleep(0)
    assert list(pool.next_of.values()).count(None) == max(1, math.ceil(4 * policy.RESERVE_SHARE))


def test_a_slow_language_is_converted_once_its_run_ends_and_not_after_a_failed_warm_up():
    pool = Pool(concurrency=8)
    warm = WarmWhenAsked(pool)
    pool.next_of[0] = "clojure"
    warm.asked_for("clojure")
    gevent.sleep(0)
    assert pool.demanded == []  # not while its run takes the CPU
    warm.ran(type("Taken", (), {"asked_for": "clojure", "hot": False, "taken": time.monotonic()})())
    gevent.sleep(0)
    assert [slug for _, slug in pool.demanded] == ["clojure"]  # 2 at least, one loading at a time at most
    other = Pool(concurrency=8)
    failing = WarmWhenAsked(other)
    other.next_of[0] = "js"
    failing.asked_for("js")
    failing.failed("js", time.monotonic())
    gevent.sleep(0)
    assert other.demanded == []


def test_a_slow_language_converts_its_next_slot_when_the_loading_one_settles():
    pool = Pool(concurrency=8)
    warm = WarmWhenAsked(pool)
    pool.next_of[0] = "clojure"
    warm.asked_for("clojure")
    pool.warm.append(Slot(0, prestart="clojure", loading=True))  # its run ended after its replacement was handed over
    warm.ran(type("Taken", (), {"asked_for": "clojure", "hot": False, "taken": time.monotonic()})())
    gevent.sleep(0)
    assert pool.demanded == []  # one loading at a time
    pool.warm[-1].loading = False
    warm.warmed("clojure", 2.0)
    gevent.sleep(0)
    assert [slug for _, slug in pool.demanded] == ["clojure"]


def test_an_idle_language_gives_its_converted_slots_back_keeping_one_warm(monkeypatch):
    monkeypatch.setattr(policy, "IDLE_S", 0.05)
    pool = Pool(concurrency=8)
    warm = WarmWhenAsked(pool)
    pool.next_of[0] = "js"
    warm.asked_for("js")
    gevent.sleep(0)
    for index, slug in pool.demanded:  # the zygote warmed them: they are handed over
        pool.warm.append(Slot(index, prestart=slug))
    pool.demanded.clear()
    gevent.sleep(0.12)
    # of its two warm slots (the third runs), one goes back to plain, one stays warm for it
    [(index, slug)] = pool.demanded
    assert slug is None and pool.converted[-1] is None and [s.prestart for s in pool.warm if not s.closed].count("js") == 1


def test_nothing_is_converted_while_the_front_shuts_down():
    pool = Pool(concurrency=8, closing=True)
    warm = WarmWhenAsked(pool)
    warm.asked_for("js")
    gevent.sleep(0)
    assert pool.demanded == []


def test_a_slowly_warming_language_at_rest_keeps_no_slot_and_a_forked_one_keeps_its_own(monkeypatch):
    monkeypatch.setattr(policy, "REST_S", 0.05)
    pool = Pool(concurrency=8)
    warm = WarmWhenAsked(pool)
    warm.languages["kotlin"] = Asked(warm=2.0)  # a JVM: slow
    pool.next_of[0], pool.next_of[1] = "kotlin", "js"
    jvm, forked = pool.warm[0], pool.warm[1]
    jvm.prestart, forked.prestart = "kotlin", "js"
    warm.asked_for("kotlin")
    warm.asked_for("js")
    gevent.sleep(0.02)
    assert not jvm.closed  # not at rest yet
    gevent.sleep(0.1)
    assert jvm.closed and jvm not in pool.warm and pool.next_of[0] is None and (0, None) in pool.demanded
    assert not forked.closed and pool.next_of[1] == "js"  # a forked one costs a template's pages
