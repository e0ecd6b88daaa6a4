"""The sandbox as plain data: what to mount, create and set, decided before any syscall.

- RootPlan: a slot's root filesystem, built while warming (no request yet);
- WorkspacePlan: what a language's request adds: the workspace overlay, /tmp's size, the
  directories given to the task; the request's files then go below /sandbox;
- the task's environment and the terms of its rlimits (task_env, cpu_rlimit_terms,
  fixed_rlimits; kiln-init sets them, RLIMIT_CPU from the run's timeout).

Builders here are pure (they read nothing but their arguments), so the whole sandbox layout is
unit-testable without root. kiln.zygote.recipe compiles the plans into the steps kiln-init
applies, in order (kiln/native/init.c).
"""

from __future__ import annotations

import posixpath
import resource
from dataclasses import dataclass

# Inside the new root: root-only (0700) folder that holds the workspaces bind and the per-request
# upper layer. overlayfs needs its layers visible in the mounting process's mount namespace.
KILN_DIR = "/.kiln"
# the overlay's lower layers, bound read-only below one small tmpfs of their own, so that one
# detach takes both out of the task's view once the overlay holds them
LOWER_DIR = f"{KILN_DIR}/lower"
WORKSPACES_DIR = f"{LOWER_DIR}/ws"
LAYERS_DIR = f"{LOWER_DIR}/layers"  # the judge's builds (Runtime.layers_dir), read-only
UPPER_DIR = f"{KILN_DIR}/upper"
OVERLAY_UPPER = f"{UPPER_DIR}/upper"  # the overlay's upper layer: /sandbox's own files
OVERLAY_WORK = f"{UPPER_DIR}/work"
# Made in the upper layer while warming, owned by the slot's user: the overlay merges them with
# the workspace's, so a job pays no copy-up to write there. Every workspace has check/ (dart's
# lib/ is copied up per job like any language's writable_dirs).
PREMADE_DIRS = ("check",)
# In a user namespace the kernel mounts a new procfs only where one is already fully visible:
# the root image keeps one here (root-only, from before pivot_root), each slot mounts its own
# /proc and detaches this one (recipe.finish_ops).
PROC_ANCHOR = f"{KILN_DIR}/proc"
SANDBOX_DIR = "/sandbox"
HOSTNAME = "kiln"
TASK_USER = "runner"

MERGED_USR_LINKS = ("/bin", "/lib", "/lib64", "/sbin")


@dataclass(frozen=True)
class Directory:
    path: str
    mode: int = 0o755


@dataclass(frozen=True)
class Link:
    path: str
    target: str


@dataclass(frozen=True)
class Bind:
    """A read-only, nosuid, nodev bind of a host path (file or directory) at the same path."""

    source: str
    path: str
    is_dir: bool
    recursive: bool = True


@dataclass(frozen=True)
class File:
    path: str
    content: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Device:
    path: str
    major: int
    minor: int
    mode: int = 0o666


@dataclass(frozen=True)
class Tmpfs:
    path: str
    size: int
    inodes: int
    mode: int
    noexec: bool = False
    nodev: bool = True
    readonly: bool = False

    @property
    def options(self) -> str:
        return f"size={self.size},nr_inodes={self.inodes},mode={self.mode:o}"


@dataclass(frozen=True)
class RootPlan:
    root: Tmpfs  # at the staging directory on the host, then pivoted to "/"
    directories: tuple[Directory, ...]
    links: tuple[Link, ...]
    binds: tuple[Bind, ...]
    files: tuple[File, ...]
    dev: Tmpfs
    devices: tuple[Device, ...]
    dev_links: tuple[Link, ...]
    tmp: Tmpfs
    sys: Tmpfs
    lower: Tmpfs  # at LOWER_DIR: holds the binds of the workspaces and the layers
    workspaces: Bind  # the workspaces folder, at WORKSPACES_DIR
    upper: Tmpfs  # at UPPER_DIR: the overlay's upper and work dirs, resized per job
    uid: int
    gid: int
    layers: Bind | None = None  # the judge's builds folder, at LAYERS_DIR
    hostname: str = HOSTNAME
    # rootless (kiln/rootless.py): devices are the host's nodes bound (mknod takes root), and
    # /proc is mounted beside a procfs kept at PROC_ANCHOR
    in_user_namespace: bool = False
    # the workspaces and the layers folders held by the zygote as read-only clones, passed to each
    # slot's init (native.probe_lower says where the kernel can): the root has no lower binds,
    # and the job's overlay names its lower layers through the clones, detaching nothing
    lower_held: bool = False


