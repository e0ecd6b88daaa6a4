/* kiln-init: a slot's init, PID 1 of the slot's pid namespace. The zygote spawns it (vfork +
 * exec, spawn.c) already in its new namespaces, hands it a recipe (the plans the zygote made
 * in Python, compiled by kiln/sandbox/recipe.py) and descriptors, and forgets it. It warms the
 * slot, serves exactly one job, answers, and exits; everything left of the run dies with it.
 *
 *     warm:  become init -> the root (the index's template built, or a copy of it entered)
 *            -> its own /tmp, /proc, upper layer, hostname -> cgroup limits -> "ready"
 *     job:   read and check the frame -> workspace overlay, files -> limits, stdin, pipes
 *            -> rlimits, uid/gid, no capabilities, no_new_privs, seccomp -> spawn the task in
 *            the slot's cgroup -> supervise -> stats -> one result frame
 *
 * Descriptors and their roles come in the environment (KILN_SOCK, KILN_ZYGOTE, KILN_RECIPE,
 * KILN_NETNS, KILN_TEMPLATE, KILN_CG_DIRS, KILN_CG_PROCS, KILN_CG_HOME). Every error while
 * warming is a "failed" frame to the zygote; every error in a job, an infrastructure_failure
 * result, as the Python slot answers (kiln/zygote/slot.py serves prestarted slots). */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/openat2.h>

#define ERR 512
#define MAX_FDS 16

static char *title_buf;
static size_t title_cap;
static struct recipe R;
static int sock = -1, zygote = -1;
static int cg_dirs[MAX_FDS], cg_procs[MAX_FDS], cg_home[MAX_FDS];
static int n_dirs, n_procs, n_home;
static long slot_index;

void set_title(const char *fmt, ...) {
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t n = strlen(text) < title_cap ? strlen(text) : title_cap;
    memcpy(title_buf, text, n);
    memset(title_buf + n, 0, title_cap - n);
    prctl(PR_SET_NAME, text);
}

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

static int has_exited(int pidfd) {
    struct pollfd p = {pidfd, POLLIN};
    return poll(&p, 1, 0) > 0;
}

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

static void close_all_except(int *keep, int n) {
    qsort(keep, n, sizeof *keep, cmp_int);
    unsigned first = 3;
    for (int i = 0; i < n; i++) {
        if (keep[i] < 3) continue;
        if ((unsigned)keep[i] > first) syscall(SYS_close_range, first, keep[i] - 1, 0);
        first = keep[i] + 1;
    }
    syscall(SYS_close_range, first, ~0U, 0);
}

static void arm_death_signal(void) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (has_exited(zygote)) _exit(0); /* the zygote died before the signal was armed */
}

/* --- warm --------------------------------------------------------------------------------- */

static void fail_warm(const char *error) {
    char escaped[ERR * 2], json[ERR * 2 + 64];
    json_escape(escaped, sizeof escaped, error);
    snprintf(json, sizeof json, "{\"op\":\"failed\",\"error\":\"%s\"}", escaped);
    send_json(sock, json, -1);
    _exit(0);
}

static int write_cgroup(const struct rec *r, char *err) {
    long idx = arg_int(&r->args[0]);
    int fd = idx >= 0 && idx < n_dirs ? openat(cg_dirs[idx], r->args[1].p, O_WRONLY | O_CLOEXEC) : -1;
    ssize_t n = fd < 0 ? -1 : write(fd, r->args[2].p, r->args[2].len);
    if (fd >= 0) close(fd);
    if (n < 0) snprintf(err, ERR, "sandbox step 'set cgroup limits' failed: %s = %s: %s", r->args[1].p, r->args[2].p, strerror(errno));
    return n < 0 ? -1 : 0;
}

static int apply_all(size_t from, size_t to, uint32_t kind, int *template_fd, char *err) {
    for (size_t i = from; i < to; i++) {
        const struct rec *r = &R.recs[i];
        if (r->kind != kind) continue;
        int rc = (kind == K_WARM_LIMIT || kind == K_W_LIMIT) ? write_cgroup(r, err) : apply_op(r, template_fd, err, ERR);
        if (rc) return -1;
    }
    return 0;
}

