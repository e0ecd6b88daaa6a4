"""The zygote: a root, single-threaded master that keeps RUN_CONCURRENCY slots warm.

Its loop, like a pre-fork arbiter's: handle signals, reap dead slots, spawn slots up to the
target, wait for something to happen. A slot that reports ready is handed to the front (its
socket travels over SCM_RIGHTS); from then on the front and the slot talk directly, and the
zygote only learns that the slot died (SIGCHLD) and warms a replacement with the same index.
Each index is one record (slot.Index: its kept namespaces, recipe, backoff, the slot alive now); how
a slot is spawned and what its outcome means is its kind's (kiln/zygote/kinds.py); the language
templates are kept by one object (template.Templates).

The messages of the front <-> zygote channel are kiln/wire/messages.py's table.
"""

from __future__ import annotations

import os
import shutil
import select
import signal
import socket
import time
from dataclasses import dataclass

from kiln import native
from kiln.log import Log
from kiln.runtime import Runtime
from kiln.sandbox import libc, mounts, plan
from kiln.sandbox.cgroups import CgroupError, Driver, SlotCgroup
from kiln.wire import messages, protocol
from kiln.zygote import kinds, recipe, slot
from kiln.zygote.slot import Index, Slot
from kiln.wire.protocol import ProtocolError
from kiln.zygote.template import TemplateError, Templates
from kiln.zygote.title import set_title

PR_SET_CHILD_SUBREAPER = 36
STOP_TIMEOUT_S = 5.0
# a prestarted slot's command has settled when its cgroup used under SETTLE_CPU_SHARE of one CPU
# over SETTLE_STEP_S and none of its threads is runnable; watched for at most SETTLE_MAX_S after
# its spawn, past which it counts as settled: a slot the front kept taking for loading would serve
# as a plain one's fallback only, and block the language's next conversion (asked.LOADING_MAX)
SETTLE_STEP_S = 0.04
SETTLE_CPU_SHARE = 0.1
SETTLE_MAX_S = 30.0