@dataclass(frozen=True)
class WorkspacePlan:
    upper: Tmpfs  # holds the overlay's upper and work dirs
    lower: str  # the language's workspace, below WORKSPACES_DIR
    tmp: Tmpfs  # /tmp remounted at the language's size
    writable_dirs: tuple[str, ...]  # below /sandbox, chowned to the task (copied up)


def upper_layer_dirs() -> tuple[tuple[str, int, bool], ...]:
    """(path, mode, owned by the task) made in a slot's upper layer while warming: the overlay's
    root (/sandbox) and check/ take the upper dirs' owner."""
    return ((OVERLAY_UPPER, 0o755, True), (OVERLAY_WORK, 0o700, False), *((f"{OVERLAY_UPPER}/{d}", 0o755, True) for d in PREMADE_DIRS))


@dataclass(frozen=True)
class HostPath:
    """What the plan builder needs to know of one host path (gathered by the caller)."""

    path: str
    file_type: str  # "dir", "file", "link", "missing"
    link_target: str = ""


def root_plan(
    *,
    uid: int,
    gid: int,
    host_paths: tuple[HostPath, ...],
    workspaces: str,
    tmp_size: int,
    tmp_inodes: int,
    layers: str | None = None,
    in_user_namespace: bool = False,
    lower_held: bool = False,
) -> RootPlan:
    """The root filesystem of a slot whose task runs as uid/gid.

    `host_paths` describes /bin /lib /lib64 /sbin and every read-only path (RUN_READONLY_PATHS
    and the languages' extras): links are recreated as links (merged-/usr Debian), real
    directories and files are bound read-only, missing ones are left out.
    """
    directories = [
        Directory("/etc"),
        Directory(SANDBOX_DIR),
        Directory("/tmp", 0o1777),
        Directory("/dev"),
        Directory("/proc", 0o555),
        Directory("/sys", 0o555),
        Directory(KILN_DIR, 0o700),
        Directory(LOWER_DIR, 0o700),
        Directory(UPPER_DIR, 0o700),
        *((Directory(PROC_ANCHOR, 0o700),) if in_user_namespace else ()),
    ]
    links: list[Link] = []
    binds: list[Bind] = []
    for host in host_paths:
        if host.file_type == "link":
            links.append(Link(host.path, host.link_target))
        elif host.file_type in ("dir", "file"):
            binds.append(Bind(host.path, host.path, is_dir=host.file_type == "dir"))
    known = {d.path for d in directories}
    for bind in binds:  # parents of bind targets, e.g. /etc/java-17-openjdk needs /etc
        parent = posixpath.dirname(bind.path if not bind.is_dir else bind.path.rstrip("/"))
        chain = []
        while parent not in ("/", "") and parent not in known:
            chain.append(parent)
            parent = posixpath.dirname(parent)
        for path in reversed(chain):
            directories.append(Directory(path))
            known.add(path)
    return RootPlan(
        root=Tmpfs("/", size=1024 * 1024, inodes=1024, mode=0o755),
        directories=tuple(directories),
        links=tuple(links),
        binds=tuple(binds),
        files=(
            File("/etc/passwd", _passwd(uid, gid)),
            File("/etc/group", _group(gid)),
            File("/etc/hosts", f"127.0.0.1\tlocalhost {HOSTNAME}\n::1\tlocalhost\n".encode()),
        ),
        dev=Tmpfs("/dev", size=64 * 1024, inodes=64, mode=0o755, noexec=True, nodev=False, readonly=True),
        devices=(
            Device("/dev/null", 1, 3),
            Device("/dev/zero", 1, 5),
            Device("/dev/full", 1, 7),
            Device("/dev/random", 1, 8),
            Device("/dev/urandom", 1, 9),
        ),
        dev_links=(
            Link("/dev/fd", "/proc/self/fd"),
            Link("/dev/stdin", "/proc/self/fd/0"),
            Link("/dev/stdout", "/proc/self/fd/1"),
            Link("/dev/stderr", "/proc/self/fd/2"),
            Link("/dev/shm", "/tmp"),
        ),
        tmp=Tmpfs("/tmp", size=tmp_size, inodes=tmp_inodes, mode=0o1777),
        sys=Tmpfs("/sys", size=4096, inodes=4, mode=0o555, noexec=True, readonly=True),
        lower=Tmpfs(LOWER_DIR, size=4096, inodes=8, mode=0o700, readonly=True),
        workspaces=Bind(workspaces, WORKSPACES_DIR, is_dir=True, recursive=False),
        upper=Tmpfs(UPPER_DIR, size=tmp_size, inodes=tmp_inodes, mode=0o700),
        uid=uid,
        gid=gid,
        layers=Bind(layers, LAYERS_DIR, is_dir=True, recursive=False) if layers else None,
        in_user_namespace=in_user_namespace,
        lower_held=lower_held,
    )


