"""Plain slots' standby shell: the task's /bin/sh started while the slot warms, told per request
which language to run. Through the real API and sandbox, against the same requests served by
spawning the test command (RUN_PRESTART=false): the same answers, the same confinement."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import psutil
import pytest

from kilntest import Server, wait_until

# what a task can see of itself; left out: the slot's uid (it differs between slots) and the
# task's pid (3 for a standby shell: the thread of init that spawned it had 2)
PROBE = r"""
import os, resource, sys
print("ids", os.getuid() == os.geteuid(), os.getgid() == os.getegid(), os.getgroups())
print("cwd", os.getcwd())
print("env", sorted(os.environ.items()))
for name in ("CPU", "NOFILE", "NPROC", "CORE", "FSIZE", "AS", "STACK", "DATA", "MEMLOCK"):
    print(name, resource.getrlimit(getattr(resource, "RLIMIT_" + name)))
for line in open("/proc/self/status"):
    if line.split(":")[0] in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters", "Groups", "PPid"):
        print(line.strip())
print("fds", sorted(os.listdir("/proc/self/fd")))
print("stdin", os.fstat(0).st_mode, sys.stdin.read())
print("argv", sys.argv, sys.executable)
print("processes", len([p for p in os.listdir("/proc") if p.isdigit()]))  # the task alone
"""


def start(env: dict) -> Server:
    return Server({"RUN_CONCURRENCY": "2", "RUN_LANGS": "python,js,ruby", **env}).wait_ready()


@pytest.fixture(scope="module")
def standby():
    # ruby has no prestart target: no language prestarts, every slot is plain with a standby shell
    server = start({"RUN_PRESTART": "ruby"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def spawning():
    server = start({"RUN_PRESTART": "false"})
    yield server
    server.stop()


def run_logged(server: Server, **fields) -> tuple[dict, dict]:
    request_id = uuid.uuid4().hex
    answer = server.client.post("/run", json=fields, headers={"X-Request-Id": request_id})
    assert answer.status_code == 200, answer.text
    logged = lambda: [r for r in server.logged("request") if r.get("request_id") == request_id]  # noqa: E731
    assert wait_until(logged, timeout=5)
    return answer.json(), logged()[0]


def both(standby: Server, spawning: Server, **fields) -> tuple[dict, dict]:
    by_standby, record = run_logged(standby, **fields)
    assert record["start"] == "standby", record
    by_spawn, record = run_logged(spawning, **fields)
    assert record["start"] == "spawned", record
    return by_standby, by_spawn


def comparable(body: dict) -> dict:
    return {"exit_code": body["exit_code"], "stdout": body["stdout"], "stderr": body["stderr"], "outcome": body["stats"]["outcome"], "signal": body["stats"]["signal"]}


def test_the_task_sees_what_a_spawned_task_sees(standby, spawning):
    by_standby, by_spawn = both(standby, spawning, lang_slug="python", solution_text=PROBE, timeout="7s")
    assert by_standby["exit_code"] == 0, by_standby
    assert comparable(by_standby) == comparable(by_spawn)
    assert "Seccomp:\t2" in by_standby["stdout"] and "NoNewPrivs:\t1" in by_standby["stdout"]
    assert "CapEff:\t0000000000000000" in by_standby["stdout"] and "CapBnd:\t0000000000000000" in by_standby["stdout"]


def test_each_language_runs_its_own_command(standby, spawning):
    for slug, solution in (("js", "console.log(process.argv.length, process.cwd());\n"), ("ruby", "puts Dir.pwd, $0\n"), ("python", "print(2 + 3)\n")):
        by_standby, by_spawn = both(standby, spawning, lang_slug=slug, solution_text=solution)
        assert by_standby["exit_code"] == 0 and by_standby["stdout"], by_standby
        assert comparable(by_standby) == comparable(by_spawn)


def test_errors_exit_codes_and_signals_are_those_of_a_spawned_task(standby, spawning):
    for solution in ("import sys\nprint('out')\nsys.exit(3)\n", "raise ValueError('boom')\n", "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n", "import os\nos.fork()\n"):
        by_standby, by_spawn = both(standby, spawning, lang_slug="python", solution_text=solution)
        assert comparable(by_standby) == comparable(by_spawn), solution


def test_the_request_timeout_and_cpu_limit_hold(standby):
    body, record = run_logged(standby, lang_slug="python", solution_text="while True:\n    pass\n", timeout="1s")
    assert record["start"] == "standby"
    assert body["stats"]["outcome"] == "timed_out"
    body, _ = run_logged(standby, lang_slug="python", solution_text="import resource\nprint(resource.getrlimit(resource.RLIMIT_CPU))\n", timeout="2s")
    assert body["stdout"] == f"({2 * len(os.sched_getaffinity(0)) + 1}, {2 * len(os.sched_getaffinity(0)) + 1})\n"


def test_cpu_time_counts_from_go(standby):
    body, record = run_logged(standby, lang_slug="python", solution_text="pass\n")
    assert record["start"] == "standby"
    assert 0 < body["stats"]["cpu_ms"] < 1000


def test_a_request_with_stdin_is_spawned_and_reads_it(standby):
    body, record = run_logged(standby, lang_slug="python", solution_text="import sys\nprint(sys.stdin.read().upper())\n", stdin="hello")
    assert record["start"] == "spawned"
    assert body["stdout"] == "HELLO\n"


def standby_shells(server: Server) -> list[psutil.Process]:
    shells = []
    for init in psutil.Process(server.pids()["zygote"]).children():
        try:
            title = init.cmdline()  # empty while it is a zombie
            if title and " warm" in title[0]:
                shells += init.children()
        except psutil.NoSuchProcess:
            pass
    return shells


def test_a_warm_slots_shell_is_confined_before_any_request(standby):
    assert wait_until(lambda: len(standby_shells(standby)) == 2, timeout=10)
    shells = standby_shells(standby)
    for shell in shells:
        status = dict(line.split(":", 1) for line in Path(f"/proc/{shell.pid}/status").read_text().splitlines())
        uid = int(status["Uid"].split()[0])
        assert uid >= 10001 and status["Uid"].split() == [str(uid)] * 4 and status["Gid"].split() == [str(uid)] * 4
        assert status["CapEff"].strip() == status["CapPrm"].strip() == status["CapInh"].strip() == "0000000000000000"
        assert status["NoNewPrivs"].strip() == "1" and status["Seccomp"].strip() == "2"
        assert shell.cmdline()[:3] == ["/bin/sh", "-e", "-c"]
        targets = {int(fd): os.readlink(f"/proc/{shell.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{shell.pid}/fd")}
        # 0-3, and dash's own copy of descriptor 0 (/dev/null) while `read <&3` has the go pipe there
        assert set(targets) <= {0, 1, 2, 3, 10} and {0, 1, 2, 3} <= set(targets), targets
        assert targets[3].startswith("pipe:") and {targets[0], targets.get(10, "/dev/null")} <= {"/dev/null", targets[3]}, targets


def test_a_dead_standby_shell_gives_way_to_a_spawned_task(standby):
    assert wait_until(lambda: len(standby_shells(standby)) == 2, timeout=10)
    shells = standby_shells(standby)
    for shell in shells:
        os.kill(shell.pid, signal.SIGKILL)
    time.sleep(0.1)
    body, record = run_logged(standby, lang_slug="python", solution_text="print('still served')\n")
    assert record["start"] == "spawned"
    assert body["stdout"] == "still served\n"


def test_without_prestart_no_standby_shell_waits(spawning):
    time.sleep(0.2)
    assert standby_shells(spawning) == []
