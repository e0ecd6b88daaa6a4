"""The template modules (kiln/native/template.c, through each runtime's binding: CPython's and
node's) against requests they must refuse, without a fork: each is answered -EPROTO, the
descriptors that came with it are closed, and the template goes on serving; end-of-file from
the zygote ends serve() with false."""

from __future__ import annotations

import errno
import os
import socket
import struct
import subprocess
from pathlib import Path

import pytest

from kiln import native

# each runtime loads its module and prints what serve(<descriptor>) returned
SERVE = {
    "python": [
        "/usr/bin/python3", "-c",
        "import importlib.machinery as m, sys\n"
        "loader = m.ExtensionFileLoader('_kiln_template', sys.argv[1])\n"
        "module = loader.create_module(m.ModuleSpec('_kiln_template', loader, origin=sys.argv[1]))\n"
        "print(module.serve(int(sys.argv[2])))\n",
    ],
    "node": [
        "/usr/bin/node", "--single-threaded", "-e",
        "const m = { exports: {} }; process.dlopen(m, process.argv[1]);"
        "console.log(m.exports.serve(Number(process.argv[2])) === false ? 'False' : 'a seed')",
    ],
}  # fmt: skip


@pytest.fixture(params=sorted(SERVE))
def template(request):
    zygote, end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    argv = [*SERVE[request.param], str(native.TEMPLATE_MODULES[request.param]), str(end.fileno())]
    proc = subprocess.Popen(argv, pass_fds=[end.fileno()], stdout=subprocess.PIPE, text=True)
    end.close()
    zygote.settimeout(10)
    assert zygote.recv(16) == b"r"  # ready
    yield zygote, proc
    zygote.close()
    proc.wait(10)


def raw(argv: list[bytes], env: list[bytes]) -> bytes:
    """A request as kiln.zygote.template.fork_message lays it out, descriptors already #i."""
    return struct.pack("=Q", 0) + b"".join(s + b"\0" for s in [*argv, b"", *env])


GOOD_ENV = [b"KILN_RECIPE=#0", b"KILN_PRESTART=python"]


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def ask(zygote: socket.socket, message: bytes, fds: list[int]) -> int:
    socket.send_fds(zygote, [message], fds)
    return struct.unpack("=i", zygote.recv(16))[0]


@pytest.mark.parametrize(
    ("message", "nfds"),
    [
        (b"short", 1),  # no room for the flags
        (raw([b"init"], GOOD_ENV), 0),  # no program
        (raw([b"init"], GOOD_ENV[1:]), 2),  # no recipe
        (raw([b"init"], GOOD_ENV[:1]), 2),  # no language
        (raw([b"init"], [b"KILN_RECIPE=#7", GOOD_ENV[1]]), 2),  # past the descriptors passed
        (raw([b"init"], [b"KILN_RECIPE=#0,", GOOD_ENV[1]]), 2),  # a list cut short
        (raw([b"init"], [b"KILN_RECIPE=#0x", GOOD_ENV[1]]), 2),  # not a number
        (raw([], GOOD_ENV), 2),  # no argv
        (raw([b"init"], GOOD_ENV)[:-1], 2),  # not NUL-terminated
    ],
)
def test_a_malformed_request_is_refused_and_its_descriptors_closed(template, message, nfds):
    zygote, proc = template
    before = descriptors(proc.pid)
    fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(nfds)]
    try:
        assert ask(zygote, message, fds) == -errno.EPROTO
    finally:
        for fd in fds:
            os.close(fd)
    assert descriptors(proc.pid) == before
    assert ask(zygote, b"x", []) == -errno.EPROTO  # still serving


def test_end_of_file_ends_serve(template):
    zygote, proc = template
    zygote.close()
    assert proc.wait(10) == 0 and proc.stdout.read() == "False\n"
    assert not Path(f"/proc/{proc.pid}").exists()
