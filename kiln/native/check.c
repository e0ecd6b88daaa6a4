/* `kiln-init check`: one job frame read on stdin (with its descriptors) and what a slot would make
 * of it answered on stdout (what it parsed, or the error frame a slot would send), without
 * warming anything: the
 * fuzz tests of the job frame (tests/unit/test_job_fuzz.py). With KILN_PRESTART, as a slot
 * prestarted for that language would. */
#include "kiln.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a test job's solution, checker, asserts and stdin, each at most RUN_INPUT_MAX; a judge job's
 * files or stdin, each at most the judge's part maximum, three of them (a checker's input, output
 * and answer); plus the header */
size_t job_frame_max(const struct slot *s) {
    long long judge = 3 * s->recipe.judge_part_max, test = 4 * s->recipe.input_max;
    return (judge > test ? judge : test) + 64 * 1024 + 64;
}

/* a prestarted slot serves its language's test jobs without stdin (its task's stdin is /dev/null)
 * and without memory, pids or address-space limits of their own (its limits were written while it warmed) */
int refused_here(const struct slot *s, const struct job *job, char *err) {
    if (s->prestarted.workload_rec < 0) return 0;
    if (job->workload_rec == s->prestarted.workload_rec && !job->has_stdin && job->command == CMD_TEST && !job->memory && !job->pids && !job->address_space) return 0;
    snprintf(err, ERR, "slot warmed for %s requests without stdin", s->recipe.recs[s->prestarted.workload_rec].args[0].p);
    return -1;
}

int check_job(struct slot *s) {
    char err[ERR], *body, json[8192];
    size_t len;
    struct job job;
    const char *prestart = getenv(START_VAR(PRESTART));
    s->sock = 0;
    if (prestart) s->prestarted.workload_rec = find_workload_rec(&s->recipe, prestart);
    int fds[MAX_FRAME_FDS], nfds = 0;
    int rc = read_frame(s->sock, job_frame_max(s), &body, &len, fds, &nfds, err, ERR);
    if (rc == 0) return 0;
    if (rc < 0 || parse_job(&s->recipe, body, len, &job, err, ERR) || refused_here(s, &job, err) || take_descriptors(&s->recipe, &job, fds, nfds, err, ERR)) {
        send_error(s->sock, "error", err);
        return 0;
    }
    static const char *commands[] = {[CMD_TEST] = "test", [CMD_BUILD] = "build", [CMD_EXEC] = "exec"};
    int n = snprintf(json, sizeof json, "{\"op\":\"job\",\"slug\":\"%s\",\"command\":\"%s\",\"timeout_ms\":%lld,\"limits\":[%lld,%lld,%lld,%lld,%lld],"
                     "\"layer\":\"%s\",\"stdin\":%s,\"pipes\":%s,\"stdin_file\":%s,\"file_fds\":[",
                     s->recipe.recs[job.workload_rec].args[0].p, commands[job.command], job.timeout_ms, job.cpu_ms, job.memory, job.pids, job.output, job.address_space,
                     job.layer, job.has_stdin ? "true" : "false", job.has_pipes ? "true" : "false", job.has_stdin_file ? "true" : "false");
    for (int i = 0, listed = 0; i < job.nparts; i++)
        if (job.by_fd[i]) n += snprintf(json + n, sizeof json - n, "%s%d", listed++ ? "," : "", i);
    n += snprintf(json + n, sizeof json - n, "],\"files\":[");
    for (int i = 0; i < job.nparts; i++) n += snprintf(json + n, sizeof json - n, "%s\"%s\"", i ? "," : "", job.part_names[i]);
    snprintf(json + n, sizeof json - n, "]}");
    send_json(s->sock, json, -1);
    return 0;
}
