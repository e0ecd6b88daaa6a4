/* A pid namespace per judge test: a kept slot's tests after its first (init.c serve_job) each
 * run under an init of their own, so that no test reads from its pid, its parent's or /proc how
 * many processes the request's earlier tests made.
 *
 * kiln-init makes its next child pid 1 of a new pid namespace (unshare(CLONE_NEWPID) affects only
 * the children made after it), forks that child, the test's init, and at once sets its own
 * children's namespace back to its own (setns to the descriptor it kept): anything else it spawns
 * (the next job, a checker) is made in the slot's namespace. The test's init mounts its
 * namespace's procfs over the test's /proc (only a process inside a pid namespace mounts its
 * procfs, with the options of the recipe's K_TEST_PROC op; rootless, the slot's /proc below is
 * the fully visible one the kernel asks for), spawns the task as kiln-init would (exec.c
 * spawn_task): the task is pid 2 with parent 1, as a first test's, and its signals behave as
 * usual, where a pid 1 would ignore those it has no handler for. It then reaps every orphan,
 * and once the task is reaped reports its wait status and rusage over a pipe (a pid 1 cannot pass
 * on a death by signal by dying of it) and exits: the kernel ends what is left of the namespace.
 * supervise.c's reap() takes the task's status from that report (test_init_status). The test's
 * init is outside the slot's cgroups: the cgroup's figures stay the task's. */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* what the test's init writes on its pipe: once the task is spawned (or could not be), once it
 * is reaped; each one write, within PIPE_BUF: whole or not at all */
struct report {
    int spawned, shell, ended, status;
    struct rusage rusage;
    char err[ERR];
};

static void say(int fd, const struct report *r) {
    while (write(fd, r, sizeof *r) < 0 && errno == EINTR) {
    }
}

/* the test's init: pid 1 of the test's pid namespace, on a copy of kiln-init's memory */
static int test_init(struct slot *s, struct span w, uint32_t argv_type, char *const *args, int nargs, const int *fds, int nfds, int report_fd) {
    struct report r = {0};
    pid_t task;
    set_title(s, TITLE_TEST_INIT, s->recipe.index);
    if (apply_ops(s, (struct span){0, s->recipe.n}, K_TEST_PROC, NULL, r.err) || spawn_task(s, w, argv_type, args, nargs, fds, nfds, &task, &r.shell, r.err))
        return say(report_fd, &r), 0;
    r.spawned = 1;
    say(report_fd, &r);
    /* nothing of kiln-init's: the task's pipes end with the task, not with its init */
    if (report_fd > 0) syscall(SYS_close_range, 0, report_fd - 1, 0);
    syscall(SYS_close_range, report_fd + 1, ~0U, 0);
    for (;;) {
        int status;
        struct rusage usage;
        pid_t pid = wait4(-1, &status, 0, &usage);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) return 0; /* no child: cannot be while the task is not reaped */
        if (pid != task) continue; /* an orphan of the test's */
        r.ended = 1, r.status = status, r.rusage = usage;
        say(report_fd, &r);
        return 0;
    }
}

int spawn_under_test_init(struct slot *s, struct span w, uint32_t argv_type, char *const *args, int nargs, const int *fds, int nfds, struct run *run, char *err) {
    int ends[2] = {-1, -1};
    if ((s->pid_ns < 0 && (s->pid_ns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC)) < 0) || pipe2(ends, O_CLOEXEC) || unshare(CLONE_NEWPID))
        return snprintf(err, ERR, "sandbox step 'a pid namespace for the test' failed: %s", strerror(errno)), close(ends[0]), close(ends[1]), -1;
    pid_t pid = fork();
    if (pid == 0) close(ends[0]), _exit(test_init(s, w, argv_type, args, nargs, fds, nfds, ends[1]));
    int error = errno, back = setns(s->pid_ns, CLONE_NEWPID);
    close(ends[1]);
    if (pid < 0 || back) {
        if (pid > 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
        close(ends[0]);
        /* the slot's own namespace not back: no later job of this slot (the failure says next: false) */
        return snprintf(err, ERR, "sandbox step '%s' failed: %s", pid < 0 ? "start the test's init" : "spawn in the slot's pid namespace again", strerror(pid < 0 ? error : errno)), -1;
    }
    struct report r;
    ssize_t n;
    while ((n = read(ends[0], &r, sizeof r)) < 0 && errno == EINTR) {
    }
    if (n != (ssize_t)sizeof r || !r.spawned) {
        if (n == (ssize_t)sizeof r) snprintf(err, ERR, "%s", r.err);
        else snprintf(err, ERR, "sandbox step 'start the test's init' failed: it ended before its task started");
        kill(pid, SIGKILL), waitpid(pid, NULL, 0);
        return close(ends[0]), -1;
    }
    fcntl(ends[0], F_SETFL, O_NONBLOCK);
    run->pid = pid, run->shell = r.shell, run->report_fd = ends[0];
    return 0;
}

/* The test's init reaped: the task's status and rusage as it reported them. Without a report it
 * was killed (kill_all: the deadline, the output cap, a cancel), and the task with it, by
 * SIGKILL; the test's init's own rusage then holds what it reaped. */
void test_init_status(struct run *run, int *status, struct rusage *usage) {
    struct report r;
    if (read(run->report_fd, &r, sizeof r) == (ssize_t)sizeof r && r.ended) *status = r.status, *usage = r.rusage;
    else *status = SIGKILL; /* as wait(2) says "killed by SIGKILL" */
    close(run->report_fd), run->report_fd = -1;
}
