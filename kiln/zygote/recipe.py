"""kiln-init's recipe: a slot's plans (kiln.sandbox.plan), compiled by the zygote into the steps
the slot's init applies (kiln/native/init.c), once per slot index.

The plans stay the description of the sandbox, as plain data; this module turns them, with
mount(2)'s arguments from kiln.sandbox.mounts, into records:

    "KILNRCP1" | record... ; record = u32 type | u32 nargs | arg... ; arg = u32 len | bytes | NUL

(little-endian; integers as decimal text). The record types are kiln.h's, and so are their
arguments' names (RECORD_ARGS): a record is written by name (_record), kiln-init reads it by
the same names (kiln.h ARG). A request's own data (its files, stdin, timeout) comes later, in
the job frame; everything else is decided here.
"""

from __future__ import annotations

import fcntl
import os
import posixpath
import struct

from kiln import langs
from kiln.runtime import Runtime, Workload
from kiln.sandbox import mounts, plan
from kiln.sandbox.cgroups import TEST_CGROUP_PREFIX, LimitWrite, SlotCgroup
from kiln.sandbox.mounts import READONLY_ATTRS, MountArgs, under
from kiln.wire import protocol
from kiln.sandbox.plan import LAYERS_DIR, LOWER_DIR, WORKSPACES_DIR, OVERLAY_UPPER, OVERLAY_WORK, PROC_ANCHOR, SANDBOX_DIR, RootPlan, Tmpfs, cpu_rlimit_terms, fixed_rlimits, upper_layer_dirs

MAGIC = b"KILNRCP1"
K_CONSTS, K_SECCOMP, K_STAT, K_BUILD, K_FINISH, K_WARM_LIMIT = 1, 2, 3, 4, 5, 6
K_WORKLOAD, K_W_MOUNT, K_W_DIR, K_W_PART, K_W_LIMIT, K_W_ARGV, K_W_ENV, K_W_RLIMIT, K_W_RLIMIT_CPU = 7, 8, 9, 10, 11, 12, 13, 14, 15
K_W_PRESTART_ARGV, K_W_PRESTART_LIMIT, K_W_TEMPLATE_ARGV = 16, 17, 18
K_JOB_LIMIT, K_W_BUILD_ARGV, K_W_EXEC_ARGV, K_FRESH, K_PEAK_RESET, K_UNLIMIT, K_TEST_PROC = 19, 20, 21, 22, 23, 24, 25
K_TEST_CG_PARENT = 26

# the K_CONSTS record's values, in this order (kiln.h's RECIPE_CONSTS; `kiln-init contract`)
CONSTS = (
    "index", "uid", "input_max", "output_max", "timeout_max_ms", "starved_max_times", "judge_part_max", "layer_max",
    "cwd", "judge_dir", "upper", "layers", "setgroups", "test_cgroups",
)  # fmt: skip

# each record type's arguments, in order (kiln.h RECORD_SHAPES, printed by `kiln-init contract`
# and compared by tests/unit/test_contract.py): "name..." is any number more, given positionally
_STEP_OP = ("step", "op", "args...")  # op: OPS' code; args: the op's own
_CGROUP_WRITE = ("dir_index", "file", "value")  # a file of the slot's cgroup directory number dir_index
_ARGV = ("argv...",)
RECORD_ARGS = {
    K_CONSTS: ("consts...",),  # CONSTS' values
    K_SECCOMP: ("program",),
    K_STAT: ("what", "dir_index", "file", "key", "divisor"),  # what: STATS' code
    K_BUILD: _STEP_OP,
    K_FINISH: _STEP_OP,
    K_WARM_LIMIT: _CGROUP_WRITE,
    K_WORKLOAD: ("slug", "has_client_harness", "memory_max", "pids_max"),
    K_W_MOUNT: _STEP_OP,
    K_W_DIR: ("relpath",),
    K_W_PART: ("part", "relpath"),
    K_W_LIMIT: _CGROUP_WRITE,
    K_W_ARGV: _ARGV,
    K_W_ENV: ("variables...",),  # KEY=VALUE
    K_W_RLIMIT: ("resource", "value"),
    K_W_RLIMIT_CPU: ("seconds_per_started_second", "extra"),
    K_W_PRESTART_ARGV: _ARGV,
    K_W_PRESTART_LIMIT: _CGROUP_WRITE,
    K_W_TEMPLATE_ARGV: _ARGV,
    K_JOB_LIMIT: ("what", "dir_index", "file"),  # what: protocol.JOB_LIMITS' code
    K_W_BUILD_ARGV: _ARGV,
    K_W_EXEC_ARGV: _ARGV,
    K_FRESH: _STEP_OP,
    K_PEAK_RESET: _CGROUP_WRITE,
    K_UNLIMIT: _CGROUP_WRITE,
    K_TEST_PROC: _STEP_OP,
    K_TEST_CG_PARENT: _CGROUP_WRITE,
}
# (the names given by keyword, whether more follow positionally), per record type
_NAMED = {record_type: (names[:-1], True) if names[-1].endswith("...") else (names, False) for record_type, names in RECORD_ARGS.items()}
# the cgroup figures a K_STAT record reads, written as their codes (kiln.h STATS)
STATS = ("memory_peak", "cpu", "oom_kills", "pids_hits", "cpu_starved")

