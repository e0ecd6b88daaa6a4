/* `kiln-init check`: one job frame read on stdin (with its descriptors) and what a slot would make
 * of it answered on stdout (what it parsed, or the error frame a slot would send), without
 * warming anything: the fuzz tests of the job frame (tests/unit/test_job_fuzz.py). The job is
 * read as a slot reads its first (receive.c receive_job); with KILN_PRESTART, as a slot
 * prestarted for that language would. */
#include "kiln.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int check_job(struct slot *s) {
    char err[ERR], *body, json[8192];
    struct job job;
    const char *prestart = getenv(START_VAR(PRESTART));
    s->sock = 0;
    if (prestart) s->prestarted.workload_rec = find_workload_rec(&s->recipe, prestart);
    int rc = receive_job(s, &job, &body, err);
    if (rc == 0) return 0;
    if (rc < 0) {
        send_error(s->sock, "error", err);
        return 0;
    }
    static const char *commands[] = {[CMD_TEST] = "test", [CMD_BUILD] = "build", [CMD_EXEC] = "exec"};
    int n = snprintf(json, sizeof json, "{\"op\":\"job\",\"slug\":\"%s\",\"command\":\"%s\",\"timeout_ms\":%lld,\"limits\":[%lld,%lld,%lld,%lld,%lld],"
                     "\"layer\":\"%s\",\"stdin\":%s,\"pipes\":%s,\"stdin_file\":%s,\"file_fds\":[",
                     s->recipe.recs[job.workload_rec].args[ARG(WORKLOAD, slug)].p, commands[job.command], job.timeout_ms, job.cpu_ms, job.memory, job.pids, job.output, job.address_space,
                     job.layer, job.has_stdin ? "true" : "false", job.has_pipes ? "true" : "false", job.has_stdin_file ? "true" : "false");
    for (int i = 0, listed = 0; i < job.nparts; i++)
        if (job.by_fd[i]) n += snprintf(json + n, sizeof json - n, "%s%d", listed++ ? "," : "", i);
    n += snprintf(json + n, sizeof json - n, "],\"files\":[");
    for (int i = 0; i < job.nparts; i++) n += snprintf(json + n, sizeof json - n, "%s\"%s\"", i ? "," : "", job.part_names[i]);
    snprintf(json + n, sizeof json - n, "]}");
    send_json(s->sock, json, -1);
    return 0;
}
