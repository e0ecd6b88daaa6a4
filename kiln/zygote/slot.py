"""A slot: warmed ahead of time, serves one job (or one judge request's tests, one after
another, where it can), then dies.

    zygote ── init = kiln-init (kiln/native), PID 1 of new pid, ipc, uts, cgroup and network
                     namespaces, in a private copy of its index's root image (a mount namespace
                     made by the index's first slot, then entered again: a read-only mount
                     tree keeps nothing a job could leave; a network namespace would: IPv6
                     flow labels that outlive their sockets, the stack's counters)

The zygote spawns init straight into those namespaces (clone with the zygote's memory shared
until the exec: no fork of a Python process; the zygote goes on without waiting for the exec)
and hands it the index's recipe: the plans, compiled by kiln.zygote.recipe. init finishes the
slot's root filesystem while warming (its own /tmp, /proc and upper layer), then waits on its
socket for its job (a kept slot: a judge request's tests, one after another); init.c has the order
of its steps.
The index's first slot builds the root image (everything read-only in the root) and hands it to
the zygote with its ready frame. A slot prestarted for a language that has a language template
(kiln.zygote.template) is cloned by that template instead, still as the zygote's child, and its
task is forked from the template's warm interpreter.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Protocol

from kiln import native
from kiln.runtime import Workload
from kiln.sandbox import libc
from kiln.sandbox.cgroups import SlotCgroup
from kiln.sandbox.plan import RootPlan
from kiln.zygote.backoff import Backoff
from kiln.zygote.start import Start
from kiln.zygote.template import Template

# No cgroup namespace of its own for the slot's init: it creates the task's process in the slot's
# cgroup (clone3 CLONE_INTO_CGROUP, kiln/native/vfork.h), which v2 with nsdelegate allows only
# from a namespace that sees both init's cgroup and the slot's, siblings below kiln's instance.
# The task unshares its own, rooted at the slot's cgroup (identity.c join_cgroups); init is out
# of the task's sight (its /proc shows only its own processes).
NAMESPACES = libc.CLONE_NEWPID | libc.CLONE_NEWIPC | libc.CLONE_NEWUTS | libc.CLONE_NEWNET
TITLE_ROOM = 96  # kiln-init writes its title over its argv[0]: room for the longest


@dataclass(frozen=True)
class SlotSpec:
    index: int
    root: RootPlan  # with the uid and gid of the slot's task
    # where root.lower_held: the zygote's clones of the workspaces and layers folders (0, 1 or 2)
    lower: tuple[int, ...] = ()


def spawn(
    spec: SlotSpec, cgroup: SlotCgroup, root_image: int | None, zygote: int, recipe: int, prestart: Workload | None = None, via: Template | None = None
) -> tuple[int, socket.socket]:
    """In the zygote: start warming a slot. Returns init's pid and the zygote's end of the
    slot's socket (handed to the front once the slot reports ready). `zygote` is a pidfd of the
    zygote (a pid would mean nothing inside the slot's pid namespace); `recipe`, a memfd of the
    index's recipe; `root_image`, the index's root image, once its first slot built it
    (None: this slot builds it, and sends it with its ready frame). With `prestart`, the slot is warmed for that language: its workspace
    mounted and its prestart command started, or with `via`, forked from the language's
    template (needs `root_image`; raises TemplateError if the template cannot)."""
    zygote_end, slot_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    # given a root image the slot starts in the zygote's mount namespace and leaves it at once
    flags = NAMESPACES | (libc.CLONE_NEWNS if root_image is None else 0)
    dirs, procs = cgroup.fd_groups()
    start = Start(slot_end.fileno(), zygote, recipe, root_image, dirs, procs, spec.lower, prestart=prestart.slug if prestart is not None else None)
    env = start.environment()
    title = f"kiln: slot {spec.index} warming".ljust(TITLE_ROOM)
    try:
        keep = [slot_end.fileno(), zygote, recipe, *([root_image] if root_image is not None else []), *cgroup.fds(), *spec.lower]
        pid = via.fork_slot(flags, [title], env, keep) if via is not None else native.start_init(flags, [title], env, keep)
    except BaseException:
        zygote_end.close()
        raise
    finally:
        slot_end.close()
    return pid, zygote_end


# --- the zygote's records: a live slot, and a slot index ---------------------------------------


class Kind(Protocol):
    """What a slot's kind says of it (kiln/zygote/kinds.py has the kinds)."""

    prestart: str | None
    forked: bool


@dataclass
class Slot:
    index: int
    pid: int  # init's
    sock: socket.socket | None  # the zygote's end, until handed to the front
    started: float
    cgroup: SlotCgroup
    kind: Kind
    ready: bool = False
    killed: bool = False  # by the front's request: the front hears when it is gone
    # a prestarted slot's command still starting: (when, its cgroup's CPU ms then), last looked at
    settle: tuple[float, float] | None = None


@dataclass
class Index:
    """One slot index (its slots run as uid RUN_UID_BASE + number): what its slots share and keep
    from one generation to the next, and the slot alive now."""

    number: int
    spec: SlotSpec
    # the language its next slot is prestarted for (None: a plain slot). The front names the
    # language of each request it gives a slot: its replacement follows the demand.
    next_prestart: str | None = None
    root_image: int | None = None  # its root image (a mount namespace), made by its first slot
    recipe: int | None = None  # memfd of its slots' kiln-init recipe
    backoff: Backoff = field(default_factory=Backoff)
    ever_ready: bool = False
    slot: Slot | None = None
