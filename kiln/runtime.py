"""What `kiln serve` works out once at startup, before starting the zygote: the served
languages with their test commands, the host paths the sandbox binds, where slots stage their
root.

The front is the process that built the Runtime; the zygote receives it pickled at its start
(kiln/zygote/boot.py).

Past 400 lines as one pass over the host at startup (workspaces and their commands, toolchains,
paths, versions); the workspace commands' part (Commands to taking_arguments) is the piece to
move out first if it grows.
"""

from __future__ import annotations

import collections
import math
import os
import posixpath
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kiln import langs, native, rootless
from kiln.config import Config
from kiln.langs import Language
from kiln.rootless import UserNamespace
from kiln.sandbox import seccomp
from kiln.sandbox.plan import MERGED_USR_LINKS, WORKSPACES_DIR, HostPath


class StartupError(Exception):
    """kiln cannot start as configured; the message says what to change."""


@dataclass(frozen=True)
class Workload:
    """A served language: its table entry and what this host resolved for it."""

    language: Language
    lower: str  # the overlay's lower layer, inside the slot's root
    script: str  # the test command: the lines `make -n -s test` printed
    argv: tuple[str, ...]  # what runs it: the program itself when the script is one plain command
    tmp_size: int
    memory_max: int
    pids_max: int
    # the workspace's `prestart` command, started while a slot warms (see read_commands)
    prestart_argv: tuple[str, ...] | None = None
    # the workspace's `template` command: prestarted tasks forked from it (see read_commands)
    template_argv: tuple[str, ...] | None = None
    # the workspace's `build` and `exec` commands: a judge request's build, and each of its tests
    build_argv: tuple[str, ...] | None = None
    exec_argv: tuple[str, ...] | None = None
    build_script: str | None = None  # the lines `make -n -s build` printed, as they run (/languages shows them)
    exec_script: str | None = None
    folder: str = ""  # the workspace on the host (the lower layer's source)

    @property
    def judges(self) -> bool:
        """Whether /judge takes this language (its workspace has `build` and `exec`)."""
        return self.build_argv is not None and self.exec_argv is not None

    @property
    def slug(self) -> str:
        return self.language.slug

    @property
    def template_module(self) -> str | None:
        """The module the template command loads (kiln.native.TEMPLATE_MODULES), if it has one."""
        if self.template_argv is None or self.language.template_module is None:
            return None
        return str(native.TEMPLATE_MODULES[self.language.template_module])


@dataclass(frozen=True)
class Unserved:
    slug: str
    reason: str


STARVED_MIN_TIMES = 3  # a host with as many CPUs as slots still has other load


@dataclass(frozen=True)
class Runtime:
    config: Config
    workloads: dict[str, Workload]
    unserved: tuple[Unserved, ...]
    host_paths: tuple[HostPath, ...]
    staging_dir: str
    cpus: int
    versions: dict[str, str]
    seccomp_filter: bytes  # BPF, compiled once here, loaded by every task
    common_limits: tuple[int, int]  # (memory_max, pids_max) most languages have: a plain slot's preset
    user_namespace: UserNamespace | None = None  # rootless (kiln/rootless.py); None under root
    in_user_namespace: bool = False  # rootless, or started as root of a user namespace (a pod)

    def slot_uid(self, index: int) -> int:
        """The uid (and gid) of slot `index`'s task; rootless with one id mapped, the only one."""
        if self.user_namespace is not None and self.user_namespace.single_id:
            return 0
        return self.config.uid_base + index

    @property
    def forking(self) -> frozenset[str]:
        """The languages whose slots are forked from their template (a short warm-up)."""
        return frozenset(slug for slug, workload in self.workloads.items() if workload.template_argv is not None)

    @property
    def starved_max_times(self) -> int:
        """How many times its timeout a run's deadline may move on for the time it waited for CPUs
        other runs held (kiln-init's starve.c; the runner waits as long for a slot's answer). With
        every slot busy a slot has cpus/slots of the machine, and a run needs slots/cpus times its
        own time: twice that is allowed, for the host's other load and what contention costs (in
        CI a memory bomb beside nine spinning runs needed four times the CPU it needs alone), and
        never less than STARVED_MIN_TIMES."""
        return max(STARVED_MIN_TIMES, math.ceil(2 * self.config.concurrency / max(1, self.cpus)))

    @property
    def runtime_dir(self) -> str:
        return posixpath.dirname(self.staging_dir)

    @property
    def layers_dir(self) -> str:
        """The judge's builds, one folder each, written by the front; every slot sees it
        read-only (a test's overlay takes its build as a lower layer). Gone with the service."""
        return posixpath.join(self.runtime_dir, "layers")

    @property
    def zygote_pidfile(self) -> str:
        return zygote_pidfile(self.config.instance)