def _passwd(uid: int, gid: int) -> bytes:
    return (
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"{TASK_USER}:x:{uid}:{gid}:{TASK_USER}:{SANDBOX_DIR}:/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    ).encode()


def _group(gid: int) -> bytes:
    return f"root:x:0:\n{TASK_USER}:x:{gid}:\nnogroup:x:65534:\n".encode()


def workspace_plan(*, lower: str, size: int, inodes: int, writable_dirs: tuple[str, ...]) -> WorkspacePlan:
    return WorkspacePlan(
        upper=Tmpfs(UPPER_DIR, size=size, inodes=inodes, mode=0o700),
        lower=lower,
        tmp=Tmpfs("/tmp", size=size, inodes=inodes, mode=0o1777),
        writable_dirs=tuple(d for d in writable_dirs if d not in PREMADE_DIRS),
    )


def cpu_rlimit_terms(cpus: int) -> tuple[int, int]:
    """RLIMIT_CPU = (the timeout in started seconds) * per_second + extra: every core busy for
    the whole run, and one second more (kiln-init computes it, limits.c cpu_limit_s). It is only a
    backstop behind the wall-clock timeout: multi-threaded runtimes burn more CPU time than wall
    time."""
    return max(cpus, 1), 1


def fixed_rlimits(pids_max: int) -> tuple[tuple[int, int], ...]:
    """The task's rlimits that do not depend on the run's timeout. RLIMIT_NPROC is per uid and
    checked before the pids cgroup, so it sits above RUN_PIDS_MAX, or the cgroup's limit could
    never be observed; RLIMIT_AS (RUN_MEMORY_MAX) is set by the test command's sh."""
    return (
        (resource.RLIMIT_NOFILE, 256),
        (resource.RLIMIT_NPROC, pids_max + 64),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, 64 * 1024 * 1024),
    )


def task_env(*, path: str, inherited: tuple[tuple[str, str], ...], language: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    # PWD: what sh would have exported, for a program that runs without it
    env = {"PATH": path, "HOME": SANDBOX_DIR, "USER": TASK_USER, "LOGNAME": TASK_USER, "PWD": SANDBOX_DIR}
    env.update(inherited)
    env.update(language)
    env["PATH"], env["HOME"], env["PWD"] = path, SANDBOX_DIR, SANDBOX_DIR  # never overridden
    return tuple(env.items())
