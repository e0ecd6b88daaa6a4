"""ruby's language template: prestarted ruby tasks forked from one warm ruby (kiln/native/
template_ruby.c) instead of started afresh. A raw fork of ruby would crash as its timer starts,
or miss its signals, and share its signal descriptors with the template, unless the fork does
what Ruby's own fork does; and the prestart harness (langs/ruby/check/prestart.rb) runs
solution.rb as the test command's ruby runs its main script. Through the real API and sandbox:
a forked task is confined as a spawned one, shares nothing with the template, and answers
exactly as the test command."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from kilntest import Server, with_slot_uid

# What a task can see of itself; printed as one JSON object.
PROBE = r"""
require "json"
require "socket"
status = File.read("/proc/self/status").lines.to_h { |line| k, v = line.split(":", 2); [k, v.split] }
keep = %w[Uid Gid Groups CapInh CapPrm CapEff CapBnd CapAmb NoNewPrivs Seccomp Seccomp_filters]
fds = Dir.children("/proc/self/fd").to_h do |fd|
  info = File.read("/proc/self/fdinfo/#{fd}") rescue ""
  [fd, [(File.readlink("/proc/self/fd/#{fd}") rescue nil), info[/^eventfd-id:\s*(\d+)/, 1]]]
end
puts JSON.generate(
  status: status.slice(*keep),
  cgroup: File.read("/proc/self/cgroup"),
  environ: ENV.to_h,
  rlimits: Process.constants.grep(/\ARLIMIT_/).to_h { |name| [name, Process.getrlimit(Process.const_get(name))] },
  fds: fds,
  mounts: File.readlines("/proc/self/mountinfo").map { |line| line.split[4..].join(" ") },
  net: File.readlines("/proc/self/net/dev")[2..].map { |line| line.split(":").first.strip },
  hostname: Socket.gethostname,
  cwd: Dir.pwd,
  pids: Dir.children("/proc").grep(/\A\d+\z/).sort,
  pid: Process.pid,
  ppid: Process.ppid,
  umask: File.umask,
  proc_owner: File.stat("/proc/self/mem").uid == Process.uid,
  # $0 = "solution.rb" sets the process title: what ran is told by what is loaded
  kind: File.read("/proc/self/maps").include?("kiln_template_ruby") ? "forked" : defined?(KilnHarness) ? "prestarted" : "spawned",
  kiln_maps: File.readlines("/proc/self/maps").select { |line| line.include?("kiln") }.map { |line| line.split[5..].join(" ") }.uniq.sort,
  random: rand,
)
"""

# threads, a queue, a sleep, a trapped signal, Timeout (a thread that raises into a sleeping
# one), a child process, a pipe between threads: what a fork of ruby gets wrong unless it did
# what Ruby's own fork does
BUSY = r"""
require "timeout"
said = []
Signal.trap("USR1") { said << "usr1" }
Process.kill("USR1", Process.pid)
sleep 0.05
said << "thread #{Thread.new { 6 * 7 }.value}"
queue = Queue.new
consumer = Thread.new { queue.pop }
queue << "queued"
said << consumer.value
busy = Thread.new { loop {} }
sleep 0.05
busy.kill.join
said << "busy killed"
begin
  Timeout.timeout(0.1) { sleep 5 }
rescue Timeout::Error
  said << "timeout"
