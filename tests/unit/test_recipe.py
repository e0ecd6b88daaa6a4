"""kiln-init's recipe (kiln/zygote/recipe.py), read back record by record: the same plans the
Python slots apply, in the same order, without root. That kiln-init applies it is tested for
real by every test that runs a plain slot (tests/api, tests/security, ...)."""

from __future__ import annotations

import dataclasses
import os
import posixpath
import struct
from pathlib import Path

import pytest

from kiln import config, runtime
from kiln.sandbox import mounts, plan
from kiln.sandbox.cgroup_v1 import V1SlotCgroup
from kiln.sandbox.cgroup_v2 import V2SlotCgroup
from kiln.sandbox.cgroups import NoSlotCgroup
from kiln.wire import protocol
from kiln.zygote import recipe

REPO = Path(__file__).resolve().parents[2]
UID = 10007


@pytest.fixture(scope="module")
def rt():
    return runtime.build(config.load({}, REPO))


@pytest.fixture(scope="module")
def root(rt):
    return plan.root_plan(uid=UID, gid=UID, host_paths=rt.host_paths, workspaces=str(rt.config.workspace), tmp_size=1 << 20, tmp_inodes=64, layers=rt.layers_dir)


@pytest.fixture
def v1_slot(tmp_path):
    """A v1 slot cgroup whose three directories are one folder with memsw accounting."""
    (tmp_path / "memory.memsw.limit_in_bytes").write_text("max\n")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield V1SlotCgroup("slot-x", (), (fd, fd, fd), (), {"memory": 0, "pids": 1, "cpuacct": 2})
    os.close(fd)


def decode(data: bytes) -> list[tuple[int, list[bytes]]]:
    assert data[:8] == recipe.MAGIC
    records, at = [], 8
    while at < len(data):
        kind, nargs = struct.unpack_from("<II", data, at)
        at += 8
        args = []
        for _ in range(nargs):
            (size,) = struct.unpack_from("<I", data, at)
            args.append(data[at + 4 : at + 4 + size])
            assert data[at + 4 + size] == 0  # NUL-terminated for the C side
            at += 4 + size + 1
        records.append((kind, args))
    return records


OP_KINDS = (recipe.K_BUILD, recipe.K_FINISH, recipe.K_FRESH, recipe.K_TEST_PROC, recipe.K_W_MOUNT)  # step, op code, args


def texts(args: list[bytes], kind: int = 0) -> tuple[str, ...]:
    """A record's args as text; an op record's code as its op's name."""
    words = [a.decode() for a in args]
    if kind in OP_KINDS:
        words[1] = recipe.OPS[int(words[1]) - 1]
    return tuple(words)


def of_kind(records, kind) -> list[tuple[str, ...]]:
    return [texts(args, kind) for k, args in records if k == kind]


def mount_record(step: str, args: mounts.MountArgs) -> tuple[str, ...]:
    return (step, "mount", *("" if a is None else str(a) for a in args))


def workload_records(records, slug: str) -> list[tuple[int, list[bytes]]]:
    start = next(i for i, (k, args) in enumerate(records) if k == recipe.K_WORKLOAD and args[0] == slug.encode())
    end = next((i for i in range(start + 1, len(records)) if records[i][0] == recipe.K_WORKLOAD), len(records))
    return records[start:end]


def test_constants_and_the_seccomp_filter(rt, root):
    records = decode(recipe.compile_recipe(3, root, rt, NoSlotCgroup("s")))
    consts = dict(zip(recipe.CONSTS, *of_kind(records, recipe.K_CONSTS), strict=True))
    assert consts == {
        "index": "3", "uid": str(UID), "input_max": str(rt.config.input_max), "output_max": str(rt.config.output_max),
        "timeout_max_ms": str(rt.config.timeout_max_ms), "starved_max_times": str(rt.starved_max_times), "judge_part_max": str(max(rt.config.judge_input_max, rt.config.file_max)),
        "layer_max": str(protocol.LAYER_MAX), "cwd": "/sandbox", "judge_dir": "judge", "upper": plan.OVERLAY_UPPER,
        "layers": plan.LAYERS_DIR, "setgroups": "1", "test_cgroups": "",
    }  # fmt: skip
    [(kind, [program])] = [(k, a) for k, a in records if k == recipe.K_SECCOMP]
    assert program == rt.seccomp_filter and len(program) % 8 == 0


