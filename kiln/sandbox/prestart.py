"""A prestarted task: a workspace's `prestart` command, started while its slot warms.

A slot warmed for one language mounts that language's workspace, then init spawns the task
with descriptor 3 the read end of the go pipe. The command does its start-up (an interpreter's
is most of a short run) and blocks reading descriptor 3. Per request, init writes the request's
files, then one byte: go. From then on the command does what the test command does.

init spawns it as it spawns any task (vfork + exec: no Python process is forked), with the
task's limits, filter and uid, but keeps root as its saved uid: it still has the request's
files to write. See contain.start_prestarted for the order.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass

from kiln.sandbox import libc
from kiln.sandbox.plan import TaskPlan

GO_FD = 3
_HIGH_FD = 10  # the spawn's sources sit above the descriptors it lays out (0-3)


@dataclass(frozen=True)
class PrestartedTask:
    pid: int
    go: int  # write end of the go pipe
    stdout: int  # read ends of the task's stdout and stderr pipes, non-blocking
    stderr: int


def spawn(plan: TaskPlan) -> PrestartedTask:
    """Spawn the prestart command with stdin /dev/null, stdout and stderr pipes, and the go
    pipe on descriptor 3 (the caller has given init the task's identity)."""
    go_r, go_w = os.pipe2(os.O_CLOEXEC)
    out_r, out_w = libc.output_pipe()
    err_r, err_w = libc.output_pipe()
    null = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
    sources = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _HIGH_FD) for fd in (null, out_w, err_w, go_r)]
    for fd in (null, out_w, err_w, go_r):
        os.close(fd)
    try:
        pid = libc.spawn(plan.argv, dict(plan.env), sources)
    except BaseException:
        for fd in (go_w, out_r, err_r):
            os.close(fd)
        raise
    finally:
        for fd in sources:
            os.close(fd)
    return PrestartedTask(pid, go_w, out_r, err_r)


def go(task: PrestartedTask) -> None:
    """Per request, once its files are in place."""
    try:
        os.write(task.go, b"g")
    finally:
        os.close(task.go)
