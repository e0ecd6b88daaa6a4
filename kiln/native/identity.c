/* Who a process is and what it holds: the task's identity (cgroup, cgroup namespace, user, no
 * capability) and its seccomp filter, the empty bounding set, init's death signal, and the
 * descriptors a process keeps. */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

/* The task's identity, taken by the task's own process while still root (the spawned task's
 * child before its exec, a plain slot's standby as the slot warms and at its job, or a forked
 * task as it enters its slot), never by init, which keeps root: a process may reschedule,
 * re-pin, renice or prlimit only processes of its own uid, so nothing the task does reaches the
 * process that enforces its limits. Into the slot's cgroup (init never joins: its own memory
 * and CPU are never the run's) and a cgroup namespace rooted there (the task sees "/", nothing
 * of kiln's tree): join_cgroups; then wholly the slot's user: no groups, every uid the slot's
 * (non-zero but rootless with one id mapped; capset empties every set) and no inheritable
 * capability either: take_user. Raw syscalls: they change this thread only, and a spawned
 * task's child shares init's memory until its exec. Return 0 or -1 with errno set. */
int join_cgroups(struct slot *s) {
    if (!s->born_in_cgroup) { /* v1 (a cgroup per hierarchy), or Linux < 5.7: a migration */
        if (s->n_procs == 0 && s->n_dirs > 0) return errno = EBADF, -1; /* a slot with cgroups: never a task outside them */
        for (int i = 0; i < s->n_procs; i++)
            if (syscall(SYS_write, s->cg_procs[i], "0", 1) != 1) return -1;
    }
    return syscall(SYS_unshare, CLONE_NEWCGROUP) ? -1 : 0;
}

/* Created in its cgroup, the task's process never migrates: a migration waits for an RCU grace
 * period (standby.c), which grows with the host's CPUs. Only a v2 cgroup can be named at a
 * clone (one directory, of cgroup2's filesystem); whether the kernel can is learnt at the first
 * clone, while the slot warms (clone_child). */
void choose_task_birth(struct slot *s) {
    struct statfs fs;
    s->born_in_cgroup = s->n_dirs == 1 && fstatfs(s->cg_dirs[0], &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

int birth_cgroup(const struct slot *s) {
    return s->born_in_cgroup ? s->cg_dirs[0] : -1;
}

int take_user(const struct slot *s) {
    struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[2] = {{0}};
    long uid = s->recipe.uid;
    if ((s->recipe.setgroups && syscall(SYS_setgroups, 0, NULL)) || syscall(SYS_setresgid, uid, uid, uid) || syscall(SYS_setresuid, uid, uid, uid) ||
        syscall(SYS_capset, &head, none))
        return -1;
    return 0;
}

int take_identity(struct slot *s) {
    return join_cgroups(s) || take_user(s) ? -1 : 0;
}

int take_filter(const struct slot *s, char *err) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return snprintf(err, ERR, "sandbox step 'set no_new_privs' failed: %s", strerror(errno)), -1;
    for (size_t i = 0; i < s->recipe.n; i++) {
        const struct rec *r = &s->recipe.recs[i];
        if (r->type != K_SECCOMP) continue;
        struct sock_fprog prog = {r->args[ARG(SECCOMP, program)].len / 8, (struct sock_filter *)r->args[ARG(SECCOMP, program)].p};
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) return snprintf(err, ERR, "sandbox step 'load seccomp' failed: %s", strerror(errno)), -1;
    }
    return 0;
}

/* no exec of the job's (file capabilities, setuid root) gains a capability */
int empty_bounding_set(void) {
    int cap = 0;
    while (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) cap++;
    if (errno != EINVAL) return -1; /* EINVAL: past the last capability this kernel has */
    return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

void arm_death_signal(const struct slot *s) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct pollfd zygote = {s->zygote, POLLIN, 0};
    if (poll(&zygote, 1, 0) > 0) _exit(0); /* the zygote died before the signal was armed */
}

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

void keep_only(int *keep, int n) {
    qsort(keep, n, sizeof *keep, cmp_int);
    unsigned first = 3;
    for (int i = 0; i < n; i++) {
        if (keep[i] < 3) continue;
        if ((unsigned)keep[i] > first) syscall(SYS_close_range, first, keep[i] - 1, 0);
        first = keep[i] + 1;
        fcntl(keep[i], F_SETFD, FD_CLOEXEC);
    }
    syscall(SYS_close_range, first, ~0U, 0);
}
