"""kiln.sandbox.cgroups without root: parsing, detection, and every driver's file writes.

A fake kernel stands in for cgroupfs below tmp_path: mkdir fills a cgroup with the interface
files the kernel would offer, writes are recorded (path, value) in order and interpreted the way
the kernel would (cgroup.procs moves a pid, cgroup.subtree_control enables controllers in the
children and refuses with EBUSY under the "no internal processes" rule, cgroup.kill empties a
cgroup), rmdir answers EBUSY while processes or child cgroups remain. Pids in the fake tree are
numbers in files: no real process is ever signalled.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest

from kiln.sandbox import cgroup_detect, cgroupfs
from kiln.sandbox.cgroup_v1 import V1Driver, V1SlotCgroup
from kiln.sandbox.cgroup_v2 import V2Driver, V2SlotCgroup
from kiln.sandbox.cgroups import CgroupError, LimitWrite, NoCgroups

from cgroupkit import Stats, apply_limits, enter_test_cgroup, join, leave_test_cgroup, read_stats

MiB = 1 << 20
ME = os.getpid()
FRONT = 4242  # the front's pid, named by the caller

V1_FILES = {
    "memory": {
        "memory.limit_in_bytes": "9223372036854771712\n",
        "memory.memsw.limit_in_bytes": "9223372036854771712\n",
        "memory.swappiness": "60\n",
        "memory.max_usage_in_bytes": "0\n",
        "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
    },
    "pids": {"pids.max": "max\n", "pids.events": "max 0\n"},
    "cpuacct": {"cpuacct.usage": "0\n"},
    "cpu,cpuacct": {"cpuacct.usage": "0\n", "cpu.shares": "1024\n"},
    "cpu": {"cpu.shares": "1024\n"},
}
V2_CONTROLLER_FILES = {
    "memory": {
        "memory.max": "max\n",
        "memory.swap.max": "max\n",
        "memory.oom.group": "0\n",
        "memory.peak": "0\n",
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
    },
    "pids": {"pids.max": "max\n", "pids.events": "max 0\n"},
    "cpu": {"cpu.max": "max 100000\n", "cpu.weight": "100\n"},
    "hugetlb": {},
}


class FakeKernel:
    def __init__(self, root: Path, monkeypatch):
        self.root = root
        self.writes: list[tuple[str, str]] = []
        self.removed: list[str] = []
        self.killed: list[int] = []
        self.hierarchies: dict[Path, str] = {}  # hierarchy root -> "v2" or a v1 controller set
        self.missing_v2_files: set[str] = set()  # e.g. {"cgroup.kill", "memory.peak"}: an older kernel
        self.missing_v1_files: set[str] = set()
        self.peak_resets = False  # memory.peak writable: Linux 6.12's write handler (0644; 0444 before)
        self.busy: dict[Path, int] = {}  # rmdir answers EBUSY this many times first
        self.refuse_mkdir: set[Path] = set()
        self.refuse_enable: set[str] = set()  # controllers whose "+name" write fails
        for name, fake in (("write_fd", self.write_fd), ("make_cgroup", self.make_cgroup), ("remove_cgroup", self.remove_cgroup), ("kill_members", self.kill_members)):
            monkeypatch.setattr(cgroupfs, name, fake)

    # --- building the tree ---

    def v1_hierarchy(self, controllers: str) -> Path:
        top = self.root / controllers
        top.mkdir()
        self.hierarchies[top] = controllers
        self._fill_v1(top)
        return top

    def v2_hierarchy(self, name: str = "unified", controllers: str = "cpu memory pids") -> Path:
        top = self.root / name
        top.mkdir()
        self.hierarchies[top] = "v2"
        for file, text in {"cgroup.procs": "", "cgroup.controllers": controllers + "\n", "cgroup.subtree_control": "\n", "cpu.stat": "usage_usec 0\n"}.items():
            (top / file).write_text(text)
        return top

    def mkdirs(self, path: Path, procs: tuple[int, ...] = ()) -> Path:
        """Create cgroups (as the kernel would) down to path, and put pids in the last."""
        missing = [p for p in [path, *path.parents] if not p.exists()]
        for directory in reversed(missing):
            self.make_cgroup(str(directory))
        self.set_procs(path, procs)
        return path

    def _hierarchy(self, path: Path) -> tuple[Path, str]:
        for top, kind in self.hierarchies.items():
            if path == top or top in path.parents:
                return top, kind
        raise AssertionError(f"{path} is in no fake hierarchy")

    def _fill_v1(self, path: Path) -> None:
        _, controllers = self._hierarchy(path)
        (path / "cgroup.procs").write_text("")
        for file, text in V1_FILES[controllers].items():
            if file not in self.missing_v1_files:
                (path / file).write_text(text)

    def _fill_v2(self, path: Path) -> None:
        files = {"cgroup.procs": "", "cgroup.type": "domain\n", "cgroup.subtree_control": "\n", "cgroup.events": "populated 0\nfrozen 0\n", "cgroup.kill": "", "cpu.stat": "usage_usec 0\n"}
        offered = (path.parent / "cgroup.subtree_control").read_text().split()
        (path / "cgroup.controllers").write_text(" ".join(offered) + "\n")
        for controller in offered:
            files.update(V2_CONTROLLER_FILES[controller])
        for file, text in files.items():
            if file not in self.missing_v2_files and not (path / file).exists():
                (path / file).write_text(text)
        if (path / "memory.peak").exists():
            (path / "memory.peak").chmod(0o644 if self.peak_resets else 0o444)

    # --- reading it back ---

    def rel(self, path) -> str:
        return str(Path(path).relative_to(self.root))

    def procs(self, path: Path) -> list[int]:
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]

    def set_procs(self, path: Path, pids) -> None:
        (path / "cgroup.procs").write_text("".join(f"{pid}\n" for pid in pids))

    # --- the four replaced functions ---

    def make_cgroup(self, path: str, exist_ok: bool = False) -> None:
        directory = Path(path)
        if directory in self.refuse_mkdir:
            raise PermissionError(errno.EACCES, "refused by the fake kernel", path)
        if directory.exists():
            if exist_ok:
                return
            raise FileExistsError(errno.EEXIST, "File exists", path)
        directory.mkdir()
        _, kind = self._hierarchy(directory)
        self._fill_v2(directory) if kind == "v2" else self._fill_v1(directory)

    def remove_cgroup(self, path: str) -> None:
        directory = Path(path)
        if not directory.exists():
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        if self.busy.get(directory, 0) > 0:
            self.busy[directory] -= 1
            raise OSError(errno.EBUSY, "Device or resource busy")
        if self.procs(directory) or any(p.is_dir() for p in directory.iterdir()):
            raise OSError(errno.EBUSY, "Device or resource busy")
        for file in directory.iterdir():
            file.unlink()
        directory.rmdir()
        self.removed.append(self.rel(directory))

    def _kill(self, pids: list[int]) -> None:
        """A killed process leaves every cgroup it is in, in every hierarchy."""
        self.killed += [pid for pid in pids if pid not in self.killed]
        for procs in self.root.rglob("cgroup.procs"):
            self.set_procs(procs.parent, [p for p in self.procs(procs.parent) if p not in pids])

    def kill_members(self, dir_fd: int) -> int:
        pids = self.procs(Path(os.readlink(f"/proc/self/fd/{dir_fd}")))
        self._kill(pids)
        return len(pids)

    def write_fd(self, fd: int, value: bytes) -> None:
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        text = value.decode()
        self.writes.append((self.rel(path), text))
        top, kind = self._hierarchy(path)
        directory, name = path.parent, path.name
        if name == "cgroup.procs":
            pid = int(text) or ME
            if kind == "v2" and directory != top and (directory / "cgroup.subtree_control").read_text().split():
                raise OSError(errno.EBUSY, "Device or resource busy")
            for procs in top.rglob("cgroup.procs"):
                self.set_procs(procs.parent, [p for p in self.procs(procs.parent) if p != pid])
            self.set_procs(directory, self.procs(directory) + [pid])
        elif name == "cgroup.subtree_control":
            offered = (directory / "cgroup.controllers").read_text().split()
            enabled = path.read_text().split()
            for token in text.split():
                controller = token[1:]
                if controller not in offered:
                    raise OSError(errno.ENOENT, "No such file or directory")
                if controller in self.refuse_enable:
                    raise OSError(errno.EINVAL, "Invalid argument")
                if directory != top and self.procs(directory):
                    raise OSError(errno.EBUSY, "Device or resource busy")
                enabled.append(controller)
            path.write_text(" ".join(enabled) + "\n")
            for child in directory.iterdir():
                if child.is_dir():
                    self._fill_v2(child)
        elif name == "cgroup.kill":
            self._kill([pid for procs in directory.rglob("cgroup.procs") for pid in self.procs(procs.parent)])
        else:
            path.write_text(text + "\n")


class RecordingLog:
    def __init__(self):
        self.records: list[dict] = []

    def event(self, msg: str, level: str = "info", **fields) -> None:
        self.records.append({"msg": msg, "level": level, **fields})

    def info(self, msg, **fields):
        self.event(msg, "info", **fields)

    def warning(self, msg, **fields):
        self.event(msg, "warning", **fields)

    def debug(self, msg, **fields):
        self.event(msg, "debug", **fields)

    def error(self, msg, **fields):
        self.event(msg, "error", **fields)


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    return FakeKernel(tmp_path, monkeypatch)


@pytest.fixture
def log():
    return RecordingLog()


def open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def is_open(fd: int) -> bool:
    try:
        fcntl.fcntl(fd, fcntl.F_GETFD)
        return True
    except OSError as error:
        assert error.errno == errno.EBADF
        return False


# --- /proc/self/cgroup and /proc/self/mountinfo ---

HYBRID_CGROUP = """\
9:name=systemd:/
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/process_api/c11722685c44c47a303abaebecb84168
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
"""

HYBRID_MOUNTINFO = """\
23 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""