@dataclass
class Zygote:
    runtime: Runtime
    front: socket.socket
    log: Log
    cgroups: Driver
    front_pidfd: int = -1  # the front's process: readable once it has exited
    stopping: bool = False
    lower: tuple[int, ...] = ()  # the clones of _hold_lower
    generation: int = 0
    front_lost: bool = False  # its end of the channel closed without a "shutdown"

    def run(self) -> int:
        """1 when it stopped because the front is gone (DESIGN: either side dying makes the other
        exit non-zero), else 0 (the front's "shutdown", or a stop signal the front got too)."""
        self._setup()
        while not self.stopping:
            self._reap()
            self._spawn_to_target()
            self._wait()
        self._stop_slots()
        if self.front_lost or (self.front_pidfd >= 0 and select.select([self.front_pidfd], [], [], 0)[0]):
            self.log.error("the front is gone: the zygote stopped its slots and exits 1")
            return 1
        return 0

    def _setup(self) -> None:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
        # the front is our parent: if it dies (even by SIGKILL), stop and clean up
        libc.set_parent_death_signal(signal.SIGTERM)
        self.wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda _s, _f: None)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_stop_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        set_title("kiln: zygote")
        if self.front_pidfd >= 0 and select.select([self.front_pidfd], [], [], 0)[0]:
            self.stopping = True  # the front died before the death signal was armed
        os.makedirs(self.runtime.staging_dir, 0o700, exist_ok=True)
        # the host's pid (/proc is the host's): rootless, the zygote is 1 of its own pid namespace
        self.host_pid = int(os.readlink("/proc/self"))
        if self.runtime.user_namespace is not None:  # then a /proc that names its processes
            libc.mount(None, "/", None, libc.MS_REC | libc.MS_PRIVATE)
            libc.mount("proc", "/proc", "proc", libc.MS_NOSUID | libc.MS_NODEV | libc.MS_NOEXEC)
        with open(self.runtime.zygote_pidfile, "w") as pidfile:
            pidfile.write(f"{self.host_pid}\n")
        self.lower = self._hold_lower()  # (after the /proc above: the probe's /proc/self is its own)
        self.indexes = {i: Index(i, self._spec(i)) for i in range(self.runtime.config.concurrency)}
        self.templates = Templates(self.runtime.workloads, self.log, on_failure=lambda slug: self._tell_front(messages.TemplateFailed(slug)))
        self.pidfd = os.pidfd_open(os.getpid())  # slots watch it: a pid means nothing in their namespace

    def _on_stop_signal(self, _sig, _frame) -> None:
        self.stopping = True

    def _spec(self, index: int) -> slot.SlotSpec:
        config = self.runtime.config
        uid = self.runtime.slot_uid(index)
        root = plan.root_plan(
            uid=uid,
            gid=uid,
            host_paths=self.runtime.host_paths,
            workspaces=str(config.workspace),
            tmp_size=max(w.tmp_size for w in self.runtime.workloads.values()),
            tmp_inodes=config.tmp_inodes,
            layers=self.runtime.layers_dir,
            in_user_namespace=self.runtime.in_user_namespace,
            lower_held=bool(self.lower),
        )
        return slot.SlotSpec(index=index, root=root, lower=self.lower)

    def _hold_lower(self) -> tuple[int, ...]:
        """The workspaces and the layers folders cloned once, read-only, for every slot's overlay
        to take its lower layers from (RootPlan.lower_held): no slot binds them nor detaches
        their binds. () where the kernel refuses such a clone as a layer (before 6.15)."""
        if not native.probe_lower(self.runtime.staging_dir):
            self.log.info("the workspaces and layers folders", held_as_clones=False, why="this kernel mounts no overlay on a detached clone (Linux 6.15+): each slot binds them")
            return ()
        clones: list[int] = []
        try:
            for folder in (str(self.runtime.config.workspace), self.runtime.layers_dir):
                clones.append(libc.clone_mount(folder, mounts.READONLY_ATTRS))
        except OSError as error:  # then each slot binds them, as on an older kernel
            for clone in clones:
                os.close(clone)
            self.log.info("the workspaces and layers folders", held_as_clones=False, why=str(error))
            return ()
        self.log.info("the workspaces and layers folders", held_as_clones=True)
        return tuple(clones)

    def _slots(self) -> list[Slot]:
        return [index.slot for index in self.indexes.values() if index.slot is not None]

    # -- reap -----------------------------------------------------------------------------
    def _reap(self) -> None:
        """A dead init ends its slot."""
        inits = {s.pid: s for s in self._slots()}
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.templates.reaped(pid)
            s = inits.get(pid)
            if s is not None:
                # the front says what a slot it closed unused is replaced by before it closes it:
                # read that first, after each reaped slot (a warm slot can exit on end-of-file
                # before the zygote woke for the message, or while it ended the slot before), or
                # the replacement is warmed for what the index served before, and the request
                # that traded the slot in waits for one that never comes
                while not self.stopping and select.select([self.front], [], [], 0)[0]:
                    self._from_front()
                if s.sock is not None:
                    error = native.start_error(pid)
                    self._warm_failed(s, f"cannot start the slot: {os.strerror(error)}" if error else "slot died while warming")
                self._end(s)

    def _backoff(self, index: Index, error: str, prestart: str | None = None) -> None:
        delay = index.backoff.failed()
        self.log.error("slot warm-up failed", slot_index=index.number, error=error, retry_in_s=round(delay, 2))
        self._tell_front(messages.WarmFailed(index.number, error, prestart))

    def _warm_failed(self, s: Slot, error: str) -> None:
        index = self.indexes[s.index]
        error = s.kind.on_failed(self, s, error)
        # a slot that copied its index's root image may have met a broken one: the next builds the
        # root afresh (an index's first slot fails before there is an image: nothing to drop)
        if index.root_image is not None:
            os.close(index.root_image)
            index.root_image = None
        self._backoff(index, error, s.kind.prestart)
        s.sock.close()
        s.sock = None
        _kill(s.pid)  # reaped by _reap, which ends the slot

    def _end(self, s: Slot) -> None:
        """The slot's processes are all gone (its init was reaped): free its index."""
        self.indexes[s.index].slot = None
        if not self.cgroups.remove_slot(s.cgroup):
            self.log.error("slot cgroup left behind", slot_index=s.index, cgroup=s.cgroup.name)
        if s.killed:
            self._tell_front(messages.Ended(s.index, s.pid))

    # -- spawn ----------------------------------------------------------------------------
    def _spawn_to_target(self) -> None:
        now = time.monotonic()
        self._start_templates(now)
        for index in self.indexes.values():
            if index.slot is not None or index.backoff.not_before > now:
                continue
            if index.backoff.failures:  # after a failure: the staging folder may have been removed
                os.makedirs(self.runtime.staging_dir, 0o700, exist_ok=True)
            self.generation += 1
            try:
                # named per zygote and generation: a crashed predecessor's may still be draining
                cgroup = self.cgroups.create_slot(f"slot-{index.number}-{self.host_pid}-{self.generation}")
            except (OSError, CgroupError) as error:
                self._backoff(index, f"cannot create the slot's cgroup: {error}")
                continue
            try:
                kind, pid, sock = self._spawn(index, cgroup)
            except OSError as error:
                self.cgroups.remove_slot(cgroup)
                self._backoff(index, f"cannot start the slot: {error}")
                continue
            # the slot has its own copies: the zygote keeps none (6 a slot on v1, which every
            # later slot would inherit, and 256 slots would take it past 1024 descriptors); it
            # removes the cgroup by path
            cgroup.close()
            index.slot = Slot(index=index.number, pid=pid, sock=sock, started=now, cgroup=cgroup, kind=kind)

    def _spawn(self, index: Index, cgroup: SlotCgroup) -> tuple[kinds.Plain, int, socket.socket]:
        """A slot of the index's next kind; a template that cannot fork it is ended, and the
        slot spawned as a prestarted one instead."""
        kind = kinds.kind_for(self, index)
        try:
            return kind, *kind.spawn(self, index, cgroup)
        except TemplateError as error:
            self.templates.failed(kind.template, str(error))
            kind = kinds.Prestarted(kind.workload)
            return kind, *kind.spawn(self, index, cgroup)

    def _start_templates(self, now: float) -> None:
        """Every language whose workspace has a template gets one, once an index has a root
        image to copy (its first slot built it)."""
        with_image = [index for index in self.indexes.values() if index.root_image is not None]
        if with_image:
            first = min(with_image, key=lambda index: index.number)
            self.templates.start_missing(first.root_image, first.recipe, self.pidfd, now, self.lower)

    def recipe_of(self, index: Index, cgroup: SlotCgroup) -> int:
        """The memfd of the index's kiln-init recipe, compiled for its first slot."""
        if index.recipe is None:
            index.recipe = recipe.sealed_memfd(recipe.compile_recipe(index.number, index.spec.root, self.runtime, cgroup))
        return index.recipe

    # -- wait -----------------------------------------------------------------------------
    def _wait(self) -> None:
        warming = {s.sock: s for s in self._slots() if s.sock is not None}
        templates = self.templates.sockets()
        timeout = self._next_backoff_in()
        if any(s.settle is not None for s in self._slots()):
            timeout = SETTLE_STEP_S if timeout is None else min(timeout, SETTLE_STEP_S)
        readable, _, _ = select.select([self.wake_r, self.front, *warming, *templates], [], [], timeout)
        for source in readable:
            if source == self.wake_r:
                _drain(self.wake_r)
            elif source is self.front:
                self._from_front()
            elif source in templates:
                self.templates.heard(templates[source])
            else:
                self._from_slot(warming[source])
        self._watch_settling()

    def _watch_settling(self) -> None:
        """Each prestarted slot whose command is still starting: settled once its CPU is quiet."""
        now = time.monotonic()
        for s in self._slots():
            if s.settle is None or now - s.settle[0] < SETTLE_STEP_S:
                continue
            since, used = s.settle
            cpu = s.cgroup.cpu_ms()
            quiet = cpu is not None and cpu - used < SETTLE_CPU_SHARE * (now - since) * 1000 and not s.cgroup.any_runnable()
            if quiet or cpu is None or now - s.started > SETTLE_MAX_S:
                s.settle = None
                self._tell_front(messages.Settled(s.index, s.pid, s.kind.prestart, round(((since if quiet else now) - s.started) * 1000, 2)))
            else:
                s.settle = (now, cpu)

    def _next_backoff_in(self) -> float | None:
        waiting = [index.backoff.not_before for index in self.indexes.values() if index.slot is None and index.backoff.failures]
        waiting += self.templates.retry_times()
        return max(0.0, min(waiting) - time.monotonic()) if waiting else None

    def _from_front(self) -> None:
        try:
            frame = protocol.recv_frame(self.front, protocol.MAX_HEADER + 8)
        except (ProtocolError, OSError) as error:
            self.log.error("bad frame from the front", error=str(error))
            frame = None
        try:
            message = messages.decode(frame[0], messages.TO_ZYGOTE) if frame is not None else None
        except ProtocolError as error:
            self.log.error("bad message from the front", error=str(error))
            return
        match message:
            case None | messages.Shutdown():
                self.stopping = True
                self.front_lost = message is None
            case messages.Demand():
                self._demand(message.index, message.slug)
            case messages.Kill():
                self._kill_slot(message.index, message.pid)

    def _demand(self, number, slug) -> None:
        """The front gave slot `number` to a request for `slug` (None: one a prestarted slot
        cannot serve): warm its replacement for that language if the workspace prestarts."""
        if type(number) is not int or number not in self.indexes:
            self.log.error("bad demand from the front", index=repr(number))
            return
        workload = self.runtime.workloads.get(slug) if isinstance(slug, str) else None
        self.indexes[number].next_prestart = slug if workload is not None and workload.prestart_argv else None

    def _kill_slot(self, number, pid) -> None:
        """The front gave up on slot `number`'s run (its init stopped answering): every process
        of its cgroup and its init killed; the front hears "ended" once it is reaped."""
        s = self.indexes[number].slot if type(number) is int and number in self.indexes else None
        if s is None or s.pid != pid or not s.ready:
            self._tell_front(messages.Ended(number, pid))  # gone already
            return
        self.log.error("killing a slot that outstayed its run", slot_index=number, pid=pid)
        s.killed = True
        self.cgroups.kill_slot(s.cgroup)
        _kill(s.pid)

    def _from_slot(self, s: Slot) -> None:
        index = self.indexes[s.index]
        fds: list[int] = []
        try:
            frame = protocol.recv_frame(s.sock, protocol.MAX_HEADER + 8, fds)
        except (ProtocolError, OSError) as error:
            frame = ({"op": "failed", "error": f"bad frame from the slot: {error}"}, [])
        header = frame[0] if frame is not None else {"op": "failed", "error": "slot exited while warming"}
        if header.get("op") == "ready" and header.get(protocol.READY_ROOT_IMAGE) and len(fds) == 1 and index.root_image is None:
            index.root_image = fds.pop()
        for fd in fds:  # none expected
            os.close(fd)
        if header.get("op") == "ready":
            self._hand_over(s)
        else:
            self._warm_failed(s, str(header.get("error", header)))

    def _hand_over(self, s: Slot) -> None:
        index = self.indexes[s.index]
        s.ready = True
        index.backoff.reset()
        s.kind.on_ready(self, s)
        if s.kind.prestart is not None and not s.kind.forked:  # its command is still starting
            cpu = s.cgroup.cpu_ms()
            s.settle = (time.monotonic(), cpu) if cpu is not None else None
        self._tell_front(messages.SlotWarm(s.index, s.pid, s.kind.prestart, round((time.monotonic() - s.started) * 1000, 2), s.settle is not None), fds=(s.sock.fileno(),))
        s.sock.close()
        s.sock = None
        if not index.ever_ready:
            index.ever_ready = True
            if all(i.ever_ready for i in self.indexes.values()):
                self._tell_front(messages.AllReady())

    def _tell_front(self, message: messages.ToFront, fds: tuple[int, ...] = ()) -> None:
        try:
            protocol.send_frame(self.front, messages.encode(message), fds=fds)
        except OSError:
            self.stopping = self.front_lost = True  # the front is gone

    # -- stop -----------------------------------------------------------------------------
    def _stop_slots(self) -> None:
        self.templates.close_all()
        for s in self._slots():
            _kill(s.pid)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.005)
        for s in self._slots():
            self.cgroups.remove_slot(s.cgroup)
            self.indexes[s.index].slot = None
        self.cgroups.teardown()
        shutil.rmtree(self.runtime.layers_dir, ignore_errors=True)  # the judge's builds
        for remove, path in ((os.unlink, self.runtime.zygote_pidfile), (os.rmdir, self.runtime.staging_dir), (os.rmdir, self.runtime.runtime_dir)):
            try:
                remove(path)
            except OSError:
                pass  # gone already, or a folder an operator put something in: leave it


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass
