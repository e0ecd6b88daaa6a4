"""Nothing a run does can delay or disarm the enforcement of its timeout.

The slot's init, PID 1 of the run's namespace, is the only enforcer of the wall clock. It used to
supervise a plain slot's run as the task's own uid: the task then rescheduled it (SCHED_IDLE),
pinned it to one CPU and kept that CPU busy with spinners, and its run outlived its timeout by
seconds and answered `exited`. These probes are that attack and its parts, from every kind of
slot: plain (a request with stdin, or a compiled language), prestarted and forked (python
without stdin), and C. Where a test stops init itself (SIGSTOP from the host, as root), it
stands in for an init that could not run: what kiln does about that is checked, not the attack.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from kilntest import processes_of_uids, wait_until
from seclib import c_program

UID_BASE = 24000

# Every call a process may make on another of its own uid, aimed at PID 1 (init): each must fail.
REACH_INIT_PY = r"""
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, call, *args):
    try:
        call(*args)
        print(name, "ok")
    except OSError as error:
        print(name, error.errno)
def ioprio_set(pid):  # IOPRIO_WHO_PROCESS, class idle
    if libc.syscall(251, 1, pid, 3 << 13) != 0:
        raise OSError(ctypes.get_errno(), "ioprio_set")
attempt("sched_setscheduler", os.sched_setscheduler, 1, os.SCHED_IDLE, os.sched_param(0))
attempt("sched_setaffinity", os.sched_setaffinity, 1, {0})
attempt("setpriority", os.setpriority, os.PRIO_PROCESS, 1, 19)
attempt("ioprio_set", ioprio_set, 1)
attempt("prlimit", __import__("resource").prlimit, 1, __import__("resource").RLIMIT_CPU, (1, 1))
attempt("kill", os.kill, 1, signal.SIGSTOP)
"""
REACH_INIT_EXPECTED = "sched_setscheduler 1\nsched_setaffinity 1\nsetpriority 1\nioprio_set 1\nprlimit 1\nkill 1\n"  # EPERM each

# The attack as it was seen: init idle-scheduled and pinned to the CPU that 40 spinners keep busy,
# while the program itself works on past its timeout.
ESCAPE_PY = r"""
import os, time
for call, args in ((os.sched_setscheduler, (1, os.SCHED_IDLE, os.sched_param(0))), (os.sched_setaffinity, (1, {0}))):
    try:
        call(*args)
    except OSError:
        pass
for _ in range(40):
    if os.fork() == 0:
        try:
            os.sched_setaffinity(0, {0})
        except OSError:
            pass
        while True:
            pass
time.sleep(3)
print("outlived its timeout", flush=True)
"""


@pytest.fixture(scope="module")
def srv(kiln_server):
    return kiln_server(RUN_LANGS="python,cpp", RUN_CONCURRENCY="3", RUN_UID_BASE=str(UID_BASE))


def _run(srv, source: str, **fields) -> dict:
    response = srv.run(lang_slug="python", solution_text=source, **fields)
    assert response.status_code == 200, response.text
    return response.json()


def _no_task_left() -> bool:
    return processes_of_uids(range(UID_BASE, UID_BASE + 3)) == []


@pytest.mark.parametrize("kind", ["plain (stdin)", "prestarted"])
def test_init_is_out_of_the_tasks_reach(srv, kind):
    fields = {"stdin": "x"} if kind == "plain (stdin)" else {}
    for _ in range(2):  # python's first run may take a plain slot: the second is prestarted
        body = _run(srv, REACH_INIT_PY, **fields)
        assert body["stdout"] == REACH_INIT_EXPECTED, body


def test_init_is_out_of_a_c_tasks_reach(run_c):
    probe = c_program(
        """
    struct sched_param none = {0};
    cpu_set_t one; CPU_ZERO(&one); CPU_SET(0, &one);
    ATTEMPT("sched_setscheduler", sched_setscheduler(1, SCHED_IDLE, &none));
    ATTEMPT("sched_setaffinity", sched_setaffinity(1, sizeof one, &one));
    ATTEMPT("setpriority", setpriority(PRIO_PROCESS, 1, 19));
    ATTEMPT("ioprio_set", syscall(SYS_ioprio_set, 1, 1, 3 << 13));
    ATTEMPT("kill", kill(1, SIGSTOP));