PURE_V2_MOUNTINFO = """\
22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
"""

COMOUNTED_MOUNTINFO = """\
25 18 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
30 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpu,cpuacct
31 25 0:28 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,net_cls,net_prio
32 25 0:29 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
33 25 0:30 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,pids
34 25 0:31 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:18 - cgroup cgroup rw,cpuset,clone_children,release_agent=/sbin/agent
"""


def test_proc_self_cgroup_hybrid_gives_each_controller_and_the_unified_path():
    own = cgroup_detect.parse_proc_self_cgroup(HYBRID_CGROUP)
    assert own["memory"] == "/process_api/c11722685c44c47a303abaebecb84168"
    assert own["pids"] == own["cpuacct"] == own["cpu"] == "/"
    assert own[""] == "/"
    assert own["name=systemd"] == "/"
    assert len(own) == 10


def test_proc_self_cgroup_pure_v2_and_comounted_controllers():
    assert cgroup_detect.parse_proc_self_cgroup("0::/system.slice/kiln.service\n") == {"": "/system.slice/kiln.service"}
    own = cgroup_detect.parse_proc_self_cgroup("3:cpu,cpuacct:/user.slice\n2:memory:/user.slice/a:b\n0::/user.slice\n")
    assert own == {"cpu": "/user.slice", "cpuacct": "/user.slice", "memory": "/user.slice/a:b", "": "/user.slice"}


def test_mountinfo_hybrid_like_this_machine():
    found = cgroup_detect.find_hierarchies(HYBRID_MOUNTINFO)
    assert found == {
        "cpu": "/sys/fs/cgroup/cpu",
        "cpuacct": "/sys/fs/cgroup/cpuacct",
        "cpuset": "/sys/fs/cgroup/cpuset",
        "memory": "/sys/fs/cgroup/memory",
        "devices": "/sys/fs/cgroup/devices",
        "freezer": "/sys/fs/cgroup/freezer",
        "blkio": "/sys/fs/cgroup/blkio",
        "pids": "/sys/fs/cgroup/pids",
        "name=systemd": "/sys/fs/cgroup/systemd",
        "": "/sys/fs/cgroup/unified",
    }


def test_mountinfo_pure_v2_has_only_the_unified_hierarchy():
    assert cgroup_detect.find_hierarchies(PURE_V2_MOUNTINFO) == {"": "/sys/fs/cgroup"}


def test_mountinfo_comounted_controllers_share_a_mount_and_options_are_not_controllers():
    found = cgroup_detect.find_hierarchies(COMOUNTED_MOUNTINFO)
    assert found["cpu"] == found["cpuacct"] == "/sys/fs/cgroup/cpu,cpuacct"
    assert found["net_cls"] == found["net_prio"] == "/sys/fs/cgroup/net_cls,net_prio"
    assert found["cpuset"] == "/sys/fs/cgroup/cpuset"
    assert found[""] == "/sys/fs/cgroup/unified"
    for option in ("rw", "xattr", "clone_children", "release_agent=/sbin/agent", "mode=755"):
        assert option not in found


def test_mountinfo_skips_subtree_binds_decodes_escapes_and_keeps_the_first_mount():
    text = (
        "50 1 0:40 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n"
        "51 1 0:40 / /mnt/my\\040cgroups/memory rw - cgroup cgroup rw,memory\n"
        "52 1 0:40 / /elsewhere/memory rw - cgroup cgroup rw,memory\n"
        "53 1 0:41 / /sys/fs/cgroup rw shared:4 master:1 - cgroup2 cgroup2 rw\n"
        "garbage line\n"
    )
    assert cgroup_detect.find_hierarchies(text) == {"memory": "/mnt/my cgroups/memory", "": "/sys/fs/cgroup"}



