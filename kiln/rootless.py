"""Rootless mode: `kiln serve` started by an ordinary user.

Before anything else (one thread, nothing started), serve enters a user namespace of its own in
which it is root over the ids the host handed its user: its own uid as 0, and, where
/etc/subuid and /etc/subgid give the user a range and Debian's `uidmap` is installed
(`newuidmap`/`newgidmap`, setuid helpers that write a namespace's maps), that range as 1, 2, ...
so that each slot's task and the front keep ids of their own as they do under root. From there
the zygote, the slots and kiln-init run the same code as under root: the kernel lets the owner of
a user namespace make mount, pid, net, ipc, uts and cgroup namespaces, mount tmpfs, overlay and
proc, pivot_root and load seccomp filters. What it does not let a user namespace do is named
once, here (`UserNamespace.weaker`), and said at startup, in /health and by `kiln check-host`.

This module reads files, runs the two helpers and makes the namespace; the rest is kiln's as
under root (the zygote's own pid namespace and /proc: kiln/zygote/boot.py and zygote.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kiln.sandbox import libc

NEWUIDMAP, NEWGIDMAP = "newuidmap", "newgidmap"


class RootlessError(Exception):
    """Rootless mode cannot start; the message says what to do."""


@dataclass(frozen=True)
class IdRange:
    """One line of a user namespace's uid_map or gid_map."""

    inside: int
    outside: int
    count: int

    def __str__(self) -> str:
        return f"{self.inside} {self.outside} {self.count}"


@dataclass(frozen=True)
class UserNamespace:
    """The user namespace rootless kiln runs in, as it was set up."""

    user: str  # the host user kiln was started as
    uid_map: tuple[IdRange, ...]
    gid_map: tuple[IdRange, ...]

    @property
    def single_id(self) -> bool:
        """Only the user's own id is mapped: every process of kiln and of its runs shares it."""
        return sum(r.count for r in self.uid_map) == 1 or sum(r.count for r in self.gid_map) == 1

    def maps(self, uid: int, gid: int) -> bool:
        return any(r.inside <= uid < r.inside + r.count for r in self.uid_map) and any(r.inside <= gid < r.inside + r.count for r in self.gid_map)

    def outside(self, uid: int) -> int | None:
        """A uid of this namespace as the host sees it."""
        for r in self.uid_map:
            if r.inside <= uid < r.inside + r.count:
                return r.outside + uid - r.inside
        return None

    def weaker(self) -> list[str]:
        """What is weaker than a root kiln's sandbox, each a sentence an operator can act on."""
        said = [
            "kiln's supervisors (the zygote and every slot's kiln-init) run as the host user "
            f"{self.user}: whoever controls that user outside kiln controls the sandboxes",
        ]
        if self.single_id:
            said.append(
                "only one id is mapped (no /etc/subuid and /etc/subgid range for "
                f"{self.user}, or no newuidmap/newgidmap): every run, the front and kiln's "
                "supervisors share one uid, so per-user kernel budgets (processes, pipe buffers, "
                "inotify, message queues) are shared by all runs, a run is kept from the "
                "supervisors only by its namespaces, its empty capability sets and its seccomp "
                "filter, not by its uid, and it may lower its slot's supervisor's priority, so "
                "under CPU pressure it may overstay its timeout until kiln kills the slot from "
                "outside (5 s past it); give the user a range (`usermod --add-subuids 100000-165535 "
                f"--add-subgids 100000-165535 {self.user}`, `apt install uidmap`) and restart"
            )
        return said

    def summary(self) -> dict:
        return {
            "user": self.user,
            "uid_map": [str(r) for r in self.uid_map],
            "gid_map": [str(r) for r in self.gid_map],
            "single_id": self.single_id,
        }


def subordinate_ranges(text: str, name: str, uid: int) -> list[tuple[int, int]]:
    """/etc/subuid or /etc/subgid -> the (start, count) ranges of one user (by name or by id)."""
    ranges = []
    for line in text.splitlines():
        fields = line.strip().split(":")
        if len(fields) != 3 or fields[0] not in (name, str(uid)):
            continue
        try:
            start, count = int(fields[1]), int(fields[2])
        except ValueError:
            continue
        if start >= 0 and count > 0:
            ranges.append((start, count))
    return ranges


