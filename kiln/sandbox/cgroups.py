"""Cgroup limits and accounting for slots: the driver interface and the helpers both drivers
share (cgroup_detect.py picks the driver, cgroup_v1.py and cgroup_v2.py are the drivers).

    driver = cgroup_detect.open_driver(config.cgroup, config.instance, log)  # at startup
    driver.setup(move_pids=(front_pid,))   # kiln's subtree; removes a crashed kiln's leftovers
    slot = driver.create_slot("slot-3-g17")  # zygote, before spawning the slot's init
    # kiln-init keeps slot.fd_groups() through pivot_root and applies, through them, what the
    # recipe holds of these (kiln/zygote/recipe.py); the Python methods do the same writes:
    slot.limit_writes(memory_max, pids_max, previous)  # slot init, while warming and per job
    slot.join()                            # the task, between its clone and its exec
    slot.stat_sources()                    # slot init, after the run
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
slot's pivot_root hides /sys. Every write to a cgroup file goes through write_fd, every mkdir
and rmdir through make_cgroup/remove_cgroup, every signal through kill_members: the unit tests
replace those four with a fake kernel, so v1/v2 code calls them as `cgroups.<name>`.
cgroup_detect.open_driver is the only function that reads the real /proc; nothing here touches a
cgroup outside `<base>/<instance>`.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from dataclasses import dataclass
from typing import Iterable

DELEGATE_HINT = "run kiln under systemd with Delegate=yes, or `systemd-run --scope -p Delegate=yes kiln serve`"
SUPERVISOR = "supervisor"
_INSTANCE = re.compile(r"[a-z][a-z0-9_-]{0,31}")  # as RUN_INSTANCE in config.py
_SLOT_NAME = re.compile(r"slot-[A-Za-z0-9_-]{1,64}")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class CgroupError(Exception):
    """A cgroup driver cannot be used or set up; the message says what is missing."""


@dataclass(frozen=True)
class CgroupStats:
    memory_peak_bytes: int | None  # None: the kernel keeps no peak (v2 before 5.19)
    cpu_usage_ms: float | None
    oom_kills: int  # processes the OOM killer killed in the slot (0 without a counter)
    pids_limit_hits: int  # forks refused by pids.max


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

    what: str  # "memory_peak", "cpu" (ms), "oom_kills", "pids_hits"
    dir_index: int
    file: str
    key: str = ""
    divisor: int = 1


# --- parsing (pure) ---


def parse_flat_keyed(text: str | None) -> dict[str, int]:
    """'key value' lines (memory.events, pids.events, cpu.stat, memory.oom_control) -> dict."""
    values: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            values[parts[0]] = int(parts[1])
    return values


def check_instance(instance: str) -> None:
    if not _INSTANCE.fullmatch(instance):
        raise ValueError(f"cgroup instance {instance!r}: must be 1 to 32 of a-z 0-9 _ -, starting with a-z")


def check_slot_name(name: str) -> None:
    if not _SLOT_NAME.fullmatch(name):
        raise ValueError(f"slot cgroup name {name!r}: must be slot-<letters, digits, _ ->")


# --- the only places that change the cgroup filesystem (replaced by the unit tests' fake kernel) ---


def write_fd(fd: int, value: bytes) -> None:
    """Write one value to an open cgroup file, in one write(2) as cgroupfs wants."""
    written = os.write(fd, value)
    if written != len(value):
        raise OSError(errno.EIO, f"short write ({written} of {len(value)} bytes)")


def make_cgroup(path: str, exist_ok: bool = False) -> None:
    try:
        os.mkdir(path)
    except FileExistsError:
        if not exist_ok:
            raise


def remove_cgroup(path: str) -> None:
    """rmdir: a cgroup with live processes or child cgroups answers EBUSY."""
    os.rmdir(path)


def kill_members(dir_fd: int) -> int:
    """SIGKILL every process listed in the cgroup's cgroup.procs; returns how many were signalled.

    Each pid is pinned with a pidfd, then the list is read again: only pids still listed are
    signalled, so a pid that exited and was recycled in between is never hit. The caller's own
    pid (and 0: a pid from outside the caller's pid namespace) is never signalled.
    """
    pidfds = {}
    try:
        for pid in read_procs(dir_fd):
            if pid in (0, os.getpid()) or pid in pidfds:
                continue
            try:
                pidfds[pid] = os.pidfd_open(pid)
            except ProcessLookupError:
                pass
        still_listed = set(read_procs(dir_fd))
        signalled = 0
        for pid, pidfd in pidfds.items():
            if pid in still_listed:
                try:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    signalled += 1
                except ProcessLookupError:
                    pass
        return signalled
    finally:
        for pidfd in pidfds.values():
            os.close(pidfd)


# --- file helpers (through a directory fd after pivot_root, or by path before it) ---


def write_file(name: str, value: str | int, dir_fd: int | None = None) -> None:
    data = str(value).encode()
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            write_fd(fd, data)
        finally:
            os.close(fd)
    except OSError as error:
        raise OSError(error.errno, f"cgroup write {data.decode()!r} to {name}: {error.strerror or error}") from None


def read_file(name: str, dir_fd: int | None = None) -> str | None:
    """The file's text, or None if the kernel does not offer it."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(fd)


def read_int(name: str, dir_fd: int | None = None) -> int | None:
    text = read_file(name, dir_fd)
    return None if text is None or not text.strip().isdigit() else int(text)


def exists(name: str, dir_fd: int | None = None) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd)
        return True
    except FileNotFoundError:
        return False


