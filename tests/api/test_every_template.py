"""Language templates as tables: prestarted tasks forked from one warm runtime (kiln/native/
template*.c) instead of started afresh, one row a language (test ids: test_x[<slug>]), what
each language's template is in templatecase.py. Through the real API and sandbox: a forked task
is confined as a task kiln-init spawns, holds nothing of the template, answers exactly as the
test command, and is counted as prestarted; the template keeps no child; settings turn it off.
A language's own cases are named after it (test_a_forked_js_...). What a template that dies or
cannot start costs: test_template_failures.py.

All the tests of a language share one server (`template_server`, module-scoped: pytest runs a
language's rows together)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from kilntest import Server, wait_until, with_slot_uid
from templatecase import BUSY, PROGRAMS, TEMPLATES, Program, lang_mark

UNAVAILABLE = "template unavailable: prestarted tasks are started afresh"


def rows(slugs) -> pytest.MarkDecorator:
    """Run the test for each of these languages, each row marked with its language's marker."""
    return pytest.mark.parametrize("slug", [pytest.param(slug, marks=lang_mark(slug)) for slug in slugs], scope="module")


@pytest.fixture(scope="module")
def template_server(slug: str):
    """A server of `slug` whose prestarted slots are forked from the template from here on (the
    first slots may have warmed before the template was ready); skips, saying why, where this
    runtime cannot fork tasks."""
    instance = Server({"RUN_CONCURRENCY": "2", "RUN_LANGS": slug}).wait_ready()
    try:
        said = lambda msg: [r for r in instance.logged(msg) if r.get("slug") == slug]  # noqa: E731
        assert wait_until(lambda: said("template ready") or said(UNAVAILABLE), timeout=60)
        if not said("template ready"):
            pytest.skip(f"this {slug} cannot fork tasks: {said(UNAVAILABLE)[0]['reason']}")
        deadline = time.monotonic() + 30
        while (instance.wait_prestarted(slug), probe(instance, slug)["how"])[1] != TEMPLATES[slug].how_forked:
            assert time.monotonic() < deadline, f"no {slug} task was forked from the template"
        yield instance
    finally:
        instance.stop()


def probe_logged(server: Server, slug: str, **fields) -> tuple[dict, dict]:
    """What the task saw of itself, and the run's log record."""
    body, record = server.run_logged(lang_slug=slug, solution_text=TEMPLATES[slug].probe, **fields)
    assert (body["exit_code"], body["stderr"]) == (0, ""), body
    seen = with_slot_uid(json.loads(body["stdout"]))
    seen["slot_cgroup_counted_it"] = body["stats"]["memory_peak_bytes"] > 0 and body["stats"]["cpu_ms"] > 0
    return seen, record


def probe(server: Server, slug: str, **fields) -> dict:
    return probe_logged(server, slug, **fields)[0]


def forked_probe(server: Server, slug: str) -> dict:
    server.wait_prestarted(slug)
    seen, record = probe_logged(server, slug)
    assert record["prestarted"] is True and seen["how"] == TEMPLATES[slug].how_forked, seen["how"]
    return seen


def spawned_probe(server: Server, slug: str) -> dict:
    seen, record = probe_logged(server, slug, stdin="")  # with stdin: a plain slot, its task spawned by init
    assert record["prestarted"] is False and seen["how"] == TEMPLATES[slug].how_spawned, seen["how"]
    return seen


def forked_run(server: Server, slug: str, **fields) -> dict:
    server.wait_prestarted(slug)
    body, record = server.run_logged(lang_slug=slug, **fields)
    assert record["prestarted"] is True
    return body


def spawned_run(server: Server, slug: str, **fields) -> dict:
    body, record = server.run_logged(lang_slug=slug, stdin="", **fields)  # with stdin: a plain slot
    assert record["prestarted"] is False
    return body


def answer(body: dict) -> tuple:
    """What the program said; a harness report's call times (never the same twice) as 't'."""
    return body["exit_code"], re.sub(r'"time":"[0-9.]+"', '"time":"t"', body["stdout"]), body["stderr"], body["stats"]["outcome"]


def past_stdio(seen: dict) -> list[str]:
    """The links of the descriptors the probe saw past 0-2, in their order."""
    return [link for fd, link in sorted(seen["fds"].items(), key=lambda item: int(item[0])) if int(fd) > 2 and link]


# -- confined as a spawned task -----------------------------------------------------------------

