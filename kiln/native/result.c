/* What became of a run: the slot's cgroup figures (read where the recipe's K_STAT records say:
 * SlotCgroup.stat_sources), the outcome by DESIGN.md's precedence, one result frame. The files
 * of the figures, and those that set the memory peak back between a slot's judge tests, are
 * opened once and kept: a slot that runs a request's tests reads them several times a test. */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct stats {
    long long memory_peak, oom_kills, pids_hits;
    double cpu_ms;
    int has_memory, has_cpu;
};

/* A file of the slot's cgroup directory number dir_index, opened with `flags` the first time and
 * kept (KEPT_FILES of them; past that, *kept is 0 and the caller closes it); -1 if it cannot be
 * opened. Read and written at offset 0: a cgroup file gives its value afresh each time. */
static int cgroup_file(struct slot *s, long dir_index, const char *file, int flags, int *kept) {
    *kept = 1;
    for (int i = 0; i < s->n_kept; i++)
        if (s->kept[i].dir_index == dir_index && s->kept[i].flags == flags && !strcmp(s->kept[i].file, file)) return s->kept[i].fd;
    int fd = dir_index >= 0 && dir_index < s->n_dirs ? openat(s->cg_dirs[dir_index], file, flags | O_CLOEXEC) : -1;
    if (fd >= 0 && s->n_kept < KEPT_FILES) s->kept[s->n_kept++] = (struct kept_file){dir_index, file, flags, fd};
    else *kept = 0;
    return fd;
}

/* A kept slot's later test in a cgroup of its own (kept.c): the files kept of the directory that
 * cgroup stands in for are another cgroup's, closed as it comes and goes */
void forget_cgroup_files(struct slot *s, long dir_index) {
    int n = 0;
    for (int i = 0; i < s->n_kept; i++) {
        if (s->kept[i].dir_index == dir_index) close(s->kept[i].fd);
        else s->kept[n++] = s->kept[i];
    }
    s->n_kept = n;
}

/* Whether a K_PEAK_RESET record sets back this file: then it is read and written through one
 * descriptor, opened read-write. v2's memory.peak is set back only for the reads through the
 * descriptor that wrote to it (Linux 6.12); v1's max_usage_in_bytes for every reader. */
static int set_back(const struct slot *s, long dir_index, const char *file) {
    for (size_t i = 0; i < s->recipe.n; i++) {
        const struct rec *r = &s->recipe.recs[i];
        if (r->type == K_PEAK_RESET && arg_int(&r->args[ARG(CGROUP_WRITE, dir_index)]) == dir_index && !strcmp(r->args[ARG(CGROUP_WRITE, file)].p, file)) return 1;
    }
    return 0;
}

/* a K_STAT record's file: its number, or the value of its "key value" line, over the divisor */
static int read_stat(struct slot *s, const struct rec *r, double *value) {
    long dir_index = arg_int(&r->args[ARG(STAT, dir_index)]);
    const char *file = r->args[ARG(STAT, file)].p;
    int kept, fd = cgroup_file(s, dir_index, file, set_back(s, dir_index, file) ? O_RDWR : O_RDONLY, &kept);
    if (fd < 0) return -1;
    char text[4096];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (!kept) close(fd);
    if (n <= 0) return -1;
    text[n] = '\0';
    const char *key = r->args[ARG(STAT, key)].p, *at = text;
    if (*key) {
        size_t klen = strlen(key);
        while (at && !(!strncmp(at, key, klen) && at[klen] == ' ')) {
            at = strchr(at, '\n');
            if (at) at++;
        }
        if (!at) return -1;
        at += klen + 1;
    }
    char *end;
    double number = strtod(at, &end);
    if (end == at && *key) { /* a pressure line, "full avg10=0.00 avg60=0.00 avg300=0.00 total=N": its total */
        const char *total = strstr(at, "total="), *eol = strchr(at, '\n');
        if (total && (!eol || total < eol)) at = total + 6, number = strtod(at, &end);
    }
    if (end == at) return -1; /* "max", or nothing */
    *value = number / strtod(r->args[ARG(STAT, divisor)].p, NULL);
    return 0;
}

/* every figure, or only the counts (OOM kills, pids-limit hits) */
static struct stats cgroup_stats(struct slot *slot, int counts_only) {
    struct stats s = {0};
    for (size_t i = 0; i < slot->recipe.n; i++) {
        const struct rec *r = &slot->recipe.recs[i];
        double v;
        if (r->type != K_STAT) continue;
        long long what = arg_int(&r->args[ARG(STAT, what)]);
        if ((counts_only && what != STAT_oom_kills && what != STAT_pids_hits) || read_stat(slot, r, &v)) continue;
        if (what == STAT_memory_peak) s.memory_peak = v, s.has_memory = 1;
        else if (what == STAT_cpu) s.cpu_ms = v, s.has_cpu = 1;
        else if (what == STAT_oom_kills) s.oom_kills = v;
        else if (what == STAT_pids_hits) s.pids_hits = v;
    }
    return s;
}

double cgroup_figure(struct slot *s, enum cgroup_stat what) {
    for (size_t i = 0; i < s->recipe.n; i++) {
        const struct rec *r = &s->recipe.recs[i];
        double v;
        if (r->type == K_STAT && arg_int(&r->args[ARG(STAT, what)]) == what && !read_stat(s, r, &v)) return v;
    }
    return -1;
}

/* a run's CPU baseline, read just before its spawn or go, and its figure while it runs */
double cgroup_cpu_ms(struct slot *s) {
    return cgroup_figure(s, STAT_cpu);
}

