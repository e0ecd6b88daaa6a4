"""Who the task is: uid/gid, groups, capabilities, no_new_privs, seccomp mode, environment,
descriptors and stdin."""

from __future__ import annotations

import json
import os

import pytest

from seclib import INITIAL_ENV_FILE, assert_exited, c_program

PY_STATUS = "print(open('/proc/self/status').read(), end='')\n"
C_STATUS = """
    FILE *f = fopen("/proc/self/status", "r");
    int c;
    while ((c = fgetc(f)) != EOF) putchar(c);
    fflush(stdout);
"""


@pytest.mark.parametrize(("where", "uid_base"), [("python", 10001), ("c", 21000)])
def test_identity_from_proc_self_status(run_py, run_c, where, uid_base):
    """uid_base: tests/conftest.py's server uses the default RUN_UID_BASE, c_server 21000."""
    body = run_py(PY_STATUS) if where == "python" else run_c(c_program(C_STATUS))
    assert_exited(body)
    status = {key: value.strip() for key, _, value in (line.partition(":") for line in body["stdout"].splitlines())}
    uid = int(status["Uid"].split()[0])
    assert uid_base <= uid < uid_base + 4
    assert status["Uid"].split() == [str(uid)] * 4  # real, effective, saved, filesystem
    assert status["Gid"].split() == [str(uid)] * 4  # gid = uid
    assert status["Groups"] == ""
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert status[caps] == "0000000000000000", caps
    assert status["NoNewPrivs"] == "1"
    assert status["Seccomp"] == "2"  # filter mode
    assert status["Seccomp_filters"] == "1"
    assert status["SigBlk"] == "0000000000000000"
    if where == "c":  # (python3 itself ignores SIGPIPE and SIGXFSZ at startup)
        # default dispositions, but for the two signals glibc reserves for itself (32, 33):
        # its posix_spawn ignores them in the child, and glibc programs handle them anyway
        assert int(status["SigIgn"], 16) & ~0x180000000 == 0


def test_passwd_and_group_are_generated(run_py):
    body = run_py(
        "import os, pwd, grp\n"
        "print(open('/etc/passwd').read(), end='')\n"
        "print(open('/etc/group').read(), end='')\n"
        "print(pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name)\n"
    )
    assert_exited(body)
    lines = body["stdout"].splitlines()
    uid = lines[1].split(":")[2]
    assert lines[:6] == [
        "root:x:0:0:root:/root:/usr/sbin/nologin",
        f"runner:x:{uid}:{uid}:runner:/sandbox:/bin/sh",
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
        "root:x:0:",
        f"runner:x:{uid}:",
        "nogroup:x:65534:",
    ]
    assert lines[6] == "runner runner"


EXPECTED_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/sandbox", "USER": "runner", "LOGNAME": "runner", "PWD": "/sandbox", "LANG": "C.UTF-8"}


def test_environment_given_to_the_test_command_is_exactly_the_allowlist(run_c):
    """What kiln passes to execve(/bin/sh): sh's initial environment block, saved by the C
    workspace's first recipe line. c_server's own environment carries canaries (HOME=/root,
    USER=root, KILN_CANARY_SECRET, VIRTUAL_ENV, ...), RUN_*, HOST and PORT: none may appear."""
    body = run_c(
        c_program(
            f"""
    FILE *f = fopen("{INITIAL_ENV_FILE}", "r");
    int c;
    while ((c = fgetc(f)) != EOF) putchar(c == 0 ? '\\n' : c);
    fflush(stdout);
"""
        )
    )
    assert_exited(body)
    env = dict(line.split("=", 1) for line in body["stdout"].splitlines())
    assert env == EXPECTED_ENV


@pytest.mark.parametrize("where", ["python", "c"])
def test_environment_seen_by_the_program(run_py, run_c, where):
    """The program's own environment: the allowlist (PWD included: kiln sets it as sh would,
    for programs it runs without sh); nothing of the service's environment."""
    if where == "python":
        body = run_py("import os, json\nprint(json.dumps(dict(os.environ)))\n")
        assert_exited(body)
        env = json.loads(body["stdout"])
    else:
        body = run_c(c_program("extern char **environ;\nfor (char **e = environ; *e; e++) say(\"%s\\n\", *e);"))
        assert_exited(body)
        env = dict(line.split("=", 1) for line in body["stdout"].splitlines())
    assert env == EXPECTED_ENV


