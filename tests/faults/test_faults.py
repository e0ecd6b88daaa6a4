"""Faults injected into a real kiln: processes killed, resources gone, the host in trouble."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from kilntest import KILN, REPO, Server, alive, descendants, wait_until


def own_cgroup(controller: str) -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return Path("/sys/fs/cgroup", controller, path.lstrip("/"))
    pytest.skip(f"no cgroup v1 {controller} hierarchy here")


def slot_cgroups(instance: str) -> list[Path]:
    subtree = own_cgroup("pids") / instance
    return sorted(p for p in subtree.glob("slot-*")) if subtree.exists() else []





def test_slot_killed_during_a_run(start_server):
    srv = start_server(RUN_CONCURRENCY="2")
    results = {}
    runner = threading.Thread(target=lambda: results.update(r=srv.run(solution_text="import time\ntime.sleep(30)\n", timeout="1m")))
    runner.start()
    assert wait_until(lambda: srv.busy_slots())
    victim = srv.busy_slots()[0].pid
    cgroups_before = slot_cgroups(srv.instance)
    os.kill(victim, signal.SIGKILL)
    runner.join(30)
    response = results["r"]
    assert response.status_code == 500 and response.json() == {"error": "internal"}
    # replaced, and its cgroup removed
    assert wait_until(lambda: len(srv.warm_slots()) == 2)
    assert wait_until(lambda: len(slot_cgroups(srv.instance)) == 2)
    if cgroups_before:
        assert set(slot_cgroups(srv.instance)) != set(cgroups_before)
    assert srv.run(solution_text="print('after')").json()["stdout"] == "after\n"


def test_zygote_killed_then_a_restart_works_and_cleans_up(start_server):
    srv = start_server(RUN_CONCURRENCY="3")
    pids = srv.pids()
    slots = [p.pid for p in srv.children()]
    stale = slot_cgroups(srv.instance)
    os.kill(pids["zygote"], signal.SIGKILL)
    started = time.monotonic()
    assert srv.proc.wait(10) != 0
    assert time.monotonic() - started < 5  # "within a second" on a quiet machine
    assert wait_until(lambda: not any(alive(pid) for pid in [pids["front"], pids["zygote"], *slots]))
    assert srv.logged("the zygote died; exiting so the service restarts whole")
    # the zygote could not clean up: its slot cgroups are still there, for the next start
    assert stale and all(p.exists() for p in stale)
    again = start_server(RUN_CONCURRENCY="3", RUN_INSTANCE=srv.instance)
    assert again.run(solution_text="print('restarted')").json()["stdout"] == "restarted\n"
    assert not any(p.exists() for p in stale)
    assert any("removing leftover slot cgroup" in r.get("msg", "") for r in again.records)


def test_front_killed_takes_everything_with_it(start_server):
    srv = start_server(RUN_CONCURRENCY="2")
    pids = srv.pids()
    family = [pids["zygote"], *(p.pid for p in descendants(pids["zygote"]))]
    os.kill(pids["front"], signal.SIGKILL)
    srv.proc.wait(10)
    assert wait_until(lambda: not any(alive(pid) for pid in family), 10)
    assert wait_until(lambda: slot_cgroups(srv.instance) == [], 10)  # the zygote cleaned up
    assert wait_until(lambda: srv.logged("the front is gone: the zygote stopped its slots and exits 1"))  # not 0: a failure


def test_a_cgroup_that_cannot_be_created(start_server):
    srv = start_server(RUN_CONCURRENCY="1", RUN_SHUTDOWN_GRACE="1s")
    subtree = own_cgroup("pids") / srv.instance
    moved = subtree.with_name(subtree.name + "-moved")
    subtree.rename(moved)  # the zygote's path to its subtree is gone: creating slot cgroups fails
    try:
        assert srv.run(solution_text="print(1)").status_code == 200  # the warm slot still serves
        refused = srv.run(solution_text="print(2)")
        assert refused.status_code == 503 and refused.json() == {"error": "no warm slot"}
        health = srv.client.get("/health")
        assert health.status_code == 503 and "cgroup" in health.text
        assert any("cannot create the slot's cgroup" in str(r.get("error", "")) for r in srv.logged("slot warm-up failed"))
    finally:
        moved.rename(subtree)
    assert wait_until(lambda: srv.client.get("/health").status_code == 200, 30)
    assert srv.run(solution_text="print(3)").json()["stdout"] == "3\n"


FILL_TMP = """
import os, subprocess, sys
repo = sys.argv[1]
keep = os.open(repo, os.O_RDONLY | os.O_DIRECTORY)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", "/tmp"], check=True)
if repo.startswith("/tmp/"):  # a checkout under /tmp: bring it back into view
    os.makedirs(repo)
    # the mount syscall itself: mount(8) would resolve the magic link to a path, now hidden
    import ctypes
    if ctypes.CDLL(None).mount(f"/proc/self/fd/{keep}".encode(), repo.encode(), None, 0x1000, None):
        sys.exit("bind mount failed")
fd = os.open("/tmp/fill", os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, b"x" * 4096)
except OSError:
    pass
os.close(fd)
os.execv(sys.argv[2], sys.argv[2:])
"""


def test_host_tmp_full(tmp_path):
    """kiln needs nothing of the host's /tmp: a full one changes no answer."""
    srv = Server({}, argv=["unshare", "-m", "--propagation", "private", "/usr/bin/python3", "-c", FILL_TMP, str(REPO), str(KILN), "serve"])
    try:
        srv.wait_ready()
        assert srv.run(solution_text="open('/tmp/x', 'w').write('y' * 100000)\nprint('ok')").json()["stdout"] == "ok\n"
        assert srv.run(lang_slug="js", solution_text="console.log(1 + 1)").json()["stdout"] == "2\n"
    finally:
        assert srv.stop() == 0


def test_front_out_of_file_descriptors_answers_503_overloaded_and_recovers():
    """kiln started with few descriptors (soft limit 48): idle connections use them up."""
    srv = Server({"RUN_CONCURRENCY": "2"}, argv=["prlimit", "--nofile=48:4096", "--", str(KILN), "serve"])
    held, refused = [], None
    try:
        srv.wait_ready()
        assert srv.run(solution_text="print(1)").status_code == 200
        for _ in range(40):  # idle keep-alive connections, each holding a descriptor of the front
            conn = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            conn.settimeout(0.5)
            try:
                data = conn.recv(4096)
            except TimeoutError:
                held.append(conn)
                continue
            refused = data
            conn.close()
            break
        assert refused is not None, "never ran out of descriptors"
        assert refused.startswith(b"HTTP/1.1 503") and refused.endswith(b'{"error":"overloaded"}')
        for conn in held:
            conn.close()
        held = []
        assert wait_until(lambda: httpx.get(f"{srv.url}/health", timeout=5).status_code == 200)
        assert srv.run(solution_text="print('recovered')").json()["stdout"] == "recovered\n"
        assert 'kiln_overload_refusals_total{reason="out of file descriptors"} 1.0' in srv.client.get("/metrics").text
    finally:
        for conn in held:
            conn.close()
        assert srv.stop() == 0
