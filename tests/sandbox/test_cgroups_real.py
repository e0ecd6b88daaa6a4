"""kiln.sandbox.cgroups against the real kernel (root).

Each test runs the real drivers in an instance subtree of its own ("kiln-cgtest-<pid>...") and
forks children that join slots and misbehave (allocate past the memory limit, fork past the pids
limit, spin). v1 runs on the v1 hierarchies found here; v2 runs on the cgroup2 hierarchy found
here with whatever controllers it offers to kiln's cgroup: what needs an absent controller is
skipped with the reason (the unit tests cover those files against a fake tree). Everything created
is killed and removed by finalizers, independently of the code under test.
"""

from __future__ import annotations

import errno
import os
import signal
import time
import traceback
from pathlib import Path

import pytest

from kiln.log import Log
from kiln.sandbox import cgroup_detect, cgroupfs
from kiln.sandbox.cgroup_v1 import V1Driver
from kiln.sandbox.cgroup_v2 import V2Driver
from kiln.sandbox.cgroups import CgroupError

from cgroupkit import apply_limits, join, read_stats

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="real cgroups need root")

MiB = 1 << 20
HIERARCHIES = cgroup_detect.find_hierarchies(Path("/proc/self/mountinfo").read_text())
OWN = cgroup_detect.parse_proc_self_cgroup(Path("/proc/self/cgroup").read_text())
INSTANCE = f"kiln-cgtest-{os.getpid()}"
OTHER_INSTANCE = f"kiln-cgtest-{os.getpid()}-o"


def own_dir(controller: str) -> Path | None:
    mount, path = HIERARCHIES.get(controller), OWN.get(controller)
    return None if mount is None or path is None else Path(mount) / path.lstrip("/")


V1_BASES = {c: own_dir(c) for c in ("memory", "pids", "cpuacct")}
# with cpu's, where mounted (here apart from cpuacct's): a run is one entity to the scheduler
V1_USED = ("memory", "pids", "cpuacct", *(("cpu",) if own_dir("cpu") else ()))
V1_DIRS = tuple(dict.fromkeys(str(own_dir(c) / INSTANCE) for c in V1_USED if own_dir(c)))
V2_BASE = own_dir("")
HAVE_V1 = all(V1_BASES.values())
V2_CONTROLLERS = (V2_BASE / "cgroup.controllers").read_text().split() if V2_BASE else []


@pytest.fixture(scope="module", autouse=True)
def _pytest_in_a_leaf_of_its_own():
    """Where V2_BASE is not the root cgroup (a delegated scope: the stock VM's), the drivers
    under test enable controllers in it, which "no internal processes" forbids while pytest is
    there: pytest moves to a leaf of its own first, as kiln moves to its supervisor leaf."""
    if V2_BASE is not None and (V2_BASE / "cgroup.type").exists() and os.getpid() in map(int, (V2_BASE / "cgroup.procs").read_text().split()):
        leaf = V2_BASE / f"kiln-cgtest-{os.getpid()}-pytest"
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
    yield


# --- children and cleanup ---


def raw_remove(path: Path) -> None:
    """Kill and remove a cgroup tree without kiln's code (the finalizers' safety net)."""
    if not path.is_dir():
        return
    for child in sorted((p for p in path.iterdir() if p.is_dir()), reverse=True):
        raw_remove(child)
    deadline = time.monotonic() + 5
    while True:
        pids = [int(p) for p in (path / "cgroup.procs").read_text().split() if int(p) != os.getpid()]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            path.rmdir()
            return
        except OSError as error:
            if error.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
        time.sleep(0.01)


@pytest.fixture
def spawn():
    """spawn(body) -> pid of a forked child running body() (its return value is the exit code);
    every child is SIGKILLed and reaped after the test."""
    pids: list[int] = []

    def start(body) -> int:
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                code = body() or 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        pids.append(pid)
        return pid

    yield start
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        except ProcessLookupError:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


@pytest.fixture
def make_driver():
    """make_driver(version, instance=INSTANCE) -> a driver (not set up) whose subtree is removed
    after the test, even if the code under test failed."""
    subtrees: list[Path] = []

    def make(version: str, instance: str = INSTANCE):
        log = Log()
        if version == "v1":
            if not HAVE_V1:
                pytest.skip(f"no cgroup v1 memory, pids and cpuacct hierarchies here ({V1_BASES})")
            driver = cgroup_detect.open_driver("v1", instance, log)
        else:
            if V2_BASE is None:
                pytest.skip("no cgroup2 hierarchy mounted here")
            driver = V2Driver(str(V2_BASE), instance, log)
        subtrees.extend(Path(d) for d in driver.instance_dirs)
        return driver

    yield make
    for path in subtrees:
        raw_remove(path)


