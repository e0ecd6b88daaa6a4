/* Supervising the task from init, spawned or prestarted alike: its output drained (each stream
 * capped) and, for an interactive test, its stdout passed on to the other side's pipe as it
 * comes; its deadline kept, its processes reaped, a cancel noticed. */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK 65536
#define REAP_EVERY_S 0.1  /* init has no SIGCHLD handler: orphans' zombies are reaped this often */
#define DRAIN_GRACE_S 2.0
#define CPU_EVERY_S 0.01  /* a run with a CPU limit has its cgroup's figure read this often */
#define FORWARD_AHEAD 65536 /* stdout read ahead of what the other side took: then reading waits */

/* From PID 1 of the namespace: every process of the run, and nothing else. */
void kill_all(void) {
    kill(-1, SIGKILL);
}

enum { P_OUT, P_ERR, P_CANCEL, P_TASK, P_FORWARD, P_ADDRESS_SPACE, P_COUNT };

static void close_stream(struct pollfd *fds, int which) {
    if (fds[which].fd >= 0) {
        close(fds[which].fd);
        fds[which].fd = -1;
    }
}

static void read_stream(struct run *run, struct pollfd *fds, int which) {
    char **buf = which == P_OUT ? &run->out : &run->err;
    size_t *len = which == P_OUT ? &run->out_len : &run->err_len;
    *buf = realloc(*buf, *len + READ_CHUNK);
    ssize_t n = read(fds[which].fd, *buf + *len, READ_CHUNK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
        close_stream(fds, which);
        return;
    }
    *len += n;
    if (which == P_OUT && run->forwarding) {
        /* the other side's input, not an answer: forward() keeps output_max of it for the answer */
    } else if (*len > run->output_max && which == P_ERR && run->stderr_cut) {
        *len = run->output_max; /* kept to the cap; the run goes on */
    } else if (*len > run->output_max) {
        *len = run->output_max;
        run->overflow = 1;
        kill_all();
        close_stream(fds, P_OUT);
        close_stream(fds, P_ERR);
    }
}

/* What the task wrote and the other side has not taken yet, written as far as its pipe takes it.
 * The other side gone (EPIPE): nothing more goes on, and the task's stdout is closed (its next
 * write fails as a write to a closed pipe does); its stdout at end-of-file, all passed on and the
 * task reaped: the pipe is closed, the other side reads end-of-file. Not before the reap, as
 * Kattis's interactive runner holds the pipe: the task's end is stamped (reap()) before the other
 * side can end on that end-of-file, so "who ended first" (judge.py) never reads it the wrong way. */
static void forward(struct run *run, struct pollfd *fds) {
    size_t pending = run->out_len - run->forwarded;
    if (pending) {
        ssize_t n = write(run->forward_fd, run->out + run->forwarded, pending);
        if (n > 0) run->forwarded += n, pending -= n;
        if (run->forwarded > run->output_max) { /* what went on past the answer's first output_max bytes is not kept */
            memmove(run->out + run->output_max, run->out + run->forwarded, pending);
            run->out_len = run->output_max + pending, run->forwarded = run->output_max;
        }
        else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            close_stream(fds, P_OUT);
            pending = 0, run->forwarded = run->out_len;
            fds[P_OUT].fd = -1;
            close(run->forward_fd), run->forward_fd = -1;
            return;
        }
    }
    if (!pending && fds[P_OUT].fd < 0 && run->has_status) close(run->forward_fd), run->forward_fd = -1;
}

/* The run's time is up (its deadline, or its CPU limit): what the kernel had recorded by then
 * decides whether memory ended it first (an OOM kill of its cgroup), then everything of it ends. */
static void end_for_time(struct slot *s, struct run *run) {
    long long oom_kills, pids_hits;
    cgroup_counts(s, &oom_kills, &pids_hits);
    if (oom_kills > run->oom_before) run->oom_first = 1;
    kill_all();
}

/* A task reaped at or after its deadline timed out, whatever it had read or written by then.
 * Background processes end with the test command: killed once it is reaped, unless init has no
 * child left. Every process of the slot's pid namespace descends from init, and an orphan is
 * init's child before its parent can be reaped, so no child means no process; and kill(-1)
 * walks every process of the host, not only the slot's, under the kernel's task list lock. */
