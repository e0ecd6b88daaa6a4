"""What the zygote reads before it ends a reaped slot (Zygote._reap): the front says what a slot it
closes unused is to be replaced by (a "demand" frame) before it closes it, and the zygote must
have read that before the slot's index is warmed again, however its reaping is interleaved with
the front's messages. Real child processes and a real socket; the zygote's other parts stubbed."""

from __future__ import annotations

import os
import signal
import socket
import time
from types import SimpleNamespace

from kiln.wire import protocol
from kiln.zygote import kinds
from kiln.zygote.slot import Index, Slot
from kiln.zygote.zygote import Zygote


def child(exits: bool) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        if not exits:
            signal.pause()
        os._exit(0)
    return pid


def until_exited(pid: int) -> None:
    """Until `pid` is a zombie, without reaping it."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def test_a_slot_closed_while_the_zygote_ends_another_is_replaced_as_the_front_said():
    """Slot 1 is closed by the front (trading it in for a plain slot) while the zygote is busy
    ending slot 0, reaped in the same turn (its cgroup's removal can take milliseconds): the
    front's demand for index 1 is read before slot 1 ends, so its replacement is plain."""
    front, front_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ran, traded = child(exits=True), child(exits=False)
    until_exited(ran)

    def remove_slot(cgroup) -> bool:
        if cgroup == "slot 0's":  # meanwhile, the front trades slot 1 in: its demand, then its close
            protocol.send_frame(front_peer, {"op": "demand", "index": 1, "slug": None})
            os.kill(traded, signal.SIGKILL)
            until_exited(traded)
        return True

    indexes = {number: Index(number, spec=None, next_prestart="python") for number in (0, 1)}
    for number, pid in ((0, ran), (1, traded)):
        indexes[number].slot = Slot(index=number, pid=pid, sock=None, started=time.monotonic(), cgroup=f"slot {number}'s", kind=kinds.Prestarted(SimpleNamespace(slug="python")))
    zygote = Zygote.__new__(Zygote)
    zygote.front, zygote.stopping, zygote.indexes = front, False, indexes
    zygote.templates = SimpleNamespace(reaped=lambda pid: None)
    zygote.cgroups = SimpleNamespace(remove_slot=remove_slot)
    zygote.runtime = SimpleNamespace(workloads={"python": SimpleNamespace(prestart_argv=["x"])})
    zygote.log = SimpleNamespace(error=lambda *a, **k: None, info=lambda *a, **k: None)
    try:
        zygote._reap()
        assert indexes[0].slot is None and indexes[1].slot is None  # both ended
        assert indexes[1].next_prestart is None  # warmed plain, as the front said
        assert indexes[0].next_prestart == "python"  # told nothing: as before
    finally:
        front.close()
        front_peer.close()
        for pid in (ran, traded):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
