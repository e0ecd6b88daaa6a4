"""The Runner: one job run in a slot, from its turn in the queue to its result.

    ran = runner.run(job, gone)          # -> Ran(result, slot_index, prestarted)

It owns what lies between the HTTP contract and the slots: which kind of slot a job takes (one
prestarted for its language, else plain), the wait for it (SlotPool), the job frame out and the
result in (kiln.wire.protocol), the cancel when the client leaves, the fallback to a plain slot
when a prestart command died, and what becomes of the slot afterwards: released, or killed from
outside when it stayed silent past its run's timeout. What it cannot do is an exception:

    Busy, NoWarmSlot, ShuttingDown   no slot for the job (kiln.run.pool)
    Cancelled                        its client left, queued or running: nobody to answer
    SlotLost                         the slot ended without a result (SlotSilent: it said nothing
                                     long past the run's timeout, and was killed from outside)

POST /run calls it once per request; a judge request calls it for its build and for each test.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import gevent
import gevent.event
import gevent.socket

from kiln.log import Log
from kiln.run.pool import ClientGone, SlotPool, WarmSlot
from kiln.runtime import Runtime
from kiln.wire import protocol
from kiln.wire.protocol import Job, PrestartFailed, ProtocolError, RunResult

# A slot enforces the run's timeout itself and answers within its drain grace (2 s) after it;
# this bounds a slot that stopped answering, which is then killed from outside. The slot moves the
# deadline on by the time the run was starved of CPU by others, up to the runtime's
# starved_max_times its timeout (kiln-init's starve.c, told by the recipe).
SLOT_SILENCE_GRACE_S = 5.0


class Cancelled(Exception):
    """The job's client left (while it was queued or running): the run, if any, was cancelled."""


class SlotLost(Exception):
    """The slot ended without a usable result (killed from outside, died, answered garbage)."""


class SlotSilent(SlotLost):
    """The slot said nothing long past its run's timeout: it was killed from outside."""


@dataclass(frozen=True)
class Ran:
    result: RunResult
    slot_index: int  # the index of the slot that ran it
    prestarted: bool  # in a slot prestarted (or forked) for its language


class Runner:
    def __init__(self, pool: SlotPool, runtime: Runtime, log: Log):
        self.pool = pool
        self.workloads = runtime.workloads
        self.queue_wait_ms = runtime.config.queue_wait_ms
        self.starved_max_times = runtime.starved_max_times
        self.result_limit = 2 * runtime.config.output_max + protocol.MAX_HEADER + 64
        self.build_result_limit = self.result_limit + protocol.LAYER_MAX
        self.given_back_limit = self.result_limit + runtime.config.output_max + 1  # an exec job's give_back file
        self.log = log
        self.prestart_broken: set[str] = set()  # languages whose prestart command died unreleased

    def run(self, job: Job, gone: gevent.event.Event | None = None, patient: bool = False, client: str = "") -> Ran:
        """Run `job` in a slot; `gone` is set when its client leaves (then: Cancelled). A patient
        job waits its turn as long as it takes (a judge's test: its request is admitted);
        `client` is whose request it is (the queue's shares: kiln/run/turns.py)."""
        try:
            return self._attempt(job, self._prestart_lang(job), gone, patient, client)
        except PrestartFailed as failed:
            # the slot's prestart command had died before the job came: never prestart this
            # language again (until restart), and run the job in a plain slot
            self.prestart_broken.add(job.slug)
            self.pool.events.prestart_failed(job.slug)
            self.log.error("prestart command failed; prestarting stops for this language", lang=job.slug, error=str(failed))
            return self._attempt(job, None, gone, patient, client)

    def run_pair(self, first: Job, second: Job, gone: gevent.event.Event | None = None) -> tuple[Ran, Ran]:
        """Two patient jobs at once, each in its own slot (an interactive test: the submission and
        its interactor, talking through their pipes), their two turns taken together. The jobs'
        pipes are the Runner's from here: closed once sent, or when a job cannot be sent."""
        try:
            with _gone_is_cancelled():
                slots = self.pool.acquire_pair(gone)
        except BaseException:
            for job in (first, second):
                _close_pipes(job)
            raise
        runs = [gevent.spawn(self._in_slot, slot, job, gone) for slot, job in zip(slots, (first, second))]
        gevent.joinall(runs)
        for run in runs:
            if not run.successful():
                raise run.exception
        return runs[0].value, runs[1].value

    @contextlib.contextmanager
    def admitted(self, gone: gevent.event.Event | None = None, client: str = "") -> Iterator[None]:
        """A judge request's admission, held while it is judged: RUN_JUDGE_MAX at once, one more
        waits its turn as a /run waits for a slot (RUN_QUEUE_WAIT, then Busy), so that the tests
        of the requests admitted are what may queue for runs' turns, never an unbounded number."""
        with _gone_is_cancelled():
            self.pool.judges.take(self.queue_wait_ms / 1000, gone, client=client)
        try:
            yield
        finally:
            self.pool.judges.give_back(client)

    @contextlib.contextmanager
    def session(self, gone: gevent.event.Event | None = None) -> Iterator["Session"]:
        """A plain slot kept for a judge request's tests, run one after another (patient jobs)."""
        session = Session(self, gone)
        try:
            yield session
        finally:
            session.close()

    def _prestart_lang(self, job: Job) -> str | None:
        """The language of the prestarted slot that can serve `job` (None: a plain slot). A job
        with its own memory or pids limit needs a plain slot: a prestarted one's were written
        while it warmed, and its runtime may already hold more than the job allows."""
        workload = self.workloads.get(job.slug)
        if workload is None or workload.prestart_argv is None or job.stdin is not None or job.stdin_file is not None or job.command != "test" or job.slug in self.prestart_broken:
            return None
        if job.limits.memory or job.limits.pids:
            return None
        return job.slug

    def _attempt(self, job: Job, want: str | None, gone: gevent.event.Event | None, patient: bool, client: str) -> Ran:
        slot = self._acquire(want, None if patient else min(self.queue_wait_ms, job.timeout_ms) / 1000, gone, client)
        return self._in_slot(slot, job, gone)

    def _acquire(self, want: str | None, wait_s: float | None, gone: gevent.event.Event | None, client: str = "") -> WarmSlot:
        with _gone_is_cancelled():
            return self.pool.acquire(want, wait_s, gone, client)

    def _in_slot(self, slot: WarmSlot, job: Job, gone: gevent.event.Event | None, keep: bool = False) -> Ran:
        """The job in the slot it was given; the slot released (or condemned) after, unless
        `keep` (a Session's: it releases the slot itself when the job ran)."""
        try:
            frame = self._exchange(slot, job, gone)
        except SlotSilent:
            self.pool.condemn(slot)  # its capacity stays taken until the zygote killed it
            raise
        except BaseException:
            self.pool.release(slot)
            raise
        if not keep:
            self.pool.release(slot)  # before the answer is written
        try:
            return Ran(protocol.decode_result(frame), slot.index, slot.prestart is not None)
        except BaseException as error:
            if keep:
                self.pool.release(slot)
            if isinstance(error, ProtocolError):
                raise SlotLost(str(error)) from None
            raise  # PrestartFailed: run() tries a plain slot

    def _exchange(self, slot: WarmSlot, job: Job, gone: gevent.event.Event | None) -> tuple[dict, list[bytes]]:
        """The job out, the slot's one answer in; a client that leaves meanwhile cancels it."""
        cancel = lambda _gone: _cancel(slot.sock)  # noqa: E731
        if gone is not None:
            gone.rawlink(cancel)
        frame, failure = None, None
        silence = gevent.Timeout(job.timeout_ms / 1000 * (1 + self.starved_max_times) + SLOT_SILENCE_GRACE_S)
        try:
            with silence:
                try:
                    protocol.send_frame(slot.sock, *protocol.encode_job(job), fds=protocol.job_fds(job))
                finally:
                    _close_pipes(job)  # the slot has its own copies: the other side's end-of-file needs ours gone
                limit = self.build_result_limit if job.command == "build" else self.given_back_limit if job.give_back else self.result_limit
                frame = protocol.recv_frame(slot.sock, limit)
        except (OSError, ProtocolError, gevent.Timeout) as error:
            failure = error
        finally:
            if gone is not None:
                gone.unlink(cancel)
        if gone is not None and gone.is_set():
            raise Cancelled
        if failure is silence:
            raise SlotSilent(f"slot {slot.index} gave no result {SLOT_SILENCE_GRACE_S:g} s after the run's timeout")
        if frame is None:
            raise SlotLost(f"slot {slot.index} ended without a result ({failure!r})")
        return frame


