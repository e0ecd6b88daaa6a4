"""The kernel features kiln relies on, with the Linux version that brought each, and what kiln
does where one is missing (`without`; None: kiln cannot build its sandbox without it and refuses
to start). `kiln check-host` prints the survey; `kiln serve` refuses a kernel that lacks a
needed feature and logs what it does instead of each missing optional one.

A feature is probed where a probe is cheap and exact (a system call that answers ENOSYS, a
filesystem type, a namespace file), since distributions backport; else the release's version
decides. The cgroup files are looked for in the v2 hierarchy, where kiln reads them.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from dataclasses import dataclass
from typing import Callable

# x86_64's numbers; from 424 on, every architecture numbers system calls alike
_SYSCALLS = {"open_tree": 428, "pidfd_open": 434, "clone3": 435, "close_range": 436, "openat2": 437, "pidfd_getfd": 438, "mount_setattr": 442}


@dataclass(frozen=True)
class Feature:
    name: str
    version: tuple[int, int]  # the Linux release that brought it
    use: str  # what kiln does with it
    without: str | None  # what kiln does where it is missing; None: needed
    probe: Callable[[], bool | None] | None = None  # None, or a probe that answers None: the version decides

    @property
    def since(self) -> str:
        return f"Linux {self.version[0]}.{self.version[1]}"


def _has_syscall(name: str) -> Callable[[], bool]:
    def probe() -> bool:
        libc = ctypes.CDLL(None, use_errno=True)
        # every argument invalid: a kernel that has the call refuses them (EBADF, EINVAL,
        # EFAULT, EPERM under a container's filter); one that lacks it says ENOSYS
        libc.syscall(ctypes.c_long(_SYSCALLS[name]), ctypes.c_long(-1), ctypes.c_void_p(0), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
        return ctypes.get_errno() != errno.ENOSYS

    return probe


def _has_filesystem(name: str, module: str) -> Callable[[], bool | None]:
    """Registered, or a module the kernel loads at the first mount (Debian's overlay is one):
    listed in the release's modules.builtin or modules.dep. None where the modules' folder is
    out of sight (a container)."""

    def probe() -> bool | None:
        with open("/proc/filesystems") as listed:
            if any(line.split()[-1] == name for line in listed if line.strip()):
                return True
        folder = os.path.join("/lib/modules", os.uname().release)
        if not os.path.isdir(folder):
            return None
        for index in ("modules.builtin", "modules.dep"):
            try:
                with open(os.path.join(folder, index)) as modules:
                    if any(line.split(":", 1)[0].endswith((f"/{module}.ko", f"/{module}.ko.xz", f"/{module}.ko.zst")) for line in modules):
                        return True
            except FileNotFoundError:
                continue
        return False

    return probe


def _has_clone_into_cgroup() -> bool:
    """clone3 with CLONE_INTO_CGROUP of a descriptor that cannot be open (above any nr_open): a
    kernel that has the flag gets as far as the descriptor (EBADF, no process made); one without
    says E2BIG (arguments larger than it knows) or EINVAL, one without clone3 (or a container's
    filter that hides it) ENOSYS."""
    libc = ctypes.CDLL(None, use_errno=True)
    clone_into_cgroup, unopenable = 0x200000000, 0x7FFFFFFF
    args = (ctypes.c_uint64 * 11)(clone_into_cgroup, *[0] * 9, unopenable)  # struct clone_args: .cgroup last
    libc.syscall(ctypes.c_long(_SYSCALLS["clone3"]), ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args)))
    return ctypes.get_errno() == errno.EBADF


def _v2_memory_folder() -> str | None:
    """A cgroup v2 cgroup with the memory controller's files: this process's own (the root
    cgroup has none: then its first child that has memory.max); None where none is in sight (a
    v1 host)."""
    from kiln.sandbox.cgroup_detect import own_v2_folder  # noqa: PLC0415

    own = own_v2_folder()
    if own is None:
        return None
    candidates = [own, *(entry.path for entry in os.scandir(own) if entry.is_dir(follow_symlinks=False))]
    return next((c for c in candidates if os.path.exists(os.path.join(c, "memory.max"))), None)


def _has_v2_file(name: str) -> Callable[[], bool | None]:
    """Whether cgroup v2 cgroups have the file; None where no v2 cgroup with the memory
    controller is in sight."""

    def probe() -> bool | None:
        folder = _v2_memory_folder()
        return None if folder is None else os.path.exists(os.path.join(folder, name))

    return probe


def _v2_memory_peak_resets() -> bool | None:
    from kiln.sandbox.cgroupfs import memory_peak_resets  # noqa: PLC0415

    folder = _v2_memory_folder()
    return None if folder is None else memory_peak_resets(folder)


FEATURES = (
    Feature("cgroup namespaces", (4, 6), "a task sees its own cgroup as /", None, lambda: os.path.exists("/proc/self/ns/cgroup")),
    Feature("overlayfs", (3, 18), "a run's workspace is the language's files below its own writes", None, _has_filesystem("overlay", "overlay")),
    Feature("the mount API (open_tree, move_mount, fsopen, fsmount)", (5, 2), "slots' roots are built of detached mounts", None, _has_syscall("open_tree")),
    Feature("pidfd_open", (5, 3), "kills never hit a recycled pid", None, _has_syscall("pidfd_open")),
    Feature("openat2 (RESOLVE_BENEATH)", (5, 6), "a submission's files are written beneath its folder, never through a link", None, _has_syscall("openat2")),
    Feature("pidfd_getfd", (5, 6), "a slot's descriptors are handed over", None, _has_syscall("pidfd_getfd")),
    Feature("clone3 with CLONE_INTO_CGROUP", (5, 7), "a task's process is created in its slot's v2 cgroup: it never migrates (an RCU grace period)",
            "it joins by cgroup.procs while its slot warms (a judge's later tests: on the request's path)", _has_clone_into_cgroup),  # fmt: skip
    Feature("procfs subset=pid, hidepid=invisible", (5, 8), "a task's /proc shows its own processes and nothing of the host", None),
    Feature("close_range (CLOSE_RANGE_UNSHARE)", (5, 9), "a task starts with no descriptor of its init", None, _has_syscall("close_range")),
    Feature("mount_setattr", (5, 12), "binds are read-only recursively", None, _has_syscall("mount_setattr")),
    Feature("cpu.pressure's full line per cgroup (PSI)", (5, 13), "a run's deadline moves by the time its cgroup waited for a CPU others held, as the kernel counts it",
            "that time is estimated from its threads' schedstat", _has_v2_file("cpu.pressure")),  # fmt: skip
    Feature("cgroup.kill", (5, 14), "a slot's processes are killed at once, forks in flight included",
            "kiln kills the pids cgroup.procs lists, in rounds until none is left", _has_v2_file("cgroup.kill")),  # fmt: skip
    Feature("memory.peak (cgroup v2)", (5, 19), "a run's peak memory is its cgroup's", "a run's peak is its task's own (rusage), without its children's", _has_v2_file("memory.peak")),
    Feature("cgroup v2 favordynmods", (6, 0), "a task joins its cgroup without waiting an RCU grace period",
            "a judge's later test may wait 3-8 ms to join its cgroup after a pause"),  # fmt: skip
    Feature("memory.peak set back per open file (cgroup v2)", (6, 12), "a slot runs a judge's tests one after another, each with its own peak",
            "a kept slot's tests after its first each run in a cgroup of their own below the slot's, made and removed by its init", _v2_memory_peak_resets),  # fmt: skip
    Feature("an overlay on a detached mount clone", (6, 15), "every slot's overlay takes its lower layers from the zygote's clones",
            "each slot binds the workspaces and layers folders into its root, and a run detaches its binds"),  # fmt: skip
)


def release_version(release: str) -> tuple[int, int]:
    """'6.1.0-57-amd64' -> (6, 1)."""
    found = re.match(r"(\d+)\.(\d+)", release)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def present(feature: Feature, version: tuple[int, int]) -> bool:
    if feature.probe is not None:
        try:
            found = feature.probe()
        except OSError:
            found = None
        if found is not None:
            return found
    return version >= feature.version


def survey(release: str | None = None) -> list[tuple[Feature, bool]]:
    version = release_version(release or os.uname().release)
    return [(feature, present(feature, version)) for feature in FEATURES]


def missing_needed(surveyed: list[tuple[Feature, bool]]) -> list[Feature]:
    return [feature for feature, found in surveyed if not found and feature.without is None]


def describe_missing(feature: Feature) -> str:
    head = f"{feature.name} missing ({feature.since}+; with it {feature.use})"
    return f"{head}: kiln cannot sandbox without it" if feature.without is None else f"{head}; without it, {feature.without}"
