"""Runs against runs and against the service: nothing survives a run, concurrent runs cannot see
or touch each other, a task's kill() stays inside it, timeouts end whole process trees."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

from kilntest import alive, processes_of_uids, wait_until
from seclib import assert_exited

DEFAULT_UIDS = range(10001, 10001 + 4)  # tests/conftest.py's `server`: uid base 10001, 4 slots


def _json(body: dict):
    assert_exited(body)
    return json.loads(body["stdout"])


def _in_threads(*calls):
    """Run the calls at once; their results in order (exceptions re-raised)."""
    results: list = [None] * len(calls)

    def call(i, fn):
        try:
            results[i] = fn()
        except BaseException as error:  # noqa: BLE001
            results[i] = error

    threads = [threading.Thread(target=call, args=(i, fn)) for i, fn in enumerate(calls)]
    for t in threads:
        t.start()
        time.sleep(0.05)  # keep the order of submission
    for t in threads:
        t.join(60)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


# --- nothing crosses from one run to the next --------------------------------------------

LEAVE_TRACES = """
import ctypes, json, os, subprocess, sys
for path in ("/tmp/leftover", "/sandbox/leftover", "/sandbox/check/leftover", "/dev/shm/leftover"):
    with open(path, "w") as f:
        f.write("from run 1")
