/* What a build job left in the workspace, sent back with its result: the front keeps it as the
 * build's layer, a read-only lower layer of every test's overlay (kiln/judge/builds.py). The
 * overlay's upper layer holds exactly what the build changed (the request's files, what the
 * compiler wrote); it is walked without following anything, by init, after every process of the
 * build is gone. Directories, regular files and symbolic links are kept; whiteouts (a deleted
 * workspace file), devices, FIFOs and sockets are not. The format is protocol.py's LAYER, its head
 * and types kiln.h's LAYER_HEAD and LAYER_TYPES:
 *
 *     entry = u8 type ('d' | 'f' | 'l') | u16 mode | u16 path length | u32 data length | path | data
 *
 * (big-endian; paths relative to /sandbox, parents before children; a link's data is its target). */
#include "kiln.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEPTH_MAX 64
#define PATH_MAX_LEN 4096

struct layer {
    char *data;
    size_t len, cap, max;
    char err[ERR];
};

static int failed(struct layer *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int failed(struct layer *l, const char *fmt, ...) {
    int n = snprintf(l->err, ERR, "the build's layer: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->err + n, ERR - n, fmt, ap);
    va_end(ap);
    return -1;
}

static int grow(struct layer *l, size_t more) {
    if (l->len + more > l->max) return failed(l, "the build left more than %zu bytes in the workspace", l->max);
    if (l->len + more <= l->cap) return 0;
    size_t cap = l->cap ? l->cap : 65536;
    while (cap < l->len + more) cap *= 2;
    char *data = realloc(l->data, cap);
    if (!data) return failed(l, "out of memory");
    l->data = data, l->cap = cap;
    return 0;
}

#define LAYER_FIELD_SIZE(field, bytes) +bytes
#define LAYER_HEAD_SIZE (0 LAYER_HEAD(LAYER_FIELD_SIZE))

static char *put_big_endian(char *at, unsigned long long value, int bytes) {
    for (int i = bytes; i--; value >>= 8) at[i] = value & 0xff;
    return at + bytes;
}

/* an entry's head and path; its data (size bytes) follows at l->data + l->len */
static int entry(struct layer *l, enum layer_type type, mode_t mode, const char *path, size_t size) {
    size_t path_len = strlen(path);
    if (grow(l, LAYER_HEAD_SIZE + path_len + size)) return -1;
    char *at = l->data + l->len;
    mode &= 0777;
#define PUT_FIELD(field, bytes) at = put_big_endian(at, field, bytes);
    LAYER_HEAD(PUT_FIELD)
    memcpy(at, path, path_len);
    l->len += LAYER_HEAD_SIZE + path_len;
    return 0;
}

static int add_file(struct layer *l, int dir, const char *name, const char *path, const struct stat *st) {
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return failed(l, "%.300s: %s", path, strerror(errno));
    if (st->st_size > (off_t)UINT32_MAX) return close(fd), failed(l, "%.300s is too large", path);
    if (entry(l, LAYER_file, st->st_mode, path, st->st_size)) return close(fd), -1;
    size_t got = 0;
    while (got < (size_t)st->st_size) {
        ssize_t n = read(fd, l->data + l->len + got, st->st_size - got);
        if (n <= 0) { /* changed under us: nothing of the build runs any more, so it cannot be */
            close(fd);
            return failed(l, "%.300s could not be read whole", path);
        }
        got += n;
    }
    close(fd);
    l->len += got;
    return 0;
}

static int add_link(struct layer *l, int dir, const char *name, const char *path) {
    char target[PATH_MAX_LEN];
    ssize_t n = readlinkat(dir, name, target, sizeof target);
    if (n < 0 || n == sizeof target) return failed(l, "%.300s: bad link", path);
    if (entry(l, LAYER_link, 0777, path, n)) return -1;
    memcpy(l->data + l->len, target, n);
    l->len += n;
    return 0;
}

/* the entries below `dir` (its path `prefix`, "" for the top), then their children */
static int walk(struct layer *l, int dir, const char *prefix, int depth) {
    if (depth > DEPTH_MAX) return close(dir), failed(l, "deeper than %d directories", DEPTH_MAX);
    DIR *d = fdopendir(dir);
    if (!d) return close(dir), failed(l, "%s", strerror(errno));
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[PATH_MAX_LEN];
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "/" : "", e->d_name) >= sizeof path)
            rc = failed(l, "a path longer than %d bytes", PATH_MAX_LEN);
        else if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            rc = failed(l, "%.300s: %s", path, strerror(errno));
        else if (S_ISREG(st.st_mode))
            rc = add_file(l, dirfd(d), e->d_name, path, &st);
        else if (S_ISLNK(st.st_mode))
            rc = add_link(l, dirfd(d), e->d_name, path);
        else if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = sub < 0 ? failed(l, "%.300s: %s", path, strerror(errno)) : entry(l, LAYER_dir, st.st_mode, path, 0) ? (close(sub), -1) : walk(l, sub, path, depth + 1);
        }
    }
    closedir(d);
    return rc;
}

int collect_layer(const struct slot *s, char **out, size_t *len, char *err) {
    struct layer l = {.max = s->recipe.layer_max > 0 ? (size_t)s->recipe.layer_max : 0};
    int top = s->recipe.upper ? open(s->recipe.upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (top < 0) return snprintf(err, ERR, "sandbox step 'collect the build' failed: %s", s->recipe.upper ? strerror(errno) : "no upper layer in the recipe"), -1;
    if (walk(&l, top, "", 0)) {
        free(l.data);
        return snprintf(err, ERR, "%s", l.err), -1;
    }
    *out = l.data ? l.data : malloc(1), *len = l.len;
    return 0;
}
