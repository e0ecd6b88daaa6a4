/* The slot's mount namespace: the recipe's mount ops (records K_BUILD, K_FINISH and K_W_MOUNT:
 * step, op, args; each op one or two syscalls, the Python plan decides order, paths, modes and
 * flags), the index's root image built or a private copy of it entered, the workspace overlay. */
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

#define OP_NAME(code, name) [code] = #name,
static const char *const OP_NAMES[] = {OPS(OP_NAME)};
#define OP_COUNT(code, name) [code] = OPARG(name, count),
static const int OP_NARGS[] = {OPS(OP_COUNT)}; /* each op's own arguments, after step and op */

const char *op_name(unsigned code) {
    return code >= OP_MOUNT && code < N_OPS ? OP_NAMES[code] : NULL;
}

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

/* args: target lower upper work flags; a job's build layer, if any, goes above the lower layer.
 * With the zygote's clones (s->lower_held) the lower layer is relative to the workspaces' one,
 * made init's working directory (the task's mountinfo then reads `lowerdir=<slug>` in every
 * slot, forked or spawned), and a build's layer named through init's /proc/self/fd. Init names
 * absolute paths only, and moves to the workspace before it starts a task (take_limits): its
 * working directory is left where the mount needed it */
static int overlay(const struct slot *s, const struct arg *a) {
    char data[4096];
    const char *upper = a[OPARG(overlay, upper)].p, *work = a[OPARG(overlay, work)].p;
    const char *lower = s->lower_held[0] >= 0 && !*a[OPARG(overlay, lower)].p ? "." : a[OPARG(overlay, lower)].p;
    int n;
    if (!s->layer) n = snprintf(data, sizeof data, "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
    else if (s->lower_held[1] >= 0) n = snprintf(data, sizeof data, "lowerdir=/proc/self/fd/%d/%s:%s,upperdir=%s,workdir=%s", s->lower_held[1], s->layer, lower, upper, work);
    else if (s->recipe.layers) n = snprintf(data, sizeof data, "lowerdir=%s/%s:%s,upperdir=%s,workdir=%s", s->recipe.layers, s->layer, lower, upper, work);
    else return errno = ENOENT, -1;
    if (n < 0 || (size_t)n >= sizeof data) return errno = ENAMETOOLONG, -1;
    if (s->lower_held[0] >= 0 && fchdir(s->lower_held[0]) < 0) return -1;
    return mount("kiln", a[OPARG(overlay, target)].p, "overlay", (unsigned long)arg_int(&a[OPARG(overlay, flags)]), data);
}

static int op(const struct slot *s, enum op code, const struct arg *a, int *root_image) {
    switch (code) {
    case OP_MOUNT:
        return mount(or_null(&a[OPARG(mount, source)]), a[OPARG(mount, target)].p, or_null(&a[OPARG(mount, fstype)]), (unsigned long)arg_int(&a[OPARG(mount, flags)]), or_null(&a[OPARG(mount, data)]));
    case OP_SETATTR: {
        struct mount_attr attr = {.attr_set = (uint64_t)arg_int(&a[OPARG(setattr, attr_set)])};
        return syscall(SYS_mount_setattr, AT_FDCWD, a[OPARG(setattr, target)].p, arg_int(&a[OPARG(setattr, recursive)]) ? AT_RECURSIVE : 0, &attr, sizeof attr);
    }
    case OP_MKDIR: {
        const char *path = a[OPARG(mkdir, path)].p;
        mode_t mode = arg_int(&a[OPARG(mkdir, mode)]);
        long long uid = arg_int(&a[OPARG(mkdir, uid)]);
        if (mkdir(path, mode) < 0 || chmod(path, mode) < 0) return -1; /* chmod: the umask */
        return uid < 0 ? 0 : chown(path, uid, arg_int(&a[OPARG(mkdir, gid)]));
    }
    case OP_MKDIRS:
        return mkdirs(a[OPARG(mkdirs, path)].p);
    case OP_TOUCH: {
        int fd = open(a[OPARG(touch, path)].p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)arg_int(&a[OPARG(touch, mode)]));
        return fd < 0 ? -1 : close(fd);
    }
    case OP_WRITE:
        return write_new_file(a[OPARG(write, path)].p, arg_int(&a[OPARG(write, mode)]), &a[OPARG(write, content)]);
    case OP_SYMLINK:
        return symlink(a[OPARG(symlink, target)].p, a[OPARG(symlink, path)].p);
    case OP_MKNOD: {
        const char *path = a[OPARG(mknod, path)].p;
        mode_t mode = arg_int(&a[OPARG(mknod, mode)]);
        if (mknod(path, S_IFCHR | mode, makedev(arg_int(&a[OPARG(mknod, major)]), arg_int(&a[OPARG(mknod, minor)]))) < 0) return -1;
        return chmod(path, mode);
    }
    case OP_PIVOT:
        /* pivot_root(".", ".") stacks the old root on the new one; detached, no path back */
        if (chdir(a[OPARG(pivot, new_root)].p) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0) return -1;
        return chdir("/");
    case OP_SAVE_NS:
        *root_image = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
        return *root_image < 0 ? -1 : 0;
    case OP_UNSHARE_NS:
        return unshare(CLONE_NEWNS);
    case OP_HOSTNAME:
        return sethostname(a[OPARG(hostname, name)].p, a[OPARG(hostname, name)].len);
    case OP_DETACH:
        return umount2(a[OPARG(detach, target)].p, MNT_DETACH);
    case OP_OVERLAY:
        return overlay(s, a);
    case OP_NONE: /* not ops: apply_op refused them */
    case N_OPS:
        break;
    }
    return errno = EINVAL, -1;
}

