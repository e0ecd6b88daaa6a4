"""A slot: warmed by the zygote ahead of time, serves exactly one job, then dies.

    zygote ── init = PID 1 of new pid, ipc, uts and cgroup namespaces, in the network namespace
                     of its slot index, in a private copy of its index's template mount
                     namespace (both made by the index's first slot, then entered again: an
                     empty network namespace and a read-only mount tree keep nothing a job
                     could leave)

init finishes the slot's root filesystem while warming (its own /tmp, /proc and upper layer),
then waits on its socket for one job. The index's first slot builds the template (everything
read-only in the root) and hands it to the zygote with its ready frame.
"""

from __future__ import annotations

import os
import signal
import socket
from dataclasses import dataclass

from kiln import native
from kiln.runtime import Runtime, Workload
from kiln.sandbox import contain, identity, libc
from kiln.sandbox.cgroups import SlotCgroup
from kiln.sandbox.contain import SetupError
from kiln.sandbox.plan import RootPlan
from kiln.sandbox.prestart import PrestartedTask
from kiln.zygote import job, protocol
from kiln.zygote.protocol import ProtocolError
from kiln.zygote.title import set_title

NAMESPACES = libc.CLONE_NEWPID | libc.CLONE_NEWIPC | libc.CLONE_NEWUTS | libc.CLONE_NEWCGROUP


@dataclass(frozen=True)
class SlotSpec:
    index: int
    uid: int
    root: RootPlan
    # what the zygote handles or ignores (found once by the zygote, not by 64 syscalls a slot)
    zygote_signals: tuple[int, ...]


def job_frame_limit(runtime: Runtime) -> int:
    # solution, checker, asserts and stdin, each at most RUN_INPUT_MAX, plus the header
    return 4 * runtime.config.input_max + protocol.MAX_HEADER + 64


@dataclass(frozen=True)
class Kept:
    """Namespaces the zygote keeps per slot index, made by the index's first slot. None: make
    them (a new network namespace; the root built, its template sent with the ready frame)."""

    netns: int | None = None
    root: int | None = None  # the template mount namespace

    def fds(self) -> set[int]:
        return {fd for fd in (self.netns, self.root) if fd is not None}


def spawn(spec: SlotSpec, cgroup: SlotCgroup, runtime: Runtime, kept: Kept, zygote: int, prestart: Workload | None = None) -> tuple[int, socket.socket]:
    """In the zygote: start warming a slot. Returns init's pid and the zygote's end of the
    slot's socket (handed to the front once the slot reports ready). `zygote` is a pidfd of the
    zygote (a pid would mean nothing inside the slot's pid namespace). With `prestart`, the
    slot is warmed for that language: its workspace mounted and its prestart command started."""
    zygote_end, slot_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    # with a template the slot starts in the zygote's mount namespace and leaves it at once
    flags = NAMESPACES | (libc.CLONE_NEWNET if kept.netns is None else 0) | (libc.CLONE_NEWNS if kept.root is None else 0)
    pid = libc.fork_into_namespaces(flags)
    if pid == 0:
        code = 70
        try:
            _init(spec, cgroup, runtime, slot_end, zygote, kept, prestart)
            code = 0
        except BaseException as error:  # noqa: BLE001 - init must never fall back into the zygote's code
            os.write(2, f"kiln: slot {spec.index} failed: {error!r}\n".encode(errors="replace"))
        finally:
            os._exit(code)
    slot_end.close()
    return pid, zygote_end


TITLE_ROOM = 96  # kiln-init writes its title over its argv[0]: room for the longest


def spawn_native(spec: SlotSpec, cgroup: SlotCgroup, kept: Kept, zygote: int, recipe: int) -> tuple[int, socket.socket]:
    """In the zygote: start warming a plain slot whose init is kiln-init (kiln/native), spawned
    straight into its namespaces without a fork of the zygote. `recipe`: a memfd of the index's
    recipe (kiln.zygote.recipe); the rest as spawn()."""
    zygote_end, slot_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    flags = NAMESPACES | (libc.CLONE_NEWNET if kept.netns is None else 0) | (libc.CLONE_NEWNS if kept.root is None else 0)
    dirs, procs, home = cgroup.fd_groups()
    env = {"KILN_SOCK": slot_end.fileno(), "KILN_ZYGOTE": zygote, "KILN_RECIPE": recipe, "KILN_NETNS": kept.netns, "KILN_TEMPLATE": kept.root}
    env = {key: str(value) for key, value in env.items() if value is not None}
    env.update(KILN_CG_DIRS=_fd_list(dirs), KILN_CG_PROCS=_fd_list(procs), KILN_CG_HOME=_fd_list(home))
    title = f"kiln: slot {spec.index} warming".ljust(TITLE_ROOM)
    try:
        pid = native.spawn_init(flags, [title], env, [slot_end.fileno(), zygote, recipe, *kept.fds(), *cgroup.fds()])
    except BaseException:
        zygote_end.close()
        raise
    finally:
        slot_end.close()
    return pid, zygote_end


