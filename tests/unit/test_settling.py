"""When the zygote tells the front a prestarted slot's command has settled (Zygote._watch_settling):
once its cgroup is quiet, and at the latest SETTLE_MAX_S after its spawn, busy or not: a slot the
front kept taking for loading would be served as not prestarted, and would hold up its language's
next conversion, for as long as it lives."""

from __future__ import annotations

import time
from types import SimpleNamespace

from kiln.wire import messages
from kiln.zygote.zygote import SETTLE_MAX_S, SETTLE_STEP_S, Zygote


class Cgroup:
    def __init__(self, cpu_ms: float | None, runnable: bool):
        self.cpu, self.runnable = cpu_ms, runnable

    def cpu_ms(self) -> float | None:
        return self.cpu

    def any_runnable(self) -> bool:
        return self.runnable


def watch(started_ago: float, cpu_ms: float | None, runnable: bool) -> tuple[list[dict], object]:
    """One look at a slot spawned `started_ago` seconds ago, whose cgroup used `cpu_ms` since
    the last look (a step ago, at 0 ms)."""
    now = time.monotonic()
    slot = SimpleNamespace(index=3, pid=42, kind=SimpleNamespace(prestart="elixir"), started=now - started_ago, settle=(now - 2 * SETTLE_STEP_S, 0.0), cgroup=Cgroup(cpu_ms, runnable))
    told: list[dict] = []
    fake = SimpleNamespace(_slots=lambda: [slot], _tell_front=lambda message: told.append(messages.encode(message)))
    Zygote._watch_settling(fake)
    return told, slot


def test_a_quiet_command_is_settled_as_of_its_last_busy_look():
    told, slot = watch(started_ago=1.5, cpu_ms=0.0, runnable=False)
    assert [(t["op"], t["index"], t["pid"], t["prestart"]) for t in told] == [("settled", 3, 42, "elixir")]
    assert 1400 < told[0]["ms"] < 1500 and slot.settle is None


def test_a_busy_command_is_watched_on():
    for cpu_ms, runnable in ((50.0, False), (0.0, True)):
        told, slot = watch(started_ago=1.5, cpu_ms=cpu_ms, runnable=runnable)
        assert told == [] and slot.settle is not None


def test_past_the_longest_watch_a_busy_command_counts_as_settled():
    told, slot = watch(started_ago=SETTLE_MAX_S + 1, cpu_ms=50.0, runnable=True)
    assert [t["op"] for t in told] == ["settled"] and told[0]["ms"] >= SETTLE_MAX_S * 1000
    assert slot.settle is None


def test_a_cgroup_that_cannot_be_read_counts_as_settled():
    told, _ = watch(started_ago=1.5, cpu_ms=None, runnable=False)
    assert [t["op"] for t in told] == ["settled"]
