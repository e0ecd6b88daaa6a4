/* The steps of a plan, as the zygote compiled them (kiln/sandbox/recipe.py): record args are
 * step, op, then the op's own. Each op is one or two syscalls; the Python plan decides order,
 * paths, modes and flags. */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/mount.h>

static const char *or_null(const struct arg *a) {
    return a->len ? a->p : NULL;
}

static int mkdirs(const char *path) {
    char buf[4096];
    size_t len = strlen(path);
    if (len >= sizeof buf) return errno = ENAMETOOLONG, -1;
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -1;
            if (!(*p = saved)) return 0;
        }
    }
}

static int write_new_file(const char *path, mode_t mode, const struct arg *content) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < content->len) {
        ssize_t n = write(fd, content->p + done, content->len - done);
        if (n < 0) return close(fd), -1;
        done += n;
    }
    int rc = fchmod(fd, mode);
    close(fd);
    return rc;
}

static int op(const struct rec *r, int *template_fd) {
    const struct arg *a = r->args + 2;
    const char *name = r->args[1].p;
    int n = r->nargs - 2;
    if (!strcmp(name, "mount") && n == 5)
        return mount(or_null(&a[0]), a[1].p, or_null(&a[2]), (unsigned long)arg_int(&a[3]), or_null(&a[4]));
    if (!strcmp(name, "setattr") && n == 3) {
        struct mount_attr attr = {.attr_set = (uint64_t)arg_int(&a[1])};
        return syscall(SYS_mount_setattr, AT_FDCWD, a[0].p, arg_int(&a[2]) ? AT_RECURSIVE : 0, &attr, sizeof attr);
    }
    if (!strcmp(name, "mkdir") && n == 4) {
        mode_t mode = arg_int(&a[1]);
        if (mkdir(a[0].p, mode) < 0 || chmod(a[0].p, mode) < 0) return -1;  /* chmod: the umask */
        return arg_int(&a[2]) < 0 ? 0 : chown(a[0].p, arg_int(&a[2]), arg_int(&a[3]));
    }
    if (!strcmp(name, "mkdirs") && n == 1) return mkdirs(a[0].p);
    if (!strcmp(name, "touch") && n == 2) {
        int fd = open(a[0].p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)arg_int(&a[1]));
        return fd < 0 ? -1 : close(fd);
    }
    if (!strcmp(name, "write") && n == 3) return write_new_file(a[0].p, arg_int(&a[1]), &a[2]);
    if (!strcmp(name, "symlink") && n == 2) return symlink(a[0].p, a[1].p);
    if (!strcmp(name, "mknod") && n == 4) {
        mode_t mode = arg_int(&a[1]);
        if (mknod(a[0].p, S_IFCHR | mode, makedev(arg_int(&a[2]), arg_int(&a[3]))) < 0) return -1;
        return chmod(a[0].p, mode);
    }
    if (!strcmp(name, "pivot") && n == 1) {
        /* pivot_root(".", ".") stacks the old root on the new one; detached, no path back */
        if (chdir(a[0].p) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0) return -1;
        return chdir("/");
    }
    if (!strcmp(name, "save_ns") && n == 0) {
        *template_fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
        return *template_fd < 0 ? -1 : 0;
    }
    if (!strcmp(name, "unshare_ns") && n == 0) return unshare(CLONE_NEWNS);
    if (!strcmp(name, "detach") && n == 1) return umount2(a[0].p, MNT_DETACH);
    if (!strcmp(name, "hostname") && n == 1) return sethostname(a[0].p, a[0].len);
    errno = EINVAL;
    return -2;
}

static int apply_op(const struct rec *r, int *template_fd, char *err) {
    if (r->nargs < 2) {
        snprintf(err, ERR, "recipe: an op record without step and op");
        return -1;
    }
    int rc = op(r, template_fd);
    if (rc == -2) snprintf(err, ERR, "recipe: unknown op %s/%u", r->args[1].p, r->nargs - 2);
    else if (rc < 0)
        snprintf(err, ERR, "sandbox step '%s' failed: %s %s: %s", r->args[0].p, r->args[1].p,
                 r->nargs > 3 && !strcmp(r->args[1].p, "mount") ? r->args[3].p : r->nargs > 2 ? r->args[2].p : "", strerror(errno));
    return rc < 0 ? -1 : 0;
}

/* args: dir_index file value, a file of the slot's cgroup directory number dir_index */
static int write_cgroup(const struct rec *r, char *err) {
    long idx = r->nargs == 3 ? arg_int(&r->args[0]) : -1;
    int fd = idx >= 0 && idx < S.n_dirs ? openat(S.cg_dirs[idx], r->args[1].p, O_WRONLY | O_CLOEXEC) : -1;
    ssize_t n = fd < 0 ? -1 : write(fd, r->args[2].p, r->args[2].len);
    if (fd >= 0) close(fd);
    if (n < 0) snprintf(err, ERR, "sandbox step 'set cgroup limits' failed: %s = %s: %s", r->nargs == 3 ? r->args[1].p : "?", r->nargs == 3 ? r->args[2].p : "?", strerror(errno));
    return n < 0 ? -1 : 0;
}

/* Every record of `kind` in `span`, in order; the first failure stops and says which step. */
int apply_records(struct span span, uint32_t kind, int *template_fd, char *err) {
    int limits = kind == K_WARM_LIMIT || kind == K_W_LIMIT || kind == K_W_PRESTART_LIMIT;
    for (size_t i = span.from; i < span.to; i++) {
        const struct rec *r = &S.recipe.recs[i];
        if (r->kind == kind && (limits ? write_cgroup(r, err) : apply_op(r, template_fd, err))) return -1;
    }
    return 0;
}
