"""Helpers of the security suite: the C probe workspace, C building blocks, the checks of a run's
answer. (The host's view of processes is kilntest's: processes, processes_of_uids, Server.slots.)"""

from __future__ import annotations

# The C workspace's test command. Its first line saves the environment kiln gave /bin/sh (sh's
# own /proc/$$/environ: the initial block, before the shell adds PWD) for the environment probe;
# then the probe is compiled and exec'd (kiln execs the last plain command), so it is the task's
# main process and a seccomp kill shows as the probe's own SIGSYS.
INITIAL_ENV_FILE = "/tmp/.kiln-initial-environ"
C_RECIPE = "\n".join(
    (
        f"@cat /proc/$$$$/environ > {INITIAL_ENV_FILE}",
        "@gcc -O1 -w -o /tmp/probe -x c check/solution.cpp",
        "@/tmp/probe",
    )
)

C_PRELUDE = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <asm/unistd.h>

/* print and flush at once: a seccomp kill must not swallow what was printed before it */
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static const char *ename(int e) {
    const char *name = strerrorname_np(e);
    return name ? name : "E?";
}
"""


def c_program(body: str, includes: str = "") -> str:
    """A C probe: the prelude, extra top-level code, then `body` as main's statements."""
    return f"{C_PRELUDE}\n{includes}\nint main(void) {{\n{body}\n    return 0;\n}}\n"


def syscall_probe(name: str, args: str = "0, 0, 0, 0, 0, 0") -> str:
    """Prints BEFORE, calls syscall(SYS_<name>, args), prints AFTER with the result: a killed
    call leaves exactly "BEFORE\\n" on stdout."""
    return c_program(
        f"""
    say("BEFORE\\n");
    errno = 0;
    long r = syscall(SYS_{name}, {args});
    say("AFTER %ld %s\\n", r, ename(errno));
"""
    )


def assert_killed_by_seccomp(body: dict, stdout: str = "BEFORE\n") -> None:
    """The probe died of SIGSYS (KILL_PROCESS), after printing `stdout` and nothing more."""
    assert body["stats"]["outcome"] == "policy_violation", body
    assert body["stats"]["signal"] == 31, body
    assert body["exit_code"] == 159, body
    assert body["stdout"] == stdout, body


def assert_exited(body: dict, code: int = 0) -> None:
    assert body["stats"]["outcome"] == "exited", body
    assert body["exit_code"] == code, body
    assert body["stats"]["signal"] is None, body


def assert_healthy(srv) -> None:
    response = srv.client.get("/health")
    assert response.status_code == 200, f"/health answered {response.status_code}: {response.text}"
