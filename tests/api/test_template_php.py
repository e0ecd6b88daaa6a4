"""php's language template: prestarted php tasks forked from one warm php-cli (kiln/native/
template_php.c, loaded with FFI) instead of started afresh, and the prestart harness
(langs/php/check/prestart.php) that runs solution.php as the test command's php runs its main
script. Through the real API and sandbox: a forked task is confined as a spawned one, shares
nothing with the template, and answers exactly as the test command."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from kilntest import Server, with_slot_uid

# What a task can see of itself; printed as one JSON object.
PROBE = r"""<?php
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
$limits = array_values(array_filter(file('/proc/self/limits', FILE_IGNORE_NEW_LINES), fn ($l) => !str_starts_with($l, 'Max cpu time')));
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
    'limits' => $limits,
    'fds' => (object) $fds,
    'mounts' => array_map(fn ($l) => implode(' ', array_slice(explode(' ', trim($l)), 4)), file('/proc/self/mountinfo')),
    'net' => array_map(fn ($l) => trim(explode(':', $l)[0]), array_slice(file('/proc/self/net/dev'), 2)),
    'hostname' => gethostname(),
    'cwd' => getcwd(),
    'pids' => $pids,
    'pid' => getmypid(),
    'ppid' => posix_getppid(),
    'umask' => umask(),
    'proc_owner' => fileowner('/proc/self/mem') === posix_getuid(),
    'cmdline' => $cmdline[count($cmdline) - 2],
    'kiln_maps' => array_keys($maps),
    'random' => [mt_rand(), rand(), lcg_value(), uniqid()],
]), "\n";
"""

# programs whose every answer (status, stdout, stderr) a forked task must give exactly as the
# test command does in a spawned one
PLAIN = [
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

HARNESS = [
    ("<?php function solution($a, $b) { echo \"adding\\n\"; return $a + $b; }", '{"arguments": [[1, 2], [10, -3]]}'),
    ("<?php function solution($a, $b) { return intdiv($a, $b); }", '{"arguments": [[7, 2], [1, 0]]}'),
    ("<?php echo \"loading\\n\"; exit(4);", '{"arguments": [[]]}'),
    ("<?php echo \"loading\\n\"; throw new Exception('while loading');\nfunction solution() { return 1; }", '{"arguments": [[]]}'),
    ("<?php echo \"no solution here\\n\";", '{"arguments": [[]]}'),
    ("<?php function (", '{"arguments": [[]]}'),
    ("<?php function solution($k) { if ($k) { exit(); } return 1; }", '{"arguments": [[0], [1], [0]]}'),
    ("<?php function solution() { return [__FILE__, $GLOBALS['argv']]; }", '{"arguments": [[]]}'),
]


@pytest.fixture(scope="module")
def server():
    """Its prestarted php slots forked from the template from here on (the first slots may have
    warmed before the template was ready)."""
    instance = Server({"RUN_CONCURRENCY": "2", "RUN_LANGS": "php"}).wait_ready()
    try:
        deadline = time.monotonic() + 30
        while (instance.wait_prestarted("php"), probe(instance)["cmdline"])[1] != "--template":
            assert time.monotonic() < deadline, "no php task was forked from the template"
        yield instance
    finally:
        instance.stop()


def probe(server: Server, **fields) -> dict:
    body, _ = server.run_logged(lang_slug="php", solution_text=PROBE, **fields)
    assert (body["exit_code"], body["stderr"]) == (0, ""), body
    seen = with_slot_uid(json.loads(body["stdout"]))
    seen["slot_cgroup_counted_it"] = body["stats"]["memory_peak_bytes"] > 0 and body["stats"]["cpu_ms"] > 0
    return seen


def forked_run(server: Server, **fields) -> dict:
    server.wait_prestarted("php")
    body, record = server.run_logged(lang_slug="php", **fields)
    assert record["prestarted"] is True
    return body


def spawned_run(server: Server, **fields) -> dict:
    body, record = server.run_logged(lang_slug="php", stdin="", **fields)  # with stdin: a plain slot
    assert record["prestarted"] is False
    return body


def answer(body: dict) -> tuple:
    """What the program said; a harness report's call times (never the same twice) as 't'."""
    return body["exit_code"], re.sub(r'"time":"[0-9.]+"', '"time":"t"', body["stdout"]), body["stderr"], body["stats"]["outcome"]