static void warm(int netns, int template_fd) {
    char err[ERR];
    if (netns >= 0) {
        if (setns(netns, CLONE_NEWNET) < 0) fail_warm("cannot enter the slot index's network namespace");
        close(netns);
    }
    /* A session of its own: kill(0, SIGCONT) from a task, allowed within a session whatever the
     * uid, would otherwise reach kiln's processes and the other slots. */
    setsid();
    signal(SIGPIPE, SIG_IGN); /* a closed socket is an error to init, not a death */
    signal(SIGXFSZ, SIG_IGN);
    int built = -1;
    if (template_fd < 0) {
        if (apply_all(0, R.n, K_BUILD, &built, err)) fail_warm(err);
    } else {
        if (setns(template_fd, CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0) {
            snprintf(err, ERR, "sandbox step 'enter a copy of the index's root' failed: %s", strerror(errno));
            fail_warm(err);
        }
        close(template_fd);
    }
    if (apply_all(0, R.n, K_FINISH, NULL, err) || apply_all(0, R.n, K_WARM_LIMIT, NULL, err)) fail_warm(err);
    if (built >= 0) {
        send_json(sock, "{\"op\":\"ready\",\"template\":true}", built);
        close(built);
    } else {
        send_json(sock, "{\"op\":\"ready\"}", -1);
    }
    set_title("kiln: slot %ld warm", slot_index);
}

/* --- job ---------------------------------------------------------------------------------- */

#define RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static int openat2_beneath(int dir, const char *path, int flags, mode_t mode) {
    struct open_how how = {.flags = flags, .mode = mode, .resolve = RESOLVE};
    return syscall(SYS_openat2, dir, path, &how, sizeof how);
}

