"""Rootless mode for real (kiln/rootless.py, scripts/rootless.sh): `make run-rootless` starts a
kiln of which no process is root, in a cgroup subtree its user owns; a user with no subordinate
ids gets a working kiln that says what is weaker; ids outside the user's range are refused by
name. (The api, security and language suites run against rootless servers too: `make test`.)"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
from pathlib import Path

from kilntest import KILN, REPO, ROOTLESS_LAUNCHER, Server, children, descendants, process, wait_until

A_PLUS_B = "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n"
SEEN = (
    "import os\n"
    "status = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
    "print(status['Uid'].split()[0], status['CapEff'].strip(), status['Seccomp'].strip(), max(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
)


def _ranges(user: str) -> list[str]:
    return [line for line in Path("/etc/subuid").read_text().splitlines() if line.startswith(f"{user}:")]


def test_make_run_rootless_serves_and_no_process_of_kiln_is_root():
    instance = f"kiln-test-{os.getpid()}-rootless"
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOST": "127.0.0.1", "RUN_LANGS": "python,cpp",
        "RUN_CONCURRENCY": "2", "RUN_INSTANCE": instance, "RUN_FILE_STORE": f"/tmp/{instance}-files", "RUN_LOG_FORMAT": "json",
    }  # fmt: skip
    srv = Server(env, argv=["make", "-s", "-C", str(REPO), "run-rootless"])
    try:
        srv.wait_ready(timeout=120)
        kiln = pwd.getpwnam("kiln")
        [serve] = children(srv.proc.pid)  # make's: `kiln serve`, exec'd by scripts/rootless.sh
        answer = srv.client.post("/run", json={"lang_slug": "python", "solution_text": "import time\ntime.sleep(1)\n" + A_PLUS_B, "stdin": "2 3"})
        assert answer.status_code == 200 and answer.json()["stdout"] == "5\n", answer.text
        tree = [serve, *descendants(serve.pid)]
        assert tree and all(proc.uid != 0 for proc in tree), [(p.pid, p.uid, p.title) for p in tree if p.uid == 0]
        zygote = next(p for p in tree if p.title == "kiln: zygote")
        assert zygote.uid == kiln.pw_uid and len(zygote.nspid) == 2  # root of its user namespace, 1 of its pid namespace
        start = int(_ranges("kiln")[0].split(":")[1])
        assert serve.uid == start + kiln.pw_uid - 1  # the front: kiln (RUN_FRONT_USER) inside, a subordinate id outside
        health = srv.client.get("/health")
        assert health.status_code == 200 and "ROOTLESS" in health.text
        source = "#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<'\\n';}\n"
        cpp = srv.client.post("/judge", json={"lang_slug": "cpp", "solution_text": source, "tests": [{"stdin": "40 2", "expected": "42"}, {"stdin": "1 1", "expected": "3"}]})
        assert cpp.status_code == 200 and [t["verdict"] for t in cpp.json()["tests"]] == ["AC", "WA"], cpp.text
        seen = srv.client.post("/run", json={"lang_slug": "python", "solution_text": SEEN, "stdin": ""}).json()["stdout"].split()
        assert int(seen[0]) >= 10001 and seen[1:3] == ["0000000000000000", "2"] and int(seen[3]) < 10, seen
        subtree = [p for p in srv.logged("cgroup subtree ready")[0]["subtree"]]
        # below the subtree scripts/rootless.sh hands the user, or (cgroup v2 under systemd) the
        # delegated scope it starts kiln in
        assert subtree and all(p.endswith(f"/{instance}") and ("/kiln-rootless/" in p or ".scope/" in p) for p in subtree), subtree
        assert all(any(d.name.startswith("slot-") for d in Path(p).iterdir()) for p in subtree)
    finally:
        for proc in children(srv.proc.pid):  # make passes no signal on
            os.kill(proc.pid, signal.SIGTERM)
        srv.stop()
        shutil.rmtree(env["RUN_FILE_STORE"], ignore_errors=True)
        shutil.rmtree(f"/run/{instance}", ignore_errors=True)
    assert wait_until(lambda: not any(Path(p).exists() for p in subtree), timeout=10), subtree
    assert wait_until(lambda: process(zygote.pid) is None, timeout=10)


def test_one_id_mapped_serves_and_says_what_is_weaker():
    user = "kiln-oneid"
    subprocess.run(["userdel", user], capture_output=True, check=False)  # a fresh user: no range of an earlier run
    env = {"RUN_ROOTLESS_USER": user, "RUN_ROOTLESS_SUBIDS": "0", "RUN_LANGS": "python", "RUN_CONCURRENCY": "2"}
    srv = Server(env, argv=[str(ROOTLESS_LAUNCHER), "exec", str(KILN), "serve"])
    try:
        srv.wait_ready()
        assert _ranges(user) == []
        said = [r["msg"] for r in srv.records if r.get("level") == "warning" and "ROOTLESS" in r.get("msg", "")]
        assert any("only one id is mapped" in msg for msg in said), said
        assert "only one id is mapped" in srv.client.get("/health").text
        told = subprocess.run([str(ROOTLESS_LAUNCHER), "exec", str(KILN), "check-host"], env={**srv.env, "RUN_LANGS": "python"}, capture_output=True, text=True, timeout=120)
        assert told.returncode == 0 and f"sandbox: ROOTLESS as {user}" in told.stdout and "only one id is mapped" in told.stdout, told
        answer = srv.client.post("/run", json={"lang_slug": "python", "solution_text": A_PLUS_B, "stdin": "20 22"})
        assert answer.status_code == 200 and answer.json()["stdout"] == "42\n", answer.text
        # the one id is root of the namespace, but the task has no capability, the filter, and
        # sees only its own pid namespace
        uid, cap_eff, seccomp, listed = srv.client.post("/run", json={"lang_slug": "python", "solution_text": SEEN, "stdin": ""}).json()["stdout"].split(maxsplit=3)
        assert (uid, cap_eff, seccomp) == ("0", "0000000000000000", "2") and int(listed) < 10  # its own pid namespace
        assert {p.uid for p in [process(srv.proc.pid), *descendants(srv.proc.pid)]} == {pwd.getpwnam(user).pw_uid}
    finally:
        srv.stop()
        subprocess.run(["userdel", user], capture_output=True, check=False)


def test_slot_ids_outside_the_users_range_are_refused_by_name():
    srv = Server({"RUN_UID_BASE": "70000", "RUN_LANGS": "python"}, argv=[str(ROOTLESS_LAUNCHER), "exec", str(KILN), "serve"])
    assert srv.proc.wait(60) == 1
    srv.stop()
    [error] = [r["error"] for r in srv.logged("cannot start")]
    assert "RUN_UID_BASE=70000" in error and "not mapped in kiln's user namespace" in error and "/etc/subuid" in error, error


def test_the_file_store_changes_hands_between_a_root_and_a_rootless_kiln_either_way(store_folder):
    """`make run` then `make run-rootless` on one machine (the README shows them side by side),
    and back: each front makes the store its own and serves what the other stored."""
    store = store_folder  # directly under /tmp: where the rootless user reaches
    stored: list[str] = []
    for rootless in (False, True, False):
        argv = [str(ROOTLESS_LAUNCHER), "exec", str(KILN), "serve"] if rootless else [str(KILN), "serve"]
        srv = Server({"RUN_LANGS": "python", "RUN_CONCURRENCY": "2", "RUN_FILE_STORE": str(store)}, argv=argv)
        try:
            srv.wait_ready(timeout=120)
            for file_id in stored:
                assert srv.client.get(f"/files/{file_id}").status_code == 200, (rootless, file_id)
            upload = srv.client.post("/files", content=f"stored by {'rootless' if rootless else 'root'} {len(stored)}\n".encode())
            assert upload.status_code == 201, (rootless, upload.text)
            stored.append(upload.json()["id"])
        finally:
            srv.stop()