@pytest.mark.parametrize(("slots", "cpus", "times"), [(10, 2, 10), (2, 2, 3), (1, 8, 3), (16, 4, 8), (5, 2, 5)])
def test_a_deadline_may_move_on_as_far_as_every_slot_busy_at_once_needs(rt, slots, cpus, times):
    # twice slots/cpus: each slot has cpus/slots of the machine when all are busy (the default,
    # 10 slots on 2 CPUs, had 3 before, and a bomb that needed 9 times its CPU alone was TLE)
    busy = dataclasses.replace(rt, config=dataclasses.replace(rt.config, concurrency=slots), cpus=cpus)
    assert busy.starved_max_times == times


def test_the_root_image_is_built_in_contain_build_roots_order(rt, root):
    ops = recipe.build_ops(root, "/run/kiln/root")
    names = [op[1] for op in ops]
    assert ops[:2] == [("keep the root image's mount namespace", "save_ns"), ("make mounts private", "mount", *mounts.PRIVATE_ARGS)]
    assert names[-3:] == ["pivot", "mount", "unshare_ns"]
    assert ops[-2] == ("make the root read-only", "mount", *mounts.readonly_args("/", root.root))
    # every bind read-only, nosuid, nodev on its whole tree, right after the bind
    for bind in (*root.binds, root.workspaces):
        target = mounts.under("/run/kiln/root", bind.path)
        at = ops.index((f"bind {bind.source}" if bind is not root.workspaces else "bind the workspaces", "mount", *mounts.bind_args(bind.source, target, bind.recursive)))
        assert ops[at + 1][1:] == ("setattr", target, mounts.READONLY_ATTRS, int(bind.recursive))
    # /dev and /sys are read-only once filled
    dev = mounts.under("/run/kiln/root", "/dev")
    assert ops.index(("build /dev", "mount", *mounts.readonly_args(dev, root.dev))) > max(i for i, op in enumerate(ops) if op[1] == "mknod")
    assert ("mount /sys", "mount", *mounts.readonly_args(mounts.under("/run/kiln/root", "/sys"), root.sys)) in ops


def test_every_slot_finishes_its_root_with_its_own_tmp_proc_and_upper_layer(rt, root):
    records = decode(recipe.compile_recipe(0, root, rt, NoSlotCgroup("s")))
    finish = of_kind(records, recipe.K_FINISH)
    assert finish[0] == mount_record("mount /tmp", mounts.tmpfs_args("/tmp", root.tmp))
    assert mount_record("mount /proc", mounts.proc_args("/proc")) in finish and "subset=pid" in mounts.proc_args("/proc")[-1]
    owned = [op[2:] for op in finish if op[1] == "mkdir"]
    assert owned == [(path, str(mode), str(UID if mine else -1), str(UID if mine else -1)) for path, mode, mine in plan.upper_layer_dirs()]
    assert finish[-1] == ("set the hostname", "hostname", "kiln")
    # a judge's test in a slot that runs several gets its own /tmp and upper layer again: the same steps
    fresh = of_kind(records, recipe.K_FRESH)
    assert fresh == [op for op in finish if op[0] != "mount /proc" and op[1] != "hostname"]
    # a later judge test's /proc, mounted by its own pid namespace's init: the slot's own op, as it is
    assert of_kind(records, recipe.K_TEST_PROC) == [op for op in finish if op[0] == "mount /proc" and op[1] == "mount"]


def test_where_the_zygote_holds_the_lower_layers_no_slot_binds_or_detaches_them(rt, root, v1_slot):
    """RootPlan.lower_held: the zygote's clones of the workspaces and layers folders are each
    slot's (kiln-init's descriptors): the root has no folder of binds, a job's overlay names its
    lower layer relative to the workspaces' clone and detaches nothing."""
    held = dataclasses.replace(root, lower_held=True)
    records = decode(recipe.compile_recipe(0, held, rt, v1_slot))
    build = of_kind(records, recipe.K_BUILD)
    assert not [op for op in build if "lower" in op[0] or "bind the" in op[0]]
    assert len(build) < len(of_kind(decode(recipe.compile_recipe(0, root, rt, v1_slot)), recipe.K_BUILD))
    for slug, workload in rt.workloads.items():
        steps = [texts(a, k) for k, a in workload_records(records, slug) if k == recipe.K_W_MOUNT]
        [overlay] = [step for step in steps if step[1] == "overlay"]
        assert overlay[3] == slug == posixpath.relpath(workload.lower, plan.WORKSPACES_DIR)  # one folder per language
        assert "detach" not in [step[1] for step in steps]


def test_each_language_gets_its_workspace_files_command_and_limits(rt, root, v1_slot):
    records = decode(recipe.compile_recipe(0, root, rt, v1_slot))
    for slug, workload in rt.workloads.items():
        mine = workload_records(records, slug)
        assert texts(mine[0][1]) == (slug, str(int(workload.language.has_client_harness)), str(workload.memory_max), str(workload.pids_max))
        steps = [texts(a, k) for k, a in mine if k == recipe.K_W_MOUNT]
        overlay = [step for step in steps if step[1] == "overlay"]
        assert overlay == [("mount the workspace", "overlay", "/sandbox", workload.lower, plan.OVERLAY_UPPER, plan.OVERLAY_WORK, str(mounts.OVERLAY_FLAGS))]
        # then the binds of the workspaces and the layers leave the task's mount table (they show host paths)
        after = steps.index(overlay[0])
        assert steps[after + 1] == ("hide the lower layers' folder", "detach", plan.LOWER_DIR)
        assert plan.WORKSPACES_DIR.startswith(plan.LOWER_DIR + "/") and plan.LAYERS_DIR.startswith(plan.LOWER_DIR + "/")
        # a judging workspace's build and exec commands
        assert of_kind(mine, recipe.K_W_BUILD_ARGV) == ([workload.build_argv] if workload.judges else [])
        assert of_kind(mine, recipe.K_W_EXEC_ARGV) == ([workload.exec_argv] if workload.judges else [])
        parts = dict(of_kind(mine, recipe.K_W_PART))
        assert parts["solution"] == workload.language.solution_file
        assert ("client_harness" in parts) == bool(workload.language.client_harness_file)
        assert of_kind(mine, recipe.K_W_ARGV) == [workload.argv]
        [env] = of_kind(mine, recipe.K_W_ENV)
        assert "PATH=" + rt.config.sandbox_path in env and "HOME=/sandbox" in env
        # only what differs from the limits the slot was warmed with is written per request
        writes = of_kind(mine, recipe.K_W_LIMIT)
        assert bool(writes) == ((workload.memory_max, workload.pids_max) != rt.common_limits)
        assert of_kind(mine, recipe.K_W_RLIMIT) == [(str(r), str(v)) for r, v in plan.fixed_rlimits(workload.pids_max)]


def test_v1_sets_the_memory_peak_back_between_a_slots_tests(rt, root, v1_slot):
    records = decode(recipe.compile_recipe(0, root, rt, v1_slot))
    assert of_kind(records, recipe.K_PEAK_RESET) == [("0", "memory.max_usage_in_bytes", "0")]


