"""cgroup v2: a task's process is created in its slot's cgroup (clone3 with CLONE_INTO_CGROUP),
never moved into it by a cgroup.procs write, which waits for an RCU grace period. The kernel's
own record says so: its cgroup_attach_task tracepoint fires at every migration (a write to
cgroup.procs) and never at a clone into a cgroup. On v1 (several hierarchies) a task joins by
cgroup.procs: skipped there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kiln.sandbox.cgroup_detect import own_v2_folder

TRACING = next((p for p in (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing")) if (p / "instances").is_dir()), None)
EVENT = "events/cgroup/cgroup_attach_task/enable"
AB = "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n"


def _v2_memory() -> bool:
    folder = own_v2_folder()
    return folder is not None and "memory" in Path(folder, "cgroup.controllers").read_text().split()


pytestmark = [
    pytest.mark.skipif(not _v2_memory(), reason="cgroup v1 for memory: a task joins its cgroups by cgroup.procs"),
    pytest.mark.skipif(TRACING is None or not (TRACING / EVENT).exists(), reason="no tracefs with the cgroup_attach_task event"),
]


@pytest.fixture
def migrations():
    """migrations() -> the kernel's cgroup_attach_task lines since the fixture began: a trace
    instance of its own, so nothing else that traces sees or changes it."""
    instance = TRACING / "instances" / f"kiln-birth-{os.getpid()}"
    instance.mkdir()
    try:
        (instance / EVENT).write_text("1")
        yield lambda: [line for line in (instance / "trace").read_text().splitlines() if "cgroup_attach_task:" in line]
    finally:
        (instance / EVENT).write_text("0")
        instance.rmdir()


def test_a_task_s_process_is_created_in_its_slot_s_cgroup_never_moved_there(start_server, migrations):
    # templates off: a forked task enters its slot as a process of the template's making, by
    # cgroup.procs (template.c); every other task is init's child: a plain slot's standby, a
    # prestarted command, a judge's build and each of its tests (the later ones on the request's path)
    server = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2", RUN_TEMPLATES="false")
    server.wait_prestarted("python")
    plain = server.run(lang_slug="python", solution_text=AB, stdin="1 2\n").json()
    prestarted = server.run(lang_slug="python", solution_text=AB).json()
    tests = [{"stdin": f"{i} 1\n", "expected": f"{i + 1}\n"} for i in range(3)]
    judged = server.client.post("/judge", json={"lang_slug": "python", "solution_text": AB, "tests": tests}).json()
    assert plain["stdout"] == "3\n" and prestarted["exit_code"] is not None and judged["verdict"] == "AC", (plain, prestarted, judged)

    seen = migrations()
    mine = [line for line in seen if f"/{server.instance}/" in line]
    # the trace works: kiln's own processes were moved into its supervisor leaf at its start
    assert any(f"/{server.instance}/supervisor " in line for line in mine), seen
    into_slots = [line for line in mine if f"/{server.instance}/slot-" in line]
    assert into_slots == [], into_slots
