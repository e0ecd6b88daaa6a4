/* The task's process: its pipes (its own, as if it had made them), its command from the recipe,
 * and its spawn (vfork + exec, vfork.c) in which it takes its identity and filter before the
 * exec, and its rlimits (limits.c: init never lowers its own, which a kept slot's next job could
 * not raise again). A plain slot's first task is its standby instead, made
 * while the slot warmed (standby.c), released here. */
#include "kiln.h"
#include "vfork.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* both ends close-on-exec; the read end non-blocking for the poll loop */
int output_pipe(int ends[2]) {
    if (pipe2(ends, O_CLOEXEC) < 0) return -1;
    return fcntl(ends[0], F_SETFL, O_NONBLOCK);
}

/* What init makes for the task from here (its pipes) is owned by the task's user, as if the
 * task had made it: a pipe's owner is its maker's filesystem uid, and a program that reopens
 * /dev/stdout (/proc/self/fd/1) opens its own pipe, which only its owner may. */
void make_as_task(const struct slot *s, int yes) {
    syscall(SYS_setfsgid, yes ? s->recipe.uid : 0);
    syscall(SYS_setfsuid, yes ? s->recipe.uid : 0);
}

/* A plain slot's task's descriptors 0-2, the task's own: its stdin (an interactive test's pipe,
 * a judge test's file of the store as it is, else the job's own) and its output pipes, whose
 * read ends go in ends[] for supervise.c */
int task_stdio(const struct slot *s, const struct job *job, int stdio[3], int ends[2], char *err) {
    int out[2], errp[2];
    make_as_task(s, 1);
    int failed = (stdio[0] = job->has_pipes ? job->pipe_fds[0] : job->has_stdin_file ? job->stdin_fd : open_stdin(job)) < 0 || output_pipe(out) || output_pipe(errp);
    make_as_task(s, 0);
    if (failed) return snprintf(err, ERR, "sandbox step 'open stdin and pipes' failed: %s", strerror(errno)), -1;
    stdio[1] = out[1], stdio[2] = errp[1];
    ends[0] = out[0], ends[1] = errp[0];
    return 0;
}

int command_of(const struct slot *s, struct span w, uint32_t argv_type, char *argv[COMMAND_MAX], char *envp[COMMAND_MAX]) {
    int argc = 0, envc = 0;
    for (size_t i = w.from; i < w.to; i++) {
        const struct rec *r = &s->recipe.recs[i];
        for (uint32_t k = ARG(ARGV, argv); r->type == argv_type && k < r->nargs && argc < COMMAND_MAX - 1; k++) argv[argc++] = (char *)r->args[k].p;
        for (uint32_t k = ARG(ENV, variables); r->type == K_W_ENV && k < r->nargs && envc < COMMAND_MAX - 1; k++) envp[envc++] = (char *)r->args[k].p;
    }
    argv[argc] = envp[envc] = NULL;
    return argc;
}

/* The task's own first steps, in its child before the exec: its identity and the filter (last:
 * it allows neither), its descriptors laid out, the signals init ignores back at their default. */
struct task_start {
    struct slot *slot;
    const int *fds;
    int nfds;
    const char *failed; /* the step that failed, for init's error */
};

static int prepare_task(void *arg) {
    struct task_start *t = arg;
    char err[ERR];
    if (take_identity(t->slot)) return t->failed = "take the slot's cgroup and user", errno;
    if (give_rlimits(t->slot, 0)) return t->failed = "set rlimits", errno; /* before address_space_enter's RLIMIT_AS, which lowers the plan's */
    if (address_space_enter(t->slot)) return t->failed = "take the address-space limit", errno;
    if (take_filter(t->slot, err)) return t->failed = "load seccomp", errno;
    for (int i = 0; i < t->nfds; i++) {
        /* every source is above the targets' range or is its own target (fds are made after
         * init's 0-2): a dup2 never overwrites a source still to be laid out */
        if (t->fds[i] == i) syscall(SYS_fcntl, i, F_SETFD, 0);
        else if (syscall(SYS_dup2, t->fds[i], i) < 0) return t->failed = "lay out descriptors", errno;
    }
    set_disposition(SIGPIPE, SIG_DFL);
    set_disposition(SIGXFSZ, SIG_DFL);
    return 0;
}

void drop_cgroup_procs(struct slot *s) {
    for (int i = 0; i < s->n_procs; i++) close(s->cg_procs[i]);
    s->n_procs = 0;
}

int spawn_task(struct slot *s, struct span w, uint32_t argv_type, char *const *args, int nargs, const int *fds, int nfds, pid_t *pid, int *shell, char *err) {
    char *argv[COMMAND_MAX + MAX_PARTS], *envp[COMMAND_MAX];
    const char *step = argv_type == K_W_PRESTART_ARGV ? "start the prestart command" : argv_type == K_W_BUILD_ARGV ? "exec the build command"
                     : argv_type == K_W_EXEC_ARGV ? "exec the exec command" : "exec the test command";
    int argc = command_of(s, w, argv_type, argv, envp);
    if (!argc) return snprintf(err, ERR, "sandbox step '%s' failed: no command", step), -1;
    *shell = !strcmp(argv[0], TASK_SHELL);
    for (int i = 0; i < nargs && i < MAX_PARTS; i++) argv[argc++] = args[i];
    argv[argc] = NULL;
    struct task_start start = {s, fds, nfds, NULL};
    int error = 0;
    if (s->standby.pid > 0) { /* made while warming, in the cgroup already */
        *pid = standby_release(s, argv[0], argv, envp, fds, nfds, &start.failed, &error);
    } else {
        *pid = vfork_exec(0, birth_cgroup(s), &s->born_in_cgroup, argv[0], argv, envp, prepare_task, &start);
        error = errno;
    }
    if (s->base_ns < 0) drop_cgroup_procs(s); /* a slot that runs several tests keeps them for the next */
    if (*pid < 0) return snprintf(err, ERR, "sandbox step '%s' failed: %s: %s", step, start.failed ? start.failed : argv[0], strerror(error)), -1;
    return 0;
}