Op = tuple  # (step, op name, *args): one kiln-init op (mounts.c)
# the ops kiln-init knows, written as their codes (from 1), and each one's own arguments after
# step and op (kiln.h OPS and OP_ARGS_*, compared by tests/unit/test_contract.py); _op refuses
# another count
OP_ARGS = {
    "mount": ("source", "target", "fstype", "flags", "data"),  # mounts.MountArgs
    "setattr": ("target", "attr_set", "recursive"),
    "mkdir": ("path", "mode", "uid", "gid"),  # uid < 0: not chowned
    "mkdirs": ("path",),
    "touch": ("path", "mode"),
    "write": ("path", "mode", "content"),
    "symlink": ("target", "path"),
    "mknod": ("path", "mode", "major", "minor"),
    "pivot": ("new_root",),
    "save_ns": (),
    "unshare_ns": (),
    "hostname": ("name",),
    "detach": ("target",),
    "overlay": ("target", "lower", "upper", "work", "flags"),
}
OPS = tuple(OP_ARGS)


def compile_recipe(index: int, root: RootPlan, runtime: Runtime, cgroup: SlotCgroup) -> bytes:
    """Everything a slot of this index needs (its task's uid is the root plan's). `cgroup`: any
    slot cgroup of the driver (which limit files exist is the same for all)."""
    config = runtime.config
    consts = {
        "index": index,
        "uid": root.uid,
        "input_max": config.input_max,
        "output_max": config.output_max,
        "timeout_max_ms": config.timeout_max_ms,
        "starved_max_times": runtime.starved_max_times,
        "judge_part_max": config.judge_part_max,
        "layer_max": protocol.LAYER_MAX,
        "cwd": SANDBOX_DIR,
        "judge_dir": langs.JUDGE_DIR,
        "upper": OVERLAY_UPPER,
        "layers": LAYERS_DIR if root.layers else "",  # empty: none
        # rootless with one id mapped, setgroups is denied (and there are no other groups to drop)
        "setgroups": int(runtime.user_namespace is None or not runtime.user_namespace.single_id),
        # the name of those tests' cgroups, before their number; empty: none (the tests share the slot's)
        "test_cgroups": TEST_CGROUP_PREFIX if cgroup.test_cgroups else "",
    }
    assert tuple(consts) == CONSTS, "the constants go in CONSTS' order"
    records = [_record(K_CONSTS, *consts.values())]
    if runtime.seccomp_filter is not None:
        records.append(_record(K_SECCOMP, program=runtime.seccomp_filter))
    records += [_record(K_STAT, what=STATS.index(s.what), dir_index=s.dir_index, file=s.file, key=s.key, divisor=s.divisor) for s in cgroup.stat_sources()]
    records += [_op(K_BUILD, *op) for op in build_ops(root, runtime.staging_dir)]
    records += [_op(K_FINISH, *op) for op in finish_ops(root)]
    records += [_op(K_FRESH, *op) for op in fresh_ops(root)]
    records += [_op(K_TEST_PROC, *op) for op in proc_ops()]
    records += [_limit(K_PEAK_RESET, w) for w in cgroup.peak_resets()]
    records += [_limit(K_UNLIMIT, w) for w in cgroup.unlimit_writes()]
    largest = (max(w.memory_max for w in runtime.workloads.values()), max(w.pids_max for w in runtime.workloads.values()))
    records += [_limit(K_TEST_CG_PARENT, w) for w in cgroup.test_cgroup_parent_writes(*largest)]
    common = runtime.common_limits
    records += [_limit(K_WARM_LIMIT, w) for w in cgroup.limit_writes(*common, previous=None)]
    records += [_record(K_JOB_LIMIT, what=protocol.JOB_LIMITS.index(what), dir_index=dir_index, file=file) for what, dir_index, file in cgroup.job_limit_files()]
    for workload in runtime.workloads.values():
        records += _workload(workload, runtime, root, cgroup, common)
    return MAGIC + b"".join(records)