end
started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
sleep 0.2
said << "slept #{(Process.clock_gettime(Process::CLOCK_MONOTONIC) - started).between?(0.19, 2)}"
said << `echo child`.strip
reader, writer = IO.pipe
Thread.new { sleep 0.05; writer.write("piped"); writer.close }
said << reader.read
puts said.sort.join(",")
"""
BUSY_SAID = "busy killed,child,piped,queued,slept true,thread 42,timeout,usr1\n"

# programs whose every answer (status, stdout, stderr) a forked task must give exactly as the
# test command does in a spawned one
PLAIN = [
    "puts 'done'",
    "puts 'x'\nexit 3",
    "puts 'before'\nraise ArgumentError, 'boom'",
    "def f = g\ndef g = raise('deep')\nf",
    "x = nil\nx.upcase",
    "puts undefined_name_here",
    "def broken(\n",
    "def broken(\n  1\n",
    "p [__FILE__, $0, $PROGRAM_NAME, __FILE__ == $0, __dir__, Dir.pwd, ARGV, __method__, self]",
    "puts DATA.read\np [DATA.lineno, DATA.path, DATA.external_encoding]\n__END__\nhello\nworld\n",
    "s = <<T\n__END__\nT\np s, defined?(DATA)",
    "at_exit { puts 'bye'; exit 5 }\nputs 'hi'",
    "abort 'aborted'",
    "$stdout.write 'no newline'\nexit!(7)",
    "$stderr.puts 'to stderr'\nwarn 'warned'\nSTDOUT.syswrite \"raw\\n\"",
    "puts 1\nreturn\nputs 2",
    "BEGIN { puts 'begin' }\nputs 'main'",
    "throw :nowhere",
    "Process.kill(:TERM, Process.pid)\nsleep 1",
    "p [Process.pid, $$, Process.ppid]",
    "def solution(a, b) = a + b\nputs solution(2, 3)",
]

HARNESS = [
    ("def solution(a, b)\n  puts 'adding'\n  a + b\nend\n", '{"arguments": [[1, 2], [10, -3]]}'),
    ("def solution(a, b) = a / b\n", '{"arguments": [[7, 2], [1, 0]]}'),
    ("puts 'loading'\nraise 'while loading'\ndef solution = 1\n", '{"arguments": [[]]}'),
    ("puts 'loading'\nexit 4\n", '{"arguments": [[]]}'),
    ("puts 'no solution here'\n", '{"arguments": [[]]}'),
    ("def broken(\n", '{"arguments": [[]]}'),
    ("def solution = [__FILE__ == $0, $0, defined?(DATA)]\n", '{"arguments": [[]]}'),
]


@pytest.fixture(scope="module")
def server():
    """Its prestarted ruby slots forked from the template from here on (the first slots may have
    warmed before the template was ready)."""
    instance = Server({"RUN_CONCURRENCY": "2", "RUN_LANGS": "ruby"}).wait_ready()
    deadline = time.monotonic() + 30
    while (instance.wait_prestarted("ruby"), probe(instance)["kind"])[1] != "forked":
        assert time.monotonic() < deadline, "no ruby task was forked from the template"
    yield instance
    instance.stop()


def probe(server: Server, **fields) -> dict:
    body, _ = server.run_logged(lang_slug="ruby", solution_text=PROBE, **fields)
    assert (body["exit_code"], body["stderr"]) == (0, ""), body
    seen = with_slot_uid(json.loads(body["stdout"]))
    seen["slot_cgroup_counted_it"] = body["stats"]["memory_peak_bytes"] > 0 and body["stats"]["cpu_ms"] > 0
    return seen


def forked_run(server: Server, **fields) -> dict:
    server.wait_prestarted("ruby")
    body, record = server.run_logged(lang_slug="ruby", **fields)
    assert record["prestarted"] is True
    return body


def spawned_run(server: Server, **fields) -> dict:
    body, record = server.run_logged(lang_slug="ruby", stdin="", **fields)  # with stdin: a plain slot
    assert record["prestarted"] is False
    return body


def answer(body: dict) -> tuple:
    """What the program said; a harness report's call times (never the same twice) as 't'."""
    return body["exit_code"], re.sub(r'"time":"[0-9.]+"', '"time":"t"', body["stdout"]), body["stderr"], body["stats"]["outcome"]


def test_a_forked_ruby_task_is_confined_as_a_spawned_one(server):
    server.wait_prestarted("ruby")
    forked = probe(server)
    assert forked["kind"] == "forked"
    spawned = probe(server, stdin="")
    assert spawned["kind"] == "spawned"
    assert forked["rlimits"].pop("RLIMIT_CPU") > spawned["rlimits"].pop("RLIMIT_CPU")  # RUN_TIMEOUT_MAX's, as for every prestarted slot
    for key in ("status", "environ", "rlimits", "mounts", "net", "hostname", "cwd", "pids", "ppid", "umask", "proc_owner"):
        assert forked[key] == spawned[key], key
    assert forked["status"]["CapBnd"] == ["0000000000000000"] and forked["status"]["NoNewPrivs"] == ["1"]
    assert forked["slot_cgroup_counted_it"] and spawned["slot_cgroup_counted_it"]
    assert forked["cgroup"] == spawned["cgroup"] and all(line.endswith(":/") for line in forked["cgroup"].splitlines())
    assert forked["pids"] == ["2"] and (forked["pid"], forked["ppid"]) == (2, 1)
    # past the standard three, the same kinds of descriptors (ruby's two eventfds, at other
    # numbers), nothing of the template or of the slot's init
    assert sorted(link for fd, (link, _) in forked["fds"].items() if int(fd) > 2 and link) == ["anon_inode:[eventfd]"] * 2
    assert sorted(link for fd, (link, _) in spawned["fds"].items() if int(fd) > 2 and link) == ["anon_inode:[eventfd]"] * 2
    assert spawned["kiln_maps"] == [] and forked["kiln_maps"] == ["/memfd:kiln_template_ruby.so (deleted)"]


