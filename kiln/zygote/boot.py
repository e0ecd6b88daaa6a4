"""Starting the zygote: a fresh interpreter, not a fork of `kiln serve`.

A fork of `kiln serve` would carry everything serve needed to start: ~10.7 MiB of anonymous
memory (the languages resolved through subprocesses, the configuration's parsers, a heap
fragmented by both) and `threading`, imported by `subprocess`. A fresh interpreter, started
without `site`, imports what the zygote runs and nothing else: ~9 MiB, one thread. (When slots
were forks of the zygote, this also took ~0.4 ms of CPU off every run; they are spawned now,
kiln/native/spawn.c, and one thread is what that spawn needs: it borrows the zygote's memory
until its exec.)

serve hands the zygote what it has built (the runtime, the log, the cgroup driver, the zygote's
end of the front's channel) as one pickle in a memfd; the descriptors they hold are inherited
at the same numbers. Nothing else crosses: every other descriptor of serve is close-on-exec.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from kiln import native
from kiln.log import Log
from kiln.runtime import Runtime
from kiln.sandbox import libc
from kiln.sandbox.cgroups import Driver

# -S: no site (its imports alone are ~2 MiB a slot would carry); -I: no PYTHON* variables, no
# user site. The package's own folder and the paths serve imports from are given instead.
BOOT = "import sys; sys.path[:] = sys.argv[2:]; from kiln.zygote.boot import main; main(int(sys.argv[1]))"
PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)


def import_paths() -> list[str]:
    """Where the zygote imports from: kiln's own folder, then serve's path (stdlib, the
    environment's site-packages), in serve's order."""
    return list(dict.fromkeys([PACKAGE_ROOT, *filter(None, sys.path)]))


@dataclass(frozen=True)
class Handover:
    runtime: Runtime
    log: Log
    cgroups: Driver
    front_fd: int  # the zygote's end of the front's channel
    front_pidfd: int  # the front's process (its pid says nothing where the zygote is 1 of a pid namespace)


def start(runtime: Runtime, log: Log, cgroups: Driver) -> tuple[int, socket.socket]:
    """In `kiln serve`, before any thread exists: the zygote's pid and the front's end of the
    channel between them."""
    front_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    state = os.memfd_create("kiln-zygote", os.MFD_CLOEXEC)
    front_pidfd = os.pidfd_open(os.getpid())
    with open(state, "wb", closefd=False) as handover:
        pickle.dump(Handover(runtime, log, cgroups, zygote_end.fileno(), front_pidfd), handover)
    inherited = (zygote_end.fileno(), state, front_pidfd)
    argv = [sys.executable, "-I", "-S", "-c", BOOT, str(state), *import_paths()]
    sys.stdout.flush()
    sys.stderr.flush()
    # rootless, the zygote is the first process of a pid namespace kiln's user namespace owns
    # (only there may kiln mount a /proc, as a language template's root has one), in a mount
    # namespace of its own to mount that /proc in (a clone, not unshare: after
    # unshare(CLONE_NEWPID) serve could start no thread)
    flags = libc.CLONE_NEWPID | libc.CLONE_NEWNS if runtime.user_namespace is not None else 0
    pid = native.spawn(flags, sys.executable, argv, dict(os.environ), list(inherited))
    zygote_end.close()
    os.close(state)
    os.close(front_pidfd)
    return pid, front_end


def main(state: int) -> None:
    """The zygote process, from BOOT."""
    with open(state, "rb") as file:
        file.seek(0)
        handover: Handover = pickle.load(file)
    for fd in (handover.front_fd, handover.front_pidfd):
        os.set_inheritable(fd, False)  # slots close what they do not keep; tasks never see these
    from kiln.zygote.zygote import Zygote  # noqa: PLC0415 - after the handover: one import error, one log line

    code = 70
    try:
        code = Zygote(handover.runtime, socket.socket(fileno=handover.front_fd), handover.log, handover.cgroups, handover.front_pidfd).run()
    except BaseException as error:  # noqa: BLE001 - log it, then exit: the front restarts us all
        import traceback  # noqa: PLC0415

        handover.log.error("the zygote failed", error=repr(error), traceback=traceback.format_exc())
    finally:
        os._exit(code)

