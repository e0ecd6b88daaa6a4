/* kiln-init: a slot's init, PID 1 of the slot's pid namespace. The zygote spawns it (vfork +
 * exec, spawn.c) already in the slot's new namespaces, hands it a recipe (the plans the zygote
 * made, compiled by kiln/zygote/recipe.py) and descriptors, and forgets it. It warms the slot,
 * serves a job, answers, and exits; everything left of the run dies with it. A kept slot (a plain
 * slot that can run a judge's tests one after another, kept.c) serves the next test while the
 * front sends them, each in a fresh sandbox, and exits when the front closes it or it cannot take
 * another. This file is the order of its steps alone, in main(), warm(), serve_job() and
 * execute(); each step is a file's concern:
 *
 *   start.c     its environment, the descriptors it keeps, becoming init
 *   mounts.c    the root (built, or the index's copied) and the workspace overlay
 *   files.c     the directories and files the request writes below /sandbox, its stdin
 *   limits.c    rlimits and cgroup limits        identity.c  the task's cgroup, user, filter
 *   standby.c   a plain slot's task, made while warming
 *   prestart.c  a prestarted slot's command, spawned or handed by its template, and its go
 *   receive.c   the job frame read and checked   exec.c      the task's pipes and spawn
 *   supervise.c its output, deadline, reaping    result.c    its figures and outcome
 *   kept.c      a kept slot between its tests    testinit.c  a later test's pid namespace and init
 *   frames.c    the socket's frames              launch.c    template mode (KILN_TEMPLATE_OF)
 *   header.c    a job's header, key by key (JOB_KEYS), and its checks
 *   check.c     `kiln-init check` (the fuzz tests)   contract.c  `kiln-init contract`
 *
 * Its descriptors and settings come in the environment (start.c). Every error while warming is a
 * "failed" frame to the zygote; every error in a job, an infrastructure_failure result. */
#include "kiln.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void fail_warm(struct slot *s, const char *error) {
    send_error(s->sock, "failed", error);
    _exit(0);
}

/* --- warm --------------------------------------------------------------------------------- */

/* become init -> the root: the index's root image built, or a private copy of it entered -> the
 * slot's own /tmp, /proc, upper layer, hostname -> plain: the usual cgroup limits | prestarted:
 * its language's workspace, limits, filter, and its prestart command spawned and waiting (or
 * forked by the template, entering) -> "ready" (with the root image, if it built it) */
static void warm(struct slot *s, const struct start *start) {
    char err[ERR];
    if (become_init(s, err)) fail_warm(s, err);
    int built = build_root(s, start->root_image, err);
    if (built == -2) fail_warm(s, err);
    if (*start->prestart) {
        if ((s->prestarted.workload_rec = find_workload_rec(&s->recipe, start->prestart)) < 0) fail_warm(s, "prestarted for a language the recipe does not have");
        struct span w = workload_span(&s->recipe, s->prestarted.workload_rec);
        if (start->forked >= 0 ? start_forked(s, w, start->forked, start->forked_pid, err) : start_prestarted(s, w, err)) fail_warm(s, err);
    } else if (apply_cgroup_limits(s, (struct span){0, s->recipe.n}, K_WARM_LIMIT, err) || (s->n_procs && standby_make(s, err))) {
        fail_warm(s, err); /* most requests then find them written, and their task in its cgroups (standby.c) */
    } else { /* a plain slot may run a judge's tests one after another, each in a copy of it */
        s->base_ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    }
    send_json(s->sock, built >= 0 ? "{\"op\":\"ready\",\"" READY_ROOT_IMAGE "\":true}" : "{\"op\":\"ready\"}", built);
    if (built >= 0) close(built);
    set_title(s, TITLE_WARM, s->recipe.index, *start->prestart ? " " : "", start->prestart);
}

/* --- job ---------------------------------------------------------------------------------- */