def test_a_forked_ruby_task_holds_nothing_of_the_template(server):
    """Its signal eventfds are its own (ruby's fork made them afresh), and no pipe, socket or
    memfd of the template's is open in it."""
    server.wait_prestarted("ruby")
    forked = probe(server)
    (template,) = server.templates()
    their_eventfds = set()
    for info in Path(f"/proc/{template}/fdinfo").iterdir():
        try:
            their_eventfds.update(line.split()[1] for line in info.read_text().splitlines() if line.startswith("eventfd-id:"))
        except FileNotFoundError:
            pass  # one it opened for a moment
    our_eventfds = {event_id for link, event_id in forked["fds"].values() if event_id}
    assert len(our_eventfds) == 2 and len(their_eventfds) == 2 and not our_eventfds & their_eventfds
    ours = {link for fd, (link, _) in forked["fds"].items() if int(fd) > 2 and link}
    assert not [link for link in ours if "socket:" in link or "memfd:" in link or link.startswith("pipe:")], ours


def test_forked_ruby_tasks_draw_their_own_random_numbers(server):
    draws = {probe(server)["random"] for _ in range(4)}
    assert len(draws) == 4, draws


def test_a_forked_ruby_task_may_use_threads_signals_and_timeout(server):
    for _ in range(3):
        body = forked_run(server, solution_text=BUSY)
        assert (body["exit_code"], body["stdout"], body["stderr"]) == (0, BUSY_SAID, ""), body


@pytest.mark.parametrize("solution", PLAIN)
def test_a_forked_ruby_task_answers_as_the_test_command(server, solution):
    forked = forked_run(server, solution_text=solution)
    spawned = spawned_run(server, solution_text=solution)
    assert answer(forked) == answer(spawned), (forked, spawned)


@pytest.mark.parametrize(("solution", "asserts"), HARNESS)
def test_a_forked_ruby_task_answers_in_harness_mode_as_the_test_command(server, solution, asserts):
    forked = forked_run(server, solution_text=solution, asserts=asserts)
    spawned = spawned_run(server, solution_text=solution, asserts=asserts)
    assert answer(forked) == answer(spawned), (forked, spawned)


def test_forked_runs_are_counted_as_prestarted(server):
    def counted() -> float:
        found = re.search(r'^kiln_prestarted_runs_total\{lang="ruby"\} (\S+)$', server.client.get("/metrics").text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    server.wait_prestarted("ruby")
    before = counted()
    body, record = server.run_logged(lang_slug="ruby", solution_text="puts 1")
    assert record["prestarted"] is True
    assert counted() == before + 1


def test_the_ruby_template_forks_and_keeps_no_child(server):
    server.wait_prestarted("ruby")
    (template,) = server.templates()
    assert Path(f"/proc/{template}/task/{template}/children").read_text().split() == []
    assert os.stat(f"/proc/{template}").st_uid == server.host_uid(0)
    assert os.readlink(f"/proc/{template}/ns/mnt") != os.readlink("/proc/self/ns/mnt")


@pytest.mark.parametrize(("settings", "kind"), [({"RUN_TEMPLATES": "python"}, "prestarted"), ({"RUN_PRESTART": "python"}, "spawned")])
def test_settings_turn_ruby_templates_off(start_server, settings, kind):
    """RUN_TEMPLATES without ruby: its slots are prestarted (once asked for), never forked;
    RUN_PRESTART without ruby: plain slots, the test command spawned."""
    srv = start_server(RUN_CONCURRENCY="1", RUN_LANGS="ruby,python", **settings)
    assert not any(b"prestart.rb" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in srv.templates())
    seen = []
    deadline = time.monotonic() + 20
    while kind not in seen or len(seen) < 4:
        assert time.monotonic() < deadline, seen
        time.sleep(0.2)
        seen.append(probe(srv)["kind"])
    assert set(seen) <= {"spawned", kind}, seen
