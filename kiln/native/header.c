/* The job header, in the one form the front writes (kiln/wire/protocol.py encode_job): its keys
 * in kiln.h's JOB_KEYS' order, each read by its read_<key>, no spaces, then the frame's "blobs";
 * anything else is refused (frames.c answers with an error frame). Then the job is checked
 * against the recipe: its language, limits, files and blobs. */
#include "kiln.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#define MAX_HEADER (64 * 1024)
/* --- the job header, in its one accepted form --- */

struct cursor {
    const char *at, *end;
};

static int expect(struct cursor *c, const char *literal) {
    size_t n = strlen(literal);
    if ((size_t)(c->end - c->at) < n || memcmp(c->at, literal, n) != 0) return -1;
    c->at += n;
    return 0;
}

/* A JSON string of [a-z0-9_+-] (slugs and part names need nothing else), copied to out. */
static int word(struct cursor *c, char *out, size_t cap) {
    if (expect(c, "\"")) return -1;
    size_t n = 0;
    while (c->at < c->end && *c->at != '"') {
        char ch = *c->at++;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '+') || n + 1 >= cap) return -1;
        out[n++] = ch;
    }
    out[n] = '\0';
    return expect(c, "\"");
}

static int number(struct cursor *c, long long *value) {
    int digits = 0;
    *value = 0;
    while (c->at < c->end && *c->at >= '0' && *c->at <= '9') {
        if (++digits > 15 || (digits == 2 && *value == 0)) return -1; /* no leading zeros, no huge */
        *value = *value * 10 + (*c->at++ - '0');
    }
    return digits ? 0 : -1;
}

/* A build's file name: [A-Za-z0-9_][A-Za-z0-9_.-]{0,99} (kiln.judge.request checks the same). */
static int file_name(struct cursor *c, char *out) {
    if (expect(c, "\"")) return -1;
    size_t n = 0;
    while (c->at < c->end && *c->at != '"') {
        char ch = *c->at++;
        int word_char = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
        if (!(word_char || (n && (ch == '.' || ch == '-'))) || n >= FILE_NAME_MAX) return -1;
        out[n++] = ch;
    }
    out[n] = '\0';
    return n ? expect(c, "\"") : -1;
}

static const char *PART_NAMES[] = {"solution", "client_harness", "asserts"};
static const char *COMMAND_NAMES[] = {[CMD_TEST] = "test", [CMD_BUILD] = "build", [CMD_EXEC] = "exec"};

const char *part_name(unsigned i) {
    return i < sizeof PART_NAMES / sizeof *PART_NAMES ? PART_NAMES[i] : NULL;
}

const char *command_name(unsigned i) {
    return i < sizeof COMMAND_NAMES / sizeof *COMMAND_NAMES ? COMMAND_NAMES[i] : NULL;
}

static int is_layer_name(const char *name) {
    size_t n = strspn(name, "0123456789abcdef");
    return n == LAYER_NAME_MAX && !name[n];
}

/* A test's parts: each of PART_NAMES at most once, the solution always, the client harness
 * exactly for a language that has one; a build's files: distinct names, at least one; an exec job's (its
 * command's arguments, e.g. a checker's input, output and answer): distinct names. */
static int check_files(const struct recipe *r, struct job *job, int nfiles, char names[][FILE_NAME_MAX + 1], char *err, size_t errlen) {
    if (job->command != CMD_TEST) {
        if (!nfiles && job->command == CMD_BUILD) return snprintf(err, errlen, "a build job without files"), -1;
        for (int i = 0; i < nfiles; i++) {
            for (int k = 0; k < i; k++)
                if (!strcmp(names[i], names[k])) return snprintf(err, errlen, "bad files"), -1;
            job->part_names[i] = names[i];
        }
        return 0;
    }
    int seen = 0, with_harness = 0, has_harness = arg_int(&r->recs[job->workload_rec].args[ARG(WORKLOAD, has_client_harness)]) != 0;
    for (int i = 0; i < nfiles; i++) {
        int k = 0;
        while (k < 3 && strcmp(names[i], PART_NAMES[k])) k++;
        if (k == 3 || seen & (1 << k)) return snprintf(err, errlen, "bad files"), -1;
        seen |= 1 << k;
        job->part_names[i] = PART_NAMES[k];
        with_harness |= k == 1;
    }
    if (!(seen & 1)) return snprintf(err, errlen, "no solution"), -1;
    if (has_harness != with_harness) return snprintf(err, errlen, "client harness present for a language without one, or missing"), -1;
    return 0;
}