static void reap(struct slot *s, struct run *run, double deadline) {
    for (;;) {
        int status;
        struct rusage usage;
        pid_t pid = wait4(-1, &status, WNOHANG, &usage);
        if (pid == 0 && run->has_status) kill_all();
        if (pid <= 0) return;
        if (pid == run->pid) {
            if (run->report_fd >= 0) test_init_status(run, &status, &usage);
            run->status = status, run->has_status = 1;
            run->rusage = usage, run->has_rusage = 1;
            run->ended_at = monotonic_s();
            if (run->ended_at >= deadline && !run->timed_out) {
                long long oom_kills, pids_hits;
                cgroup_counts(s, &oom_kills, &pids_hits);
                run->oom_first = oom_kills > run->oom_before, run->timed_out = 1;
            }
        }
    }
}

/* `deadline` moves on by the time the run was starved of CPU (starve.c), up to starved_max_s */
void supervise(struct slot *s, struct run *run, double deadline, const char *title) {
    struct pollfd fds[P_COUNT] = {
        [P_OUT] = {run->out_fd, POLLIN}, [P_ERR] = {run->err_fd, POLLIN},
        [P_CANCEL] = {run->cancel_fd, POLLIN}, [P_TASK] = {run->task_fd, POLLIN}, [P_FORWARD] = {-1, POLLOUT},
        [P_ADDRESS_SPACE] = {run->address_space.listening ? run->address_space.listener : -1, POLLIN},
    };
    run->forwarding = run->forward_fd >= 0;
    if (run->forward_fd >= 0) fcntl(run->forward_fd, F_SETFL, O_NONBLOCK);
    double drain_until = 0, started = monotonic_s(), retitled = started, due = deadline;
    starve_begin(s, &run->starve, started);
    while (fds[P_OUT].fd >= 0 || fds[P_ERR].fd >= 0 || !run->has_status || (run->forward_fd >= 0 && run->out_len > run->forwarded)) {
        double now = monotonic_s();
        if (now - retitled >= TITLE_EVERY_S) {
            set_title(s, TITLE_AGED, title, now - started);
            retitled = now;
        }
        if (!drain_until && (run->has_status || run->timed_out || run->overflow)) drain_until = now + DRAIN_GRACE_S;
        if (!drain_until) {
            double starved = starve_update(s, &run->starve, now);
            due = deadline + (starved < run->starved_max_s ? starved : run->starved_max_s);
        }
        double limit = drain_until ? drain_until : due;
        if (now >= limit) {
            if (drain_until) break; /* a process the kernel has not finished killing holds a pipe */
            run->timed_out = 1;
            end_for_time(s, run);
            continue;
        }
        double every = run->cpu_limit_ms > 0 && !drain_until ? CPU_EVERY_S : REAP_EVERY_S;
        double wait_s = limit - now < every ? limit - now : every;
        /* an interactive test: its stdout read no further ahead of the other side than a pipe's worth */
        int out_fd = fds[P_OUT].fd, held = run->forward_fd >= 0 && run->out_len - run->forwarded >= FORWARD_AHEAD;
        fds[P_FORWARD].fd = run->forward_fd >= 0 && run->out_len > run->forwarded ? run->forward_fd : -1;
        if (held) fds[P_OUT].fd = -1;
        int ready = poll(fds, P_COUNT, (int)(wait_s * 1000) + 1);
        if (held) fds[P_OUT].fd = out_fd, fds[P_OUT].revents = 0;
        reap(s, run, due);
        if (run->cpu_limit_ms > 0 && !drain_until && cgroup_cpu_ms(s) - run->cpu_before_ms >= run->cpu_limit_ms) {
            run->cpu_exceeded = 1;
            end_for_time(s, run);
        }
        if (ready <= 0) continue;
        if (fds[P_TASK].revents) fds[P_TASK].fd = -1; /* reaped above; stays readable */
        if (fds[P_ADDRESS_SPACE].revents & POLLIN) address_space_answer(&run->address_space);
        else if (fds[P_ADDRESS_SPACE].revents) fds[P_ADDRESS_SPACE].fd = -1; /* no process of the task's filter left */
        if (fds[P_CANCEL].revents) {
            run->cancelled = 1;
            kill_all();
            break;
        }
        for (int which = P_OUT; which <= P_ERR; which++)
            if (fds[which].fd >= 0 && fds[which].revents) read_stream(run, fds, which);
        if (run->forward_fd >= 0) forward(run, fds);
    }
    /* what is left open (a cancel, or a pipe a dying process still held), and the task's pidfd:
     * a slot that runs a request's tests one after another opens these for every test */
    close_stream(fds, P_OUT);
    close_stream(fds, P_ERR);
    if (run->forward_fd >= 0) close(run->forward_fd), run->forward_fd = -1;
    if (run->task_fd >= 0) close(run->task_fd), run->task_fd = -1;
    if (run->forwarding && run->out_len > run->output_max) run->out_len = run->output_max; /* what never went on */
}
