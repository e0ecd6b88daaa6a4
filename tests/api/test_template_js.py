"""js's language template: prestarted node tasks forked from one warm node (kiln/native/
template_node.c) instead of started afresh. A fork of node lacks V8's and node's threads, shares
libuv's loop and Math.random's generator with the template unless made its own, and would crash
joining threads of another process as it exits: through the real API and sandbox, a forked task
is confined as a spawned one, ends as node ends (every way), and shares nothing with the
template."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from kilntest import Server, wait_until, with_slot_uid

# What a task can see of itself; printed as one JSON object.
PROBE = r"""
const fs = require('fs'), os = require('os');
const status = {};
for (const line of fs.readFileSync('/proc/self/status', 'utf8').split('\n').filter(Boolean)) {
  const at = line.indexOf(':');
  status[line.slice(0, at)] = line.slice(at + 1).trim().split(/\s+/);
}
const keep = ['Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp', 'Seccomp_filters'];
const link = (fd) => { try { return fs.readlinkSync('/proc/self/fd/' + fd); } catch (e) { return null; } };
const cmdline = fs.readFileSync('/proc/self/cmdline', 'latin1').split('\0');
console.log(JSON.stringify({
  status: Object.fromEntries(keep.map((k) => [k, status[k]])),
  cgroup: fs.readFileSync('/proc/self/cgroup', 'utf8'),
  environ: process.env,
  limits: fs.readFileSync('/proc/self/limits', 'utf8').split('\n').filter((l) => !l.startsWith('Max cpu time')),
  fds: Object.fromEntries(fs.readdirSync('/proc/self/fd').map((fd) => [fd, link(fd)])),
  mounts: fs.readFileSync('/proc/self/mountinfo', 'utf8').trim().split('\n').map((l) => l.split(' ').slice(4).join(' ')),
  net: fs.readFileSync('/proc/self/net/dev', 'utf8').trim().split('\n').slice(2).map((l) => l.split(':')[0].trim()),
  hostname: os.hostname(),
  cwd: process.cwd(),
  pids: fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).sort(),
  pid: process.pid,
  ppid: process.ppid,
  umask: process.umask(),
  proc_owner: fs.statSync('/proc/self/mem').uid === process.getuid(),
  cmdline: cmdline[cmdline.length - 2],
  kiln_maps: [...new Set(fs.readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.includes('kiln')).map((l) => l.split(/\s+/).slice(5).join(' ')))].sort(),
  random: Math.random(),
}));
"""

# a thread of its own (a worker), libuv's thread pool (fs, zlib, crypto), timers, a promise, a
# child process: what a fork lacks, or shares, unless kiln made it the task's own
BUSY = r"""
const { Worker } = require('worker_threads');
const fs = require('fs'), zlib = require('zlib'), crypto = require('crypto');
const said = [];
const worker = new Worker("require('worker_threads').parentPort.postMessage(6 * 7)", { eval: true });
worker.on('message', (n) => said.push('worker ' + n));
fs.readFile('/sandbox/check/solution.js', (err, data) => said.push('fs ' + (err ? err.code : data.length > 0)));
zlib.gzip('kiln', (err, out) => said.push('zlib ' + zlib.gunzipSync(out).toString()));
crypto.pbkdf2('a', 'b', 10, 8, 'sha256', (err, key) => said.push('pbkdf2 ' + key.length));
setTimeout(() => said.push('timer'), 20);
Promise.resolve().then(() => said.push('promise'));
said.push('echo ' + require('child_process').execFileSync('/bin/echo', ['hi']).toString().trim());
process.on('exit', () => console.log(said.sort().join(',')));
"""
BUSY_SAID = "echo hi,fs true,pbkdf2 8,promise,timer,worker 42,zlib kiln\n"


@pytest.fixture(scope="module")
def server():
    """Its prestarted js slots forked from the template from here on (the first slots may have
    warmed before the template was ready)."""
    instance = Server({"RUN_CONCURRENCY": "2", "RUN_LANGS": "js"}).wait_ready()
    said = lambda msg: [r for r in instance.logged(msg) if r.get("slug") == "js"]  # noqa: E731
    assert wait_until(lambda: said("template ready") or said("template unavailable: prestarted tasks are started afresh"), timeout=60)
    if not said("template ready"):
        instance.stop()
        pytest.skip(f"this node cannot fork tasks: {said('template unavailable: prestarted tasks are started afresh')[0]['reason']}")
    deadline = time.monotonic() + 20
    while (instance.wait_prestarted("js"), probe(instance)["cmdline"])[1] != "--template":
        assert time.monotonic() < deadline, "no js task was forked from the template"
    yield instance
    instance.stop()


def forked_run(server: Server, **fields) -> dict:
    server.wait_prestarted("js")
    body, record = server.run_logged(lang_slug="js", **fields)
    assert record["prestarted"] is True
    return body


def probe(server: Server, **fields) -> dict:
    body, _ = server.run_logged(lang_slug="js", solution_text=PROBE, **fields)
    assert (body["exit_code"], body["stderr"]) == (0, ""), body
    seen = with_slot_uid(json.loads(body["stdout"]))
    seen["slot_cgroup_counted_it"] = body["stats"]["memory_peak_bytes"] > 0 and body["stats"]["cpu_ms"] > 0
    return seen


def test_a_forked_js_task_is_confined_as_a_spawned_one(server):
    server.wait_prestarted("js")
    forked = probe(server)
    assert forked["cmdline"] == "--template"  # forked from the template
    spawned = probe(server, stdin="")  # with stdin: a plain slot, its task spawned by init
    assert spawned["cmdline"] == "check/harness.js"
    for key in ("status", "environ", "limits", "mounts", "net", "hostname", "cwd", "pids", "ppid", "umask", "proc_owner"):
        assert forked[key] == spawned[key], key
    assert forked["status"]["CapBnd"] == ["0000000000000000"] and forked["status"]["NoNewPrivs"] == ["1"]
    assert forked["slot_cgroup_counted_it"] and spawned["slot_cgroup_counted_it"]
    assert forked["cgroup"] == spawned["cgroup"] and all(line.endswith(":/") for line in forked["cgroup"].splitlines())
    # its own pid, not the one node took when the template started
    assert forked["pids"] == ["2"] and (forked["pid"], forked["ppid"]) == (2, 1)
    assert spawned["kiln_maps"] == [] and forked["kiln_maps"] == ["/memfd:kiln_template.node (deleted)"]


def test_a_forked_js_task_holds_nothing_of_the_template(server):
    """The template's descriptors were replaced by the task's own (same numbers, same kinds):
    no pipe, socket, epoll or eventfd of the template's is reachable from a run."""
    server.wait_prestarted("js")
    forked = probe(server)
    (template,) = server.templates()
    theirs = set()
    for fd in Path(f"/proc/{template}/fd").iterdir():
        try:
            theirs.add(os.readlink(fd))
        except FileNotFoundError:
            pass  # one it opened for a moment (it reads its maps before each fork)
    ours = {link for fd, link in forked["fds"].items() if int(fd) > 3 and link}
    assert not [link for link in ours if "socket:" in link or "memfd:" in link], ours
    shared = {link for link in ours & theirs if link.startswith("pipe:")}
    assert not shared, shared


