"""What a run reports: exit codes, signals, timeouts, output, stdin, keep-alive. (A client that
hangs up: tests/api/test_front.py; a timeout or an exit that ends a whole process tree:
tests/security/test_isolation.py.)"""

from __future__ import annotations

import json
import shutil
import socket

import pytest

from kilntest import KILN, Server, burst


def test_original_runner_payload_answers_exactly(server):
    solution = "import json\n\nwith open('asserts.json') as f:\n    data = json.load(f)\nprint(data['a'] + data['b'])\n"
    response = server.run(solution_text=solution, asserts='{"a": 2, "b": 3}', timeout="10s")
    assert response.status_code == 200
    assert response.text.startswith('{"exit_code":0,"stdout":"5\\n","stderr":"","stats":{')


def test_asserts_as_json_value_is_serialised(server):
    solution = "import json\nprint(json.load(open('asserts.json')))\n"
    response = server.run(solution_text=solution, asserts={"a": [1, 2], "b": "é"})
    assert response.json()["stdout"] == "{'a': [1, 2], 'b': 'é'}\n"


@pytest.mark.parametrize("code", [0, 1, 3, 42, 137, 159, 255])  # 137, 159: what sh says of a child killed, a program its own
def test_exit_code_propagates(server, code):
    body = server.run(solution_text=f"import sys\nprint('bye')\nsys.exit({code})\n").json()
    assert body["exit_code"] == code
    assert body["stats"]["outcome"] == "exited"
    assert body["stats"]["signal"] is None
    assert body["stdout"] == "bye\n"


@pytest.mark.parametrize(("sig", "name"), [(9, "SIGKILL"), (11, "SIGSEGV"), (15, "SIGTERM"), (6, "SIGABRT")])
def test_signal_propagates(server, sig, name):
    body = server.run(solution_text=f"import os, signal\nos.kill(os.getpid(), signal.{name})\n").json()
    assert body["exit_code"] == 128 + sig
    assert body["stats"]["signal"] == sig
    assert body["stats"]["outcome"] == "signaled"


def test_uncaught_exception_is_exit_1_with_traceback(server):
    body = server.run(solution_text="raise ValueError('boom')\n").json()
    assert body["exit_code"] == 1
    assert "ValueError: boom" in body["stderr"]
    assert body["stats"]["outcome"] == "exited"


def test_timeout_keeps_partial_output(server):
    solution = "import sys, time\nprint('partial', flush=True)\nsys.stderr.write('err\\n'); sys.stderr.flush()\ntime.sleep(30)\nprint('never')\n"
    body = server.run(solution_text=solution, timeout="700ms").json()
    assert body["exit_code"] is None
    assert body["stats"]["outcome"] == "timed_out"
    assert body["stdout"] == "partial\n"
    assert body["stderr"] == "err\n"
    assert body["stats"]["wall_ms"] >= 700


def test_binary_output_is_replaced_not_an_error(server):
    solution = "import sys\nsys.stdout.buffer.write(b'ok\\xff\\xfe\\x00end')\nsys.stderr.buffer.write(b'\\xc3\\x28')\n"
    response = server.run(solution_text=solution)
    assert response.status_code == 200
    body = response.json()
    assert body["stdout"] == "ok\ufffd\ufffd\x00end"
    assert body["stderr"] == "\ufffd("


def test_unicode_round_trip(server):
    text = "héllo wörld ✓ 日本 😀"
    body = server.run(solution_text=f"print({text!r})").json()
    assert body["stdout"] == text + "\n"


def test_stdin_is_fed_and_defaults_to_dev_null(server):
    solution = "import sys\ndata = sys.stdin.read()\nprint(repr(data))\n"
    assert server.run(solution_text=solution, stdin="1 2\nthree\n").json()["stdout"] == "'1 2\\nthree\\n'\n"
    assert server.run(solution_text=solution).json()["stdout"] == "''\n"
    assert server.run(solution_text=solution, stdin=None).json()["stdout"] == "''\n"
    big = "x" * 300_000  # larger than a pipe buffer
    assert server.run(solution_text="import sys\nprint(len(sys.stdin.read()))", stdin=big).json()["stdout"] == "300000\n"


def test_stdin_cannot_be_rewritten_by_the_task(server):
    solution = "import os\ntry:\n    os.write(0, b'x')\n    print('wrote')\nexcept OSError as e:\n    print('refused', e.errno)\n"
    assert server.run(solution_text=solution, stdin="abc").json()["stdout"].startswith("refused")