def zygote_pidfile(instance: str) -> str:
    """Where `kiln slots` finds the zygote of a running kiln (RUN_INSTANCE)."""
    return f"/run/{instance}/zygote.pid"


def single_workspace(config: Config) -> bool:
    """A RUN_WORKSPACE with its own Makefile serves every slug, as in the original runner."""
    return (config.workspace / "Makefile").is_file()


class Commands(NamedTuple):
    """A workspace's commands: the lines `make -n -s <target>` printed (None: no such target)."""

    test: str
    prestart: str | None = None
    template: str | None = None
    build: str | None = None  # a judge request's build (needs `exec` too)
    exec: str | None = None  # each judge test: the built program, reading the test's stdin


OPTIONAL_TARGETS = ("prestart", "template", "build", "exec")


# Where a harness holds what loading the solution prints, below /sandbox, until its report takes
# it (then it unlinks the file). A load that ends abruptly (the runtime's immediate exit, a kill,
# the timeout, an OOM) leaves it there, and kiln-init passes it on after the task's stdout
# (kiln/native/files.c pass_on_held_stdout; kiln.h states it as HELD_STDOUT). The harnesses in
# langs/<slug>/ name it as "/sandbox/" + this; tests/unit/test_contract.py checks all three.
HELD_STDOUT = "check/.kiln-held-stdout"


def read_commands(folder: Path) -> Commands:
    """The lines of `make -n -s test`, and of the optional targets (prestart, template, build,
    exec) the workspace has. Each target must be phony with phony prerequisites only: the
    commands are taken once, so a file target would make them depend on the host.

    A workspace opts in to prestarted slots this way: kiln starts the prestart command while a
    slot warms, in the finished sandbox (workspace mounted, no request files yet), with
    descriptor 3 the read end of a pipe. When the request's files are in place kiln writes one byte and
    closes the pipe; the command reads it, closes descriptor 3, and from then on must do
    exactly what the test command does. End-of-file without a byte: the slot was given up.

    A prestarting workspace may go further with a `template` command: the prestart command,
    started once per language and kept, from which kiln forks each prestarted task instead of
    starting it afresh (kiln/native/template.c). It loads what the prestart command loads, then
    calls serve(3) of the module it finds on descriptor 4, kiln's template module for the
    language's runtime (kiln.langs `template_module`: `_kiln_template`, a CPython extension,
    `kiln_template`, a Node-API addon, or a plain library ruby loads with Fiddle and php with
    FFI); where serve returns true, it is in a forked task and goes on as the prestart command
    does at its wait."""
    database = _make(folder, "-p", "-n", "-s", "-r", "-R", "test")
    has = {target: re.search(rf"^{target}:", database, re.MULTILINE) is not None for target in OPTIONAL_TARGETS}
    if has["template"] and not has["prestart"]:
        raise StartupError(f"{folder}/Makefile: `template` needs a `prestart` target (a forked task is a prestarted one)")
    if has["build"] != has["exec"]:
        raise StartupError(f"{folder}/Makefile: `build` and `exec` go together (a judge builds once, then runs each test)")
    optional = {target: _phony_command(folder, target, database) for target in OPTIONAL_TARGETS if has[target]}
    return Commands(_phony_command(folder, "test", database), **optional)


