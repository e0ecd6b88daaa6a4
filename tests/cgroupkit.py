"""A slot cgroup's data applied to a kernel as kiln-init applies it (native/ops.c write_cgroup,
result.c read_stat, the task's join in task.c take_identity), for the tests of that data against
the real kernel (tests/sandbox) and the unit tests' fake one. kiln itself has no Python twin of
this work: kiln-init does it, from the recipe."""

from __future__ import annotations

import os
from dataclasses import dataclass

from kiln.sandbox import cgroupfs
from kiln.sandbox.cgroups import TEST_CGROUP_PREFIX, SlotCgroup


@dataclass(frozen=True)
class Stats:
    memory_peak_bytes: int | None  # None: the kernel keeps no peak (v2 before 5.19)
    cpu_usage_ms: float | None
    oom_kills: int  # 0 without a counter
    pids_limit_hits: int


def apply_limits(slot: SlotCgroup, memory_max: int, pids_max: int, previous: tuple[int, int] | None = None) -> None:
    """The writes that take the slot from `previous` limits (None: fresh) to these, in order."""
    dirs, _ = slot.fd_groups()
    for write in slot.limit_writes(memory_max, pids_max, previous):
        cgroupfs.write_file(write.file, write.value, dir_fd=dirs[write.dir_index])


def join(slot: SlotCgroup) -> None:
    """Move the calling process into the slot's cgroup(s), as a task does."""
    for fd in slot.fd_groups()[1]:
        cgroupfs.write_fd(fd, b"0")


def read_stats(slot: SlotCgroup) -> Stats:
    dirs, _ = slot.fd_groups()
    values = {}
    for source in slot.stat_sources():
        text = cgroupfs.read_file(source.file, dirs[source.dir_index])
        if source.key:
            lines = dict(line.split(maxsplit=1) for line in (text or "").splitlines() if len(line.split()) == 2)
            number = lines.get(source.key, "")
        else:
            number = (text or "").strip()
        values[source.what] = int(number) / source.divisor if number.lstrip("-").isdigit() else None
    peak = values.get("memory_peak")
    return Stats(
        memory_peak_bytes=None if peak is None else int(peak),
        cpu_usage_ms=values.get("cpu"),
        oom_kills=int(values.get("oom_kills") or 0),
        pids_limit_hits=int(values.get("pids_hits") or 0),
    )


def enter_test_cgroup(slot: SlotCgroup, number: int, memory_max: int, pids_max: int, largest: tuple[int, int] | None) -> int:
    """A kept slot's later test's own cgroup, as kiln-init makes it (kept.c enter_test_cgroup):
    the slot's own made its parent first where `largest` (the largest limits: the recipe's
    K_TEST_CG_PARENT, once a slot), then TEST_CGROUP_PREFIX<number> made below it and given the
    slot's limit writes as a fresh cgroup. Returns the test's cgroup's directory fd, which stands
    in for the slot's directory 0 while the test runs."""
    dirs, _ = slot.fd_groups()
    if largest is not None:
        for write in slot.test_cgroup_parent_writes(*largest):
            cgroupfs.write_file(write.file, write.value, dir_fd=dirs[write.dir_index])
    path = os.path.join(os.readlink(f"/proc/self/fd/{dirs[0]}"), f"{TEST_CGROUP_PREFIX}{number}")
    cgroupfs.make_cgroup(path)
    fd = os.open(path, cgroupfs.DIR_FLAGS)
    for write in slot.limit_writes(memory_max, pids_max, previous=None):
        cgroupfs.write_file(write.file, write.value, dir_fd=fd if write.dir_index == 0 else dirs[write.dir_index])
    return fd


def leave_test_cgroup(slot: SlotCgroup, fd: int) -> None:
    """The test's cgroup removed once its processes are gone (kept.c leave_test_cgroup)."""
    path = os.readlink(f"/proc/self/fd/{fd}")
    os.close(fd)
    cgroupfs.remove_cgroup(path)
