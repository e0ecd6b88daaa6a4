/* What init writes below /sandbox for a request: the directories the task may write and the
 * request's files (a judge job's, some copied from the store's files by descriptor), each path resolved beneath /sandbox without following anything (openat2:
 * no symlink, no magic link, no mount crossing), regular files only, given to the task's uid;
 * and the request's stdin as a sealed memfd. The workspace comes from the operator and the
 * names from the language table, but nothing is taken on trust. */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static int openat2_beneath(int dir, const char *path, int flags, mode_t mode) {
    struct open_how how = {.flags = flags, .mode = mode, .resolve = RESOLVE};
    return syscall(SYS_openat2, dir, path, &how, sizeof how);
}

static int fail(char *err, const char *step, const char *what) {
    snprintf(err, ERR, "sandbox step '%s' failed: %s%s%s", step, what ? what : "", what ? ": " : "", strerror(errno));
    return -1;
}

static int give(const struct slot *s, const char *rel) {
    if (!*rel || !strcmp(rel, ".")) return fchown(s->sandbox, s->recipe.uid, s->recipe.uid);
    int fd = openat2_beneath(s->sandbox, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    int rc = fchown(fd, s->recipe.uid, s->recipe.uid);
    close(fd);
    return rc;
}

/* a directory of the workspace given to the task (a metadata copy-up on the overlay), with the
 * parents the workspace lacks made and given too */
static int make_writable_dir(const struct slot *s, const char *rel) {
    char buf[4096];
    size_t len = strlen(rel);
    if (len >= sizeof buf) return errno = ENAMETOOLONG, -1;
    memcpy(buf, rel, len + 1);
    for (char *p = buf; *p; p++) {
        if (p[1] != '/' && p[1] != '\0') continue;
        char saved = p[1];
        p[1] = '\0';
        if (mkdirat(s->sandbox, buf, 0755) == 0) {
            if (give(s, buf)) return -1;
        } else if (errno != EEXIST) {
            return -1;
        }
        p[1] = saved;
    }
    return give(s, rel);
}

int give_dirs(const struct slot *s, struct span w, char *err) {
    for (size_t i = w.from; i < w.to; i++) {
        const struct rec *r = &s->recipe.recs[i];
        if (r->type == K_W_DIR && make_writable_dir(s, r->args[ARG(W_DIR, relpath)].p)) return fail(err, "make the writable dirs", r->args[ARG(W_DIR, relpath)].p);
    }
    return 0;
}

/* `size` bytes of the file `from` from its offset 0, at explicit offsets (the descriptor's own
 * offset may be shared: it is neither used nor moved), the kernel copying page to page (no
 * buffer here); a file found shorter gives what it holds */
static int copy_from(int out, int from, long long size) {
    off_t at = 0;
    while (at < size) {
        ssize_t n = copy_file_range(from, &at, out, NULL, size - at, 0);
        if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS))
            n = sendfile(out, from, &at, size - at); /* another filesystem than the sandbox's */
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n;
    }
    return 0;
}

/* a file of the request below /sandbox: `len` bytes of `data`, or, with `from` >= 0, `len`
 * bytes copied from that descriptor (a file of the store) */
