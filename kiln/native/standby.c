/* A plain slot's task process, made while the slot warms (the standby).
 *
 * Why: a process enters a cgroup by a write to cgroup.procs, which takes the kernel's
 * cgroup_threadgroup_rwsem for writing; unless another migration happened in the last few
 * milliseconds, that waits for an RCU grace period: 5-13 ms on a 2-core VM, on most requests of
 * a client that pauses between them (a player pressing "check"), against a 1 ms run. The
 * standby pays it while warming: cloned from init sharing its memory and descriptors
 * (CLONE_VM | CLONE_FILES, as vfork shares them), it joins the slot's cgroups and cgroup
 * namespace and loads the filter (off the request's path: its load is ~0.05 ms; what the
 * standby does after it, the user's setuid calls among them, the filter allows), and waits. At the job, init has written the rlimits onto it (still root:
 * a process of another uid would take init CAP_SYS_RESOURCE, which a service manager may
 * withhold) and releases it with the command; it takes its own copy of init's descriptors (the
 * job's pipes among them; close_range, which the filter allows where it kills unshare), enters
 * the workspace, takes the slot's user, lays out its descriptors and execs. A judge's first
 * test runs in the slot's warm mount namespace itself (kept.c fresh_sandbox), so the standby
 * never has to enter another: the filter would not let it.
 *
 * The two share one address space, so one errno: while the standby runs libc code, init is
 * inside a raw futex wait (raw_syscall(), no errno), and the standby's own waits are raw too. Init
 * learns that the standby exec'd (or exited) as vfork's parent does, from the kernel: the tid
 * word CLONE_CHILD_CLEARTID names is cleared, and woken, when the standby's memory is let go. */
#include "kiln.h"
#include "vfork.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { PREPARING, WAITING, RELEASED, FAILED };

static void wait_while(volatile int *word, int value) {
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == value) raw_syscall(SYS_futex, (long)word, FUTEX_WAIT, value, 0);
}

static void set_and_wake(volatile int *word, int value) {
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
    raw_syscall(SYS_futex, (long)word, FUTEX_WAKE, 1, 0);
}

static int fail(struct standby *b, const char *step, int error) {
    b->failed = step, b->error = error ? error : EINVAL;
    return 127;
}

/* what the task's process does once, while the slot warms: NULL, or the step that failed */
static const char *prepare(struct slot *s, char *err) {
    if (join_cgroups(s)) return "the task's process joins the slot's cgroup";
    if (take_filter(s, err)) return "load seccomp";
    return NULL;
}

/* the standby's life: prepared, waiting, then the job's own steps and its exec */
static int standby_main(void *arg) {
    struct slot *s = arg;
    struct standby *b = &s->standby;
    char err[ERR];
    const char *failed = prepare(s, err);
    if (failed) {
        fail(b, failed, errno);
        set_and_wake(&b->state, FAILED);
        return 127;
    }
    set_and_wake(&b->state, WAITING);
    wait_while(&b->state, WAITING);
    if (syscall(SYS_close_range, ~0U, ~0U, CLOSE_RANGE_UNSHARE)) return fail(b, "take its own descriptors", errno);
    if (!s->recipe.cwd || chdir(s->recipe.cwd)) return fail(b, "enter the workspace", s->recipe.cwd ? errno : ENOENT);
    if (take_user(s)) return fail(b, "take the slot's user", errno);
    for (int i = 0; i < b->nfds; i++) /* sources above the targets or their own (exec.c) */
        if (b->fds[i] == i ? fcntl(i, F_SETFD, 0) < 0 : dup2(b->fds[i], i) < 0) return fail(b, "lay out descriptors", errno);
    set_disposition(SIGPIPE, SIG_DFL);
    set_disposition(SIGXFSZ, SIG_DFL);
    uint64_t none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8);
    execve(b->path, b->argv, b->envp);
    return fail(b, NULL, errno);
}

int standby_make(struct slot *s, char *err) {
    static char stack[64 * 1024] __attribute__((aligned(16)));
    struct standby *b = &s->standby;
    b->state = PREPARING, b->tid = 1, b->failed = NULL, b->error = 0;
    pid_t pid = clone_child(CLONE_VM | CLONE_FILES | CLONE_CHILD_CLEARTID, birth_cgroup(s), &s->born_in_cgroup, stack, sizeof stack, standby_main, s, &b->tid);
    if (pid < 0) return snprintf(err, ERR, "sandbox step 'make the task's process' failed: %s", strerror(errno)), -1;
    wait_while(&b->state, PREPARING);
    if (b->state == FAILED) {
        reap(pid);
        return snprintf(err, ERR, "sandbox step '%s' failed: %s", b->failed, strerror(b->error)), -1;
    }
    b->pid = pid;
    return 0;
}

pid_t standby_release(struct slot *s, const char *path, char *const argv[], char *const envp[], const int *fds, int nfds, const char **failed, int *error) {
    struct standby *b = &s->standby;
    pid_t pid = b->pid;
    b->path = path, b->argv = argv, b->envp = envp, b->fds = fds, b->nfds = nfds;
    b->pid = 0;
    set_and_wake(&b->state, RELEASED);
    for (int tid; (tid = __atomic_load_n(&b->tid, __ATOMIC_ACQUIRE)) != 0;) raw_syscall(SYS_futex, (long)&b->tid, FUTEX_WAIT, tid, 0);
    if (!b->error) return pid;
    reap(pid);
    *failed = b->failed, *error = b->error;
    return -1;
}
