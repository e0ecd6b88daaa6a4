"""The seccomp policy, probed with C programs compiled and run inside the sandbox.

The KILL list below is copied from DESIGN.md ("Sandbox" -> Seccomp), not imported from kiln:
the test checks the implementation against the design.
"""

from __future__ import annotations

import pytest

from seclib import assert_exited, assert_killed_by_seccomp, c_program, syscall_probe

# DESIGN.md: KILL_PROCESS for ...
KILL_LIST = (
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "seccomp", "bpf", "keyctl",
    "add_key", "request_key", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "swapon", "swapoff", "reboot", "acct", "quotactl", "perf_event_open",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "userfaultfd", "iopl", "ioperm",
    "name_to_handle_at", "open_by_handle_at", "lookup_dcookie", "nfsservctl", "personality",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "pidfd_getfd", "syslog", "fanotify_init",
)  # fmt: skip

# Arguments that would be harmless if the call went through (all zeros unless listed). seccomp
# with zeros would enter strict mode; personality(0) is PER_LINUX, which the policy allows.
KILL_ARGS = {
    "seccomp": "-1, 0, 0, 0, 0, 0",
    "personality": "ADDR_NO_RANDOMIZE, 0, 0, 0, 0, 0",
}


@pytest.mark.parametrize("name", KILL_LIST)
def test_every_syscall_of_the_kill_list_kills_the_process(run_c, name):
    body = run_c(syscall_probe(name, KILL_ARGS.get(name, "0, 0, 0, 0, 0, 0")))
    assert_killed_by_seccomp(body)


# Realistic attacks, one per privileged operation. Each either dies by seccomp ("killed") or is
# refused by the kernel because the task has no capabilities (the errno it gets).
PRIVILEGED = {
    "chroot": ("killed", 'syscall(SYS_chroot, "/tmp")'),
    "sethostname": ("EPERM", 'sethostname("pwned", 5)'),
    "setdomainname": ("EPERM", 'setdomainname("pwned", 5)'),
    "mknod_char_device": ("EPERM", 'mknod("/tmp/mem", S_IFCHR | 0666, makedev(1, 1))'),
    "mknod_block_device": ("EPERM", 'mknod("/tmp/vda", S_IFBLK | 0666, makedev(254, 0))'),
    "mount_tmpfs": ("killed", 'syscall(SYS_mount, "none", "/tmp", "tmpfs", 0L, 0L)'),
    "mount_proc": ("killed", 'syscall(SYS_mount, "proc", "/tmp", "proc", 0L, 0L)'),
    "umount_proc": ("killed", 'syscall(SYS_umount2, "/proc", MNT_DETACH)'),
    "unshare_user_mount": ("killed", "syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWNS)"),
    "unshare_net": ("killed", "syscall(SYS_unshare, CLONE_NEWNET)"),
    "setns_net": ("killed", 'syscall(SYS_setns, open("/proc/self/ns/net", O_RDONLY), 0)'),
    "setns_mnt": ("killed", 'syscall(SYS_setns, open("/proc/self/ns/mnt", O_RDONLY), CLONE_NEWNS)'),
    "ptrace_traceme": ("killed", "syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0)"),
    "ptrace_attach_parent": ("killed", "syscall(SYS_ptrace, PTRACE_ATTACH, (long)getppid(), 0, 0)"),
    "bpf_prog_load": ("killed", "syscall(SYS_bpf, 5 /* BPF_PROG_LOAD */, attr, sizeof attr)"),
    "bpf_map_create": ("killed", "syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, attr, sizeof attr)"),
    "keyctl_join_session": ("killed", 'syscall(SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, "kiln")'),
    "add_key_user": ("killed", 'syscall(SYS_add_key, "user", "kiln", "x", 1L, -3L /* session */)'),
    "kexec_load": ("killed", "syscall(SYS_kexec_load, 0L, 0L, 0L, 0L)"),
    "kexec_file_load": ("killed", "syscall(SYS_kexec_file_load, 0L, 0L, 0L, \"\", 0L)"),
    "init_module": ("killed", 'syscall(SYS_init_module, attr, sizeof attr, "")'),
    "finit_module": ("killed", 'syscall(SYS_finit_module, open("/usr/bin/true", O_RDONLY), "", 0)'),
    "delete_module": ("killed", 'syscall(SYS_delete_module, "ext4", O_NONBLOCK)'),
    "reboot": ("killed", "syscall(SYS_reboot, 0xfee1dead, 672274793, 0x4321fedc /* POWER_OFF */, 0)"),
    "pivot_root": ("killed", 'syscall(SYS_pivot_root, "/tmp", "/tmp")'),
    "open_tree_clone": ("killed", 'syscall(SYS_open_tree, AT_FDCWD, "/usr", 1 /* OPEN_TREE_CLONE */)'),
    "fsopen_tmpfs": ("killed", 'syscall(SYS_fsopen, "tmpfs", 0)'),
    "syslog_read_all": ("killed", "syscall(SYS_syslog, 3 /* READ_ALL */, attr, sizeof attr)"),
    "iopl_3": ("killed", "syscall(SYS_iopl, 3)"),
    "ioperm_all": ("killed", "syscall(SYS_ioperm, 0L, 65536L, 1L)"),
    "perf_event_open": ("killed", "syscall(SYS_perf_event_open, attr, 0, -1, -1, 0)"),
}