os.mkdir("/tmp/leftover.d")
# a System V shared memory segment with a fixed key
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(0x6b696c6e, 4096, 0o1666)  # IPC_CREAT | 0666
# background processes: a setsid'd one, and a double-forked daemon; neither holds stdout
bg = subprocess.Popen(["/bin/sleep", "120"], start_new_session=True, stdin=subprocess.DEVNULL,
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        devnull = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.write(w, str(os.getpid()).encode())
        os.execv("/bin/sleep", ["sleep", "121"])
    os._exit(0)
os.close(w)
daemon = int(os.read(r, 32))
print(json.dumps({"uid": os.getuid(), "shmid": shmid, "bg": bg.pid, "daemon": daemon}))
"""

LOOK_FOR_TRACES = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
found = {p: os.path.lexists(p) for p in ("/tmp/leftover", "/tmp/leftover.d", "/sandbox/leftover", "/sandbox/check/leftover", "/dev/shm/leftover")}
shm = libc.shmget(0x6b696c6e, 0, 0)
print(json.dumps({"uid": os.getuid(), "found": found, "shm": [shm, ctypes.get_errno()],
                  "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "me": os.getpid(),
                  "tmp": sorted(os.listdir("/tmp"))}))
"""


def test_files_ipc_and_background_processes_are_gone_in_the_next_run(kiln_server):
    uid_base = 24000
    srv = kiln_server(RUN_LANGS="python", RUN_CONCURRENCY="1", RUN_UID_BASE=str(uid_base))
    first = srv.run(lang_slug="python", solution_text=LEAVE_TRACES, timeout="20s")
    assert first.status_code == 200
    one = _json(first.json())
    assert one["uid"] == uid_base and one["shmid"] >= 0
    assert first.json()["stats"]["wall_ms"] < 10_000  # ended with its main process, not at 120 s
    # on the host: nothing of the run's uid is left (the sleepers were killed with the run)
    assert wait_until(lambda: processes_of_uids([uid_base]) == [], timeout=10), processes_of_uids([uid_base])
    second = srv.run(lang_slug="python", solution_text=LOOK_FOR_TRACES, timeout="20s")
    assert second.status_code == 200
    two = _json(second.json())
    assert two["uid"] == uid_base  # the replacement slot of the same index: same uid
    assert two["found"] == {p: False for p in two["found"]}
    assert two["shm"] == [-1, 2]  # ENOENT: a fresh IPC namespace
    assert two["pids"] == [two["me"]]
    assert two["tmp"] == []
    assert srv.client.get("/health").status_code == 200


# when each mount's filesystem was made: device numbers and namespace inodes are reused
MOUNTS_SEEN = """
import json, os
print(json.dumps({path: os.stat(path).st_ctime_ns for path in ("/etc/passwd", "/dev/null", "/sys", "/tmp", "/sandbox")}))
"""


def test_slots_of_an_index_share_only_the_read_only_part_of_the_root(kiln_server):
    """The read-only part of the root is built once per slot index (its root image, a mount namespace),
    each slot a private copy of it with its own writable mounts."""
    srv = kiln_server(RUN_LANGS="python", RUN_CONCURRENCY="1")
    seen = [_json(srv.run(lang_slug="python", solution_text=MOUNTS_SEEN).json()) for _ in range(3)]
    assert len({(s["/etc/passwd"], s["/dev/null"], s["/sys"]) for s in seen}) == 1, seen
    for own in ("/tmp", "/sandbox"):
        assert len({s[own] for s in seen}) == 3, (own, seen)


# --- concurrent runs ---------------------------------------------------------------------

CONCURRENT = """
import json, os, time
start = time.time()
me = os.getpid()
with open(f"/tmp/mine-{os.getuid()}", "w") as f:
    f.write("x")
with open(f"/sandbox/mine-{os.getuid()}", "w") as f:
    f.write("x")
time.sleep(SLEEP)
reachable = []
for pid in range(1, 4096):          # signal 0: which pids exist for this process at all
    try:
        os.kill(pid, 0)
        reachable.append(pid)
    except ProcessLookupError:
        pass
    except PermissionError:
        reachable.append(-pid)       # exists but not ours
print(json.dumps({"uid": os.getuid(), "me": me, "start": start, "end": time.time(),
                  "proc": sorted(p for p in os.listdir("/proc") if p.isdigit()),
                  "tmp": sorted(os.listdir("/tmp")), "sandbox": sorted(f for f in os.listdir("/sandbox") if f.startswith("mine-")),
                  "reachable": reachable, "hostname": os.uname().nodename}))
"""


def test_concurrent_runs_have_different_uids_and_cannot_see_each_other(server):
    def one():
        response = server.run(solution_text="SLEEP = 1.5\n" + CONCURRENT, timeout="20s")
        assert response.status_code == 200
        return _json(response.json())

    a, b = _in_threads(one, one)
    assert a["start"] < b["end"] and b["start"] < a["end"], "the two runs did not overlap"
    assert a["uid"] != b["uid"]
    for seen in (a, b):
        assert seen["uid"] in DEFAULT_UIDS
        assert seen["proc"] == [str(seen["me"])]
        assert seen["tmp"] == [f"mine-{seen['uid']}"]
        assert seen["sandbox"] == [f"mine-{seen['uid']}"]
        # only itself, and its namespace's init, which exists but is root's: out of its reach
        # (and hidden from its /proc); nothing of the other run
        assert seen["reachable"] == [-1, seen["me"]]
        assert seen["hostname"] == "kiln"
    assert server.client.get("/health").status_code == 200


# --- kill() from a task -------------------------------------------------------------------

VICTIM = """
import signal, sys, time
got = []
for sig in (signal.SIGCONT, signal.SIGURG, signal.SIGWINCH, signal.SIGUSR1, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, lambda s, f: got.append(s))
print("victim up", flush=True)
deadline = time.monotonic() + 2.0
while time.monotonic() < deadline:
    time.sleep(0.05)
print("victim done", sorted(set(got)), flush=True)
"""

KILL_ALL = """
import errno, os, signal, time
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
time.sleep(0.2)
def attempt(label, pid, sig):
    try:
        os.kill(pid, sig)
        print(label, "ok", flush=True)
    except OSError as e:
        print(label, errno.errorcode[e.errno], flush=True)
attempt("kill-1", -1, signal.SIGKILL)
_, status = os.waitpid(child, 0)
print("child", os.WTERMSIG(status) if os.WIFSIGNALED(status) else "exited", flush=True)
attempt("kill1", 1, signal.SIGKILL)
for pid in HOST_PIDS:
    attempt("host-pid", pid, signal.SIGKILL)
print("attacker survives", flush=True)
"""


def test_kill_minus_one_harms_nothing_outside_the_task(server):
    pids = server.pids()
    slots_before = {slot.pid for slot in server.slots()}
    host_pids = [pids["front"], pids["zygote"], os.getpid(), *slots_before]

    def victim():
        return server.run(solution_text=VICTIM, timeout="20s")

    def attacker():
        time.sleep(0.4)  # the victim is running
        return server.run(solution_text=f"HOST_PIDS = {host_pids!r}\n" + KILL_ALL, timeout="20s")

    victim_response, attacker_response = _in_threads(victim, attacker)
    assert attacker_response.status_code == 200
    body = attacker_response.json()
    assert_exited(body)
    lines = body["stdout"].splitlines()
    # kill(-1) reached the attacker's own child only; init (PID 1 here) is out of reach: in a
    # plain slot it shares the run's uid, accepts the call and the kernel drops it (a namespace's
    # init gets only the signals it handles, and it handles none); in a prestarted slot it stays
    # root and the call is refused. The host's pids do not exist in the namespace.
    assert lines[2] in ("kill1 ok", "kill1 EPERM")
    assert lines[:2] + lines[3:] == ["kill-1 ok", "child 9"] + ["host-pid ESRCH"] * len(host_pids) + ["attacker survives"]
    assert victim_response.status_code == 200
    victim_body = victim_response.json()
    assert_exited(victim_body)
    assert victim_body["stdout"] == "victim up\nvictim done []\n"
    assert alive(pids["front"]) and alive(pids["zygote"])
    assert server.client.get("/health").status_code == 200
    follow_up = server.run(solution_text="print('ok')\n").json()
    assert follow_up["stdout"] == "ok\n"


SIGNAL_THE_GROUP = """
import errno, os, signal
print("pgrp", os.getpgrp(), "sid", os.getsid(0), flush=True)
for name in ("SIGCONT", "SIGURG", "SIGWINCH", "SIGUSR1", "SIGHUP"):
    try:
        os.kill(0, getattr(signal, name))      # "my process group"
    except OSError as e:
        print(name, errno.errorcode[e.errno], flush=True)
    try:
        os.kill(-1, getattr(signal, name))     # "everything I may signal"
    except OSError as e:
        pass
print("sent", flush=True)
"""


def test_a_run_cannot_signal_another_run_or_the_service(server):
    """kill(0, sig) reaches the caller's process group. The task must own its session and
    group (setsid): if it inherits the service's, its pgrp/sid read 0 (a group led from outside
    its pid namespace) and SIGCONT, allowed within a session whatever the uid, reaches the
    kiln processes and every other run's processes."""

    def victim():
        return server.run(solution_text=VICTIM, timeout="20s")

    def attacker():
        time.sleep(0.4)
        return server.run(
            solution_text="import signal\nfor s in (signal.SIGURG, signal.SIGWINCH, signal.SIGUSR1, signal.SIGHUP):\n"
            "    signal.signal(s, signal.SIG_IGN)\n" + SIGNAL_THE_GROUP,
            timeout="20s",
        )

    received: list[int] = []
    previous = signal.signal(signal.SIGCONT, lambda sig, _frame: received.append(sig))
    try:
        victim_response, attacker_response = _in_threads(victim, attacker)
    finally:
        signal.signal(signal.SIGCONT, previous)
    attacker_body = attacker_response.json()
    assert_exited(attacker_body)
    victim_body = victim_response.json()
    assert_exited(victim_body)
    assert victim_body["stdout"] == "victim up\nvictim done []\n", "a signal from another run reached the victim"
    assert received == [], "a signal from a run reached the test process (kiln's own process group)"
    pgrp_line = attacker_body["stdout"].splitlines()[0].split()
    assert pgrp_line[1] != "0" and pgrp_line[3] != "0", f"the task's process group/session is the service's: {pgrp_line}"
    assert server.client.get("/health").status_code == 200


# --- timeouts end the whole tree ----------------------------------------------------------

TREE = """
import os, subprocess, sys, time
print("uid", os.getuid(), flush=True)
# children that keep stdout open, in every shape: plain, setsid'd, double-forked, ignoring TERM/HUP
subprocess.Popen([sys.executable, "-c", "import signal, time\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\\ntime.sleep(120)"])
subprocess.Popen(["/bin/sleep", "121"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "122"])
    os._exit(0)
print("tree started", flush=True)
MAIN
"""


def _uid_of(body: dict) -> int:
    return int(body["stdout"].splitlines()[0].split()[1])


def test_timeout_kills_the_whole_tree_including_stdout_holders(server):
    body = server.run(solution_text=TREE.replace("MAIN", "time.sleep(120)"), timeout="1s").json()
    assert body["stats"]["outcome"] == "timed_out"
    assert body["exit_code"] is None
    assert body["stdout"].endswith("tree started\n")
    assert body["stats"]["wall_ms"] < 10_000  # not waiting for any of the 120 s sleepers
    uid = _uid_of(body)
    assert wait_until(lambda: processes_of_uids([uid]) == [], timeout=10), processes_of_uids([uid])
    assert server.client.get("/health").status_code == 200


def test_main_process_exit_ends_the_run_even_when_daemons_hold_stdout(server):
    body = server.run(solution_text=TREE.replace("MAIN", "print('main exits', flush=True)"), timeout="20s").json()
    assert_exited(body)
    assert body["stdout"].endswith("tree started\nmain exits\n")
    assert body["stats"]["wall_ms"] < 10_000  # ended with the main process, not at the timeout
    uid = _uid_of(body)
    assert wait_until(lambda: processes_of_uids([uid]) == [], timeout=10), processes_of_uids([uid])
    assert server.client.get("/health").status_code == 200


def test_background_processes_end_with_the_main_process(server):
    """A child still writing to stdout after the main process exits is killed then: its later
    line never reaches the answer (the answer's drain would read it within its grace)."""
    late = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    time.sleep(1.0)\n"
        "    print('late', flush=True)\n"
        "    os._exit(0)\n"
        "print('main exits', flush=True)\n"
    )
    body = server.run(solution_text=late, timeout="20s").json()
    assert_exited(body)
    assert body["stdout"] == "main exits\n", body