def _phony_command(folder: Path, target: str, database: str) -> str:
    phony = set()
    for line in database.splitlines():
        if line.startswith(".PHONY:"):
            phony.update(line.split(":", 1)[1].split())
    if target not in phony:
        raise StartupError(f"{folder}/Makefile: `{target}` must be declared .PHONY")
    rule = re.search(rf"^{target}:(.*)$", database, re.MULTILINE)
    prerequisites = rule.group(1).split("|")[0].split() if rule else []
    files = [p for p in prerequisites if p not in phony]
    if files:
        raise StartupError(f"{folder}/Makefile: `{target}` depends on files {files}; only .PHONY prerequisites are allowed")
    script = _make(folder, "-n", "-s", target).strip("\n")
    if not script.strip():
        raise StartupError(f"{folder}/Makefile: `make -n -s {target}` printed no command")
    return exec_last_command(script)


_SHELL_SYNTAX = set(";&|<>()`$\\\n*?[]{}~#!'\"")
_SHELL_BUILTINS = {"cd", "echo", "printf", "test", "[", "exit", "export", "set", "unset", "shift", "return", "break", "continue", "eval", "exec", "trap", "wait", "read", ".", ":", "alias", "umask", "ulimit", "local", "readonly", "times", "type", "command", "getopts", "hash", "if", "for", "while", "until", "case"}


def exec_last_command(script: str) -> str:
    """Prefix the script's last line with `exec` when it is a plain command (words only).

    Debian's dash does not exec the last command of `sh -c` itself, so without this the
    program is sh's child: one more fork per run, and a program killed by a signal reads as
    sh's exit status 128+N instead of the signal.
    """
    *head, last = script.split("\n")
    words = last.split()
    if not words or _SHELL_SYNTAX & set(last) or "=" in words[0] or words[0] in _SHELL_BUILTINS:
        return script
    return "\n".join([*head, "exec " + last.strip()])


SHELL = ("/bin/sh", "-e", "-c")  # kiln-init knows its program as TASK_SHELL (kiln.h)


def task_argv(script: str, config: Config) -> tuple[str, ...]:
    """How the task runs `script`: `/bin/sh -e -c`, or, for one plain command whose program
    is found on RUN_SANDBOX_PATH, that program itself (what sh would exec, minus sh's own
    exec: half a millisecond per run). RUN_MEMORY_MAX is applied by sh (`ulimit -v`), the
    one limit the task cannot simply inherit: init, which spawns it, needs more address space."""
    if config.memory_max:
        return (*SHELL, f"ulimit -v {max(1, config.memory_max // 1024)}\n{script}")
    words = script.split()
    if "\n" in script or words[:1] != ["exec"] or len(words) < 2:
        return (*SHELL, script)  # exec_last_command found shell syntax
    program = words[1]
    if "/" not in program:  # looked up on the sandbox's PATH, as sh would (same /usr)
        found = [os.path.join(d, program) for d in config.sandbox_path.split(":") if os.access(os.path.join(d, program), os.X_OK)]
        if not found:
            return (*SHELL, script)  # let sh say "not found", as it would
        program = found[0]
    return (program, *words[2:])


def taking_arguments(argv: tuple[str, ...]) -> tuple[str, ...]:
    """`argv` made to take arguments after its own (a checker's input, output and answer):
    under `sh -c` they are the script's "$@" (after "$0", given here), so an exec target that
    goes through the shell passes them on with "$$@" in its Makefile."""
    return (*argv, "exec") if argv[:3] == SHELL else argv


# _subprocess_free: subprocess is imported only where a command runs (in `kiln serve`, at
# start). The zygote imports this module and runs no command: it stays without subprocess and
# the thread machinery subprocess imports (see kiln/zygote/boot.py).