def test_forked_js_tasks_draw_their_own_random_numbers(server):
    draws = {probe(server)["random"] for _ in range(4)}
    assert len(draws) == 4, draws


@pytest.mark.parametrize(
    ("solution", "exit_code", "stdout"),
    [
        ("console.log('done')", 0, "done\n"),
        ("console.log('x'); process.exit(3)", 3, "x\n"),
        ("process.exitCode = 4; console.log('y')", 4, "y\n"),
        ("process.on('exit', () => { process.exitCode = 6 }); console.log('z')", 6, "z\n"),
        ("throw new Error('boom')", 1, ""),
        ("Promise.reject(new Error('later'))", 1, ""),
        ("setTimeout(() => { throw new TypeError('in a timer') }, 5)", 1, ""),
    ],
)
def test_a_forked_js_task_ends_as_a_spawned_one(server, solution, exit_code, stdout):
    forked = forked_run(server, solution_text=solution)
    spawned, record = server.run_logged(lang_slug="js", solution_text=solution, stdin="")
    assert record["prestarted"] is False
    assert (forked["exit_code"], forked["stdout"]) == (spawned["exit_code"], spawned["stdout"]) == (exit_code, stdout), (forked, spawned)
    assert forked["stderr"] == spawned["stderr"]  # node's own report of an uncaught error, word for word
    assert forked["stats"]["outcome"] == "exited"


def test_a_prestarted_js_task_may_use_threads_timers_and_child_processes_forked_or_not(start_server):
    """Forked where this node's forks end cleanly, else started afresh (Debian 12's node 18: a
    forked task's worker thread never let it end, and each such run was timed_out)."""
    srv = start_server(RUN_CONCURRENCY="2", RUN_LANGS="js")
    for _ in range(3):
        srv.wait_prestarted("js")
        body, record = srv.run_logged(lang_slug="js", solution_text=BUSY)
        assert record["prestarted"] is True and (body["exit_code"], body["stdout"], body["stderr"]) == (0, BUSY_SAID, ""), body


def test_a_forked_js_task_may_use_threads_timers_and_child_processes(server):
    for _ in range(3):
        body = forked_run(server, solution_text=BUSY)
        assert (body["exit_code"], body["stdout"], body["stderr"]) == (0, BUSY_SAID, ""), body


def test_a_forked_js_task_answers_in_harness_mode(server):
    body = forked_run(server, solution_text="module.exports = (a, b) => a + b;\n", asserts='{"arguments": [[1, 2], [3, 4]]}')
    assert [item["value"] for item in json.loads(body["stdout"])] == [3, 7], body


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


def test_a_forked_js_tasks_timers_wait_as_long_as_asked(server):
    """The loop's clock is the template's until the task's loop first runs: a timer must still
    count from when the run set it."""
    body = forked_run(server, solution_text="const t = Date.now();\nsetTimeout(() => console.log(Date.now() - t), 300);\n")
    assert body["exit_code"] == 0 and 295 <= int(body["stdout"]) < 2000, body
