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
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
OPEN_TREE_CLONE = 0x1
OPEN_TREE_CLOEXEC = os.O_CLOEXEC
SYS_OPEN_TREE, SYS_MOUNT_SETATTR = 428, 442  # x86_64, as seccomp.py's numbers


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


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


def clone_mount(path: str, attrs: int) -> int:
    """A detached clone of the mount at `path` (its root there, without the mounts below it),
    with mount attributes `attrs` set: a descriptor, close-on-exec."""
    fd = _check(_libc.syscall(SYS_OPEN_TREE, AT_FDCWD, os.fsencode(path), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC), f"open_tree {path}")
    attr = _MountAttr(attr_set=attrs)
    try:
        _check(_libc.syscall(SYS_MOUNT_SETATTR, fd, b"", AT_EMPTY_PATH, ctypes.byref(attr), ctypes.sizeof(attr)), f"mount_setattr {path}")
    except OSError:
        os.close(fd)
        raise
    return fd


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    result = _libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0), ctypes.c_ulong(0))
    _check(result, f"prctl({option}, {arg2})")


def set_parent_death_signal(signal: int) -> None:
    prctl(PR_SET_PDEATHSIG, signal)