@pytest.fixture(params=["v1", "v2"])
def driver(request, make_driver):
    driver = make_driver(request.param)
    driver.setup()
    yield driver
    driver.teardown()


def need(driver, *controllers: str) -> None:
    if driver.name != "v2":
        return
    offered = (Path(driver.instance_dir) / "cgroup.controllers").read_text().split()
    missing = [c for c in controllers if c not in offered]
    if missing:
        pytest.skip(
            f"cgroup v2 here offers no {' '.join(missing)} controller to {driver.instance_dir} "
            f"(cgroup.controllers: {' '.join(offered) or 'empty'}); the v2 {'/'.join(missing)} files are covered by tests/unit/test_cgroups_plan.py"
        )


def joined_child(spawn, slot, then) -> tuple[int, int]:
    """A child that joins the slot, reports on a pipe, then runs then(report_fd).
    Returns (pid, read end) once the child is in the slot."""
    ready_r, ready_w = os.pipe()

    def body():
        os.close(ready_r)
        join(slot)
        os.write(ready_w, b"j")
        return then(ready_w)

    pid = spawn(body)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"j", "the child did not join the slot"
    return pid, ready_r


def sleep_forever(_fd) -> int:
    time.sleep(120)
    return 0


def cgroup_lines(pid: int) -> dict[str, str]:
    return cgroup_detect.parse_proc_self_cgroup(Path(f"/proc/{pid}/cgroup").read_text())


def expected_paths(driver, name: str) -> dict[str, str]:
    """What /proc/<pid>/cgroup shows for a process in the slot, per controller key."""
    if driver.name == "v1":
        return {c: f"{OWN[c].rstrip('/')}/{driver.instance}/{name}" for c in V1_USED}
    return {"": f"{OWN[''].rstrip('/')}/{driver.instance}/{name}"}


