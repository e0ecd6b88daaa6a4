"""The sandbox, step by step: every step of a slot's life in the order it is applied.

- build_root / enter_root, finish_root: while warming, in the slot's init (PID 1 of fresh pid,
  ipc, uts and cgroup namespaces, in its index's network namespace), before any request exists:
  the read-only part of the root once per slot index (a template mount namespace the zygote
  keeps), then for every slot a private copy of it with its own /tmp, /proc and upper layer;
- prepare_job: per request, in init: the workspace overlay, /tmp's size, the request's files;
- start_prestarted / release_prestarted: the same split for a slot warmed for one language
  whose workspace has a prestart command: workspace and task while warming, files and go per
  request;
- become_task, spawn_task: per request, init takes the task's identity and spawns the test
  command.

A step that fails raises SetupError naming itself; init reports it as infrastructure_failure.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket

from kiln.sandbox import files, identity, libc, mounts, prestart, rlimits, seccomp
from kiln.sandbox.cgroups import SlotCgroup
from kiln.sandbox.mounts import under
from kiln.sandbox.plan import OVERLAY_UPPER, OVERLAY_WORK, SANDBOX_DIR, JobPlan, RootPlan, TaskPlan, upper_layer_dirs


class SetupError(Exception):
    def __init__(self, step: str, error: BaseException):
        super().__init__(f"sandbox step '{step}' failed: {error}")
        self.step = step


class _Step:
    """`with step("name"):` turns any error inside into a SetupError that names the step."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        pass

    def __exit__(self, kind, error, _tb) -> None:
        if error is not None and not isinstance(error, SetupError):
            raise SetupError(self.name, error) from error


step = _Step


def build_root(plan: RootPlan, staging: str) -> int:
    """The part of the root every slot of an index shares, built by the index's first slot in
    a mount namespace the zygote then keeps as the index's template (the returned descriptor).
    The slot itself goes on in a private copy of it, as every later slot of the index does
    (enter_root). Everything in it is read-only: nothing a job does can reach the next one."""
    with step("keep the template's mount namespace"):
        template = mounts.current_namespace()  # before pivot_root: /proc is the host's until then
    with step("make mounts private"):
        mounts.make_private()
    with step("mount the root tmpfs"):
        mounts.mount_tmpfs(staging, plan.root)
        for directory in plan.directories:
            mounts.make_directory(staging, directory)
        for link in plan.links:
            mounts.make_link(staging, link)
    for bind in plan.binds:
        with step(f"bind {bind.source}"):
            mounts.make_mount_point(staging, bind)
            mounts.bind_readonly(bind.source, under(staging, bind.path), bind.recursive)
    with step("write /etc"):
        for file in plan.files:
            mounts.write_file(staging, file)
    with step("build /dev"):
        mounts.mount_tmpfs(under(staging, plan.dev.path), plan.dev)
        for device in plan.devices:
            mounts.make_device(staging, device)
        for link in plan.dev_links:
            mounts.make_link(staging, link)
        mounts.make_readonly(under(staging, plan.dev.path), plan.dev)
    with step("mount /sys"):
        mounts.mount_tmpfs(under(staging, plan.sys.path), plan.sys)
        mounts.make_readonly(under(staging, plan.sys.path), plan.sys)
    with step("bind the workspaces"):
        ws = plan.workspaces
        mounts.bind_readonly(ws.source, under(staging, ws.path), ws.recursive)
    with step("pivot_root"):
        mounts.pivot_into(staging)
    with step("make the root read-only"):
        mounts.make_readonly("/", plan.root)
    with step("leave the template"):
        mounts.enter_copy()
    return template


def enter_root(template: int) -> None:
    """A slot of an index that has a template: a private copy of it becomes the slot's root."""
    with step("enter a copy of the index's root"):
        mounts.enter_copy(template)


def finish_root(plan: RootPlan) -> None:
    """Every slot's own part of its root, on top of its copy of the template: fresh /tmp and
    upper layer, the /proc of its pid namespace, its hostname."""
    with step("mount /tmp"):
        mounts.mount_tmpfs(plan.tmp.path, plan.tmp)
    with step("mount /proc"):
        mounts.mount_proc()
    with step("prepare the workspace's upper layer"):
        mounts.mount_tmpfs(plan.upper.path, plan.upper)
        for path, mode, owned in upper_layer_dirs():
            os.mkdir(path, mode)
            if owned:
                os.chown(path, plan.uid, plan.gid)
    with step("set the hostname"):
        socket.sethostname(plan.hostname)


def prepare_job(plan: JobPlan) -> None:
    """The workspaces stay bound at /.kiln/ws, which only root may enter (0700): unmounting
    them per job cost more than the rest of the mounts together."""
    _mount_overlay_and_tmp(plan)
    with _sandbox_root() as root_fd:
        _make_writable_dirs(root_fd, plan)
        _write_files(root_fd, plan)