def read_procs(dir_fd: int | None = None, path: str = "cgroup.procs") -> list[int]:
    return [int(pid) for pid in (read_file(path, dir_fd) or "").split()]


def kill_cgroup(dir_fd: int, timeout: float = 2.0) -> bool:
    """SIGKILL every process in the cgroup; True once cgroup.procs is empty (within timeout).

    v2's cgroup.kill (kernel >= 5.14) kills the whole cgroup atomically, forks in flight
    included. Without it (v1) the listed pids are killed in rounds until a round finds none,
    since a forking process refills the list. The caller must not be in the cgroup.
    """
    has_kill = exists("cgroup.kill", dir_fd)
    deadline = time.monotonic() + timeout
    delay = 0.001
    while read_procs(dir_fd):
        if has_kill:
            write_file("cgroup.kill", 1, dir_fd=dir_fd)
        else:
            kill_members(dir_fd)
        if time.monotonic() >= deadline:
            return not read_procs(dir_fd)
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    return True


def remove_tree(path: str, timeout: float = 5.0) -> None:
    """Kill everything in the cgroup at `path` and below, then remove it, deepest first."""
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path, timeout)
    fd = os.open(path, _DIR_FLAGS)
    try:
        emptied = kill_cgroup(fd, timeout)
        left = read_procs(fd)
    finally:
        os.close(fd)
    if not emptied:
        raise CgroupError(f"{path}: processes {left} survived SIGKILL for {timeout}s")
    _rmdir_retrying(path, time.monotonic() + timeout)


def _kill_at(path: str) -> None:
    fd = os.open(path, _DIR_FLAGS)
    try:
        kill_cgroup(fd, timeout=0)
    finally:
        os.close(fd)


def _rmdir_retrying(path: str, deadline: float, on_busy=None) -> None:
    """rmdir, retrying while the kernel says EBUSY (exiting tasks still hold the cgroup)."""
    delay = 0.001
    while True:
        try:
            remove_cgroup(path)
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.EBUSY or time.monotonic() >= deadline:
                raise
        if on_busy is not None:
            on_busy()
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


# --- the interface ---


