"""Language templates: python's prestarted tasks forked from one warm interpreter
(kiln/native/template.c) instead of started afresh. Through the real API and sandbox: a forked
task is confined exactly as a task kiln-init spawns, answers as the test command would, and a
template that dies or cannot start costs no run."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from kilntest import Server, wait_until, with_slot_uid

# What a task can see of its own confinement; printed as one JSON object. Everything here must
# be the same for a forked task as for one kiln-init spawned.
PROBE = r"""
import json, os, resource, socket
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
keep = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters")
print(json.dumps({
    "status": {k: status[k].split() for k in keep},
    "cgroup": open("/proc/self/cgroup").read(),
    "environ": dict(os.environ),
    "rlimits": {name: resource.getrlimit(getattr(resource, name)) for name in dir(resource) if name.startswith("RLIMIT_")},
    "fds": sorted(os.listdir("/proc/self/fd")),
    "mounts": [" ".join(line.split()[4:]) for line in open("/proc/self/mountinfo")],
    "net": [line.split(":")[0].strip() for line in open("/proc/self/net/dev").read().splitlines()[2:]],
    "hostname": socket.gethostname(),
    "cwd": os.getcwd(),
    "pids": sorted(p for p in os.listdir("/proc") if p.isdigit()),
    "ppid": os.getppid(),
    "umask": os.umask(0o22),
    "proc_owner": os.stat("/proc/self/mem").st_uid == os.getuid(),  # dumpable, as after an exec
    "cmdline": open("/proc/self/cmdline", "rb").read().split(b"\0")[-2].decode(),
    "kiln_maps": sorted({line.split(maxsplit=5)[5].strip() for line in open("/proc/self/maps") if "kiln" in line}),
}))
"""


@pytest.fixture(scope="module")
def server():
    instance = Server({"RUN_CONCURRENCY": "2", "RUN_LANGS": "python"}).wait_ready()
    yield instance
    instance.stop()



def probe(server: Server, **fields) -> tuple[dict, dict]:
    """What the task saw."""
    body, record = server.run_logged(lang_slug="python", solution_text=PROBE, **fields)
    assert (body["exit_code"], body["stderr"]) == (0, ""), body
    seen = with_slot_uid(json.loads(body["stdout"]))
    seen["slot_cgroup_counted_it"] = body["stats"]["memory_peak_bytes"] > 0 and body["stats"]["cpu_ms"] > 0
    return seen, record


def forked_probe(server: Server) -> dict:
    server.wait_prestarted("python")
    seen, record = probe(server)
    assert record["prestarted"] is True
    assert seen["cmdline"] == "--template", seen["cmdline"]  # forked from the template
    return seen



def test_a_forked_task_is_confined_as_a_spawned_one(server):
    forked = forked_probe(server)
    spawned, record = probe(server, stdin="")  # with stdin: a plain slot, its task spawned by init
    assert record["prestarted"] is False
    assert spawned["cmdline"] == "check/harness.py"  # its last argument
    # RLIMIT_CPU, set before any request, comes from RUN_TIMEOUT_MAX in every prestarted slot
    # (the request's timeout is init's to enforce there)
    assert forked["rlimits"].pop("RLIMIT_CPU") > spawned["rlimits"].pop("RLIMIT_CPU")
    for key in ("status", "environ", "rlimits", "fds", "mounts", "net", "hostname", "cwd", "pids", "ppid", "umask", "proc_owner"):
        assert forked[key] == spawned[key], key
    # its cgroup is its own slot's (whose figures count it), and its cgroup namespace is rooted
    # there: "/" in every hierarchy, as for the spawned one
    assert forked["slot_cgroup_counted_it"] and spawned["slot_cgroup_counted_it"]
    assert forked["cgroup"] == spawned["cgroup"] and all(line.endswith(":/") for line in forked["cgroup"].splitlines())
    assert forked["status"]["CapBnd"] == ["0000000000000000"] and forked["status"]["NoNewPrivs"] == ["1"]
    # the template module was loaded from a memfd: no host path of kiln's shows
    assert spawned["kiln_maps"] == [] and forked["kiln_maps"] == ["/memfd:_kiln_template.so (deleted)"]
    assert forked["pids"] == ["2"] and forked["ppid"] == 1  # kiln-init's child (init itself hidden)


def test_a_forked_task_answers_as_the_test_command(server):
    server.wait_prestarted("python")
    body, record = server.run_logged(lang_slug="python", solution_text="def solution(a, b):\n    return a + b\n", asserts='{"arguments": [[1, 2], [3, 4]]}')
    assert record["prestarted"] is True
    assert json.loads(body["stdout"]) == [
        {"type": "result", "value": 3, "time": json.loads(body["stdout"])[0]["time"], "output": ""},
        {"type": "result", "value": 7, "time": json.loads(body["stdout"])[1]["time"], "output": ""},
    ]
    server.wait_prestarted("python")
    body, _ = server.run_logged(lang_slug="python", solution_text="import sys\nprint(sys.argv)\nraise SystemExit(3)\n")
    assert (body["exit_code"], body["stdout"]) == (3, "['solution.py']\n")


def test_the_template_forks_and_keeps_no_child(server):
    server.wait_prestarted("python")
    (template,) = server.templates()
    assert Path(f"/proc/{template}/task/{template}/children").read_text().split() == []
    assert os.stat(f"/proc/{template}").st_uid == server.host_uid(0)
    # in a mount namespace of its own, not the host's
    assert os.readlink(f"/proc/{template}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    assert os.readlink(f"/proc/{template}/ns/net") != os.readlink("/proc/self/ns/net")


def test_a_killed_template_costs_no_run_and_comes_back(start_server):
    srv = start_server(RUN_CONCURRENCY="2", RUN_LANGS="python")
    srv.wait_prestarted("python")
    assert wait_until(lambda: len(srv.templates()) == 1)
    (first,) = srv.templates()
    os.kill(first, signal.SIGKILL)
    for _ in range(6):
        body, _ = srv.run_logged(lang_slug="python", solution_text="print(2 + 3)\n")
        assert (body["exit_code"], body["stdout"]) == (0, "5\n"), body
    assert wait_until(lambda: srv.templates() not in ([], [first]))
    assert any(r.get("slug") == "python" for r in srv.logged("template failed"))
    # slots warmed while there was none spawned their prestart command; the next are forked
    deadline = time.monotonic() + 20
    while probe(srv)[0]["cmdline"] != "--template":
        assert time.monotonic() < deadline


def test_a_template_that_cannot_start_leaves_prestarted_slots_working(start_server, workspace):
    folder = workspace("@echo plain", targets=".PHONY: prestart template\nprestart:\n\t@head -c 1 <&3 >/dev/null && echo prestarted\ntemplate:\n\t@/nonexistent/template\n")
    srv = start_server(RUN_CONCURRENCY="1", RUN_WORKSPACE=str(folder), RUN_LANGS="python")
    for _ in range(4):
        body, _record = srv.run_logged(lang_slug="python", solution_text="")
        assert body["stdout"] in ("plain\n", "prestarted\n"), body
    assert wait_until(lambda: any("/nonexistent/template" in str(r.get("error")) for r in srv.logged("template failed")))
    # counted for an alert to see (deploy/prometheus/kiln-rules.yml KilnTemplateFailing)
    assert wait_until(lambda: 'kiln_template_failures_total{lang="python"} 0.0' not in srv.client.get("/metrics").text)
    assert 'kiln_template_failures_total{lang="python"}' in srv.client.get("/metrics").text
    wait_prestarted_shell(srv)


def wait_prestarted_shell(srv: Server) -> None:
    deadline = time.monotonic() + 20
    while srv.run_logged(lang_slug="python", solution_text="")[0]["stdout"] != "prestarted\n":
        assert time.monotonic() < deadline


def test_a_template_whose_runtime_cannot_fork_here_is_neither_retried_nor_counted(start_server, workspace):
    # what ruby's template says on a build whose fork steps kiln does not know (langs/ruby)
    said = "kiln: cannot fork tasks from this runtime: no fork here"
    template = f"template:\n\t@printf '{said}' >&3; exit 1\n"
    folder = workspace("@echo plain", targets=".PHONY: prestart template\nprestart:\n\t@head -c 1 <&3 >/dev/null && echo prestarted\n" + template)
    srv = start_server(RUN_CONCURRENCY="1", RUN_WORKSPACE=str(folder), RUN_LANGS="python")
    assert wait_until(lambda: srv.logged("template unavailable: prestarted tasks are started afresh"))
    wait_prestarted_shell(srv)
    time.sleep(1.5)  # a failed template would have been started again three times by now
    [unavailable] = srv.logged("template unavailable: prestarted tasks are started afresh")
    assert said in unavailable["reason"] and not srv.logged("template failed")
    assert 'kiln_template_failures_total{lang="python"} 1' not in srv.client.get("/metrics").text