def plan_map(own: int, ranges: list[tuple[int, int]]) -> tuple[IdRange, ...]:
    """0 is the user's own id; the subordinate ranges follow it as 1, 2, ... in file order."""
    mapped, inside = [IdRange(0, own, 1)], 1
    for start, count in ranges:
        if start <= own < start + count:  # the user's own id cannot be mapped twice
            continue
        mapped.append(IdRange(inside, start, count))
        inside += count
    return tuple(mapped)


def _read(path: str) -> str:
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return ""


def _user_name(uid: int) -> str:
    import pwd  # noqa: PLC0415

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def planned_namespace(uid: int, gid: int) -> UserNamespace:
    """The maps this user can have: its ranges through newuidmap/newgidmap, else its own id."""
    import shutil  # noqa: PLC0415 - the zygote unpickles this module's types: keep its imports few

    name = _user_name(uid)
    helpers = shutil.which(NEWUIDMAP, path="/usr/bin:/bin") and shutil.which(NEWGIDMAP, path="/usr/bin:/bin")
    uid_ranges = subordinate_ranges(_read("/etc/subuid"), name, uid) if helpers else []
    gid_ranges = subordinate_ranges(_read("/etc/subgid"), name, uid) if helpers else []
    if not (uid_ranges and gid_ranges):
        uid_ranges = gid_ranges = []
    return UserNamespace(name, plan_map(uid, uid_ranges), plan_map(gid, gid_ranges))


def _write_maps(pid: int, planned: UserNamespace) -> None:
    """In a child still outside the namespace: write the maps of `pid`'s new user namespace."""
    import subprocess  # noqa: PLC0415 - see planned_namespace
    if planned.single_id:  # an unprivileged process may map its own ids, with setgroups denied
        for name, text in (("setgroups", "deny"), ("uid_map", str(planned.uid_map[0])), ("gid_map", str(planned.gid_map[0]))):
            with open(f"/proc/{pid}/{name}", "w") as file:
                file.write(text)
        return
    for helper, ranges in ((NEWUIDMAP, planned.uid_map), (NEWGIDMAP, planned.gid_map)):
        words = [str(pid)] + [str(n) for r in ranges for n in (r.inside, r.outside, r.count)]
        done = subprocess.run([helper, *words], capture_output=True, text=True, check=False)
        if done.returncode:
            raise RootlessError(f"{helper} {' '.join(words)}: {done.stderr.strip() or f'exit status {done.returncode}'}")


def in_user_namespace() -> bool:
    """Whether this process is in a user namespace other than the host's: rootless kiln's own,
    or one it was started in (a Kubernetes pod with hostUsers: false, where kiln is root of the
    pod's namespace). Either way mknod is refused and /proc is mounted only beside a visible one."""
    return _read("/proc/self/uid_map").split() != ["0", "0", "4294967295"]


def enter() -> UserNamespace:
    """Make this process root of a new user namespace over the ids its user has. It must be
    single-threaded (the kernel refuses otherwise)."""
    planned = planned_namespace(os.getuid(), os.getgid())
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    parent = os.getpid()
    child = os.fork()
    if child == 0:  # writes the maps from outside once the parent is inside
        code = 0
        try:
            os.close(ready_w)
            os.close(done_r)
            if os.read(ready_r, 1) == b"u":
                _write_maps(parent, planned)
        except (OSError, RootlessError) as error:
            os.write(done_w, str(error).encode()[:4000])
            code = 1
        finally:
            os._exit(code)
    os.close(ready_r)
    os.close(done_w)
    try:
        libc.unshare(libc.CLONE_NEWUSER)
        entered, errno = True, 0
    except OSError as error:
        entered, errno = False, error.errno
    os.write(ready_w, b"u" if entered else b"x")
    os.close(ready_w)
    failure = os.read(done_r, 4096).decode(errors="replace")
    os.close(done_r)
    os.waitpid(child, 0)
    if not entered:
        raise RootlessError(
            f"cannot make a user namespace: {os.strerror(errno)} (is kernel.unprivileged_userns_clone or "
            "user.max_user_namespaces 0, or does a seccomp profile forbid unshare?)"
        )
    if failure:
        raise RootlessError(f"cannot map ids into the user namespace: {failure}")
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    return planned
