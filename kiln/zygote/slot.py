"""A slot: warmed by the zygote ahead of time, serves exactly one job, then dies.

    zygote ── forker (exits at once) ── init  = PID 1 of new mount, pid, ipc, uts, net and
                                                cgroup namespaces; re-parented to the zygote

The forker exists because a process cannot put itself in a new pid namespace: unshare(NEWPID)
applies to its children. Once it has exited, init is the zygote's child (the zygote is a
subreaper); only then does init set its parent-death signal, since a change of parent fires it.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from dataclasses import dataclass
from typing import NoReturn

from kiln.runtime import Runtime
from kiln.sandbox import contain, identity, libc
from kiln.sandbox.cgroups import SlotCgroup
from kiln.sandbox.contain import SetupError
from kiln.sandbox.plan import RootPlan
from kiln.zygote import job, protocol
from kiln.zygote.title import set_title
from kiln.zygote.protocol import ProtocolError

NAMESPACES = libc.CLONE_NEWNS | libc.CLONE_NEWPID | libc.CLONE_NEWIPC | libc.CLONE_NEWUTS | libc.CLONE_NEWNET | libc.CLONE_NEWCGROUP


@dataclass(frozen=True)
class SlotSpec:
    index: int
    uid: int
    root: RootPlan


def job_frame_limit(runtime: Runtime) -> int:
    # solution, checker, asserts and stdin, each at most RUN_INPUT_MAX, plus the header
    return 4 * runtime.config.input_max + protocol.MAX_HEADER + 64


def spawn(spec: SlotSpec, cgroup: SlotCgroup, runtime: Runtime) -> tuple[int, socket.socket]:
    """In the zygote: start warming a slot. Returns the forker's pid and the zygote's end of the
    slot's socket (handed to the front once the slot reports ready)."""
    zygote_end, slot_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    zygote_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            _forker(spec, runtime, cgroup, slot_end, zygote_pid)
        finally:
            os._exit(1)
    slot_end.close()
    return pid, zygote_end


def _forker(spec: SlotSpec, runtime: Runtime, cgroup: SlotCgroup, slot_end: socket.socket, zygote_pid: int) -> NoReturn:
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    # nothing of the zygote's (other slots' sockets, the front's channel) may stay open in a slot
    libc.close_all_except({slot_end.fileno(), *cgroup.fds()})
    try:
        libc.unshare(NAMESPACES)
        gate_r, gate_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
    except OSError as error:
        protocol.send_frame(slot_end, {"op": "failed", "error": f"sandbox step 'unshare' failed: {error}"})
        os._exit(1)
    if pid == 0:
        os.close(gate_w)
        _init(spec, runtime, cgroup, slot_end, zygote_pid, gate_r)
    protocol.send_frame(slot_end, {"op": "spawned", "pid": pid})
    os._exit(0)


def _init(spec: SlotSpec, runtime: Runtime, cgroup: SlotCgroup, sock: socket.socket, zygote_pid: int, gate_r: int) -> NoReturn:
    try:
        _become_init(spec.index, zygote_pid, gate_r)
        wake_fd = _watch_children()
        try:
            contain.build_root(spec.root, runtime.staging_dir)
        except SetupError as error:
            protocol.send_frame(sock, {"op": "failed", "error": str(error)})
            os._exit(1)
        protocol.send_frame(sock, {"op": "ready"})
        set_title(f"kiln: slot {spec.index} warm")
        _serve_one_job(spec, runtime, cgroup, sock, wake_fd)
    except BaseException as error:  # noqa: BLE001 - init must never fall back into the zygote's code
        os.write(2, f"kiln: slot {spec.index} failed: {error!r}\n".encode(errors="replace"))
        os._exit(70)
    os._exit(0)


def _become_init(index: int, zygote_pid: int, gate_r: int) -> None:
    os.read(gate_r, 1)  # end-of-file: the forker is exiting
    os.close(gate_r)
    # The forker's files close before its children are re-parented: wait for the zygote to be
    # our parent. getppid() says 0 from inside the new pid namespace; the host's /proc (still
    # mounted) shows the real parent.
    while _host_parent() != zygote_pid:
        if _host_parent() in (0, 1):
            os._exit(0)  # the zygote is gone
        time.sleep(0.0002)
    identity.set_parent_death_signal(signal.SIGKILL)
    if _host_parent() != zygote_pid:  # the zygote died before the signal was armed
        os._exit(0)
    # A session of the slot's own: kill(0, SIGCONT) from a task, allowed within a session
    # whatever the uid, would otherwise reach kiln's processes and the other slots.
    os.setsid()
    set_title(f"kiln: slot {index} warming")


def _host_parent() -> int:
    with open("/proc/self/stat", "rb") as stat:
        return int(stat.read().rsplit(b")", 1)[1].split()[1])


def _watch_children() -> int:
    """SIGCHLD wakes the supervisor's poll through a pipe (Python has no signalfd). Every other
    signal gets its default action, as tasks (forked from init) must start with; init keeps
    ignoring SIGPIPE and SIGXFSZ (a closed socket is an error, not a death) and the task resets
    those two itself."""
    libc.reset_signal_dispositions(keep={signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD})
    wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    return wake_r


def _serve_one_job(spec: SlotSpec, runtime: Runtime, cgroup: SlotCgroup, sock: socket.socket, wake_fd: int) -> None:
    try:
        frame = protocol.recv_frame(sock, job_frame_limit(runtime))
        if frame is None:
            return  # the front closed the slot unused (shutdown)
        work = job.parse(*frame, runtime)
    except (ProtocolError, job.JobError) as error:
        protocol.send_frame(sock, {"op": "error", "error": str(error)})
        return
    title = f"kiln: slot {spec.index} busy {work.workload.slug}"
    set_title(title)
    result = job.execute(work, runtime, spec.uid, cgroup, sock, wake_fd, title)
    if result is not None:
        protocol.send_frame(sock, *result)
