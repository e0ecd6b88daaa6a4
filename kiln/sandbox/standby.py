"""A plain slot's standby shell: the task's /bin/sh, started while the slot warms, waiting for
the number of the language whose test command it is to run (plan.standby_argv).

A plain slot cannot know its request's language while warming, but the process that starts
every test command is the same: /bin/sh, as the slot's uid, without capabilities, with
no_new_privs and the seccomp filter, in the slot's cgroup. Starting it while warming takes the
filter's load, the identity change and a spawn off the request's path.

The filter can only be loaded by the thread it confines, and init still has mounts to make:
a thread of init takes the task's identity and filter (for itself alone: raw syscalls, no
SECCOMP_FILTER_FLAG_TSYNC), spawns the shell and ends. init's main thread stays root and
unfiltered until the request's files are written. Per request, init then becomes the task's
uid, sets the shell's limits (prlimit) and writes the language's number: go.
"""

from __future__ import annotations

import os
import resource
import threading

from kiln.sandbox import identity, prestart, seccomp
from kiln.sandbox.plan import TaskPlan
from kiln.sandbox.prestart import PrestartedTask


def spawn(plan: TaskPlan, seccomp_filter: bytes | None) -> PrestartedTask:
    """Start the standby shell (plan.argv) from a thread that becomes the task first. The
    caller has put init in the slot's cgroup. The shell gets no rlimits here: set_limits
    gives it the request's, before go."""
    outcome: list = []

    def take_identity_and_spawn() -> None:
        try:
            identity.become(plan.uid, plan.gid)  # raw syscalls: this thread only
            identity.clear_capabilities()  # capset: this thread's inheritable set
            identity.set_no_new_privs()  # a per-thread flag
            if seccomp_filter is not None:
                seccomp.load(seccomp_filter)  # this thread only
            outcome.append(prestart.spawn(plan))
        except BaseException as error:  # noqa: BLE001 - handed to the main thread
            outcome.append(error)

    thread = threading.Thread(target=take_identity_and_spawn, name="standby")
    thread.start()
    thread.join()
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def set_limits(task: PrestartedTask, plan: TaskPlan) -> None:
    """The request's rlimits on the waiting shell, from init once it has become the task's
    uid and gid: prlimit on another process needs those (or CAP_SYS_RESOURCE, which root
    may lack)."""
    for limit, value in plan.rlimits:
        resource.prlimit(task.pid, limit, (value, value))


def go(task: PrestartedTask, number: int) -> None:
    """Run language `number`'s test command (its workspace mounted, the files written)."""
    try:
        os.write(task.go, b"%d\n" % number)
    finally:
        os.close(task.go)


def discard(task: PrestartedTask) -> None:
    """Kill an unused standby shell (a request it cannot serve) and reap it."""
    try:
        os.kill(task.pid, 9)
        os.waitpid(task.pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    for fd in (task.go, task.stdout, task.stderr):
        try:
            os.close(fd)
        except OSError:
            pass
