"""The syscall policy: compiled once to BPF at startup (by this module, no library); every slot's
init (kiln-init) loads it just before it spawns the task, which inherits it.

Default allow, with a deny list of what no judged program needs and a sandbox escape would:
namespaces and mounts, kernel modules and keyrings, tracing other processes, raw I/O ports.
The task runs with no_new_privs and no capabilities already; this closes the kernel attack
surface those do not.
"""

from __future__ import annotations

import errno
import itertools
import struct
from collections.abc import Iterator
from dataclasses import dataclass

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
# By number: newer than the syscall tables Debian 12 ships (x86_64 numbers).
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
# AF_NETLINK only as NETLINK_ROUTE, which sees the slot's own empty network namespace; others
# reach the host's (NETLINK_KOBJECT_UEVENT: every device event, audit, sock_diag...).
AF_NETLINK, NETLINK_ROUTE = 16, 0
# clone3 passes its flags in memory, where BPF cannot look: ENOSYS makes libc fall back to
# clone, whose flags the filter checks.
REFUSED_ENOSYS = ("clone3",)
CLONE_NAMESPACE_FLAGS = (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET)
PER_LINUX = 0
PERSONALITY_QUERY = 0xFFFFFFFF

# x86_64 numbers of the syscalls the policy names (the kernel's ABI: a number never changes meaning)
SYSCALLS = {
    "socket": 41, "clone": 56, "ptrace": 101, "syslog": 103, "personality": 135, "pivot_root": 155,
    "chroot": 161, "acct": 163, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168,
    "reboot": 169, "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176,
    "quotactl": 179, "nfsservctl": 180, "io_setup": 206, "io_destroy": 207, "io_getevents": 208,
    "io_submit": 209, "io_cancel": 210, "lookup_dcookie": 212, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "inotify_init": 253, "inotify_add_watch": 254,
    "inotify_rm_watch": 255, "unshare": 272, "inotify_init1": 294, "perf_event_open": 298,
    "fanotify_init": 300, "prlimit64": 302, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313,
    "seccomp": 317, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_pgetevents": 333,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "clone3": 435,
    "pidfd_getfd": 438, "mount_setattr": 442,
}  # fmt: skip

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000  # x32's numbers: the native arch with this bit set; killed
NO_SYSCALL = 0xFFFFFFFF  # nr -1 (a tracer skipping a call): allowed, as libseccomp's filter did

# classic BPF as seccomp takes it: struct sock_filter {u16 code; u8 jt, jf; u32 k}
BPF_LD_W_ABS, BPF_JEQ, BPF_JGE, BPF_JSET, BPF_RET = 0x20, 0x15, 0x35, 0x45, 0x06
# struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (little-endian halves)
OFF_NR, OFF_ARCH = 0, 4


def _arg_lo(i: int) -> int:
    return 16 + 8 * i


def _arg_hi(i: int) -> int:
    return 20 + 8 * i


@dataclass(frozen=True)
class Ret:
    """A terminal action; one RET instruction at the program's end serves every path to it."""

    action: int


ALLOW, KILL = Ret(SECCOMP_RET_ALLOW), Ret(SECCOMP_RET_KILL_PROCESS)


def _errno(number: int) -> Ret:
    return Ret(SECCOMP_RET_ERRNO | number)


Target = Ret | str  # a shared return, or the label of a block of argument checks


class _Assembler:
    """Instructions with symbolic jump targets (None: the next one), resolved into bytes."""

    def __init__(self) -> None:
        self.code: list[list] = []  # [code, k, jt, jf]
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> str:
        if name in self.labels:
            raise ValueError(f"label {name} twice")
        self.labels[name] = len(self.code)
        return name

    def emit(self, code: int, k: int, jt: Target | None = None, jf: Target | None = None) -> list:
        insn = [code, k, jt, jf]
        self.code.append(insn)
        return insn

    def assemble(self) -> bytes:
        rets: list[Ret] = []
        for _, _, *targets in self.code:
            rets += [t for t in targets if isinstance(t, Ret) and t not in rets]
        where = {ret: len(self.code) + i for i, ret in enumerate(rets)}
        out = []
        for i, (code, k, jt, jf) in enumerate(self.code):

            def offset(target: Target | None) -> int:
                if target is None:
                    return 0
                distance = (where[target] if isinstance(target, Ret) else self.labels[target]) - i - 1
                if not 0 <= distance <= 255:
                    raise ValueError(f"jump of {distance} from instruction {i}: BPF jumps forward, at most 255")
                return distance

            out.append(struct.pack("<HBBI", code, offset(jt), offset(jf), k))
        out += [struct.pack("<HBBI", BPF_RET, 0, 0, ret.action) for ret in rets]
        return b"".join(out)


# The argument checks, one block per syscall; each ends in returns, so nothing after it needs nr.


def _personality(asm: _Assembler) -> None:
    """Only query or set PER_LINUX: anything else (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, other
    execution domains) weakens the process. The kernel reads the persona as an int: the low half."""
    asm.emit(BPF_LD_W_ABS, _arg_lo(0))
    asm.emit(BPF_JEQ, PER_LINUX, ALLOW)
    asm.emit(BPF_JEQ, PERSONALITY_QUERY, ALLOW, KILL)


def _prlimit64(asm: _Assembler) -> None:
    """On another process: a process may change only its own limits (glibc's setrlimit passes pid
    0); the supervisor is another uid anyway, this keeps it so should that change."""
    asm.emit(BPF_LD_W_ABS, _arg_hi(0))
    asm.emit(BPF_JEQ, 0, None, _errno(errno.EPERM))
    asm.emit(BPF_LD_W_ABS, _arg_lo(0))
    asm.emit(BPF_JEQ, 0, ALLOW, _errno(errno.EPERM))


