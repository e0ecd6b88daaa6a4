"""A language's template: its interpreter started once, each prestarted task of the language
forked from it instead of started afresh (a workspace opts in with a `template` target; see
kiln.runtime.read_commands).

    zygote ── template = kiln-init in template mode, then the workspace's `template` command:
              root, in a copy of an index's root with the language's workspace mounted, its
              own network, ipc and uts namespaces
                 └─ (per slot, cloned as the zygote's child) kiln-init, PID 1 of the slot
                       └─ the task, forked from the template: it enters the slot and waits
                          for its go as a prestart command does

kiln/native/template.c has the steps and the protocol: one SOCK_SEQPACKET message a slot (the
flags, path, argv and environment of kiln-init, its descriptors passed along), answered with
the slot's pid or -errno.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass

from kiln import native
from kiln.log import Log
from kiln.runtime import Workload
from kiln.sandbox import libc
from kiln.zygote.backoff import Backoff
from kiln.zygote.start import DESCRIPTOR_VARIABLES, Start

# its own network namespace (a forked task is there until it enters its slot's: an empty one),
# and its own hostname and SysV IPC; the mount namespace is kiln-init's to make
NAMESPACES = libc.CLONE_NEWNET | libc.CLONE_NEWUTS | libc.CLONE_NEWIPC
ANSWER_TIMEOUT_S = 2.0
READY = b"r"
# what a template command says, before it exits, when its runtime cannot fork tasks here (a build
# of ruby whose fork steps kiln's module does not know): not a failure to retry and count, a fact
# of this host until the runtime changes (kiln's restart)
UNAVAILABLE = "kiln: cannot fork tasks from this runtime:"


class TemplateError(Exception):
    pass


@dataclass
class Template:
    slug: str
    pid: int
    sock: socket.socket  # the zygote's end
    init: int  # kiln-init, opened with O_PATH: the template's root has no path to it
    ready: bool = False

    def fork_slot(self, flags: int, argv: list[str], env: dict[str, str], keep: list[int]) -> int:
        """A slot's kiln-init, cloned by the template into new namespaces (`flags`) as the
        zygote's child, its task forked: what native.start_init does for a plain slot. Returns
        init's pid; raises TemplateError when the template cannot (the caller then spawns)."""
        if not self.ready:
            raise TemplateError(f"the {self.slug} template is not ready")
        message = fork_message(flags, argv, env, keep)
        try:
            socket.send_fds(self.sock, [message], [*keep, self.init])
            answer = self.sock.recv(4)
        except OSError as error:
            raise TemplateError(f"the {self.slug} template does not answer: {error}") from None
        if len(answer) != 4:
            raise TemplateError(f"the {self.slug} template is gone")
        (pid,) = struct.unpack("=i", answer)
        if pid < 0:
            raise TemplateError(f"the {self.slug} template cannot fork a slot: {os.strerror(-pid)}")
        return pid

    def heard(self) -> str | None:
        """Its socket is readable: None once it said it is ready, else why it is no use."""
        try:
            said = self.sock.recv(4096)
        except OSError as error:
            return f"its socket failed: {error}"
        if said == READY and not self.ready:
            self.ready = True
            return None
        if said[8:9] == b"{":  # kiln-init's "failed" frame: it could not start the command
            try:
                return str(json.loads(said[8:]).get("error"))
            except ValueError:
                pass
        return said.decode("utf-8", "replace").strip() or "it exited"

    def last_words(self) -> str:
        """What it said and no one read yet, without waiting ("" if nothing)."""
        try:
            return self.sock.recv(4096, socket.MSG_DONTWAIT).decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def close(self) -> None:
        self.sock.close()
        os.close(self.init)
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


def start(slug: str, module_path: str, root_image: int, zygote: int, recipe: int, lower: tuple[int, ...] = ()) -> Template:
    """The `template` command of `slug`'s workspace, in a private copy of the root image
    `root_image` of the index whose `recipe` it is given, with the template module at
    `module_path` on its descriptor 4, and the zygote's clones of the lower layers (SlotSpec.lower)
    for its workspace's overlay (it closes them before its command runs). It says READY once it
    serves."""
    zygote_end, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    module = _module_copy(module_path)
    start = Start(template_end.fileno(), zygote, recipe, root_image, lower=lower, template_module=module, template_of=slug)
    try:
        keep = [template_end.fileno(), zygote, recipe, root_image, module, *lower]
        pid = native.spawn_init(NAMESPACES, [f"kiln: template {slug}"], start.environment(), keep)
    except BaseException:
        zygote_end.close()
        raise
    finally:
        template_end.close()
        os.close(module)
    zygote_end.settimeout(ANSWER_TIMEOUT_S)  # once: the zygote reads it only when it is readable or answers
    return Template(slug=slug, pid=pid, sock=zygote_end, init=os.open(native.INIT, os.O_PATH | os.O_CLOEXEC))


