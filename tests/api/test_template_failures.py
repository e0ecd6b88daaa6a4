"""What a language template (a warm runtime prestarted tasks are forked from, kiln/native/
template*.c) that dies, cannot start or cannot fork costs: no run, through the real API and
sandbox, with python's template (or a workspace's) as any language's. What a working template
gives each language: test_every_template.py."""

from __future__ import annotations

import os
import signal
import time
from kilntest import Server, wait_until

# how the task was started: "--template" when forked from the template
HOW = "print(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[-2].decode())\n"


def how(server: Server) -> str:
    body, _ = server.run_logged(lang_slug="python", solution_text=HOW)
    assert (body["exit_code"], body["stderr"]) == (0, ""), body
    return body["stdout"].strip()


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
    while how(srv) != "--template":
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
