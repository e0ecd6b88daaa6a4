/* kiln-init: a slot's init, PID 1 of the slot's pid namespace. The zygote spawns it (vfork +
 * exec, spawn.c) already in the slot's new namespaces, hands it a recipe (the plans the zygote
 * made, compiled by kiln/zygote/recipe.py) and descriptors, and forgets it. It warms the slot,
 * serves its job, answers, and exits; everything left of the run dies with it (a plain slot that
 * can run a judge's tests one after another serves them while the front sends them, each in a
 * fresh sandbox). The order of its steps is here, in warm() and serve_job(); each step is a
 * file's concern:
 *
 *   mounts.c    the root (built, or the index's copied) and the workspace overlay
 *   files.c     the directories and files the request writes below /sandbox, its stdin
 *   limits.c    rlimits and cgroup limits        identity.c  the task's cgroup, user, filter
 *   exec.c      the task's pipes and spawn       supervise.c its output, deadline, reaping
 *   result.c    its figures and outcome          frames.c    the socket's frames
 *   testinit.c  a later judge test's pid namespace and its init
 *   check.c     `kiln-init check` (the fuzz tests)   launch.c    template mode (KILN_TEMPLATE_OF)
 *
 * Descriptors come in the environment (kiln.h START_VARIABLES; kiln/zygote/start.py writes them):
 * KILN_SOCK, KILN_ZYGOTE (a pidfd), KILN_RECIPE (a memfd), KILN_TEMPLATE (the index's kept
 * template mount namespace, if any), KILN_CG_DIRS and KILN_CG_PROCS (SlotCgroup.fd_groups),
 * KILN_PRESTART (a language) for a prestarted slot, KILN_FORKED and KILN_FORKED_PID for one cloned
 * by its language's template. Every error while warming is a
 * "failed" frame to the zygote; every error in a job, an infrastructure_failure result. */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORKED_ENTER_TIMEOUT_MS 10000
#define INIT_CPU_MAX_S 0.5 /* a slot that runs several judge tests: init's own CPU (see ready_for_next) */

/* what the environment says, beyond the slot's own fields */
struct start {
    int template_fd, forked, module;
    pid_t forked_pid;
    char prestart[64], template_of[64];
};

static void fail_warm(struct slot *s, const char *error) {
    send_error(s->sock, "failed", error);
    _exit(0);
}

/* --- warm --------------------------------------------------------------------------------- */

static void become_init(struct slot *s) {
    arm_death_signal(s);
    if (empty_bounding_set()) fail_warm(s, "cannot empty the capability bounding set");
    /* a session of its own: kill(0, SIGCONT) from a task, allowed within a session whatever the
     * uid, would otherwise reach kiln's processes and the other slots */
    setsid();
    signal(SIGPIPE, SIG_IGN); /* a closed socket is an error to init, not a death */
    signal(SIGXFSZ, SIG_IGN);
}

/* the prestart command's descriptors 0-3 (/dev/null, its stdout and stderr pipes, the read end
 * of its go pipe) into task[], init's other ends into s->prestarted; all the task's own */
static int prestart_ends(struct slot *s, int task[4], char *err) {
    int go[2], out[2], errp[2], null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    make_as_task(s, 1);
    int failed = null < 0 || pipe2(go, O_CLOEXEC) || output_pipe(out) || output_pipe(errp);
    make_as_task(s, 0);
    if (failed) return snprintf(err, ERR, "sandbox step 'start the prestart command' failed: pipes: %s", strerror(errno)), -1;
    task[0] = null, task[1] = out[1], task[2] = errp[1], task[3] = go[0];
    s->prestarted.go = go[1], s->prestarted.out = out[0], s->prestarted.err = errp[0];
    return 0;
}

/* a prestarted slot: its language's workspace and limits, the prestart command spawned (it
 * takes the slot's user and filter itself, and waits for its go), then init takes the filter
 * for good: what is left of its work, the request's files, supervision, the result, needs
 * neither a mount nor more than root's file access */