void cgroup_counts(struct slot *slot, long long *oom_kills, long long *pids_hits) {
    struct stats s = cgroup_stats(slot, 1);
    *oom_kills = s.oom_kills, *pids_hits = s.pids_hits;
}

/* the K_PEAK_RESET records (CGROUP_WRITE), written through the descriptor the figure is read
 * from (set_back), which must stay open: a v2 peak set back through a descriptor then closed is not */
int reset_peak(struct slot *s, char *err) {
    for (size_t i = 0; i < s->recipe.n; i++) {
        const struct rec *r = &s->recipe.recs[i];
        if (r->type != K_PEAK_RESET) continue;
        const struct arg *file = &r->args[ARG(CGROUP_WRITE, file)], *value = &r->args[ARG(CGROUP_WRITE, value)];
        int kept = 0, fd = cgroup_file(s, arg_int(&r->args[ARG(CGROUP_WRITE, dir_index)]), file->p, O_RDWR, &kept);
        ssize_t n = fd < 0 ? -1 : pwrite(fd, value->p, value->len, 0);
        int error = fd >= 0 && !kept ? EMFILE : errno;
        if (fd >= 0 && !kept) close(fd), n = -1;
        if (n < 0) return snprintf(err, ERR, "sandbox step 'set the memory peak back' failed: %s: %s", file->p, strerror(error)), -1;
    }
    return 0;
}

static const char *const OUTCOME_NAMES[] = {
#define OUTCOME_NAME(name) #name,
    OUTCOMES(OUTCOME_NAME)
};

const char *outcome_name(unsigned i) {
    return i < sizeof OUTCOME_NAMES / sizeof *OUTCOME_NAMES ? OUTCOME_NAMES[i] : NULL;
}

void send_failure(const struct slot *s, const char *message) {
    char text[ERR + 16], fields[512];
    int n = snprintf(text, sizeof text, "kiln: %s\n", message);
    snprintf(fields, sizeof fields, RESULT_FORMAT, "null", OUTCOME_NAMES[OUTCOME_infrastructure_failure], 0.0, 0.0, 0LL, "null", "false", "false", "false", monotonic_s() * 1e3);
    send_result(s->sock, fields, "", 0, text, n, NULL, 0);
}

/* timed_out > out_of_memory > policy_violation > pids_limit > signaled > exited (DESIGN.md); a
 * run the kernel had ended for memory by the time its time was up is out of memory */
void send_result_of(struct slot *slot, const struct run *run, double started, long cpu_limit_ms, double cpu_before_ms, const char *layer, size_t layer_len) {
    struct stats s = cgroup_stats(slot, 0);
    s.oom_kills -= run->oom_before, s.pids_hits -= run->pids_hits_before; /* this run's, in a slot's later tests */
    int killed_by = run->has_status && WIFSIGNALED(run->status) ? WTERMSIG(run->status) : 0;
    int exit_code = run->has_status && WIFEXITED(run->status) ? WEXITSTATUS(run->status) : -1;
    if (killed_by) exit_code = 128 + killed_by;
    /* the cgroup counts every process of the run; rusage only those the task waited for */
    const struct rusage *u = &run->rusage;
    double cpu_ms = s.has_cpu ? s.cpu_ms - cpu_before_ms
                  : run->has_rusage ? (u->ru_utime.tv_sec + u->ru_stime.tv_sec) * 1e3 + (u->ru_utime.tv_usec + u->ru_stime.tv_usec) / 1e3 : 0;
    long long memory = s.has_memory ? s.memory_peak : run->has_rusage ? u->ru_maxrss * 1024LL : 0;
    /* under sh, a child's signal N comes as the status 128+N; a program's own status is its own */
    int child_killed_by = run->shell && !killed_by && exit_code > 128 && exit_code < 128 + 65 ? exit_code - 128 : 0;
    int rlimit_cpu = cpu_ms >= cpu_limit_ms - 50 && (killed_by == SIGXCPU || killed_by == SIGKILL || child_killed_by == SIGXCPU || child_killed_by == SIGKILL);
    enum outcome outcome = OUTCOME_exited;
    int signal_out = killed_by;
    if ((run->timed_out || run->cpu_exceeded || !run->has_status || rlimit_cpu) && !(run->oom_first && s.oom_kills)) outcome = OUTCOME_timed_out, exit_code = -1;
    else if (s.oom_kills) outcome = OUTCOME_out_of_memory;
    else if (killed_by == SIGSYS || child_killed_by == SIGSYS) outcome = OUTCOME_policy_violation, signal_out = SIGSYS;
    else if (s.pids_hits) outcome = OUTCOME_pids_limit;
    else if (killed_by) outcome = OUTCOME_signaled;
    char code[16] = "null", sig[16] = "null", fields[512];
    if (exit_code >= 0) snprintf(code, sizeof code, "%d", exit_code);
    if (signal_out) snprintf(sig, sizeof sig, "%d", signal_out);
    double ended = run->ended_at ? run->ended_at : monotonic_s();
    snprintf(fields, sizeof fields, RESULT_FORMAT, code, OUTCOME_NAMES[outcome], (ended - started) * 1000, cpu_ms, memory, sig, run->overflow ? "true" : "false", run->next ? "true" : "false",
             address_space_reached(&run->address_space, run) ? "true" : "false", ended * 1e3);
    send_result(slot->sock, fields, run->out, run->out_len, run->err, run->err_len, layer, layer_len);
}
