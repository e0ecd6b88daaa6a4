/* Frames on the slot's socket, as kiln/wire/protocol.py defines them:
 *
 *     u32 size of the rest | u32 size of the header | header (compact JSON) | blobs
 *
 * (big-endian). init reads one job frame and answers with one frame. A job header is accepted
 * only in the one form the front writes (protocol.py encode_job: keys in that order, no spaces); anything else
 * is answered with an error frame: the root side trusts nothing from the front. */
#include "kiln.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HEADER (64 * 1024)

static int recv_exactly(int fd, char *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(fd, buf + got, len - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return got == 0 && n == 0 ? 0 : -1;
        got += n;
    }
    return 1;
}

/* up to `len` of the frame's first bytes in one call, and the descriptors that came with them (at
 * most MAX_FRAME_FDS, one more than a job carries; any more are closed, or never received) */
static ssize_t recv_first(int fd, char *bytes, size_t len, int *fds, int *nfds) {
    char control[CMSG_SPACE(sizeof(int) * MAX_FRAME_FDS)];
    struct iovec iov = {bytes, len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    ssize_t n;
    do n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int), got[MAX_FRAME_FDS];
        memcpy(got, CMSG_DATA(c), sizeof(int) * (count < MAX_FRAME_FDS ? count : MAX_FRAME_FDS));
        for (int i = 0; i < count && i < MAX_FRAME_FDS; i++) {
            if (*nfds < MAX_FRAME_FDS) fds[(*nfds)++] = got[i];
            else close(got[i]);
        }
    }
    return n;
}

/* 1: a frame in *body (after its first u32), with the descriptors that came on its first byte in
 * fds; 0: end of stream before it; -1: error. */
int read_frame(int fd, size_t max, char **body, size_t *len, int *fds, int *nfds, char *err, size_t errlen) {
    uint32_t size;
    char *bytes = (char *)&size;
    *nfds = 0;
    ssize_t first = recv_first(fd, bytes, 4, fds, nfds);
    if (first <= 0) {
        if (first < 0) snprintf(err, errlen, "connection closed inside a frame");
        return first < 0 ? -1 : 0;
    }
    int rc = first == 4 ? 1 : recv_exactly(fd, bytes + first, 4 - first); /* the size prefix, whole */
    if (rc == 0) rc = -1;
    if (rc <= 0) {
        if (rc < 0) snprintf(err, errlen, "connection closed inside a frame");
        return rc;
    }
    size = ntohl(size);
    if (size < 4 || size > max) {
        snprintf(err, errlen, "frame of %u bytes (limit %zu)", size, max);
        return -1;
    }
    *body = malloc(size);
    if (!*body || recv_exactly(fd, *body, size) != 1) {
        snprintf(err, errlen, "connection closed inside a frame");
        return -1;
    }
    *len = size;
    return 1;
}

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

static const char *PART_NAMES[] = {"solution", "checker", "asserts"};
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

/* A test's parts: each of PART_NAMES at most once, the solution always, the checker exactly for
 * a language that has one; a build's files: distinct names, at least one; an exec job's (its
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
    int seen = 0, with_checker = 0, has_checker = arg_int(&r->recs[job->workload_rec].args[ARG(WORKLOAD, has_client_harness)]) != 0;
    for (int i = 0; i < nfiles; i++) {
        int k = 0;
        while (k < 3 && strcmp(names[i], PART_NAMES[k])) k++;
        if (k == 3 || seen & (1 << k)) return snprintf(err, errlen, "bad files"), -1;
        seen |= 1 << k;
        job->part_names[i] = PART_NAMES[k];
        with_checker |= k == 1;
    }
    if (!(seen & 1)) return snprintf(err, errlen, "no solution"), -1;
    if (has_checker != with_checker) return snprintf(err, errlen, "checker present for a language without one, or missing"), -1;
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

/* --- the frame's descriptors --- */

/* a file of the store as the front opens it: regular, open for reading only, within the part
 * maximum; its size in *size */
static int store_file(const struct recipe *r, int fd, long long *size, const char *what, char *err, size_t errlen) {
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || flags < 0 || (flags & O_ACCMODE) != O_RDONLY || (flags & O_PATH))
        return snprintf(err, errlen, "the %s is not a regular file open for reading only", what), -1;
    if (st.st_size > r->judge_part_max) return snprintf(err, errlen, "the %s is larger than the judge's part maximum", what), -1;
    *size = st.st_size;
    return 0;
}

/* exactly the two of a job with pipes, or the one of a job with a stdin file (read from its
 * start: a slot lost mid-test may have moved the offset its retry shares), then one for each
 * file by descriptor, in the files' order (read at explicit offsets: no shared offset matters) */
