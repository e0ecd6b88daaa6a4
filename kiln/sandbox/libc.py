"""Thin ctypes wrappers for the syscalls Python's os module does not offer (on 3.11).

Each wrapper raises OSError with errno and the call's arguments, so a failed step names itself.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import select
import signal
from collections.abc import Iterable

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
# The same function called with the GIL held (PyDLL): clone() must not release it, so the
# child starts holding it, as after os.fork().
_syscall_holding_gil = ctypes.PyDLL(None, use_errno=True).syscall
_syscall_holding_gil.restype = ctypes.c_long

# x86_64 syscall numbers; kiln targets x86_64 Linux (the seccomp policy is x86_64-only too).
SYS_clone = 56
SYS_pivot_root = 155
SYS_setns = 308
SYS_close_range = 436
SYS_openat2 = 437
SYS_mount_setattr = 442

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

MNT_DETACH = 0x2

AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_NOEXEC = 0x8

RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08


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


def umount2(target: str, flags: int = 0) -> None:
    _check(_libc.umount2(_c(target), flags), f"umount2({target!r}, {flags:#x})")


def pivot_root(new_root: str, put_old: str) -> None:
    _check(_syscall(SYS_pivot_root, _c(new_root), _c(put_old)), f"pivot_root({new_root!r}, {put_old!r})")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def fork_into_namespaces(flags: int) -> int:
    """fork(), with the child in the new namespaces `flags` names (CLONE_NEW*): with
    CLONE_NEWPID it is PID 1 of its own pid namespace and still the caller's child.

    Python's os.fork() takes no flags and unshare(CLONE_NEWPID) only moves later children, so
    this is clone(2) called directly, wrapped in the hooks CPython documents for forking by
    other means (PyOS_BeforeFork & co.: import lock, thread states, at-fork callbacks). libc's
    own fork handlers do not run: the caller must be single-threaded (the zygote is), and the
    child must not use raise()/abort(), whose cached thread id is the parent's.
    """
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    pid = _syscall_holding_gil(SYS_clone, ctypes.c_ulong(flags | 17), None, None, None, None)  # 17: SIGCHLD
    err = ctypes.get_errno()
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(err, f"clone({flags:#x}): {os.strerror(err)}")
    return pid


def setns(fd: int, nstype: int = 0) -> None:
    _check(_syscall(SYS_setns, fd, nstype), f"setns({fd}, {nstype:#x})")


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def mount_setattr(path: str, attr_set: int, recursive: bool = True) -> None:
    """Set mount attributes on a whole mount tree: a remount of a recursive bind only changes
    the top mount, this changes every submount too."""
    attr = _MountAttr(attr_set, 0, 0, 0)
    flags = AT_RECURSIVE if recursive else 0
    result = _syscall(SYS_mount_setattr, AT_FDCWD, _c(path), flags, ctypes.byref(attr), ctypes.sizeof(attr))
    _check(result, f"mount_setattr({path!r}, {attr_set:#x})")


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def openat2(dirfd: int, path: str, flags: int, mode: int, resolve: int) -> int:
    how = _OpenHow(flags, mode, resolve)
    result = _syscall(SYS_openat2, dirfd, _c(path), ctypes.byref(how), ctypes.sizeof(how))
    return _check(result, f"openat2({path!r})")


SYS_rt_sigaction = 13
NSIG = 65  # signals 1..64


class _KernelSigaction(ctypes.Structure):
    _fields_ = [("handler", ctypes.c_ulong), ("flags", ctypes.c_ulong), ("restorer", ctypes.c_ulong), ("mask", ctypes.c_uint64)]


def signals_not_at_default() -> tuple[int, ...]:
    """The signals this process handles or ignores, real-time ones included."""
    current = _KernelSigaction(0, 0, 0, 0)
    found = []
    for sig in range(1, NSIG):
        if sig not in (9, 19) and _syscall(SYS_rt_sigaction, sig, None, ctypes.byref(current), 8) == 0 and current.handler != 0:
            found.append(sig)
    return tuple(found)


def reset_signal_dispositions(signals: Iterable[int]) -> None:
    """`signals` back to SIG_DFL (the raw syscall: libc refuses to touch the real-time ones it
    uses itself). An exec keeps ignored signals ignored, whoever ignored them (Python, a
    parent of kiln, an init system)."""
    default = _KernelSigaction(0, 0, 0, 0)
    for sig in signals:
        _syscall(SYS_rt_sigaction, sig, ctypes.byref(default), None, 8)


# init ignores these (a closed socket is an error to init, not a death); every spawn of a task
# gives them back their default action, as a task must start with
INIT_IGNORED_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)


def spawn(argv: tuple[str, ...], env: dict[str, str], fds: list[int] | tuple[int, ...]) -> int:
    """posix_spawn (vfork + exec) of argv with fds[i] on descriptor i, INIT_IGNORED_SIGNALS at
    their default and no signal blocked. Returns the pid."""
    actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(fds)]
    return os.posix_spawn(argv[0], argv, env, file_actions=actions, setsigdef=INIT_IGNORED_SIGNALS, setsigmask=())


def has_exited(pidfd: int) -> bool:
    """Whether the process of `pidfd` has exited (a pidfd polls readable from then on)."""
    return bool(select.select([pidfd], [], [], 0)[0])


def output_pipe() -> tuple[int, int]:
    """A pipe for a task's stdout or stderr, both ends close-on-exec: (the read end,
    non-blocking, for init's poll loop; the write end, blocking, as the task expects it)."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    fcntl.fcntl(read_end, fcntl.F_SETFL, os.O_NONBLOCK)  # a fresh pipe end has no other flag to keep
    return read_end, write_end


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
