"""The template modules (kiln/native/template.c, through each runtime's binding: CPython's,
node's, ruby's and php's) against requests they must refuse, without a fork: each is answered -EPROTO, the
descriptors that came with it are closed, and the template goes on serving; end-of-file from
the zygote ends serve() with false."""

from __future__ import annotations

import errno
import json
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
    "ruby": [
        "/usr/bin/ruby", "-rfiddle", "-e",
        "serve = Fiddle::Function.new(Fiddle::Handle.new(ARGV[0])['kiln_template_serve'], [Fiddle::TYPE_INT], Fiddle::TYPE_INT, need_gvl: true)\n"
        "puts serve.call(Integer(ARGV[1])).zero? ? 'False' : 'not 0'",
    ],
    "php": [
        "/usr/bin/php", "-r",
        "echo FFI::cdef('int kiln_template_serve(int);', $argv[1])->kiln_template_serve((int) $argv[2]) === 0 ? 'False' : 'not 0', \"\\n\";",
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


FORKS = """
const m = { exports: {} };
process.dlopen(m, process.argv[2]);
const statuses = [];
for (const how of ['natural', 'exit', 'throw', 'pool']) {
  const child = m.exports.forkAlike();
  if (child === 0) {
    if (how === 'exit') process.exit(3);
    if (how === 'throw') throw new Error('thrown in the fork');
    if (how === 'pool') require('zlib').gzip('kiln', () => setTimeout(() => {}, 1));
    return;
  }
  statuses.push(m.exports.waitFor(child));
}
console.log(JSON.stringify(statuses));
"""


def test_a_fork_of_node_made_as_a_task_ends_as_node_ends(tmp_path):
    """What js's template checks before it serves: a fork made as a task is (its threads joined
    by wrappers, its descriptors its own) exits with node's status, however it ends; a fork that
    never ends would read 137 (killed after 5 s)."""
    script = tmp_path / "forks.js"
    script.write_text(FORKS)
    done = subprocess.run(["/usr/bin/node", "--single-threaded", str(script), str(native.TEMPLATE_MODULES["node"])], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [0, 3, 1, 0], done
    assert "thrown in the fork" in done.stderr  # node's own report, from the child


@pytest.mark.parametrize("harness", ["langs/ruby/check/prestart.rb", "langs/js/check/harness.js"])
def test_a_template_that_cannot_fork_says_so_in_the_words_the_zygote_knows(harness):
    from kiln.zygote.template import UNAVAILABLE

    assert UNAVAILABLE in (Path(__file__).resolve().parents[2] / harness).read_text()
