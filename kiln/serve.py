"""`kiln serve`: parse the configuration, resolve the languages, start the zygote (a fresh
interpreter, see kiln/zygote/boot.py; before gevent is imported or any thread exists), then
become the front."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import sys
from pathlib import Path

from kiln import config as config_module
from kiln import kernel, native, rootless
from kiln import runtime as runtime_module
from kiln import systemd
from kiln.config import Config, ConfigError
from kiln.log import Log
from kiln.runtime import StartupError

CAP_SYS_ADMIN = 21
REPO_ROOT = Path(__file__).resolve().parent.parent


def has_sys_admin() -> bool:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    return False


# uids that stand for "no one in particular": other services and NFS's squashed clients run as
# them; the kernel shows an unmapped id as the overflow uid (65534)
SHARED_USERS = ("nobody", "nfsnobody")


def overflow_uid() -> int:
    try:
        with open("/proc/sys/kernel/overflowuid") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 65534


def resolve_user(name: str, shared_refused: bool = True) -> tuple[int, int]:
    """RUN_FRONT_USER's ids. The front owns the cached builds and the file store (submissions,
    checkers, tests), readable by it alone: a user other processes of the host run as (nobody)
    could read them and rewrite a cached build, so it is refused (`shared_refused`), as root is."""
    try:
        entry = pwd.getpwnam(name) if not name.isdigit() else pwd.getpwuid(int(name))
    except KeyError:
        raise StartupError(
            f"RUN_FRONT_USER={name!r}: no such user; create it (`scripts/setup.sh` makes kiln's own, `kiln`: "
            "useradd --system --user-group --no-create-home --shell /usr/sbin/nologin kiln) or pick another"
        ) from None
    if entry.pw_uid == 0:
        raise StartupError(f"RUN_FRONT_USER={name!r} is root; the front only parses HTTP and must not keep root")
    if shared_refused and (entry.pw_name in SHARED_USERS or entry.pw_uid == overflow_uid()):
        raise StartupError(
            f"RUN_FRONT_USER={name!r} is shared with other processes of this host; the front owns the cached builds and "
            "the file store, which another process of that user could read and rewrite. Give kiln a user of its own "
            "(`scripts/setup.sh` makes `kiln`, the default)"
        )
    return entry.pw_uid, entry.pw_gid


def front_ids(config: Config, user_namespace: rootless.UserNamespace | None) -> tuple[int, int]:
    """The front's uid and gid; rootless, they and the slots' must be mapped ids."""
    if user_namespace is not None and user_namespace.single_id:
        return 0, 0  # the one id there is (UserNamespace.weaker says so)
    # rootless, the front's ids are kiln's user's subordinate ids on the host: nobody's of no one else
    uid, gid = resolve_user(config.front_user, shared_refused=user_namespace is None)
    if user_namespace is None:
        return uid, gid
    unmapped = [f"RUN_FRONT_USER={config.front_user!r} (uid {uid}, gid {gid})"] if not user_namespace.maps(uid, gid) else []
    last = config.uid_base + config.concurrency - 1
    if not (user_namespace.maps(config.uid_base, config.uid_base) and user_namespace.maps(last, last)):
        unmapped.append(f"the slots' ids RUN_UID_BASE={config.uid_base} to {last}")
    if unmapped:
        raise StartupError(
            f"rootless: {' and '.join(unmapped)} are not mapped in kiln's user namespace "
            f"(uid map {', '.join(map(str, user_namespace.uid_map))}); give {user_namespace.user} a larger /etc/subuid "
            "and /etc/subgid range or choose ids inside it"
        )
    return uid, gid


def listen(config: Config) -> socket.socket:
    if config.systemd.listen_fds:
        try:
            return systemd.activated_listener()  # socket activation: restarts drop no connection
        except OSError as error:
            raise StartupError(str(error)) from None
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((config.host, config.port))
    except OSError as error:
        raise StartupError(f"cannot listen on {config.host}:{config.port}: {error.strerror}") from None
    listener.listen(1024)
    return listener


def refuse_a_running_instance(instance: str) -> None:
    """A second kiln of one RUN_INSTANCE would take the first's slot cgroups for a crashed
    kiln's leftovers and kill them, and remove its /run/<instance> when it stops."""
    from kiln.slots import NotRunning, find_zygote  # noqa: PLC0415 - psutil, for this check only

    try:
        zygote = find_zygote(instance)
    except NotRunning:
        return
    raise StartupError(f"a kiln with RUN_INSTANCE={instance} is running (its zygote is pid {zygote.pid}); stop it, or give this one another RUN_INSTANCE")


