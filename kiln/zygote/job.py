"""One request inside a warm slot: check the job, prepare the workspace, run the task, supervise
it to the end, answer with one result frame.

Runs in the slot's init (PID 1 of the slot's pid namespace, root): kill(-1) reaches exactly the
task's processes, and everything left dies with init when it exits after the result.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import resource
import time
from dataclasses import dataclass

from kiln.runtime import Runtime, Workload
from kiln.sandbox import contain, libc, plan
from kiln.sandbox.cgroups import SlotCgroup
from kiln.sandbox.contain import SetupError
from kiln.sandbox.prestart import PrestartedTask
from kiln.zygote import protocol
from kiln.zygote.supervise import Supervisor, memory_peak, outcome, task_cpu_ms

FILE_PARTS = ("solution", "checker", "asserts")


class JobError(Exception):
    """The frame from the front is not a valid job (the root side trusts nothing)."""


@dataclass(frozen=True)
class Job:
    workload: Workload
    timeout_ms: int
    files: tuple[tuple[str, bytes], ...]  # part name -> bytes
    stdin: bytes | None


def parse(header: dict, blobs: list[bytes], runtime: Runtime) -> Job:
    config = runtime.config
    slug = header.get("slug")
    workload = runtime.workloads.get(slug) if isinstance(slug, str) else None
    if workload is None:
        raise JobError(f"unknown slug {header.get('slug')!r}")
    timeout_ms = header.get("timeout_ms")
    if type(timeout_ms) is not int or not 0 < timeout_ms <= config.timeout_max_ms:
        raise JobError(f"bad timeout_ms {timeout_ms!r}")
    parts = header.get("files")
    if not isinstance(parts, list) or not all(p in FILE_PARTS for p in parts) or len(set(parts)) != len(parts):
        raise JobError(f"bad files {parts!r}")
    has_stdin = header.get("stdin") is True
    if len(blobs) != len(parts) + has_stdin:
        raise JobError("blob count does not match the job")
    if any(len(blob) > config.input_max for blob in blobs):
        raise JobError("a part is larger than RUN_INPUT_MAX")
    if "solution" not in parts:
        raise JobError("no solution")
    if workload.language.has_checker != ("checker" in parts):
        raise JobError("checker present for a language without one, or missing")
    return Job(workload, timeout_ms, tuple(zip(parts, blobs)), blobs[-1] if has_stdin else None)


def _paths(job: Job) -> tuple[tuple[str, bytes], ...]:
    language = job.workload.language
    where = {"solution": language.solution_file, "checker": language.checker_file, "asserts": language.asserts_file}
    return tuple((where[part], content) for part, content in job.files)


def plans(job: Job, runtime: Runtime, uid: int) -> tuple[plan.JobPlan, plan.TaskPlan]:
    return _plans(job.workload, runtime, uid, _paths(job), job.timeout_ms, job.workload.argv)


def prestart_plans(workload: Workload, runtime: Runtime, uid: int) -> tuple[plan.JobPlan, plan.TaskPlan]:
    """A prestarted task starts before its request: it gets the limits of the longest timeout
    (each run's own deadline is still kept, by init's clock) and no files yet."""
    assert workload.prestart_argv is not None
    return _plans(workload, runtime, uid, (), runtime.config.timeout_max_ms, workload.prestart_argv)


def workload_plans(workload: Workload, runtime: Runtime, uid: int) -> tuple[plan.JobPlan, plan.TaskPlan]:
    """A language's plans without a request: what kiln-init's recipe holds (recipe.py)."""
    return _plans(workload, runtime, uid, (), runtime.config.timeout_max_ms, workload.argv)


def _plans(workload: Workload, runtime: Runtime, uid: int, files, timeout_ms: int, argv) -> tuple[plan.JobPlan, plan.TaskPlan]:
    config = runtime.config
    job_plan = plan.job_plan(
        lower=workload.lower,
        size=workload.tmp_size,
        inodes=config.tmp_inodes,
        uid=uid,
        gid=uid,
        writable_dirs=(workload.language.check_dir, *workload.language.writable_dirs),
        files=files,
    )
    task_plan = plan.TaskPlan(
        uid=uid,
        gid=uid,
        argv=argv,
        env=plan.task_env(path=config.sandbox_path, inherited=config.sandbox_env, language=workload.language.env),
        cwd=plan.SANDBOX_DIR,
        rlimits=plan.task_rlimits(timeout_ms=timeout_ms, cpus=runtime.cpus, pids_max=workload.pids_max),
    )
    return job_plan, task_plan


def _stdin_fd(data: bytes | None) -> int:
    """A sealed memfd: the task reads it like a file, and cannot change it for a re-read."""
    if data is None:
        return os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
    fd = os.memfd_create("stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    return fd


def execute(job: Job, runtime: Runtime, uid: int, cgroup: SlotCgroup, cancel_sock, title: str, zygote: int) -> tuple[dict, list[bytes]] | None:
    """Run the job; the result frame (header, [stdout, stderr]), or None if it was cancelled."""
    job_plan, task_plan = plans(job, runtime, uid)
    try:
        contain.prepare_job(job_plan)
        with contain.step("set cgroup limits"):
            cgroup.set_limits(job.workload.memory_max, job.workload.pids_max)
        stdin_fd = _stdin_fd(job.stdin)
        out_r, out_w = libc.output_pipe()
        err_r, err_w = libc.output_pipe()
        contain.become_task(task_plan, runtime.seccomp_filter)
        if libc.has_exited(zygote):
            os._exit(0)  # the zygote died while the parent-death signal was re-armed
        started = time.monotonic()
        pid = contain.spawn_task(task_plan, (stdin_fd, out_w, err_w), cgroup)
    except SetupError as error:
        return _failure(str(error))
    for fd in (out_w, err_w, stdin_fd):
        os.close(fd)
    sup = Supervisor(pid, out_r, err_r, cancel_sock, runtime.config.output_max)
    sup.run(started + job.timeout_ms / 1000, title)
    if sup.cancelled:
        return None
    return _result(sup, cgroup, task_plan, started)


def rehearse(runtime: Runtime, uid: int, workload: Workload) -> None:
    """While warming: the request path's pure steps (a job frame decoded and checked, the plans,
    a result frame encoded) once, for `workload`, on an empty job, results discarded. A slot is
    a fresh fork of the zygote, and the first write to a page of its Python objects (a
    reference count is enough) copies that page, 2-3 us each on a VM: rehearsed, those copies
    are made before the request comes instead of on its path. One language is enough: the pages
    every language's path shares are most of them (~0.9 ms of copies), a request for another
    language then copies its own few (~20 us); rehearsing all 15 cost each slot ~0.45 ms more
    CPU. Nothing is run, mounted or written; the slot copies the same pages either way, only
    earlier."""
    parts = ["solution", "checker"] if workload.language.has_checker else ["solution"]
    header = {"op": "job", "slug": workload.slug, "timeout_ms": 1000, "files": parts, "stdin": False}
    frame = protocol.encode(header, [b""] * len(parts))
    plans(parse(*protocol.decode_body(frame[4:]), runtime), runtime, uid)
    protocol.encode(*_failure("rehearsal"))


def start_prestarted(workload: Workload, runtime: Runtime, uid: int, cgroup: SlotCgroup) -> PrestartedTask:
    """While warming a slot for `workload`: its prestart command, started and waiting."""
    workspace, task_plan = prestart_plans(workload, runtime, uid)
    return contain.start_prestarted(workspace, task_plan, runtime.seccomp_filter, cgroup, workload.memory_max, workload.pids_max)


def fits_prestarted(job: Job, workload: Workload) -> bool:
    """A prestarted task serves its language's requests without stdin (its stdin is /dev/null)."""
    return job.workload is workload and job.stdin is None