/* the job's own limits: none above the language's (its K_WORKLOAD record) or the service's */
static int check_limits(const struct recipe *r, const struct job *job, char *err, size_t errlen) {
    const struct rec *w = &r->recs[job->workload_rec];
    long long memory_max = arg_int(&w->args[ARG(WORKLOAD, memory_max)]), pids_max = arg_int(&w->args[ARG(WORKLOAD, pids_max)]);
    if (job->cpu_ms > r->timeout_max_ms || (memory_max && job->memory > memory_max) || (pids_max && job->pids > pids_max) || job->output > r->output_max)
        return snprintf(err, errlen, "a job limit above its maximum"), -1;
    if ((job->command == CMD_EXEC) != (*job->layer != '\0') || (*job->layer && !is_layer_name(job->layer)))
        return snprintf(err, errlen, "bad layer"), -1;
    if (job->command == CMD_BUILD && job->has_stdin) return snprintf(err, errlen, "a build job with stdin"), -1;
    if (job->has_pipes && (job->command != CMD_EXEC || job->has_stdin)) return snprintf(err, errlen, "pipes for a job other than an exec job without stdin"), -1;
    if (job->has_stdin_file && (job->command != CMD_EXEC || job->has_stdin || job->has_pipes))
        return snprintf(err, errlen, "a stdin file for a job other than an exec job without stdin or pipes"), -1;
    if (job->nfile_fds && job->command != CMD_EXEC) return snprintf(err, errlen, "files by descriptor for a job other than an exec job"), -1;
    return 0;
}

/* --- the job header's keys, each read by its own reader, in JOB_KEYS' order --- */

enum { READ = 0, FORM = -1, REFUSED = -2 }; /* a reader's answer: read; not the front's form; refused, why in err */

struct header { /* what the readers leave for parse_job's checks */
    struct job *job;
    char slug[64], give_back[FILE_NAME_MAX + 1];
    int nfiles;
    char *err;
    size_t errlen;
};

static int read_op(struct cursor *c, struct header *h) {
    return expect(c, "\"job\"") ? FORM : READ;
}

static int read_slug(struct cursor *c, struct header *h) {
    return word(c, h->slug, sizeof h->slug) ? FORM : READ;
}

static int read_command(struct cursor *c, struct header *h) {
    char command[16];
    if (word(c, command, sizeof command)) return FORM;
    while (h->job->command <= CMD_EXEC && strcmp(command, COMMAND_NAMES[h->job->command])) h->job->command++;
    return h->job->command > CMD_EXEC ? FORM : READ;
}

static int read_timeout_ms(struct cursor *c, struct header *h) {
    return number(c, &h->job->timeout_ms) ? FORM : READ;
}

static int read_limits(struct cursor *c, struct header *h) {
#define JOB_LIMIT_FIELD_OF(name) &h->job->name,
    long long *limits[N_JOB_LIMITS] = {JOB_LIMITS(JOB_LIMIT_FIELD_OF)};
    if (expect(c, "[")) return FORM;
    for (int i = 0; i < N_JOB_LIMITS; i++)
        if ((i && expect(c, ",")) || number(c, limits[i])) return FORM;
    return expect(c, "]") ? FORM : READ;
}

static int read_layer(struct cursor *c, struct header *h) {
    return word(c, h->job->layer, sizeof h->job->layer) ? FORM : READ;
}

/* a test's part names, a build's or an exec job's file names (checked later: check_files) */
static int read_files(struct cursor *c, struct header *h) {
    char (*names)[FILE_NAME_MAX + 1] = h->job->file_names;
    if (expect(c, "[")) return FORM;
    while (expect(c, "]")) {
        if ((h->nfiles && expect(c, ",")) || h->nfiles == MAX_PARTS - 1) return FORM;
        if (h->job->command != CMD_TEST ? file_name(c, names[h->nfiles]) : word(c, names[h->nfiles], sizeof names[0])) return FORM;
        h->nfiles++;
    }
    return READ;
}

static int flag(struct cursor *c, int *value) {
    if (!expect(c, "true")) return *value = 1, READ;
    return expect(c, "false") ? FORM : READ;
}

static int read_stdin(struct cursor *c, struct header *h) {
    return flag(c, &h->job->has_stdin);
}

static int read_pipes(struct cursor *c, struct header *h) {
    return flag(c, &h->job->has_pipes);
}

static int read_stdin_file(struct cursor *c, struct header *h) {
    return flag(c, &h->job->has_stdin_file);
}

