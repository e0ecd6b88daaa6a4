"""Prestarted slots: a workspace's `prestart` command started while the slot warms, released by
the request. Through the real API and sandbox: the answers are those of a plain slot, the task
is confined the same way, and the pool trades slots between languages."""

from __future__ import annotations

import json
import time

import pytest

from kilntest import Server, wait_until

ADD = "def solution(a, b):\n    return a + b\n"
# a plain program printing 5 (2 + 3), per prestarted language
FIVE = {"python": "print(2 + 3)\n", "js": "console.log(2 + 3);\n", "ts": "const n: number = 2 + 3;\nconsole.log(n);\n", "elixir": "IO.puts(2 + 3)\n", "clojure": "(println (+ 2 3))\n"}
RUNNER_PAYLOAD = "import json\n\nwith open('asserts.json') as f:\n    data = json.load(f)\nprint(data['a'] + data['b'])\n"


@pytest.fixture(scope="module")
def server():
    instance = Server({"RUN_CONCURRENCY": "2", "RUN_LANGS": "python,js,ruby,ts,elixir,clojure", "RUN_PRESTART": ",".join(FIVE)}).wait_ready()
    yield instance
    instance.stop()



def run_prestarted(server: Server, solution: str, **fields) -> dict:
    server.wait_prestarted("python")
    body, record = server.run_logged(lang_slug="python", solution_text=solution, **fields)
    assert record["prestarted"] is True, record
    return body


def test_languages_says_which_are_prestarted(server):
    languages = {entry["slug"]: entry for entry in server.client.get("/languages").json()["languages"]}
    assert {slug for slug, entry in languages.items() if entry["prestart"]} == set(FIVE) & set(languages)
    assert languages["ruby"]["prestart"] is False


@pytest.mark.parametrize("slug", sorted(FIVE))
def test_every_prestarting_workspace_answers_as_its_test_command(server, slug):
    served = {entry["slug"] for entry in server.client.get("/languages").json()["languages"]}
    if slug not in served:
        pytest.skip(f"{slug} is not served on this host")
    server.wait_prestarted(slug)
    body, record = server.run_logged(lang_slug=slug, solution_text=FIVE[slug])
    assert (body["exit_code"], body["stdout"], body["stderr"], body["stats"]["outcome"]) == (0, "5\n", "", "exited"), body["stderr"]
    assert record["prestarted"] is True


def test_the_original_runner_payload_answers_exactly(server):
    body = run_prestarted(server, RUNNER_PAYLOAD, asserts='{"a": 2, "b": 3}')
    assert (body["exit_code"], body["stdout"], body["stderr"], body["stats"]["outcome"]) == (0, "5\n", "", "exited"), body["stderr"]


def test_harness_mode(server):
    body = run_prestarted(server, ADD, asserts={"arguments": [[1, 2], [10, -3]]})
    assert body["exit_code"] == 0 and body["stderr"] == ""
    assert [(item["type"], item["value"]) for item in json.loads(body["stdout"])] == [("result", 3), ("result", 7)]


def test_an_uncaught_exception(server):
    body = run_prestarted(server, "print('before')\nraise ValueError('boom')\n")
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert body["stderr"].endswith("ValueError: boom\n") and "harness" not in body["stderr"]


def test_the_timeout_is_the_request_s(server):
    started = time.monotonic()
    body = run_prestarted(server, "while True:\n    pass\n", timeout="1s")
    assert body["exit_code"] is None and body["stats"]["outcome"] == "timed_out"
    assert time.monotonic() - started < 20


def test_the_task_is_confined_as_in_a_plain_slot(server):
    probe = (
        "import os, resource\n"
        "status = dict(line.split(':', 1) for line in open('/proc/self/status'))\n"
        "for key in ('Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp'):\n"
        "    print(key, status[key].split())\n"
        "print('fds', sorted(int(fd) for fd in os.listdir('/proc/self/fd')))\n"
        "print('nofile', resource.getrlimit(resource.RLIMIT_NOFILE), 'core', resource.getrlimit(resource.RLIMIT_CORE))\n"
        "print('cwd', os.getcwd(), 'ppid', os.getppid())\n"
    )
    lines = run_prestarted(server, probe)["stdout"].splitlines()
    uid = lines[0].split()[1].strip("[]',")
    assert int(uid) >= 10001
    assert lines[0] == f"Uid ['{uid}', '{uid}', '{uid}', '{uid}']"
    assert lines[1] == f"Gid ['{uid}', '{uid}', '{uid}', '{uid}']"
    assert lines[2] == "Groups []"
    assert all(line.endswith("['0000000000000000']") for line in lines[3:8]), lines[3:8]
    assert lines[8:10] == ["NoNewPrivs ['1']", "Seccomp ['2']"]
    assert lines[10] == "fds [0, 1, 2, 3]"  # 3: listdir's own; the go pipe is closed
    assert lines[11] == "nofile (256, 256) core (0, 0)"
    assert lines[12] == "cwd /sandbox/check ppid 1"


def test_the_files_of_one_run_are_not_the_next_s(server):
    run_prestarted(server, "open('/sandbox/check/left', 'w').write('x')\nopen('/tmp/left', 'w').write('x')\n")
    body = run_prestarted(server, "import os\nprint(os.path.exists('/sandbox/check/left'), os.path.exists('/tmp/left'))\n")
    assert body["stdout"] == "False False\n"


def test_a_request_with_stdin_takes_a_plain_slot(server):
    server.wait_prestarted("python", count=2)
    body, record = server.run_logged(lang_slug="python", solution_text="print(input()[::-1])\n", stdin="olleh\n")
    assert body["stdout"] == "hello\n"
    assert record["prestarted"] is False


