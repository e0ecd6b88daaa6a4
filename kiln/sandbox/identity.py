"""Who the task is: its uid and gid, no groups, no capabilities, no way to gain privileges."""

from __future__ import annotations

import ctypes

from kiln.sandbox.libc import _check, _libc, _syscall

# x86_64 numbers: see _set_ids for why these are called directly.
SYS_setgroups = 116
SYS_setresuid = 117
SYS_setresgid = 119
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

with open("/proc/sys/kernel/cap_last_cap") as _f:  # read at import: /proc is gone after pivot
    CAP_LAST_CAP = int(_f.read())


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    result = _libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0), ctypes.c_ulong(0))
    _check(result, f"prctl({option}, {arg2})")


def set_parent_death_signal(signal: int) -> None:
    prctl(PR_SET_PDEATHSIG, signal)


def drop_bounding_set() -> None:
    """With an empty bounding set no exec (file capabilities, setuid root binaries) can hand a
    capability back; the process keeps those it has, and its children inherit the set."""
    for cap in range(CAP_LAST_CAP + 1):
        prctl(PR_CAPBSET_DROP, cap)
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def clear_capabilities() -> None:
    """setuid away from root clears the permitted and effective sets but not the inheritable one."""
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def become(uid: int, gid: int) -> None:
    """The calling thread becomes wholly `uid` and `gid`, without supplementary groups; the
    kernel clears its permitted and effective capabilities (not the inheritable set)."""
    _set_ids(uid, gid, saved=None)


def act_as(uid: int, gid: int) -> None:
    """Become `uid` for everything but the saved ids, which stay root: what a spawn makes now
    is wholly `uid` (exec sets the saved ids from the effective ones), and act_as_root() is
    allowed back."""
    _set_ids(uid, gid, saved=0)


def act_as_root() -> None:
    _check(_syscall(SYS_setresuid, 0, 0, 0), "setresuid")
    _check(_syscall(SYS_setresgid, 0, 0, 0), "setresgid")


def _set_ids(uid: int, gid: int, saved: int | None) -> None:
    """Raw syscalls, which change the calling thread only: init is single-threaded. glibc's
    wrappers change every thread, by signalling each thread glibc knows of; in a slot, a
    process made by a raw clone of the zygote (libc.fork_into_namespaces) that glibc's
    bookkeeping never saw, that is not to be relied on: once a thread had changed its own
    identity and ended, ~2 % of the later changes aborted or crashed in glibc
    (tests/sandbox/test_identity_threads.py)."""
    _check(_syscall(SYS_setgroups, 0, None), "setgroups([])")
    _check(_syscall(SYS_setresgid, gid, gid, gid if saved is None else saved), "setresgid")
    _check(_syscall(SYS_setresuid, uid, uid, uid if saved is None else saved), "setresuid")


def set_not_dumpable() -> None:
    """No /proc/<pid>/mem, environ or fd for processes of the same uid (a uid change already
    makes a process undumpable when fs.suid_dumpable is 0; this does not depend on it)."""
    prctl(PR_SET_DUMPABLE, 0)


def set_no_new_privs() -> None:
    prctl(PR_SET_NO_NEW_PRIVS, 1)
