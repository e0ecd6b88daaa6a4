"""The front's slot pool: which warm slot a request takes, and what the zygote is told.

A real SlotPool on a socketpair standing in for the zygote's channel: the test hands over slots
(socketpairs of their own) as the zygote does, and reads the frames the pool sends back.
"""

from __future__ import annotations

import os
import socket

import gevent
import pytest

from kiln.http.pool import NoWarmSlot, SlotPool
from kiln.log import Log
from kiln.zygote import protocol


class Zygote:
    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = ours
        self.pool = SlotPool(theirs, concurrency=8, log=Log(fd=os.open(os.devnull, os.O_WRONLY)), on_zygote_lost=lambda: None)
        self.slot_ends: dict[int, socket.socket] = {}

    def hand_over(self, index: int, prestart: str | None = None) -> None:
        slot_end, front_end = socket.socketpair()
        self.slot_ends[index] = slot_end
        protocol.send_frame(self.sock, {"op": "slot", "index": index, "pid": 100 + index, "prestart": prestart}, fds=(front_end.fileno(),))
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
    monkeypatch.setattr("kiln.http.pool.WARM_WAIT_S", 0.05)
    with pytest.raises(NoWarmSlot):
        zygote.pool.acquire("python")
    assert zygote.pool.in_flight == 0