def build_ops(root: RootPlan, staging: str) -> list[Op]:
    """The index's root image, everything in it read-only: a tmpfs root with the plan's
    directories, links, read-only binds, /etc files, /dev and /sys, the workspaces; pivoted
    into, and left for a private copy (the slot goes on in the copy, the zygote keeps the
    image: its descriptor is taken first, while /proc is still the host's)."""
    ops: list[Op] = [("keep the root image's mount namespace", "save_ns"), ("make mounts private", "mount", *mounts.PRIVATE_ARGS)]
    step = "mount the root tmpfs"
    ops.append((step, "mount", *mounts.tmpfs_args(staging, root.root)))
    ops += [(step, "mkdir", under(staging, d.path), d.mode, -1, -1) for d in root.directories]
    ops += [(step, "symlink", link.target, under(staging, link.path)) for link in root.links]
    for bind in root.binds:
        step, target = f"bind {bind.source}", under(staging, bind.path)
        if bind.is_dir:
            ops.append((step, "mkdirs", target))
        else:
            ops += [(step, "mkdirs", posixpath.dirname(target)), (step, "touch", target, 0o444)]
        ops += _bind_readonly(step, bind.source, target, bind.recursive)
    ops += [("write /etc", "write", under(staging, f.path), f.mode, f.content) for f in root.files]
    step, dev = "build /dev", under(staging, root.dev.path)
    ops.append((step, "mount", *mounts.tmpfs_args(dev, root.dev)))
    for device in root.devices:
        target = under(staging, device.path)
        if root.in_user_namespace:  # the host's node, bound: mknod takes root
            ops += [(step, "touch", target, 0o666), (step, "mount", *mounts.bind_args(device.path, target, False))]
        else:
            ops.append((step, "mknod", target, device.mode, device.major, device.minor))
    ops += [(step, "symlink", link.target, under(staging, link.path)) for link in root.dev_links]
    ops.append((step, "mount", *mounts.readonly_args(dev, root.dev)))
    sys_dir = under(staging, root.sys.path)
    ops += [("mount /sys", "mount", *mounts.tmpfs_args(sys_dir, root.sys)), ("mount /sys", "mount", *mounts.readonly_args(sys_dir, root.sys))]
    if not root.lower_held:
        ops += _lower_binds(root, staging)
    if root.in_user_namespace:
        ops.append(("keep a procfs to mount /proc beside", "mount", *mounts.proc_args(under(staging, PROC_ANCHOR))))
    ops += [
        ("pivot_root", "pivot", staging),
        ("make the root read-only", "mount", *mounts.readonly_args("/", root.root)),
        ("leave the root image for a copy", "unshare_ns"),
    ]
    return ops


def _lower_binds(root: RootPlan, staging: str) -> list[Op]:
    """The workspaces and the layers bound below LOWER_DIR, for the overlay's lower layers,
    where the zygote holds no clones of them (RootPlan.lower_held)."""
    step, lower = "mount the lower layers' folder", under(staging, root.lower.path)
    ops: list[Op] = [(step, "mount", *mounts.tmpfs_args(lower, root.lower))]
    binds = [("bind the workspaces", root.workspaces), *([("bind the builds' layers", root.layers)] if root.layers else [])]
    ops += [(step, "mkdir", under(staging, bind.path), 0o700, -1, -1) for _, bind in binds]
    for bind_step, bind in binds:
        ops += _bind_readonly(bind_step, bind.source, under(staging, bind.path), bind.recursive)
    return [*ops, (step, "mount", *mounts.readonly_args(lower, root.lower))]


