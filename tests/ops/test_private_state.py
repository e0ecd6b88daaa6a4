"""The cached builds (/run/<instance>/layers) and the file store are the front's user's alone, and
that user is kiln's own: no other local user reads a cached submission, checker or test, and no
process of a shared user (nobody) can rewrite a cached build. Real root servers; another user's
view through setpriv."""

from __future__ import annotations

import hashlib
import os
import pwd
import stat
import subprocess
from pathlib import Path

from kilntest import ROOTLESS, Server

JUDGE = {"lang_slug": "python", "solution_text": "print(int(input()) * 2)\n", "tests": [{"stdin": "2", "expected": "4"}]}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def as_nobody(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv], capture_output=True, text=True)


def test_cached_builds_and_the_file_store_are_the_front_users_alone(store_folder, start_server):
    if ROOTLESS:
        return  # a rootless front's ids are the kiln user's subordinate ids: tests/ops/test_rootless.py
    store = store_folder
    older = b"a test an older kiln stored, readable by all"
    digest = hashlib.sha256(older).hexdigest()
    (store / "sha256").mkdir(parents=True, mode=0o755)
    (store / "sha256" / digest).write_bytes(older)
    os.chmod(store / "sha256" / digest, 0o644)
    server = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2", RUN_FILE_STORE=str(store))
    front = pwd.getpwuid(int(Path(f"/proc/{server.pids()['front']}/status").read_text().split("Uid:")[1].split()[0]))
    assert front.pw_name == "kiln"  # kiln's own user, not nobody
    uploaded = server.client.post("/files", content=b"expected answer")
    assert uploaded.status_code == 201, uploaded.text
    judged = server.client.post("/judge", json=JUDGE)
    assert judged.status_code == 200 and judged.json()["verdict"] == "AC", judged.text
    layers = Path(f"/run/{server.instance}/layers")
    assert [(mode(p), p.stat().st_uid) for p in (layers, store)] == [(0o700, front.pw_uid)] * 2
    assert list(layers.iterdir()), "the build is cached"
    stored = [p for p in (store / "sha256").iterdir()]
    assert {p.name for p in stored} == {digest, uploaded.json()["id"].removeprefix("sha256:")}
    assert {(mode(p), p.stat().st_uid) for p in stored} == {(0o600, front.pw_uid)}  # the older one's too
    # another user of the host: neither the store's files nor the cached builds
    for path in (store / "sha256" / digest, layers):
        assert as_nobody("ls", "-l", str(path)).returncode != 0, path
    assert as_nobody("cat", str(store / "sha256" / digest)).returncode != 0


def test_a_shared_front_user_is_refused_at_startup():
    if ROOTLESS:
        return
    server = Server({"RUN_LANGS": "python", "RUN_CONCURRENCY": "1", "RUN_FRONT_USER": "nobody"})
    try:
        status = server.proc.wait(60)
    finally:
        if server.proc.poll() is None:
            server.stop()  # it started: nothing left running
    assert status != 0
    server._reader.join(5)
    [refused] = server.logged("cannot start")
    assert "RUN_FRONT_USER='nobody' is shared with other processes of this host" in refused["error"], refused