@pytest.mark.parametrize("name", PRIVILEGED)
def test_privileged_operation_is_killed_or_refused(run_c, name):
    expected, call = PRIVILEGED[name]
    body = run_c(
        c_program(
            f"""
    static char attr[256];
    say("BEFORE\\n");
    errno = 0;
    long r = (long)({call});
    say("AFTER %ld %s\\n", r, ename(errno));
"""
        )
    )
    if expected == "killed":
        assert_killed_by_seccomp(body)
    else:
        assert_exited(body)
        assert body["stdout"] == f"BEFORE\nAFTER -1 {expected}\n"


def test_setuid_root_and_friends_are_refused(run_c):
    body = run_c(
        c_program(
            r"""
    gid_t none[1] = {0};
    long r;
#define TRY(label, call) do { errno = 0; r = (long)(call); say("%s %ld %s\n", label, r, ename(errno)); } while (0)
    TRY("setuid", setuid(0));
    TRY("seteuid", seteuid(0));
    TRY("setresuid", setresuid(0, 0, 0));
    TRY("setgid", setgid(0));
    TRY("setgroups", setgroups(1, none));
    TRY("raw-setuid", syscall(SYS_setuid, 0));
    say("uid %d %d gid %d %d\n", getuid(), geteuid(), getgid(), getegid());
"""
        )
    )
    assert_exited(body)
    lines = body["stdout"].splitlines()
    assert lines[:6] == [
        "setuid -1 EPERM",
        "seteuid -1 EPERM",
        "setresuid -1 EPERM",
        "setgid -1 EPERM",
        "setgroups -1 EPERM",
        "raw-setuid -1 EPERM",
    ]
    uid = int(lines[6].split()[1])
    assert uid >= 21000 and lines[6] == f"uid {uid} {uid} gid {uid} {uid}"


def test_x32_syscall_kills(run_c):
    body = run_c(
        c_program(
            r"""
    say("BEFORE\n");
    errno = 0;
    long r = syscall(__X32_SYSCALL_BIT | SYS_getpid);
    say("AFTER %ld %s\n", r, ename(errno));
"""
        )
    )
    assert_killed_by_seccomp(body)


def test_i386_int80_syscall_kills(run_c):
    """The other foreign ABI of an x86_64 kernel: int $0x80 (getpid is 20 there)."""
    body = run_c(
        c_program(
            r"""
    say("BEFORE\n");
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
    say("AFTER %ld\n", r);
"""
        )
    )
    assert_killed_by_seccomp(body)