CONFINED_ALIKE = ("status", "environ", "limits", "mounts", "net", "hostname", "cwd", "pids", "ppid", "umask", "proc_owner")


@rows(TEMPLATES)
def test_a_forked_task_is_confined_as_a_spawned_one(slug, template_server):
    template = TEMPLATES[slug]
    forked = forked_probe(template_server, slug)
    spawned = spawned_probe(template_server, slug)
    # RLIMIT_CPU, set before any request, comes from RUN_TIMEOUT_MAX in every prestarted slot
    # (the request's timeout is init's to enforce there)
    assert int(forked["cpu_limit"]) > int(spawned["cpu_limit"])
    for key in CONFINED_ALIKE:
        assert forked[key] == spawned[key], key
    assert forked["status"]["CapBnd"] == ["0000000000000000"] and forked["status"]["NoNewPrivs"] == ["1"]
    # its cgroup is its own slot's (whose figures count it), and its cgroup namespace is rooted
    # there: "/" in every hierarchy, as for the spawned one
    assert forked["slot_cgroup_counted_it"] and spawned["slot_cgroup_counted_it"]
    assert forked["cgroup"] == spawned["cgroup"] and all(line.endswith(":/") for line in forked["cgroup"].splitlines())
    # its own pid (not the one the runtime took when the template started), kiln-init's child
    assert forked["pids"] == ["2"] and (forked["pid"], forked["ppid"]) == (2, 1)
    # the template library was loaded from a memfd: no host path of kiln's shows
    assert spawned["kiln_maps"] == [] and forked["kiln_maps"] == ([template.template_map] if template.template_map else [])


@rows(TEMPLATES)
def test_a_forked_task_holds_nothing_of_the_template(slug, template_server):
    """The template's descriptors were replaced by the task's own: no pipe, socket, memfd or
    eventfd of the template's is reachable from a run."""
    template = TEMPLATES[slug]
    forked = forked_probe(template_server, slug)
    (pid,) = template_server.templates()
    their_links, their_eventfds = set(), set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            their_links.add(os.readlink(fd))
            info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
        except FileNotFoundError:
            continue  # one it opened for a moment (it reads its maps before each fork)
        their_eventfds.update(line.split()[1] for line in info.splitlines() if line.startswith("eventfd-id:"))
    ours = set(past_stdio(forked))
    assert not [link for link in ours if "socket:" in link or "memfd:" in link], ours
    assert not {link for link in ours & their_links if link.startswith("pipe:")}, ours
    assert not set(forked["eventfds"]) & their_eventfds, (forked["eventfds"], their_eventfds)
    if template.fds_past_stdio is not None or template.same_descriptors_as_spawned:
        spawned = spawned_probe(template_server, slug)
        if template.fds_past_stdio is not None:
            assert (sorted(past_stdio(forked)), sorted(past_stdio(spawned))) == tuple(sorted(links) for links in template.fds_past_stdio)
        if template.same_descriptors_as_spawned:
            assert sorted(forked["fds"]) == sorted(spawned["fds"])


@rows(["js", "php", "ruby"])
def test_forked_tasks_draw_their_own_random_numbers(slug, template_server):
    draws = [probe(template_server, slug)["random"] for _ in range(4)]
    for source in range(len(draws[0])):  # each of the runtime's generators
        assert len({draw[source] for draw in draws}) == 4, draws


# -- answers as the test command ----------------------------------------------------------------

ANSWERS = [pytest.param(slug, program, id=f"{slug}-{n}", marks=lang_mark(slug)) for slug, table in PROGRAMS.items() for n, program in enumerate(table)]


@pytest.mark.parametrize(("slug", "program"), ANSWERS, scope="module")
def test_a_forked_task_answers_as_the_test_command(slug, program: Program, template_server):
    fields = {"solution_text": program.solution} | ({} if program.asserts is None else {"asserts": program.asserts})
    forked = answer(forked_run(template_server, slug, **fields))
    spawned = answer(spawned_run(template_server, slug, **fields))
    assert forked == spawned
    if program.said is not None:
        assert (forked[0], forked[1], forked[3]) == (*program.said, "exited")


@rows(BUSY)
def test_a_forked_task_may_use_threads_timers_and_child_processes(slug, template_server):
    program, said = BUSY[slug]
    for _ in range(3):
        body = forked_run(template_server, slug, solution_text=program)
        assert (body["exit_code"], body["stdout"], body["stderr"]) == (0, said, ""), body


