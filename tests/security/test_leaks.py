"""After 200 mixed runs (normal, failing, timeouts, seccomp kills, forks and daemons, bombs of
files), nothing is left on the host: no slot process beyond the warm ones, no task process, no
mount, no temp directory, no slot cgroup beyond the warm slots'."""

from __future__ import annotations

import itertools
import os
import queue
import threading
import time
from pathlib import Path

import pytest

from kilntest import give_to_kiln, processes, processes_of_uids, wait_until

UID_BASE = 25000
CONCURRENCY = 4
RUNS = 200

# (kind, solution, timeout, expected outcome, expected exit code)
KINDS = [
    ("normal", "print(sum(range(1000)))\n", "20s", "exited", 0),
    ("error", "import sys\nprint('x')\nsys.exit(3)\n", "20s", "exited", 3),
    ("exception", "raise RuntimeError('boom')\n", "20s", "exited", 1),
    ("timeout", "import time\nprint('t', flush=True)\ntime.sleep(30)\n", "300ms", "timed_out", None),
    ("seccomp", "import ctypes\nprint('m', flush=True)\nctypes.CDLL(None).syscall(165, 0, 0, 0, 0, 0)\n", "20s", "policy_violation", 159),
    (
        "forks",
        "import os, subprocess, time\n"
        "kids = [subprocess.Popen(['/bin/sleep', '60'], start_new_session=True) for _ in range(3)]\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"  # a daemon still holding stdout
        "    os._exit(0)\n"
        "with open('/tmp/f', 'wb') as f: f.write(b'x' * 65536)\n"
        "os.makedirs('/sandbox/out/deep', exist_ok=True)\n"
        "print('forked')\n",
        "20s",
        "exited",
        0,
    ),
    ("signal", "import os\nos.kill(os.getpid(), 11)\n", "20s", "signaled", 139),
]


def _mountinfo_lines() -> int:
    return len(Path("/proc/self/mountinfo").read_text().splitlines())


def _cgroup_mounts() -> list[str]:
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" ")
        fstype = fields[fields.index("-") + 1]
        if fstype in ("cgroup", "cgroup2"):
            mounts.append(fields[4])
    return mounts


def _instance_dirs(instance: str) -> list[str]:
    """Every cgroup directory named after the server's RUN_INSTANCE, in every hierarchy."""
    found = []
    for mount in _cgroup_mounts():
        for folder, dirs, _files in os.walk(mount):
            if instance in dirs:
                found.append(os.path.join(folder, instance))
            dirs[:] = [d for d in dirs if d != instance and not d.startswith("slot-")]
    return found


def _slot_cgroups(instance: str) -> dict[str, list[str]]:
    return {d: sorted(e for e in os.listdir(d) if e.startswith("slot-")) for d in _instance_dirs(instance)}


def _stray_slot_processes() -> list:
    """Live processes titled like a slot whose parent is not a kiln zygote: escaped or orphaned.
    A warm plain slot's task process (kiln/native/standby.c) shares its init's memory, title
    included, until its exec: a child of a slot's init, it is no stray."""
    live = [p for p in processes() if not p.zombie]
    zygotes = {p.pid for p in live if p.title.startswith("kiln: zygote")}
    inits = {p.pid for p in live if p.title.startswith("kiln: slot") and p.ppid in zygotes}
    return [p for p in live if p.title.startswith("kiln: slot") and p.ppid not in zygotes and p.ppid not in inits]


def _kiln_tmp_entries(names, instance: str, uids: set[int]) -> list[str]:
    """Of the new /tmp entries, those kiln made: named after the server's instance, or owned by
    a slot's uid or by the front's user. (Other sessions on a shared host create root-owned /tmp
    entries meanwhile; kiln's own temp files would go to its TMPDIR, checked separately.)"""
    suspicious = []
    for name in names:
        try:
            owner = os.lstat(f"/tmp/{name}").st_uid
        except FileNotFoundError:
            continue
        if instance in name or owner in uids:
            suspicious.append(name)
    return suspicious


