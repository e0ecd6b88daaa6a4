"""kiln's native parts from the zygote's side: the spawn helper (spawn.c) and the build check.

The helper's two spawns (spawn_init, which waits for the exec; start_init, a slot's, which does
not) are tested with /bin/sh in kiln-init's place: what the child inherits (the kept descriptors
and nothing else, signal dispositions, an empty mask), the namespaces it starts in, how a failed
exec is told. kiln-init itself is tested by every test that runs a slot, and by test_job_fuzz.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
from pathlib import Path

import pytest

from kiln import native
from kiln.sandbox import libc


SPAWNS = [native.spawn_init, native.start_init]


@pytest.fixture(params=SPAWNS, ids=lambda spawn: spawn.__name__)
def run(request, monkeypatch):
    """A shell script as kiln-init, spawned by each of the helper's spawns: its exit code."""
    monkeypatch.setattr(native, "INIT", Path("/bin/sh"))

    def run(script: str, keep: list[int] = (), flags: int = 0, env: dict | None = None) -> int:
        pid = request.param(flags, ["sh", "-c", script], env or {"PATH": "/usr/bin:/bin"}, list(keep))
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    return run


def test_the_child_inherits_the_kept_descriptors_and_nothing_else(run, tmp_path):
    kept_r, kept_w = os.pipe()  # both close-on-exec, as every descriptor of the zygote
    other_r, other_w = os.pipe()
    out = tmp_path / "fds"
    try:
        assert run(f"ls /proc/self/fd > {out}", keep=[kept_w]) == 0
        fds = {int(fd) for fd in out.read_text().split()}
        assert kept_w in fds and not {kept_r, other_r, other_w} & fds
        assert os.get_inheritable(kept_w) is False  # the zygote's own copy is untouched
    finally:
        for fd in (kept_r, kept_w, other_r, other_w):
            os.close(fd)


def test_the_child_starts_with_default_signals_but_sigpipe_and_sigxfsz_ignored_and_none_blocked(run, tmp_path):
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the zygote ignores SIGHUP
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    out = tmp_path / "status"
    try:
        assert run(f"grep -E '^Sig(Ign|Blk)' /proc/self/status > {out}") == 0
    finally:
        signal.signal(signal.SIGHUP, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    fields = dict(line.split(":\t") for line in out.read_text().splitlines())
    ignored = int(fields["SigIgn"], 16)
    assert ignored == (1 << (signal.SIGPIPE - 1)) | (1 << (signal.SIGXFSZ - 1))
    assert int(fields["SigBlk"], 16) == 0


def test_the_child_is_pid_1_of_a_new_pid_namespace(run):
    assert run('[ "$$" = 1 ]', flags=libc.CLONE_NEWPID) == 0
    assert run('[ "$$" = 1 ]') == 1


def test_a_failed_exec_is_an_oserror_and_leaves_no_child(monkeypatch):
    monkeypatch.setattr(native, "INIT", Path("/nonexistent/kiln-init"))
    before = children()
    with pytest.raises(OSError, match="No such file"):
        native.spawn_init(0, ["kiln-init"], {}, [])
    assert children() == before  # reaped, not a zombie


def test_a_started_child_that_cannot_exec_exits_127_and_its_errno_is_kept(monkeypatch):
    """start_init returns before the exec: a failed one is the child's exit, and why is told
    (the zygote reports it as the slot's warm-up failure)."""
    monkeypatch.setattr(native, "INIT", Path("/nonexistent/kiln-init"))
    pid = native.start_init(0, ["kiln-init"], {}, [])
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 127
    assert native.start_error(pid) == errno.ENOENT
    monkeypatch.setattr(native, "INIT", Path("/bin/true"))
    pid = native.start_init(0, ["true"], {}, [])
    os.waitpid(pid, 0)
    assert native.start_error(pid) == 0


def test_each_started_child_gets_its_own_arguments_while_others_still_run(tmp_path, monkeypatch):
    """start_init copies what its child reads into a launch area the child holds until its exec:
    many children in a row, more than there are areas, each alive while the next starts, get
    exactly their own argv, environment and descriptor."""
    monkeypatch.setattr(native, "INIT", Path("/bin/sh"))
    started = []
    for i in range(40):
        r, w = os.pipe()
        script = f'read line < /dev/fd/{r}; echo "$0 $KILN_N $line" > {tmp_path}/{i}'
        started.append((native.start_init(0, ["sh", "-c", script, f"arg{i}"], {"KILN_N": str(i) * (i + 1)}, [r]), r, w))
    for i, (pid, r, w) in enumerate(started):
        os.write(w, f"line{i}\n".encode())
        os.waitpid(pid, 0)
        os.close(r)
        os.close(w)
        assert (tmp_path / str(i)).read_text() == f"arg{i} {str(i) * (i + 1)} line{i}\n"


def test_a_start_whose_arguments_do_not_fit_is_refused_and_leaves_no_child(monkeypatch):
    monkeypatch.setattr(native, "INIT", Path("/bin/true"))
    before = children()
    with pytest.raises(OSError, match="Argument list too long"):
        native.start_init(0, ["true"], {"BIG": "x" * 20000}, [])
    assert children() == before


def children() -> set[int]:
    return {int(pid) for pid in Path(f"/proc/self/task/{os.getpid()}/children").read_text().split()}


def test_kiln_init_refuses_to_start_without_the_zygote():
    pid = native.spawn_init(0, ["kiln: slot 0 warming".ljust(96)], {}, [])
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 70


def test_a_build_older_than_its_sources_is_refused(tmp_path, monkeypatch):
    """The Makefile owns what each part is built from (make -q): a copy of the built tree passes,
    then a source edited after the build, or a part gone, is refused."""
    copy = tmp_path / "native"
    shutil.copytree(native.HERE, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(native, "HERE", copy)
    monkeypatch.setattr(native, "BUILD", copy / "build")
    monkeypatch.setattr(native, "BUILT", tuple(copy / "build" / path.name for path in native.BUILT))
    native.check_built()
    os.utime(copy / "frames.c", (1e10, 1e10))
    with pytest.raises(native.NotBuilt, match="older than their sources: run `make setup`"):
        native.check_built()
    (copy / "build" / "kiln-init").unlink()
    with pytest.raises(native.NotBuilt, match="kiln-init missing"):
        native.check_built()


def test_the_lower_layers_probe_answers_and_leaves_nothing_mounted(tmp_path):
    """kiln-init probe-lower: whether this kernel takes a detached clone as an overlay layer
    (what decides RootPlan.lower_held), in a mount namespace of its own: the host's mount table
    and the scratch folder are as they were."""
    mounts_before = Path("/proc/self/mountinfo").read_text()
    held = native.probe_lower(str(tmp_path))
    assert Path("/proc/self/mountinfo").read_text() == mounts_before
    assert list(tmp_path.iterdir()) == []
    assert held in (True, False)
    assert native.probe_lower(str(tmp_path / "missing")) is False  # a probe that could not even set up says no
