"""The seccomp filter kiln compiles itself (kiln/sandbox/seccomp.py), run by a small classic-BPF
interpreter: it must decide every syscall exactly as the program libseccomp 2.5.4 built for the
same policy (kept below as bytes, with the hand-written personality guard it was prefixed with)
and as the policy written out in plain Python here, for every number, x32's, nr -1, the
argument cases the policy checks and a foreign architecture. That kiln-init loads it and the
kernel enforces it is tested for real in tests/security/test_syscalls.py."""

from __future__ import annotations

import errno
import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln.sandbox import seccomp
from kiln.sandbox.libc import CLONE_NEWCGROUP, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER, CLONE_NEWUTS

# compile_filter() as of 4b546c3: _personality_guard() + libseccomp's export_bpf of the policy
# (default ALLOW, bad arch KILL_PROCESS), on this Debian 12 host's libseccomp 2.5.4
LIBSECCOMP_PROGRAM = bytes.fromhex(
    "2000000004000000150000073e0000c02000000000000000150000058700000020000000100000001500020000000000"
    "15000100ffffffff0600000000000080060000000000ff7f20000000040000001500007c3e0000c02000000000000000"
    "350000010000004015000079ffffffff15007800650000001500770067000000150076009b00000015007500a1000000"
    "15007400a300000015007300a500000015007200a600000015007100a700000015007000a800000015006f00a9000000"
    "15006e00ac00000015006d00ad00000015006c00af00000015006b00b000000015006a00b300000015006900b4000000"
    "15002f00ce00000015002e00cf00000015002d00d000000015002c00d100000015002b00d200000015006300d4000000"
    "15006200f600000015006100f800000015006000f900000015005f00fa00000015002500fd00000015002400fe000000"
    "15002300ff00000015005b00100100001500210026010000150059002a010000150058002c010000150057002f010000"
    "150056003001000015005500340100001500540036010000150053003701000015005200380100001500510039010000"
    "150050003d01000015004f004001000015004e004101000015004d0043010000150013004d01000015001200a9010000"
    "15001100aa01000015001000ab01000015004800ac01000015004700ad01000015004600ae01000015004500af010000"
    "15004400b001000015004300b101000015000001b3010000060000002600050015004000b601000015003f00ba010000"
    "15003e00d3010000150000052e0100002000000014000000150000020000000020000000100000001500370000000000"
    "060000000100050015000018380000002000000014000000540000000000000015000032000000002000000010000000"
    "540000000000004015003100000000402000000010000000540000000000002015002e00000000202000000010000000"
    "540000000000001015002b00000000102000000010000000540000000000000815002800000000082000000010000000"
    "540000000000000415002500000000042000000010000000540000000000000215002200000000022000000010000000"
    "540000000000020015001f1d000002001500001c29000000200000001400000015000015000000002000000010000000"
    "15000005100000002000000024000000150000020000000020000000200000001500010000000000060000005d000500"
    "2000000010000000150012000f000000150011000e000000150010000d00000015000f000c00000015000e000b000000"
    "15000d000900000015000c000800000015000b000700000015000a000600000015000900050000001500080004000000"
    "150007000300000015000600000000002000000014000000250004000000000015000002000000002000000010000000"
    "2500010010000000060000000000ff7f06000000610005000600000000000080"
)

KILL, ALLOW, ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
X86_64, I386, AARCH64 = 0xC000003E, 0x40000003, 0xC00000B7
U64 = (1 << 64) - 1
NAMESPACE_FLAGS = (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET)


