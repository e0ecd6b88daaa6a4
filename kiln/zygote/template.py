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
from dataclasses import dataclass

from kiln import native
from kiln.sandbox import libc

# its own network namespace (a forked task is there until it enters its slot's: an empty one),
# and its own hostname and SysV IPC; the mount namespace is kiln-init's to make
NAMESPACES = libc.CLONE_NEWNET | libc.CLONE_NEWUTS | libc.CLONE_NEWIPC
# the variables of kiln-init's environment that name descriptors (slot.spawn)
FD_VARIABLES = frozenset({"KILN_SOCK", "KILN_ZYGOTE", "KILN_RECIPE", "KILN_NETNS", "KILN_TEMPLATE", "KILN_CG_DIRS", "KILN_CG_PROCS"})
ANSWER_TIMEOUT_S = 2.0
READY = b"r"


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
        zygote's child, its task forked: what native.spawn_init does for a plain slot. Returns
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

    def close(self) -> None:
        self.sock.close()
        os.close(self.init)
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


def start(slug: str, module_path: str, template_root: int, zygote: int, recipe: int) -> Template:
    """The `template` command of `slug`'s workspace, in a copy of the template mount namespace
    `template_root` of the index whose `recipe` it is given, with the template module at
    `module_path` on its descriptor 4. It says READY once it serves."""
    zygote_end, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    module = _module_copy(module_path)
    fds = {"KILN_SOCK": template_end.fileno(), "KILN_ZYGOTE": zygote, "KILN_RECIPE": recipe, "KILN_TEMPLATE": template_root, "KILN_TEMPLATE_MODULE": module}
    env = {key: str(fd) for key, fd in fds.items()} | {"KILN_TEMPLATE_OF": slug}
    try:
        pid = native.spawn_init(NAMESPACES, [f"kiln: template {slug}"], env, list(fds.values()))
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
        if key in FD_VARIABLES and value:
            value = ",".join(f"#{position[int(fd)]}" for fd in value.split(","))
        entries.append(f"{key}={value}")
    strings = [*map(os.fsencode, argv), b"", *map(os.fsencode, entries)]
    return struct.pack("=Q", flags) + b"".join(s + b"\0" for s in strings)