def finish_ops(root: RootPlan) -> list[Op]:
    """Every slot's own part of its root, on its copy of the root image: /tmp and the upper layer
    (fresh_ops), the /proc of its pid namespace, its hostname."""
    proc = proc_ops()
    if root.in_user_namespace:
        proc.append(("mount /proc", "detach", PROC_ANCHOR))
    return [*fresh_ops(root), *proc, ("set the hostname", "hostname", root.hostname)]


def proc_ops() -> list[Op]:
    """The /proc of a pid namespace, mounted from inside it: the slot's (finish_ops), and for
    each judge test after a kept slot's first, the test's own pid namespace's, mounted over the
    slot's by that namespace's init (kiln-init testinit.c). Rootless, the slot's /proc is the
    fully visible procfs the kernel asks for before it mounts another."""
    return [("mount /proc", "mount", *mounts.proc_args("/proc"))]


def fresh_ops(root: RootPlan) -> list[Op]:
    """What a sandbox writes in, made anew: /tmp, and the upper layer (the overlay's root and
    check/ owned by the task's user). Once per slot; and for each judge test of a slot that runs
    several, over the copy of the slot's mount namespace the test runs in."""
    step = "prepare the workspace's upper layer"
    return [
        ("mount /tmp", "mount", *mounts.tmpfs_args(root.tmp.path, root.tmp)),
        (step, "mount", *mounts.tmpfs_args(root.upper.path, root.upper)),
        *((step, "mkdir", path, mode, root.uid if owned else -1, root.gid if owned else -1) for path, mode, owned in upper_layer_dirs()),
    ]


def _bind_readonly(step: str, source: str, target: str, recursive: bool) -> list[Op]:
    return [(step, "mount", *mounts.bind_args(source, target, recursive)), (step, "setattr", target, READONLY_ATTRS, int(recursive))]


def _workload(workload: Workload, runtime: Runtime, root: RootPlan, cgroup: SlotCgroup, common: tuple[int, int]) -> list[bytes]:
    """A language's records: its workspace's mounts and writable dirs, where each part of a
    request goes, the limits it differs in from a plain slot's preset, the command, its
    environment and rlimits (plan.fixed_rlimits, and RLIMIT_CPU's terms: kiln-init computes it
    from the run's timeout), and its
    prestart command if any."""
    config = runtime.config
    workspace = plan.workspace_plan(
        lower=workload.lower,
        size=workload.tmp_size,
        inodes=config.tmp_inodes,
        writable_dirs=(workload.language.check_dir, *workload.language.writable_dirs),
    )
    env = plan.task_env(path=config.sandbox_path, inherited=config.sandbox_env, language=workload.language.env)
    language = workload.language
    limits = (workload.memory_max, workload.pids_max)
    lower = workspace.lower
    if root.lower_held:  # relative to the zygote's clone of the workspaces folder
        lower = "" if lower == WORKSPACES_DIR else posixpath.relpath(lower, WORKSPACES_DIR)
    # /tmp and the upper layer are mounted while warming at the largest size any language has:
    # resized per request only for a language that has less
    mount_ops: list[tuple[str, str, MountArgs | tuple[str]]] = [
        *_resize("mount the workspace", workspace.upper, root.upper),
        # on a judge's test, its build's layer goes above the workspace (kiln-init adds it)
        ("mount the workspace", "overlay", (SANDBOX_DIR, lower, OVERLAY_UPPER, OVERLAY_WORK, mounts.OVERLAY_FLAGS)),
        # the overlay holds its own reference to its lower layers: the binds of the workspaces
        # and the layers, whose mount roots in /proc/self/mountinfo are host paths, leave the
        # task's view with the tmpfs they are bound below (one detach for both); where the
        # zygote holds clones of them instead (RootPlan.lower_held) there are none to hide
        *([] if root.lower_held else [("hide the lower layers' folder", "detach", (LOWER_DIR,))]),
        *_resize("size /tmp", workspace.tmp, root.tmp),
    ]
    parts = {"solution": language.solution_file, "client_harness": language.client_harness_file, "asserts": language.asserts_file}
    return [
        _record(K_WORKLOAD, slug=workload.slug, has_client_harness=int(language.has_client_harness), memory_max=workload.memory_max, pids_max=workload.pids_max),
        *(_op(K_W_MOUNT, step, op, *args) for step, op, args in mount_ops),
        *(_record(K_W_DIR, relpath=d) for d in workspace.writable_dirs),
        *(_record(K_W_PART, part=part, relpath=path) for part, path in parts.items() if path),
        *(_limit(K_W_LIMIT, w) for w in (cgroup.limit_writes(*limits, previous=common) if limits != common else ())),
        _record(K_W_ARGV, *workload.argv),
        _record(K_W_ENV, *(f"{key}={value}" for key, value in env)),
        *(_record(K_W_RLIMIT, resource=which, value=limit) for which, limit in fixed_rlimits(workload.pids_max)),
        _cpu_terms(*cpu_rlimit_terms(runtime.cpus)),
        *_prestart(workload, cgroup),
        *([_record(K_W_BUILD_ARGV, *workload.build_argv), _record(K_W_EXEC_ARGV, *workload.exec_argv)] if workload.judges else []),
    ]