def run(program: bytes, arch: int, nr: int, args: tuple[int, ...] = (0,) * 6, trace: list | None = None) -> int:
    """Classic BPF as seccomp runs it, on struct seccomp_data; only the instructions seccomp allows."""
    data = struct.pack("<II Q 6Q", nr, arch, 0x401000, *args)
    insns = [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    a, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if trace is not None:
            trace.append((pc, code, k))
        if code == 0x20:  # ld [k]
            assert k % 4 == 0 and k + 4 <= len(data)
            a = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x54:  # and #k
            a &= k
            pc += 1
        elif code == 0x05:  # ja
            pc += 1 + k
        elif code in (0x15, 0x25, 0x35, 0x45):  # jeq, jgt, jge, jset #k
            taken = {0x15: a == k, 0x25: a > k, 0x35: a >= k, 0x45: bool(a & k)}[code]
            pc += 1 + (jt if taken else jf)
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"instruction {code:#x} at {pc}")


def policy(arch: int, nr: int, args: tuple[int, ...] = (0,) * 6) -> int:
    """DESIGN.md's sandbox policy and seccomp.py's lists, written out as plain Python."""
    if arch != X86_64 or 0x40000000 <= nr < 0xFFFFFFFF:  # a foreign ABI, x32 (nr -1 is no syscall)
        return KILL
    name = {number: name for name, number in seccomp.SYSCALLS.items()}.get(nr)
    if name is None:
        return KILL if nr == 467 else ALLOW  # open_tree_attr, by number
    if name in seccomp.KILLED:
        return KILL
    if name in seccomp.REFUSED_EPERM:
        return ERRNO | errno.EPERM
    if name == "clone3":
        return ERRNO | errno.ENOSYS
    if name == "prlimit64":
        return ERRNO | errno.EPERM if args[0] != 0 else ALLOW
    if name == "socket":
        if args[0] not in (1, 2, 10, 16):  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
            return ERRNO | errno.EAFNOSUPPORT
        return ERRNO | errno.EPROTONOSUPPORT if args[0] == 16 and args[2] != 0 else ALLOW
    if name == "clone":
        return KILL if any(args[0] & flag for flag in NAMESPACE_FLAGS) else ALLOW
    if name == "personality":
        return ALLOW if args[0] & 0xFFFFFFFF in (0, 0xFFFFFFFF) else KILL
    raise AssertionError(f"{name} is named but has no rule here")


PROGRAM = seccomp.compile_filter()


@pytest.fixture
def program() -> bytes:
    return PROGRAM


def same(program: bytes, arch: int, nr: int, args: tuple[int, ...] = (0,) * 6) -> None:
    new, old, expected = run(program, arch, nr, args), run(LIBSECCOMP_PROGRAM, arch, nr, args), policy(arch, nr, args)
    assert new == old == expected, (hex(arch), nr, [hex(a) for a in args], hex(new), hex(old), hex(expected))


