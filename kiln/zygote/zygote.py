"""The zygote: a root, single-threaded master that keeps RUN_CONCURRENCY slots warm.

Its loop, like a pre-fork arbiter's: handle signals, reap dead slots, spawn slots up to the
target, wait for something to happen. A slot that reports ready is handed to the front (its
socket travels over SCM_RIGHTS); from then on the front and the slot talk directly, and the
zygote only learns that the slot died (SIGCHLD) and warms a replacement with the same index.

Messages to the front: {"op": "slot", "index", "pid"} + the slot's socket;
{"op": "warm_failed", "index", "error"}; {"op": "ready"} once every slot was warm once;
{"op": "ended", "index", "pid"} once a slot the front asked to kill is gone.
From the front: {"op": "demand", "index", "slug"} (the language a slot's replacement is warmed
for); {"op": "kill", "index", "pid"} (a slot whose run outstayed its timeout: its whole cgroup
and its init are killed from here, beyond anything the run can do); {"op": "shutdown"}, or
end-of-file when the front is gone; both stop the zygote.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import time
from dataclasses import dataclass, field

from kiln.log import Log
from kiln.runtime import Runtime
from kiln.sandbox import libc, plan
from kiln.sandbox.cgroups import CgroupError, Driver, SlotCgroup
from kiln.zygote import protocol, recipe, slot, template
from kiln.zygote.protocol import ProtocolError
from kiln.zygote.title import set_title

PR_SET_CHILD_SUBREAPER = 36
MIGRATION_KEEPALIVE_S = 0.05  # see Driver.keep_migrations_fast
MAX_BACKOFF_S = 5.0
STOP_TIMEOUT_S = 5.0


@dataclass
class Slot:
    index: int
    pid: int  # init's
    sock: socket.socket | None  # the zygote's end, until handed to the front
    started: float
    cgroup: SlotCgroup
    prestart: str | None = None  # the language it is warmed for, if any
    forked: bool = False  # its task forked from the language's template
    ready: bool = False
    killed: bool = False  # by the front's request: the front hears when it is gone


@dataclass
class Backoff:
    failures: int = 0
    not_before: float = 0.0

    def failed(self) -> float:
        """One more failure: the next try waits twice as long as the last (at most
        MAX_BACKOFF_S). Returns that wait in seconds."""
        self.failures += 1
        delay = min(MAX_BACKOFF_S, 0.05 * 2**self.failures)
        self.not_before = time.monotonic() + delay
        return delay


@dataclass
class Zygote:
    runtime: Runtime
    front: socket.socket
    log: Log
    cgroups: Driver
    slots: dict[int, Slot] = field(default_factory=dict)
    backoff: dict[int, Backoff] = field(default_factory=dict)
    ever_ready: set[int] = field(default_factory=set)
    netns: dict[int, int] = field(default_factory=dict)  # slot index -> its network namespace
    roots: dict[int, int] = field(default_factory=dict)  # slot index -> its template mount namespace
    recipes: dict[int, int] = field(default_factory=dict)  # slot index -> memfd of its slots' recipe
    # slot index -> the language its next slot is prestarted for (None: a plain slot). The front
    # names the language of each request it gives a slot: its replacement follows the demand.
    kinds: dict[int, str | None] = field(default_factory=dict)
    templates: dict[str, template.Template] = field(default_factory=dict)  # slug -> its template
    template_backoff: dict[str, Backoff] = field(default_factory=dict)
    stopping: bool = False
    generation: int = 0

    def run(self) -> int:
        self._setup()
        while not self.stopping:
            self._reap()
            self._spawn_to_target()
            self._wait()
        self._stop_slots()
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
        if os.getppid() == 1:  # the front died before the death signal was armed
            self.stopping = True
        os.makedirs(self.runtime.staging_dir, 0o700, exist_ok=True)
        with open(self.runtime.zygote_pidfile, "w") as pidfile:
            pidfile.write(f"{os.getpid()}\n")
        self.specs = {i: self._spec(i) for i in range(self.runtime.config.concurrency)}
        self.template_slugs = tuple(slug for slug, w in self.runtime.workloads.items() if w.template_argv is not None)
        self.pidfd = os.pidfd_open(os.getpid())  # slots watch it: a pid means nothing in their namespace

    def _on_stop_signal(self, _sig, _frame) -> None:
        self.stopping = True

    def _spec(self, index: int) -> slot.SlotSpec:
        config = self.runtime.config
        uid = config.uid_base + index
        root = plan.root_plan(
            uid=uid,
            gid=uid,
            host_paths=self.runtime.host_paths,
            workspaces=str(config.workspace),
            tmp_size=max(w.tmp_size for w in self.runtime.workloads.values()),
            tmp_inodes=config.tmp_inodes,
        )
        return slot.SlotSpec(index=index, root=root)

    # -- reap -----------------------------------------------------------------------------
    def _reap(self) -> None:
        """A dead init ends its slot."""
        inits = {s.pid: s for s in self.slots.values()}
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            ended = next((t for t in self.templates.values() if t.pid == pid), None)
            if ended is not None:
                self._end_template(ended, "it exited")
            s = inits.get(pid)
            if s is not None:
                if s.sock is not None:
                    self._warm_failed(s, "slot died while warming")
                self._end(s)

    def _backoff(self, index: int, error: str) -> None:
        delay = self.backoff.setdefault(index, Backoff()).failed()
        self.log.error("slot warm-up failed", slot=index, error=error, retry_in_s=round(delay, 2))
        self._tell_front({"op": "warm_failed", "index": index, "error": error})

    def _warm_failed(self, s: Slot, error: str) -> None:
        if s.prestart is not None:  # retried as a plain slot: one broken prestart stops no run
            self.kinds[s.index] = None
            error = f"prestarting {s.prestart}: {error}"
        if s.forked and s.prestart in self.templates:  # started again after a pause
            self._end_template(self.templates[s.prestart], error)
        # a slot that copied its index's template may have met a broken one: the next builds the
        # root afresh (an index's first slot fails before there is a template: nothing to drop)
        root = self.roots.pop(s.index, None)
        if root is not None:
            os.close(root)
        self._backoff(s.index, error)
        s.sock.close()
        s.sock = None
        _kill(s.pid)  # reaped by _reap, which ends the slot

    def _end(self, s: Slot) -> None:
        """The slot's processes are all gone (its init was reaped): free its index."""
        del self.slots[s.index]
        if not self.cgroups.remove_slot(s.cgroup):
            self.log.error("slot cgroup left behind", slot=s.index, cgroup=s.cgroup.name)
        if s.killed:
            self._tell_front({"op": "ended", "index": s.index, "pid": s.pid})

    # -- spawn ----------------------------------------------------------------------------
    def _spawn_to_target(self) -> None:
        now = time.monotonic()
        self._start_templates(now)
        for index, spec in self.specs.items():
            if index in self.slots or self.backoff.get(index, Backoff()).not_before > now:
                continue
            if self.backoff.get(index):  # after a failure: the staging folder may have been removed
                os.makedirs(self.runtime.staging_dir, 0o700, exist_ok=True)
            self.generation += 1
            try:
                # named per zygote and generation: a crashed predecessor's may still be draining
                cgroup = self.cgroups.create_slot(f"slot-{index}-{os.getpid()}-{self.generation}")
            except (OSError, CgroupError) as error:
                self._backoff(index, f"cannot create the slot's cgroup: {error}")
                continue
            kind = self.kinds.get(index)
            try:
                pid, sock, forked = self._spawn(spec, cgroup, kind)
            except OSError as error:
                self.cgroups.remove_slot(cgroup)
                self._backoff(index, f"cannot start the slot: {error}")
                continue
            # the slot has its own copies: the zygote keeps none (6 a slot on v1, which every
            # later slot would inherit, and 256 slots would take it past 1024 descriptors); it
            # removes the cgroup by path
            cgroup.close()
            self.slots[index] = Slot(index=index, pid=pid, sock=sock, started=now, cgroup=cgroup, prestart=kind, forked=forked)
            if index not in self.netns:
                self._keep_netns(index, pid)

    def _spawn(self, spec: slot.SlotSpec, cgroup: SlotCgroup, kind: str | None) -> tuple[int, socket.socket, bool]:
        """A slot spawned, prestarted for `kind` if not None: forked from its template when
        there is one ready and the index has both kept namespaces (True), else as usual."""
        kept = slot.Kept(netns=self.netns.get(spec.index), root=self.roots.get(spec.index))
        recipe_fd = self._recipe(spec.index, cgroup)
        workload = self.runtime.workloads[kind] if kind else None
        via = self.templates.get(kind) if kind else None
        if via is not None and via.ready and kept.netns is not None and kept.root is not None:
            try:
                return *slot.spawn(spec, cgroup, kept, self.pidfd, recipe_fd, workload, via=via), True
            except template.TemplateError as error:
                self._end_template(via, str(error))
        return *slot.spawn(spec, cgroup, kept, self.pidfd, recipe_fd, workload), False

    def _start_templates(self, now: float) -> None:
        """Every language whose workspace has a template gets one, once an index has a root to
        copy (its first slot built it)."""
        if not self.roots:
            return
        index = min(self.roots)
        for slug in self.template_slugs:
            if slug in self.templates or self.template_backoff.get(slug, Backoff()).not_before > now:
                continue
            try:
                module = self.runtime.workloads[slug].template_module
                self.templates[slug] = template.start(slug, module, self.roots[index], self.pidfd, self.recipes[index])
            except OSError as error:
                self._template_backoff(slug, f"cannot start it: {error}")

    def _end_template(self, t: template.Template, why: str) -> None:
        """A template that failed is closed (killed) and started again after a pause; its
        language's slots are spawned as usual meanwhile."""
        if self.templates.get(t.slug) is t:
            del self.templates[t.slug]
            t.close()
            self._template_backoff(t.slug, why)

    def _template_backoff(self, slug: str, why: str) -> None:
        delay = self.template_backoff.setdefault(slug, Backoff()).failed()
        self.log.error("template failed", slug=slug, error=why, retry_in_s=round(delay, 2))

    def _recipe(self, index: int, cgroup: SlotCgroup) -> int:
        """The memfd of the index's kiln-init recipe, compiled for its first slot."""
        if index not in self.recipes:
            spec = self.specs[index]
            self.recipes[index] = recipe.sealed_memfd(recipe.compile_recipe(index, spec.root, self.runtime, cgroup))
        return self.recipes[index]

    # -- wait -----------------------------------------------------------------------------
    def _wait(self) -> None:
        warming = {s.sock: s for s in self.slots.values() if s.sock is not None}
        templates = {t.sock: t for t in self.templates.values()}
        timeout = self._next_backoff_in()
        if self.cgroups.name != "off":
            timeout = MIGRATION_KEEPALIVE_S if timeout is None else min(timeout, MIGRATION_KEEPALIVE_S)
            self.cgroups.keep_migrations_fast()
        readable, _, _ = select.select([self.wake_r, self.front, *warming, *templates], [], [], timeout)
        for source in readable:
            if source == self.wake_r:
                _drain(self.wake_r)
            elif source is self.front:
                self._from_front()
            elif source in templates:
                self._from_template(templates[source])
            else:
                self._from_slot(warming[source])

    def _keep_netns(self, index: int, pid: int) -> None:
        """The first slot of an index made a network namespace; its successors enter it
        instead of paying for a new one (creating and destroying a netns is the costliest part
        of a slot's namespaces). It stays empty between slots: lo down, no process, no socket."""
        try:
            self.netns[index] = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as error:
            self.log.warning("cannot keep the slot's network namespace", slot=index, error=str(error))

    def _next_backoff_in(self) -> float | None:
        waiting = [b.not_before for i, b in self.backoff.items() if i not in self.slots]
        waiting += [b.not_before for slug, b in self.template_backoff.items() if slug not in self.templates]
        return max(0.0, min(waiting) - time.monotonic()) if waiting else None

    def _from_front(self) -> None:
        try:
            frame = protocol.recv_frame(self.front, protocol.MAX_HEADER + 8)
        except (ProtocolError, OSError) as error:
            self.log.error("bad frame from the front", error=str(error))
            frame = None
        if frame is None or frame[0].get("op") == "shutdown":
            self.stopping = True
        elif frame[0].get("op") == "demand":
            self._demand(frame[0].get("index"), frame[0].get("slug"))
        elif frame[0].get("op") == "kill":
            self._kill_slot(frame[0].get("index"), frame[0].get("pid"))

    def _demand(self, index, slug) -> None:
        """The front gave slot `index` to a request for `slug` (None: one a prestarted slot
        cannot serve): warm its replacement for that language if the workspace prestarts."""
        if type(index) is not int or index not in self.specs:
            self.log.error("bad demand from the front", index=repr(index))
            return
        workload = self.runtime.workloads.get(slug) if isinstance(slug, str) else None
        self.kinds[index] = slug if workload is not None and workload.prestart_argv else None

    def _kill_slot(self, index, pid) -> None:
        """The front gave up on slot `index`'s run (its init stopped answering): every process
        of its cgroup and its init killed; the front hears "ended" once it is reaped."""
        s = self.slots.get(index) if type(index) is int else None
        if s is None or s.pid != pid or not s.ready:
            self._tell_front({"op": "ended", "index": index, "pid": pid})  # gone already
            return
        self.log.error("killing a slot that outstayed its run", slot=index, pid=pid)
        s.killed = True
        self.cgroups.kill_slot(s.cgroup)
        _kill(s.pid)

    def _from_slot(self, s: Slot) -> None:
        fds: list[int] = []
        try:
            frame = protocol.recv_frame(s.sock, protocol.MAX_HEADER + 8, fds)
        except (ProtocolError, OSError) as error:
            frame = ({"op": "failed", "error": f"bad frame from the slot: {error}"}, [])
        header = frame[0] if frame is not None else {"op": "failed", "error": "slot exited while warming"}
        if header.get("op") == "ready" and header.get("template") and len(fds) == 1 and s.index not in self.roots:
            self.roots[s.index] = fds.pop()
        for fd in fds:  # none expected
            os.close(fd)
        if header.get("op") == "ready":
            self._hand_over(s)
        else:
            self._warm_failed(s, str(header.get("error", header)))

    def _from_template(self, t: template.Template) -> None:
        why = t.heard()
        if why is not None:
            self._end_template(t, why)
        else:
            self.log.info("template ready", slug=t.slug, pid=t.pid)

    def _hand_over(self, s: Slot) -> None:
        s.ready = True
        self.backoff.pop(s.index, None)
        if s.forked:  # its template works
            self.template_backoff.pop(s.prestart, None)
        self._tell_front({"op": "slot", "index": s.index, "pid": s.pid, "prestart": s.prestart, "warm_ms": round((time.monotonic() - s.started) * 1000, 2)}, fds=(s.sock.fileno(),))
        s.sock.close()
        s.sock = None
        if s.index not in self.ever_ready:
            self.ever_ready.add(s.index)
            if len(self.ever_ready) == len(self.specs):
                self._tell_front({"op": "ready"})

    def _tell_front(self, header: dict, fds: tuple[int, ...] = ()) -> None:
        try:
            protocol.send_frame(self.front, header, fds=fds)
        except OSError:
            self.stopping = True  # the front is gone

    # -- stop -----------------------------------------------------------------------------
    def _stop_slots(self) -> None:
        for t in self.templates.values():
            t.close()
        for s in self.slots.values():
            _kill(s.pid)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.005)
        for s in self.slots.values():
            self.cgroups.remove_slot(s.cgroup)
        self.slots.clear()
        self.cgroups.teardown()
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