def prepare_directories(runtime, uid: int, gid: int) -> None:
    """/run/<instance> (the zygote's), and the folders the front writes as RUN_FRONT_USER, its
    alone (0700: no other user of the host reads a cached submission, checker or test): the
    judge's build layers (emptied: a build cache does not outlive the service; root's slots read
    them, and a task the files in them, whose modes stay as the build left them) and the file
    store (kept: it survives a restart)."""
    os.makedirs(runtime.runtime_dir, 0o755, exist_ok=True)
    shutil.rmtree(runtime.layers_dir, ignore_errors=True)
    for path in (runtime.layers_dir, str(runtime.config.file_store)):
        os.makedirs(path, 0o700, exist_ok=True)
        os.chmod(path, 0o700)
    # the store's files may be another front's (a rootless kiln's before a root one, or another
    # RUN_FRONT_USER), or an older kiln's, readable by others: they become this front's alone
    for folder, _, names in os.walk(runtime.config.file_store, topdown=False):
        for path, mode in [*((os.path.join(folder, name), 0o600) for name in names), (folder, 0o700)]:
            owned = os.lstat(path)
            if (owned.st_uid, owned.st_gid) != (uid, gid):
                os.lchown(path, uid, gid)
            if not os.path.islink(path) and owned.st_mode & 0o777 != mode:
                os.chmod(path, mode)
    os.chown(runtime.layers_dir, uid, gid)


def remove_directories(runtime) -> None:
    """A start that failed after prepare_directories leaves nothing in /run: the layers folder
    goes, and /run/<instance> where it is left empty (the file store stays, as on any stop)."""
    shutil.rmtree(runtime.layers_dir, ignore_errors=True)
    try:
        os.rmdir(runtime.runtime_dir)
    except OSError:
        pass  # not empty, or not ours to remove


# set in the environment of a kiln that asked systemd for a scope: it asks once
SCOPE_VARIABLE = "KILN_SCOPE"


def enter_a_scope(config: Config, environ: dict[str, str], log: Log) -> None:
    """On a cgroup v2 host under systemd, where kiln was started in a cgroup that cannot hold
    its slots' (a login shell's session scope, `make run`, a service without Delegate=yes),
    execs itself again as a transient scope of its own with Delegate=yes, as podman does; kiln
    keeps its pid, its terminal and its environment. Returns where no scope is wanted or none
    can be had (the cgroup driver's error then says what to do)."""
    from kiln.sandbox import cgroup_detect  # noqa: PLC0415

    if environ.get(SCOPE_VARIABLE) or environ.get("NOTIFY_SOCKET") or not systemd.booted():
        return  # asked already; or a unit's main process, whose unit must say Delegate=yes
    user = os.geteuid() != 0
    if user and not systemd.user_manager_reachable(environ):
        return
    reason = cgroup_detect.read_scope_wanted(config.cgroup, config.instance)
    if reason is None:
        return
    unit = config.instance
    log.info("asking systemd for a delegated scope", unit=f"{unit}.scope", reason=reason)
    command = systemd.scope_command(unit, [sys.executable, "-m", "kiln", "serve"], user)
    try:
        os.execvpe(command[0], command, {**environ, SCOPE_VARIABLE: f"{unit}.scope"})
    except OSError as error:
        log.warning("cannot ask systemd for a scope", error=str(error))


