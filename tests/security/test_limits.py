"""Cgroup limits: a fork bomb ends as `pids_limit`, a memory bomb as `out_of_memory`.

These assert the final behaviour of DESIGN.md (cgroup pids.max = RUN_PIDS_MAX, memory limit =
RUN_CGROUP_MEMORY_MAX with swap 0). The bombs are bounded so that without cgroup limits they end
by themselves instead of hurting the host: the memory bomb stops at 768 MiB, the fork bomb's
processes sleep instead of forking forever, and RLIMIT_NPROC (RUN_PIDS_MAX + 64) stops it.
"""

from __future__ import annotations

import pytest

from kilntest import processes_of_uids, wait_until

UID_BASE = 23000
PIDS_MAX = 32


@pytest.fixture(scope="module")
def limited(kiln_server):
    return kiln_server(RUN_LANGS="python", RUN_PIDS_MAX=str(PIDS_MAX), RUN_CGROUP_MEMORY_MAX="64m", RUN_CONCURRENCY="2", RUN_UID_BASE=str(UID_BASE))


def _run(srv, source: str, timeout: str = "30s") -> dict:
    response = srv.run(lang_slug="python", solution_text=source, timeout=timeout)
    assert response.status_code == 200, response.text
    assert srv.client.get("/health").status_code == 200
    return response.json()


def _no_task_left() -> bool:
    return processes_of_uids(range(UID_BASE, UID_BASE + 2)) == []


FORK_BOMB = """
import os, sys, time
made = 0
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
except OSError as e:
    print("fork failed", e.errno, made, flush=True)
    sys.exit(1)
"""


def test_fork_bomb_is_stopped_by_the_pids_limit(limited):
    body = _run(limited, FORK_BOMB)
    assert body["stats"]["outcome"] == "pids_limit", body
    words = body["stdout"].split()
    assert words[:3] == ["fork", "failed", "11"], body  # EAGAIN
    # the task itself plus its children fill pids.max exactly; RLIMIT_NPROC's backstop is 96
    assert int(words[3]) == PIDS_MAX - 1, body
    assert body["exit_code"] == 1
    assert wait_until(_no_task_left, timeout=10), processes_of_uids(range(UID_BASE, UID_BASE + 2))


RECURSIVE_FORK_BOMB = """
import os, sys
root = os.getpid()
print("start", flush=True)
while True:
    try:
        os.fork()
    except OSError:
        if os.getpid() == root:
            print("root saw EAGAIN", flush=True)
            sys.exit(3)
"""


def test_recursive_fork_bomb_is_stopped_by_the_pids_limit(limited):
    """The classic bomb (every process forks forever), ended by its root once a fork fails."""
    body = _run(limited, RECURSIVE_FORK_BOMB, timeout="20s")
    assert body["stats"]["outcome"] == "pids_limit", body
    assert body["stdout"].startswith("start\n")
    assert wait_until(_no_task_left, timeout=10), processes_of_uids(range(UID_BASE, UID_BASE + 2))


MEMORY_BOMB = """
import sys
hoard = []
for i in range(48):                      # 48 x 16 MiB = 768 MiB, far above the 64 MiB limit
    hoard.append(bytearray(b"\\x01") * (16 << 20))
    print(i, flush=True)
print("survived", flush=True)
"""


def test_memory_bomb_is_stopped_by_the_memory_limit(limited):
    body = _run(limited, MEMORY_BOMB)
    assert body["stats"]["outcome"] == "out_of_memory", body
    assert "survived" not in body["stdout"]
    assert len(body["stdout"].splitlines()) < 4  # killed around 64 MiB, not near 768 MiB
    assert body["stats"]["signal"] == 9 and body["exit_code"] == 137, body
    assert body["stats"]["memory_peak_bytes"] <= 64 * 1024 * 1024
    assert wait_until(_no_task_left, timeout=10)


TMPFS_BOMB = """
import os
chunk = b"m" * (1 << 20)
written = 0
with open("/tmp/fill", "wb") as f:
    for i in range(200):             # 200 MiB of tmpfs pages, below /tmp's own size cap
        f.write(chunk)
        f.flush()
        written += 1
print("survived", written, flush=True)
"""


def test_tmpfs_pages_count_against_the_memory_limit(limited):
    """DESIGN.md: the memory limit includes tmpfs pages (python's /tmp is 256m here, the memory
    limit 64m): filling /tmp must not be a way around it."""
    body = _run(limited, TMPFS_BOMB)
    assert "survived" not in body["stdout"], body
    assert body["stats"]["outcome"] == "out_of_memory", body


def test_service_is_healthy_and_serves_after_the_bombs(limited):
    body = _run(limited, "print('still here')\n")
    assert body["stdout"] == "still here\n"
    assert body["stats"]["outcome"] == "exited"
