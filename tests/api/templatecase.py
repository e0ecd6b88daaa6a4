"""What each language's template is, for tests/api/test_every_template.py: the probe a task runs
to print what it sees of itself, what the probe says when the task was forked, prestarted or
spawned, and the programs a forked task must answer exactly as the test command does.

Every probe prints one JSON object with the same keys (the tables compare them by name):
status, cgroup, environ, limits (/proc/self/limits without its cpu line), cpu_limit (the cpu
line's soft value: a prestarted slot's is RUN_TIMEOUT_MAX's), fds ({fd: link or null}),
eventfds (their ids), mounts, net, hostname, cwd, pids, pid, ppid, umask, proc_owner, how (how
the task was started), kiln_maps (mapped files naming kiln), random (draws of its generators)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kiln import langs


def lang_mark(slug: str) -> pytest.MarkDecorator:
    """The marker of a language's rows (`lang_<slug>`, registered in tests/conftest.py): a host
    without the language leaves them out with -m 'not lang_<slug>' (scripts/stock-vm-guest.sh)."""
    assert slug in langs.LANGUAGES, slug
    return getattr(pytest.mark, f"lang_{slug}")


@dataclass(frozen=True)
class Template:
    """One language's template. how_*: what the probe's `how` says of a task forked from the
    template, spawned by init in a plain slot, and started by the prestart command when templates
    are off; template_map: the template library as a forked task's maps show it (None: unloaded
    before the task runs); fds_past_stdio: the links a forked and a spawned task hold past
    descriptor 2 (None: not a fact of the language's)."""

    slug: str
    probe: str
    how_forked: str
    how_spawned: str
    how_prestarted: str | None = None
    template_map: str | None = None
    fds_past_stdio: tuple[list, list] | None = None
    same_descriptors_as_spawned: bool = False


PYTHON_PROBE = r"""
import json, os, random, socket
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
keep = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters")
limits = open("/proc/self/limits").read().splitlines()
def link(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
print(json.dumps({
    "status": {k: status[k].split() for k in keep},
    "cgroup": open("/proc/self/cgroup").read(),
    "environ": dict(os.environ),
    "limits": [line for line in limits if not line.startswith("Max cpu time")],
    "cpu_limit": [line for line in limits if line.startswith("Max cpu time")][0].split()[3],
    "fds": {fd: link(fd) for fd in os.listdir("/proc/self/fd")},
    "eventfds": [],
    "mounts": [" ".join(line.split()[4:]) for line in open("/proc/self/mountinfo")],
    "net": [line.split(":")[0].strip() for line in open("/proc/self/net/dev").read().splitlines()[2:]],
    "hostname": socket.gethostname(),
    "cwd": os.getcwd(),
    "pids": sorted(p for p in os.listdir("/proc") if p.isdigit()),
    "pid": os.getpid(),
    "ppid": os.getppid(),
    "umask": os.umask(0o22),
    "proc_owner": os.stat("/proc/self/mem").st_uid == os.getuid(),  # dumpable, as after an exec
    "how": open("/proc/self/cmdline", "rb").read().split(b"\0")[-2].decode(),
    "kiln_maps": sorted({line.split(maxsplit=5)[5].strip() for line in open("/proc/self/maps") if "kiln" in line}),
    "random": [random.random()],
}))
"""

JS_PROBE = r"""
const fs = require('fs'), os = require('os');
const status = {};
for (const line of fs.readFileSync('/proc/self/status', 'utf8').split('\n').filter(Boolean)) {
  const at = line.indexOf(':');
  status[line.slice(0, at)] = line.slice(at + 1).trim().split(/\s+/);
}
const keep = ['Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp', 'Seccomp_filters'];
const link = (fd) => { try { return fs.readlinkSync('/proc/self/fd/' + fd); } catch (e) { return null; } };
const cmdline = fs.readFileSync('/proc/self/cmdline', 'latin1').split('\0');
const limits = fs.readFileSync('/proc/self/limits', 'utf8').split('\n');
console.log(JSON.stringify({
  status: Object.fromEntries(keep.map((k) => [k, status[k]])),
  cgroup: fs.readFileSync('/proc/self/cgroup', 'utf8'),
  environ: process.env,
  limits: limits.filter((l) => !l.startsWith('Max cpu time')),
  cpu_limit: limits.find((l) => l.startsWith('Max cpu time')).split(/\s+/)[3],
  fds: Object.fromEntries(fs.readdirSync('/proc/self/fd').map((fd) => [fd, link(fd)])),
  eventfds: fs.readdirSync('/proc/self/fd').map((fd) => {
    try { return (fs.readFileSync('/proc/self/fdinfo/' + fd, 'utf8').match(/^eventfd-id:\s*(\d+)/m) || [])[1]; } catch (e) { return undefined; }
  }).filter(Boolean),
  mounts: fs.readFileSync('/proc/self/mountinfo', 'utf8').trim().split('\n').map((l) => l.split(' ').slice(4).join(' ')),
  net: fs.readFileSync('/proc/self/net/dev', 'utf8').trim().split('\n').slice(2).map((l) => l.split(':')[0].trim()),
  hostname: os.hostname(),
  cwd: process.cwd(),
  pids: fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).sort(),
  pid: process.pid,
  ppid: process.ppid,
  umask: process.umask(),
  proc_owner: fs.statSync('/proc/self/mem').uid === process.getuid(),
  how: cmdline[cmdline.length - 2],
  kiln_maps: [...new Set(fs.readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.includes('kiln')).map((l) => l.split(/\s+/).slice(5).join(' ')))].sort(),
  random: [Math.random()],
}));
"""

PHP_PROBE = r"""<?php
$status = [];
foreach (file('/proc/self/status', FILE_IGNORE_NEW_LINES) as $line) {
    [$key, $value] = explode(':', $line, 2);
    $status[$key] = preg_split('/\s+/', trim($value));
}
$keep = ['Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp', 'Seccomp_filters'];
$fds = [];
foreach (scandir('/proc/self/fd') as $fd) {
    if ($fd[0] !== '.') {
        $fds[$fd] = @readlink("/proc/self/fd/$fd") ?: null;
    }
}
$limits = file('/proc/self/limits', FILE_IGNORE_NEW_LINES);
$cpu = array_values(array_filter($limits, fn ($l) => str_starts_with($l, 'Max cpu time')))[0];
$cmdline = explode("\0", file_get_contents('/proc/self/cmdline'));
$maps = [];
foreach (file('/proc/self/maps', FILE_IGNORE_NEW_LINES) as $line) {
    if (str_contains($line, 'kiln')) {
        $maps[implode(' ', array_slice(preg_split('/\s+/', $line), 5))] = true;
    }
}
$pids = array_values(array_filter(scandir('/proc'), 'ctype_digit'));
sort($pids);
echo json_encode([
    'status' => array_intersect_key($status, array_flip($keep)),
    'cgroup' => file_get_contents('/proc/self/cgroup'),
    'environ' => getenv(),
    'limits' => array_values(array_filter($limits, fn ($l) => !str_starts_with($l, 'Max cpu time'))),
    'cpu_limit' => preg_split('/\s+/', $cpu)[3],
    'fds' => (object) $fds,
    'eventfds' => [],
    'mounts' => array_map(fn ($l) => implode(' ', array_slice(explode(' ', trim($l)), 4)), file('/proc/self/mountinfo')),
    'net' => array_map(fn ($l) => trim(explode(':', $l)[0]), array_slice(file('/proc/self/net/dev'), 2)),
    'hostname' => gethostname(),
    'cwd' => getcwd(),
    'pids' => $pids,
    'pid' => getmypid(),
    'ppid' => posix_getppid(),
    'umask' => umask(),
    'proc_owner' => fileowner('/proc/self/mem') === posix_getuid(),
    'how' => $cmdline[count($cmdline) - 2],
    'kiln_maps' => array_keys($maps),
    'random' => [mt_rand(), rand(), lcg_value(), uniqid()],
]), "\n";
"""

RUBY_PROBE = r"""
require "json"
require "socket"
status = File.read("/proc/self/status").lines.to_h { |line| k, v = line.split(":", 2); [k, v.split] }
keep = %w[Uid Gid Groups CapInh CapPrm CapEff CapBnd CapAmb NoNewPrivs Seccomp Seccomp_filters]
fds = Dir.children("/proc/self/fd")
limits = File.readlines("/proc/self/limits", chomp: true)
puts JSON.generate(
  status: status.slice(*keep),
  cgroup: File.read("/proc/self/cgroup"),
  environ: ENV.to_h,
  limits: limits.reject { |line| line.start_with?("Max cpu time") },
  cpu_limit: limits.find { |line| line.start_with?("Max cpu time") }.split[3],
  fds: fds.to_h { |fd| [fd, (File.readlink("/proc/self/fd/#{fd}") rescue nil)] },
  eventfds: fds.filter_map { |fd| (File.read("/proc/self/fdinfo/#{fd}") rescue "")[/^eventfd-id:\s*(\d+)/, 1] },
  mounts: File.readlines("/proc/self/mountinfo").map { |line| line.split[4..].join(" ") },
  net: File.readlines("/proc/self/net/dev")[2..].map { |line| line.split(":").first.strip },
  hostname: Socket.gethostname,
  cwd: Dir.pwd,
  pids: Dir.children("/proc").grep(/\A\d+\z/).sort,
  pid: Process.pid,
  ppid: Process.ppid,
  umask: File.umask,
  proc_owner: File.stat("/proc/self/mem").uid == Process.uid,
  # $0 = "solution.rb" sets the process title: how it was started is told by what is loaded
  how: File.read("/proc/self/maps").include?("kiln_template_ruby") ? "forked" : defined?(KilnHarness) ? "prestarted" : "spawned",
  kiln_maps: File.readlines("/proc/self/maps").select { |line| line.include?("kiln") }.map { |line| line.split[5..].join(" ") }.uniq.sort,
  random: [rand],
)
"""

TEMPLATES = {
    "js": Template("js", JS_PROBE, "--template", "check/harness.js", template_map="/memfd:kiln_template.node (deleted)"),
    # php-cli keeps its main script and its prepend file open while they run (an included file
    # is closed), and the template library is unloaded once serve returned
    "php": Template("php", PHP_PROBE, "--template", "solution.php", "prestart.php", fds_past_stdio=([], ["/sandbox/check/solution.php", "/sandbox/check/prepend.php"])),
    "python": Template("python", PYTHON_PROBE, "--template", "check/harness.py", template_map="/memfd:_kiln_template.so (deleted)", same_descriptors_as_spawned=True),
    # ruby's two signal eventfds, made afresh by the fork as Ruby's own fork makes them
    "ruby": Template(
        "ruby", RUBY_PROBE, "forked", "spawned", "prestarted", "/memfd:kiln_template_ruby.so (deleted)", (["anon_inode:[eventfd]"] * 2, ["anon_inode:[eventfd]"] * 2)
    ),
}


@dataclass(frozen=True)
class Program:
    """A program a forked task must answer exactly as the test command answers it in a spawned
    one; said: (exit status, stdout with call times as "t"), where a row pins what that is."""

    solution: str
    asserts: str | None = None
    said: tuple[int, str] | None = None


def programs(plain: list[str], harness: list[tuple[str, str]]) -> list[Program]:
    return [Program(solution) for solution in plain] + [Program(solution, asserts) for solution, asserts in harness]


def results(*values) -> str:
    """A harness report of one result a value, nothing printed, as answer() masks it."""
    return "[" + ",".join(f'{{"type":"result","value":{v},"time":"t","output":""}}' for v in values) + "]\n"


A_PLUS_B = '{"arguments": [[1, 2], [3, 4]]}'

# every way a php or ruby program may end, plain (PLAIN) and as a solution with its asserts
# (HARNESS): what the prestart harness must do as the test command's interpreter does
PHP_PLAIN = [
    "<?php echo \"done\\n\";",
    "<?php echo 'x'; exit(3);",
    "<?php exit(\"bye\\n\");",
    "<?php echo \"before\\n\"; throw new RuntimeException('boom');",
    "<?php function f() { g(); }\nfunction g() { throw new LogicException('deep'); }\nf();",
    "<?php try { throw new Exception('inner'); } catch (Exception $e) { throw new RuntimeException('outer', 1, $e); }",
    "<?php\nundefined_function();",
    "<?php declare(strict_types=1);\nfunction f(int $x) { return $x; }\necho f('1');",
    "<?php function (",
    "<?php function f() {}\nfunction f() {}",
    "<?php echo $undefined;\ntrigger_error('custom', E_USER_WARNING);\nfwrite(STDERR, \"err\\n\");\necho \"end\\n\";",
    "<?php var_export([__FILE__, __DIR__, __LINE__, $argv, $argc, $_SERVER['argv'], $_SERVER['argc'], $_SERVER['SCRIPT_NAME'],"
    " $_SERVER['PHP_SELF'], $_SERVER['SCRIPT_FILENAME'], $_SERVER['PATH_TRANSLATED'], getcwd(), ini_get('auto_prepend_file')]);",
    "<?php var_export(array_keys($GLOBALS));",
    "<?php $s = $_SERVER; unset($s['REQUEST_TIME'], $s['REQUEST_TIME_FLOAT']); var_export($s);\n"
    "echo microtime(true) - $_SERVER['REQUEST_TIME_FLOAT'] < 2 ? \"fresh\\n\" : \"stale\\n\";",
    "hello <?php echo \"world\\n\"; ?> after\n",
    "#!/usr/bin/env php\n<?php echo \"shebang\\n\";",
    "<?php register_shutdown_function(function () { echo \"shutdown\\n\"; });\necho \"main\\n\";\nexit(4);",
    "<?php echo 1; return; echo 2;",
    "<?php echo file_get_contents(__FILE__, false, null, __COMPILER_HALT_OFFSET__);\n__halt_compiler();data here",
    "<?php set_exception_handler(function ($e) { echo 'handled ', $e->getMessage(), ' ', count($e->getTrace()), \"\\n\"; });\nthrow new Exception('x');",
    "<?php ini_set('memory_limit', '8M');\n$a = str_repeat('x', 20 * 1024 * 1024);",
    "<?php posix_kill(posix_getpid(), SIGTERM);\nsleep(1);",
    "<?php echo getmypid(), ' ', posix_getpid(), ' ', posix_getppid(), \"\\n\";",
    "<?php function solution($a, $b) { return $a + $b; }\necho solution(2, 3), \"\\n\";",
    "<?php echo json_encode(['a' => 1]), ' ', mb_strlen('héllo'), ' ', class_exists('KilnHarness') ? 'harness' : 'none', \"\\n\";",
]

PHP_HARNESS = [
    ("<?php function solution($a, $b) { echo \"adding\\n\"; return $a + $b; }", '{"arguments": [[1, 2], [10, -3]]}'),
    ("<?php function solution($a, $b) { return intdiv($a, $b); }", '{"arguments": [[7, 2], [1, 0]]}'),
    ("<?php echo \"loading\\n\"; exit(4);", '{"arguments": [[]]}'),
    ("<?php echo \"loading\\n\"; throw new Exception('while loading');\nfunction solution() { return 1; }", '{"arguments": [[]]}'),
    ("<?php echo \"no solution here\\n\";", '{"arguments": [[]]}'),
    ("<?php function (", '{"arguments": [[]]}'),
    ("<?php function solution($k) { if ($k) { exit(); } return 1; }", '{"arguments": [[0], [1], [0]]}'),
    ("<?php function solution() { return [__FILE__, $GLOBALS['argv']]; }", '{"arguments": [[]]}'),
]

RUBY_PLAIN = [
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

RUBY_HARNESS = [
    ("def solution(a, b)\n  puts 'adding'\n  a + b\nend\n", '{"arguments": [[1, 2], [10, -3]]}'),
    ("def solution(a, b) = a / b\n", '{"arguments": [[7, 2], [1, 0]]}'),
    ("puts 'loading'\nraise 'while loading'\ndef solution = 1\n", '{"arguments": [[]]}'),
    ("puts 'loading'\nexit 4\n", '{"arguments": [[]]}'),
    ("puts 'no solution here'\n", '{"arguments": [[]]}'),
    ("def broken(\n", '{"arguments": [[]]}'),
    ("def solution = [__FILE__ == $0, $0, defined?(DATA)]\n", '{"arguments": [[]]}'),
]

# how node ends, every way, and its own report of an uncaught error, word for word
JS_ENDINGS = [
    Program("console.log('done')", said=(0, "done\n")),
    Program("console.log('x'); process.exit(3)", said=(3, "x\n")),
    Program("process.exitCode = 4; console.log('y')", said=(4, "y\n")),
    Program("process.on('exit', () => { process.exitCode = 6 }); console.log('z')", said=(6, "z\n")),
    Program("throw new Error('boom')", said=(1, "")),
    Program("Promise.reject(new Error('later'))", said=(1, "")),
    Program("setTimeout(() => { throw new TypeError('in a timer') }, 5)", said=(1, "")),
    Program("module.exports = (a, b) => a + b;\n", A_PLUS_B, said=(0, results(3, 7))),
]

PROGRAMS = {
    "js": JS_ENDINGS,
    "php": programs(PHP_PLAIN, PHP_HARNESS),
    "python": [
        Program("def solution(a, b):\n    return a + b\n", A_PLUS_B, said=(0, results(3, 7))),
        Program("import sys\nprint(sys.argv)\nraise SystemExit(3)\n", said=(3, "['solution.py']\n")),
    ],
    "ruby": programs(RUBY_PLAIN, RUBY_HARNESS),
}

# a thread of its own (a worker), libuv's thread pool (fs, zlib, crypto), timers, a promise, a
# child process: what a fork lacks, or shares, unless kiln made it the task's own
JS_BUSY = r"""
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
JS_BUSY_SAID = "echo hi,fs true,pbkdf2 8,promise,timer,worker 42,zlib kiln\n"

# threads, a queue, a sleep, a trapped signal, Timeout (a thread that raises into a sleeping
# one), a child process, a pipe between threads
RUBY_BUSY = r"""
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
RUBY_BUSY_SAID = "busy killed,child,piped,queued,slept true,thread 42,timeout,usr1\n"

# what a fork of the runtime gets wrong unless kiln did what the runtime's own fork does: a
# program using it all, and what it prints
BUSY = {"js": (JS_BUSY, JS_BUSY_SAID), "ruby": (RUBY_BUSY, RUBY_BUSY_SAID)}