# --- detection ---


def hybrid_host(kernel: FakeKernel, memory_path: str = "/process_api/x", unified_controllers: str = "hugetlb"):
    """This machine: v1 memory, pids, cpu, cpuacct hierarchies; a v2 hierarchy without memory/pids."""
    mounts = {c: kernel.v1_hierarchy(c) for c in ("memory", "pids", "cpuacct")}
    unified = kernel.v2_hierarchy("unified", unified_controllers)
    kernel.mkdirs(mounts["memory"] / memory_path.lstrip("/"))
    lines = [f"{30 + i} 31 0:{30 + i} / {mount} rw,relatime - cgroup cgroup rw,{c}" for i, (c, mount) in enumerate(mounts.items())]
    lines.append(f"41 31 0:38 / {unified} rw,relatime - cgroup2 cgroup2 rw")
    own = f"8:pids:/\n4:memory:{memory_path}\n2:cpuacct:/\n0::/\n"
    return "\n".join(lines) + "\n", own, mounts, unified


def pure_v2_host(kernel: FakeKernel, path: str = "/system.slice/kiln.service", delegated: bool = True):
    top = kernel.v2_hierarchy("cgroup", "cpu memory pids")
    if delegated:
        (top / "cgroup.subtree_control").write_text("cpu memory pids\n")
    base = kernel.mkdirs(top / path.lstrip("/"), procs=(ME,))
    (base.parent / "cgroup.subtree_control").write_text("cpu memory pids\n" if delegated else "\n")
    (base / "cgroup.controllers").write_text("cpu memory pids\n" if delegated else "\n")
    return f"26 22 0:23 / {top} rw,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", f"0::{path}\n", top, base


def test_auto_on_a_hybrid_host_like_this_one_takes_v1(kernel, log):
    mountinfo, own, mounts, _ = hybrid_host(kernel)
    driver = cgroup_detect.choose_driver("auto", "kiln", log, mountinfo, own)
    assert isinstance(driver, V1Driver) and driver.name == "v1" and driver.reason is None
    assert driver.instance_dirs == (str(mounts["memory"] / "process_api/x/kiln"), str(mounts["pids"] / "kiln"), str(mounts["cpuacct"] / "kiln"))
    [record] = log.records
    assert record["msg"] == "cgroup driver" and record["driver"] == "v1"
    assert "lacks memory and pids" in record["rejected"][0]


def test_explicit_v2_without_delegated_controllers_says_what_to_do(kernel, log):
    mountinfo, own, _, unified = hybrid_host(kernel)
    with pytest.raises(CgroupError) as caught:
        cgroup_detect.choose_driver("v2", "kiln", log, mountinfo, own)
    message = str(caught.value)
    assert f"{unified}/cgroup.controllers lacks memory and pids (has: hugetlb)" in message
    assert "Delegate=yes" in message and "systemd-run --scope -p Delegate=yes kiln serve" in message


def test_v2_needs_memory_and_pids_not_just_a_cgroup2_mount(kernel, log):
    mountinfo, own, _, _ = hybrid_host(kernel, unified_controllers="memory cpu")
    with pytest.raises(CgroupError, match=r"lacks pids \(has: memory cpu\)"):
        cgroup_detect.choose_driver("v2", "kiln", log, mountinfo, own)


def test_pure_v2_delegated_takes_v2_with_the_own_cgroup_as_base(kernel, log):
    mountinfo, own, _, base = pure_v2_host(kernel)
    driver = cgroup_detect.choose_driver("auto", "kiln", log, mountinfo, own)
    assert isinstance(driver, V2Driver) and driver.name == "v2"
    assert driver.base == str(base) and driver.instance_dir == str(base / "kiln")
    assert driver.supervisor == str(base / "kiln" / "supervisor")
    assert cgroup_detect.choose_driver("v2", "kiln", log, mountinfo, own).base == str(base)


def test_a_kiln_already_in_its_supervisor_leaf_keeps_the_same_base(kernel, log):
    mountinfo, _, _, base = pure_v2_host(kernel)
    driver = cgroup_detect.choose_driver("v2", "kiln", log, mountinfo, "0::/system.slice/kiln.service/kiln/supervisor\n")
    assert driver.base == str(base)
    # another instance's supervisor is not ours: that path is the base as it is
    with pytest.raises(CgroupError, match="other/supervisor/cgroup.controllers"):
        cgroup_detect.choose_driver("v2", "kiln", log, mountinfo, "0::/system.slice/kiln.service/other/supervisor\n")


def test_pure_v2_not_delegated_auto_runs_without_cgroups_and_says_why(kernel, log):
    mountinfo, own, _, base = pure_v2_host(kernel, delegated=False)
    driver = cgroup_detect.choose_driver("auto", "kiln", log, mountinfo, own)
    assert isinstance(driver, NoCgroups) and driver.name == "off"
    assert f"{base}/cgroup.controllers lacks memory and pids (has: nothing)" in driver.reason
    assert "Delegate=yes" in driver.reason
    assert "cgroup v1: no memory hierarchy is mounted" in driver.reason
    with pytest.raises(CgroupError, match="cgroup v1: no memory hierarchy is mounted"):
        cgroup_detect.choose_driver("v1", "kiln", log, mountinfo, own)


def test_a_scope_is_wanted_where_the_v2_cgroup_holds_others_or_offers_no_controllers(kernel):
    mountinfo, own, _, base = pure_v2_host(kernel, path="/user.slice/user-0.slice/session-3.scope")
    assert cgroup_detect.scope_wanted("auto", "kiln", mountinfo, own, ME) is None  # kiln alone there
    kernel.set_procs(base, [ME, 412, 413])
    reason = cgroup_detect.scope_wanted("auto", "kiln", mountinfo, own, ME)
    assert reason == f"{base} holds processes kiln did not start (412 413)"
    assert cgroup_detect.scope_wanted("v2", "kiln", mountinfo, own, ME) == reason
    for mode in ("v1", "off"):  # a scope would change nothing there
        assert cgroup_detect.scope_wanted(mode, "kiln", mountinfo, own, ME) is None


def test_a_scope_is_wanted_where_the_controllers_are_not_delegated(kernel):
    mountinfo, own, _, base = pure_v2_host(kernel, delegated=False)
    assert cgroup_detect.scope_wanted("auto", "kiln", mountinfo, own, ME) == f"{base} offers no memory and pids controller (not delegated)"


def test_no_scope_at_the_root_cgroup_nor_on_a_hybrid_host(kernel):
    mountinfo, _, top, _ = pure_v2_host(kernel)
    kernel.set_procs(top, [1, ME, 777])  # the root cgroup is exempt from no-internal-processes
    assert cgroup_detect.scope_wanted("auto", "kiln", mountinfo, "0::/\n", ME) is None
    hybrid_mountinfo, hybrid_own, _, _ = hybrid_host(kernel)
    assert cgroup_detect.scope_wanted("auto", "kiln", hybrid_mountinfo, hybrid_own, ME) is None