def test_timeout_kills_a_c_fork_tree_that_ignores_signals(run_c, c_server):
    body = run_c(
        r"""
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    printf("uid %d\n", getuid());
    fflush(stdout);
    for (int sig = 1; sig < 32; sig++) signal(sig, SIG_IGN);
    for (int i = 0; i < 5; i++) {
        if (fork() == 0) {
            setsid();
            if (fork() == 0) { for (;;) pause(); }
            for (;;) pause();
        }
    }
    for (;;) pause();
}
""",
        timeout="4s",  # the compile's time counts: an emulated guest's gcc takes a second or more
    )
    assert body["stats"]["outcome"] == "timed_out"
    assert body["exit_code"] is None
    assert body["stats"]["wall_ms"] < 10_000
    uid = _uid_of(body)
    assert wait_until(lambda: processes_of_uids([uid]) == [], timeout=10), processes_of_uids([uid])


def test_limits_of_another_process_cannot_be_changed(server):
    """prlimit on any pid but 0 is refused (the supervisor, PID 1, is root's anyway: see
    test_supervisor.py), so a job changes only its own limits."""
    body = server.run(
        solution_text=(
            "import resource, errno\n"
            "for pid in (1, 0):\n"
            "    try:\n"
            "        resource.prlimit(pid, resource.RLIMIT_NOFILE, (10, 10))\n"
            "        print(pid, 'changed')\n"
            "    except OSError as e:\n"
            "        print(pid, errno.errorcode[e.errno])\n"
        )
    ).json()
    assert body["stdout"] == "1 EPERM\n0 changed\n"