def test_the_program_is_one_seccomp_accepts(program):
    insns = [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    assert len(program) % 8 == 0 and 0 < len(insns) <= 4096
    assert insns[-1][0] == 0x06  # the kernel wants a return last
    for pc, (code, jt, jf, k) in enumerate(insns):
        assert code in (0x20, 0x15, 0x25, 0x35, 0x45, 0x06), (pc, code)
        if code == 0x20:
            assert k % 4 == 0 and k + 4 <= 64  # within struct seccomp_data
        if code in (0x15, 0x25, 0x35, 0x45):
            assert pc + 1 + max(jt, jf) < len(insns)
    assert insns[:3] == [(0x20, 0, 0, 4), (0x15, 0, insns[1][2], X86_64), (0x20, 0, 0, 0)]  # the arch first
    assert len(insns) < len(LIBSECCOMP_PROGRAM) // 8


def test_every_syscall_number_without_arguments(program):
    for nr in range(0, 1024):
        for args in ((0,) * 6, (U64,) * 6, (1, 0, 1, 0, 0, 0)):
            same(program, X86_64, nr, args)


def test_x32_numbers_nr_minus_one_and_the_rest_of_32_bits(program):
    for nr in range(0x40000000, 0x40000000 + 1024):
        same(program, X86_64, nr)
    for nr in (1024, 0x3FFFFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF):
        for args in ((0,) * 6, (U64,) * 6):
            same(program, X86_64, nr, args)


@pytest.mark.parametrize("arch", [I386, AARCH64, 0, 0xFFFFFFFF, X86_64 ^ 1])
def test_a_foreign_architecture_is_killed(program, arch):
    for nr in [*range(0, 600), 0x40000000 | 41, 0xFFFFFFFF]:
        same(program, arch, nr)


VALUES = sorted(
    {0, 1, 2, 3, 9, 10, 11, 15, 16, 17, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, (1 << 32) | 1, (1 << 32) | 16, (1 << 63) | 16, U64}
    | {1 << bit for bit in range(64)}
    | {flag | 17 for flag in NAMESPACE_FLAGS}  # SIGCHLD, as fork() passes it
    | {0x01200011, 0x003D0F00, 0x003D0F00 | CLONE_NEWPID}  # glibc's fork, pthread_create's flags
)  # fmt: skip


@pytest.mark.parametrize("name", ["socket", "clone", "prlimit64", "personality"])
def test_the_arguments_the_policy_checks(program, name):
    nr = seccomp.SYSCALLS[name]
    for first in VALUES:
        for third in VALUES if name == "socket" else (0, U64):
            same(program, X86_64, nr, (first, 3, third, 0, 0, 0))
            same(program, X86_64, nr, (first, U64, third, U64, U64, U64))


@settings(max_examples=2000, deadline=None)
@given(
    arch=st.sampled_from([X86_64, X86_64, X86_64, I386]) | st.integers(0, 0xFFFFFFFF),
    nr=st.sampled_from(sorted(seccomp.SYSCALLS.values())) | st.integers(0, 600) | st.integers(0, 0xFFFFFFFF),
    args=st.tuples(*[st.sampled_from(VALUES) | st.integers(0, U64)] * 6),
)
def test_any_call(arch, nr, args):
    same(PROGRAM, arch, nr, args)


def kernel_cache(program: bytes, nr: int) -> bool:
    """seccomp_cache_prepare's question: does the filter allow nr on x86_64 whatever the
    arguments, reading only nr and arch? Then the kernel never runs it for that number."""
    trace: list = []
    action = run(program, X86_64, nr, (0,) * 6, trace)
    return action == ALLOW and all(k in (0, 4) for _, code, k in trace if code == 0x20)


def test_what_the_kernel_can_skip_is_unchanged(program):
    checked = {seccomp.SYSCALLS[name] for name in seccomp.ARGUMENT_CHECKS}
    for nr in range(0, 600):
        assert kernel_cache(program, nr) == kernel_cache(LIBSECCOMP_PROGRAM, nr) == (policy(X86_64, nr) == ALLOW and nr not in checked), nr


def test_a_number_is_found_by_binary_search(program):
    """The layout this module exists for: arch, nr, then at most one comparison per level of a
    balanced search over the ranges of one action, before a return or a syscall's argument checks."""
    depth = math.ceil(math.log2(len(seccomp._ranges(seccomp.policy()))))
    checks = set()
    for nr in [*range(0, 1024), *range(0x40000000, 0x40000000 + 64), 0xFFFFFFFE, 0xFFFFFFFF]:
        trace: list = []
        run(program, X86_64, nr, (0,) * 6, trace)
        loads = [i for i, step in enumerate(trace) if step[1] == 0x20 and step[2] >= 16]
        searched = trace[3 : loads[0]] if loads else trace[3:-1]
        assert len(searched) <= depth and all(code in (0x15, 0x35) for _, code, _ in searched), (nr, trace)
        if loads:
            checks.add(nr)
    assert checks == {seccomp.SYSCALLS[name] for name in seccomp.ARGUMENT_CHECKS}


def test_the_numbers_are_libseccomp_s():
    sc = pytest.importorskip("pyseccomp")
    for name, number in seccomp.SYSCALLS.items():
        assert sc.resolve_syscall(sc.Arch.X86_64, name) == number, name