class Session:
    """A judge request's tests in one plain slot, one after another, while the slot says it can
    take another (its result's `next`: kiln-init runs each in a fresh sandbox) and nobody waits
    for a turn: each test is a turn, so with anyone queued the slot is given back (its turn to
    whoever waited longest) and the next test queues for a fresh one behind them. Else, or when
    the slot is lost between two tests, the next test takes a fresh slot. The slot is released at
    the end. A test that cannot run here is the Runner's failures as `run` gives them."""

    def __init__(self, runner: Runner, gone: gevent.event.Event | None):
        self.runner, self.gone = runner, gone
        self.slot: WarmSlot | None = None  # kept from the last test, which said `next`

    def run(self, job: Job) -> Ran:
        if self.slot is not None and self.runner.pool.queue:  # its turn is over: the next test queues
            self.close()
        if self.slot is not None:
            slot, self.slot = self.slot, None
            try:
                return self._keep(self.runner._in_slot(slot, job, self.gone, keep=True), slot)
            except SlotSilent:
                raise
            except SlotLost as lost:  # it could not take this one after all: a fresh slot does
                self.runner.log.info("a judge slot could not run another test", slot_index=slot.index, error=str(lost))
        slot = self.runner._acquire(None, None, self.gone)
        return self._keep(self.runner._in_slot(slot, job, self.gone, keep=True), slot)

    def _keep(self, ran: Ran, slot: WarmSlot) -> Ran:
        if ran.result.next:
            self.slot = slot
        else:
            self.runner.pool.release(slot)
        return ran

    def close(self) -> None:
        if self.slot is not None:
            self.runner.pool.release(self.slot)
            self.slot = None


@contextlib.contextmanager
def _gone_is_cancelled() -> Iterator[None]:
    """A client that left while its request waited for a slot: the run is Cancelled."""
    try:
        yield
    except ClientGone:
        raise Cancelled from None


def _close_pipes(job: Job) -> None:
    for fd in job.pipes or ():
        try:
            os.close(fd)
        except OSError:
            pass


def _cancel(slot_sock) -> None:
    """The slot reads end-of-file: its init kills the run and exits without a result."""
    try:
        slot_sock.shutdown(gevent.socket.SHUT_WR)
    except OSError:
        pass
