/* kiln-init: a slot's init, PID 1 of the slot's pid namespace. The zygote spawns it (vfork +
 * exec, spawn.c) already in the slot's new namespaces, hands it a recipe (the plans the zygote
 * made, compiled by kiln/zygote/recipe.py) and descriptors, and forgets it. It warms the slot,
 * serves exactly one job, answers, and exits; everything left of the run dies with it.
 *
 *   warm   become init: descriptors, death signal, bounding set, session, the index's network
 *          namespace -> the root: the index's template built, or a private copy of it entered
 *          -> the slot's own /tmp, /proc, upper layer, hostname -> plain: the usual cgroup
 *          limits | prestarted: its language's workspace, limits, filter, and its prestart
 *          command spawned and waiting -> "ready"
 *   job    one frame, checked -> plain: workspace, files, limits, stdin and pipes, then init
 *          takes the task's rlimits, user, filter and spawns it | prestarted: files, then go
 *          -> supervise -> one result frame
 *
 * Descriptors come in the environment: KILN_SOCK, KILN_ZYGOTE (a pidfd), KILN_RECIPE (a
 * memfd), KILN_NETNS and KILN_TEMPLATE (kept namespaces, if any), KILN_CG_DIRS and
 * KILN_CG_PROCS (SlotCgroup.fd_groups), and KILN_PRESTART (a language) for a prestarted slot.
 * Every error while warming is a "failed" frame to the zygote; every error in a job, an
 * infrastructure_failure result. `kiln-init check` reads one job frame on stdin and answers
 * what it parsed, or the error a slot would (with KILN_PRESTART, one prestarted for it): the
 * fuzz tests. */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct slot S = {.sock = -1, .zygote = -1};
#define FORKED_ENTER_TIMEOUT_MS 10000
static char *title_buf;
static size_t title_cap;

/* a slot warmed for one language: its prestart command waits on descriptor 3 for one byte */
static struct {
    long workload; /* its K_WORKLOAD record; -1: a plain slot */
    pid_t pid;
    int go, out, err;
} P = {.workload = -1};

void set_title(const char *fmt, ...) {
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t n = strlen(text) < title_cap ? strlen(text) : title_cap;
    memcpy(title_buf, text, n); /* argv[0]: the zygote left room for the longest title */
    memset(title_buf + n, 0, title_cap - n);
    prctl(PR_SET_NAME, text);
}

static void send_error(const char *op, const char *error) {
    char escaped[ERR * 2], json[ERR * 2 + 64];
    json_escape(escaped, sizeof escaped, error);
    snprintf(json, sizeof json, "{\"op\":\"%s\",\"error\":\"%s\"}", op, escaped);
    send_json(S.sock, json, -1);
}

static void fail_warm(const char *error) {
    send_error("failed", error);
    _exit(0);
}

/* --- warm --------------------------------------------------------------------------------- */

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

static void become_init(int netns) {
    arm_death_signal();
    if (empty_bounding_set()) fail_warm("cannot empty the capability bounding set");
    /* a session of its own: kill(0, SIGCONT) from a task, allowed within a session whatever the
     * uid, would otherwise reach kiln's processes and the other slots */
    setsid();
    signal(SIGPIPE, SIG_IGN); /* a closed socket is an error to init, not a death */
    signal(SIGXFSZ, SIG_IGN);
    if (netns >= 0 && setns(netns, CLONE_NEWNET) < 0) fail_warm("cannot enter the slot index's network namespace");
    if (netns >= 0) close(netns);
}