static int start_prestarted(struct slot *s, struct span w, char *err) {
    int task[4];
    if (mount_workspace(s, w, NULL, err) || apply_cgroup_limits(s, w, K_W_PRESTART_LIMIT, err) || take_limits(s, w, s->recipe.timeout_max_ms, 0, err) ||
        prestart_ends(s, task, err) || spawn_task(s, w, K_W_PRESTART_ARGV, NULL, 0, task, 4, &s->prestarted.pid, &s->prestarted.shell, err) || take_filter(s, err))
        return -1;
    for (int i = 0; i < 4; i++) close(task[i]);
    return 0;
}

static int send_fds(int sock, const char *text, const int *fds, int n) {
    char control[CMSG_SPACE(sizeof(int) * (6 + MAX_FDS))] = {0};
    struct iovec iov = {(void *)text, strlen(text)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* A slot cloned by its language's template (template.c): the prestart command is the task the
 * template forked, init's first child, still root and outside the slot's network and mount
 * namespaces. Init finishes the slot as for its own spawn, hands the task what it needs to
 * enter it (both namespaces, its descriptors 0-3, the slot's cgroup.procs) and waits for it to
 * have entered; then takes its own limits and filter as in start_prestarted. */
static int start_forked(struct slot *s, struct span w, int task_sock, pid_t task, char *err) {
    int fds[6 + MAX_FDS], n = 6;
    if (mount_workspace(s, w, NULL, err) || apply_cgroup_limits(s, w, K_W_PRESTART_LIMIT, err) || prestart_ends(s, fds + 2, err)) return -1;
    if ((fds[0] = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC)) < 0 || (fds[1] = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
        return snprintf(err, ERR, "sandbox step 'hand the forked task its slot' failed: %s", strerror(errno)), -1;
    for (int i = 0; i < s->n_procs; i++) fds[n++] = s->cg_procs[i];
    char said[ERR] = "";
    struct pollfd answer = {task_sock, POLLIN, 0};
    ssize_t got = -1;
    if (send_fds(task_sock, "enter", fds, n) == 0 && poll(&answer, 1, FORKED_ENTER_TIMEOUT_MS) == 1)
        got = recv(task_sock, said, sizeof said - 1, 0);
    for (int i = 0; i < 6; i++) close(fds[i]);
    drop_cgroup_procs(s);
    close(task_sock);
    if (got != 2 || memcmp(said, "ok", 2)) {
        said[got > 0 ? got : 0] = '\0';
        return snprintf(err, ERR, "sandbox step 'the forked task enters its slot' failed: %s", got > 0 ? said : "no answer"), -1;
    }
    s->prestarted.pid = task;
    return take_limits(s, w, s->recipe.timeout_max_ms, 0, err) || take_filter(s, err) ? -1 : 0;
}

/* become init -> the root: the index's template built, or a private copy of it entered -> the
 * slot's own /tmp, /proc, upper layer, hostname -> plain: the usual cgroup limits | prestarted:
 * its language's workspace, limits, filter, and its prestart command spawned and waiting (or
 * forked by the template, entering) -> "ready" (with the template's root, if it built it) */
static void warm(struct slot *s, const struct start *start) {
    char err[ERR];
    become_init(s);
    int built = build_root(s, start->template_fd, err);
    if (built == -2) fail_warm(s, err);
    if (*start->prestart) {
        if ((s->prestarted.workload_rec = find_workload_rec(&s->recipe, start->prestart)) < 0) fail_warm(s, "prestarted for a language the recipe does not have");
        struct span w = workload_span(&s->recipe, s->prestarted.workload_rec);
        if (start->forked >= 0 ? start_forked(s, w, start->forked, start->forked_pid, err) : start_prestarted(s, w, err)) fail_warm(s, err);
    } else if (apply_cgroup_limits(s, (struct span){0, s->recipe.n}, K_WARM_LIMIT, err) || (s->n_procs && standby_make(s, err))) {
        fail_warm(s, err); /* most requests then find them written, and their task in its cgroups (standby.c) */
    } else if (s->recipe.reusable) {
        s->base_ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC); /* judge tests run in copies of it */
    } else {
        drop_cgroup_procs(s); /* while warming, not on the job's path */
    }
    send_json(s->sock, built >= 0 ? "{\"op\":\"ready\",\"template\":true}" : "{\"op\":\"ready\"}", built);
    if (built >= 0) close(built);
    set_title(s, "kiln: slot %ld warm%s%s", s->recipe.index, *start->prestart ? " " : "", start->prestart);
}

/* --- job ---------------------------------------------------------------------------------- */

static void supervise_and_answer(struct slot *s, struct run *run, const struct job *job, struct span w, double started, double cpu_before_ms, const char *title) {
    run->task_fd = syscall(SYS_pidfd_open, run->pid, 0); /* a zombie has one too: no race */
    run->cancel_fd = s->sock;
    run->output_max = job->output > 0 ? job->output : s->recipe.output_max;
    run->stderr_cut = job->command == CMD_EXEC;
    run->cpu_limit_ms = job->cpu_ms, run->cpu_before_ms = cpu_before_ms;
    run->starved_max_s = s->recipe.starved_max_times * job->timeout_ms / 1000.0;
    supervise(s, run, started + job->timeout_ms / 1000.0, title);
    if (run->cancelled) return;
    if (job->command == CMD_TEST && !run->overflow) pass_on_held_stdout(s, run);
    char *layer = NULL, err[ERR];
    size_t layer_len = 0;
    int built = job->command == CMD_BUILD && run->has_status && WIFEXITED(run->status) && WEXITSTATUS(run->status) == 0 && !run->timed_out && !run->overflow;
    if (built && collect_layer(s, &layer, &layer_len, err)) return send_failure(s, err);
    if (job->give_back >= 0 && read_given_back(s, job, run->output_max, &layer, &layer_len, err)) return send_failure(s, err);
    send_result_of(s, run, started, cpu_limit_s(s, w, job->timeout_ms, job->cpu_ms) * 1000, cpu_before_ms, layer, layer_len);
    free(layer);
}

/* A judge's test in a plain slot that can run several: a copy of the slot's warm mount namespace
 * of its own (the previous test's overlay and binds' detaching stay in its copy, gone with it),
 * over which its own upper layer and /tmp are mounted afresh, and IPC and network namespaces of
 * its own from the second test on (a network namespace keeps IPv6 flow labels past their
 * sockets): nothing a test leaves is seen by the next. The first test runs in
 * the warm namespace itself, where the standby waits (its filter would not let it enter
 * another), once init has kept a copy of it as the later tests' base. */
static int fresh_sandbox(struct slot *s, char *err) {
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

/* Between a slot's judge tests: every process of the last one gone (a process the kernel takes
 * long to kill ends the slot instead). 0: the slot can run another. Its memory peak is set back
 * once the next test has its fresh sandbox (execute): the last one's /tmp and upper layer are
 * charged to the cgroup until their mount namespace is gone.
 * Init's own CPU time counts against the RLIMIT_CPU it sets for each test (its task inherits it):
 * past INIT_CPU_MAX_S the slot ends, long before that limit's second could reach init. */
static int ready_for_next(struct slot *s) {
    (void)s;
    struct rusage own;
    if (getrusage(RUSAGE_SELF, &own) || own.ru_utime.tv_sec + own.ru_stime.tv_sec + (own.ru_utime.tv_usec + own.ru_stime.tv_usec) / 1e6 > INIT_CPU_MAX_S)
        return -1;
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

/* The language's cgroup limits and the job's own, written; a slot's later test with the same
 * language and limits as the last finds them written already (nothing else writes them). A later
 * job of another language or limits (a judge's checker between its tests) finds them lifted
 * first, then written from the warm ones as on a fresh cgroup: v1 refuses a memory limit above
 * memsw's, so the order that raises is not the one that lowers. */
static int write_limits(struct slot *s, const struct job *job, struct span w, char *err) {
    struct span all = {0, s->recipe.n};
    if (s->tests_served && s->limits_written.workload_rec == job->workload_rec && s->limits_written.memory == job->memory && s->limits_written.pids == job->pids)
        return 0;
    s->limits_written.workload_rec = -1;
    if (s->tests_served && (apply_cgroup_limits(s, all, K_UNLIMIT, err) || apply_cgroup_limits(s, all, K_WARM_LIMIT, err))) return -1;
    if (apply_cgroup_limits(s, w, K_W_LIMIT, err) || apply_job_limits(s, job, err)) return -1;
    s->limits_written.workload_rec = job->workload_rec, s->limits_written.memory = job->memory, s->limits_written.pids = job->pids;
    return 0;
}

static const uint32_t COMMAND_ARGV[] = {[CMD_TEST] = K_W_ARGV, [CMD_BUILD] = K_W_BUILD_ARGV, [CMD_EXEC] = K_W_EXEC_ARGV};

/* a plain slot: workspace (on the job's build layer, for a judge's test), files (an exec job's:
 * its command's arguments), limits, stdin and pipes (the task's own), rlimits, the task spawned
 * (it takes its user and filter in its own process) -> supervise -> the result (with what a
 * judge's build left). Init stays root,
 * beyond the task's reach (another uid, no capability, pid 1 hidden), and, unlike a prestarted
 * slot's, without a filter of its own: its mounts and writes are done, and a second load of
 * the filter (~0.1 ms) would be on the request's path */
static void execute(struct slot *s, const struct job *job, struct span w, const char *title) {
    char err[ERR], paths[MAX_PARTS][FILE_NAME_MAX + 64], *args[MAX_PARTS];
    int stdio[3], out[2], errp[2], nargs = job->command == CMD_EXEC ? job->nparts : 0;
    struct run run = {.report_fd = -1};
    if (job->command == CMD_EXEC && s->base_ns >= 0 && (fresh_sandbox(s, err) || (s->tests_served && reset_peak(s, err)))) return send_failure(s, err);
    if (s->tests_served) cgroup_counts(s, &run.oom_before, &run.pids_hits_before); /* a fresh cgroup counts from 0 */
    if (mount_workspace(s, w, job->layer, err) || (job->command == CMD_TEST ? write_parts(s, w, job, err) : give_judge_files(s, job, paths, err)) ||
        write_limits(s, job, w, err))
        return send_failure(s, err);
    for (int i = 0; i < nargs; i++) args[i] = paths[i];
    make_as_task(s, 1);
    int failed = (stdio[0] = job->has_pipes ? job->pipe_fds[0] : job->has_stdin_file ? job->stdin_fd : open_stdin(job)) < 0 || output_pipe(out) || output_pipe(errp);
    make_as_task(s, 0);
    if (failed) return snprintf(err, ERR, "sandbox step 'open stdin and pipes' failed: %s", strerror(errno)), send_failure(s, err);
    stdio[1] = out[1], stdio[2] = errp[1];
    /* the address space first: it may set the standby aside, and then init takes the rlimits the task inherits */
    if (address_space_prepare(s, job->address_space, err) || take_limits(s, w, job->timeout_ms, job->cpu_ms, err)) return send_failure(s, err);
    double cpu_before_ms = job->cpu_ms > 0 ? cgroup_cpu_ms(s) : 0, started = monotonic_s();
    /* a kept slot's later tests: each in a pid namespace of its own (testinit.c) */
    int failed_spawn = s->tests_served ? spawn_under_test_init(s, w, COMMAND_ARGV[job->command], args, nargs, stdio, 3, &run, err)
                                       : spawn_task(s, w, COMMAND_ARGV[job->command], args, nargs, stdio, 3, &run.pid, &run.shell, err);
    address_space_started(s, &run.address_space);
    if (failed_spawn) return address_space_end(&run.address_space), send_failure(s, err);
    for (int i = 0; i < 3; i++) close(stdio[i]);
    run.out_fd = out[0], run.err_fd = errp[0];
    run.forward_fd = job->has_pipes ? job->pipe_fds[1] : -1;
    run.next = job->command == CMD_EXEC && !job->has_pipes && s->base_ns >= 0;
    supervise_and_answer(s, &run, job, w, started, cpu_before_ms > 0 ? cpu_before_ms : 0, title);
    address_space_end(&run.address_space);
}

/* A prestart command found gone when its request comes (a stale build that does not wait, a
 * crash at start-up) must not answer for the test command: the front runs the request again
 * in a plain slot and stops prestarting the language. */
static int prestart_gone(struct slot *s) {
    int status;
    if (waitpid(s->prestarted.pid, &status, WNOHANG) == 0) return 0;
    char said[4096] = "", text[ERR];
    size_t n = 0;
    for (int i = 0; i < 2; i++) {
        ssize_t got = read(i ? s->prestarted.out : s->prestarted.err, said + n, 2048 - (n > 2048 ? 2048 : n) - 1);
        if (got > 0) n += got;
    }
    said[n] = '\0';
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : 0;
    snprintf(text, sizeof text, "the prestart command exited (%d) before its request: %.400s", code, said);
    send_error(s->sock, "prestart_failed", text);
    return 1;
}

/* a prestarted slot: files -> go -> supervise -> the result; its start-up was not the request's */
static void execute_prestarted(struct slot *s, const struct job *job, struct span w, const char *title) {
    char err[ERR];
    if (prestart_gone(s)) return;
    double cpu_before_ms = cgroup_cpu_ms(s), started = monotonic_s();
    if (write_parts(s, w, job, err)) return send_failure(s, err);
    if (write(s->prestarted.go, "g", 1) != 1) return snprintf(err, ERR, "sandbox step 'release the prestarted task' failed: %s", strerror(errno)), send_failure(s, err);
    close(s->prestarted.go);
    struct run run = {.pid = s->prestarted.pid, .out_fd = s->prestarted.out, .err_fd = s->prestarted.err, .forward_fd = -1, .shell = s->prestarted.shell, .report_fd = -1};
    supervise_and_answer(s, &run, job, w, started, cpu_before_ms > 0 ? cpu_before_ms : 0, title);
}

/* one frame, checked -> the slot's kind of run -> one result frame. 1: the slot may run another
 * job (a judge's test in a slot that can run several, the front's to send or not) */
static int serve_job(struct slot *s) {
    char err[ERR], *body, title[128];
    size_t len;
    struct job job;
    int fds[MAX_FRAME_FDS], nfds = 0;
    int rc = read_frame(s->sock, job_frame_max(s), &body, &len, fds, &nfds, err, ERR);
    if (rc == 0) return 0; /* the front closed the slot (unused: shutdown, or warmed for another language) */
    if (rc < 0 || parse_job(&s->recipe, body, len, &job, err, ERR) || refused_here(s, &job, err) || take_descriptors(&s->recipe, &job, fds, nfds, err, ERR) ||
        (s->tests_served && job.command != CMD_EXEC && snprintf(err, ERR, "only a judge's tests follow a judge's test") > 0))
        return send_error(s->sock, "error", err), 0;
    struct span w = workload_span(&s->recipe, job.workload_rec);
    snprintf(title, sizeof title, "kiln: slot %ld busy %s", s->recipe.index, s->recipe.recs[job.workload_rec].args[0].p);
    set_title(s, "%s", title);
    if (s->prestarted.workload_rec >= 0) return execute_prestarted(s, &job, w, title), 0;
    execute(s, &job, w, title);
    close_file_fds(&job); /* copied into the sandbox (or not, when its run failed before) */
    free(body);
    if (job.command != CMD_EXEC || job.has_pipes || s->base_ns < 0) return 0; /* as its result said (run.next) */
    s->tests_served++;
    return ready_for_next(s) == 0;
}

/* --- main --------------------------------------------------------------------------------- */

static int env_fd(const char *name) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : -1;
}

static int env_fds(const char *name, int *fds) {
    const char *v = getenv(name);
    int n = 0;
    while (v && *v && n < MAX_FDS) {
        fds[n++] = strtol(v, (char **)&v, 10);
        if (*v == ',') v++;
    }
    return n;
}

/* the descriptors and settings the environment names, copied out of it (it is cleared) */
static void read_environment(struct slot *s, struct start *start) {
    s->sock = env_fd(START_VAR(SOCK)), s->zygote = env_fd(START_VAR(ZYGOTE));
    s->n_dirs = env_fds(START_VAR(CG_DIRS), s->cg_dirs), s->n_procs = env_fds(START_VAR(CG_PROCS), s->cg_procs);
    start->template_fd = env_fd(START_VAR(TEMPLATE));
    start->forked = env_fd(START_VAR(FORKED)), start->module = env_fd(START_VAR(TEMPLATE_MODULE));
    s->lower_held[0] = env_fd(START_VAR(LOWER_WORKSPACES)), s->lower_held[1] = env_fd(START_VAR(LOWER_LAYERS));
    const char *forked_pid = getenv(START_VAR(FORKED_PID)), *prestart = getenv(START_VAR(PRESTART)), *template_of = getenv(START_VAR(TEMPLATE_OF));
    start->forked_pid = forked_pid ? atoi(forked_pid) : -1;
    snprintf(start->prestart, sizeof start->prestart, "%s", prestart ? prestart : "");
    snprintf(start->template_of, sizeof start->template_of, "%s", template_of ? template_of : "");
}

/* close-on-exec: they came without it, never the task's; the recipe's memfd is mapped: closed too */
static void keep_descriptors(const struct slot *s, const struct start *start) {
    int keep[3 * MAX_FDS + 6], n = 0;
    keep[n++] = s->sock, keep[n++] = s->zygote;
    for (int i = 0; i < s->n_dirs; i++) keep[n++] = s->cg_dirs[i];
    for (int i = 0; i < s->n_procs; i++) keep[n++] = s->cg_procs[i];
    const int optional[] = {start->template_fd, start->forked, start->module, s->lower_held[0], s->lower_held[1]};
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++)
        if (optional[i] >= 0) keep[n++] = optional[i];
    keep_only(keep, n);
}

int main(int argc, char **argv) {
    struct slot s = {.sock = -1, .zygote = -1, .sandbox = -1, .base_ns = -1, .pid_ns = -1, .lower_held = {-1, -1}, .limits_written = {.workload_rec = -1}, .prestarted = {.workload_rec = -1},
                     .title = argv[0], .title_cap = strlen(argv[0])};
    struct start start;
    char err[ERR];
    if (argc > 2 && !strcmp(argv[1], "probe-lower")) return probe_lower(argv[2]);
    if (argc > 1 && !strcmp(argv[1], "contract")) return print_contract();
    if (recipe_load(env_fd(START_VAR(RECIPE)), &s.recipe, err, ERR)) {
        fprintf(stderr, "kiln-init: %s\n", err);
        return 70;
    }
    if (argc > 1 && !strcmp(argv[1], "check")) return check_job(&s);
    read_environment(&s, &start);
    if (s.sock < 0 || s.zygote < 0 || s.recipe.uid < 0) {
        fprintf(stderr, "kiln-init: started without its descriptors or recipe (the zygote spawns it)\n");
        return 70;
    }
    keep_descriptors(&s, &start);
    choose_task_birth(&s);
    clearenv();
    if (*start.template_of) exec_template(&s, start.template_fd, start.template_of, start.module);
    set_title(&s, "kiln: slot %ld warming", s.recipe.index);
    warm(&s, &start);
    while (serve_job(&s)) { /* one job; a judge's next test while the slot can take it */
    }
    return 0;
}