def test_keep_alive_serves_several_requests_on_one_connection(server):
    body = json.dumps({"lang_slug": "python", "solution_text": "print(6 * 7)"}).encode()
    request = b"POST /run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as conn:
        reader = conn.makefile("rb")
        for _ in range(3):
            conn.sendall(request)
            status = reader.readline()
            assert status.startswith(b"HTTP/1.1 200")
            headers = {}
            while (line := reader.readline()) != b"\r\n":
                key, _, value = line.decode().partition(":")
                headers[key.strip().lower()] = value.strip()
            payload = json.loads(reader.read(int(headers["content-length"])))
            assert payload["stdout"] == "42\n"
            assert headers.get("connection", "keep-alive").lower() != "close"


def test_parallel_requests_get_200_or_429_and_waves_all_succeed(start_server):
    srv = start_server(RUN_CONCURRENCY="10")
    solution = "import time\ntime.sleep(0.3)\nprint('ok')\n"
    answers = burst(srv, 30, lang_slug="python", solution_text=solution)
    assert {r.status_code for r in answers} <= {200, 429}
    assert sum(r.status_code == 200 for r in answers) >= 10
    assert all(r.json()["stdout"] == "ok\n" for r in answers if r.status_code == 200)
    assert all(r.json() == {"error": "runner busy"} for r in answers if r.status_code == 429)
    for _ in range(3):
        wave = burst(srv, 10, lang_slug="python", solution_text=solution)
        assert [r.status_code for r in wave] == [200] * 10


IGNORING_PARENT = """
import ctypes, os, sys
libc = ctypes.CDLL(None)
ignore = (ctypes.c_ulong * 4)(1, 0, 0, 0)  # struct kernel_sigaction with SIG_IGN
for sig in (10, 32, 33, 40):
    libc.syscall(13, sig, ignore, None, 8)
os.execv(sys.argv[1], sys.argv[1:])
"""


def test_the_task_gets_default_signal_dispositions(workspace):
    """Whoever ignored signals before kiln (Python itself, a parent, an init system), the task
    starts with every disposition at its default and nothing blocked."""
    srv = Server({"RUN_WORKSPACE": str(workspace("@grep -E '^Sig(Ign|Blk)' /proc/self/status"))}, argv=["/usr/bin/python3", "-c", IGNORING_PARENT, str(KILN), "serve"])
    try:
        srv.wait_ready()
        blocked, ignored = (line.split(":\t")[1] for line in srv.run(solution_text="").json()["stdout"].splitlines())
        assert blocked == "0000000000000000"
        # but for 32 and 33, reserved by glibc, which its posix_spawn ignores in the child
        assert int(ignored, 16) & ~0x180000000 == 0, ignored
    finally:
        srv.stop()


def test_run_memory_max_limits_the_address_space(start_server):
    srv = start_server(RUN_MEMORY_MAX="256m", RUN_CONCURRENCY="1")
    limits = srv.run(solution_text="print(open('/proc/self/limits').read())").json()["stdout"]
    assert [line.split()[3:5] for line in limits.splitlines() if line.startswith("Max address space")] == [[str(256 << 20), str(256 << 20)]]
    body = srv.run(solution_text="try:\n    x = bytearray(400 << 20)\nexcept MemoryError:\n    print('refused')\n").json()
    assert body["stdout"] == "refused\n" and body["stats"]["outcome"] == "exited"


def test_a_language_with_more_memory_runs_in_a_slot_warmed_for_the_common_limits():
    """Plain slots are warmed with the cgroup limits most languages have; a request of a
    language allowed more raises them (in cgroup v1, memory+swap before memory)."""
    if not shutil.which("ruby"):
        pytest.skip("ruby is not installed here (langs/install-toolchains.sh ruby)")
    srv = Server({"RUN_LANGS": "python,js,ruby", "RUN_PRESTART": "false", "RUN_CONCURRENCY": "2", "RUN_CGROUP_MEMORY_MAX_RUBY": "1536m", "RUN_CGROUP_MEMORY_MAX_JS": "64m"}).wait_ready()
    try:
        for slug, solution in (("ruby", "puts 1 + 2\n"), ("js", "console.log(1 + 2);\n"), ("python", "print(1 + 2)\n"), ("ruby", "puts 1 + 2\n")):
            body = srv.client.post("/run", json={"lang_slug": slug, "solution_text": solution}).json()
            assert (body["exit_code"], body["stdout"]) == (0, "3\n"), (slug, body)
    finally:
        srv.stop()
