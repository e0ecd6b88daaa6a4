/* Frames on the slot's socket, as kiln/wire/protocol.py defines them:
 *
 *     u32 size of the rest | u32 size of the header | header (compact JSON) | blobs
 *
 * (big-endian). init reads one job frame (its header parsed by header.c, in the one form the
 * front writes), takes its descriptors, and answers with one frame; a job refused is answered
 * with an error frame: the root side trusts nothing from the front. */
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