static int make_writable(int root, const char *rel, uid_t uid) {
    if (!*rel || !strcmp(rel, ".")) return fchown(root, uid, uid);
    int fd = openat2_beneath(root, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    int rc = fchown(fd, uid, uid);
    close(fd);
    return rc;
}

/* the parents of a path the workspace lacks, owned by the task, then the path itself given */
static int ensure_dir(int root, const char *rel, uid_t uid) {
    char buf[4096];
    size_t len = strlen(rel);
    if (len >= sizeof buf) return errno = ENAMETOOLONG, -1;
    memcpy(buf, rel, len + 1);
    for (char *p = buf; ; p++) {
        if ((*p == '/' || !*p) && p > buf && p[-1] != '/') {
            char saved = *p;
            *p = '\0';
            if (mkdirat(root, buf, 0755) == 0) {
                if (make_writable(root, buf, uid)) return -1;
            } else if (errno != EEXIST) {
                return -1;
            }
            *p = saved;
        }
        if (!*p) return make_writable(root, rel, uid);
    }
}

static int write_file(int root, const char *rel, const char *data, size_t len, uid_t uid) {
    int fd = openat2_beneath(root, rel, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    struct stat st;
    int rc = fstat(fd, &st);
    if (!rc && !S_ISREG(st.st_mode)) errno = EISDIR, rc = -1;
    while (!rc && len) {
        ssize_t n = write(fd, data, len);
        if (n < 0) rc = -1;
        else data += n, len -= n;
    }
    if (!rc) rc = fchown(fd, uid, uid);
    close(fd);
    return rc;
}

static const char *part_path(size_t w, size_t end, const char *part) {
    for (size_t i = w; i < end; i++)
        if (R.recs[i].kind == K_W_PART && !strcmp(R.recs[i].args[0].p, part)) return R.recs[i].args[1].p;
    return NULL;
}

static int prepare_workspace(const struct job *job, size_t w, size_t end, uid_t uid, char *err) {
    if (apply_all(w, end, K_W_MOUNT, NULL, err)) return -1;
    int root = open("/sandbox", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (root < 0) return snprintf(err, ERR, "sandbox step 'open /sandbox' failed: %s", strerror(errno)), -1;
    int rc = 0;
    for (size_t i = w; i < end && !rc; i++)
        if (R.recs[i].kind == K_W_DIR && ensure_dir(root, R.recs[i].args[0].p, uid))
            rc = snprintf(err, ERR, "sandbox step 'make the writable dirs' failed: %s: %s", R.recs[i].args[0].p, strerror(errno));
    for (int i = 0; i < job->nparts && !rc; i++) {
        const char *path = part_path(w, end, job->part_names[i]);
        if (!path || write_file(root, path, job->blob[i], job->blob_len[i], uid))
            rc = snprintf(err, ERR, "sandbox step 'write the request's files' failed: %s: %s", path ? path : job->part_names[i], strerror(errno));
    }
    close(root);
    return rc ? -1 : 0;
}

static int stdin_fd(const struct job *job) {
    if (!job->has_stdin) return open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* a sealed memfd: the task reads it like a file, and cannot change it for a re-read */
    int fd = memfd_create("stdin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    const char *p = job->stdin_data;
    size_t left = job->stdin_len;
    while (fd >= 0 && left) {
        ssize_t n = write(fd, p, left);
        if (n < 0) return close(fd), -1;
        p += n, left -= n;
    }
    if (fd >= 0 && (lseek(fd, 0, SEEK_SET) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0))
        return close(fd), -1;
    return fd;
}

static int output_pipe(int ends[2]) {
    if (pipe2(ends, O_CLOEXEC) < 0) return -1;
    return fcntl(ends[0], F_SETFL, O_NONBLOCK);
}

static long cpu_limit_s(size_t w, size_t end, long long timeout_ms) {
    for (size_t i = w; i < end; i++)
        if (R.recs[i].kind == K_W_RLIMIT_CPU)
            return (timeout_ms + 999) / 1000 * arg_int(&R.recs[i].args[0]) + arg_int(&R.recs[i].args[1]);
    return 0;
}

static int set_rlimit(int which, rlim_t limit) {
    struct rlimit current;
    getrlimit(which, &current);
    if (current.rlim_max != RLIM_INFINITY && limit > current.rlim_max) limit = current.rlim_max;
    struct rlimit wanted = {limit, limit};
    return setrlimit(which, &wanted);
}

/* root's work is done: init takes the task's limits, identity and filter, which the task then
 * inherits through a plain spawn (vfork + exec); init supervises without privileges */
static int become_task(size_t w, size_t end, const struct job *job, uid_t uid, char *err) {
    long cpu = cpu_limit_s(w, end, job->timeout_ms);
    if (cpu > 0 && set_rlimit(RLIMIT_CPU, cpu)) return snprintf(err, ERR, "sandbox step 'set rlimits' failed: %s", strerror(errno)), -1;
    for (size_t i = w; i < end; i++)
        if (R.recs[i].kind == K_W_RLIMIT && set_rlimit(arg_int(&R.recs[i].args[0]), arg_int(&R.recs[i].args[1])))
            return snprintf(err, ERR, "sandbox step 'set rlimits' failed: %s", strerror(errno)), -1;
    const char *cwd = recipe_const(&R, "cwd");
    if (!cwd || chdir(cwd) < 0) return snprintf(err, ERR, "sandbox step 'enter the workspace' failed: %s", strerror(errno)), -1;
    /* raw syscalls: they change this thread only, and init has only one */
    struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[2] = {{0}};
    if (syscall(SYS_setgroups, 0, NULL) || syscall(SYS_setresgid, uid, uid, uid) || syscall(SYS_setresuid, uid, uid, uid) ||
        syscall(SYS_capset, &head, none) || prctl(PR_SET_DUMPABLE, 0))
        return snprintf(err, ERR, "sandbox step 'drop to the slot's user' failed: %s", strerror(errno)), -1;
    arm_death_signal(); /* a uid change cleared it */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return snprintf(err, ERR, "sandbox step 'set no_new_privs' failed: %s", strerror(errno)), -1;
    for (size_t i = 0; i < R.n; i++)
        if (R.recs[i].kind == K_SECCOMP) {
            struct sock_fprog prog = {R.recs[i].args[0].len / 8, (struct sock_filter *)R.recs[i].args[0].p};
            if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
                return snprintf(err, ERR, "sandbox step 'load seccomp' failed: %s", strerror(errno)), -1;
        }
    return 0;
}

static void write_zero(const int *fds, int n) {
    for (int i = 0; i < n; i++)
        if (write(fds[i], "0", 1) < 0) {
        }
}

extern char **environ;

static int spawn_task(size_t w, size_t end, int stdio[3], pid_t *pid, char *err) {
    char *argv[256], *envp[256];
    int argc = 0, envc = 0;
    for (size_t i = w; i < end; i++) {
        if (R.recs[i].kind == K_W_ARGV)
            for (uint32_t k = 0; k < R.recs[i].nargs && argc < 255; k++) argv[argc++] = (char *)R.recs[i].args[k].p;
        if (R.recs[i].kind == K_W_ENV)
            for (uint32_t k = 0; k < R.recs[i].nargs && envc < 255; k++) envp[envc++] = (char *)R.recs[i].args[k].p;
    }
    argv[argc] = envp[envc] = NULL;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    sigset_t defaults, none;
    posix_spawn_file_actions_init(&actions);
    for (int i = 0; i < 3; i++) posix_spawn_file_actions_adddup2(&actions, stdio[i], i);
    posix_spawnattr_init(&attr);
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE); /* what init ignores, the task gets back at its default */
    sigaddset(&defaults, SIGXFSZ);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    /* the task is born in the slot's cgroup, before it can run or fork anything */
    write_zero(cg_procs, n_procs);
    int rc = argc ? posix_spawn(pid, argv[0], &actions, &attr, argv, envp) : EINVAL;
    write_zero(cg_home, n_home);
    for (int i = 0; i < n_procs; i++) close(cg_procs[i]);
    for (int i = 0; i < n_home; i++) close(cg_home[i]);
    n_procs = n_home = 0;
    if (rc) snprintf(err, ERR, "sandbox step 'exec the test command' failed: %s: %s", argc ? argv[0] : "(no argv)", strerror(rc));
    return rc ? -1 : 0;
}

/* --- the result ---------------------------------------------------------------------------- */

struct stats {
    long long memory_peak, oom_kills, pids_hits;
    double cpu_ms;
    int has_memory, has_cpu;
};

static int read_stat(const struct rec *r, double *value) {
    long idx = arg_int(&r->args[1]);
    int fd = idx >= 0 && idx < n_dirs ? openat(cg_dirs[idx], r->args[2].p, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0) return -1;
    char text[4096];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return -1;
    text[n] = '\0';
    const char *key = r->args[3].p, *at = text;
    if (*key) { /* "key value" lines */
        size_t klen = strlen(key);
        for (at = text; at; at = strchr(at, '\n'), at = at ? at + 1 : NULL)
            if (!strncmp(at, key, klen) && at[klen] == ' ') break;
        if (!at) return -1;
        at += klen + 1;
    }
    *value = strtod(at, NULL) / strtod(r->args[4].p, NULL);
    return 0;
}

static struct stats cgroup_stats(double cpu_before_ms) {
    struct stats s = {0};
    for (size_t i = 0; i < R.n; i++) {
        const struct rec *r = &R.recs[i];
        double v;
        if (r->kind != K_STAT || read_stat(r, &v)) continue;
        if (!strcmp(r->args[0].p, "memory_peak")) s.memory_peak = v, s.has_memory = 1;
        else if (!strcmp(r->args[0].p, "cpu")) s.cpu_ms = v - cpu_before_ms, s.has_cpu = 1;
        else if (!strcmp(r->args[0].p, "oom_kills")) s.oom_kills = v;
        else if (!strcmp(r->args[0].p, "pids_hits")) s.pids_hits = v;
    }
    return s;
}

static void failure(const char *message) {
    char text[ERR + 16];
    int n = snprintf(text, sizeof text, "kiln: %s\n", message);
    send_result(sock, "\"op\":\"result\",\"exit_code\":null,\"outcome\":\"infrastructure_failure\",\"wall_ms\":0.0,\"cpu_ms\":0.0,"
                      "\"memory_peak_bytes\":0,\"signal\":null,\"output_overflow\":false", "", 0, text, n);
}

/* outcome by DESIGN.md's precedence (kiln/zygote/supervise.py outcome() is the same) */
static void result(const struct run *run, double started, long cpu_limit_ms) {
    struct stats s = cgroup_stats(0);
    int killed_by = run->has_status && WIFSIGNALED(run->status) ? WTERMSIG(run->status) : 0;
    int exit_code = run->has_status && WIFEXITED(run->status) ? WEXITSTATUS(run->status) : -1;
    if (killed_by) exit_code = 128 + killed_by;
    double cpu_ms = s.has_cpu ? s.cpu_ms : run->has_rusage ? (run->rusage.ru_utime.tv_sec + run->rusage.ru_stime.tv_sec) * 1e3 +
                                                                  (run->rusage.ru_utime.tv_usec + run->rusage.ru_stime.tv_usec) / 1e3 : 0;
    long long memory = s.has_memory ? s.memory_peak : run->has_rusage ? run->rusage.ru_maxrss * 1024LL : 0;
    int rlimit_cpu = cpu_ms >= cpu_limit_ms - 50 && (killed_by == SIGXCPU || killed_by == SIGKILL || exit_code == 128 + SIGXCPU || exit_code == 128 + SIGKILL);
    const char *outcome = "exited";
    int signal_out = killed_by;
    if (run->timed_out || !run->has_status || rlimit_cpu) outcome = "timed_out", exit_code = -1;
    else if (s.oom_kills) outcome = "out_of_memory";
    else if (killed_by == SIGSYS || exit_code == 128 + SIGSYS) outcome = "policy_violation", signal_out = SIGSYS;
    else if (s.pids_hits) outcome = "pids_limit";
    else if (killed_by) outcome = "signaled";
    char code[16] = "null", sig[16] = "null", fields[512];
    if (exit_code >= 0) snprintf(code, sizeof code, "%d", exit_code);
    if (signal_out) snprintf(sig, sizeof sig, "%d", signal_out);
    double ended = run->ended_at ? run->ended_at : monotonic_s();
    snprintf(fields, sizeof fields, "\"op\":\"result\",\"exit_code\":%s,\"outcome\":\"%s\",\"wall_ms\":%.1f,\"cpu_ms\":%.1f,"
             "\"memory_peak_bytes\":%lld,\"signal\":%s,\"output_overflow\":%s",
             code, outcome, (ended - started) * 1000, cpu_ms, memory, sig, run->overflow ? "true" : "false");
    send_result(sock, fields, run->out, run->out_len, run->err, run->err_len);
}

/* solution, checker, asserts and stdin, each at most RUN_INPUT_MAX, plus the header */
static size_t job_frame_max(void) {
    const char *input_max = recipe_const(&R, "input_max");
    return 4 * (input_max ? atoll(input_max) : 0) + 64 * 1024 + 64;
}

static void serve_one_job(uid_t uid) {
    char err[ERR], *body;
    size_t len;
    int rc = read_frame(sock, job_frame_max(), &body, &len, err, ERR);
    if (rc == 0) return; /* the front closed the slot unused */
    struct job job;
    if (rc < 0 || parse_job(&R, body, len, &job, err, ERR)) {
        char escaped[ERR * 2], json[ERR * 2 + 64];
        json_escape(escaped, sizeof escaped, err);
        snprintf(json, sizeof json, "{\"op\":\"error\",\"error\":\"%s\"}", escaped);
        send_json(sock, json, -1);
        return;
    }
    size_t w = job.workload, end = w + 1;
    while (end < R.n && R.recs[end].kind != K_WORKLOAD) end++;
    char title[128];
    snprintf(title, sizeof title, "kiln: slot %ld busy %s", slot_index, R.recs[w].args[0].p);
    set_title("%s", title);
    int stdio[3] = {-1, -1, -1}, out[2], errp[2];
    pid_t pid;
    if (prepare_workspace(&job, w, end, uid, err) || apply_all(w, end, K_W_LIMIT, NULL, err)) return failure(err);
    if ((stdio[0] = stdin_fd(&job)) < 0 || output_pipe(out) || output_pipe(errp))
        return snprintf(err, ERR, "sandbox step 'open stdin and pipes' failed: %s", strerror(errno)), failure(err);
    stdio[1] = out[1], stdio[2] = errp[1];
    if (become_task(w, end, &job, uid, err)) return failure(err);
    double started = monotonic_s();
    if (spawn_task(w, end, stdio, &pid, err)) return failure(err);
    for (int i = 0; i < 3; i++) close(stdio[i]);
    struct run run = {.pid = pid, .task_fd = syscall(SYS_pidfd_open, pid, 0), .out_fd = out[0], .err_fd = errp[0],
                      .cancel_fd = sock, .output_max = atoll(recipe_const(&R, "output_max"))};
    supervise(&run, started + job.timeout_ms / 1000.0, title);
    if (!run.cancelled) result(&run, started, cpu_limit_s(w, end, job.timeout_ms) * 1000);
}

/* --- check mode: the job parser alone, for tests: one frame on stdin, answered as the slot would
 * but with what was parsed instead of a run ------------------------------------------------ */

static int check_job(void) {
    char err[ERR], *body, json[ERR * 2 + 256], escaped[ERR * 2];
    size_t len;
    struct job job;
    int rc = read_frame(0, job_frame_max(), &body, &len, err, ERR);
    if (rc == 0) return 0;
    if (rc < 0 || parse_job(&R, body, len, &job, err, ERR)) {
        json_escape(escaped, sizeof escaped, err);
        snprintf(json, sizeof json, "{\"op\":\"error\",\"error\":\"%s\"}", escaped);
    } else {
        int n = snprintf(json, sizeof json, "{\"op\":\"job\",\"slug\":\"%s\",\"timeout_ms\":%lld,\"stdin\":%s,\"files\":[",
                         R.recs[job.workload].args[0].p, job.timeout_ms, job.has_stdin ? "true" : "false");
        for (int i = 0; i < job.nparts; i++) n += snprintf(json + n, sizeof json - n, "%s\"%s\"", i ? "," : "", job.part_names[i]);
        snprintf(json + n, sizeof json - n, "]}");
    }
    send_json(0, json, -1);
    return 0;
}

int main(int argc, char **argv) {
    title_buf = argv[0];
    title_cap = strlen(argv[0]);
    char err[ERR];
    if (recipe_load(env_fd("KILN_RECIPE"), &R, err, ERR)) {
        fprintf(stderr, "kiln-init: %s\n", err);
        return 70;
    }
    if (argc > 1 && !strcmp(argv[1], "check")) return check_job();
    sock = env_fd("KILN_SOCK");
    zygote = env_fd("KILN_ZYGOTE");
    int netns = env_fd("KILN_NETNS"), template_fd = env_fd("KILN_TEMPLATE");
    n_dirs = env_fds("KILN_CG_DIRS", cg_dirs);
    n_procs = env_fds("KILN_CG_PROCS", cg_procs);
    n_home = env_fds("KILN_CG_HOME", cg_home);
    slot_index = atol(recipe_const(&R, "index") ? recipe_const(&R, "index") : "-1");
    uid_t uid = atol(recipe_const(&R, "uid") ? recipe_const(&R, "uid") : "0");
    if (sock < 0 || zygote < 0 || uid == 0) {
        fprintf(stderr, "kiln-init: started without its descriptors or recipe (the zygote spawns it)\n");
        return 70;
    }
    int keep[3 * MAX_FDS + 4], n = 0;
    keep[n++] = sock, keep[n++] = zygote;
    if (netns >= 0) keep[n++] = netns;
    if (template_fd >= 0) keep[n++] = template_fd;
    for (int i = 0; i < n_dirs; i++) keep[n++] = cg_dirs[i];
    for (int i = 0; i < n_procs; i++) keep[n++] = cg_procs[i];
    for (int i = 0; i < n_home; i++) keep[n++] = cg_home[i];
    close_all_except(keep, n); /* the recipe's memfd too: it is read */
    for (int i = 0; i < n; i++) fcntl(keep[i], F_SETFD, FD_CLOEXEC); /* inherited without it: never the task's */
    clearenv();
    arm_death_signal();
    /* an empty bounding set: no exec of the job's (file capabilities, setuid root) gains one */
    for (int cap = 0; prctl(PR_CAPBSET_READ, cap) >= 0; cap++)
        if (prctl(PR_CAPBSET_DROP, cap)) fail_warm("cannot drop the capability bounding set");
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    set_title("kiln: slot %ld warming", slot_index);
    warm(netns, template_fd);
    serve_one_job(uid);
    return 0;
}
