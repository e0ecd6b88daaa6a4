"""Warm when asked: a language just asked for keeps more slots warm than the one its request took
(kiln/run/pool.py, "Warm when asked"), so that one client sending its runs one after another
finds a prestarted slot each time; plain slots remain for the other languages. Behaviour, not
speed: bench/warm.py measures how often and how fast."""

from __future__ import annotations

import time

import pytest

from kilntest import Server, burst, wait_until

ADD = "def solution(a, b):\n    return a + b\n"
AB = {"arguments": [[1, 2], [10, -3]]}


@pytest.fixture
def server():
    instance = Server({"RUN_CONCURRENCY": "4", "RUN_LANGS": "python,ruby,elixir", "RUN_PRESTART": "python,elixir"}).wait_ready()
    yield instance
    instance.stop()


def plain_warm(server: Server) -> list:
    return [slot for slot in server.warm_slots() if slot.lang is None]


def test_after_one_run_the_next_ones_in_a_row_are_prestarted(server):
    first, record = server.run_logged(lang_slug="python", solution_text=ADD, asserts=AB)
    assert first["exit_code"] == 0 and record["prestarted"] is False  # a fresh server: plain slots only
    # the slot it took is replaced by a python one, and a plain one is converted besides
    assert wait_until(lambda: len(server.warm_slots("python")) >= 2, timeout=20), server.slots()
    assert server.metric('kiln_slot_conversions_total{to="python"}') >= 1
    served = [server.run_logged(lang_slug="python", solution_text=ADD, asserts=AB)[1]["prestarted"] for _ in range(2)]
    assert served == [True, True]


def test_a_second_request_some_time_later_is_served_prestarted(server):
    server.run_logged(lang_slug="elixir", solution_text="IO.puts(2 + 3)\n")
    # a BEAM slot is converted for once the last one settled (asked.LOADING_MAX), at the latest
    # SETTLE_MAX_S (30 s) after its spawn on a busy host
    assert wait_until(lambda: len(server.warm_slots("elixir")) >= 2, timeout=75), server.slots()
    assert wait_until(lambda: server.settled("elixir") >= 1, timeout=40), server.slots()  # "some time later": its command settled
    body, record = server.run_logged(lang_slug="elixir", solution_text="IO.puts(2 + 3)\n")
    assert (body["exit_code"], body["stdout"]) == (0, "5\n")
    assert record["prestarted"] is True


def test_plain_slots_remain_for_the_other_languages(server):
    for _ in range(6):  # python asked for again and again (a player's pause between): it takes what it may
        server.run_logged(lang_slug="python", solution_text=ADD, asserts=AB)
        time.sleep(0.3)
    assert wait_until(lambda: len(server.warm_slots()) == 4, timeout=20), server.slots()
    assert len(server.warm_slots("python")) <= 3
    assert server.metric('kiln_slot_conversions_total{to="python"}') <= 2
    assert len(plain_warm(server)) >= 1  # a quarter of the slots (at least one) is never converted
    trades = server.metric("kiln_prestart_trades_total")
    body, record = server.run_logged(lang_slug="ruby", solution_text="puts 6 * 7\n")
    assert (body["exit_code"], body["stdout"], record["prestarted"]) == (0, "42\n", False)
    assert server.metric("kiln_prestart_trades_total") == trades  # a plain slot was there for it
    answers = burst(server, 3, lang_slug="ruby", solution_text="puts 6 * 7\n")
    assert [(a.status_code, a.json()["stdout"]) for a in answers] == [(200, "42\n")] * 3