class SlotCgroup:
    """One slot's cgroup: a directory fd per hierarchy and the slot's cgroup.procs, opened for
    writing, per hierarchy. The slot's init (kiln-init) inherits them and works through them
    after pivot_root hid /sys; what it writes and reads is data here (limit_writes,
    stat_sources), which set_limits and stats apply from Python the same way (tests check
    both against the kernel)."""

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

    def set_limits(self, memory_max: int, pids_max: int) -> None:
        """Write the slot's memory and pids limits, unless they are what it has already (as
        kiln-init does with the recipe's writes)."""
        check_limits(memory_max, pids_max)
        if self.limits != (memory_max, pids_max):
            for write in self.limit_writes(memory_max, pids_max, self.limits):
                write_file(write.file, write.value, dir_fd=self._dir_fds[write.dir_index])
            self.limits = (memory_max, pids_max)

    def limit_writes(self, memory_max: int, pids_max: int, previous: tuple[int, int] | None) -> tuple[LimitWrite, ...]:
        """The writes, in order, that take the slot from `previous` limits (None: a fresh
        cgroup) to these. kiln-init is handed them precomputed (recipe.py)."""
        raise NotImplementedError

    def join(self) -> None:
        """Move the calling process into the slot's cgroup(s) (writes "0" to each cgroup.procs)."""
        for fd in self._procs_fds:
            write_fd(fd, b"0")

    def stat_sources(self) -> tuple[StatSource, ...]:
        return ()

    def stats(self) -> CgroupStats:
        values = {source.what: self._read(source) for source in self.stat_sources()}
        peak = values.get("memory_peak")
        return CgroupStats(
            memory_peak_bytes=None if peak is None else int(peak),
            cpu_usage_ms=values.get("cpu"),
            oom_kills=int(values.get("oom_kills") or 0),
            pids_limit_hits=int(values.get("pids_hits") or 0),
        )

    def _read(self, source: StatSource) -> float | None:
        text = read_file(source.file, self._dir_fds[source.dir_index])
        if source.key:
            value = parse_flat_keyed(text).get(source.key)
        else:
            value = int(text) if text is not None and text.strip().isdigit() else None
        return None if value is None else value / source.divisor

    def kill_all(self, timeout: float = 2.0) -> bool:
        """SIGKILL every process in the slot's cgroup(s); True once they are empty."""
        return all([kill_cgroup(fd, timeout) for fd in self._dir_fds])

    def close(self) -> None:
        """Close the slot's own fds (kiln's own cgroup.procs belong to the driver)."""
        for fd in set(self._dir_fds) | set(self._procs_fds):
            try:
                os.close(fd)
            except OSError:
                pass
        self._dir_fds = self._procs_fds = ()


def check_limits(memory_max: int, pids_max: int) -> None:
    if type(memory_max) is not int or memory_max <= 0 or type(pids_max) is not int or pids_max <= 0:
        raise ValueError(f"cgroup limits must be positive integers: memory_max={memory_max!r} pids_max={pids_max!r}")


class Driver:
    """Creates kiln's subtree and the slots' cgroups; see the module docstring for the calls."""

    name = "?"
    reason: str | None = None  # why there are no cgroup limits (NoCgroups only)

    def setup(self, move_pids: Iterable[int] = ()) -> None:
        raise NotImplementedError

    def fds(self) -> tuple[int, ...]:
        """The descriptors it holds once set up: a process it is handed to inherits them."""
        return ()

    def create_slot(self, name: str) -> SlotCgroup:
        raise NotImplementedError

    def remove_slot(self, slot: SlotCgroup) -> bool:
        raise NotImplementedError

    def kill_slot(self, slot: SlotCgroup) -> None:
        """SIGKILL every process in the slot's cgroup(s), from outside the slot."""

    def teardown(self) -> None:
        raise NotImplementedError

    def keep_migrations_fast(self) -> None:
        """Moving a process between cgroups takes a kernel-wide lock whose fast path lapses
        after a quiet moment (~0.2 s here): the next move then waits a full RCU grace period
        (6-8 ms on a small VM), and every job moves its task. A no-op move of kiln itself,
        more often than that, keeps the fast path; it is what the cgroup mount option
        `favordynmods` does for good (forks and exits host-wide pay a little for it)."""