def test_a_language_without_prestart_trades_a_prestarted_slot_in(server):
    server.wait_prestarted("python", count=2)  # every warm slot is python's
    trades = server.metric("kiln_prestart_trades_total")
    body, record = server.run_logged(lang_slug="ruby", solution_text="puts 6 * 7\n")
    assert (body["exit_code"], body["stdout"]) == (0, "42\n")
    assert record["prestarted"] is False
    assert server.metric("kiln_prestart_trades_total") == trades + 1


def test_metrics_count_prestarted_runs(server):
    server.wait_prestarted("python")
    before = server.metric('kiln_prestarted_runs_total{lang="python"}')
    _body, record = server.run_logged(lang_slug="python", solution_text="pass\n")
    assert record["prestarted"] is True
    assert server.metric('kiln_prestarted_runs_total{lang="python"}') == before + 1


def test_metrics_show_each_prestarting_languages_warm_slots(server):
    served = {entry["slug"] for entry in server.client.get("/languages").json()["languages"]}
    lines = [line for line in server.client.get("/metrics").text.splitlines() if line.startswith("kiln_prestarted_slots{")]
    labels = {line[line.index("{") : line.index("}") + 1] for line in lines}
    assert labels == {f'{{lang="{slug}",loading="{loading}"}}' for slug in set(FIVE) & served for loading in ("false", "true")}
    server.wait_prestarted("python", count=2)  # both slots python's, and settled, as the front counts them
    assert server.metric('kiln_prestarted_slots{lang="python"') == 2


def test_js_runs_prestarted_too(server):
    server.wait_prestarted("js", count=1)
    solution = "const d = JSON.parse(require('fs').readFileSync('asserts.json', 'utf8'));\nconsole.log(d.a + d.b);\n"
    body, record = server.run_logged(lang_slug="js", solution_text=solution, asserts='{"a": 2, "b": 3}')
    assert (body["exit_code"], body["stdout"], body["stderr"]) == (0, "5\n", "")
    assert record["prestarted"] is True


def test_without_prestart_no_slot_is_prestarted(start_server):
    plain = start_server(RUN_CONCURRENCY="1", RUN_LANGS="python", RUN_PRESTART="false")
    assert plain.client.get("/languages").json()["languages"][0]["prestart"] is False
    for _ in range(3):
        body, record = plain.run_logged(lang_slug="python", solution_text="print(1)\n")
        assert body["stdout"] == "1\n" and record["prestarted"] is False


def test_a_prestart_command_that_cannot_start_falls_back_to_plain_slots(start_server, workspace):
    folder = workspace("@echo plain", targets=".PHONY: prestart\nprestart:\n\t@/nonexistent/prestart\n")
    broken = start_server(RUN_CONCURRENCY="1", RUN_WORKSPACE=str(folder), RUN_LANGS="python")
    for _ in range(4):
        body, _record = broken.run_logged(lang_slug="python", solution_text="")
        assert body["stdout"] == "plain\n", body
    assert any("prestarting python" in str(r.get("error")) for r in broken.logged("slot warm-up failed"))


def test_a_slot_that_fails_to_warm_has_its_index_build_the_root_afresh(start_server, workspace):
    """Slots copy their index's root image; one that fails to warm (here: its prestart
    command) may have met a broken image, so the next builds a new one. Every request here
    is served by a plain slot warmed after such a failure: each sees a root of its own."""
    # the test command says when the root was built
    folder = workspace("@stat -c %z /etc/passwd", targets=".PHONY: prestart\nprestart:\n\t@/nonexistent/prestart\n")
    srv = start_server(RUN_CONCURRENCY="1", RUN_WORKSPACE=str(folder), RUN_LANGS="python")
    roots = [srv.run_logged(lang_slug="python", solution_text="")[0]["stdout"] for _ in range(3)]
    assert len(set(roots)) == 3 and all(r.startswith("20") for r in roots), roots


def test_init_stays_out_of_the_task_s_reach(server):
    """In a prestarted slot init keeps root: the task cannot signal it or change its limits."""
    probe = (
        "import errno, os, resource, signal\n"
        "for name, call in (('kill', lambda: os.kill(1, signal.SIGKILL)), ('prlimit', lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (8, 8)))):\n"
        "    try:\n"
        "        call()\n"
        "        print(name, 'ok')\n"
        "    except OSError as e:\n"
        "        print(name, errno.errorcode[e.errno])\n"
    )
    body = run_prestarted(server, probe)
    assert body["stdout"] == "kill EPERM\nprlimit EPERM\n"
    assert server.client.get("/health").status_code == 200


def test_a_prestart_command_that_does_not_wait_is_never_trusted_with_a_request(start_server, workspace):
    """A prestart that exits without waiting (a stale build, a crash at start-up) would answer
    for the test command: its first request runs again in a plain slot, and the language is
    not prestarted again."""
    folder = workspace("@echo plain", targets=".PHONY: prestart\nprestart:\n\t@echo early\n")
    srv = start_server(RUN_CONCURRENCY="1", RUN_WORKSPACE=str(folder), RUN_LANGS="python")
    srv.run_logged(lang_slug="python", solution_text="")  # its replacement is warmed prestarted
    assert wait_until(lambda: srv.warm_slots("python"), timeout=30), srv.slots()
    time.sleep(0.2)  # the prestart command has printed and exited
    for _ in range(3):
        body, record = srv.run_logged(lang_slug="python", solution_text="")
        assert (body["exit_code"], body["stdout"]) == (0, "plain\n"), body
        assert record["prestarted"] is False
    failures = srv.logged("prestart command failed; prestarting stops for this language")
    assert len(failures) == 1 and "early" in failures[0]["error"]
    assert srv.metric("kiln_prestarted_runs_total") == 0
    assert srv.metric('kiln_prestart_failures_total{lang="python"}') == 1