def test_v1_names_the_missing_hierarchy(kernel, log):
    mountinfo, own, _, _ = hybrid_host(kernel)
    without_pids = "\n".join(line for line in mountinfo.splitlines() if "rw,pids" not in line)
    with pytest.raises(CgroupError, match="cgroup v1: no pids hierarchy is mounted"):
        cgroup_detect.choose_driver("v1", "kiln", log, without_pids, own)


def test_v1_with_cpu_and_cpuacct_comounted(kernel, log):
    memory, pids, cpu = kernel.v1_hierarchy("memory"), kernel.v1_hierarchy("pids"), kernel.v1_hierarchy("cpu,cpuacct")
    mountinfo = "".join(f"{i} 1 0:{i} / {m} rw - cgroup cgroup rw,{m.name}\n" for i, m in enumerate((memory, pids, cpu)))
    driver = cgroup_detect.choose_driver("auto", "kiln", log, mountinfo, "3:cpu,cpuacct:/\n2:pids:/\n1:memory:/\n")
    assert driver.instance_dirs == (str(memory / "kiln"), str(pids / "kiln"), str(cpu / "kiln"))


def test_v1_takes_the_cpu_hierarchy_where_it_is_mounted_apart(kernel, log):
    """Each run one entity to the scheduler: its spinners wait behind the other runs and kiln's
    own processes, not the other way round. Without a cpu hierarchy v1 works as before."""
    mountinfo, own, mounts, _ = hybrid_host(kernel)
    cpu = kernel.v1_hierarchy("cpu")
    with_cpu = mountinfo + f"50 31 0:50 / {cpu} rw,relatime - cgroup cgroup rw,cpu\n"
    driver = cgroup_detect.choose_driver("v1", "kiln", log, with_cpu, own + "1:cpu:/\n")
    assert driver.instance_dirs[-1] == str(cpu / "kiln") and len(driver.instance_dirs) == 4
    driver.setup()
    slot = driver.create_slot("slot-1")
    assert [Path(p).parent.parent for p in slot.paths][-1] == cpu
    assert all(write.dir_index < 2 for write in slot.limit_writes(64 << 20, 32, None))  # nothing written to cpu's
    assert len(cgroup_detect.choose_driver("v1", "kiln", log, mountinfo, own).instance_dirs) == 3


def test_off_looks_at_nothing_and_bad_arguments_are_refused(log):
    driver = cgroup_detect.choose_driver("off", "kiln", log, "not read", "not read")
    assert isinstance(driver, NoCgroups) and driver.name == "off" and driver.reason == "RUN_CGROUP=off"
    with pytest.raises(ValueError, match="cgroup mode"):
        cgroup_detect.choose_driver("v3", "kiln", log, "", "")
    for instance in ("", "Kiln", "../x", "a/b", "x" * 33, "1kiln"):
        with pytest.raises(ValueError, match="cgroup instance"):
            cgroup_detect.choose_driver("off", instance, log, "", "")


# --- v1 driver ---


@pytest.fixture
def v1(kernel, log):
    """A V1Driver on a fake hybrid host, set up; memory base is a nested cgroup as here."""
    mountinfo, own, mounts, _ = hybrid_host(kernel)
    driver = cgroup_detect.choose_driver("v1", "kiln", log, mountinfo, own)
    driver.setup()
    driver.mounts = mounts
    return driver


def v1_slot_dirs(driver, name: str) -> list[Path]:
    return [Path(d) / name for d in driver.instance_dirs]


def test_v1_setup_creates_the_instance_in_each_hierarchy_and_writes_nothing(kernel, v1):
    assert all(Path(d).is_dir() for d in v1.instance_dirs)
    assert kernel.writes == [] and kernel.killed == []


def test_v1_setup_removes_this_instances_leftover_slots_only(kernel, log):
    mountinfo, own, mounts, _ = hybrid_host(kernel)
    memory_base = mounts["memory"] / "process_api/x"
    left_memory = kernel.mkdirs(memory_base / "kiln" / "slot-1-g3", procs=(4001, 4002))
    left_pids = kernel.mkdirs(mounts["pids"] / "kiln" / "slot-1-g3", procs=(4001, 4002))
    kernel.mkdirs(mounts["cpuacct"] / "kiln" / "slot-1-g3", procs=(4001, 4002))
    nested = kernel.mkdirs(mounts["pids"] / "kiln" / "slot-2-g1" / "inner", procs=(4003,))
    other = kernel.mkdirs(memory_base / "kiln2" / "slot-1-g3", procs=(5001,))
    not_a_slot = kernel.mkdirs(mounts["pids"] / "kiln" / "keep-me", procs=(5002,))

    cgroup_detect.choose_driver("v1", "kiln", log, mountinfo, own).setup()

    assert not left_memory.exists() and not left_pids.exists() and not nested.parent.exists()
    assert sorted(kernel.killed) == [4001, 4002, 4003]
    assert other.is_dir() and kernel.procs(other) == [5001]
    assert not_a_slot.is_dir() and kernel.procs(not_a_slot) == [5002]
    removed = [r for r in kernel.removed if "slot-2-g1" in r]
    assert removed == ["pids/kiln/slot-2-g1/inner", "pids/kiln/slot-2-g1"]  # deepest first
    assert [r["msg"] for r in log.records if r["level"] == "warning"] == ["removing leftover slot cgroup"] * 4


def test_v1_setup_fails_loudly_when_a_leftover_cannot_be_emptied(kernel, log, monkeypatch):
    mountinfo, own, mounts, _ = hybrid_host(kernel)
    stuck = kernel.mkdirs(mounts["pids"] / "kiln" / "slot-0-g0", procs=(4001,))
    monkeypatch.setattr(cgroupfs, "kill_members", lambda fd: 1)  # a process that SIGKILL does not end (D state)
    driver = cgroup_detect.choose_driver("v1", "kiln", log, mountinfo, own)
    monkeypatch.setattr(cgroupfs, "remove_tree", lambda path, timeout=0.05, _real=cgroupfs.remove_tree: _real(path, 0.05))
    with pytest.raises(CgroupError, match=r"slot-0-g0: processes \[4001\] survived SIGKILL"):
        driver.setup()
    assert stuck.is_dir()


def test_setup_reports_a_filesystem_failure_as_cgroup_error(kernel, log):
    mountinfo, own, mounts, _ = hybrid_host(kernel)
    kernel.refuse_mkdir.add(mounts["pids"] / "kiln")
    with pytest.raises(CgroupError, match=r"cgroup setup below .*/pids/kiln"):
        cgroup_detect.choose_driver("v1", "kiln", log, mountinfo, own).setup()


