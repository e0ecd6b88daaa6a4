"""Cgroup limits and accounting for slots: the driver interface and the helpers both drivers
share (cgroup_detect.py picks the driver, cgroup_v1.py and cgroup_v2.py are the drivers).

    driver = cgroup_detect.open_driver(config.cgroup, config.instance, log)  # at startup
    driver.setup(move_pids=(front_pid,))   # kiln's subtree; removes a crashed kiln's leftovers
    slot = driver.create_slot("slot-3-g17")  # zygote, before spawning the slot's init
    # kiln-init keeps slot.fd_groups() through pivot_root and applies, through them, what the
    # recipe holds of these (kiln/zygote/recipe.py): kiln has no Python twin of that work
    slot.limit_writes(memory_max, pids_max, previous)  # slot init, while warming and per job
    slot.fd_groups()                       # the task joins through their cgroup.procs
    slot.stat_sources()                    # slot init, after the run
    driver.kill_slot(slot)                 # zygote, for a slot that outstayed its run
    driver.remove_slot(slot)               # zygote, once the slot's processes are all dead
    driver.teardown()                      # zygote, at shutdown

Layout, where <base> is the cgroup kiln runs in (read from /proc/self/cgroup):

    v2:  <base>/<instance>/supervisor  kiln's own processes (only when <base> is not the root
                                       cgroup: "no internal processes" forbids enabling
                                       controllers in a cgroup that holds processes)
         <base>/<instance>/slot-...    one per slot generation
    v1:  <base>/<instance>/slot-...    in each of the memory, pids and cpuacct hierarchies
                                       (and cpu's, where mounted)

After create_slot everything works through the slot's directory fds (openat), because the
slot's pivot_root hides /sys. The filesystem calls are cgroupfs.py's. cgroup_detect.read_own_view
is the only function that reads the real /proc; nothing here touches a cgroup outside
`<base>/<instance>`.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Iterable

from kiln.sandbox import cgroupfs
from kiln.sandbox.cgroupfs import CgroupError  # noqa: F401 - the drivers' error, raised there too

DELEGATE_HINT = "run kiln under systemd with Delegate=yes, or `systemd-run --scope -p Delegate=yes kiln serve`"
SUPERVISOR = "supervisor"
# a kept slot's tests after its first, each in a child cgroup of the slot's own where the memory
# peak cannot be set back (SlotCgroup.test_cgroups): "test-<n>", made and removed by kiln-init
TEST_CGROUP_PREFIX = "test-"
_INSTANCE = re.compile(r"[a-z][a-z0-9_-]{0,31}")  # as RUN_INSTANCE in config.py
_SLOT_NAME = re.compile(r"slot-[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class LimitWrite:
    """One file write of a limit, in a slot's cgroup directory number `dir_index`."""

    dir_index: int
    file: str
    value: str


@dataclass(frozen=True)
class StatSource:
    """Where one figure of CgroupStats is read: a file of directory `dir_index`, the number
    it holds or, with `key`, the value of its "key value" line; divided by `divisor`."""

    what: str  # "memory_peak", "cpu" (ms), "oom_kills", "pids_hits", "cpu_starved" (ms)
    dir_index: int
    file: str
    key: str = ""
    divisor: int = 1


# --- names ---


def check_instance(instance: str) -> None:
    if not _INSTANCE.fullmatch(instance):
        raise ValueError(f"cgroup instance {instance!r}: must be 1 to 32 of a-z 0-9 _ -, starting with a-z")


def check_slot_name(name: str) -> None:
    if not _SLOT_NAME.fullmatch(name):
        raise ValueError(f"slot cgroup name {name!r}: must be slot-<letters, digits, _ ->")


# --- the interface ---


