"""The syscall policy: compiled once to BPF at startup; every slot's init (kiln-init) loads it
just before it spawns the task, which inherits it.

Default allow, with a deny list of what no judged program needs and a sandbox escape would:
namespaces and mounts, kernel modules and keyrings, tracing other processes, raw I/O ports.
The task runs with no_new_privs and no capabilities already; this closes the kernel attack
surface those do not.
"""

from __future__ import annotations

import errno
import os
import struct

from kiln.sandbox.libc import CLONE_NEWCGROUP, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER, CLONE_NEWUTS

KILLED = (
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "seccomp", "bpf",
    "keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "swapon", "swapoff", "reboot", "acct", "quotactl",
    "perf_event_open", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "userfaultfd", "iopl", "ioperm", "name_to_handle_at", "open_by_handle_at",
    "lookup_dcookie", "nfsservctl", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "pidfd_getfd", "syslog", "fanotify_init",
)  # fmt: skip
# By number: newer than the libseccomp this is built with (x86_64 numbers).
KILLED_BY_NUMBER = (467,)  # open_tree_attr (Linux 6.15)
# Refused with EPERM, as a kernel built without them would: io_uring (kernel attack surface);
# the legacy AIO calls, whose contexts come from one host-wide budget (fs.aio-max-nr, 65536 here),
# which io_setup can take whole, failing every other process's (glibc's POSIX AIO uses threads
# and keeps working); inotify, which would show a run which files of the read-only trees every
# sandbox shares (/usr) a concurrent run opens, its opponent's imports in a battle.
REFUSED_EPERM = (
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
    "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
)  # fmt: skip
# socket() families a judged program may use: AF_UNIX, AF_INET, AF_INET6 (failing to connect:
# no interface is up), AF_NETLINK (libc asks it about interfaces). Every other family is refused:
# AF_VSOCK reaches the hypervisor whatever the network namespace, AF_ALG is kernel attack surface.
ALLOWED_SOCKET_FAMILIES = (1, 2, 10, 16)
AF_MAX_ALLOWED = max(ALLOWED_SOCKET_FAMILIES)
# AF_NETLINK only as NETLINK_ROUTE, which sees the slot's own empty network namespace; others
# reach the host's (NETLINK_KOBJECT_UEVENT: every device event, audit, sock_diag...).
AF_NETLINK, NETLINK_ROUTE = 16, 0
# clone3 passes its flags in memory, where BPF cannot look: ENOSYS makes libc fall back to
# clone, whose flags the filter checks.
REFUSED_ENOSYS = ("clone3",)
CLONE_NAMESPACE_FLAGS = (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET)
PER_LINUX = 0
PERSONALITY_QUERY = 0xFFFFFFFF

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ALLOW = 0x7FFF0000
AUDIT_ARCH_X86_64 = 0xC000003E
SYS_personality = 135


def compile_filter() -> bytes:
    """Build the policy with libseccomp and export it as a BPF program (bytes)."""
    import pyseccomp as sc  # the zygote compiles; tasks only load bytes

    policy = sc.SyscallFilter(defaction=sc.ALLOW)
    # libseccomp's default for a foreign ABI (i386, x32) kills only the thread
    policy.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    for name in KILLED:
        policy.add_rule(sc.KILL_PROCESS, name)
    for number in KILLED_BY_NUMBER:
        policy.add_rule(sc.KILL_PROCESS, number)
    for name in REFUSED_EPERM:
        policy.add_rule(sc.ERRNO(errno.EPERM), name)
    # prlimit on another process: a process may change only its own limits (glibc's setrlimit
    # passes pid 0); the supervisor is another uid anyway, this keeps it so should that change
    policy.add_rule(sc.ERRNO(errno.EPERM), "prlimit64", sc.Arg(0, sc.NE, 0))
    # the kernel reads the family as an int: any high bit set makes the 64-bit value large
    policy.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.GT, AF_MAX_ALLOWED))
    for family in range(AF_MAX_ALLOWED):
        if family not in ALLOWED_SOCKET_FAMILIES:
            policy.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.EQ, family))
    policy.add_rule(sc.ERRNO(errno.EPROTONOSUPPORT), "socket", sc.Arg(0, sc.EQ, AF_NETLINK), sc.Arg(2, sc.NE, NETLINK_ROUTE))
    for name in REFUSED_ENOSYS:
        policy.add_rule(sc.ERRNO(errno.ENOSYS), name)
    for flag in CLONE_NAMESPACE_FLAGS:
        policy.add_rule(sc.KILL_PROCESS, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    with os.fdopen(os.memfd_create("kiln-seccomp", os.MFD_CLOEXEC), "w+b") as sink:
        policy.export_bpf(sink)
        sink.seek(0)
        program = sink.read()
    if not program or len(program) % 8:
        raise RuntimeError(f"libseccomp exported a BPF program of {len(program)} bytes")
    return _personality_guard() + program


def _personality_guard() -> bytes:
    """BPF placed before libseccomp's program: personality() may only query or set PER_LINUX.

    libseccomp cannot say "arg0 != A and arg0 != B" in one rule, so this check is written by
    hand. Anything else (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, other execution domains) weakens
    the process and is killed; every other syscall falls through to libseccomp's program.
    """
    ld_abs, jeq, ret = 0x20, 0x15, 0x06

    def insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("<HBBI", code, jt, jf, k)

    return b"".join((
        insn(ld_abs, 4),  # seccomp_data.arch
        insn(jeq, AUDIT_ARCH_X86_64, jf=7),  # foreign ABI: libseccomp's program kills it
        insn(ld_abs, 0),  # seccomp_data.nr
        insn(jeq, SYS_personality, jf=5),  # not personality: on to libseccomp's program
        insn(ld_abs, 16),  # low half of args[0]; the kernel ignores the high half
        insn(jeq, PER_LINUX, jt=2),
        insn(jeq, PERSONALITY_QUERY, jt=1),
        insn(ret, SECCOMP_RET_KILL_PROCESS),
        insn(ret, SECCOMP_RET_ALLOW),
    ))  # fmt: skip