CLONE_FLAGS = ("CLONE_NEWUSER", "CLONE_NEWNS", "CLONE_NEWPID", "CLONE_NEWNET", "CLONE_NEWUTS", "CLONE_NEWIPC", "CLONE_NEWCGROUP")


@pytest.mark.parametrize("flag", CLONE_FLAGS)
def test_raw_clone_with_a_namespace_flag_kills(run_c, flag):
    body = run_c(
        c_program(
            f"""
    say("BEFORE\\n");
    errno = 0;
    long pid = syscall(SYS_clone, {flag} | SIGCHLD, 0L, 0L, 0L, 0L);
    if (pid == 0) _exit(0);
    say("AFTER %ld %s\\n", pid, ename(errno));
"""
        )
    )
    assert_killed_by_seccomp(body)


def test_plain_fork_and_threads_still_work(run_c):
    """The clone rule must not catch ordinary process and thread creation (and clone3's ENOSYS
    must leave glibc's fallback working)."""
    body = run_c(
        c_program(
            r"""
    pid_t pid = fork();
    if (pid == 0) _exit(7);
    int status = 0;
    waitpid(pid, &status, 0);
    pthread_t thread;
    int made = pthread_create(&thread, NULL, worker, NULL);
    void *out = NULL;
    pthread_join(thread, &out);
    say("fork %d thread %d %ld\n", WEXITSTATUS(status), made, (long)out);
""",
            includes="#include <pthread.h>\nstatic void *worker(void *arg) { (void)arg; return (void *)42L; }\n",
        )
    )
    assert_exited(body)
    assert body["stdout"] == "fork 7 thread 0 42\n"


CLONE3_ARGS = r"""
struct kiln_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};
"""


def test_clone3_returns_enosys(run_c):
    """clone3 passes its flags in memory, out of BPF's reach: it is refused with ENOSYS (even
    with a namespace flag), so libc falls back to clone, whose flags the filter checks."""
    body = run_c(
        c_program(
            r"""
    struct kiln_clone_args plain = {0}, userns = {0};
    plain.exit_signal = SIGCHLD;
    userns.flags = CLONE_NEWUSER;
    userns.exit_signal = SIGCHLD;
    errno = 0;
    long r = syscall(SYS_clone3, &plain, sizeof plain);
    if (r == 0) _exit(0);
    say("clone3 %ld %s\n", r, ename(errno));
    errno = 0;
    r = syscall(SYS_clone3, &userns, sizeof userns);
    if (r == 0) _exit(0);
    say("clone3-newuser %ld %s\n", r, ename(errno));
""",
            includes=CLONE3_ARGS,
        )
    )
    assert_exited(body)
    assert body["stdout"] == "clone3 -1 ENOSYS\nclone3-newuser -1 ENOSYS\n"


def test_io_uring_is_refused_with_eperm(run_c):
    """EPERM even where the kernel would answer EBADF/EFAULT: the filter answers, not the kernel."""
    body = run_c(
        c_program(
            r"""
    static char params[120];
    long r;
    errno = 0; r = syscall(SYS_io_uring_setup, 8, params); say("setup %ld %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_io_uring_enter, -1, 1, 0, 0, 0L, 0L); say("enter %ld %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_io_uring_register, -1, 0, 0L, 0); say("register %ld %s\n", r, ename(errno));
"""
        )
    )
    assert_exited(body)
    assert body["stdout"] == "setup -1 EPERM\nenter -1 EPERM\nregister -1 EPERM\n"