def _make(folder: Path, *args: str) -> str:
    import subprocess  # noqa: PLC0415 - see _subprocess_free

    try:
        done = subprocess.run(["make", "--no-print-directory", *args], cwd=folder, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired) as error:
        raise StartupError(f"{folder}: cannot run make: {error}") from None
    if done.returncode != 0:
        raise StartupError(f"{folder}: `make {' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


def find_toolchain(language: Language, config: Config) -> str | None:
    """None when every executable is found on the sandbox PATH and visible inside the sandbox,
    else the reason the language cannot be served."""
    visible = visible_roots(config, (language,))
    for exe in language.toolchain:
        for folder in config.sandbox_path.split(":"):
            candidate = os.path.join(folder, exe)
            if os.access(candidate, os.X_OK):
                real = os.path.realpath(candidate)
                if any(real == root or real.startswith(root + "/") for root in visible):
                    break
                return f"{candidate} resolves to {real}, which the sandbox does not see"
        else:
            return f"{exe} not found on {config.sandbox_path}"
    return None


def visible_roots(config: Config, languages) -> tuple[str, ...]:
    roots = list(config.readonly_paths)
    for language in languages:
        roots.extend(language.readonly_paths)
    return tuple(dict.fromkeys(roots))


def describe_host_path(path: str) -> HostPath:
    if os.path.islink(path):
        return HostPath(path, "link", os.readlink(path))
    if os.path.isdir(path):
        return HostPath(path, "dir")
    if os.path.isfile(path):
        return HostPath(path, "file")
    return HostPath(path, "missing")


# Places of the sandbox's own making: a read-only path there would hide or replace them.
RESERVED_PATHS = ("/etc", "/proc", "/sys", "/dev", "/tmp", "/sandbox", "/.kiln")


def check_readonly_paths(roots: tuple[str, ...]) -> None:
    for root in roots:
        for reserved in RESERVED_PATHS:
            if root == reserved or (reserved != "/etc" and root.startswith(reserved + "/")):
                raise StartupError(f"read-only path {root} would cover the sandbox's own {reserved}; bind something below it instead (e.g. /etc/<tool>)")


def check_install_layout(config: Config, roots: tuple[str, ...]) -> None:
    """kiln's own code, venv and workspaces must not be visible to tasks through a bound path."""
    own = {"kiln's code": os.path.dirname(os.path.abspath(__file__)), "the Python environment": sys.prefix, "RUN_WORKSPACE": str(config.workspace)}
    for what, path in own.items():
        real = os.path.realpath(path)
        for root in roots:
            real_root = os.path.realpath(root)
            if real == real_root or real.startswith(real_root.rstrip("/") + "/"):
                raise StartupError(f"{what} ({real}) is under {root}, which every sandbox sees read-only; install kiln elsewhere (e.g. /opt/kiln)")


# Written by langs/install-toolchains.sh once a workspace's install.sh has prepared it
# (node_modules, precompiled headers, warmed caches): a workspace that ships an install.sh is
# not served before, or every request would fail on what the install prepares.
READY_STAMP = ".installed"


def workspace_problem(folder: Path) -> str | None:
    makefile, stamp = folder / "Makefile", folder / READY_STAMP
    if not makefile.is_file():
        return f"no workspace at {folder}"
    if not (folder / "install.sh").is_file():
        return None
    if not stamp.is_file():
        return f"workspace not prepared: run langs/install-toolchains.sh {folder.name}"
    # What install.sh prepares follows the Makefile (a prestart command, say, and the compiled
    # harness that honours it): prepared before the Makefile last changed is not prepared.
    if stamp.stat().st_mtime_ns < makefile.stat().st_mtime_ns:
        return f"workspace prepared before its Makefile changed: run langs/install-toolchains.sh {folder.name}"
    return None


def survey(config: Config, slugs) -> tuple[dict[str, Workload], list[Unserved]]:
    """Which of `slugs` this host can serve, and why not the others (never raises for a slug)."""
    single = single_workspace(config)
    workloads: dict[str, Workload] = {}
    unserved: list[Unserved] = []
    shared = read_commands(config.workspace) if single else None
    for slug in slugs:
        language = langs.LANGUAGES[slug]
        folder = config.workspace if single else config.workspace / slug
        reason = None
        if not single:
            reason = workspace_problem(folder) or find_toolchain(language, config)
        if reason is None:
            try:
                commands = shared or read_commands(folder)
            except StartupError as error:
                reason = str(error)
            else:
                if commands.template and language.template_module is None:
                    reason = f"{folder}/Makefile has a `template` target, but kiln has no template module for {slug}'s runtime (kiln/langs.py: template_module)"
        if reason is not None:
            unserved.append(Unserved(slug, reason))
            continue
        workloads[slug] = Workload(
            language=language,
            lower=WORKSPACES_DIR if single else f"{WORKSPACES_DIR}/{slug}",
            script=commands.test,
            argv=task_argv(commands.test, config),
            tmp_size=config.tmp_size_for(slug),
            memory_max=config.memory_max_for(slug),
            pids_max=config.pids_max_for(slug),
            prestart_argv=task_argv(commands.prestart, config) if commands.prestart and config.prestarts(slug) else None,
            template_argv=task_argv(commands.template, config) if commands.template and config.prestarts(slug) and config.forks(slug) else None,
            build_argv=task_argv(commands.build, config) if commands.build else None,
            exec_argv=taking_arguments(task_argv(commands.exec, config)) if commands.exec else None,
            build_script=commands.build,
            exec_script=commands.exec,
            folder=str(folder),
        )
    return workloads, unserved


def build(config: Config, user_namespace: UserNamespace | None = None) -> Runtime:
    workloads, unserved = survey(config, config.langs or tuple(langs.LANGUAGES))
    if config.langs:
        missing = [u for u in unserved if u.slug in config.langs]
        if missing:
            raise StartupError("RUN_LANGS names languages this host cannot serve:\n" + "\n".join(f"  {u.slug}: {u.reason}" for u in missing))
    if not workloads:
        raise StartupError(f"no language can be served from {config.workspace}")
    roots = visible_roots(config, [w.language for w in workloads.values()])
    check_readonly_paths(roots)
    check_install_layout(config, roots)
    host_paths = tuple(describe_host_path(p) for p in (*MERGED_USR_LINKS, *roots))
    return Runtime(
        config=config,
        workloads=workloads,
        unserved=tuple(unserved),
        host_paths=host_paths,
        staging_dir=f"/run/{config.instance}/root",
        cpus=len(os.sched_getaffinity(0)),
        versions=toolchain_versions([w.language for w in workloads.values()], config),
        seccomp_filter=seccomp.compile_filter(),
        common_limits=collections.Counter((w.memory_max, w.pids_max) for w in workloads.values()).most_common(1)[0][0],
        user_namespace=user_namespace,
        in_user_namespace=user_namespace is not None or rootless.in_user_namespace(),
    )


def toolchain_versions(languages, config: Config, timeout_s: float = 20.0) -> dict[str, str]:
    """Each language's version line (first non-empty output line), all asked at once."""
    import subprocess  # noqa: PLC0415 - see _subprocess_free

    env = {"PATH": config.sandbox_path, "HOME": "/tmp", "LC_ALL": "C"}
    running = {}
    for language in languages:
        if language.version_command:
            try:
                running[language.slug] = subprocess.Popen(language.version_command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, text=True, errors="replace")
            except OSError as error:
                running[language.slug] = error
    versions = {}
    deadline = time.monotonic() + timeout_s
    for slug, proc in running.items():
        if isinstance(proc, OSError):
            versions[slug] = f"unknown ({proc.strerror})"
            continue
        try:
            out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            lines = [line.strip() for line in out.splitlines() if line.strip()]
            versions[slug] = lines[0] if lines else "unknown"
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            versions[slug] = "unknown (version command timed out)"
    return versions
