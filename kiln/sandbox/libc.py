"""Thin ctypes wrappers for the syscalls Python's os module does not offer (on 3.11).

Each wrapper raises OSError with errno and the call's arguments, so a failed step names itself.
"""

from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
# x86_64 syscall numbers; kiln targets x86_64 Linux (the seccomp policy is x86_64-only too).
SYS_close_range = 436
PR_SET_PDEATHSIG = 1

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000

MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _c(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    result = _libc.mount(_c(source), _c(target), _c(fstype), ctypes.c_ulong(flags), _c(data))
    _check(result, f"mount({source!r}, {target!r}, {fstype!r}, {flags:#x}, {data!r})")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def close_range(first: int, last: int = 0xFFFFFFFF) -> None:
    """Close every descriptor from `first` to `last`, in one syscall."""
    _check(_syscall(SYS_close_range, ctypes.c_uint(first), ctypes.c_uint(last), 0), "close_range")


def close_all_except(keep: set[int]) -> None:
    """Close every descriptor above 2 that is not in `keep`."""
    first = 3
    for fd in sorted(fd for fd in keep if fd >= 3):
        if fd > first:
            close_range(first, fd - 1)
        first = fd + 1
    close_range(first)


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    result = _libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0), ctypes.c_ulong(0))
    _check(result, f"prctl({option}, {arg2})")


def set_parent_death_signal(signal: int) -> None:
    prctl(PR_SET_PDEATHSIG, signal)