def test_no_leaks_after_200_mixed_runs(kiln_server, tmp_path):
    tmpdir = tmp_path / "kiln-tmpdir"
    tmpdir.mkdir()
    give_to_kiln(tmpdir)
    tmp_before = set(os.listdir("/tmp"))
    mounts_before = _mountinfo_lines()
    srv = kiln_server(RUN_LANGS="python", RUN_CONCURRENCY=str(CONCURRENCY), RUN_UID_BASE=str(UID_BASE), TMPDIR=str(tmpdir))
    assert wait_until(lambda: len(srv.warm_slots()) == CONCURRENCY, timeout=20)
    cgroups_before = _slot_cgroups(srv.instance)

    jobs: queue.Queue = queue.Queue()
    for i, kind in zip(range(RUNS), itertools.cycle(KINDS)):
        jobs.put((i, kind))
    failures: list[str] = []
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def worker():
        while True:
            try:
                i, (kind, source, timeout, outcome, exit_code) = jobs.get_nowait()
            except queue.Empty:
                return
            for _attempt in range(200):
                response = srv.run(lang_slug="python", solution_text=source, timeout=timeout)
                if response.status_code != 429:
                    break
                time.sleep(0.02)
            body = response.json() if response.status_code == 200 else {}
            got = (response.status_code, body.get("stats", {}).get("outcome"), body.get("exit_code"))
            with lock:
                counts[kind] = counts.get(kind, 0) + 1
                if got != (200, outcome, exit_code):
                    failures.append(f"run {i} ({kind}): {got} != {(200, outcome, exit_code)}: {response.text[:300]}")

    threads = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert failures == []
    assert sum(counts.values()) == RUNS
    assert srv.client.get("/health").status_code == 200

    # every slot served one job and was replaced; the pool settles back to CONCURRENCY warm slots
    assert wait_until(lambda: len(srv.warm_slots()) == CONCURRENCY, timeout=20), srv.slots()
    assert len(srv.slots()) == CONCURRENCY, srv.slots()
    assert wait_until(lambda: _stray_slot_processes() == [], timeout=10), _stray_slot_processes()
    # no task process of any slot uid is left anywhere on the host
    uids = range(UID_BASE, UID_BASE + CONCURRENCY)
    kilns = {srv.host_uid(uid) for uid in (*uids, 65534)}  # the slots' and the front's owners of files
    assert wait_until(lambda: processes_of_uids(uids) == [], timeout=10), processes_of_uids(uids)
    # the zygote's children are exactly the warm slots and python's template (no orphan
    # re-parented to the subreaper)
    assert len(srv.templates()) == 1, srv.templates()
    children = sorted(p.pid for p in srv.children() if not p.zombie)
    assert children == sorted([slot.pid for slot in srv.slots()] + srv.templates()), srv.children()
    # nothing mounted in the host's mount namespace
    assert _mountinfo_lines() == mounts_before
    # no temp entries made by kiln (the file store the harness gave this server is its own)
    store = Path(srv.env["RUN_FILE_STORE"]).name
    assert _kiln_tmp_entries(set(os.listdir("/tmp")) - tmp_before - {store}, srv.instance, kilns) == []
    assert list(tmpdir.iterdir()) == []
    run_dir = Path(f"/run/{srv.instance}")
    # kiln's runtime folder holds its staging directory (empty on the host: each slot mounts its
    # root there in its own mount namespace), the judge's builds (none: no judge request came)
    # and pidfiles, nothing per run
    if run_dir.exists():
        extra = [p.name for p in run_dir.iterdir() if p.name not in ("root", "layers") and not (p.suffix == ".pid" and p.is_file())]
        assert extra == []
        for folder in ("root", "layers"):
            assert not (run_dir / folder).exists() or list((run_dir / folder).iterdir()) == []
    cgroups_after = _slot_cgroups(srv.instance)

    srv.stop()
    # SIGKILLed slots may take a moment to be gone
    assert wait_until(lambda: _stray_slot_processes() == [], timeout=10), _stray_slot_processes()
    assert wait_until(lambda: processes_of_uids(uids) == [], timeout=10), processes_of_uids(uids)
    assert _mountinfo_lines() == mounts_before
    assert not run_dir.exists(), f"{run_dir} left behind: {[str(p) for p in run_dir.rglob('*')]}"
    assert _kiln_tmp_entries(set(os.listdir("/tmp")) - tmp_before, srv.instance, kilns) == []
    assert list(tmpdir.iterdir()) == []

    if not cgroups_before and not cgroups_after:
        pytest.skip(f"no cgroup directory named {srv.instance} under {_cgroup_mounts()}: cgroups are not in use yet")
    # one slot cgroup per warm slot, in each hierarchy, and no leftover of the 200 runs
    assert cgroups_after.keys() == cgroups_before.keys()
    for folder, slots in cgroups_after.items():
        assert len(slots) == CONCURRENCY, (folder, slots)
        assert len(cgroups_before[folder]) == CONCURRENCY, (folder, cgroups_before[folder])
    # and nothing at all once the server stopped
    assert _instance_dirs(srv.instance) == []
