"""cgroup v2 driver: one unified hierarchy, kiln's subtree below its own (delegated) cgroup.

    <base>                       subtree_control += memory pids (cpu if offered)
    <base>/<instance>            subtree_control += the same
    <base>/<instance>/supervisor kiln's own processes, when <base> is not the root cgroup;
                                 cpu.weight SUPERVISOR_CPU_WEIGHT: the slots' inits, which
                                 enforce the runs' timeouts, never wait behind the runs
    <base>/<instance>/slot-...   one per slot generation
    <base>/<instance>/slot-.../test-<n>
                                 before Linux 6.12 (no memory.peak reset): a kept slot's test
                                 after its first, made and removed by the slot's init

"No internal processes": a non-root cgroup that has controllers enabled in subtree_control
cannot hold processes. Under systemd, kiln's processes sit in <base> (the service cgroup), so
setup moves them (the calling process and the pids the caller names, nothing else) into the
supervisor leaf first. The root cgroup is exempt, so there nothing is moved. Processes kiln did
not start are never moved: if any remain in <base>, setup fails and says so.
"""

from __future__ import annotations

import errno
import os

from kiln.sandbox import cgroupfs, cgroups
from kiln.sandbox.cgroups import CgroupError, LimitWrite, SlotCgroup, StatSource, TreeDriver

NEEDED = ("memory", "pids")  # what open_driver requires in <base>/cgroup.controllers
OPTIONAL = ("cpu",)  # enabled when offered; usage_usec in cpu.stat needs no controller
SUPERVISOR_CPU_WEIGHT = 10000  # the largest; each slot keeps the default, 100


class V2SlotCgroup(SlotCgroup):
    def __init__(self, name, paths, dir_fds, procs_fds, peak_resettable: bool):
        super().__init__(name, paths, dir_fds, procs_fds)
        # memory.peak is set back only for reads through the open file that wrote to it (Linux
        # 6.12; kiln-init reads and resets it through one kept descriptor). Before that kernel
        # it cannot be: a kept slot's tests after its first each run in a cgroup of their own
        # below the slot's (kiln-init kept.c), whose peak and counters start from 0
        self.peak_resettable = peak_resettable

    @property
    def test_cgroups(self) -> bool:
        return not self.peak_resettable

    def limit_writes(self, memory_max: int, pids_max: int, previous: tuple[int, int] | None) -> tuple[LimitWrite, ...]:
        writes = [LimitWrite(0, "memory.max", str(memory_max))]
        if cgroupfs.exists("memory.swap.max", self._dir_fds[0]):  # absent without swap accounting
            writes.append(LimitWrite(0, "memory.swap.max", "0"))
        if cgroupfs.exists("memory.oom.group", self._dir_fds[0]):  # one OOM kill takes the whole job
            writes.append(LimitWrite(0, "memory.oom.group", "1"))
        return (*writes, LimitWrite(0, "pids.max", str(pids_max)))

    def peak_resets(self) -> tuple[LimitWrite, ...]:
        # any non-empty string sets it back (cgroup-v2.rst)
        return (LimitWrite(0, "memory.peak", "reset"),) if self.peak_resettable else ()

    def test_cgroup_parent_writes(self, memory_max: int, pids_max: int) -> tuple[LimitWrite, ...]:
        if not self.test_cgroups:
            return ()
        # the controllers whose files a test's cgroup needs: memory (its limit, peak, OOM kills)
        # and pids (its limit, its hits); cpu.stat and cpu.pressure are in every cgroup
        enable = LimitWrite(0, "cgroup.subtree_control", " ".join(f"+{c}" for c in NEEDED))
        return (enable, *self.limit_writes(memory_max, pids_max, previous=None))

    def job_limit_files(self) -> tuple[tuple[str, int, str], ...]:
        return (("memory", 0, "memory.max"), ("pids", 0, "pids.max"))

    def stat_sources(self) -> tuple[StatSource, ...]:
        return (
            StatSource("memory_peak", 0, "memory.peak"),  # kernel >= 5.19
            StatSource("cpu", 0, "cpu.stat", key="usage_usec", divisor=1000),
            StatSource("oom_kills", 0, "memory.events", key="oom_kill"),
            StatSource("pids_hits", 0, "pids.events", key="max"),
            # the time every runnable task of the slot waited for a CPU (Linux 5.13): kiln-init
            # moves the run's deadline by it (starve.c)
            StatSource("cpu_starved", 0, "cpu.pressure", key="full", divisor=1000),
        )


