/* The task's limits: its rlimits (init takes them, the task inherits them through its spawn)
 * and the slot's cgroup limits, written through the directory fds the zygote opened (the
 * records' dir_index numbers them: SlotCgroup.fd_groups()). */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* `value` written to `file` of the slot's cgroup directory number dir_index */
static int write_cgroup(const struct slot *s, long dir_index, const char *file, const struct arg *value, char *err) {
    int fd = dir_index >= 0 && dir_index < s->n_dirs ? openat(s->cg_dirs[dir_index], file, O_WRONLY | O_CLOEXEC) : -1;
    ssize_t n = fd < 0 ? -1 : write(fd, value->p, value->len);
    if (fd >= 0) close(fd);
    if (n < 0) snprintf(err, ERR, "sandbox step 'set cgroup limits' failed: %s = %s: %s", file, value->p, strerror(errno));
    return n < 0 ? -1 : 0;
}

/* Every limit record of `type` (K_WARM_LIMIT, K_W_LIMIT, K_W_PRESTART_LIMIT: CGROUP_WRITE) in `span`, in order */
int apply_cgroup_limits(struct slot *s, struct span span, uint32_t type, char *err) {
    for (size_t i = span.from; i < span.to; i++) {
        const struct arg *a = s->recipe.recs[i].args;
        if (s->recipe.recs[i].type == type && write_cgroup(s, arg_int(&a[ARG(CGROUP_WRITE, dir_index)]), a[ARG(CGROUP_WRITE, file)].p, &a[ARG(CGROUP_WRITE, value)], err))
            return -1;
    }
    return 0;
}

/* A job's own memory and pids limits, lower than its language's (parse_job checked), written
 * where the K_JOB_LIMIT records say, in their order (the order that lowers a limit). */
int apply_job_limits(struct slot *s, const struct job *job, char *err) {
#define JOB_LIMIT_VALUE(name) job->name,
    const long long values[N_JOB_LIMITS] = {JOB_LIMITS(JOB_LIMIT_VALUE)};
    for (size_t i = 0; i < s->recipe.n; i++) {
        const struct rec *r = &s->recipe.recs[i];
        if (r->type != K_JOB_LIMIT) continue;
        long long code = arg_int(&r->args[ARG(JOB_LIMIT, what)]), value = code >= 0 && code < N_JOB_LIMITS ? values[code] : 0;
        if (value <= 0) continue;
        char text[32];
        struct arg written = {text, (uint32_t)snprintf(text, sizeof text, "%lld", value)};
        if (write_cgroup(s, arg_int(&r->args[ARG(JOB_LIMIT, dir_index)]), r->args[ARG(JOB_LIMIT, file)].p, &written, err)) return -1;
    }
    return 0;
}

/* plan.cpu_rlimit_terms: RLIMIT_CPU from the run's timeout; a job with its own CPU limit (a
 * judge's test, which the supervisor stops at that limit for the whole cgroup) gets a second
 * more, as a backstop */
long cpu_limit_s(const struct slot *s, struct span w, long long timeout_ms, long long cpu_ms) {
    if (cpu_ms > 0) return (cpu_ms + 999) / 1000 + 1;
    for (size_t i = w.from; i < w.to; i++)
        if (s->recipe.recs[i].type == K_W_RLIMIT_CPU)
            return (timeout_ms + 999) / 1000 * arg_int(&s->recipe.recs[i].args[ARG(CPU_TERMS, seconds_per_started_second)]) + arg_int(&s->recipe.recs[i].args[ARG(CPU_TERMS, extra)]);
    return 0;
}

/* Each rlimit is set on the task's own process, never on init: a hard limit once lowered cannot
 * be raised again without CAP_SYS_RESOURCE in the host's namespace, and a kept slot's next job
 * (a checker after a test with a time limit of 1 s) must have its own, higher ones.
 * soft = hard = the plan's value, or the current hard limit where that is lower (a service
 * manager may have lowered it). */
int give_rlimits(const struct slot *s, pid_t pid) {
    for (int i = 0; i < s->n_rlimits; i++) {
        struct rlimit current;
        rlim_t limit = s->rlimits[i].value;
        if (prlimit(pid, s->rlimits[i].resource, NULL, &current)) return s->rlimits[i].resource + 1;
        if (current.rlim_max != RLIM_INFINITY && limit > current.rlim_max) limit = current.rlim_max;
        struct rlimit wanted = {limit, limit};
        if (prlimit(pid, s->rlimits[i].resource, &wanted, NULL)) return s->rlimits[i].resource + 1;
    }
    return 0;
}

static void record_rlimit(struct slot *s, int resource, rlim_t value) {
    if (s->n_rlimits < RLIM_NLIMITS) s->rlimits[s->n_rlimits++] = (struct task_rlimit){resource, value};
}

static int fail(char *err, const char *step, const char *what) {
    snprintf(err, ERR, "sandbox step '%s' failed: %s%s%s", step, what ? what : "", what ? ": " : "", strerror(errno));
    return -1;
}

int take_limits(struct slot *s, struct span w, long long timeout_ms, long long cpu_ms, char *err) {
    long cpu = cpu_limit_s(s, w, timeout_ms, cpu_ms);
    s->n_rlimits = 0;
    if (cpu > 0) record_rlimit(s, RLIMIT_CPU, cpu);
    for (size_t i = w.from; i < w.to; i++)
        if (s->recipe.recs[i].type == K_W_RLIMIT) record_rlimit(s, arg_int(&s->recipe.recs[i].args[ARG(RLIMIT, resource)]), arg_int(&s->recipe.recs[i].args[ARG(RLIMIT, value)]));
    int failed = s->standby.pid > 0 ? give_rlimits(s, s->standby.pid) : 0;
    if (failed) {
        char which[24];
        snprintf(which, sizeof which, "resource %d", failed - 1); /* RLIMIT_* as <sys/resource.h> numbers them */
        return fail(err, "set rlimits", which);
    }
    const char *cwd = s->recipe.cwd;
    if (!cwd) errno = ENOENT;
    return !cwd || chdir(cwd) < 0 ? fail(err, "enter the workspace", cwd) : 0;
}
