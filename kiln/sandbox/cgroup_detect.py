"""Which cgroup driver kiln uses (RUN_CGROUP): v2 where kiln's cgroup offers memory and pids,
else v1 where the memory, pids and cpuacct hierarchies are mounted (and cpu's, if it is), else
none (said loudly).

read_own_view is the only function of kiln's cgroup code that reads the real /proc (open_driver,
read_scope_wanted, own_folders and own_v2_folder take its texts); the rest of this module decides
from the texts of /proc/self/mountinfo and /proc/self/cgroup, so unit tests can give it any host's.
"""

from __future__ import annotations

import os
import re

from kiln.sandbox.cgroupfs import read_file, read_procs
from kiln.sandbox.cgroups import DELEGATE_HINT, SUPERVISOR, CgroupError, Driver, NoCgroups, check_instance

# --- parsing (pure) ---


def parse_proc_self_cgroup(text: str) -> dict[str, str]:
    """/proc/self/cgroup -> {controller: path}; the v2 (unified) hierarchy's key is "".

    "4:memory:/a" -> {"memory": "/a"}; "2:cpu,cpuacct:/" -> {"cpu": "/", "cpuacct": "/"};
    "1:name=systemd:/" -> {"name=systemd": "/"}; "0::/system.slice/kiln.service" -> {"": ...}.
    """
    found: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            found.setdefault(controller, path)
    return found


# Super options of a v1 cgroup mount that are not controller names.
_V1_OPTIONS = {"rw", "ro", "none", "all", "noprefix", "clone_children", "xattr", "cpuset_v2_mode", "favordynmods"}


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def find_hierarchies(mountinfo_text: str) -> dict[str, str]:
    """/proc/self/mountinfo -> {controller: mount point}; a cgroup2 mount's key is "".

    Only mounts of a whole hierarchy count (mount root "/"): a bind of a subtree (a container's
    view) would need path translation kiln does not do. The first such mount of each wins.
    """
    found: dict[str, str] = {}
    for line in mountinfo_text.splitlines():
        fields = line.split(" ")
        if "-" not in fields:
            continue
        dash = fields.index("-")
        if len(fields) < dash + 4 or len(fields) < 5:
            continue
        root, mount_point = _unescape(fields[3]), _unescape(fields[4])
        fstype, super_options = fields[dash + 1], fields[dash + 3].split(",")
        if root != "/":
            continue
        if fstype == "cgroup2":
            found.setdefault("", mount_point)
        elif fstype == "cgroup":
            for option in super_options:
                if option in _V1_OPTIONS or ("=" in option and not option.startswith("name=")):
                    continue
                found.setdefault(option, mount_point)
    return found


def migrations_favoured(mountinfo_text: str) -> bool:
    """Whether a cgroup hierarchy is mounted with `favordynmods`. Every run moves its task into
    its slot's cgroup, under one kernel-wide lock whose fast path otherwise lapses within one
    RCU grace period of the last move: the next move then waits a grace period (3-8 ms on a
    small VM). The option keeps the fast path for good, for every hierarchy."""
    for line in mountinfo_text.splitlines():
        fields = line.split(" ")
        if "-" in fields:
            dash = fields.index("-")
            if len(fields) > dash + 3 and fields[dash + 1] in ("cgroup", "cgroup2") and "favordynmods" in fields[dash + 3].split(","):
                return True
    return False


def read_migrations_favoured() -> bool:
    with open("/proc/self/mountinfo") as mountinfo:
        return migrations_favoured(mountinfo.read())


# --- the decision ---


# open_driver runs at startup, long before any slot pivot_roots away the venv: the drivers'
# modules may be imported lazily.


def _v2_driver(hierarchies: dict[str, str], own: dict[str, str], instance: str, log) -> Driver:
    from kiln.sandbox.cgroup_v2 import V2Driver

    mount, path = hierarchies.get(""), own.get("")
    if mount is None:
        raise CgroupError(f"cgroup v2: no cgroup2 filesystem is mounted; {DELEGATE_HINT}")
    if path is None:
        raise CgroupError("cgroup v2: /proc/self/cgroup has no 0:: line (this process is in no v2 cgroup)")
    base = _v2_base(mount, path, instance)
    missing = _v2_missing(base)
    if missing:
        controllers = (read_file(os.path.join(base, "cgroup.controllers")) or "").split()
        raise CgroupError(
            f"cgroup v2: {base}/cgroup.controllers lacks {' and '.join(missing)} "
            f"(has: {' '.join(controllers) or 'nothing'}): kiln's cgroup is not delegated; {DELEGATE_HINT}"
        )
    if not os.access(base, os.W_OK):
        raise CgroupError(f"cgroup v2: {base} is not writable (read-only cgroup mount?); {DELEGATE_HINT}")
    return V2Driver(base, instance, log)


def _v2_base(mount: str, path: str, instance: str) -> str:
    """kiln's base cgroup: the one it runs in, or, for a kiln that already moved itself into its
    supervisor leaf, the one it was started in."""
    leaf = f"/{instance}/{SUPERVISOR}"
    if path.endswith(leaf):
        path = path[: -len(leaf)] or "/"
    return own_folder(mount, path)


def _v2_missing(base: str) -> list[str]:
    from kiln.sandbox.cgroup_v2 import NEEDED  # noqa: PLC0415

    controllers = (read_file(os.path.join(base, "cgroup.controllers")) or "").split()
    return [c for c in NEEDED if c not in controllers]