int take_descriptors(const struct recipe *r, struct job *job, const int *fds, int nfds, char *err, size_t errlen) {
    int first = job->has_pipes ? 2 : job->has_stdin_file ? 1 : 0, wanted = first + job->nfile_fds, at = first;
    long long size;
    if (nfds != wanted) {
        snprintf(err, errlen, "%d descriptors with a job that carries %d", nfds, wanted);
        goto refused;
    }
    if (job->has_stdin_file && store_file(r, fds[0], &size, "stdin file", err, errlen)) goto refused;
    if (job->has_stdin_file && lseek(fds[0], 0, SEEK_SET) != 0) {
        snprintf(err, errlen, "the stdin file cannot be read from its start");
        goto refused;
    }
    for (int i = 0; i < job->nparts; i++) {
        if (!job->by_fd[i]) continue;
        if (store_file(r, fds[at], &job->fd_size[i], "file given by descriptor", err, errlen)) goto refused;
        job->fd[i] = fds[at++];
    }
    if (job->has_pipes) job->pipe_fds[0] = fds[0], job->pipe_fds[1] = fds[1];
    if (job->has_stdin_file) job->stdin_fd = fds[0];
    return 0;
refused:
    for (int i = 0; i < nfds; i++) close(fds[i]);
    for (int i = 0; i < job->nparts; i++) job->fd[i] = -1; /* none of them is the job's */
    return -1;
}

void close_file_fds(struct job *job) {
    for (int i = 0; i < job->nparts; i++)
        if (job->by_fd[i] && job->fd[i] >= 0) close(job->fd[i]), job->fd[i] = -1;
}

/* --- answers --- */

static int send_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        p += n, len -= n;
    }
    return 0;
}

/* JSON string contents for a message of kiln's own: control characters escaped, and any
 * byte outside ASCII replaced (a path in an error message may not be UTF-8). */
void json_escape(char *out, size_t cap, const char *text) {
    size_t n = 0;
    for (; *text && n + 7 < cap; text++) {
        unsigned char ch = *text;
        if (ch == '"' || ch == '\\') out[n++] = '\\', out[n++] = ch;
        else if (ch < 0x20) n += snprintf(out + n, cap - n, "\\u%04x", ch);
        else out[n++] = ch < 0x80 ? ch : '?';
    }
    out[n] = '\0';
}

static void prefix(char *out, size_t size, size_t head) {
    uint32_t words[2] = {htonl(4 + head + size), htonl(head)};
    memcpy(out, words, 8);
}

int send_json(int fd, const char *json, int pass_fd) {
    size_t head = strlen(json);
    char *frame = malloc(8 + head);
    prefix(frame, 0, head);
    memcpy(frame + 8, json, head);
    int rc;
    if (pass_fd >= 0) {
        char control[CMSG_SPACE(sizeof(int))] = {0};
        struct iovec iov = {frame, 8 + head};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
        ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
        rc = sent < 0 ? -1 : send_all(fd, frame + sent, 8 + head - sent);
    } else {
        rc = send_all(fd, frame, 8 + head);
    }
    free(frame);
    return rc;
}

/* fields: the header's members without braces and blobs, e.g. "\"op\":\"result\",...". */
int send_result(int fd, const char *fields, const char *out, size_t out_len, const char *err, size_t err_len, const char *layer, size_t layer_len) {
    char head[1024];
    int n = layer ? snprintf(head, sizeof head, "{%s,\"blobs\":[%zu,%zu,%zu]}", fields, out_len, err_len, layer_len)
                  : snprintf(head, sizeof head, "{%s,\"blobs\":[%zu,%zu]}", fields, out_len, err_len);
    char start[8];
    prefix(start, out_len + err_len + (layer ? layer_len : 0), n);
    struct iovec iov[5] = {{start, 8}, {head, n}, {(void *)out, out_len}, {(void *)err, err_len}, {(void *)layer, layer_len}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = layer ? 5 : 4};
    size_t left = 8 + n + out_len + err_len + (layer ? layer_len : 0);
    while (left) {
        ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) continue;
        if (sent < 0) return -1;
        left -= sent;
        while (msg.msg_iovlen && (size_t)sent >= msg.msg_iov->iov_len) sent -= msg.msg_iov->iov_len, msg.msg_iov++, msg.msg_iovlen--;
        if (msg.msg_iovlen) msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + sent, msg.msg_iov->iov_len -= sent;
    }
    return 0;
}

void send_error(int fd, const char *op, const char *error) {
    char escaped[ERR * 2], json[ERR * 2 + 64];
    json_escape(escaped, sizeof escaped, error);
    snprintf(json, sizeof json, "{\"op\":\"%s\",\"error\":\"%s\"}", op, escaped);
    send_json(fd, json, -1);
}