def test_v1_create_slot_holds_a_dir_fd_and_an_open_cgroup_procs_per_hierarchy(kernel, v1):
    slot = v1.create_slot("slot-3-g17")
    assert isinstance(slot, V1SlotCgroup) and slot.name == "slot-3-g17"
    dirs = v1_slot_dirs(v1, "slot-3-g17")
    assert slot.paths == tuple(map(str, dirs)) and all(d.is_dir() for d in dirs)
    fds = slot.fds()
    assert len(fds) == 6  # per hierarchy: the slot's dir and its cgroup.procs (the task moves itself)
    targets = sorted(os.readlink(f"/proc/self/fd/{fd}") for fd in fds)
    assert targets == sorted([str(d) for d in dirs] + [str(d / "cgroup.procs") for d in dirs])
    for fd in fds:
        assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        access = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        assert access == (os.O_WRONLY if target.name == "cgroup.procs" else os.O_RDONLY)
    v1.remove_slot(slot)


def test_v1_limits_are_written_in_order_memory_then_memsw_then_pids(kernel, v1):
    slot = v1.create_slot("slot-0-g1")
    apply_limits(slot, 64 * MiB, 10)
    memory, pids, _ = (kernel.rel(d) for d in v1_slot_dirs(v1, "slot-0-g1"))
    assert kernel.writes == [
        (f"{memory}/memory.limit_in_bytes", str(64 * MiB)),
        (f"{memory}/memory.memsw.limit_in_bytes", str(64 * MiB)),
        (f"{pids}/pids.max", "10"),
    ]
    v1.remove_slot(slot)


def test_v1_without_swap_accounting_sets_swappiness_0_instead(kernel, v1):
    kernel.missing_v1_files.add("memory.memsw.limit_in_bytes")
    slot = v1.create_slot("slot-0-g2")
    apply_limits(slot, 256 * MiB, 300)
    memory, pids, _ = (kernel.rel(d) for d in v1_slot_dirs(v1, "slot-0-g2"))
    assert kernel.writes == [
        (f"{memory}/memory.limit_in_bytes", str(256 * MiB)),
        (f"{memory}/memory.swappiness", "0"),
        (f"{pids}/pids.max", "300"),
    ]
    v1.remove_slot(slot)


def test_v1_slot_works_through_its_fds_once_the_paths_are_gone(kernel, v1, tmp_path):
    slot = v1.create_slot("slot-0-g3")
    hidden = tmp_path.parent / (tmp_path.name + "-hidden")
    tmp_path.rename(hidden)  # what pivot_root does to /sys, as far as paths go
    try:
        kernel.root = hidden
        kernel.hierarchies = {hidden / top.name: kind for top, kind in kernel.hierarchies.items()}
        apply_limits(slot, 64 * MiB, 10)
        join(slot)
        assert len(kernel.writes) == 6
        assert (hidden / "memory/process_api/x/kiln/slot-0-g3/memory.limit_in_bytes").read_text() == f"{64 * MiB}\n"
        assert kernel.procs(hidden / "pids/kiln/slot-0-g3") == [ME]
    finally:
        hidden.rename(tmp_path)
        kernel.root = tmp_path
    slot.close()


def test_v1_join_writes_0_to_each_hierarchys_cgroup_procs(kernel, v1):
    slot = v1.create_slot("slot-1-g1")
    join(slot)
    dirs = v1_slot_dirs(v1, "slot-1-g1")
    assert kernel.writes == [(f"{kernel.rel(d)}/cgroup.procs", "0") for d in dirs]
    assert all(kernel.procs(d) == [ME] for d in dirs)


def test_v1_stats_read_the_exact_counters(kernel, v1):
    slot = v1.create_slot("slot-1-g2")
    memory, pids, cpuacct = v1_slot_dirs(v1, "slot-1-g2")
    (memory / "memory.max_usage_in_bytes").write_text("67108864\n")
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (pids / "pids.events").write_text("max 7\n")
    (cpuacct / "cpuacct.usage").write_text("2500000\n")
    assert read_stats(slot) == Stats(memory_peak_bytes=64 * MiB, cpu_usage_ms=2.5, oom_kills=2, pids_limit_hits=7)
    # no oom_kill line (kernel < 4.13): 0, not a guess from memory.failcnt
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")
    (memory / "memory.failcnt").write_text("12\n")
    assert read_stats(slot).oom_kills == 0
    v1.remove_slot(slot)


def test_v1_kill_slot_kills_the_listed_pids_in_every_hierarchy(kernel, v1):
    slot = v1.create_slot("slot-1-g3")
    memory, pids, _ = v1_slot_dirs(v1, "slot-1-g3")
    kernel.set_procs(memory, [4001, 4002])
    kernel.set_procs(pids, [4001, 4002, 4003])
    v1.kill_slot(slot)
    assert sorted(kernel.killed) == [4001, 4002, 4003]
    assert not any(name.endswith("cgroup.kill") for name, _ in kernel.writes)


def test_remove_slot_closes_the_fds_and_removes_every_directory(kernel, v1):
    slot = v1.create_slot("slot-2-g1")
    fds = slot.fds()
    assert v1.remove_slot(slot) is True
    assert not any(d.exists() for d in v1_slot_dirs(v1, "slot-2-g1"))
    assert not any(map(is_open, fds)) and slot.fds() == set()


def test_remove_slot_on_ebusy_kills_and_retries(kernel, v1):
    slot = v1.create_slot("slot-2-g2")
    memory, pids, _ = v1_slot_dirs(v1, "slot-2-g2")
    kernel.set_procs(memory, [4001])
    kernel.set_procs(pids, [4001])
    kernel.busy[pids] = 2  # exiting tasks still pin the cgroup for a moment
    assert v1.remove_slot(slot) is True
    assert kernel.killed == [4001] and not memory.exists() and not pids.exists()


def test_remove_slot_never_raises(kernel, v1):
    slot = v1.create_slot("slot-2-g3")
    fds = slot.fds()
    _, pids, _ = v1_slot_dirs(v1, "slot-2-g3")
    kernel.busy[pids] = 10**6
    assert v1.remove_slot(slot, timeout=0.05) is False
    assert pids.is_dir() and not any(map(is_open, fds))
    kernel.busy[pids] = 0
    assert v1.remove_slot(slot) is True  # a second try, with nothing held any more
    assert not pids.exists()


def test_create_slot_that_fails_half_way_leaves_nothing(kernel, v1):
    before = open_fds()
    kernel.refuse_mkdir.add(Path(v1.instance_dirs[1]) / "slot-4-g1")
    with pytest.raises(CgroupError, match="cannot create slot cgroup slot-4-g1"):
        v1.create_slot("slot-4-g1")
    assert not any(d.exists() for d in v1_slot_dirs(v1, "slot-4-g1"))
    assert open_fds() == before