def mount_workspace(plan: JobPlan) -> None:
    """While warming a slot prestarted for a language: prepare_job without the files."""
    _mount_overlay_and_tmp(plan)
    with _sandbox_root() as root_fd:
        _make_writable_dirs(root_fd, plan)


def write_files(plan: JobPlan) -> None:
    """Per request in a prestarted slot: the rest of prepare_job."""
    with _sandbox_root() as root_fd:
        _write_files(root_fd, plan)


def _mount_overlay_and_tmp(plan: JobPlan) -> None:
    with step("mount the workspace"):
        mounts.resize_tmpfs(plan.upper.path, plan.upper)
        mounts.mount_overlay(SANDBOX_DIR, plan.lower, OVERLAY_UPPER, OVERLAY_WORK)
    with step("size /tmp"):
        mounts.resize_tmpfs(plan.tmp.path, plan.tmp)


@contextlib.contextmanager
def _sandbox_root():
    with step("open /sandbox"):
        root_fd = files.open_dir(SANDBOX_DIR)
    try:
        yield root_fd
    finally:
        os.close(root_fd)


def _make_writable_dirs(root_fd: int, plan: JobPlan) -> None:
    with step("make the writable dirs"):
        for relpath in plan.writable_dirs:
            files.ensure_dir(root_fd, relpath, plan.uid, plan.gid)
            files.make_writable(root_fd, relpath, plan.uid, plan.gid)


def _write_files(root_fd: int, plan: JobPlan) -> None:
    with step("write the request's files"):
        for relpath, content in plan.files:
            files.write_file(root_fd, relpath, content, plan.uid, plan.gid)


def start_prestarted(workspace: JobPlan, plan: TaskPlan, seccomp_filter: bytes | None, cgroup: SlotCgroup, memory_max: int, pids_max: int) -> prestart.PrestartedTask:
    """While warming a slot for one language: its workspace and limits in place, the
    workspace's prestart command started and waiting (see prestart.py)."""
    mount_workspace(workspace)
    with step("set cgroup limits"):
        cgroup.set_limits(memory_max, pids_max)
    # init takes the task's limits and filter for good: what is left of its work (the request's
    # files, supervision, the result) needs neither a mount nor more than root's file access
    _take_limits(plan)
    _take_filter(seccomp_filter)
    with _in_slot_cgroup(cgroup):
        with step("take the slot's user"):
            identity.act_as(plan.uid, plan.gid)
        try:
            with step("start the prestart command"):
                task = prestart.spawn(plan)
        finally:
            with step("take root back"):
                identity.act_as_root()
                identity.set_parent_death_signal(signal.SIGKILL)  # a uid change cleared it
    cgroup.close_procs()  # nothing else is ever moved: closed now, not on a request's path
    return task


def release_prestarted(job: JobPlan, task: prestart.PrestartedTask) -> None:
    """Per request, in a prestarted slot: the request's files, then go."""
    write_files(job)
    with step("release the prestarted task"):
        prestart.go(task)


def become_task(plan: TaskPlan, seccomp_filter: bytes | None) -> None:
    """init itself, once the job's root work is done (mounts, files, cgroup limits): from root
    to the task's identity, limits and filter, which the task then inherits through a plain
    spawn (vfork + exec). No Python process is forked for the task, and init supervises the
    run without privileges: not dumpable, seccomp'd, its uid the task's (so kill(-1) reaches
    exactly the run's processes, which can never change uid)."""
    _take_limits(plan)
    with step("drop to the slot's user"):
        identity.become(plan.uid, plan.gid)
        identity.clear_capabilities()
        identity.set_not_dumpable()
        identity.set_parent_death_signal(signal.SIGKILL)  # a uid change cleared it
    _take_filter(seccomp_filter)


def _take_limits(plan: TaskPlan) -> None:
    with step("set rlimits"):
        rlimits.apply(plan.rlimits)
    with step("enter the workspace"):
        os.chdir(plan.cwd)


def _take_filter(seccomp_filter: bytes | None) -> None:
    with step("set no_new_privs"):
        identity.set_no_new_privs()
    if seccomp_filter is not None:
        with step("load seccomp"):
            seccomp.load(seccomp_filter)


@contextlib.contextmanager
def _in_slot_cgroup(cgroup: SlotCgroup):
    """init steps into the slot's cgroup for a spawn (the child is born there, before it can
    run or fork anything), then back out."""
    with step("join the slot's cgroup"):
        cgroup.join()  # through descriptors the zygote opened: /sys is not mounted here
    try:
        yield
    finally:
        with step("leave the slot's cgroup"):
            cgroup.leave()


def spawn_task(plan: TaskPlan, stdio: tuple[int, int, int], cgroup: SlotCgroup) -> int:
    """Start the test command in the slot's cgroup. Returns the task's pid."""
    try:
        with _in_slot_cgroup(cgroup), step("exec the test command"):
            return libc.spawn(plan.argv, dict(plan.env), stdio)
    finally:
        cgroup.close_procs()