@pytest.mark.parametrize("peak_resets", [True, False])
def test_v2_sets_the_peak_back_from_6_12_and_before_it_runs_a_kept_slots_later_tests_in_cgroups_of_their_own(rt, root, tmp_path, peak_resets):
    for name in ("memory.swap.max", "memory.oom.group"):
        (tmp_path / name).write_text("max\n")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        records = decode(recipe.compile_recipe(0, root, rt, V2SlotCgroup("slot-x", (), (fd,), (), peak_resets)))
    finally:
        os.close(fd)
    consts = dict(zip(recipe.CONSTS, *of_kind(records, recipe.K_CONSTS), strict=True))
    if peak_resets:  # Linux 6.12: one cgroup, its peak set back through the descriptor read
        assert consts["test_cgroups"] == "" and of_kind(records, recipe.K_TEST_CG_PARENT) == []
        assert of_kind(records, recipe.K_PEAK_RESET) == [("0", "memory.peak", "reset")]
        return
    # before: the later tests' cgroups are test-<n> below the slot's, which gives them memory and
    # pids and takes the largest limits a language has (never below a test's own)
    largest = (max(w.memory_max for w in rt.workloads.values()), max(w.pids_max for w in rt.workloads.values()))
    assert consts["test_cgroups"] == "test-" and of_kind(records, recipe.K_PEAK_RESET) == []
    assert of_kind(records, recipe.K_TEST_CG_PARENT) == [
        ("0", "cgroup.subtree_control", "+memory +pids"),
        ("0", "memory.max", str(largest[0])),
        ("0", "memory.swap.max", "0"),
        ("0", "memory.oom.group", "1"),
        ("0", "pids.max", str(largest[1])),
    ]
    # a test's own cgroup takes the slot's warm limits as the slot did: the same records
    assert of_kind(records, recipe.K_WARM_LIMIT) == [("0", "memory.max", str(rt.common_limits[0])), ("0", "memory.swap.max", "0"), ("0", "memory.oom.group", "1"), ("0", "pids.max", str(rt.common_limits[1]))]


def test_a_jobs_own_limits_go_where_they_lower_the_slots(rt, root, v1_slot):
    records = decode(recipe.compile_recipe(0, root, rt, v1_slot))
    # v1 with swap accounting: memory before memory+swap (the kernel refuses memsw below memory)
    memory, pids = (str(protocol.JOB_LIMITS.index(what)) for what in ("memory", "pids"))  # written as their codes
    assert of_kind(records, recipe.K_JOB_LIMIT) == [(memory, "0", "memory.limit_in_bytes"), (memory, "0", "memory.memsw.limit_in_bytes"), (pids, "1", "pids.max")]
    assert of_kind(decode(recipe.compile_recipe(0, root, rt, NoSlotCgroup("s"))), recipe.K_JOB_LIMIT) == []


def test_a_prestarting_language_gets_its_prestart_and_template_commands(rt, root, v1_slot):
    records = decode(recipe.compile_recipe(0, root, rt, v1_slot))
    for slug, workload in rt.workloads.items():
        mine = workload_records(records, slug)
        assert of_kind(mine, recipe.K_W_PRESTART_ARGV) == ([workload.prestart_argv] if workload.prestart_argv else [])
        assert of_kind(mine, recipe.K_W_TEMPLATE_ARGV) == ([workload.template_argv] if workload.template_argv else [])
    assert of_kind(workload_records(records, "python"), recipe.K_W_TEMPLATE_ARGV) == [("/usr/bin/python3", "-B", "check/harness.py", "--template")]


def test_kiln_init_is_given_the_plans_rlimit_terms(rt, root):
    records = decode(recipe.compile_recipe(0, root, rt, NoSlotCgroup("s")))
    python = workload_records(records, "python")
    assert [tuple(map(int, r)) for r in of_kind(python, recipe.K_W_RLIMIT_CPU)] == [plan.cpu_rlimit_terms(rt.cpus)]
    assert [tuple(map(int, r)) for r in of_kind(python, recipe.K_W_RLIMIT)] == list(plan.fixed_rlimits(rt.workloads["python"].pids_max))


def test_limit_writes_take_a_v1_slot_from_its_preset_to_a_languages_limits(v1_slot):
    fresh = v1_slot.limit_writes(256 << 20, 64, previous=None)
    assert [(w.file, w.value) for w in fresh] == [("memory.limit_in_bytes", str(256 << 20)), ("memory.memsw.limit_in_bytes", str(256 << 20)), ("pids.max", "64")]
    raised = v1_slot.limit_writes(512 << 20, 64, previous=(256 << 20, 64))
    assert [w.file for w in raised][:2] == ["memory.memsw.limit_in_bytes", "memory.limit_in_bytes"]  # memsw may not be below memory


def test_stat_sources_name_each_figure_once(v1_slot):
    assert sorted(s.what for s in v1_slot.stat_sources()) == ["cpu", "memory_peak", "oom_kills", "pids_hits"]
    assert NoSlotCgroup("s").stat_sources() == () and NoSlotCgroup("s").limit_writes(1, 1, None) == ()


def test_the_recipe_is_sealed(rt, root):
    fd = recipe.sealed_memfd(recipe.compile_recipe(0, root, rt, NoSlotCgroup("s")))
    try:
        with pytest.raises(PermissionError):
            os.write(fd, b"x")
    finally:
        os.close(fd)



def test_tmp_and_the_upper_layer_are_resized_only_for_a_language_with_less_than_the_largest():
    rt = runtime.build(config.load({"RUN_TMP_SIZE_PYTHON": "16m"}, REPO))
    largest = max(w.tmp_size for w in rt.workloads.values())
    root = plan.root_plan(uid=UID, gid=UID, host_paths=rt.host_paths, workspaces=str(rt.config.workspace), tmp_size=largest, tmp_inodes=rt.config.tmp_inodes)
    records = decode(recipe.compile_recipe(0, root, rt, NoSlotCgroup("s")))
    for slug, workload in rt.workloads.items():
        resized = [texts(a, k)[3] for k, a in workload_records(records, slug) if k == recipe.K_W_MOUNT and texts(a, k)[1] == "mount" and a[4] != b"overlay"]
        assert resized == ([plan.UPPER_DIR, "/tmp"] if workload.tmp_size < largest else []), slug
    assert rt.workloads["python"].tmp_size == 16 << 20 < largest


def test_in_a_user_namespace_devices_are_the_hosts_bound_and_proc_is_mounted_beside_a_kept_one(rt):
    """Rootless (kiln/rootless.py): the kernel refuses mknod and mounts a procfs only where one is
    fully visible; the root keeps one at PROC_ANCHOR from before pivot_root, each slot mounts its
    /proc and detaches the anchor."""
    rootless = plan.root_plan(uid=UID, gid=UID, host_paths=rt.host_paths, workspaces=str(rt.config.workspace), tmp_size=1 << 20, tmp_inodes=64, in_user_namespace=True)
    records = decode(recipe.compile_recipe(0, rootless, rt, NoSlotCgroup("s")))
    build, finish = of_kind(records, recipe.K_BUILD), of_kind(records, recipe.K_FINISH)
    staging = rt.staging_dir
    assert [op for op in build if op[1] == "mknod"] == []
    for device in rootless.devices:
        target = mounts.under(staging, device.path)
        assert mount_record("build /dev", mounts.bind_args(device.path, target, False)) in build
        assert build.index(("build /dev", "touch", target, str(0o666))) < build.index(mount_record("build /dev", mounts.bind_args(device.path, target, False)))
    anchor = mount_record("keep a procfs to mount /proc beside", mounts.proc_args(mounts.under(staging, plan.PROC_ANCHOR)))
    assert build.index(anchor) < build.index(("pivot_root", "pivot", staging))
    proc = finish.index(mount_record("mount /proc", mounts.proc_args("/proc")))
    assert finish[proc + 1] == ("mount /proc", "detach", plan.PROC_ANCHOR)
    under_root = decode(recipe.compile_recipe(0, plan.root_plan(uid=UID, gid=UID, host_paths=rt.host_paths, workspaces=str(rt.config.workspace), tmp_size=1 << 20, tmp_inodes=64), rt, NoSlotCgroup("s")))
    assert len([op for op in of_kind(under_root, recipe.K_BUILD) if op[1] == "mknod"]) == len(rootless.devices)
    assert not any(plan.PROC_ANCHOR in " ".join(op) for op in of_kind(under_root, recipe.K_BUILD) + of_kind(under_root, recipe.K_FINISH))