def test_create_slot_refuses_an_existing_cgroup_and_bad_names(kernel, v1):
    slot = v1.create_slot("slot-5-g1")
    with pytest.raises(CgroupError, match="File exists"):
        v1.create_slot("slot-5-g1")
    for name in ("supervisor", "slot-", "slot-a/b", "../slot-1", "slot-1 2", "x" * 70):
        with pytest.raises(ValueError, match="slot cgroup name"):
            v1.create_slot(name)
    v1.remove_slot(slot)



def test_v1_teardown_removes_empty_cgroups_and_leaves_busy_ones(kernel, v1):
    done = v1.create_slot("slot-7-g1")
    busy = v1.create_slot("slot-7-g2")
    busy_memory = v1_slot_dirs(v1, "slot-7-g2")[0]
    kernel.set_procs(busy_memory, [4001])
    done.close()
    busy.close()
    v1.teardown()
    assert not any(d.exists() for d in v1_slot_dirs(v1, "slot-7-g1"))
    assert busy_memory.is_dir() and Path(v1.instance_dirs[0]).is_dir()  # kept, nothing killed
    assert kernel.killed == []
    assert not Path(v1.instance_dirs[1]).exists() and not Path(v1.instance_dirs[2]).exists()


# --- v2 driver ---


def test_v2_setup_at_the_root_cgroup_moves_nothing_and_enables_controllers(kernel, log):
    top = kernel.v2_hierarchy("unified", "cpu memory pids hugetlb")
    kernel.set_procs(top, [1, ME, 777])
    driver = V2Driver(str(top), "kiln", log)
    assert driver.is_root()
    driver.setup(move_pids=[FRONT])
    assert kernel.writes == [
        ("unified/cgroup.subtree_control", "+memory +pids"),
        ("unified/cgroup.subtree_control", "+cpu"),
        ("unified/kiln/cgroup.subtree_control", "+memory +pids"),
        ("unified/kiln/cgroup.subtree_control", "+cpu"),
    ]
    assert kernel.procs(top) == [1, ME, 777]
    assert not (top / "kiln" / "supervisor").exists()
    assert (top / "kiln" / "cgroup.controllers").read_text().split() == ["memory", "pids", "cpu"]


def test_v2_setup_in_a_delegated_cgroup_moves_itself_and_the_front_first(kernel, log):
    mountinfo, own, _, base = pure_v2_host(kernel)
    kernel.set_procs(base, [FRONT, ME])
    driver = cgroup_detect.choose_driver("v2", "kiln", log, mountinfo, own)
    assert not driver.is_root()
    driver.setup(move_pids=[FRONT])
    b = kernel.rel(base)
    assert kernel.writes == [
        (f"{b}/kiln/supervisor/cgroup.procs", str(ME)),
        (f"{b}/kiln/supervisor/cgroup.procs", str(FRONT)),
        (f"{b}/cgroup.subtree_control", "+memory +pids"),
        (f"{b}/cgroup.subtree_control", "+cpu"),
        (f"{b}/kiln/cgroup.subtree_control", "+memory +pids"),
        (f"{b}/kiln/cgroup.subtree_control", "+cpu"),
        # the supervisor (the slots' inits) wins the CPU from the runs whenever it wants it
        (f"{b}/kiln/supervisor/cpu.weight", "10000"),
    ]
    assert kernel.procs(base) == [] and sorted(kernel.procs(base / "kiln" / "supervisor")) == sorted([ME, FRONT])
    slot = driver.create_slot("slot-0-g1")
    assert (base / "kiln" / "slot-0-g1" / "memory.max").exists() and (base / "kiln" / "slot-0-g1" / "pids.max").exists()
    driver.remove_slot(slot)


def test_v2_setup_never_moves_a_process_it_did_not_start(kernel, log):
    mountinfo, own, _, base = pure_v2_host(kernel)
    kernel.set_procs(base, [ME, 999])
    driver = cgroup_detect.choose_driver("v2", "kiln", log, mountinfo, own)
    with pytest.raises(CgroupError) as caught:
        driver.setup()
    message = str(caught.value)
    assert f"cannot enable memory pids in {base}/cgroup.subtree_control" in message
    assert "processes kiln did not start (999)" in message and "Delegate=yes" in message
    # refused before anything moved, and nothing of kiln's is left in the cgroup
    assert sorted(kernel.procs(base)) == sorted([ME, 999])
    assert not (base / "kiln").exists()


def test_v2_setup_again_writes_nothing(kernel, log):
    mountinfo, own, _, base = pure_v2_host(kernel)
    kernel.set_procs(base, [ME])
    driver = cgroup_detect.choose_driver("v2", "kiln", log, mountinfo, own)
    driver.setup()
    kernel.writes.clear()
    driver.setup()
    assert kernel.writes == []


def test_v2_cpu_is_optional(kernel, log):
    top = kernel.v2_hierarchy("unified", "memory pids cpu")
    kernel.refuse_enable.add("cpu")  # e.g. realtime threads in the way
    V2Driver(str(top), "kiln", log).setup()
    assert [w for w in kernel.writes if "+cpu" not in w[1]] == [("unified/cgroup.subtree_control", "+memory +pids"), ("unified/kiln/cgroup.subtree_control", "+memory +pids")]
    # refused in the base, so not offered to (nor tried in) kiln's subtree
    warnings = [r for r in log.records if r["level"] == "warning"]
    assert [(w["msg"], w["controller"], w["cgroup"]) for w in warnings] == [("cgroup controller not enabled", "cpu", str(top))]
    assert kernel.writes == [
        ("unified/cgroup.subtree_control", "+memory +pids"),
        ("unified/cgroup.subtree_control", "+cpu"),
        ("unified/kiln/cgroup.subtree_control", "+memory +pids"),
    ]

    kernel2_top = kernel.v2_hierarchy("nocpu", "memory pids")
    kernel.writes.clear()
    V2Driver(str(kernel2_top), "kiln", log).setup()
    assert kernel.writes == [("nocpu/cgroup.subtree_control", "+memory +pids"), ("nocpu/kiln/cgroup.subtree_control", "+memory +pids")]


@pytest.fixture
def v2(kernel, log):
    mountinfo, own, _, base = pure_v2_host(kernel)
    kernel.set_procs(base, [ME])
    driver = cgroup_detect.choose_driver("v2", "kiln", log, mountinfo, own)
    driver.setup()
    kernel.writes.clear()
    return driver


