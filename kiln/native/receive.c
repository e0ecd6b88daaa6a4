/* What a slot takes as its job: one frame read within the slot's maximum, parsed, refused when
 * this slot cannot run it, its descriptors taken. A slot serves its jobs (init.c serve_job) and
 * `kiln-init check` answers the fuzz tests (check.c) with this one reading of a job. */
#include "kiln.h"

#include <stdio.h>

/* a test job's solution, client harness, asserts and stdin, each at most
 * RUN_INPUT_MAX; a judge job's files or stdin, each at most the judge's part maximum, three of
 * them (a checker's input, output and answer); plus the header */
static size_t job_frame_max(const struct slot *s) {
    long long judge = 3 * s->recipe.judge_part_max, test = 4 * s->recipe.input_max;
    return (judge > test ? judge : test) + 64 * 1024 + 64;
}

/* a prestarted slot serves its language's test jobs without stdin (its task's stdin is /dev/null)
 * and without memory, pids or address-space limits of their own (its limits were written while it warmed) */
static int refused_here(const struct slot *s, const struct job *job, char *err) {
    if (s->prestarted.workload_rec < 0) return 0;
    if (job->workload_rec == s->prestarted.workload_rec && !job->has_stdin && job->command == CMD_TEST && !job->memory && !job->pids && !job->address_space) return 0;
    snprintf(err, ERR, "slot warmed for %s requests without stdin", s->recipe.recs[s->prestarted.workload_rec].args[ARG(WORKLOAD, slug)].p);
    return -1;
}

int receive_job(struct slot *s, struct job *job, char **body, char *err) {
    size_t len;
    int fds[MAX_FRAME_FDS], nfds = 0;
    int rc = read_frame(s->sock, job_frame_max(s), body, &len, fds, &nfds, err, ERR);
    if (rc == 0) return 0;
    if (rc < 0 || parse_job(&s->recipe, *body, len, job, err, ERR) || refused_here(s, job, err) || take_descriptors(&s->recipe, job, fds, nfds, err, ERR) ||
        (s->tests_served && job->command != CMD_EXEC && snprintf(err, ERR, "only a judge's tests follow a judge's test") > 0))
        return -1;
    return 1;
}