def test_legacy_aio_is_refused_with_eperm_and_takes_nothing_of_the_hosts_budget(run_c):
    """io_setup's contexts come from one host-wide budget (fs.aio-max-nr): a run that took it
    whole failed every other process's io_setup, other runs' included."""
    aio_nr = int(open("/proc/sys/fs/aio-nr").read())
    body = run_c(
        c_program(
            r"""
    unsigned long ctx = 0;
    long r;
    errno = 0; r = syscall(SYS_io_setup, 65536, &ctx); say("setup %ld %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_io_setup, 1, &ctx); say("setup-one %ld %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_io_submit, 0, 0, 0L); say("submit %ld %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_io_getevents, 0, 0, 0, 0L, 0L); say("getevents %ld %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_io_pgetevents, 0, 0, 0, 0L, 0L, 0L); say("pgetevents %ld %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_io_cancel, 0, 0L, 0L); say("cancel %ld %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_io_destroy, 0); say("destroy %ld %s\n", r, ename(errno));
"""
        )
    )
    assert_exited(body)
    assert body["stdout"] == "".join(f"{name} -1 EPERM\n" for name in ("setup", "setup-one", "submit", "getevents", "pgetevents", "cancel", "destroy"))
    assert int(open("/proc/sys/fs/aio-nr").read()) <= aio_nr


def test_inotify_is_refused_so_a_run_cannot_watch_the_shared_trees(run_c):
    """Every sandbox binds the same /usr: a watch there would show which modules or headers a
    concurrent run (an opponent) opens."""
    body = run_c(
        c_program(
            r"""
    long r;
    errno = 0; r = syscall(SYS_inotify_init1, 0); say("init1 %ld %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_inotify_init); say("init %ld %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_inotify_add_watch, 0, "/usr/include", 0x20); say("add %ld %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_inotify_rm_watch, 0, 1); say("rm %ld %s\n", r, ename(errno));
"""
        )
    )
    assert_exited(body)
    assert body["stdout"] == "init1 -1 EPERM\ninit -1 EPERM\nadd -1 EPERM\nrm -1 EPERM\n"


def test_netlink_is_only_the_route_protocol(run_c):
    """NETLINK_ROUTE sees the slot's own empty network namespace (libc asks it about
    interfaces); the others reach the host's: uevents (every device event), audit, sock_diag."""
    body = run_c(
        c_program(
            r"""
    static const struct { const char *name; long protocol; } tried[] = {
        {"route", 0}, {"sock_diag", 4}, {"audit", 9}, {"uevent", 15}, {"generic", 16}, {"route-high-bits", 0x100000000L},
    };
    for (unsigned i = 0; i < sizeof tried / sizeof tried[0]; i++) {
        errno = 0;
        long fd = syscall(SYS_socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, tried[i].protocol);
        say("%s %s\n", tried[i].name, fd >= 0 ? "open" : ename(errno));
    }
"""
        )
    )
    assert_exited(body)
    assert body["stdout"] == "route open\nsock_diag EPROTONOSUPPORT\naudit EPROTONOSUPPORT\nuevent EPROTONOSUPPORT\ngeneric EPROTONOSUPPORT\nroute-high-bits EPROTONOSUPPORT\n"


def test_personality_query_and_per_linux_are_allowed(run_c):
    body = run_c(
        c_program(
            r"""
    long r;
    errno = 0; r = syscall(SYS_personality, 0xffffffffL); say("query %#lx %s\n", r, ename(errno));
    errno = 0; r = syscall(SYS_personality, (long)PER_LINUX); say("linux %#lx %s\n", r, ename(errno));
    errno = 0; r = personality(0xffffffff); say("libc %#lx %s\n", r, ename(errno));
"""
        )
    )
    assert_exited(body)
    assert body["stdout"] == "query 0 0\nlinux 0 0\nlibc 0 0\n"


@pytest.mark.parametrize("persona", ["ADDR_NO_RANDOMIZE", "READ_IMPLIES_EXEC", "PER_LINUX32", "PER_BSD", "ADDR_NO_RANDOMIZE | 0x100000000L"])
def test_personality_with_anything_else_kills(run_c, persona):
    body = run_c(
        c_program(
            f"""
    say("BEFORE %#lx\\n", syscall(SYS_personality, 0xffffffffL));
    errno = 0;
    long r = syscall(SYS_personality, (long)({persona}));
    say("AFTER %#lx %s\\n", r, ename(errno));
"""
        )
    )
    assert_killed_by_seccomp(body, stdout="BEFORE 0\n")