def test_descriptors_above_2_are_closed_python(run_py):
    body = run_py(
        "import os\n"
        "print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))\n"  # listdir's own fd is closed again
        "open_fds = []\n"
        "for fd in range(3, 1024):\n"
        "    try:\n"
        "        os.fstat(fd)\n"
        "        open_fds.append((fd, os.readlink(f'/proc/self/fd/{fd}')))\n"
        "    except OSError:\n"
        "        pass\n"
        "print(open_fds)\n"
    )
    assert_exited(body)
    listed, open_fds = body["stdout"].splitlines()
    assert open_fds == "[]"
    assert listed in ("[0, 1, 2]", "[0, 1, 2, 3]")  # 3: the directory listdir is reading


def test_descriptors_above_2_are_closed_c(run_c):
    """Checked first thing in the probe, with fcntl (opens nothing): every fd from 3 to the
    NOFILE limit is closed; 0, 1, 2 are open."""
    body = run_c(
        c_program(
            r"""
    int open_fds[1024], n = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) != -1) open_fds[n++] = fd;
    for (int i = 0; i < n; i++) say("%d ", open_fds[i]);
    say("\n");
"""
        )
    )
    assert_exited(body)
    assert body["stdout"] == "0 1 2 \n"


def test_stdin_is_dev_null_by_default(run_py):
    body = run_py(
        "import os, sys, stat\n"
        "st = os.fstat(0)\n"
        "print(stat.S_ISCHR(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev), os.readlink('/proc/self/fd/0'))\n"
        "print(repr(sys.stdin.buffer.read()))\n"
    )
    assert_exited(body)
    assert body["stdout"] == "True 1 3 /dev/null\nb''\n"


def test_stdout_and_stderr_are_pipes_owned_by_the_run(run_py):
    body = run_py(
        "import os, stat\n"
        "print([stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (1, 2)], os.readlink('/proc/self/fd/1').startswith('pipe:'))\n"
    )
    assert_exited(body)
    assert body["stdout"] == "[True, True] True\n"


REOPEN_STDIO = (
    "import os\n"
    "for path, mode in (('/dev/stdout', 'w'), ('/dev/stderr', 'w'), ('/proc/self/fd/1', 'w'), ('/dev/stdin', 'r')):\n"
    "    with open(path, mode) as f:\n"
    "        f.write(path + '\\n') if mode == 'w' else print(path, repr(f.read()))\n"
    "print('owner', os.fstat(1).st_uid == os.getuid(), os.fstat(2).st_uid == os.getuid())\n"
)


@pytest.mark.parametrize("stdin", [None, "in"])
def test_the_task_may_reopen_its_own_stdio(run_py, stdin):
    """Its pipes are its own (owned by its uid): shell redirections to /dev/stdout, freopen and
    the like open them again. Both kinds of slot: prestarted (no stdin) and plain (stdin)."""
    fields = {"stdin": stdin} if stdin is not None else {}
    for _ in range(2):  # python's first run may take a plain slot: the second is prestarted
        body = run_py(REOPEN_STDIO, **fields)
        assert_exited(body)
        assert body["stdout"] == f"/dev/stdout\n/proc/self/fd/1\n/dev/stdin {stdin or ''!r}\nowner True True\n", body
        assert body["stderr"] == "/dev/stderr\n", body


def test_the_request_stdin_is_a_sealed_copy(run_py):
    body = run_py(
        "import os, sys\n"
        "data = sys.stdin.buffer.read()\n"
        "try:\n"
        "    os.write(0, b'x')\n"
        "    print('wrote')\n"
        "except OSError as e:\n"
        "    print('write', e.errno)\n"
        "print(repr(data))\n",
        stdin="secret input\n",
    )
    assert_exited(body)
    assert body["stdout"] == "write 1\nb'secret input\\n'\n"  # EPERM: the memfd is sealed


def test_the_cpu_rlimit_is_a_backstop_from_the_timeout(server, run_py):
    """kiln-init sets it from the plan's terms (plan.cpu_rlimit_terms): the timeout in started
    seconds, times the CPUs, plus one second; a prestarted slot, set before its request, from
    RUN_TIMEOUT_MAX (5m here)."""
    cpus = len(os.sched_getaffinity(0))
    probe = "import resource\nprint(*resource.getrlimit(resource.RLIMIT_CPU))\n"
    plain = run_py(probe, stdin="", timeout="1500ms")
    assert plain["stdout"] == f"{2 * cpus + 1} {2 * cpus + 1}\n", plain
    # a prestarted slot warm and settled first: on a busy machine two requests in a row both
    # found only plain slots
    server.wait_prestarted("python")
    prestarted = run_py(probe, timeout="1500ms")
    assert prestarted["stdout"] == f"{300 * cpus + 1} {300 * cpus + 1}\n", prestarted
