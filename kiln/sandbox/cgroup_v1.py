"""cgroup v1 driver: kiln's subtree in each of the memory, pids and cpuacct hierarchies, and
cpu's where it is mounted.

    <memory base>/<instance>/slot-...   memory.limit_in_bytes, memsw, oom_control, max usage
    <pids base>/<instance>/slot-...     pids.max, pids.events
    <cpuacct base>/<instance>/slot-...  cpuacct.usage (cpu,cpuacct may be one co-mounted hierarchy)
    <cpu base>/<instance>/slot-...      nothing written: a run is one entity to the scheduler
                                        whatever number of processes it makes, so neither kiln's
                                        own processes (the slots' inits among them, in <cpu
                                        base>) nor the other runs wait behind a run's spinners

v1 has no "no internal processes" rule and no cgroup.kill: nothing is moved at setup, and
processes are killed by pid (cgroupfs.kill_members).
"""

from __future__ import annotations

from kiln.sandbox import cgroupfs
from kiln.sandbox.cgroups import LimitWrite, SlotCgroup, StatSource, TreeDriver

REQUIRED = ("memory", "pids", "cpuacct")
OPTIONAL = ("cpu",)  # used where mounted (cgroup_detect)


class V1SlotCgroup(SlotCgroup):
    def __init__(self, name, paths, dir_fds, procs_fds, hierarchy_of: dict[str, int]):
        super().__init__(name, paths, dir_fds, procs_fds)
        self._hierarchy_of = hierarchy_of  # controller -> index into dir_fds

    def limit_writes(self, memory_max: int, pids_max: int, previous: tuple[int, int] | None) -> tuple[LimitWrite, ...]:
        memory, pids = self._hierarchy_of["memory"], self._hierarchy_of["pids"]
        if cgroupfs.exists("memory.memsw.limit_in_bytes", self._dir_fds[memory]):
            # memory + swap = memory: no swap. The kernel refuses a memsw limit below
            # memory.limit_in_bytes, so the one that grows is written first: the memory limit
            # on a fresh cgroup (both unlimited) or when lowering, memsw when raising.
            order = ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
            if previous is not None and memory_max > previous[0]:
                order.reverse()
            writes = [LimitWrite(memory, name, str(memory_max)) for name in order]
        else:
            # no swap accounting: at least avoid swapping
            writes = [LimitWrite(memory, "memory.limit_in_bytes", str(memory_max)), LimitWrite(memory, "memory.swappiness", "0")]
        return (*writes, LimitWrite(pids, "pids.max", str(pids_max)))

    def unlimit_writes(self) -> tuple[LimitWrite, ...]:
        memory, pids = self._hierarchy_of["memory"], self._hierarchy_of["pids"]
        swap = cgroupfs.exists("memory.memsw.limit_in_bytes", self._dir_fds[memory])
        # memsw first: the memory limit may never be above it
        files = [*(["memory.memsw.limit_in_bytes"] if swap else []), "memory.limit_in_bytes"]
        return (*(LimitWrite(memory, name, "-1") for name in files), LimitWrite(pids, "pids.max", "max"))

    def peak_resets(self) -> tuple[LimitWrite, ...]:
        memory = self._hierarchy_of["memory"]
        swap = cgroupfs.exists("memory.memsw.max_usage_in_bytes", self._dir_fds[memory])
        return (LimitWrite(memory, "memory.max_usage_in_bytes", "0"), *([LimitWrite(memory, "memory.memsw.max_usage_in_bytes", "0")] if swap else []))

    def job_limit_files(self) -> tuple[tuple[str, int, str], ...]:
        memory, pids = self._hierarchy_of["memory"], self._hierarchy_of["pids"]
        swap = cgroupfs.exists("memory.memsw.limit_in_bytes", self._dir_fds[memory])
        # lowering: the memory limit first (memsw may not go below it)
        files = [("memory", memory, "memory.limit_in_bytes"), *([("memory", memory, "memory.memsw.limit_in_bytes")] if swap else [])]
        return (*files, ("pids", pids, "pids.max"))

    def stat_sources(self) -> tuple[StatSource, ...]:
        memory, pids = self._hierarchy_of["memory"], self._hierarchy_of["pids"]
        return (
            StatSource("memory_peak", memory, "memory.max_usage_in_bytes"),
            StatSource("cpu", self._hierarchy_of["cpuacct"], "cpuacct.usage", divisor=1_000_000),
            # The oom_kill line exists since Linux 4.13; without it there is no exact counter.
            StatSource("oom_kills", memory, "memory.oom_control", key="oom_kill"),
            StatSource("pids_hits", pids, "pids.events", key="max"),
        )


class V1Driver(TreeDriver):
    name = "v1"

    def __init__(self, bases: dict[str, str], instance: str, log):
        """bases: controller -> kiln's own cgroup directory in that controller's hierarchy, for
        each of REQUIRED and those of OPTIONAL found. Controllers that share a hierarchy share a
        directory."""
        missing = [c for c in REQUIRED if c not in bases]
        if missing:
            raise ValueError(f"V1Driver needs a base for {', '.join(missing)}")
        used = [c for c in REQUIRED + OPTIONAL if c in bases]
        distinct = list(dict.fromkeys(bases[c] for c in used))
        super().__init__(distinct, instance, log)
        self._hierarchy_of = {c: distinct.index(bases[c]) for c in used}

    # setup (TreeDriver's) creates <base>/<instance> in each hierarchy and removes leftovers.
    # v1 has no "no internal processes" rule: nothing is moved, setup's move_pids are ignored.

    def _make_slot(self, name, paths, dir_fds, procs_fds) -> SlotCgroup:
        return V1SlotCgroup(name, paths, dir_fds, procs_fds, self._hierarchy_of)