def _prestart(workload: Workload, cgroup: SlotCgroup) -> list[bytes]:
    """A workspace that prestarts: its command, its limits written on a fresh cgroup (a
    prestarted slot serves this language only), and its template command if any."""
    if workload.prestart_argv is None:
        return []
    writes = cgroup.limit_writes(workload.memory_max, workload.pids_max, previous=None)
    template = [_record(K_W_TEMPLATE_ARGV, *workload.template_argv)] if workload.template_argv else []
    return [_record(K_W_PRESTART_ARGV, *workload.prestart_argv), *(_limit(K_W_PRESTART_LIMIT, w) for w in writes), *template]


def _resize(step: str, wanted: Tmpfs, mounted: Tmpfs) -> list[tuple[str, str, MountArgs]]:
    if (wanted.size, wanted.inodes) == (mounted.size, mounted.inodes):
        return []
    return [(step, "mount", mounts.resize_args(wanted.path, wanted))]


def _cpu_terms(seconds_per_started_second: int, extra: int) -> bytes:
    return _record(K_W_RLIMIT_CPU, seconds_per_started_second=seconds_per_started_second, extra=extra)


def _op(record_type: int, step: str, op: str, *args) -> bytes:
    if len(args) != len(OP_ARGS[op]):
        raise ValueError(f"op {op} written with {len(args)} arguments: recipe.OP_ARGS names {OP_ARGS[op]}")
    return _record(record_type, *args, step=step, op=OPS.index(op) + 1)


def _limit(record_type: int, write: LimitWrite) -> bytes:
    return _record(record_type, dir_index=write.dir_index, file=write.file, value=write.value)


def _record(record_type: int, *more, **named) -> bytes:
    """A record of `record_type`: its arguments by their RECORD_ARGS names, in that order, then the
    rest (`more`) where the record takes any number more."""
    names, takes_more = _NAMED[record_type]
    if tuple(named) != names or (more and not takes_more):
        raise ValueError(f"a record {record_type} written with {tuple(named)}{' and more' if more else ''}: recipe.RECORD_ARGS names {RECORD_ARGS[record_type]}")
    args = (*named.values(), *more)
    out = [struct.pack("<II", record_type, len(args))]
    for arg in args:
        data = arg if isinstance(arg, bytes) else b"" if arg is None else os.fsencode(str(arg))
        out += [struct.pack("<I", len(data)), data, b"\0"]
    return b"".join(out)


def sealed_memfd(data: bytes) -> int:
    """The recipe in a sealed memfd, inherited by every slot of its index (close-on-exec here)."""
    fd = os.memfd_create("kiln-recipe", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
    return fd