def test_v2_leftovers_are_killed_with_cgroup_kill_and_removed(kernel, log):
    mountinfo, own, _, base = pure_v2_host(kernel)
    kernel.set_procs(base, [ME])
    leftover = kernel.mkdirs(base / "kiln" / "slot-0-g1", procs=(4001, 4002))
    kernel.mkdirs(base / "kiln" / "slot-0-g1" / "inner", procs=(4003,))
    other = kernel.mkdirs(base / "other" / "slot-0-g1", procs=(5001,))
    old_supervisor = kernel.mkdirs(base / "kiln" / "supervisor", procs=(5002,))
    cgroup_detect.choose_driver("v2", "kiln", log, mountinfo, own).setup()
    b = kernel.rel(base)
    kills = [w for w in kernel.writes if w[0].endswith("cgroup.kill")]
    assert kills == [(f"{b}/kiln/slot-0-g1/inner/cgroup.kill", "1"), (f"{b}/kiln/slot-0-g1/cgroup.kill", "1")]
    assert sorted(kernel.killed) == [4001, 4002, 4003] and not leftover.exists()
    assert kernel.procs(other) == [5001] and kernel.procs(old_supervisor) == [5002, ME]


def test_v2_leftovers_without_cgroup_kill_are_killed_by_pid(kernel, log):
    kernel.missing_v2_files.add("cgroup.kill")  # kernel < 5.14
    top = kernel.v2_hierarchy("unified", "memory pids")
    leftover = kernel.mkdirs(top / "kiln" / "slot-9-g9", procs=(4001,))
    V2Driver(str(top), "kiln", log).setup()
    assert kernel.killed == [4001] and not leftover.exists()


def test_v2_create_slot_holds_one_dir_fd_and_one_cgroup_procs(kernel, v2):
    slot = v2.create_slot("slot-3-g17")
    assert isinstance(slot, V2SlotCgroup)
    path = Path(v2.instance_dir) / "slot-3-g17"
    assert slot.paths == (str(path),)
    assert sorted(os.readlink(f"/proc/self/fd/{fd}") for fd in slot.fds()) == sorted([str(path), str(path / "cgroup.procs")])
    assert all(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC for fd in slot.fds())
    v2.remove_slot(slot)


def test_v2_limits_memory_swap_oom_group_then_pids(kernel, v2):
    slot = v2.create_slot("slot-0-g2")
    apply_limits(slot, 64 * MiB, 10)
    s = kernel.rel(slot.paths[0])
    assert kernel.writes == [
        (f"{s}/memory.max", str(64 * MiB)),
        (f"{s}/memory.swap.max", "0"),
        (f"{s}/memory.oom.group", "1"),
        (f"{s}/pids.max", "10"),
    ]
    v2.remove_slot(slot)


def test_v2_limits_skip_files_the_kernel_does_not_offer(kernel, v2):
    kernel.missing_v2_files |= {"memory.swap.max", "memory.oom.group"}
    slot = v2.create_slot("slot-0-g3")
    apply_limits(slot, 64 * MiB, 10)
    s = kernel.rel(slot.paths[0])
    assert kernel.writes == [(f"{s}/memory.max", str(64 * MiB)), (f"{s}/pids.max", "10")]
    v2.remove_slot(slot)


def test_v2_limits_without_the_memory_controller_fail_loudly(kernel, log):
    top = kernel.v2_hierarchy("unified", "hugetlb")  # this machine's unified hierarchy
    driver = V2Driver(str(top), "kiln", log)
    driver.setup()
    slot = driver.create_slot("slot-0-g1")
    with pytest.raises(OSError, match="cgroup write '67108864' to memory.max") as caught:
        apply_limits(slot, 64 * MiB, 10)
    assert caught.value.errno == errno.ENOENT
    assert read_stats(slot) == Stats(memory_peak_bytes=None, cpu_usage_ms=0.0, oom_kills=0, pids_limit_hits=0)
    driver.remove_slot(slot)


def test_v2_slots_set_their_memory_peak_back_only_where_the_kernel_can(kernel, log):
    # Linux 6.12 gave memory.peak a write handler, which sets it back for the reads through the
    # descriptor that wrote: only then does a slot run a judge's tests one after another
    for resets in (False, True):
        kernel.peak_resets = resets
        driver = V2Driver(str(kernel.v2_hierarchy(f"unified-{resets}", "memory pids")), "kiln", log)
        assert not driver.peak_resettable  # not before setup has looked
        driver.setup()
        slot = driver.create_slot("slot-0-g1")
        assert driver.peak_resettable is resets and slot.peak_resettable is resets
        assert slot.peak_resets() == ((LimitWrite(0, "memory.peak", "reset"),) if resets else ())
        # before, a kept slot's tests after its first each take a cgroup of their own instead
        assert driver.test_cgroups is (not resets) and slot.test_cgroups is (not resets)
        assert bool(slot.test_cgroup_parent_writes(64 * MiB, 10)) is (not resets)
        driver.remove_slot(slot)
    ready = [r for r in log.records if r["msg"] == "cgroup subtree ready"]
    assert [(r["judge_tests_share_a_slot"], r["judge_tests_in_own_cgroups"]) for r in ready] == [(True, True), (True, False)]


def test_v2_before_6_12_a_kept_slots_later_tests_each_run_in_a_fresh_cgroup_below_the_slots(kernel, log):
    """As kiln-init runs them (kept.c): the first test in the slot's cgroup; once its processes
    are gone the slot's cgroup gives memory and pids to its children and takes the largest
    limits, and each later test gets test-<n> with the slot's limits, its own fresh figures,
    removed after it."""
    driver = V2Driver(str(kernel.v2_hierarchy("unified", "cpu memory pids")), "kiln", log)
    driver.setup()
    slot = driver.create_slot("slot-0-g1")
    s = Path(slot.paths[0])
    apply_limits(slot, 64 * MiB, 10)  # warming
    join(slot)  # the standby, then the first test's task, in the slot's own cgroup
    (s / "memory.peak").write_text(str(200 * MiB) + "\n")  # its check took much
    with pytest.raises(OSError) as caught:  # "no internal processes": not while a process is there
        enter_test_cgroup(slot, 1, 64 * MiB, 10, largest=(512 * MiB, 128))
    assert caught.value.errno == errno.EBUSY
    kernel.set_procs(s, [])  # the first test's processes all reaped (ready_for_next)
    kernel.writes.clear()
    for number in (1, 2):
        fd = enter_test_cgroup(slot, number, 64 * MiB, 10, largest=(512 * MiB, 128) if number == 1 else None)
        t = kernel.rel(s / f"test-{number}")
        parent = [(f"{kernel.rel(s)}/{f}", v) for f, v in [("cgroup.subtree_control", "+memory +pids"), ("memory.max", str(512 * MiB)), ("memory.swap.max", "0"), ("memory.oom.group", "1"), ("pids.max", "128")]]
        own = [(f"{t}/memory.max", str(64 * MiB)), (f"{t}/memory.swap.max", "0"), (f"{t}/memory.oom.group", "1"), (f"{t}/pids.max", "10")]
        assert kernel.writes == (parent if number == 1 else []) + own
        cgroupfs.write_file("cgroup.procs", "0", dir_fd=fd)  # the task, born there
        assert kernel.procs(s / f"test-{number}") == [ME] and kernel.procs(s) == []
        # its figures are its own from the start: no baseline, no peak to set back
        stats = [cgroupfs.read_file(f, dir_fd=fd).split() for f in ("memory.peak", "memory.events", "pids.events")]
        assert stats[0] == ["0"] and stats[1][stats[1].index("oom_kill") + 1] == "0" and stats[2] == ["max", "0"]
        kernel.set_procs(s / f"test-{number}", [])  # reaped
        leave_test_cgroup(slot, fd)
        assert not (s / f"test-{number}").exists()
        kernel.writes.clear()
    driver.remove_slot(slot)
    assert not s.exists()