static int write_file(const struct slot *s, const char *rel, const char *data, size_t len, int from) {
    int fd = openat2_beneath(s->sandbox, rel, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    struct stat st;
    int rc = fstat(fd, &st);
    if (!rc && !S_ISREG(st.st_mode)) errno = EISDIR, rc = -1;
    if (!rc && from >= 0) rc = copy_from(fd, from, len), len = 0;
    while (!rc && len) {
        ssize_t n = write(fd, data, len);
        if (n < 0) rc = -1;
        else data += n, len -= n;
    }
    if (!rc) rc = fchown(fd, s->recipe.uid, s->recipe.uid);
    close(fd);
    return rc;
}

static const char *part_path(const struct slot *s, struct span w, const char *part) {
    for (size_t i = w.from; i < w.to; i++)
        if (s->recipe.recs[i].type == K_W_PART && !strcmp(s->recipe.recs[i].args[ARG(W_PART, part)].p, part)) return s->recipe.recs[i].args[ARG(W_PART, relpath)].p;
    return NULL;
}

/* after mount_workspace */
int write_parts(const struct slot *s, struct span w, const struct job *job, char *err) {
    for (int i = 0; i < job->nparts; i++) {
        const char *path = part_path(s, w, job->part_names[i]);
        if (!path) errno = ENOENT;
        if (!path || write_file(s, path, job->blob[i], job->blob_len[i], -1)) return fail(err, "write the request's files", path ? path : job->part_names[i]);
    }
    return 0;
}

/* A judge's job: /sandbox is the task's (its cwd, writable for it alone), and so is the judge
 * dir, made where the build layer does not have it; a build's files are written there. */
int give_judge_files(const struct slot *s, const struct job *job, char paths[][FILE_NAME_MAX + 64], char *err) {
    const char *dir = s->recipe.judge_dir;
    if (!dir || strlen(dir) > 62) return errno = ENOENT, fail(err, "make the judge dir", "recipe");
    if (give(s, ".") || make_writable_dir(s, dir)) return fail(err, "make the judge dir", dir);
    for (int i = 0; i < job->nparts; i++) {
        snprintf(paths[i], FILE_NAME_MAX + 64, "%s/%s", dir, job->part_names[i]);
        int by_fd = job->by_fd[i];
        if (write_file(s, paths[i], job->blob[i], by_fd ? (size_t)job->fd_size[i] : job->blob_len[i], by_fd ? job->fd[i] : -1)) return fail(err, "write the request's files", paths[i]);
    }
    return 0;
}

/* The file an exec job gives back (job->give_back: an interactor's record), as the task left it
 * in the judge dir: at most max + 1 bytes (one more than max says it was longer), read beneath
 * /sandbox without following anything. A file the task removed or made anything but a regular
 * file (a FIFO that would block, a link) gives back nothing: it is the task's own doing. */
int read_given_back(const struct slot *s, const struct job *job, size_t max, char **data, size_t *len, char *err) {
    char path[FILE_NAME_MAX + 64];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", s->recipe.judge_dir, job->part_names[job->give_back]);
    *len = 0;
    if (!(*data = malloc(1))) return fail(err, "give back a file", path);
    int fd = openat2_beneath(s->sandbox, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        if (fd >= 0) close(fd);
        return 0;
    }
    size_t want = (size_t)st.st_size < max ? (size_t)st.st_size + 1 : max + 1;
    char *grown = realloc(*data, want);
    if (!grown) return close(fd), fail(err, "give back a file", path);
    *data = grown;
    while (*len < want) {
        ssize_t n = read(fd, *data + *len, want - *len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return close(fd), fail(err, "give back a file", path);
        if (n == 0) break;
        *len += n;
    }
    close(fd);
    return 0;
}

/* A test job's HELD_STDOUT, left by a harness whose load of the solution ended abruptly: what
 * loading printed, appended to stdout (nothing else wrote stdout meanwhile: the harness had fd 1
 * on that file) within the output cap, past which the run is an overflow as if printed live. Read
 * as read_given_back reads: beneath /sandbox, nothing followed, a regular file only; a file the
 * solution made there itself only changes its own answer. */
void pass_on_held_stdout(const struct slot *s, struct run *run) {
    int fd = s->sandbox < 0 ? -1 : openat2_beneath(s->sandbox, HELD_STDOUT, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0) return; /* the usual case: the harness took it for its report, or held nothing */
    struct stat st;
    size_t room = run->output_max - (run->out_len < run->output_max ? run->out_len : run->output_max) + 1;
    char *grown;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !st.st_size || !(grown = realloc(run->out, run->out_len + room))) return (void)close(fd);
    run->out = grown;
    size_t got = 0;
    while (got < room) {
        ssize_t n = read(fd, run->out + run->out_len + got, room - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += n;
    }
    close(fd);
    run->out_len += got;
    if (run->out_len > run->output_max) run->out_len = run->output_max, run->overflow = 1;
}

/* a sealed memfd: the task reads it like a file, and cannot change it for a re-read */
int open_stdin(const struct job *job) {
    if (!job->has_stdin) return open("/dev/null", O_RDONLY | O_CLOEXEC);
    int fd = memfd_create("stdin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    const char *p = job->stdin_data;
    size_t left = job->stdin_len;
    while (fd >= 0 && left) {
        ssize_t n = write(fd, p, left);
        if (n < 0) return close(fd), -1;
        p += n, left -= n;
    }
    if (fd >= 0 && (lseek(fd, 0, SEEK_SET) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0))
        return close(fd), -1;
    return fd;
}
