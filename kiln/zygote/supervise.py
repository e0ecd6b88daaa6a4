"""Supervising a running task from its slot's init: its output drained (each stream capped),
its deadline kept, its processes reaped, a cancel noticed; then what became of it, by
DESIGN.md's precedence of outcomes.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import time

from kiln.sandbox.cgroups import CgroupStats
from kiln.zygote.title import set_title

READ_CHUNK = 65536
POLL_IN = select.POLLIN | select.POLLHUP | select.POLLERR
TITLE_EVERY_S = 1.0  # `ps` shows a busy slot's elapsed time, refreshed this often
# Orphans of the run become init's children; their zombies count against the pids limit until
# reaped. init has no SIGCHLD handler (the run's processes, of its uid, could flood it), so it
# reaps this often, and as soon as the task itself exits (its pidfd).
REAP_EVERY_S = 0.1
# After the task is gone (or killed), its pipes reach end-of-file as soon as the last process of
# the namespace dies; this only bounds a kernel that is slow to tear them down.
DRAIN_GRACE_S = 2.0


def kill_all() -> None:
    """From PID 1 of the namespace: every process of the run, and nothing else."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Supervisor:
    """Drains stdout/stderr (each capped), enforces the deadline, reaps, and notices a cancel."""

    def __init__(self, task_pid: int, out_fd: int, err_fd: int, cancel_sock, output_max: int):
        self.task_pid = task_pid
        self.task_fd = os.pidfd_open(task_pid)  # a zombie still has one: no race with its exit
        self.output_max = output_max
        self.streams = {out_fd: bytearray(), err_fd: bytearray()}
        self.out_fd, self.err_fd = out_fd, err_fd
        self.cancel_sock = cancel_sock
        self.status: int | None = None
        self.rusage = None
        self.ended_at = 0.0
        self.timed_out = self.overflow = self.cancelled = False
        self.poller = select.poll()
        for fd in (out_fd, err_fd, cancel_sock.fileno(), self.task_fd):
            self.poller.register(fd, POLL_IN)
        self.open_fds = {out_fd, err_fd}

    def run(self, deadline: float, title: str) -> None:
        drain_until = None
        started = retitled = time.monotonic()
        while self.open_fds or self.status is None:
            now = time.monotonic()
            if now - retitled >= TITLE_EVERY_S:
                set_title(f"{title} {now - started:.1f}s")
                retitled = now
            if drain_until is None and (self.status is not None or self.timed_out or self.overflow):
                drain_until = now + DRAIN_GRACE_S
            limit = drain_until if drain_until is not None else deadline
            if now >= limit:
                if drain_until is not None:
                    break  # a process the kernel has not finished killing still holds a pipe
                self.timed_out = True
                kill_all()
                continue
            wait_s = min(limit - now, REAP_EVERY_S)
            events = self.poller.poll(max(0, wait_s * 1000) + 1)
            self._reap()
            for fd, _event in events:
                if fd == self.task_fd:
                    self.poller.unregister(fd)  # reaped above; stays readable
                elif fd == self.cancel_sock.fileno():
                    self.cancelled = True
                    kill_all()
                    return
                else:
                    self._read(fd)

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, READ_CHUNK)
        except OSError as error:
            if error.errno == errno.EAGAIN:
                return
            data = b""
        if not data:
            self._close(fd)
        else:
            buffer = self.streams[fd]
            buffer += data
            if len(buffer) > self.output_max:
                del buffer[self.output_max :]
                self.overflow = True
                kill_all()
                for stream in (self.out_fd, self.err_fd):
                    self._close(stream)

    def _close(self, fd: int) -> None:
        if fd in self.open_fds:
            self.open_fds.discard(fd)
            self.poller.unregister(fd)
            os.close(fd)

    def _reap(self) -> None:
        while True:
            try:
                pid, status, rusage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.task_pid:
                self.status, self.rusage, self.ended_at = status, rusage, time.monotonic()
                kill_all()  # background processes end with the test command


def outcome(sup: Supervisor, cgroup: CgroupStats, cpu_limit_ms: int) -> tuple[str, int | None, int | None]:
    """(outcome, exit_code, signal), by DESIGN.md's precedence: timed_out > out_of_memory >
    policy_violation > pids_limit > signaled > exited."""
    status = sup.status
    killed_by = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
    exit_code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    if killed_by is not None:
        exit_code = 128 + killed_by
    rlimit_cpu = task_cpu_ms(sup, cgroup) >= cpu_limit_ms - 50 and (killed_by in (signal.SIGXCPU, signal.SIGKILL) or exit_code in (128 + signal.SIGXCPU, 128 + signal.SIGKILL))
    if sup.timed_out or status is None or rlimit_cpu:
        return "timed_out", None, killed_by
    if cgroup.oom_kills:
        return "out_of_memory", exit_code, killed_by
    if killed_by == signal.SIGSYS or exit_code == 128 + signal.SIGSYS:  # 159: a seccomp kill under `sh -c`
        return "policy_violation", exit_code, int(signal.SIGSYS)
    if cgroup.pids_limit_hits:
        return "pids_limit", exit_code, killed_by
    if killed_by is not None:
        return "signaled", exit_code, killed_by
    return "exited", exit_code, None


def task_cpu_ms(sup: Supervisor, cgroup: CgroupStats) -> float:
    """The cgroup's count covers every process of the run; rusage only those the task waited for."""
    if cgroup.cpu_usage_ms is not None:
        return cgroup.cpu_usage_ms
    return 0.0 if sup.rusage is None else (sup.rusage.ru_utime + sup.rusage.ru_stime) * 1000


def memory_peak(sup: Supervisor, cgroup: CgroupStats) -> int:
    if cgroup.memory_peak_bytes is not None:
        return cgroup.memory_peak_bytes
    return sup.rusage.ru_maxrss * 1024 if sup.rusage else 0
