"""The front's slot pool: which warm slot a request takes, and what the zygote is told.

A real SlotPool on a socketpair standing in for the zygote's channel: the test hands over slots
(socketpairs of their own) as the zygote does, and reads the frames the pool sends back.
"""

from __future__ import annotations

import os
import socket

import gevent
import gevent.event
import pytest

from kiln.run.pool import Busy, ClientGone, NoWarmSlot, ShuttingDown, SlotPool
from kiln.log import Log
from kiln.wire import messages, protocol


class Zygote:
    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = ours
        self.pool = SlotPool(theirs, concurrency=8, log=Log(fd=os.open(os.devnull, os.O_WRONLY)), on_zygote_lost=lambda: None)
        self.slot_ends: dict[int, socket.socket] = {}

    def hand_over(self, index: int, prestart: str | None = None) -> None:
        slot_end, front_end = socket.socketpair()
        self.slot_ends[index] = slot_end
        protocol.send_frame(self.sock, messages.encode(messages.SlotWarm(index, 100 + index, prestart, 1.0, False)), fds=(front_end.fileno(),))
        front_end.close()
        gevent.sleep(0.01)  # the pool's reader takes it

    def told(self) -> list[dict]:
        frames = []
        self.sock.setblocking(False)
        try:
            while True:
                frame = protocol.recv_frame(self.sock, 1 << 16)
                if frame is None:
                    break
                frames.append(frame[0])
        except BlockingIOError:
            pass
        finally:
            self.sock.setblocking(True)
        return frames


@pytest.fixture
def zygote():
    return Zygote()


def test_a_request_takes_a_slot_prestarted_for_its_language(zygote):
    zygote.hand_over(0, None)
    zygote.hand_over(1, "js")
    zygote.hand_over(2, "python")
    assert zygote.pool.acquire("python").index == 2
    assert zygote.told() == []  # its replacement is python's already


def test_else_a_plain_slot_whose_replacement_is_warmed_for_the_language(zygote):
    zygote.hand_over(0, "js")
    zygote.hand_over(1, None)
    assert zygote.pool.acquire("python").index == 1
    assert zygote.told() == [{"op": "demand", "index": 1, "slug": "python"}]


def test_a_request_needing_a_plain_slot_leaves_prestarted_ones(zygote):
    zygote.hand_over(0, "python")
    zygote.hand_over(1, None)
    assert zygote.pool.acquire(None).index == 1
    assert [s.index for s in zygote.pool.warm] == [0]


def test_when_only_other_languages_are_warm_one_is_traded_in(zygote):
    zygote.hand_over(0, "python")
    zygote.hand_over(1, "python")
    taker = gevent.spawn(zygote.pool.acquire, None)
    gevent.sleep(0.01)
    assert zygote.told() == [{"op": "demand", "index": 0, "slug": None}]
    assert zygote.slot_ends[0].recv(1) == b""  # closed unused: its init exits
    assert not taker.ready()  # python's other slot is not for it: it waits for the replacement
    zygote.hand_over(0, None)
    assert taker.get(timeout=1).index == 0
    assert [s.index for s in zygote.pool.warm] == [1]


def test_no_warm_slot_in_time_is_an_error(zygote, monkeypatch):
    monkeypatch.setattr("kiln.run.pool.WARM_WAIT_S", 0.05)
    with pytest.raises(NoWarmSlot):
        zygote.pool.acquire("python")
    assert zygote.pool.in_flight == 0