def wait_status(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return status


def killed_by_sigkill(status: int) -> bool:
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


# --- detection on this machine ---


@pytest.mark.skipif(not HAVE_V1 or {"memory", "pids"} <= set(V2_CONTROLLERS), reason="this host is not hybrid with v1 memory/pids")
def test_auto_here_takes_v1_and_v2_is_refused_with_advice():
    driver = cgroup_detect.open_driver("auto", INSTANCE, Log())
    assert isinstance(driver, V1Driver)
    assert driver.instance_dirs == V1_DIRS
    assert not any(Path(d).exists() for d in driver.instance_dirs), "open_driver must not create anything"
    with pytest.raises(CgroupError, match=r"lacks .*Delegate=yes"):
        cgroup_detect.open_driver("v2", INSTANCE, Log())
    assert cgroup_detect.open_driver("off", INSTANCE, Log()).name == "off"


# --- both drivers ---


def test_setup_creates_the_subtree(driver):
    leaves = [] if driver.name == "v1" or driver.is_root() else ["supervisor"]  # kiln's own leaf, on a v2 base not the root
    for path in map(Path, driver.instance_dirs):
        assert (path / "cgroup.procs").is_file()
        assert [p.name for p in path.iterdir() if p.is_dir()] == leaves
    if driver.name == "v1":
        assert driver.instance_dirs == V1_DIRS
    elif driver.is_root():
        assert not Path(driver.supervisor).exists(), "nothing is moved out of the root cgroup"


def test_join_moves_the_child_and_kill_slot_kills_it(driver, spawn):
    slot = driver.create_slot("slot-0-g1")
    pid, _ = joined_child(spawn, slot, sleep_forever)
    lines = cgroup_lines(pid)
    for key, path in expected_paths(driver, "slot-0-g1").items():
        assert lines[key] == path
    for path in map(Path, slot.paths):
        assert cgroupfs.read_procs(path=str(path / "cgroup.procs")) == [pid]
    if driver.name == "v2":
        assert (Path(slot.paths[0]) / "cgroup.kill").exists(), "this kernel has cgroup.kill: the v2 kill path is tested"
    driver.kill_slot(slot)
    assert killed_by_sigkill(wait_status(pid))
    assert driver.remove_slot(slot) is True
    assert not any(Path(p).exists() for p in slot.paths)


def test_limits_land_in_the_kernels_files(driver):
    need(driver, "memory", "pids")
    slot = driver.create_slot("slot-0-g2")
    apply_limits(slot, 64 * MiB, 10)
    if driver.name == "v1":
        memory, pids = map(Path, slot.paths[:2])
        assert int((memory / "memory.limit_in_bytes").read_text()) == 64 * MiB
        if (memory / "memory.memsw.limit_in_bytes").exists():
            assert int((memory / "memory.memsw.limit_in_bytes").read_text()) == 64 * MiB
        else:
            assert int((memory / "memory.swappiness").read_text()) == 0
    else:
        memory = pids = Path(slot.paths[0])
        assert int((memory / "memory.max").read_text()) == 64 * MiB
        if (memory / "memory.swap.max").exists():
            assert (memory / "memory.swap.max").read_text().strip() == "0"
        if (memory / "memory.oom.group").exists():
            assert (memory / "memory.oom.group").read_text().strip() == "1"
    assert (pids / "pids.max").read_text().strip() == "10"
    assert driver.remove_slot(slot) is True


def test_limits_can_be_raised_and_lowered_again(driver):
    """A plain slot is warmed with the limits most languages have; a request of a language
    with more memory (kotlin) raises them, one with less lowers them. In v1 the memory+swap
    limit may never be below the memory limit, in either direction."""
    need(driver, "memory", "pids")
    slot = driver.create_slot("slot-0-g3")
    files = [Path(p) / name for p in slot.paths for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.max") if (Path(p) / name).exists()]
    previous = None
    for memory_max, pids_max in ((64 * MiB, 10), (192 * MiB, 20), (32 * MiB, 5), (32 * MiB, 30), (96 * MiB, 5)):
        apply_limits(slot, memory_max, pids_max, previous)
        assert [int(f.read_text()) for f in files] == [memory_max] * len(files)
        previous = (memory_max, pids_max)
    assert driver.remove_slot(slot) is True


def test_memory_limit_kills_the_job_and_counts_the_oom_kill(driver, spawn):
    need(driver, "memory", "pids")
    slot = driver.create_slot("slot-1-g1")
    apply_limits(slot, 64 * MiB, 64)

    def allocate(_fd):
        hog = bytearray(b"\x01") * (200 * MiB)  # filled, so every page is touched
        return 1 if hog else 2  # reaching this line means the limit did not hold

    pid, _ = joined_child(spawn, slot, allocate)
    assert killed_by_sigkill(wait_status(pid))
    stats = read_stats(slot)
    assert stats.oom_kills >= 1
    assert 32 * MiB <= stats.memory_peak_bytes <= 64 * MiB
    assert stats.pids_limit_hits == 0
    assert driver.remove_slot(slot) is True


def test_pids_limit_refuses_forks_and_counts_them(driver, spawn):
    need(driver, "pids")
    slot = driver.create_slot("slot-1-g2")
    apply_limits(slot, 256 * MiB, 10)

    def fork_bomb(report_fd):
        made, refused = 0, []
        for _ in range(30):
            try:
                child = os.fork()
            except OSError as error:
                refused.append(error.errno)
                continue
            if child == 0:
                time.sleep(120)
                os._exit(0)
            made += 1
        os.write(report_fd, f"{made} {' '.join(map(str, refused))}\n".encode())
        time.sleep(120)
        return 0

    pid, report = joined_child(spawn, slot, fork_bomb)
    made, *refused = os.read(report, 4096).decode().split()
    assert int(made) == 9, "the child itself is the 10th process"
    assert refused == [str(errno.EAGAIN)] * 21
    assert read_stats(slot).pids_limit_hits == 21, "one event per refused fork"
    pids_dir = slot.paths[1] if driver.name == "v1" else slot.paths[0]
    assert len(cgroupfs.read_procs(path=os.path.join(pids_dir, "cgroup.procs"))) == 10
    driver.kill_slot(slot)
    assert killed_by_sigkill(wait_status(pid))
    assert driver.remove_slot(slot) is True


def test_cpu_usage_is_accounted(driver, spawn):
    slot = driver.create_slot("slot-1-g3")

    def spin(_fd):
        while time.process_time() < 0.3:
            pass
        return 0

    pid, _ = joined_child(spawn, slot, spin)
    assert os.WEXITSTATUS(wait_status(pid)) == 0
    stats = read_stats(slot)
    assert 200 <= stats.cpu_usage_ms <= 60_000
    assert stats.oom_kills == 0 and stats.pids_limit_hits == 0
    if driver.name == "v1":
        assert isinstance(stats.memory_peak_bytes, int)
    elif "memory" not in (Path(driver.instance_dir) / "cgroup.controllers").read_text().split():
        assert stats.memory_peak_bytes is None, "no memory controller: no peak"
    assert driver.remove_slot(slot) is True



def test_remove_slot_kills_what_is_left_and_closes_the_fds(driver, spawn):
    slot = driver.create_slot("slot-2-g2")
    fds = slot.fds()
    pid, _ = joined_child(spawn, slot, sleep_forever)
    assert driver.remove_slot(slot) is True
    assert killed_by_sigkill(wait_status(pid))
    assert not any(Path(p).exists() for p in slot.paths)
    for fd in fds:
        with pytest.raises(OSError) as caught:
            os.fstat(fd)
        assert caught.value.errno == errno.EBADF


def test_remove_slot_kills_what_is_left_after_its_fds_were_closed(driver, spawn):
    """The zygote closes its descriptors of a slot's cgroup once the slot has its own."""
    slot = driver.create_slot("slot-2-g3")
    pid, _ = joined_child(spawn, slot, sleep_forever)
    slot.close()
    assert driver.remove_slot(slot) is True
    assert killed_by_sigkill(wait_status(pid))
    assert not any(Path(p).exists() for p in slot.paths)


def test_setup_removes_a_crashed_kilns_slots_and_nothing_else(driver, make_driver, spawn):
    crashed = driver  # set up, with a slot whose process is still running
    slot = crashed.create_slot("slot-3-g1")
    orphan, _ = joined_child(spawn, slot, sleep_forever)
    slot.close()  # the crash: the zygote's fds are gone, nothing was removed

    other = make_driver(driver.name, OTHER_INSTANCE)
    other.setup()
    other_slot = other.create_slot("slot-3-g1")
    neighbour, _ = joined_child(spawn, other_slot, sleep_forever)

    restarted = make_driver(driver.name, INSTANCE)
    restarted.setup()

    assert killed_by_sigkill(wait_status(orphan))
    assert not any(Path(p).exists() for p in slot.paths)
    assert all(Path(d).is_dir() for d in restarted.instance_dirs)
    assert os.waitpid(neighbour, os.WNOHANG) == (0, 0), "another instance's process was touched"
    for path in other_slot.paths:
        assert cgroupfs.read_procs(path=os.path.join(path, "cgroup.procs")) == [neighbour]
    assert other.remove_slot(other_slot) is True
    other.teardown()
    assert not any(Path(d).exists() for d in other.instance_dirs)


def test_teardown_removes_the_subtree(driver):
    driver.remove_slot(driver.create_slot("slot-4-g1"))
    driver.create_slot("slot-4-g2").close()
    driver.teardown()
    if driver.name == "v2" and not driver.is_root():
        pytest.skip("a non-root v2 base keeps the supervisor leaf kiln is in")
    assert not any(Path(d).exists() for d in driver.instance_dirs)


# --- v2 only: a base cgroup that is not the root ---


@pytest.mark.skipif(V2_BASE is None, reason="no cgroup2 hierarchy mounted here")
def test_v2_setup_moves_only_kiln_and_the_named_pids_into_the_supervisor_leaf(spawn):
    """kiln's own cgroup here is the v2 root (exempt from "no internal processes"), so the test
    makes a cgroup of its own to stand in for a delegated service cgroup. While a process kiln
    did not start is in it (a login shell's), setup refuses before anything moves and leaves no
    cgroup of its own; once it is gone, kiln and the pids it names move, nothing else."""
    base = V2_BASE / f"{INSTANCE}-base"
    base.mkdir()
    try:
        def parked():
            (base / "cgroup.procs").write_text("0")
            time.sleep(120)
            return 0

        front, stranger = spawn(parked), spawn(parked)
        report_r, report_w = os.pipe()
        go_r, go_w = os.pipe()

        def zygote():
            (base / "cgroup.procs").write_text("0")
            driver = V2Driver(str(base), INSTANCE, Log())
            try:
                driver.setup(move_pids=[front])
            except CgroupError as error:
                os.write(report_w, f"refused {str(error)}".encode())
            os.read(go_r, 1)
            driver.setup(move_pids=[front])
            os.write(report_w, f"ok {int(driver.is_root())}".encode())
            time.sleep(120)
            return 0

        deadline = time.monotonic() + 5
        while sorted(cgroupfs.read_procs(path=str(base / "cgroup.procs"))) != sorted([front, stranger]):
            assert time.monotonic() < deadline, "the parked children did not enter the base"
            time.sleep(0.01)
        kiln = spawn(zygote)
        os.close(report_w)
        refused = os.read(report_r, 1000).decode()
        assert refused.startswith("refused ") and f"processes kiln did not start ({stranger})" in refused, refused
        assert sorted(cgroupfs.read_procs(path=str(base / "cgroup.procs"))) == sorted([front, stranger, kiln])
        assert not (base / INSTANCE).exists()
        os.kill(stranger, signal.SIGKILL)
        os.waitpid(stranger, 0)
        os.write(go_w, b"g")
        assert os.read(report_r, 100) == b"ok 0"
        supervisor = f"{OWN[''].rstrip('/')}/{base.name}/{INSTANCE}/supervisor"
        assert cgroup_lines(kiln)[""] == supervisor
        assert cgroup_lines(front)[""] == supervisor
    finally:
        raw_remove(base)