def _fd_list(fds: tuple[int, ...]) -> str:
    return ",".join(map(str, fds))


def _init(spec: SlotSpec, cgroup: SlotCgroup, runtime: Runtime, sock: socket.socket, zygote: int, kept: Kept, prestart: Workload | None) -> None:
    _become_init(spec.index, cgroup, sock, zygote, kept)
    _reset_signals(spec.zygote_signals)
    prestarted = None
    template = None
    try:
        if kept.root is None:
            template = contain.build_root(spec.root, runtime.staging_dir)
        else:
            contain.enter_root(kept.root)
            os.close(kept.root)
        contain.finish_root(spec.root)
        if prestart is not None:
            prestarted = job.start_prestarted(prestart, runtime, spec.uid, cgroup)
            if libc.has_exited(zygote):  # it died while the parent-death signal was re-armed
                os._exit(0)
        else:
            with contain.step("set cgroup limits"):  # most requests then find them written
                cgroup.set_limits(*runtime.common_limits)
        job.rehearse(runtime, spec.uid, prestart or next(iter(runtime.workloads.values())))
    except SetupError as error:
        protocol.send_frame(sock, {"op": "failed", "error": str(error)})
        return
    if template is None:
        protocol.send_frame(sock, {"op": "ready"})
    else:
        protocol.send_frame(sock, {"op": "ready", "template": True}, fds=(template,))
        os.close(template)
    set_title(f"kiln: slot {spec.index} warm" + (f" {prestart.slug}" if prestart else ""))
    _serve_one_job(spec, runtime, cgroup, sock, zygote, prestart, prestarted)


def _become_init(index: int, cgroup: SlotCgroup, sock: socket.socket, zygote: int, kept: Kept) -> None:
    """Leave the zygote behind: its descriptors, its signal handling, its session."""
    signal.set_wakeup_fd(-1)  # the zygote's wakeup pipe is not ours to write to
    # other slots' sockets, the front's channel, other indexes' namespaces
    libc.close_all_except({sock.fileno(), zygote, *cgroup.fds(), *kept.fds()})
    if kept.netns is not None:
        libc.setns(kept.netns, libc.CLONE_NEWNET)
        os.close(kept.netns)
    identity.set_parent_death_signal(signal.SIGKILL)
    if libc.has_exited(zygote):  # the zygote died before the signal was armed
        os._exit(0)
    # The zygote keeps a full bounding set: kiln-init, which it execs as root, needs its
    # capabilities after the exec. An empty one here: no exec of the job's can gain any back.
    identity.drop_bounding_set()
    # A session of the slot's own: kill(0, SIGCONT) from a task, allowed within a session
    # whatever the uid, would otherwise reach kiln's processes and the other slots.
    os.setsid()
    set_title(f"kiln: slot {index} warming")


def _reset_signals(zygote_signals: tuple[int, ...]) -> None:
    """Every signal to its default action, as the task must start with (it inherits what init
    ignores): those the zygote handles or ignores are all that is not. init handles none: as
    PID 1 of its namespace, it then receives no signal from the run's processes, which share
    its uid while the job runs. It keeps ignoring libc.INIT_IGNORED_SIGNALS (a closed socket
    is an error, not a death); libc.spawn gives the task their default back."""
    libc.reset_signal_dispositions(s for s in zygote_signals if s not in libc.INIT_IGNORED_SIGNALS)


def _serve_one_job(spec: SlotSpec, runtime: Runtime, cgroup: SlotCgroup, sock: socket.socket, zygote: int, prestart: Workload | None, prestarted: PrestartedTask | None) -> None:
    try:
        frame = protocol.recv_frame(sock, job_frame_limit(runtime))
        if frame is None:
            return  # the front closed the slot unused (shutdown, or warmed for another language)
        work = job.parse(*frame, runtime)
        if prestart is not None and not job.fits_prestarted(work, prestart):
            raise job.JobError(f"slot warmed for {prestart.slug} requests without stdin")
    except (ProtocolError, job.JobError) as error:
        protocol.send_frame(sock, {"op": "error", "error": str(error)})
        return
    title = f"kiln: slot {spec.index} busy {work.workload.slug}"
    set_title(title)
    if prestarted is not None:
        result = job.execute_prestarted(work, runtime, spec.uid, prestarted, cgroup, sock, title)
    else:
        result = job.execute(work, runtime, spec.uid, cgroup, sock, title, zygote)
    if result is not None:
        protocol.send_frame(sock, *result)
