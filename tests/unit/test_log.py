"""The log's access lines, batched where the front asks (Log.batch_access): while it is busy, held
until the flush it schedules, written before any other line, in order, and never more than
ACCESS_BATCH_MAX held. A real pipe stands for stderr."""

from __future__ import annotations

import json
import os
import select

import pytest

from kiln.log import ACCESS_BATCH_MAX, Log


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


def written(fd: int) -> list[dict]:
    """The lines in the pipe now, without waiting."""
    data = b""
    while select.select([fd], [], [], 0)[0]:
        data += os.read(fd, 1 << 16)
    return [json.loads(line) for line in data.decode().splitlines()]


def test_unbatched_an_access_line_is_written_at_once(pipe):
    log = Log("json", fd=pipe[1])
    log.access(status=200, path="/run")
    assert [(r["msg"], r["status"]) for r in written(pipe[0])] == [("request", 200)]


def test_batched_access_lines_wait_for_the_flush_scheduled_by_the_first(pipe):
    scheduled = []
    log = Log("json", fd=pipe[1])
    log.batch_access(scheduled.append, busy=lambda: True)
    for status in (200, 429, 200):
        log.access(status=status)
    assert written(pipe[0]) == [] and len(scheduled) == 1  # one flush for the batch
    scheduled[0]()
    assert [r["status"] for r in written(pipe[0])] == [200, 429, 200]
    log.access(status=201)  # the next batch schedules its own
    assert len(scheduled) == 2 and written(pipe[0]) == []
    scheduled[1]()
    scheduled[0]()  # a flush with nothing held writes nothing
    assert [r["status"] for r in written(pipe[0])] == [201]


def test_any_other_line_writes_the_held_ones_first_in_order(pipe):
    log = Log("json", fd=pipe[1])
    log.batch_access(lambda flush: None, busy=lambda: True)
    log.access(status=200)
    log.warning("connection refused: answered 503")
    assert [r["msg"] for r in written(pipe[0])] == ["request", "connection refused: answered 503"]


def test_a_line_written_when_not_busy_goes_at_once_with_those_held(pipe):
    """One client's runs one after another: nothing in flight when each line is written."""
    busy = [True]
    log = Log("json", fd=pipe[1])
    log.batch_access(lambda flush: None, busy=lambda: busy[0])
    log.access(status=200)
    assert written(pipe[0]) == []
    busy[0] = False
    log.access(status=201)
    assert [r["status"] for r in written(pipe[0])] == [200, 201]


def test_no_more_than_the_batch_limit_is_held(pipe):
    scheduled = []
    log = Log("json", fd=pipe[1])
    log.batch_access(scheduled.append, busy=lambda: True)
    for n in range(ACCESS_BATCH_MAX):
        log.access(n=n)
    assert [r["n"] for r in written(pipe[0])] == list(range(ACCESS_BATCH_MAX))
    assert len(scheduled) == 1