/* the task, spawned or released -> supervised -> what a test's load held, a build's layer or the
 * file an exec job gives back -> one result frame (none for a run the front cancelled) */
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
    int stdio[3], ends[2], nargs = job->command == CMD_EXEC ? job->nparts : 0;
    struct run run = {.report_fd = -1};
    /* a kept slot's later test: its memory peak set back, or a cgroup of its own (kept.c) */
    if (job->command == CMD_EXEC && s->base_ns >= 0 && (fresh_sandbox(s, err) || (s->tests_served && (s->recipe.test_cgroups ? enter_test_cgroup(s, err) : reset_peak(s, err)))))
        return send_failure(s, err);
    /* a kept slot's cgroup counts every job it ran: its later jobs' figures are what grew since; a
     * test's own cgroup (kept.c) counts from 0, as a fresh slot's does */
    int counted_before = s->tests_served && s->test_cg.dir < 0;
    if (counted_before) cgroup_counts(s, &run.oom_before, &run.pids_hits_before);
    if (mount_workspace(s, w, job->layer, err) || (job->command == CMD_TEST ? write_parts(s, w, job, err) : give_judge_files(s, job, paths, err)) ||
        write_limits(s, job, w, err))
        return send_failure(s, err);
    for (int i = 0; i < nargs; i++) args[i] = paths[i];
    /* the address space before the rlimits: it may set the standby aside, and then the task's own process takes them (exec.c) */
    if (task_stdio(s, job, stdio, ends, err) || address_space_prepare(s, job->address_space, err) || take_limits(s, w, job->timeout_ms, job->cpu_ms, err))
        return send_failure(s, err);
    /* CPU as counts; a first job with a CPU limit also leaves out its slot's warm-up */
    double cpu_before_ms = counted_before || (job->cpu_ms > 0 && !s->tests_served) ? cgroup_cpu_ms(s) : 0, started = monotonic_s();
    /* a kept slot's later tests: each in a pid namespace of its own (testinit.c) */
    int failed_spawn = s->tests_served ? spawn_under_test_init(s, w, COMMAND_ARGV[job->command], args, nargs, stdio, 3, &run, err)
                                       : spawn_task(s, w, COMMAND_ARGV[job->command], args, nargs, stdio, 3, &run.pid, &run.shell, err);
    address_space_started(s, &run.address_space);
    if (failed_spawn) return address_space_end(&run.address_space), send_failure(s, err);
    for (int i = 0; i < 3; i++) close(stdio[i]);
    run.out_fd = ends[0], run.err_fd = ends[1];
    run.forward_fd = job->has_pipes ? job->pipe_fds[1] : -1;
    run.next = job->command == CMD_EXEC && !job->has_pipes && s->base_ns >= 0;
    supervise_and_answer(s, &run, job, w, started, cpu_before_ms > 0 ? cpu_before_ms : 0, title);
    address_space_end(&run.address_space);
}

/* a prestarted slot: files -> go -> supervise -> the result; its start-up was not the request's */
static void execute_prestarted(struct slot *s, const struct job *job, struct span w, const char *title) {
    char err[ERR];
    if (prestart_gone(s)) return;
    double cpu_before_ms = cgroup_cpu_ms(s), started = monotonic_s();
    if (write_parts(s, w, job, err)) return send_failure(s, err);
    struct run run;
    if (release_prestarted(s, &run, err)) return send_failure(s, err);
    supervise_and_answer(s, &run, job, w, started, cpu_before_ms > 0 ? cpu_before_ms : 0, title);
}

/* what a job leaves its slot: done (init exits), or kept for the judge's next test (kept.c), the
 * front's to send or not */
enum served { SLOT_DONE, SLOT_KEPT };

/* one frame, checked -> run as its command says (test, build, exec) -> one result frame */
static enum served serve_job(struct slot *s) {
    char err[ERR], *body, title[128];
    struct job job;
    int rc = receive_job(s, &job, &body, err);
    if (rc == 0) return SLOT_DONE; /* the front closed the slot (unused: shutdown, or warmed for another language; or kept, its tests done) */
    if (rc < 0) return send_error(s->sock, "error", err), SLOT_DONE;
    struct span w = workload_span(&s->recipe, job.workload_rec);
    snprintf(title, sizeof title, TITLE_BUSY, s->recipe.index, s->recipe.recs[job.workload_rec].args[ARG(WORKLOAD, slug)].p);
    set_title(s, "%s", title);
    if (s->prestarted.workload_rec >= 0) return execute_prestarted(s, &job, w, title), SLOT_DONE;
    execute(s, &job, w, title);
    close_file_fds(&job); /* copied into the sandbox (or not, when its run failed before) */
    free(body);
    if (job.command != CMD_EXEC || job.has_pipes || s->base_ns < 0) return SLOT_DONE; /* as its result said (run.next) */
    s->tests_served++;
    return ready_for_next(s) == 0 ? SLOT_KEPT : SLOT_DONE;
}

int main(int argc, char **argv) {
    struct slot s = {.sock = -1, .zygote = -1, .sandbox = -1, .base_ns = -1, .pid_ns = -1, .lower_held = {-1, -1}, .limits_written = {.workload_rec = -1}, .test_cg = {.dir = -1, .procs = -1}, .prestarted = {.workload_rec = -1},
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
    if (*start.template_of) exec_template(&s, start.root_image, start.template_of, start.module);
    set_title(&s, TITLE_WARMING, s.recipe.index);
    warm(&s, &start);
    /* a slot's jobs: one, or, kept, a judge request's tests one after another until the front
     * closes it or it cannot take another */
    while (serve_job(&s) == SLOT_KEPT) {
    }
    return 0;
}