/* the files whose content comes as a descriptor: their indexes, increasing */
static int read_file_fds(struct cursor *c, struct header *h) {
    struct job *job = h->job;
    if (expect(c, "[")) return FORM;
    for (long long index, last = -1; expect(c, "]"); last = index) {
        if ((job->nfile_fds && expect(c, ",")) || number(c, &index)) return FORM;
        if (index <= last || index >= h->nfiles || job->nfile_fds == MAX_FILE_FDS)
            return snprintf(h->err, h->errlen, "file_fds must name files of the job, each once, in order, at most %d", MAX_FILE_FDS), REFUSED;
        job->by_fd[index] = 1, job->nfile_fds++;
    }
    return READ;
}

static int read_give_back(struct cursor *c, struct header *h) {
    return word(c, h->give_back, sizeof h->give_back) ? FORM : READ;
}

/* "key": and its reader, in the order the front writes them (kiln.h JOB_KEYS) */
#define JOB_KEY_READER(key) {"\"" #key "\":", read_##key},
static const struct {
    const char *key;
    int (*read)(struct cursor *c, struct header *h);
} JOB_KEY_READERS[] = {JOB_KEYS(JOB_KEY_READER)};

int parse_job(const struct recipe *r, char *body, size_t len, struct job *job, char *err, size_t errlen) {
    uint32_t head_size;
    memcpy(&head_size, body, 4);
    head_size = ntohl(head_size);
    if (head_size > MAX_HEADER || head_size > len - 4) {
        snprintf(err, errlen, "header of %u bytes does not fit the frame", head_size);
        return -1;
    }
    struct cursor c = {body + 4, body + 4 + head_size};
    struct header h = {.job = job, .err = err, .errlen = errlen};
    char (*names)[FILE_NAME_MAX + 1] = job->file_names, *slug = h.slug, *give_back = h.give_back;
    long long sizes[MAX_PARTS + 1];
    int nblobs = 0;
    memset(job, 0, sizeof *job);
    for (size_t i = 0; i < sizeof JOB_KEY_READERS / sizeof *JOB_KEY_READERS; i++) {
        int rc = expect(&c, i ? "," : "{") || expect(&c, JOB_KEY_READERS[i].key) ? FORM : JOB_KEY_READERS[i].read(&c, &h);
        if (rc == FORM) goto form;
        if (rc == REFUSED) return -1;
    }
    int nfiles = h.nfiles;
    if (!expect(&c, ",\"blobs\":[")) /* the frame's own (protocol.encode), absent when the job carries none */
        while (expect(&c, "]")) {
            if ((nblobs && expect(&c, ",")) || nblobs == MAX_PARTS || number(&c, &sizes[nblobs])) goto form;
            nblobs++;
        }
    if (expect(&c, "}") || c.at != c.end) goto form;

    job->workload_rec = find_workload_rec(r, slug);
    if (job->workload_rec < 0) return snprintf(err, errlen, "unknown slug '%s'", slug), -1;
    if (job->timeout_ms <= 0 || job->timeout_ms > r->timeout_max_ms)
        return snprintf(err, errlen, "bad timeout_ms %lld", job->timeout_ms), -1;
    if (check_limits(r, job, err, errlen) || check_files(r, job, nfiles, names, err, errlen)) return -1;
    job->give_back = -1;
    for (int i = 0; *give_back && i < nfiles; i++)
        if (!strcmp(give_back, names[i])) job->give_back = i;
    if (*give_back && (job->give_back < 0 || job->command != CMD_EXEC)) return snprintf(err, errlen, "give_back names no file of an exec job"), -1;
    if (nblobs != nfiles - job->nfile_fds + job->has_stdin) return snprintf(err, errlen, "blob count does not match the job"), -1;
    long long blob_max = job->command == CMD_TEST ? r->input_max : r->judge_part_max;
    size_t offset = 4 + head_size;
    for (int i = 0, file = 0; i < nblobs; i++, file++) {
        if (sizes[i] > blob_max) return snprintf(err, errlen, "a part is larger than %s", job->command == CMD_TEST ? "RUN_INPUT_MAX" : "the judge's part maximum"), -1;
        if ((size_t)sizes[i] > len - offset) return snprintf(err, errlen, "blob sizes do not add up to the frame size"), -1;
        while (file < nfiles && job->by_fd[file]) file++; /* its content is a descriptor's */
        if (file < nfiles) job->blob[file] = body + offset, job->blob_len[file] = sizes[i];
        else job->stdin_data = body + offset, job->stdin_len = sizes[i];
        offset += sizes[i];
    }
    if (offset != len) return snprintf(err, errlen, "blob sizes do not add up to the frame size"), -1;
    job->nparts = nfiles;
    return 0;
form:
    snprintf(err, errlen, "the job header is not in the form the front writes");
    return -1;
}
