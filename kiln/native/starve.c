/* The starvation clock: how long a run's processes waited for a CPU that other processes of the
 * host held, while none of them ran. A run's wall-clock deadline moves on by that much (at most
 * the recipe's starved_max_times its timeout: twice slots/CPUs, at least 3), so that a saturated
 * host ends a run for the time it had, not for the time it was denied: an honest submission
 * within its CPU time is not TLE because ten others ran beside it, and a memory bomb reaches its
 * limit (MLE) instead of its deadline.
 *
 * The figure is the kernel's where it keeps one: the slot's cgroup's cpu.pressure "full" line
 * (cgroup v2, Linux 5.13+; the recipe's K_STAT "cpu_starved"), the time in which every runnable
 * task of the cgroup waited for a CPU. Elsewhere (cgroup v1) it is estimated from the tasks'
 * schedstat (time on a CPU, time waiting for one): per interval, the waiting time, but no more
 * than the interval less the time the run's tasks ran, so that a run whose own threads outnumber
 * the CPUs (they wait for each other) is not counted as starved. An interval in which a task
 * ended (the sums went down) counts nothing. */
#include "kiln.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STARVE_EVERY_S 0.1

/* the sums of every thread's time on a CPU and time waiting for one, in ns, over the slot's pid
 * namespace but init itself (its /proc); 0 if none could be read */
static int thread_times(unsigned long long *ran, unsigned long long *waited) {
    *ran = *waited = 0;
    DIR *proc = opendir("/proc");
    if (!proc) return -1;
    struct dirent *p;
    char path[64], text[96];
    while ((p = readdir(proc))) {
        if (p->d_name[0] < '0' || p->d_name[0] > '9' || !strcmp(p->d_name, "1")) continue;
        snprintf(path, sizeof path, "/proc/%.16s/task", p->d_name);
        DIR *tasks = opendir(path);
        if (!tasks) continue; /* gone */
        struct dirent *t;
        while ((t = readdir(tasks))) {
            if (t->d_name[0] < '0' || t->d_name[0] > '9') continue;
            snprintf(path, sizeof path, "/proc/%.16s/task/%.16s/schedstat", p->d_name, t->d_name);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            ssize_t n = read(fd, text, sizeof text - 1);
            close(fd);
            unsigned long long on_cpu, waiting;
            if (n > 0 && (text[n] = '\0', sscanf(text, "%llu %llu", &on_cpu, &waiting) == 2)) *ran += on_cpu, *waited += waiting;
        }
        closedir(tasks);
    }
    closedir(proc);
    return 0;
}

static void sample(struct slot *s, struct starve *c, double now) {
    c->at = now;
    c->psi_ms = cgroup_figure(s, STAT_cpu_starved);
    if (c->psi_ms < 0 && thread_times(&c->ran_ns, &c->waited_ns)) c->ran_ns = c->waited_ns = 0;
}

/* At the run's start, on the request's path, so no walk of /proc: the cgroup's figure (one read of
 * a kept file), and
 * for the threads' estimate a baseline of nothing (the task has just been spawned or released: its
 * threads' sums are those of the run; a prestarted task's warm-up counts in the first interval at
 * most, and never more than that interval less what it ran) */
void starve_begin(struct slot *s, struct starve *c, double now) {
    c->starved_s = 0;
    c->at = now;
    c->psi_ms = cgroup_figure(s, STAT_cpu_starved);
    c->ran_ns = c->waited_ns = 0;
}

/* the starved time so far; the figures are read every STARVE_EVERY_S at most */
double starve_update(struct slot *s, struct starve *c, double now) {
    if (now - c->at < STARVE_EVERY_S) return c->starved_s;
    struct starve before = *c;
    sample(s, c, now);
    if (before.psi_ms >= 0 && c->psi_ms >= before.psi_ms) {
        c->starved_s += (c->psi_ms - before.psi_ms) / 1000;
    } else if (before.psi_ms < 0 && c->psi_ms < 0 && c->ran_ns >= before.ran_ns && c->waited_ns >= before.waited_ns) {
        double interval = now - before.at, ran = (c->ran_ns - before.ran_ns) / 1e9, waited = (c->waited_ns - before.waited_ns) / 1e9;
        double idle = interval > ran ? interval - ran : 0;
        c->starved_s += waited < idle ? waited : idle;
    }
    return c->starved_s;
}