def execute_prestarted(job: Job, runtime: Runtime, uid: int, task: PrestartedTask, cgroup: SlotCgroup, cancel_sock, title: str) -> tuple[dict, list[bytes]] | None:
    """execute(), for a job that fits_prestarted: files, go, the same supervision and result.
    CPU counts from go: the start-up before it was not the request's."""
    job_plan, task_plan = plans(job, runtime, uid)
    early_exit = _exited(task)
    if early_exit is not None:
        return {"op": "prestart_failed", "error": early_exit}, []
    try:
        cpu_before_ms = cgroup.cpu_usage_ms()
        started = time.monotonic()
        contain.release_prestarted(job_plan, task)
    except (SetupError, OSError) as error:
        return _failure(str(error))
    sup = Supervisor(task.pid, task.stdout, task.stderr, cancel_sock, runtime.config.output_max)
    sup.run(started + job.timeout_ms / 1000, title)
    if sup.cancelled:
        return None
    return _result(sup, cgroup, task_plan, started, cpu_before_ms or 0.0)


def _exited(task: PrestartedTask) -> str | None:
    """Why the prestart command is gone before its request, if it is: a workspace whose prestart
    does not wait (a stale build, a crash at start-up) must not answer for the test command."""
    try:
        pid, status = os.waitpid(task.pid, os.WNOHANG)
    except ChildProcessError:
        pid, status = task.pid, 0
    if pid == 0:
        return None
    said = b""
    for fd in (task.stderr, task.stdout):
        try:
            said += os.read(fd, 2048)
        except OSError:
            pass
    return f"the prestart command exited ({os.waitstatus_to_exitcode(status)}) before its request: {said.decode(errors='replace').strip()[-500:]!r}"


def _result(sup: Supervisor, cgroup: SlotCgroup, task_plan: plan.TaskPlan, started: float, cpu_before_ms: float = 0.0) -> tuple[dict, list[bytes]]:
    cpu_limit_ms = dict(task_plan.rlimits).get(resource.RLIMIT_CPU, 0) * 1000
    stats = cgroup.stats()
    if stats.cpu_usage_ms is not None:
        stats = dataclasses.replace(stats, cpu_usage_ms=stats.cpu_usage_ms - cpu_before_ms)
    kind, exit_code, killed_by = outcome(sup, stats, cpu_limit_ms)
    header = {
        "op": "result",
        "exit_code": exit_code,
        "outcome": kind,
        "wall_ms": round(((sup.ended_at or time.monotonic()) - started) * 1000, 1),
        "cpu_ms": round(task_cpu_ms(sup, stats), 1),
        "memory_peak_bytes": memory_peak(sup, stats),
        "signal": killed_by,
        "output_overflow": sup.overflow,
    }
    return header, [bytes(sup.streams[sup.out_fd]), bytes(sup.streams[sup.err_fd])]


def _failure(message: str) -> tuple[dict, list[bytes]]:
    header = {"op": "result", "exit_code": None, "outcome": "infrastructure_failure", "wall_ms": 0.0, "cpu_ms": 0.0, "memory_peak_bytes": 0, "signal": None, "output_overflow": False}
    return header, [b"", f"kiln: {message}\n".encode()]
