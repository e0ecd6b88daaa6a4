"""The cgroup filesystem, for kiln's cgroup drivers (cgroups.py, cgroup_v1.py, cgroup_v2.py):
the few calls that change it (write_fd, make_cgroup, remove_cgroup, kill_members: the unit tests
replace those four with a fake kernel, so the drivers call them as `cgroupfs.<name>`), the reads
and the kill-and-remove loops built on them. Nothing here knows kiln's layout."""

from __future__ import annotations

import errno
import os
import signal
import time

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class CgroupError(Exception):
    """A cgroup driver cannot be used or set up; the message says what is missing."""


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
    fd = os.open(path, DIR_FLAGS)
    try:
        emptied = kill_cgroup(fd, timeout)
        left = read_procs(fd)
    finally:
        os.close(fd)
    if not emptied:
        raise CgroupError(f"{path}: processes {left} survived SIGKILL for {timeout}s")
    rmdir_retrying(path, time.monotonic() + timeout)


def kill_at(path: str) -> None:
    fd = os.open(path, DIR_FLAGS)
    try:
        kill_cgroup(fd, timeout=0)
    finally:
        os.close(fd)


def rmdir_retrying(path: str, deadline: float, on_busy=None) -> None:
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


def memory_peak_resets(folder: str) -> bool:
    """Whether the v2 cgroup `folder`'s memory.peak can be set back (Linux 6.12): a write of any
    non-empty string to it sets the peak to the current usage for later reads through that same
    open file (cgroup-v2.rst). The kernel gives the file write permission only where it has that
    write handler (kernfs: 0644 from 6.12, 0444 before), whoever owns it: no write is needed to
    tell, and none is made."""
    try:
        return bool(os.stat(os.path.join(folder, "memory.peak")).st_mode & 0o222)
    except FileNotFoundError:  # before 5.19, or no memory controller
        return False