def _module_copy(path: str) -> int:
    """The template module in a memfd: the forked tasks' /proc/self/maps then name no host path."""
    module = os.memfd_create(os.path.basename(path), os.MFD_CLOEXEC)
    with open(path, "rb") as f:
        view = memoryview(f.read())
    while view:
        view = view[os.write(module, view) :]
    return module


def fork_message(flags: int, argv: list[str], env: dict[str, str], keep: list[int]) -> bytes:
    """u64 flags | argv... NUL | NUL | environment... NUL, where a descriptor in the environment
    is written #i: the i-th of `keep`, passed with the message, and the program to run is the
    descriptor after them."""
    position = {fd: i for i, fd in enumerate(keep)}
    entries = []
    for key, value in env.items():
        if key in DESCRIPTOR_VARIABLES and value:
            value = ",".join(f"#{position[int(fd)]}" for fd in value.split(","))
        entries.append(f"{key}={value}")
    strings = [*map(os.fsencode, argv), b"", *map(os.fsencode, entries)]
    return struct.pack("=Q", flags) + b"".join(s + b"\0" for s in strings)


class Templates:
    """The zygote's language templates, one per language whose workspace has a `template` target:
    started once an index has a root to copy, and when one fails, closed and started again after
    a pause (its language's slots are spawned as usual meanwhile)."""

    def __init__(self, workloads: dict[str, Workload], log: Log, on_failure: Callable[[str], None] = lambda slug: None):
        self.workloads = workloads
        self.log = log
        self.on_failure = on_failure  # told the language of each template that failed (the front counts them)
        self.slugs = tuple(slug for slug, w in workloads.items() if w.template_argv is not None)
        self.running: dict[str, Template] = {}
        self.backoff: dict[str, Backoff] = {}

    def start_missing(self, root_image: int, recipe: int, zygote: int, now: float, lower: tuple[int, ...] = ()) -> None:
        """Start each language's template that is not running and not pausing, in a private copy of
        the root image `root_image` of the index whose `recipe` it is (`lower`: its spec's)."""
        for slug in self.slugs:
            if slug in self.running or self.backoff.get(slug, Backoff()).not_before > now:
                continue
            try:
                self.running[slug] = start(slug, self.workloads[slug].template_module, root_image, zygote, recipe, lower)
            except OSError as error:
                self._pause(slug, f"cannot start it: {error}")

    def ready(self, slug: str) -> Template | None:
        template = self.running.get(slug)
        return template if template is not None and template.ready else None

    def failed(self, template: Template, why: str) -> None:
        if self.running.get(template.slug) is template:
            del self.running[template.slug]
            template.close()
            self._pause(template.slug, why)

    def worked(self, slug: str) -> None:
        """A slot it forked got warm: the next failure pauses it from the shortest wait again."""
        self.backoff.pop(slug, None)

    def heard(self, template: Template) -> None:
        why = template.heard()
        if why is not None:
            self._ended(template, why)
        else:
            self.log.info("template ready", slug=template.slug, pid=template.pid)

    def _ended(self, template: Template, why: str) -> None:
        """A template that said why it is no use, or exited: unavailable for good if its runtime
        cannot fork here, else failed (paused, then started again)."""
        if UNAVAILABLE in why:
            self.unavailable(template, why)
        else:
            self.failed(template, why)

    def unavailable(self, template: Template, why: str) -> None:
        """Its runtime cannot fork tasks here: the language's prestarted tasks are started afresh
        from now on, said once, not counted as a template failure (no alert would ever clear)."""
        if self.running.get(template.slug) is template:
            del self.running[template.slug]
            template.close()
        self.slugs = tuple(slug for slug in self.slugs if slug != template.slug)
        self.log.warning("template unavailable: prestarted tasks are started afresh", slug=template.slug, reason=why)

    def reaped(self, pid: int) -> None:
        ended = next((t for t in self.running.values() if t.pid == pid), None)
        if ended is not None:
            # what it said is read here, or a reap that came first would lose it
            self._ended(ended, ended.last_words() or "it exited")

    def sockets(self) -> dict[socket.socket, Template]:
        return {t.sock: t for t in self.running.values()}

    def retry_times(self) -> list[float]:
        return [b.not_before for slug, b in self.backoff.items() if slug not in self.running]

    def close_all(self) -> None:
        for template in self.running.values():
            template.close()
        self.running.clear()

    def _pause(self, slug: str, why: str) -> None:
        delay = self.backoff.setdefault(slug, Backoff()).failed()
        self.log.error("template failed", slug=slug, error=why, retry_in_s=round(delay, 2))
        self.on_failure(slug)