def _socket(asm: _Assembler) -> None:
    """A family not allowed (the whole 64-bit value: any high bit set is not one) is
    EAFNOSUPPORT; AF_NETLINK with a protocol but NETLINK_ROUTE is EPROTONOSUPPORT."""
    refused = _errno(errno.EAFNOSUPPORT)
    asm.emit(BPF_LD_W_ABS, _arg_hi(0))
    asm.emit(BPF_JEQ, 0, None, refused)
    asm.emit(BPF_LD_W_ABS, _arg_lo(0))
    asm.emit(BPF_JEQ, AF_NETLINK, "socket netlink")
    others = [family for family in ALLOWED_SOCKET_FAMILIES if family != AF_NETLINK]
    for i, family in enumerate(others):
        asm.emit(BPF_JEQ, family, ALLOW, refused if i == len(others) - 1 else None)
    asm.label("socket netlink")
    asm.emit(BPF_LD_W_ABS, _arg_hi(2))
    asm.emit(BPF_JEQ, 0, None, _errno(errno.EPROTONOSUPPORT))
    asm.emit(BPF_LD_W_ABS, _arg_lo(2))
    asm.emit(BPF_JEQ, NETLINK_ROUTE, ALLOW, _errno(errno.EPROTONOSUPPORT))


def _clone(asm: _Assembler) -> None:
    """Any CLONE_NEW* flag; they are all in the low half, the only one the kernel reads."""
    mask = 0
    for flag in CLONE_NAMESPACE_FLAGS:
        mask |= flag
    asm.emit(BPF_LD_W_ABS, _arg_lo(0))
    asm.emit(BPF_JSET, mask, KILL, ALLOW)


ARGUMENT_CHECKS = {"personality": _personality, "prlimit64": _prlimit64, "socket": _socket, "clone": _clone}


def policy() -> dict[int, Target]:
    """Every x86_64 syscall number the policy does not simply allow -> its action or check."""
    actions: dict[int, Target] = {}

    def put(number: int, target: Target) -> None:
        if number in actions or number >= X32_SYSCALL_BIT:
            raise ValueError(f"syscall {number} twice or out of range")
        actions[number] = target

    for name in KILLED:
        put(SYSCALLS[name], KILL)
    for number in KILLED_BY_NUMBER:
        put(number, KILL)
    for name in REFUSED_EPERM:
        put(SYSCALLS[name], _errno(errno.EPERM))
    for name in REFUSED_ENOSYS:
        put(SYSCALLS[name], _errno(errno.ENOSYS))
    for name in ARGUMENT_CHECKS:
        put(SYSCALLS[name], name)
    return actions


def _ranges(actions: dict[int, Target]) -> list[tuple[int, Target]]:
    """The 32-bit space of nr cut into ranges of one target, each as (its first number, target)."""
    cuts: dict[int, Target] = {0: ALLOW}
    for number in sorted(actions):
        cuts[number] = actions[number]
        cuts[number + 1] = ALLOW
    cuts[X32_SYSCALL_BIT] = KILL
    cuts[NO_SYSCALL] = ALLOW
    ranges: list[tuple[int, Target]] = []
    for first in sorted(cuts):
        if not ranges or ranges[-1][1] != cuts[first]:
            ranges.append((first, cuts[first]))
    return ranges


def _search(asm: _Assembler, ranges: list[tuple[int, Target]], names: Iterator[int]) -> Target:
    """A balanced binary search over the ranges (A holds nr): one JGE per level, a JEQ where a
    single number sits between two ranges of one target. Returns where the search starts."""
    if len(ranges) == 1:
        return ranges[0][1]
    label = asm.label(f"search {next(names)}")
    if len(ranges) == 3 and ranges[0][1] == ranges[2][1] and ranges[2][0] - ranges[1][0] == 1:
        asm.emit(BPF_JEQ, ranges[1][0], ranges[1][1], ranges[0][1])
        return label
    middle = len(ranges) // 2
    node = asm.emit(BPF_JGE, ranges[middle][0])
    node[3] = _search(asm, ranges[:middle], names)  # placed right after the node when it is a search
    node[2] = _search(asm, ranges[middle:], names)
    return label


def compile_filter() -> bytes:
    """The policy as a seccomp BPF program (bytes of struct sock_filter).

    Layout: the architecture (anything but x86_64: KILL_PROCESS), then nr, then a balanced binary
    search over the ranges of nr that share an action (x32's numbers and nr -1 included), whose
    leaves jump to a shared return or to a syscall's block of argument checks; default ALLOW.
    A syscall allowed whatever its arguments reaches its return with nr and arch loaded only, so
    the kernel's action cache (it runs the filter for each number when it is loaded) marks it
    always-allowed and never runs the filter for it; the search keeps that preparation, done for
    every number at every load, to ~10 instructions a number instead of a list of ~120.
    """
    asm = _Assembler()
    asm.emit(BPF_LD_W_ABS, OFF_ARCH)
    asm.emit(BPF_JEQ, AUDIT_ARCH_X86_64, None, KILL)
    asm.emit(BPF_LD_W_ABS, OFF_NR)
    start = _search(asm, _ranges(policy()), itertools.count())
    if not isinstance(start, str):
        raise RuntimeError("the policy has no rule")
    for name, check in ARGUMENT_CHECKS.items():
        asm.label(name)
        check(asm)
    program = asm.assemble()
    if len(program) // 8 > 4096:
        raise RuntimeError(f"a seccomp program of {len(program) // 8} instructions")
    return program