def test_a_condemned_slot_holds_its_capacity_until_the_zygote_says_it_is_gone(zygote):
    zygote.pool.turns.capacity = 1
    zygote.hand_over(0, None)
    slot = zygote.pool.acquire(None)
    zygote.pool.condemn(slot)
    assert zygote.told() == [{"op": "kill", "index": 0, "pid": 100}]
    assert zygote.slot_ends[0].recv(1) == b""  # the front let go of it
    assert zygote.pool.in_flight == 1
    zygote.hand_over(0, None)  # its replacement (or any slot) is warm, but the capacity is not free
    with pytest.raises(Busy):
        zygote.pool.acquire(None)
    protocol.send_frame(zygote.sock, messages.encode(messages.Ended(0, 999)))  # another slot's
    gevent.sleep(0.01)
    assert zygote.pool.in_flight == 1
    protocol.send_frame(zygote.sock, messages.encode(messages.Ended(0, 100)))
    gevent.sleep(0.01)
    assert zygote.pool.in_flight == 0
    assert zygote.pool.acquire(None).index == 0


def test_a_full_pool_queues_first_come_first_served(zygote):
    zygote.pool.turns.capacity, zygote.pool.turns.queue_max = 1, 2
    zygote.hand_over(0, None)
    running = zygote.pool.acquire(None)
    first = gevent.spawn(zygote.pool.acquire, None, 5.0)
    second = gevent.spawn(zygote.pool.acquire, None, 5.0)
    gevent.sleep(0.01)
    assert len(zygote.pool.queue) == 2
    with pytest.raises(Busy) as refused:  # the queue is full
        zygote.pool.acquire(None, 5.0)
    assert refused.value.reason == "queue full"
    zygote.pool.release(running)
    zygote.hand_over(1, None)
    assert first.get(timeout=1).index == 1 and not second.ready()
    zygote.pool.release(first.value)
    zygote.hand_over(2, None)
    assert second.get(timeout=1).index == 2
    assert zygote.pool.in_flight == 1 and zygote.pool.queue == []


def test_a_queued_request_gives_up_after_its_wait_or_when_its_client_leaves(zygote):
    zygote.pool.turns.capacity, zygote.pool.turns.queue_max = 1, 4
    zygote.hand_over(0, None)
    zygote.pool.acquire(None)
    with pytest.raises(Busy) as refused:
        zygote.pool.acquire(None, 0.05)
    assert refused.value.reason == "queue wait"
    with pytest.raises(Busy) as refused:
        zygote.pool.acquire(None, 0.0)  # RUN_QUEUE_WAIT=0: at once
    assert refused.value.reason == "no queue"
    gone = gevent.event.Event()
    waiter = gevent.spawn(zygote.pool.acquire, None, 5.0, gone)
    gevent.sleep(0.01)
    gone.set()
    with pytest.raises(ClientGone):
        waiter.get(timeout=1)
    assert zygote.pool.queue == [] and zygote.pool.in_flight == 1


def test_shutting_down_refuses_the_queued_requests(zygote):
    zygote.pool.turns.capacity, zygote.pool.turns.queue_max = 1, 4
    zygote.hand_over(0, None)
    zygote.pool.acquire(None)
    waiter = gevent.spawn(zygote.pool.acquire, None, 5.0)
    gevent.sleep(0.01)
    zygote.pool.close_queue()
    with pytest.raises(ShuttingDown):
        waiter.get(timeout=1)
    with pytest.raises(Busy):
        zygote.pool.acquire(None, 5.0)


def test_a_slow_warm_up_is_waited_for_but_failing_ones_are_not(zygote, monkeypatch):
    monkeypatch.setattr("kiln.run.pool.WARM_FAILING_S", 0.05)
    taker = gevent.spawn(zygote.pool.acquire, None)
    gevent.sleep(0.2)  # longer than WARM_FAILING_S: slow, not failing, so it waits on
    assert not taker.ready()
    zygote.hand_over(3, None)
    assert taker.get(timeout=1).index == 3
    protocol.send_frame(zygote.sock, messages.encode(messages.WarmFailed(1, "cannot create the slot's cgroup", None)))
    gevent.sleep(0.01)
    with pytest.raises(NoWarmSlot):
        zygote.pool.acquire(None)
    assert zygote.pool.in_flight == 1