class V2Driver(TreeDriver):
    name = "v2"

    def __init__(self, base: str, instance: str, log):
        """base: kiln's own cgroup directory, computed before anything moves (open_driver)."""
        super().__init__([base], instance, log)
        self.base = base
        self.instance_dir = self.instance_dirs[0]
        self.supervisor = os.path.join(self.instance_dir, cgroups.SUPERVISOR)
        self.peak_resettable = False  # until setup has looked (_prepare)

    test_cgroups = V2SlotCgroup.test_cgroups  # the slots' rule, told by the driver at setup

    def is_root(self) -> bool:
        """The root cgroup has no cgroup.type (true also inside a cgroup namespace, whose "/" is
        an ordinary cgroup that the no-internal-processes rule applies to)."""
        return not os.path.exists(os.path.join(self.base, "cgroup.type"))

    def _prepare(self, move_pids: list[int]) -> None:
        """After setup made <base>/<instance> and removed leftovers: move kiln into its leaf
        (unless <base> is the root cgroup), then enable controllers, parent first."""
        if not self.is_root():
            ours = {os.getpid(), *move_pids}
            others = [p for p in cgroupfs.read_procs(path=os.path.join(self.base, "cgroup.procs")) if p not in ours]
            if others:  # before anything moves: a refused start leaves kiln where it was
                raise CgroupError(self._explain(self.base, list(NEEDED), OSError(errno.EBUSY, os.strerror(errno.EBUSY)), others))
            cgroupfs.make_cgroup(self.supervisor, exist_ok=True)
            self._move_own_processes([os.getpid(), *move_pids])
        self._enable_controllers(self.base)
        self._enable_controllers(self.instance_dir)
        self.peak_resettable = cgroupfs.memory_peak_resets(self.instance_dir)  # the slots' memory.peak is the same file
        weight = os.path.join(self.supervisor, "cpu.weight")
        if not self.is_root() and (cgroupfs.read_file(weight) or str(SUPERVISOR_CPU_WEIGHT)).strip() != str(SUPERVISOR_CPU_WEIGHT):
            cgroupfs.write_file(weight, SUPERVISOR_CPU_WEIGHT)

    def _move_own_processes(self, pids: list[int]) -> None:
        """Move the given pids that are still in <base> into the supervisor leaf."""
        in_base = set(cgroupfs.read_procs(path=os.path.join(self.base, "cgroup.procs")))
        for pid in dict.fromkeys(pids):
            if pid in in_base:
                cgroupfs.write_file(os.path.join(self.supervisor, "cgroup.procs"), pid)

    def _enable_controllers(self, directory: str) -> None:
        offered = (cgroupfs.read_file(os.path.join(directory, "cgroup.controllers")) or "").split()
        enabled = (cgroupfs.read_file(os.path.join(directory, "cgroup.subtree_control")) or "").split()
        control = os.path.join(directory, "cgroup.subtree_control")
        wanted = [c for c in NEEDED if c in offered and c not in enabled]
        if wanted:
            try:
                cgroupfs.write_file(control, " ".join(f"+{c}" for c in wanted))
            except OSError as error:
                raise CgroupError(self._explain(directory, wanted, error)) from None
        for controller in OPTIONAL:
            if controller in offered and controller not in enabled:
                try:
                    cgroupfs.write_file(control, f"+{controller}")
                except OSError as error:
                    self.log.warning("cgroup controller not enabled", controller=controller, cgroup=directory, error=str(error))

    def _explain(self, directory: str, wanted: list[str], error: OSError, others: list[int] | None = None) -> str:
        text = f"cannot enable {' '.join(wanted)} in {directory}/cgroup.subtree_control: {error.strerror or error}"
        if error.errno == errno.EBUSY:
            others = others or cgroupfs.read_procs(path=os.path.join(directory, "cgroup.procs"))
            text += (
                f"; the cgroup still holds processes kiln did not start ({' '.join(map(str, others))}), "
                f"and a cgroup with controllers enabled for its children may hold none. "
                f"Give kiln a cgroup of its own: {cgroups.DELEGATE_HINT}"
            )
        return text

    def _make_slot(self, name, paths, dir_fds, procs_fds) -> SlotCgroup:
        return V2SlotCgroup(name, paths, dir_fds, procs_fds, self.peak_resettable)

    def _removable_extras(self) -> tuple[str, ...]:
        return (self.supervisor,)  # stays while kiln is in it; the next start reuses it