class SlotCgroup:
    """One slot's cgroup: a directory fd per hierarchy and the slot's cgroup.procs, opened for
    writing, per hierarchy. The slot's init (kiln-init) inherits them and works through them
    after pivot_root hid /sys; what it writes and reads is data here (limit_writes,
    stat_sources), which the tests apply to the kernel as kiln-init does (tests/cgroupkit.py)."""

    def __init__(self, name: str, paths: tuple[str, ...], dir_fds: tuple[int, ...], procs_fds: tuple[int, ...]):
        self.name = name
        self.paths = paths  # for the zygote's removal and for logs; useless after pivot_root
        self._dir_fds = dir_fds
        self._procs_fds = procs_fds
        self.limits: tuple[int, int] | None = None  # (memory_max, pids_max) last written

    def fds(self) -> set[int]:
        """Every fd this object uses: the slot's init keeps them (slot.spawn)."""
        return set(self._dir_fds) | set(self._procs_fds)

    def fd_groups(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(directories, cgroup.procs), in the order limit_writes and stat_sources number the
        directories: what kiln-init is handed (the task writes "0" to each cgroup.procs)."""
        return tuple(self._dir_fds), tuple(self._procs_fds)

    def limit_writes(self, memory_max: int, pids_max: int, previous: tuple[int, int] | None) -> tuple[LimitWrite, ...]:
        """The writes, in order, that take the slot from `previous` limits (None: a fresh
        cgroup) to these. kiln-init is handed them precomputed (recipe.py)."""
        raise NotImplementedError

    # whether the memory peak can be set back to the current usage (peak_resets): then a slot may
    # run a judge's tests one after another, each with its own peak
    peak_resettable = True

    def peak_resets(self) -> tuple[LimitWrite, ...]:
        """The writes that set the memory peak back to the current usage, between two tests."""
        return ()

    # where the peak cannot be set back (v2 before Linux 6.12): a kept slot's tests after its
    # first each run in a child cgroup of the slot's own, TEST_CGROUP_PREFIX + their number, whose
    # figures are all fresh (kiln-init kept.c); the first runs in the slot's cgroup, as a /run does
    test_cgroups = False

    def test_cgroup_parent_writes(self, memory_max: int, pids_max: int) -> tuple[LimitWrite, ...]:
        """With test_cgroups: the writes that make the slot's own cgroup the parent of its tests'
        (once its first test's processes are gone: a cgroup that holds a process may not give its
        controllers to children), its limits raised to `memory_max` and `pids_max` (the largest
        any language has) so that no test's own limit is cut by the slot's, which bounds what a
        removed test's cgroup leaves charged to it. Written by dir_index, as limit_writes."""
        return ()

    def unlimit_writes(self) -> tuple[LimitWrite, ...]:
        """The writes that lift a kept slot's limits before its next job of another language or
        limits, which are then written as on a fresh cgroup (limit_writes with previous None):
        whichever way a limit goes, one order then fits (none needed where any order does)."""
        return ()

    def job_limit_files(self) -> tuple[tuple[str, int, str], ...]:
        """(what, dir_index, file), in the order that lowers a limit: where a job's own
        "memory" or "pids" limit (below its language's) is written by kiln-init."""
        return ()

    def stat_sources(self) -> tuple[StatSource, ...]:
        return ()

    # read by the zygote while a prestarted slot's command starts (zygote.py: "settled")
    def cpu_ms(self) -> float | None:
        """The CPU time a slot's cgroup has used, in ms (None: not to be had)."""
        source = next((x for x in self.stat_sources() if x.what == "cpu"), None)
        if source is None:
            return None
        try:
            text = cgroupfs.read_file(os.path.join(self.paths[source.dir_index], source.file))
        except OSError:  # the slot ended meanwhile
            return None
        if text is None:
            return None
        try:
            if source.key:
                text = next(line.split()[1] for line in text.splitlines() if line.split()[:1] == [source.key])
            return int(text) / source.divisor
        except (ValueError, StopIteration, IndexError):
            return None

    def any_runnable(self) -> bool:
        """Whether a thread of the slot's cgroup is running, waiting for a CPU or in a disk wait (a
        runtime still starting on a busy machine gets little CPU, but is never all asleep)."""
        source = next((x for x in self.stat_sources() if x.what == "cpu"), None)
        folder = self.paths[source.dir_index] if source is not None else None
        for name in ("tasks", "cgroup.threads"):  # v1, v2
            try:
                with open(os.path.join(folder, name)) as f:
                    threads = f.read().split()
                break
            except (OSError, TypeError):
                continue
        else:
            return True
        for tid in threads:
            try:
                with open(f"/proc/{tid}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue  # gone
            if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"R", b"D"):
                return True
        return False

    def close(self) -> None:
        """Close the slot's directory and cgroup.procs fds."""
        for fd in set(self._dir_fds) | set(self._procs_fds):
            try:
                os.close(fd)
            except OSError:
                pass
        self._dir_fds = self._procs_fds = ()



class Driver:
    """Creates kiln's subtree and the slots' cgroups; see the module docstring for the calls."""

    name = "?"
    reason: str | None = None  # why there are no cgroup limits (NoCgroups only)

    def setup(self, move_pids: Iterable[int] = ()) -> None:
        raise NotImplementedError

    def create_slot(self, name: str) -> SlotCgroup:
        raise NotImplementedError

    def remove_slot(self, slot: SlotCgroup) -> bool:
        raise NotImplementedError

    def kill_slot(self, slot: SlotCgroup) -> None:
        """SIGKILL every process in the slot's cgroup(s), from outside the slot."""

    def teardown(self) -> None:
        raise NotImplementedError


class NoSlotCgroup(SlotCgroup):
    def __init__(self, name: str):
        super().__init__(name, (), (), ())

    def limit_writes(self, memory_max: int, pids_max: int, previous: tuple[int, int] | None) -> tuple[LimitWrite, ...]:
        return ()


class NoCgroups(Driver):
    """RUN_CGROUP=off, or auto where no driver is usable: every call is a no-op."""

    name = "off"

    def __init__(self, reason: str):
        self.reason = reason

    def setup(self, move_pids: Iterable[int] = ()) -> None:
        pass

    def create_slot(self, name: str) -> SlotCgroup:
        check_slot_name(name)
        return NoSlotCgroup(name)

    def remove_slot(self, slot: SlotCgroup) -> bool:
        return True

    def teardown(self) -> None:
        pass


class TreeDriver(Driver):
    """What both real drivers share: kiln's subtree `<base>/<instance>` in one or more
    hierarchies, its slot-* children, leftovers, removal and teardown."""

    def __init__(self, bases: Iterable[str], instance: str, log):
        check_instance(instance)
        self.instance = instance
        self.log = log
        self.bases = tuple(dict.fromkeys(bases))
        self.instance_dirs = tuple(os.path.join(base, instance) for base in self.bases)
        # whether its slots' memory peak can be set back (SlotCgroup.peak_resettable); the
        # driver may tell only once its subtree is made (setup)
        self.peak_resettable = True

    # whether a kept slot's later tests each take a cgroup of their own (SlotCgroup.test_cgroups)
    test_cgroups = False

    def setup(self, move_pids: Iterable[int] = ()) -> None:
        """Create <base>/<instance> (in each hierarchy), remove a crashed kiln's slot cgroups,
        then whatever the version needs (_prepare). Raises CgroupError."""
        try:
            for path in self.instance_dirs:
                cgroupfs.make_cgroup(path, exist_ok=True)
            self._remove_leftovers()
            self._prepare(list(move_pids))
        except (OSError, CgroupError) as error:
            self.teardown()  # a refused start leaves no empty <instance> behind
            if isinstance(error, CgroupError):
                raise
            raise CgroupError(f"cgroup setup below {', '.join(self.bases)}: {error}") from None
        self.log.info("cgroup subtree ready", driver=self.name, subtree=list(self.instance_dirs), judge_tests_share_a_slot=self.peak_resettable or self.test_cgroups, judge_tests_in_own_cgroups=self.test_cgroups)

    def _prepare(self, move_pids: list[int]) -> None:
        pass

    def _remove_leftovers(self) -> None:
        """Kill and remove every slot-* cgroup below <base>/<instance>: a crashed kiln of this
        instance left them. Other instances' subtrees and non-slot cgroups are never touched."""
        for parent in self.instance_dirs:
            for entry in sorted(os.scandir(parent), key=lambda e: e.name):
                if entry.is_dir(follow_symlinks=False) and entry.name.startswith("slot-"):
                    self.log.warning("removing leftover slot cgroup", path=entry.path)
                    cgroupfs.remove_tree(entry.path)

    def create_slot(self, name: str) -> SlotCgroup:
        check_slot_name(name)
        paths = tuple(os.path.join(parent, name) for parent in self.instance_dirs)
        created: list[str] = []
        dir_fds: list[int] = []
        procs_fds: list[int] = []
        try:
            for path in paths:
                cgroupfs.make_cgroup(path)
                created.append(path)
                dir_fds.append(os.open(path, cgroupfs.DIR_FLAGS))
                procs_fds.append(os.open("cgroup.procs", os.O_WRONLY | os.O_CLOEXEC, dir_fd=dir_fds[-1]))
        except OSError as error:
            for fd in dir_fds + procs_fds:
                os.close(fd)
            for path in reversed(created):
                try:
                    cgroupfs.remove_cgroup(path)
                except OSError:
                    pass
            raise CgroupError(f"cannot create slot cgroup {name}: {error}") from None
        return self._make_slot(name, paths, tuple(dir_fds), tuple(procs_fds))

    def _make_slot(self, name: str, paths: tuple[str, ...], dir_fds: tuple[int, ...], procs_fds: tuple[int, ...]) -> SlotCgroup:
        raise NotImplementedError

    def remove_slot(self, slot: SlotCgroup, timeout: float = 1.0) -> bool:
        """Close the zygote's fds (if it still has them) and remove the slot's cgroup(s); on
        EBUSY kill what is left and retry until `timeout`. Never raises: False means something
        is left (the caller logs)."""
        removed = True
        deadline = time.monotonic() + timeout
        slot.close()
        for path in slot.paths:
            try:
                # a test's cgroup its init did not remove (the slot ended during that test)
                for child in _test_cgroups(path):
                    cgroupfs.rmdir_retrying(child, deadline, on_busy=lambda child=child: cgroupfs.kill_at(child))
                cgroupfs.rmdir_retrying(path, deadline, on_busy=lambda path=path: cgroupfs.kill_at(path))
            except Exception:
                removed = False
        return removed

    def kill_slot(self, slot: SlotCgroup) -> None:
        for path in slot.paths:
            try:
                cgroupfs.kill_at(path)
            except OSError:
                pass  # gone already: its processes with it

    def _removable_extras(self) -> tuple[str, ...]:
        return ()

    def teardown(self) -> None:
        """Remove empty slot cgroups and then kiln's subtree, as far as it is empty. Kills
        nothing and moves nothing; a busy cgroup (kiln itself in v2's supervisor) stays."""
        for parent in self.instance_dirs:
            try:
                entries = sorted(os.scandir(parent), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and entry.name.startswith("slot-"):
                    _try_remove(entry.path)
        for path in self._removable_extras():
            _try_remove(path)
        for path in self.instance_dirs:
            _try_remove(path)


def _test_cgroups(slot_path: str) -> list[str]:
    try:
        return sorted(e.path for e in os.scandir(slot_path) if e.is_dir(follow_symlinks=False) and e.name.startswith(TEST_CGROUP_PREFIX))
    except FileNotFoundError:
        return []


def _try_remove(path: str) -> bool:
    try:
        cgroupfs.remove_cgroup(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