def test_a_prestarted_slot_failing_is_not_every_warm_up_failing(zygote, monkeypatch):
    """Its language's command failed (the zygote retries the slot plain): kiln stays healthy
    and a request waiting for a slot waits on for the retry (a plain slot failing: above)."""
    monkeypatch.setattr("kiln.run.pool.WARM_FAILING_S", 0.05)
    protocol.send_frame(zygote.sock, messages.encode(messages.WarmFailed(1, "prestart command exited", "clojure")))
    gevent.sleep(0.01)
    assert zygote.pool.healthy() == (True, "ok")
    taker = gevent.spawn(zygote.pool.acquire, "clojure")
    gevent.sleep(0.2)  # longer than WARM_FAILING_S
    assert not taker.ready()
    zygote.hand_over(1, None)
    assert taker.get(timeout=1).index == 1


def test_a_patient_request_waits_past_the_queue_and_its_bounds(zygote):
    """A judge's test (wait None): queued whatever RUN_QUEUE_MAX, for as long as it takes, and
    not refused when shutting down (its request is in flight and finishes)."""
    zygote.pool.turns.capacity, zygote.pool.turns.queue_max = 1, 0
    zygote.hand_over(0, None)
    first = zygote.pool.acquire(None)
    with pytest.raises(Busy):
        zygote.pool.acquire(None, 5.0)
    patient = gevent.spawn(zygote.pool.acquire, None, None)
    gevent.sleep(0.05)
    zygote.pool.close_queue()
    gevent.sleep(0.05)
    assert not patient.ready()
    zygote.hand_over(1, None)
    zygote.pool.release(first)
    assert patient.get(timeout=1).index == 1


def test_the_slot_a_request_traded_for_is_its_own(zygote, monkeypatch):
    """A request that closed a slot of another language waits for that slot's replacement: a
    request arriving meanwhile (a python one, which a plain slot also serves) does not take it,
    else the first, having traded once, would wait out WARM_WAIT_S for a slot nobody warms."""
    monkeypatch.setattr("kiln.run.pool.WARM_WAIT_S", 0.5)
    zygote.hand_over(0, "js")
    zygote.hand_over(1, "js")
    python = gevent.spawn(zygote.pool.acquire, "python")
    gevent.sleep(0.01)
    plain = gevent.spawn(zygote.pool.acquire, None)
    gevent.sleep(0.01)
    assert zygote.told() == [{"op": "demand", "index": 0, "slug": "python"}, {"op": "demand", "index": 1, "slug": None}]
    zygote.hand_over(1, None)  # the plain request's, though the python one waited longer
    zygote.hand_over(0, "python")
    assert plain.get(timeout=1).index == 1
    assert python.get(timeout=1).index == 0


def test_a_traded_slot_back_for_its_old_language_is_traded_again(zygote, monkeypatch):
    """The slot a request traded in can come back warmed for its old language (it died by
    itself as it was traded, and the zygote warmed its replacement before reading the demand):
    the request trades that index again instead of waiting out WARM_WAIT_S."""
    monkeypatch.setattr("kiln.run.pool.WARM_WAIT_S", 2.0)
    zygote.hand_over(0, "python")
    taker = gevent.spawn(zygote.pool.acquire, None)
    gevent.sleep(0.01)
    assert zygote.told() == [{"op": "demand", "index": 0, "slug": None}]
    zygote.hand_over(0, "python")  # unfit: python's again
    gevent.sleep(0.01)
    assert zygote.told() == [{"op": "demand", "index": 0, "slug": None}]
    assert zygote.slot_ends[0].recv(1) == b""  # closed unused, as the first one
    assert not taker.ready()
    zygote.hand_over(0, None)
    assert taker.get(timeout=1).index == 0
    assert zygote.pool.warm == [] and zygote.pool.traded_for == {}


