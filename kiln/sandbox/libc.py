"""Linux constants the plans and the seccomp policy name (namespaces, mount flags), and the calls
Python's os module does not offer that kiln's Python makes itself (prctl; rootless: unshare,
and the zygote's mount of its own /proc). The sandbox's own
syscalls are kiln-init's (kiln/native).
"""

from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
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


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    encode = lambda text: None if text is None else os.fsencode(text)  # noqa: E731
    _check(_libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), None), f"mount {target}")


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    result = _libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0), ctypes.c_ulong(0))
    _check(result, f"prctl({option}, {arg2})")


def set_parent_death_signal(signal: int) -> None:
    prctl(PR_SET_PDEATHSIG, signal)