def test_a_forked_php_task_is_confined_as_a_spawned_one(server):
    server.wait_prestarted("php")
    forked = probe(server)
    assert forked["cmdline"] == "--template"  # forked from the template
    spawned = probe(server, stdin="")
    assert spawned["cmdline"] == "solution.php"
    for key in ("status", "environ", "limits", "mounts", "net", "hostname", "cwd", "pids", "ppid", "umask", "proc_owner"):
        assert forked[key] == spawned[key], key
    assert forked["status"]["CapBnd"] == ["0000000000000000"] and forked["status"]["NoNewPrivs"] == ["1"]
    assert forked["slot_cgroup_counted_it"] and spawned["slot_cgroup_counted_it"]
    assert forked["cgroup"] == spawned["cgroup"] and all(line.endswith(":/") for line in forked["cgroup"].splitlines())
    assert forked["pids"] == ["2"] and (forked["pid"], forked["ppid"]) == (2, 1)
    # past the standard three: nothing of the template or of the slot's init (php-cli keeps its
    # main script and its prepend file open while they run; an included file is closed), and
    # the template library is unloaded once serve returned
    assert [link for fd, link in forked["fds"].items() if int(fd) > 2 and link] == []
    assert [link for fd, link in spawned["fds"].items() if int(fd) > 2 and link] == ["/sandbox/check/solution.php", "/sandbox/check/prepend.php"]
    assert forked["kiln_maps"] == spawned["kiln_maps"] == []


def test_forked_php_tasks_draw_their_own_random_numbers(server):
    draws = [probe(server)["random"] for _ in range(4)]
    for kind in range(4):
        assert len({draw[kind] for draw in draws}) == 4, draws


@pytest.mark.parametrize("solution", PLAIN)
def test_a_forked_php_task_answers_as_the_test_command(server, solution):
    forked = forked_run(server, solution_text=solution)
    spawned = spawned_run(server, solution_text=solution)
    assert answer(forked) == answer(spawned), (forked, spawned)


@pytest.mark.parametrize(("solution", "asserts"), HARNESS)
def test_a_forked_php_task_answers_in_harness_mode_as_the_test_command(server, solution, asserts):
    forked = forked_run(server, solution_text=solution, asserts=asserts)
    spawned = spawned_run(server, solution_text=solution, asserts=asserts)
    assert answer(forked) == answer(spawned), (forked, spawned)


def test_forked_php_runs_are_counted_as_prestarted(server):
    def counted() -> float:
        found = re.search(r'^kiln_prestarted_runs_total\{lang="php"\} (\S+)$', server.client.get("/metrics").text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    server.wait_prestarted("php")
    before = counted()
    body, record = server.run_logged(lang_slug="php", solution_text="<?php echo 1;")
    assert record["prestarted"] is True
    assert counted() == before + 1


def test_the_php_template_forks_and_keeps_no_child(server):
    server.wait_prestarted("php")
    (template,) = server.templates()
    assert Path(f"/proc/{template}/task/{template}/children").read_text().split() == []
    assert os.stat(f"/proc/{template}").st_uid == server.host_uid(0)
    assert os.readlink(f"/proc/{template}/ns/mnt") != os.readlink("/proc/self/ns/mnt")


@pytest.mark.parametrize(("settings", "cmdline"), [({"RUN_TEMPLATES": "python"}, "prestart.php"), ({"RUN_PRESTART": "python"}, "solution.php")])
def test_settings_turn_php_templates_off(start_server, settings, cmdline):
    """RUN_TEMPLATES without php: its slots are prestarted (once asked for), never forked;
    RUN_PRESTART without php: plain slots, the test command spawned."""
    srv = start_server(RUN_CONCURRENCY="1", RUN_LANGS="php,python", **settings)
    assert not any(b"prestart.php" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in srv.templates())
    seen = []
    deadline = time.monotonic() + 20
    while cmdline not in seen or len(seen) < 4:
        assert time.monotonic() < deadline, seen
        time.sleep(0.2)
        seen.append(probe(srv)["cmdline"])
    assert set(seen) <= {"solution.php", cmdline}, seen