def test_a_pair_takes_its_two_turns_together_first_come_first_served(zygote):
    """An interactive test's two slots: its turns come together, the capacity free when it
    queued kept for it, and nobody queued after it overtakes it."""
    zygote.pool.turns.capacity, zygote.pool.turns.queue_max = 2, 4
    zygote.hand_over(0, None)
    running = zygote.pool.acquire(None)
    pair = gevent.spawn(zygote.pool.acquire_pair)
    gevent.sleep(0.01)
    assert zygote.pool.in_flight == 2  # the free one is the pair's already
    after = gevent.spawn(zygote.pool.acquire, None, 5.0)
    zygote.hand_over(1, None)
    zygote.hand_over(2, None)
    assert not pair.ready() and not after.ready()
    zygote.pool.release(running)
    assert sorted(slot.index for slot in pair.get(timeout=1)) == [1, 2]
    gevent.sleep(0.01)
    assert not after.ready()
    zygote.hand_over(3, None)
    zygote.pool.release(pair.value[0])
    assert after.get(timeout=1).index == 3


def test_a_pair_whose_client_leaves_passes_on_what_it_was_granted(zygote):
    zygote.pool.turns.capacity, zygote.pool.turns.queue_max = 2, 4
    zygote.hand_over(0, None)
    running = zygote.pool.acquire(None)
    gone = gevent.event.Event()
    pair = gevent.spawn(zygote.pool.acquire_pair, gone)
    gevent.sleep(0.01)
    assert zygote.pool.in_flight == 2
    gone.set()
    with pytest.raises(ClientGone):
        pair.get(timeout=1)
    assert zygote.pool.in_flight == 1 and zygote.pool.queue == []
    zygote.pool.release(running)
    assert zygote.pool.in_flight == 0


def test_health_lapses_when_no_slot_comes_for_the_warm_wait(zygote, monkeypatch):
    """Nothing warm, nothing running and no slot for WARM_WAIT_S: the zygote is stuck (a
    SIGSTOP, a wedged call); /health says so and the systemd watchdog is no longer fed."""
    monkeypatch.setattr("kiln.run.pool.WARM_WAIT_S", 0.2)
    zygote.hand_over(0)
    slot = zygote.pool.acquire(None)
    zygote.pool.release(slot)  # its replacement never comes
    assert zygote.pool.healthy() == (True, "ok")  # one is due
    gevent.sleep(0.3)
    healthy, why = zygote.pool.healthy()
    assert not healthy and why.startswith("no warm slot: none has come for"), why
    zygote.hand_over(1)
    assert zygote.pool.healthy() == (True, "ok")


def test_every_message_of_the_channel_decodes_to_itself_and_a_wrong_field_is_refused():
    """The channel's one decoder (kiln/wire/messages.py): what either side encodes is read back
    as the same message; a field of the wrong type, a missing one or a message of the other
    direction is a ProtocolError naming it."""
    from kiln.wire.protocol import ProtocolError

    said = [messages.SlotWarm(1, 2, "python", 3.5, True), messages.Settled(1, 2, None, 4.0), messages.WarmFailed(0, "boom", None), messages.TemplateFailed("ruby"), messages.AllReady(), messages.Ended(3, 4)]
    assert [messages.decode(messages.encode(m), messages.TO_FRONT) for m in said] == said
    heard = [messages.Demand(1, None), messages.Kill(2, 3), messages.Shutdown()]
    assert [messages.decode(messages.encode(m), messages.TO_ZYGOTE) for m in heard] == heard
    for header, wrong in (({"op": "slot", "index": "1", "pid": 2, "prestart": None, "warm_ms": 1.0, "settles": False}, "index"), ({"op": "ended", "index": 1}, "pid"), ({"op": "ended", "index": True, "pid": 1}, "index")):
        with pytest.raises(ProtocolError, match=wrong):
            messages.decode(header, messages.TO_FRONT)
    with pytest.raises(ProtocolError, match="kill"):
        messages.decode(messages.encode(messages.Kill(1, 2)), messages.TO_FRONT)
