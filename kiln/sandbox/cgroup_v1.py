"""cgroup v1 driver: kiln's subtree in each of the memory, pids and cpuacct hierarchies.

    <memory base>/<instance>/slot-...   memory.limit_in_bytes, memsw, oom_control, max usage
    <pids base>/<instance>/slot-...     pids.max, pids.events
    <cpuacct base>/<instance>/slot-...  cpuacct.usage (cpu,cpuacct may be one co-mounted hierarchy)

v1 has no "no internal processes" rule and no cgroup.kill: nothing is moved at setup, and
processes are killed by pid (cgroups.kill_members).
"""

from __future__ import annotations

from kiln.sandbox import cgroups
from kiln.sandbox.cgroups import CgroupStats, SlotCgroup, TreeDriver

REQUIRED = ("memory", "pids", "cpuacct")


class V1Slot(SlotCgroup):
    def __init__(self, name, paths, dir_fds, procs_fds, hierarchy_of: dict[str, int]):
        super().__init__(name, paths, dir_fds, procs_fds)
        self._hierarchy_of = hierarchy_of  # controller -> index into dir_fds

    def _dir(self, controller: str) -> int:
        return self._dir_fds[self._hierarchy_of[controller]]

    def _write_limits(self, memory_max: int, pids_max: int) -> None:
        memory = self._dir("memory")
        if cgroups.exists("memory.memsw.limit_in_bytes", memory):
            # memory + swap = memory: no swap. The kernel refuses a memsw limit below
            # memory.limit_in_bytes, so the one that grows is written first: the memory limit
            # on a fresh cgroup (both unlimited) or when lowering, memsw when raising.
            order = ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
            if self.limits is not None and memory_max > self.limits[0]:
                order.reverse()
            for name in order:
                cgroups.write_file(name, memory_max, dir_fd=memory)
        else:
            cgroups.write_file("memory.limit_in_bytes", memory_max, dir_fd=memory)
            cgroups.write_file("memory.swappiness", 0, dir_fd=memory)  # no swap accounting: at least avoid swapping
        cgroups.write_file("pids.max", pids_max, dir_fd=self._dir("pids"))

    def stats(self) -> CgroupStats:
        memory, pids = self._dir("memory"), self._dir("pids")
        return CgroupStats(
            memory_peak_bytes=cgroups.read_int("memory.max_usage_in_bytes", memory),
            cpu_usage_ms=self.cpu_usage_ms(),
            # The oom_kill line exists since Linux 4.13; without it there is no exact counter.
            oom_kills=cgroups.parse_flat_keyed(cgroups.read_file("memory.oom_control", memory)).get("oom_kill", 0),
            pids_limit_hits=cgroups.parse_flat_keyed(cgroups.read_file("pids.events", pids)).get("max", 0),
        )


    def cpu_usage_ms(self) -> float | None:
        usage_ns = cgroups.read_int("cpuacct.usage", self._dir("cpuacct"))
        return usage_ns / 1e6 if usage_ns is not None else None


class V1Driver(TreeDriver):
    name = "v1"

    def __init__(self, bases: dict[str, str], instance: str, log):
        """bases: controller -> kiln's own cgroup directory in that controller's hierarchy, for
        each of REQUIRED. Controllers that share a hierarchy share a directory."""
        missing = [c for c in REQUIRED if c not in bases]
        if missing:
            raise ValueError(f"V1Driver needs a base for {', '.join(missing)}")
        distinct = list(dict.fromkeys(bases[c] for c in REQUIRED))
        super().__init__(distinct, instance, log)
        self._hierarchy_of = {c: distinct.index(bases[c]) for c in REQUIRED}

    # setup (TreeDriver's) creates <base>/<instance> in each hierarchy and removes leftovers.
    # v1 has no "no internal processes" rule: nothing is moved, setup's move_pids are ignored.

    def _make_slot(self, name, paths, dir_fds, procs_fds) -> SlotCgroup:
        return V1Slot(name, paths, dir_fds, procs_fds, self._hierarchy_of)