@rows(TEMPLATES)
def test_forked_runs_are_counted_as_prestarted(slug, template_server):
    def counted() -> float:
        found = re.search(rf'^kiln_prestarted_runs_total\{{lang="{slug}"\}} (\S+)$', template_server.client.get("/metrics").text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    template_server.wait_prestarted(slug)
    before = counted()
    _, record = template_server.run_logged(lang_slug=slug, solution_text=TEMPLATES[slug].probe)
    assert record["prestarted"] is True
    assert counted() == before + 1


# -- the template itself ------------------------------------------------------------------------


@rows(TEMPLATES)
def test_the_template_forks_and_keeps_no_child(slug, template_server):
    template_server.wait_prestarted(slug)
    (template,) = template_server.templates()
    assert Path(f"/proc/{template}/task/{template}/children").read_text().split() == []
    assert os.stat(f"/proc/{template}").st_uid == template_server.host_uid(0)
    # in namespaces of its own, not the host's
    assert os.readlink(f"/proc/{template}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    assert os.readlink(f"/proc/{template}/ns/net") != os.readlink("/proc/self/ns/net")


PRESTART_SCRIPTS = {"php": b"prestart.php", "ruby": b"prestart.rb"}  # what a template runs


@rows(PRESTART_SCRIPTS)
@pytest.mark.parametrize("setting", ["RUN_TEMPLATES", "RUN_PRESTART"])
def test_settings_turn_templates_off(start_server, slug, setting):
    """RUN_TEMPLATES without the language: its slots are prestarted (once asked for), never
    forked; RUN_PRESTART without it: plain slots, the test command spawned."""
    template = TEMPLATES[slug]
    srv = start_server(RUN_CONCURRENCY="1", RUN_LANGS=f"{slug},python", **{setting: "python"})
    assert not any(PRESTART_SCRIPTS[slug] in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in srv.templates())
    how = template.how_prestarted if setting == "RUN_TEMPLATES" else template.how_spawned
    seen = []
    deadline = time.monotonic() + 20
    while how not in seen or len(seen) < 4:
        assert time.monotonic() < deadline, seen
        time.sleep(0.2)
        seen.append(probe(srv, slug)["how"])
    assert set(seen) <= {template.how_spawned, how}, seen


# -- a language's own ---------------------------------------------------------------------------


@rows(["js"])
def test_a_forked_js_tasks_timers_wait_as_long_as_asked(slug, template_server):
    """The loop's clock is the template's until the task's loop first runs: a timer must still
    count from when the run set it."""
    body = forked_run(template_server, slug, solution_text="const t = Date.now();\nsetTimeout(() => console.log(Date.now() - t), 300);\n")
    assert body["exit_code"] == 0 and 295 <= int(body["stdout"]) < 2000, body


@lang_mark("js")
def test_a_prestarted_js_task_may_use_threads_timers_and_child_processes_forked_or_not(start_server):
    """Forked where this node's forks end cleanly, else started afresh (Debian 12's node 18: a
    forked task's worker thread never let it end, and each such run was timed_out)."""
    program, said = BUSY["js"]
    srv = start_server(RUN_CONCURRENCY="2", RUN_LANGS="js")
    for _ in range(3):
        srv.wait_prestarted("js")
        body, record = srv.run_logged(lang_slug="js", solution_text=program)
        assert record["prestarted"] is True and (body["exit_code"], body["stdout"], body["stderr"]) == (0, said, ""), body


@lang_mark("ts")
def test_a_forked_ts_task_compiles_and_runs_its_typescript(start_server):
    """ts's template is js's harness behind esbuild's hook: the fork still spawns esbuild."""
    srv = start_server(RUN_CONCURRENCY="1", RUN_LANGS="ts")
    solution = "const n: number = 2;\nconsole.log(n + 1, require('fs').readFileSync('/proc/self/cmdline', 'latin1').split('\\0').slice(-2)[0]);\n"
    deadline = time.monotonic() + 20
    while True:
        srv.wait_prestarted("ts")
        body, _ = srv.run_logged(lang_slug="ts", solution_text=solution)
        assert body["exit_code"] == 0 and body["stdout"] in ("3 --template\n", "3 --prestarted\n", "3 check/harness.js\n"), body
        if body["stdout"] == "3 --template\n":
            break
        assert time.monotonic() < deadline, "no ts task was forked from the template"