class NoSlot(SlotCgroup):
    def __init__(self, name: str):
        super().__init__(name, (), (), ())

    def limit_writes(self, memory_max: int, pids_max: int, previous: tuple[int, int] | None) -> tuple[LimitWrite, ...]:
        return ()

    def join(self) -> None:
        pass

    def kill_all(self, timeout: float = 2.0) -> bool:
        return True


class NoCgroups(Driver):
    """RUN_CGROUP=off, or auto where no driver is usable: every call is a no-op."""

    name = "off"

    def __init__(self, reason: str):
        self.reason = reason

    def setup(self, move_pids: Iterable[int] = ()) -> None:
        pass

    def create_slot(self, name: str) -> SlotCgroup:
        check_slot_name(name)
        return NoSlot(name)

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

    def setup(self, move_pids: Iterable[int] = ()) -> None:
        """Create <base>/<instance> (in each hierarchy), remove a crashed kiln's slot cgroups,
        then whatever the version needs (_prepare). Raises CgroupError."""
        try:
            for path in self.instance_dirs:
                make_cgroup(path, exist_ok=True)
            self._remove_leftovers()
            self._prepare(list(move_pids))
            self._home_fds = tuple(os.open(os.path.join(home, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC) for home in self._home_dirs())
        except OSError as error:
            raise CgroupError(f"cgroup setup below {', '.join(self.bases)}: {error}") from None
        self.log.info("cgroup subtree ready", driver=self.name, subtree=list(self.instance_dirs))

    def fds(self) -> tuple[int, ...]:
        return self._home_fds

    def _home_dirs(self) -> tuple[str, ...]:
        """Where kiln's own processes are, once set up (v1: its own cgroups, untouched)."""
        return self.bases

    def keep_migrations_fast(self) -> None:
        try:
            write_fd(self._home_fds[0], b"0")  # one lock for every hierarchy: one move is enough
        except OSError:
            pass

    def _prepare(self, move_pids: list[int]) -> None:
        pass

    def _remove_leftovers(self) -> None:
        """Kill and remove every slot-* cgroup below <base>/<instance>: a crashed kiln of this
        instance left them. Other instances' subtrees and non-slot cgroups are never touched."""
        for parent in self.instance_dirs:
            for entry in sorted(os.scandir(parent), key=lambda e: e.name):
                if entry.is_dir(follow_symlinks=False) and entry.name.startswith("slot-"):
                    self.log.warning("removing leftover slot cgroup", path=entry.path)
                    remove_tree(entry.path)

    def create_slot(self, name: str) -> SlotCgroup:
        check_slot_name(name)
        paths = tuple(os.path.join(parent, name) for parent in self.instance_dirs)
        created: list[str] = []
        dir_fds: list[int] = []
        procs_fds: list[int] = []
        try:
            for path in paths:
                make_cgroup(path)
                created.append(path)
                dir_fds.append(os.open(path, _DIR_FLAGS))
                procs_fds.append(os.open("cgroup.procs", os.O_WRONLY | os.O_CLOEXEC, dir_fd=dir_fds[-1]))
        except OSError as error:
            for fd in dir_fds + procs_fds:
                os.close(fd)
            for path in reversed(created):
                try:
                    remove_cgroup(path)
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
                _rmdir_retrying(path, deadline, on_busy=lambda path=path: _kill_at(path))
            except Exception:
                removed = False
        return removed

    def kill_slot(self, slot: SlotCgroup) -> None:
        for path in slot.paths:
            try:
                _kill_at(path)
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


def _try_remove(path: str) -> bool:
    try:
        remove_cgroup(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
