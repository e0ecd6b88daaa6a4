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
#include <sys/stat.h>
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
 * memsw's, so the order that raises is not the one that lowers. A later test in a cgroup of its
 * own (enter_test_cgroup) gets every one, the warm ones first, as the slot's cgroup did. */
int write_limits(struct slot *s, const struct job *job, struct span w, char *err) {
    struct span all = {0, s->recipe.n};
    int own = s->test_cg.dir >= 0;
    if (!own && s->tests_served && s->limits_written.workload_rec == job->workload_rec && s->limits_written.memory == job->memory && s->limits_written.pids == job->pids)
        return 0;
    s->limits_written.workload_rec = -1;
    if (own ? apply_cgroup_limits(s, all, K_WARM_LIMIT, err) : s->tests_served && (apply_cgroup_limits(s, all, K_UNLIMIT, err) || apply_cgroup_limits(s, all, K_WARM_LIMIT, err))) return -1;
    if (apply_cgroup_limits(s, w, K_W_LIMIT, err) || apply_job_limits(s, job, err)) return -1;
    if (!own) s->limits_written.workload_rec = job->workload_rec, s->limits_written.memory = job->memory, s->limits_written.pids = job->pids;
    return 0;
}

/* A kept slot's later test where the memory peak cannot be set back (cgroup v2 before Linux
 * 6.12: recipe.test_cgroups): a cgroup of its own, <test_cgroups><n> below the slot's, made
 * before its limits are written. It stands in for the slot's (cg_dirs[0], and cg_procs[0] where
 * the task joins by a write) until ready_for_next removes it: the test's limits are written there
 * (write_limits), its task is born there (identity.c birth_cgroup, in the test's init's copy of
 * the slot) and its figures are read there, each from 0: no peak to set back, no counts to take
 * off. Before the first such test, the slot's own cgroup gives its controllers to its children
 * and has its limits raised to the largest a language has (K_TEST_CG_PARENT), so that no test's
 * limit is cut by the first test's: it holds no process by then (ready_for_next), and a cgroup
 * that holds one may not. The first test ran in the slot's cgroup itself, where the standby
 * waited since warming: a slot's first job, a /run's among them, takes the same path as ever. */
int enter_test_cgroup(struct slot *s, char *err) {
    int dir = -1, procs = -1, made = 0;
    if (!s->test_cg.parent) {
        if (apply_cgroup_limits(s, (struct span){0, s->recipe.n}, K_TEST_CG_PARENT, err)) return -1;
        s->test_cg.parent = 1;
    }
    snprintf(s->test_cg.name, sizeof s->test_cg.name, "%s%d", s->recipe.test_cgroups, s->tests_served);
    if (!(made = !mkdirat(s->cg_dirs[0], s->test_cg.name, 0755)) || (dir = openat(s->cg_dirs[0], s->test_cg.name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        (!s->born_in_cgroup && (procs = openat(dir, "cgroup.procs", O_WRONLY | O_CLOEXEC)) < 0)) {
        int error = errno;
        if (dir >= 0) close(dir);
        if (made) unlinkat(s->cg_dirs[0], s->test_cg.name, AT_REMOVEDIR);
        return snprintf(err, ERR, "sandbox step 'a cgroup for the test' failed: %s: %s", s->test_cg.name, strerror(error)), -1;
    }
    forget_cgroup_files(s, 0); /* the slot's own, read for its first test */
    s->test_cg.dir = s->cg_dirs[0], s->cg_dirs[0] = dir;
    if (procs >= 0) s->test_cg.procs = s->cg_procs[0], s->cg_procs[0] = procs;
    return 0;
}

/* the last test's own cgroup, its processes all gone, removed (what it had charged, a page cache,
 * moves up to the slot's, under the largest limit), and the slot's own back in its place */
static int leave_test_cgroup(struct slot *s, double until) {
    if (s->test_cg.dir < 0) return 0;
    forget_cgroup_files(s, 0);
    close(s->cg_dirs[0]), s->cg_dirs[0] = s->test_cg.dir, s->test_cg.dir = -1;
    if (s->test_cg.procs >= 0) close(s->cg_procs[0]), s->cg_procs[0] = s->test_cg.procs, s->test_cg.procs = -1;
    while (unlinkat(s->cg_dirs[0], s->test_cg.name, AT_REMOVEDIR)) {
        if (errno != EBUSY || monotonic_s() > until) return -1;
        usleep(500);
    }
    return 0;
}

/* Between a kept slot's tests: every process of the last one gone (a process the kernel takes
 * long to kill ends the slot instead), and its own cgroup, if it had one, removed. 0: the slot
 * can run another. Its memory peak is set back
 * once the next test has its fresh sandbox (init.c execute): the last one's /tmp and upper layer
 * are charged to the cgroup until their mount namespace is gone. Init's own rlimits are not
 * the tests' (limits.c give_rlimits): nothing of one test's limits is left for the next job. */
int ready_for_next(struct slot *s) {
    kill_all();
    double until = monotonic_s() + 2.0;
    for (;;) {
        pid_t pid = waitpid(-1, NULL, WNOHANG);
        if (pid < 0 && errno == ECHILD) break;
        if (pid == 0 && monotonic_s() > until) return -1;
        if (pid == 0) usleep(500);
    }
    return leave_test_cgroup(s, until);
}
