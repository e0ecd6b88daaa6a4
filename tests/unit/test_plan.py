"""The sandbox plan is plain data: its layout is checked here without root."""

from __future__ import annotations

import resource

from kiln.sandbox import plan
from kiln.sandbox.plan import HostPath


def make_root(**overrides) -> plan.RootPlan:
    args = dict(
        uid=10003,
        gid=10003,
        host_paths=(
            HostPath("/bin", "link", "usr/bin"),
            HostPath("/lib", "link", "usr/lib"),
            HostPath("/lib64", "link", "usr/lib64"),
            HostPath("/sbin", "missing"),
            HostPath("/usr", "dir"),
            HostPath("/etc/alternatives", "dir"),
            HostPath("/etc/ld.so.cache", "file"),
            HostPath("/etc/java-17-openjdk", "dir"),
            HostPath("/var/lib/ghc", "dir"),
        ),
        workspaces="/opt/kiln/langs",
        tmp_size=256 << 20,
        tmp_inodes=16384,
    )
    args.update(overrides)
    return plan.root_plan(**args)


def test_links_are_recreated_and_real_paths_bound_read_only():
    root = make_root()
    assert [(link.path, link.target) for link in root.links] == [("/bin", "usr/bin"), ("/lib", "usr/lib"), ("/lib64", "usr/lib64")]
    assert [(b.source, b.path, b.is_dir) for b in root.binds] == [
        ("/usr", "/usr", True),
        ("/etc/alternatives", "/etc/alternatives", True),
        ("/etc/ld.so.cache", "/etc/ld.so.cache", False),
        ("/etc/java-17-openjdk", "/etc/java-17-openjdk", True),
        ("/var/lib/ghc", "/var/lib/ghc", True),
    ]
    assert all(b.recursive for b in root.binds)
    # missing host paths are left out, not created
    assert "/sbin" not in {d.path for d in root.directories} | {b.path for b in root.binds}


def test_parents_of_nested_binds_exist_before_them():
    paths = [d.path for d in make_root().directories]
    assert paths.index("/var") < paths.index("/var/lib")
    assert "/etc" in paths and paths.count("/etc") == 1


def test_identity_files_name_the_slot_user_only():
    files = {f.path: f.content.decode() for f in make_root().files}
    assert set(files) == {"/etc/passwd", "/etc/group", "/etc/hosts"}
    assert "runner:x:10003:10003:runner:/sandbox:/bin/sh" in files["/etc/passwd"]
    assert files["/etc/passwd"].count("\n") == 3
    assert "runner:x:10003:" in files["/etc/group"]
    assert "kiln" in files["/etc/hosts"]


def test_kiln_dir_is_root_only_and_tmp_is_sticky():
    modes = {d.path: d.mode for d in make_root().directories}
    assert modes["/.kiln"] == 0o700 and modes["/.kiln/lower"] == 0o700 and modes["/.kiln/upper"] == 0o700
    assert modes["/tmp"] == 0o1777
    root = make_root()
    assert root.tmp.mode == 0o1777 and root.tmp.size == 256 << 20 and root.tmp.inodes == 16384


def test_dev_sys_and_devices():
    root = make_root()
    assert {d.path: (d.major, d.minor) for d in root.devices} == {
        "/dev/null": (1, 3),
        "/dev/zero": (1, 5),
        "/dev/full": (1, 7),
        "/dev/random": (1, 8),
        "/dev/urandom": (1, 9),
    }
    assert root.dev.readonly and root.dev.noexec and not root.dev.nodev  # device nodes must work
    assert root.sys.readonly and root.sys.noexec and root.sys.nodev
    assert {link.path: link.target for link in root.dev_links}["/dev/fd"] == "/proc/self/fd"
    assert root.workspaces.path == "/.kiln/lower/ws" and not root.workspaces.recursive


def test_tmpfs_options():
    assert plan.Tmpfs("/tmp", size=1024, inodes=64, mode=0o1777).options == "size=1024,nr_inodes=64,mode=1777"


def test_workspace_plan_sizes_upper_and_tmp_alike():
    job = plan.workspace_plan(lower="/.kiln/lower/ws/python", size=64 << 20, inodes=100, writable_dirs=("check",))
    assert job.upper.path == "/.kiln/upper" and job.upper.size == 64 << 20 and job.upper.inodes == 100
    assert job.tmp.path == "/tmp" and job.tmp.size == 64 << 20 and job.tmp.inodes == 100
    assert job.writable_dirs == ()  # check/ is made in every slot's upper layer while warming


def test_rlimits():
    """The terms kiln-init sets the task's rlimits from (task.c take_limits, cpu_limit_s)."""
    assert plan.cpu_rlimit_terms(2) == (2, 1)  # timeout rounded up, times CPUs, plus 1 s
    assert plan.cpu_rlimit_terms(0) == (1, 1)
    limits = dict(plan.fixed_rlimits(256))
    assert limits[resource.RLIMIT_NOFILE] == 256
    assert limits[resource.RLIMIT_NPROC] == 256 + 64  # above the pids cgroup limit
    assert limits[resource.RLIMIT_CORE] == 0
    assert limits[resource.RLIMIT_FSIZE] == 64 << 20
    assert resource.RLIMIT_AS not in limits and resource.RLIMIT_CPU not in limits  # AS: `ulimit -v` in the task's sh


def test_task_env_cannot_override_path_or_home():
    env = dict(plan.task_env(path="/usr/bin:/bin", inherited=(("LANG", "C.UTF-8"), ("PATH", "/evil")), language=(("GOCACHE", "/sandbox/.cache"), ("HOME", "/root"))))
    assert env == {"PATH": "/usr/bin:/bin", "HOME": "/sandbox", "USER": "runner", "LOGNAME": "runner", "PWD": "/sandbox", "LANG": "C.UTF-8", "GOCACHE": "/sandbox/.cache"}