static int apply_op(const struct slot *s, const struct rec *r, int *root_image, char *err) {
    long code = arg_int(&r->args[ARG(STEP_OP, op)]), nargs = (long)r->nargs - ARG(STEP_OP, args);
    if (code < OP_MOUNT || code >= N_OPS || nargs != OP_NARGS[code])
        return snprintf(err, ERR, "recipe: a bad op record (op %ld, %ld args)", code, nargs), -1;
    const struct arg *a = &r->args[ARG(STEP_OP, args)];
    if (op(s, code, a, root_image) == 0) return 0;
    const char *what = code == OP_MOUNT ? a[OPARG(mount, target)].p : code == OP_OVERLAY && s->layer ? s->layer : nargs ? a[0].p : ""; /* else its first */
    snprintf(err, ERR, "sandbox step '%s' failed: %s %s: %s", r->args[ARG(STEP_OP, step)].p, OP_NAMES[code], what, strerror(errno));
    return -1;
}

/* Every op record of `type` in `span`, in order; the first failure stops and says which step. */
int apply_ops(struct slot *s, struct span span, uint32_t type, int *root_image, char *err) {
    for (size_t i = span.from; i < span.to; i++)
        if (s->recipe.recs[i].type == type && apply_op(s, &s->recipe.recs[i], root_image, err)) return -1;
    return 0;
}

int build_root(struct slot *s, int root_image, char *err) {
    struct span all = {0, s->recipe.n};
    int built = -1;
    if (root_image < 0) {
        if (apply_ops(s, all, K_BUILD, &built, err)) return -2;
    } else {
        if (setns(root_image, CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0)
            return snprintf(err, ERR, "sandbox step 'enter a copy of the index's root' failed: %s", strerror(errno)), -2;
        close(root_image);
    }
    return apply_ops(s, all, K_FINISH, NULL, err) ? -2 : built;
}

int mount_workspace(struct slot *s, struct span w, const char *layer, char *err) {
    s->layer = layer && *layer ? layer : NULL;
    int failed = apply_ops(s, w, K_W_MOUNT, NULL, err);
    s->layer = NULL;
    if (failed) return -1;
    if ((s->sandbox = open("/sandbox", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
        return snprintf(err, ERR, "sandbox step 'open /sandbox' failed: %s", strerror(errno)), -1;
    return give_dirs(s, w, err);
}

int probe_lower(const char *dir) {
    char upper[1024], work[1024], target[1024], data[4096];
    if (strlen(dir) > 1000) return fprintf(stderr, "kiln-init probe-lower: %s: too long\n", dir), 2;
    snprintf(upper, sizeof upper, "%s/upper", dir), snprintf(work, sizeof work, "%s/work", dir), snprintf(target, sizeof target, "%s/merged", dir);
    /* as the zygote's: cloned where the folder is, then used from another mount namespace */
    int held = syscall(SYS_open_tree, AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (held < 0) return fprintf(stderr, "kiln-init probe-lower: open_tree %s: %s\n", dir, strerror(errno)), errno == ENOSYS ? 1 : 2;
    if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) || mount("kiln", dir, "tmpfs", 0, "size=64k") ||
        mkdir(upper, 0700) || mkdir(work, 0700) || mkdir(target, 0700))
        return fprintf(stderr, "kiln-init probe-lower: cannot set up in %s: %s\n", dir, strerror(errno)), 2;
    snprintf(data, sizeof data, "lowerdir=/proc/self/fd/%d,upperdir=%s,workdir=%s", held, upper, work);
    /* EINVAL is the answer of a kernel before 6.15, which the caller logs: no message of ours */
    if (mount("kiln", target, "overlay", 0, data))
        return errno == EINVAL ? 1 : (fprintf(stderr, "kiln-init probe-lower: overlay on a detached clone: %s\n", strerror(errno)), 1);
    return 0;
}
