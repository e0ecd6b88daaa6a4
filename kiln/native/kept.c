/* A kept slot: a plain slot that runs one judge request's tests one after another, while the
 * front sends them (init.c serve_job), each in a sandbox of its own. Its steps between tests:
 * each test's fresh sandbox, the cgroup's limits written only when they change, and every process
 * of the last test gone before the next. (A later test's own pid namespace is testinit.c's.) */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A judge's test in a kept slot: a copy of the slot's warm mount namespace of its own (the
 * previous test's overlay and binds' detaching stay in its copy, gone with it), over which its
 * own upper layer and /tmp are mounted afresh, and IPC and network namespaces of its own from the
 * second test on (a network namespace keeps IPv6 flow labels past their sockets): nothing a test
 * leaves is seen by the next. The first test runs in the warm namespace itself, where the standby
 * waits (its filter would not let it enter another), once init has kept a copy of it as the later
 * tests' base. */
int fresh_sandbox(struct slot *s, char *err) {
    int failed;
    if (s->tests_served) {
        failed = setns(s->base_ns, CLONE_NEWNS) || unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET);
    } else {
        int copy = -1;
        failed = unshare(CLONE_NEWNS) || (copy = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC)) < 0 || setns(s->base_ns, CLONE_NEWNS);
        int error = errno;
        close(failed ? copy : s->base_ns);
        if (!failed) s->base_ns = copy;
        errno = error;
    }
    if (failed) return snprintf(err, ERR, "sandbox step 'a fresh sandbox for the test' failed: %s", strerror(errno)), -1;
    if (s->sandbox >= 0) close(s->sandbox), s->sandbox = -1;
    return apply_ops(s, (struct span){0, s->recipe.n}, K_FRESH, NULL, err);
}

/* The language's cgroup limits and the job's own, written; a slot's later test with the same
 * language and limits as the last finds them written already (nothing else writes them). A later
 * job of another language or limits (a judge's checker between its tests) finds them lifted
 * first, then written from the warm ones as on a fresh cgroup: v1 refuses a memory limit above
 * memsw's, so the order that raises is not the one that lowers. */
int write_limits(struct slot *s, const struct job *job, struct span w, char *err) {
    struct span all = {0, s->recipe.n};
    if (s->tests_served && s->limits_written.workload_rec == job->workload_rec && s->limits_written.memory == job->memory && s->limits_written.pids == job->pids)
        return 0;
    s->limits_written.workload_rec = -1;
    if (s->tests_served && (apply_cgroup_limits(s, all, K_UNLIMIT, err) || apply_cgroup_limits(s, all, K_WARM_LIMIT, err))) return -1;
    if (apply_cgroup_limits(s, w, K_W_LIMIT, err) || apply_job_limits(s, job, err)) return -1;
    s->limits_written.workload_rec = job->workload_rec, s->limits_written.memory = job->memory, s->limits_written.pids = job->pids;
    return 0;
}

/* Between a kept slot's tests: every process of the last one gone (a process the kernel takes
 * long to kill ends the slot instead). 0: the slot can run another. Its memory peak is set back
 * once the next test has its fresh sandbox (init.c execute): the last one's /tmp and upper layer
 * are charged to the cgroup until their mount namespace is gone. Init's own rlimits are not
 * the tests' (limits.c give_rlimits): nothing of one test's limits is left for the next job. */
int ready_for_next(struct slot *s) {
    (void)s;
    kill_all();
    double until = monotonic_s() + 2.0;
    for (;;) {
        pid_t pid = waitpid(-1, NULL, WNOHANG);
        if (pid < 0 && errno == ECHILD) break;
        if (pid == 0 && monotonic_s() > until) return -1;
        if (pid == 0) usleep(500);
    }
    return 0;
}
