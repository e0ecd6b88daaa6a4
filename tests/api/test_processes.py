"""The process model: warm slots in their own namespaces, privilege split, a clean stop. (A front
or zygote killed: tests/faults.)"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from kilntest import KILN, ROOTLESS, alive, descendants, free_port, process, wait_until

NAMESPACES = ("mnt", "pid", "ipc", "uts", "net")  # and the task's own cgroup namespace (tests/security/test_filesystem.py)


def test_slots_are_warm_in_their_own_namespaces_before_any_request(start_server):
    srv = start_server(RUN_CONCURRENCY="3")
    zygote = srv.pids()["zygote"]
    assert [slot.state for slot in srv.slots()] == ["warm"] * 3, srv.slots()
    slots = [slot.pid for slot in srv.slots()]
    for pid in slots:
        for ns in NAMESPACES:
            assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/{zygote}/ns/{ns}"), ns
        assert process(pid).nspid[-1] == 1  # the slot's init is PID 1 of its pid namespace
        # ... but the zygote's cgroup namespace: init creates the task's process in the slot's
        # cgroup, which v2's nsdelegate allows only from where both cgroups are in sight
        assert os.readlink(f"/proc/{pid}/ns/cgroup") == os.readlink(f"/proc/{zygote}/ns/cgroup")
    # every slot has its own namespaces
    assert len({os.readlink(f"/proc/{pid}/ns/mnt") for pid in slots}) == 3


def status_field(pid: int, key: str) -> str:
    return [line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith(f"{key}:")][0].split()[1]


def test_a_warm_slot_s_init_handles_no_signal_and_has_an_empty_bounding_set(start_server):
    """The zygote handles SIGCHLD, SIGTERM and SIGINT and ignores SIGHUP; a slot's init
    handles nothing (as PID 1, a signal from the run's processes then never reaches it) and
    ignores only SIGPIPE and SIGXFSZ. Its bounding set, empty, it has from the zygote."""
    srv = start_server(RUN_CONCURRENCY="2")
    zygote = srv.pids()["zygote"]
    assert int(status_field(zygote, "SigCgt"), 16) & (1 << signal.SIGTERM - 1)  # what is reset
    ignored = (1 << signal.SIGPIPE - 1) | (1 << signal.SIGXFSZ - 1)
    for pid in [slot.pid for slot in srv.slots()]:
        assert int(status_field(pid, "SigCgt"), 16) == 0, pid
        assert int(status_field(pid, "SigIgn"), 16) == ignored, pid
        assert int(status_field(pid, "CapBnd"), 16) == 0, pid
        assert int(status_field(pid, "CapEff"), 16) != 0, pid  # init keeps its own until the job


def test_front_drops_root_and_zygote_keeps_it(server):
    pids = server.pids()
    uid_line = lambda pid: [l for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("Uid:")][0]  # noqa: E731
    front_user = pwd.getpwnam("kiln").pw_uid  # RUN_FRONT_USER's default: kiln's own user, which setup makes
    assert uid_line(pids["front"]).split()[1:] == [str(server.host_uid(front_user))] * 4
    assert uid_line(pids["zygote"]).split()[1] == str(server.host_uid(0))  # rootless: root of kiln's user namespace
    cap_eff = [l for l in Path(f"/proc/{pids['front']}/status").read_text().splitlines() if l.startswith("CapEff:")][0]
    assert int(cap_eff.split()[1], 16) == 0


def test_one_job_per_slot_then_a_replacement_with_the_same_uid(start_server):
    srv = start_server(RUN_CONCURRENCY="1", RUN_UID_BASE="20000")
    before = [slot.pid for slot in srv.slots()]
    first = srv.run(solution_text="import os\nprint(os.getuid(), os.getgid(), os.getgroups())").json()
    assert first["stdout"] == "20000 20000 []\n"
    assert wait_until(lambda: [slot.pid for slot in srv.slots()] and [slot.pid for slot in srv.slots()] != before)
    second = srv.run(solution_text="import os\nprint(os.getuid())").json()
    assert second["stdout"] == "20000\n"


def test_uids_follow_the_slot_index(start_server):
    srv = start_server(RUN_CONCURRENCY="3", RUN_UID_BASE="30000")
    seen = {srv.run(solution_text="import os\nprint(os.getuid())").json()["stdout"] for _ in range(8)}
    assert seen <= {"30000\n", "30001\n", "30002\n"}


def test_refuses_to_start_without_cap_sys_admin(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PORT": str(free_port()), "RUN_INSTANCE": "kiln-test-nocap"}
    done = subprocess.run(["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--", str(KILN), "serve"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "CAP_SYS_ADMIN" in done.stderr and "no unsandboxed mode" in done.stderr


def test_bad_configuration_stops_startup_naming_the_variable():
    done = subprocess.run([str(KILN), "serve"], env={"PATH": "/usr/bin:/bin", "RUN_CONCURRENCY": "lots", "RUN_CGROUP": "v3"}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "RUN_CONCURRENCY='lots'" in done.stderr and "RUN_CGROUP='v3'" in done.stderr


def _everything(server) -> list[int]:
    pids = server.pids()
    return [pids["front"], pids["zygote"], *[slot.pid for slot in server.slots()]]


def test_sigterm_when_idle_exits_0_and_leaves_nothing(start_server):
    srv = start_server()
    everything = _everything(srv)
    assert srv.stop() == 0
    assert wait_until(lambda: not any(alive(pid) for pid in everything))
    assert not Path(f"/run/{srv.instance}").exists()


def test_the_access_lines_of_the_last_requests_are_written_by_a_stop(start_server):
    """The front writes its access lines in batches (kiln/log.py): a stop right after requests
    loses none of them."""
    srv = start_server()
    ids = [f"last-{n}" for n in range(5)]
    for request_id in ids:
        assert srv.client.post("/run", json={"lang_slug": "python", "solution_text": ""}, headers={"X-Request-Id": request_id}).status_code == 200
    assert srv.stop() == 0
    srv._reader.join(10)
    assert sorted(r.get("request_id") for r in srv.logged("request") if r.get("request_id") in ids) == ids


def test_shutdown_endpoint(start_server):
    srv = start_server(ALLOW_SHUTDOWN="true")
    everything = _everything(srv)
    response = srv.client.post("/shutdown")
    assert response.status_code == 200 and response.json() == {"status": "shutting down"}
    assert srv.proc.wait(30) == 0
    assert wait_until(lambda: not any(alive(pid) for pid in everything))


@pytest.mark.parametrize("value", ["false", "0", "no"])
def test_shutdown_endpoint_is_404_unless_allowed(start_server, value):
    srv = start_server(ALLOW_SHUTDOWN=value)
    assert srv.client.post("/shutdown").status_code == 404
    assert srv.proc.poll() is None


def test_health_and_languages(server):
    health = server.client.get("/health")
    assert health.status_code == 200 and health.text.startswith("ok")
    # rootless, /health says what is weaker than under root (kiln/rootless.py)
    assert health.text == "ok\n" if not ROOTLESS else "ROOTLESS, weaker than under root: " in health.text
    languages = server.client.get("/languages").json()
    served = {lang["slug"]: lang for lang in languages["languages"]}
    assert {"python", "js"} <= set(served)
    assert served["python"]["checker"] is False
    assert served["python"]["version"].startswith("Python 3")
    assert languages["limits"]["timeout_max_ms"] == 300_000


def test_without_cgroups_runs_work_and_health_says_so_loudly(start_server):
    srv = start_server(RUN_CGROUP="off")
    health = srv.client.get("/health")
    assert health.status_code == 200
    assert health.text.startswith("ok (NO CGROUPS: memory and pids limits are not enforced")
    assert srv.client.get("/languages").json()["limits"]["cgroups"] is False
    assert srv.run(solution_text="print(1)").json()["stdout"] == "1\n"
    assert any("CGROUPS UNAVAILABLE" in r.get("msg", "") for r in srv.records)


def _cgroup_subtrees(srv) -> list[Path]:
    """The server's own folders in the memory, pids and cpuacct v1 hierarchies, as its log says
    (below the test's cgroup, or rootless below the subtree its user was handed)."""
    ready = srv.logged("cgroup subtree ready")
    if not ready or ready[0].get("driver") != "v1":
        return []
    return [Path(p) for p in ready[0]["subtree"] if p.startswith(("/sys/fs/cgroup/memory/", "/sys/fs/cgroup/pids/", "/sys/fs/cgroup/cpuacct/"))]


def test_each_slot_has_its_own_cgroup_and_nothing_is_left_after_stop(start_server):
    srv = start_server(RUN_CONCURRENCY="2")
    subtrees = _cgroup_subtrees(srv)
    if not subtrees:
        pytest.skip("no cgroup v1 hierarchies here (the driver chose v2 or none)")
    for subtree in subtrees:
        assert len([p for p in subtree.iterdir() if p.name.startswith("slot-")]) == 2
    for _ in range(3):
        assert srv.run(solution_text="print(1)").status_code == 200
    for subtree in subtrees:  # one cgroup per live slot, old generations removed
        assert wait_until(lambda: len([p for p in subtree.iterdir() if p.name.startswith("slot-")]) == 2)
    assert srv.stop() == 0
    assert not any(p.exists() for p in subtrees)


def test_the_task_moves_itself_into_its_slot_cgroup_and_init_never_does(start_server):
    """The task's process writes itself into the slot's cgroup.procs before its exec: made while
    the slot warms (a plain slot's standby, kiln/native/standby.c), it waits there, init's child,
    so that joining is off the request's path; all the run's processes are charged there, init
    (its buffers, its CPU) never is."""
    srv = start_server(RUN_CONCURRENCY="1", RUN_PRESTART="false")
    subtrees = _cgroup_subtrees(srv)
    if not subtrees:
        pytest.skip("no cgroup v1 hierarchies here (the driver chose v2 or none)")
    members = lambda: {int(pid) for subtree in subtrees for slot in subtree.glob("slot-*") for pid in (slot / "cgroup.procs").read_text().split()}  # noqa: E731
    assert wait_until(lambda: len(srv.warm_slots()) == 1 and len(members()) == 1, 10), (srv.slots(), members())
    [warm] = srv.warm_slots()
    assert members() == {p.pid for p in descendants(warm.pid)}  # the standby alone, in every hierarchy
    done = []
    runner = threading.Thread(target=lambda: done.append(srv.run(solution_text="import time\ntime.sleep(2)\n")))
    runner.start()
    try:
        assert wait_until(lambda: len(srv.busy_slots()) == 1 and len(members()) > 0, 10)
        [init] = srv.busy_slots()
        in_slot = members()
        assert init.pid not in in_slot
        assert in_slot <= {p.pid for p in descendants(init.pid)}
    finally:
        runner.join()
    assert done[0].status_code == 200 and done[0].json()["exit_code"] == 0