def scope_wanted(mode: str, instance: str, mountinfo_text: str, proc_self_cgroup_text: str, pid: int) -> str | None:
    """Why kiln cannot make its subtree where it was started on a cgroup v2 host, when a
    cgroup of its own (a systemd scope with Delegate=yes) would let it; None when it can, or
    when a scope would not help (v1 hosts, RUN_CGROUP=v1 or off).

    A login shell's session scope and a service without Delegate=yes hold processes kiln did not
    start (v2's no-internal-processes rule then forbids enabling controllers for children), or
    offer no memory and pids controllers at all.
    """
    if mode not in ("auto", "v2"):
        return None
    hierarchies = find_hierarchies(mountinfo_text)
    own = parse_proc_self_cgroup(proc_self_cgroup_text)
    if "" not in hierarchies or "" not in own or (mode == "auto" and "memory" in hierarchies):
        return None  # no v2, or a hybrid host whose memory hierarchy is v1's: kiln takes v1 there
    base = _v2_base(hierarchies[""], own[""], instance)
    if not os.path.exists(os.path.join(base, "cgroup.type")):
        return None  # the root cgroup: exempt from the rule, and every controller is there
    missing = _v2_missing(base)
    if missing:
        return f"{base} offers no {' and '.join(missing)} controller (not delegated)"
    others = [p for p in read_procs(path=os.path.join(base, "cgroup.procs")) if p != pid]
    if others:
        return f"{base} holds processes kiln did not start ({' '.join(map(str, others[:8]))}{' ...' if len(others) > 8 else ''})"
    return None


def read_own_view() -> tuple[str, str]:
    """The texts of /proc/self/mountinfo and /proc/self/cgroup, which every decision here takes."""
    with open("/proc/self/mountinfo") as mountinfo, open("/proc/self/cgroup") as own:
        return mountinfo.read(), own.read()


def own_v2_folder() -> str | None:
    """This process's cgroup folder in the v2 hierarchy, if one is mounted."""
    mountinfo_text, own_text = read_own_view()
    mount, path = find_hierarchies(mountinfo_text).get(""), parse_proc_self_cgroup(own_text).get("")
    return own_folder(mount, path) if mount and path else None


def read_scope_wanted(mode: str, instance: str) -> str | None:
    return scope_wanted(mode, instance, *read_own_view(), os.getpid())


def own_folder(mount: str, path: str) -> str:
    """A process's cgroup folder in the hierarchy mounted at `mount` (its path from /proc/self/cgroup)."""
    return os.path.normpath(os.path.join(mount, path.lstrip("/")))


def own_folders() -> list[str]:
    """This process's cgroup folders where kiln would make its own: in each v1 hierarchy kiln
    uses that is mounted, else in the v2 one. scripts/rootless.sh hands a subtree below them."""
    from kiln.sandbox.cgroup_v1 import OPTIONAL, REQUIRED

    mountinfo_text, own_text = read_own_view()
    hierarchies, own = find_hierarchies(mountinfo_text), parse_proc_self_cgroup(own_text)
    v1 = [own_folder(hierarchies[c], own[c]) for c in REQUIRED + OPTIONAL if c in hierarchies and c in own]
    return v1 or ([own_folder(hierarchies[""], own[""])] if "" in hierarchies and "" in own else [])


def _v1_driver(hierarchies: dict[str, str], own: dict[str, str], instance: str, log) -> Driver:
    from kiln.sandbox.cgroup_v1 import OPTIONAL, REQUIRED, V1Driver

    bases = {}
    for controller in REQUIRED + OPTIONAL:
        mount, path = hierarchies.get(controller), own.get(controller)
        if (mount is None or path is None) and controller in OPTIONAL:
            continue
        if mount is None or path is None:
            raise CgroupError(
                f"cgroup v1: no {controller} hierarchy is mounted (kiln needs {', '.join(REQUIRED)}); "
                "mount it, or use cgroup v2 (RUN_CGROUP=v2)"
            )
        base = own_folder(mount, path)
        if not os.access(base, os.W_OK):
            if controller in OPTIONAL:
                continue
            raise CgroupError(f"cgroup v1: {base} is not writable (read-only cgroup mount?)")
        bases[controller] = base
    return V1Driver(bases, instance, log)


def choose_driver(mode: str, instance: str, log, mountinfo_text: str, proc_self_cgroup_text: str) -> Driver:
    """open_driver's decision, from the texts of /proc/self/mountinfo and /proc/self/cgroup."""
    check_instance(instance)
    if mode == "off":
        return NoCgroups("RUN_CGROUP=off")
    if mode not in ("auto", "v2", "v1"):
        raise ValueError(f"cgroup mode {mode!r}: must be auto, v2, v1 or off")
    hierarchies = find_hierarchies(mountinfo_text)
    own = parse_proc_self_cgroup(proc_self_cgroup_text)
    reasons = []
    for version in ("v2", "v1") if mode == "auto" else (mode,):
        make = _v2_driver if version == "v2" else _v1_driver
        try:
            driver = make(hierarchies, own, instance, log)
        except CgroupError as error:
            if mode != "auto":
                raise
            reasons.append(str(error))
            continue
        log.info("cgroup driver", driver=driver.name, mode=mode, subtree=list(driver.instance_dirs), rejected=reasons or None)
        return driver
    return NoCgroups("no usable cgroup driver: " + "; ".join(reasons))


def open_driver(mode: str, instance: str, log) -> Driver:
    """The zygote's entry point: mode is RUN_CGROUP, instance is RUN_INSTANCE.

    "off" -> NoCgroups; "auto" -> V2Driver, else V1Driver, else NoCgroups whose .reason says why;
    "v2"/"v1" -> that driver, or CgroupError saying what is missing and what to do.
    """
    return choose_driver(mode, instance, log, *read_own_view())


if __name__ == "__main__":  # scripts/rootless.sh: the folders to hand a subtree below
    print("\n".join(own_folders()))