def serve(environ: dict[str, str]) -> int:
    try:
        config = config_module.load(environ, REPO_ROOT, os.getpid())
    except ConfigError as error:
        print(f"kiln: bad configuration:\n{error}", file=sys.stderr)
        return 2
    log = Log(config.log_format, config.debug)
    for warning in config.warnings:
        log.warning(warning)
    enter_a_scope(config, environ, log)
    user_namespace = None
    if os.geteuid() != 0:  # first, while serve is one thread: the kernel's condition for it
        try:
            user_namespace = rootless.enter()
        except rootless.RootlessError as error:
            log.error("cannot start rootless", error=str(error))
            return 1
        log.warning("ROOTLESS: kiln runs in a user namespace of its own", **user_namespace.summary())
        for weaker in user_namespace.weaker():
            log.warning(f"ROOTLESS, weaker than under root: {weaker}")
    surveyed = kernel.survey()
    needed = kernel.missing_needed(surveyed)
    if needed:
        log.error("cannot start: this kernel lacks what kiln needs", missing=[kernel.describe_missing(f) for f in needed])
        return 1
    for feature, found in surveyed:
        if not found:
            log.info("kernel feature missing", kernel=os.uname().release, feature=feature.name, since=feature.since, instead=feature.without)
    if not has_sys_admin():
        log.error("kiln serve needs root (CAP_SYS_ADMIN) or an ordinary user to build sandboxes (rootless); there is no unsandboxed mode")
        return 1
    try:
        native.check_built()
    except native.NotBuilt as error:
        log.error("cannot start", error=str(error))
        return 1
    try:
        refuse_a_running_instance(config.instance)
        runtime = runtime_module.build(config, user_namespace)
        uid, gid = front_ids(config, user_namespace)
        listener = listen(config)
    except StartupError as error:
        log.error("cannot start", error=str(error))
        return 1
    log.info("configuration", **config.summary())
    for workload in runtime.workloads.values():
        log.info("language", slug=workload.slug, version=runtime.versions.get(workload.slug), command=workload.script)
    for unserved in runtime.unserved:
        log.warning("language not served", slug=unserved.slug, reason=unserved.reason)

    try:
        prepare_directories(runtime, uid, gid)
    except OSError as error:
        remove_directories(runtime)
        hint = f" (rootless: have root create it owned by {user_namespace.user}, as `make run-rootless` does)" if user_namespace else ""
        log.error("cannot start", error=f"{error.filename}: {error.strerror}{hint}")
        return 1

    from kiln.sandbox import cgroup_detect, cgroups  # noqa: PLC0415

    try:
        cgroup_driver = cgroup_detect.open_driver(config.cgroup, config.instance, log)
        cgroup_driver.setup()  # on v2 this moves us (front and zygote to be) into a leaf
    except cgroups.CgroupError as error:
        remove_directories(runtime)
        log.error("cannot start", error=str(error))
        return 1
    if cgroup_driver.reason:
        log.warning(f"CGROUPS UNAVAILABLE: runs have no memory or pids limit and report no OOM: {cgroup_driver.reason}")
    elif not cgroup_detect.read_migrations_favoured():
        log.info(
            "cgroup migrations are not favoured: after a pause a judge's later test may wait 3-8 ms to join its cgroup (a /run's task joins while its slot warms); "
            "mount the cgroup hierarchy with favordynmods (mount -o remount,favordynmods /sys/fs/cgroup)"
        )
    from kiln.zygote import boot  # noqa: PLC0415

    try:
        pid, front_end = boot.start(runtime, log, cgroup_driver)
    except OSError as error:
        remove_directories(runtime)
        log.error("cannot start the zygote", error=str(error))
        return 1
    from kiln.http.server import Front  # noqa: PLC0415 - gevent only once the zygote is started

    return Front(runtime, front_end, pid, listener, log, cgroup_driver.reason).run(uid, gid)