def test_removing_a_slot_removes_the_test_cgroup_its_init_left(kernel, v2):
    # the slot ended during a later test (killed for outstaying it): its test-<n> is left, busy
    slot = v2.create_slot("slot-0-g9")
    s = Path(slot.paths[0])
    (s / "cgroup.subtree_control").write_text("memory pids\n")
    kernel.make_cgroup(str(s / "test-3"))
    kernel.set_procs(s / "test-3", [4005])
    assert v2.remove_slot(slot) is True
    assert 4005 in kernel.killed and not s.exists()


def test_v2_join_moves_the_caller_into_the_slot(kernel, v2):
    slot = v2.create_slot("slot-1-g1")
    join(slot)
    s = Path(slot.paths[0])
    assert kernel.writes == [(f"{kernel.rel(s)}/cgroup.procs", "0")]
    assert kernel.procs(s) == [ME] and kernel.procs(Path(v2.supervisor)) == []


def test_v2_stats(kernel, v2):
    slot = v2.create_slot("slot-1-g2")
    s = Path(slot.paths[0])
    (s / "memory.peak").write_text("9437184\n")
    (s / "cpu.stat").write_text("usage_usec 33000\nuser_usec 30000\nsystem_usec 3000\n")
    (s / "memory.events").write_text("low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 1\n")
    (s / "pids.events").write_text("max 3\n")
    assert read_stats(slot) == Stats(memory_peak_bytes=9437184, cpu_usage_ms=33.0, oom_kills=1, pids_limit_hits=3)
    (s / "memory.peak").unlink()  # kernel < 5.19
    assert read_stats(slot).memory_peak_bytes is None
    v2.remove_slot(slot)


def test_v2_kill_slot_uses_cgroup_kill(kernel, v2):
    slot = v2.create_slot("slot-1-g3")
    s = Path(slot.paths[0])
    kernel.set_procs(s, [4001, 4002])
    v2.kill_slot(slot)
    assert kernel.writes == [(f"{kernel.rel(s)}/cgroup.kill", "1")] and kernel.killed == [4001, 4002]
    v2.remove_slot(slot)


def test_v2_teardown_leaves_the_supervisor_kiln_is_in(kernel, v2):
    done, busy = v2.create_slot("slot-2-g1"), v2.create_slot("slot-2-g2")
    kernel.set_procs(Path(busy.paths[0]), [4001])
    done.close()
    busy.close()
    v2.teardown()
    assert not Path(done.paths[0]).exists() and Path(busy.paths[0]).is_dir()
    assert kernel.procs(Path(v2.supervisor)) == [ME] and Path(v2.instance_dir).is_dir()
    assert kernel.killed == []


def test_v2_teardown_at_the_root_removes_the_whole_subtree(kernel, log):
    top = kernel.v2_hierarchy("unified", "memory pids")
    driver = V2Driver(str(top), "kiln", log)
    driver.setup()
    driver.remove_slot(driver.create_slot("slot-0-g1"))
    driver.create_slot("slot-0-g2").close()
    driver.teardown()
    assert not (top / "kiln").exists()


# --- no cgroups ---


def test_no_cgroups_is_a_complete_no_op(kernel):
    driver = NoCgroups("no usable cgroup driver: because")
    assert driver.name == "off" and driver.reason == "no usable cgroup driver: because"
    driver.setup(move_pids=[FRONT])
    slot = driver.create_slot("slot-0-g1")
    assert slot.fds() == set()
    assert slot.limit_writes(64 * MiB, 10, None) == () and slot.stat_sources() == () and slot.fd_groups() == ((), ())
    driver.kill_slot(slot)
    assert driver.remove_slot(slot) is True
    driver.teardown()
    assert kernel.writes == [] and list(kernel.root.iterdir()) == []
    with pytest.raises(ValueError):
        driver.create_slot("../escape")


# --- the write helper itself ---


def test_write_file_names_the_file_and_keeps_the_errno(tmp_path):
    with pytest.raises(OSError) as caught:
        cgroupfs.write_file(str(tmp_path / "memory.max"), 5)
    assert caught.value.errno == errno.ENOENT and "cgroup write '5' to" in str(caught.value)
    (tmp_path / "pids.max").write_text("")
    cgroupfs.write_file(str(tmp_path / "pids.max"), 42)
    assert (tmp_path / "pids.max").read_text() == "42"


def test_migrations_are_favoured_only_with_favordynmods_on_a_cgroup_mount():
    assert not cgroup_detect.migrations_favoured(PURE_V2_MOUNTINFO)
    assert not cgroup_detect.migrations_favoured(HYBRID_MOUNTINFO)
    assert cgroup_detect.migrations_favoured(PURE_V2_MOUNTINFO.replace("memory_recursiveprot", "memory_recursiveprot,favordynmods"))
    v1 = "40 31 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids,favordynmods\n"
    assert cgroup_detect.migrations_favoured(v1)
    elsewhere = "50 1 0:40 / /mnt/favordynmods rw,relatime - tmpfs tmpfs rw,favordynmods\n"
    assert not cgroup_detect.migrations_favoured(elsewhere)



def test_v1_raising_the_memory_limit_writes_memsw_first(kernel, v1):
    slot = v1.create_slot("slot-0-g8")
    apply_limits(slot, 64 * MiB, 10)
    apply_limits(slot, 128 * MiB, 10, previous=(64 * MiB, 10))  # memsw may never be below the memory limit
    apply_limits(slot, 32 * MiB, 10, previous=(128 * MiB, 10))
    memory, _, _ = (kernel.rel(d) for d in v1_slot_dirs(v1, "slot-0-g8"))
    memory_writes = [(name.rsplit("/", 1)[1], value) for name, value in kernel.writes if name.startswith(memory)]
    assert memory_writes == [
        ("memory.limit_in_bytes", str(64 * MiB)),
        ("memory.memsw.limit_in_bytes", str(64 * MiB)),
        ("memory.memsw.limit_in_bytes", str(128 * MiB)),
        ("memory.limit_in_bytes", str(128 * MiB)),
        ("memory.limit_in_bytes", str(32 * MiB)),
        ("memory.memsw.limit_in_bytes", str(32 * MiB)),
    ]
    v1.remove_slot(slot)