/* the read-only part once per slot index (a template the zygote keeps), then the slot's own */
static int build_root(int template_fd, char *err) {
    struct span all = {0, S.recipe.n};
    int built = -1;
    if (template_fd < 0) {
        if (apply_records(all, K_BUILD, &built, err)) return -2;
    } else {
        if (setns(template_fd, CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0)
            return snprintf(err, ERR, "sandbox step 'enter a copy of the index's root' failed: %s", strerror(errno)), -2;
        close(template_fd);
    }
    return apply_records(all, K_FINISH, NULL, err) ? -2 : built;
}

/* the prestart command's descriptors 0-3 (/dev/null, its stdout and stderr pipes, the read end
 * of its go pipe) into task[], init's other ends into P */
static int prestart_ends(int task[4], char *err) {
    int go[2], out[2], errp[2], null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    make_as_task(1);
    int failed = null < 0 || pipe2(go, O_CLOEXEC) || output_pipe(out) || output_pipe(errp);
    make_as_task(0);
    if (failed) return snprintf(err, ERR, "sandbox step 'start the prestart command' failed: pipes: %s", strerror(errno)), -1;
    task[0] = null, task[1] = out[1], task[2] = errp[1], task[3] = go[0];
    P.go = go[1], P.out = out[0], P.err = errp[0];
    return 0;
}

/* a prestarted slot: its language's workspace and limits, the prestart command spawned (it
 * takes the slot's user and filter itself, and waits for its go), then init takes the filter
 * for good: what is left of its work, the request's files, supervision, the result, needs
 * neither a mount nor more than root's file access */
static int start_prestarted(struct span w, char *err) {
    int task[4];
    if (mount_workspace(w, err) || apply_records(w, K_W_PRESTART_LIMIT, NULL, err) || take_limits(w, S.recipe.timeout_max_ms, err) ||
        prestart_ends(task, err) || spawn_in_cgroup(w, K_W_PRESTART_ARGV, task, 4, &P.pid, err) || take_filter(err))
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
static int start_forked(struct span w, int task_sock, pid_t task, char *err) {
    int fds[6 + MAX_FDS], n = 6;
    if (mount_workspace(w, err) || apply_records(w, K_W_PRESTART_LIMIT, NULL, err) || prestart_ends(fds + 2, err)) return -1;
    if ((fds[0] = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC)) < 0 || (fds[1] = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
        return snprintf(err, ERR, "sandbox step 'hand the forked task its slot' failed: %s", strerror(errno)), -1;
    for (int i = 0; i < S.n_procs; i++) fds[n++] = S.cg_procs[i];
    char said[ERR] = "";
    struct pollfd answer = {task_sock, POLLIN, 0};
    ssize_t got = -1;
    if (send_fds(task_sock, "enter", fds, n) == 0 && poll(&answer, 1, FORKED_ENTER_TIMEOUT_MS) == 1)
        got = recv(task_sock, said, sizeof said - 1, 0);
    for (int i = 0; i < 6; i++) close(fds[i]);
    for (int i = 0; i < S.n_procs; i++) close(S.cg_procs[i]);
    S.n_procs = 0;
    close(task_sock);
    if (got != 2 || memcmp(said, "ok", 2)) {
        said[got > 0 ? got : 0] = '\0';
        return snprintf(err, ERR, "sandbox step 'the forked task enters its slot' failed: %s", got > 0 ? said : "no answer"), -1;
    }
    P.pid = task;
    return take_limits(w, S.recipe.timeout_max_ms, err) || take_filter(err) ? -1 : 0;
}

static void warm(int netns, int template_fd, const char *prestart, int forked, pid_t forked_pid) {
    char err[ERR];
    become_init(netns);
    int built = build_root(template_fd, err);
    if (built == -2) fail_warm(err);
    if (prestart) {
        if ((P.workload = find_workload(&S.recipe, prestart)) < 0) fail_warm("prestarted for a language the recipe does not have");
        struct span w = workload_span(P.workload);
        if (forked >= 0 ? start_forked(w, forked, forked_pid, err) : start_prestarted(w, err)) fail_warm(err);
    } else if (apply_records((struct span){0, S.recipe.n}, K_WARM_LIMIT, NULL, err)) {
        fail_warm(err); /* most requests then find them written */
    }
    if (built >= 0) {
        send_json(S.sock, "{\"op\":\"ready\",\"template\":true}", built);
        close(built);
    } else {
        send_json(S.sock, "{\"op\":\"ready\"}", -1);
    }
    set_title("kiln: slot %ld warm%s%s", S.recipe.index, prestart ? " " : "", prestart ? prestart : "");
}

/* --- job ---------------------------------------------------------------------------------- */

/* solution, checker, asserts and stdin, each at most RUN_INPUT_MAX, plus the header */
static size_t job_frame_max(void) {
    return 4 * S.recipe.input_max + 64 * 1024 + 64;
}

static void supervise_and_answer(struct run *run, const struct job *job, struct span w, double started, double cpu_before_ms, const char *title) {
    run->task_fd = syscall(SYS_pidfd_open, run->pid, 0); /* a zombie has one too: no race */
    run->cancel_fd = S.sock;
    run->output_max = S.recipe.output_max;
    supervise(run, started + job->timeout_ms / 1000.0, title);
    if (!run->cancelled) send_result_of(run, started, cpu_limit_s(w, job->timeout_ms) * 1000, cpu_before_ms);
}

static void execute(const struct job *job, struct span w, const char *title) {
    char err[ERR];
    int stdio[3], out[2], errp[2];
    struct run run = {0};
    if (mount_workspace(w, err) || write_parts(w, job, err) || apply_records(w, K_W_LIMIT, NULL, err)) return send_failure(err);
    make_as_task(1);
    int failed = (stdio[0] = open_stdin(job)) < 0 || output_pipe(out) || output_pipe(errp);
    make_as_task(0);
    if (failed) return snprintf(err, ERR, "sandbox step 'open stdin and pipes' failed: %s", strerror(errno)), send_failure(err);
    stdio[1] = out[1], stdio[2] = errp[1];
    /* the task inherits init's rlimits and takes its user and filter in its own process. Init
     * stays root, beyond the task's reach (another uid, no capability, pid 1 hidden), and,
     * unlike a prestarted slot's, without a filter of its own: its mounts and writes are done,
     * and a second load of the filter (~0.1 ms) would be on the request's path */
    if (take_limits(w, job->timeout_ms, err)) return send_failure(err);
    double started = monotonic_s();
    if (spawn_in_cgroup(w, K_W_ARGV, stdio, 3, &run.pid, err)) return send_failure(err);
    for (int i = 0; i < 3; i++) close(stdio[i]);
    run.out_fd = out[0], run.err_fd = errp[0];
    supervise_and_answer(&run, job, w, started, 0, title);
}

/* A prestart command found gone when its request comes (a stale build that does not wait, a
 * crash at start-up) must not answer for the test command: the front runs the request again
 * in a plain slot and stops prestarting the language. */
static int prestart_gone(void) {
    int status;
    if (waitpid(P.pid, &status, WNOHANG) == 0) return 0;
    char said[4096] = "", text[ERR];
    size_t n = 0;
    for (int i = 0; i < 2; i++) {
        ssize_t got = read(i ? P.out : P.err, said + n, 2048 - (n > 2048 ? 2048 : n) - 1);
        if (got > 0) n += got;
    }
    said[n] = '\0';
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : 0;
    snprintf(text, sizeof text, "the prestart command exited (%d) before its request: %.400s", code, said);
    send_error("prestart_failed", text);
    return 1;
}

static void execute_prestarted(const struct job *job, struct span w, const char *title) {
    char err[ERR];
    if (prestart_gone()) return;
    double cpu_before_ms = cgroup_cpu_ms(), started = monotonic_s(); /* its start-up was not the request's */
    if (write_parts(w, job, err)) return send_failure(err);
    if (write(P.go, "g", 1) != 1) return snprintf(err, ERR, "sandbox step 'release the prestarted task' failed: %s", strerror(errno)), send_failure(err);
    close(P.go);
    struct run run = {.pid = P.pid, .out_fd = P.out, .err_fd = P.err};
    supervise_and_answer(&run, job, w, started, cpu_before_ms > 0 ? cpu_before_ms : 0, title);
}

/* a prestarted slot serves its language's requests without stdin (its task's stdin is /dev/null) */
static int refused_here(const struct job *job, char *err) {
    if (P.workload < 0 || (job->workload == P.workload && !job->has_stdin)) return 0;
    snprintf(err, ERR, "slot warmed for %s requests without stdin", S.recipe.recs[P.workload].args[0].p);
    return -1;
}

static void serve_one_job(void) {
    char err[ERR], *body, title[128];
    size_t len;
    struct job job;
    int rc = read_frame(S.sock, job_frame_max(), &body, &len, err, ERR);
    if (rc == 0) return; /* the front closed the slot unused (shutdown, or warmed for another language) */
    if (rc < 0 || parse_job(&S.recipe, body, len, &job, err, ERR) || refused_here(&job, err)) return send_error("error", err);
    struct span w = workload_span(job.workload);
    snprintf(title, sizeof title, "kiln: slot %ld busy %s", S.recipe.index, S.recipe.recs[job.workload].args[0].p);
    set_title("%s", title);
    if (P.workload >= 0) execute_prestarted(&job, w, title);
    else execute(&job, w, title);
}

/* --- template mode --------------------------------------------------------------------- */

/* A language's template (template.c): its `template` command, started in a copy of the
 * index's root with the language's workspace mounted, where the test command would start, but
 * as root with every capability (it clones the slots, and its forks enter them). Descriptor 3:
 * the zygote's socket; 4: the template module. It never sees a request. */
static void exec_template(int template_fd, const char *slug, int module) {
    char err[ERR], *argv[COMMAND_MAX], *envp[COMMAND_MAX];
    arm_death_signal();
    setsid();
    long workload = find_workload(&S.recipe, slug);
    if (workload < 0 || template_fd < 0) fail_warm("a template needs its index's root and a language the recipe has");
    struct span w = workload_span(workload);
    if (build_root(template_fd, err) == -2 || mount_workspace(w, err)) fail_warm(err);
    int null = open("/dev/null", O_RDWR);
    if (!command_of(w, K_W_TEMPLATE_ARGV, argv, envp) || !S.recipe.cwd || chdir(S.recipe.cwd) || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
        dup2(S.sock, 3) < 0 || dup2(module, 4) < 0)
        fail_warm("cannot lay out the template command");
    S.sock = 3;
    syscall(SYS_close_range, 5, ~0U, 0);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
    execve(argv[0], argv, envp);
    snprintf(err, ERR, "cannot exec the template command %s: %s", argv[0], strerror(errno));
    fail_warm(err);
}

/* --- check mode ------------------------------------------------------------------------------ */

static int check_job(void) {
    char err[ERR], *body, json[ERR];
    size_t len;
    struct job job;
    const char *prestart = getenv("KILN_PRESTART");
    S.sock = 0;
    if (prestart) P.workload = find_workload(&S.recipe, prestart);
    int rc = read_frame(S.sock, job_frame_max(), &body, &len, err, ERR);
    if (rc == 0) return 0;
    if (rc < 0 || parse_job(&S.recipe, body, len, &job, err, ERR) || refused_here(&job, err)) {
        send_error("error", err);
        return 0;
    }
    int n = snprintf(json, sizeof json, "{\"op\":\"job\",\"slug\":\"%s\",\"timeout_ms\":%lld,\"stdin\":%s,\"files\":[",
                     S.recipe.recs[job.workload].args[0].p, job.timeout_ms, job.has_stdin ? "true" : "false");
    for (int i = 0; i < job.nparts; i++) n += snprintf(json + n, sizeof json - n, "%s\"%s\"", i ? "," : "", job.part_names[i]);
    snprintf(json + n, sizeof json - n, "]}");
    send_json(S.sock, json, -1);
    return 0;
}

int main(int argc, char **argv) {
    title_buf = argv[0];
    title_cap = strlen(argv[0]);
    char err[ERR];
    if (recipe_load(env_fd("KILN_RECIPE"), &S.recipe, err, ERR)) {
        fprintf(stderr, "kiln-init: %s\n", err);
        return 70;
    }
    if (argc > 1 && !strcmp(argv[1], "check")) return check_job();
    S.sock = env_fd("KILN_SOCK");
    S.zygote = env_fd("KILN_ZYGOTE");
    int netns = env_fd("KILN_NETNS"), template_fd = env_fd("KILN_TEMPLATE");
    S.n_dirs = env_fds("KILN_CG_DIRS", S.cg_dirs);
    S.n_procs = env_fds("KILN_CG_PROCS", S.cg_procs);
    int forked = env_fd("KILN_FORKED"), module = env_fd("KILN_TEMPLATE_MODULE");
    const char *forked_pid = getenv("KILN_FORKED_PID"), *template_of = getenv("KILN_TEMPLATE_OF");
    const char *prestart = getenv("KILN_PRESTART");
    static char prestart_slug[64];
    if (prestart) snprintf(prestart_slug, sizeof prestart_slug, "%s", prestart);
    if (S.sock < 0 || S.zygote < 0 || S.recipe.uid == 0) {
        fprintf(stderr, "kiln-init: started without its descriptors or recipe (the zygote spawns it)\n");
        return 70;
    }
    int keep[3 * MAX_FDS + 4], n = 0;
    keep[n++] = S.sock, keep[n++] = S.zygote;
    if (netns >= 0) keep[n++] = netns;
    if (template_fd >= 0) keep[n++] = template_fd;
    for (int i = 0; i < S.n_dirs; i++) keep[n++] = S.cg_dirs[i];
    for (int i = 0; i < S.n_procs; i++) keep[n++] = S.cg_procs[i];
    if (forked >= 0) keep[n++] = forked;
    if (module >= 0) keep[n++] = module;
    keep_only(keep, n); /* close-on-exec: they came without it, never the task's; the recipe's memfd is mapped: closed too */
    static char template_slug[64];
    if (template_of) snprintf(template_slug, sizeof template_slug, "%s", template_of);
    clearenv();
    if (template_of) exec_template(template_fd, template_slug, module);
    set_title("kiln: slot %ld warming", S.recipe.index);
    warm(netns, template_fd, prestart ? prestart_slug : NULL, forked, forked_pid ? atoi(forked_pid) : -1);
    serve_one_job();
    return 0;
}
