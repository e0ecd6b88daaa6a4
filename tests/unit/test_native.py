"""kiln's native parts from the zygote's side: the spawn helper (spawn.c) and the build check.

The helper is tested with /bin/sh in kiln-init's place: what the child inherits (the kept
descriptors and nothing else, signal dispositions, an empty mask) and the namespaces it starts
in. kiln-init itself is tested by every test that runs a slot, and by test_job_fuzz.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from kiln import native
from kiln.sandbox import libc


@pytest.fixture
def sh_as_init(monkeypatch):
    monkeypatch.setattr(native, "INIT", Path("/bin/sh"))


def run(script: str, keep: list[int] = (), flags: int = 0, env: dict | None = None) -> int:
    pid = native.spawn_init(flags, ["sh", "-c", script], env or {"PATH": "/usr/bin:/bin"}, list(keep))
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_the_child_inherits_the_kept_descriptors_and_nothing_else(sh_as_init, tmp_path):
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


def test_the_child_starts_with_default_signals_but_sigpipe_and_sigxfsz_ignored_and_none_blocked(sh_as_init, tmp_path):
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


def test_the_child_is_pid_1_of_a_new_pid_namespace(sh_as_init):
    assert run('[ "$$" = 1 ]', flags=libc.CLONE_NEWPID) == 0
    assert run('[ "$$" = 1 ]') == 1


def test_a_failed_exec_is_an_oserror_and_leaves_no_child(monkeypatch):
    monkeypatch.setattr(native, "INIT", Path("/nonexistent/kiln-init"))
    before = children()
    with pytest.raises(OSError, match="No such file"):
        native.spawn_init(0, ["kiln-init"], {}, [])
    assert children() == before  # reaped, not a zombie


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