""",
        includes='#define ATTEMPT(name, call) do { errno = 0; long r = (call); int e = errno; say("%s %ld %s\\n", name, r, ename(e)); } while (0)',
    )
    body = run_c(probe)
    assert body["stdout"] == (
        "sched_setscheduler -1 EPERM\nsched_setaffinity -1 EPERM\nsetpriority -1 EPERM\nioprio_set -1 EPERM\nkill -1 EPERM\n"
    ), body


@pytest.mark.parametrize("kind", ["plain (stdin)", "prestarted"])
def test_a_run_that_starves_its_supervisor_still_ends_at_its_timeout(srv, kind):
    fields = {"stdin": "x"} if kind == "plain (stdin)" else {}
    body = _run(srv, ESCAPE_PY, timeout="1s", **fields)
    assert body["stats"]["outcome"] == "timed_out", body
    assert body["exit_code"] is None and "outlived" not in body["stdout"], body
    assert body["stats"]["wall_ms"] < 2000, body  # enforced at 1 s, not when the spinners allowed
    assert wait_until(_no_task_left, timeout=10), processes_of_uids(range(UID_BASE, UID_BASE + 3))


def _busy_init(srv) -> int:
    """The pid of the one slot init of `srv` running a job."""
    assert wait_until(lambda: len(srv.busy_slots()) == 1, timeout=20), srv.slots()
    return srv.busy_slots()[0].pid


def test_a_task_reaped_after_its_deadline_timed_out_whatever_it_printed(kiln_server):
    """Init stopped from the host while the task runs (as a starved init would be): the task
    ends on its own after the deadline, and init, running again, finds it ended and its output
    whole. That is still a timeout: nothing is reported as exited after its deadline."""
    srv = kiln_server(RUN_LANGS="python", RUN_CONCURRENCY="1", RUN_UID_BASE=str(UID_BASE + 10))
    results = {}
    runner = threading.Thread(target=lambda: results.update(r=srv.run(solution_text="import time\ntime.sleep(1.2)\nprint('done')\n", timeout="1s", stdin="")))
    runner.start()
    init = _busy_init(srv)
    os.kill(init, signal.SIGSTOP)
    time.sleep(2.0)
    os.kill(init, signal.SIGCONT)
    runner.join(30)
    body = results["r"].json()
    assert body["stats"]["outcome"] == "timed_out" and body["exit_code"] is None, body


def test_a_slot_that_overstays_is_killed_from_outside_before_its_capacity_is_free(kiln_server):
    """An init that never answers (stopped for good): the front gives up on it after the run's
    timeout and a grace, answers 500, and has the zygote kill the slot's whole cgroup and its
    init; only then does the slot's capacity serve another run."""
    uid = UID_BASE + 20
    srv = kiln_server(RUN_LANGS="python", RUN_CONCURRENCY="1", RUN_UID_BASE=str(uid), RUN_QUEUE_WAIT="30s")
    results = {}
    runner = threading.Thread(target=lambda: results.update(r=srv.run(solution_text="import time\nprint('up', flush=True)\ntime.sleep(60)\n", timeout="1s", stdin="")))
    runner.start()
    init = _busy_init(srv)
    assert wait_until(lambda: processes_of_uids([uid]) != [], timeout=10)
    os.kill(init, signal.SIGSTOP)
    runner.join(60)
    assert results["r"].status_code == 500 and results["r"].json() == {"error": "internal"}
    # its init, stopped, kills nothing: what ends the run's processes is the kill from outside
    assert wait_until(lambda: processes_of_uids([uid]) == [], timeout=10), processes_of_uids([uid])
    assert wait_until(lambda: srv.logged("killing a slot that outstayed its run"), timeout=5)
    assert srv.run(solution_text="print('next')").json()["stdout"] == "next\n"
