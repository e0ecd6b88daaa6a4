/* The workspace and the task's process, from init: the request's files written beneath
 * /sandbox without following anything, the task's limits, identity and filter taken by init
 * itself, then the command spawned (vfork + exec) into the slot's cgroup: it inherits them. */
#include "kiln.h"
#include "vfork.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* beneath /sandbox, no symlink, no magic link, no mount crossing: a path root writes for a
 * request is never redirected elsewhere (the workspace comes from the operator, the names from
 * the language table, but nothing is taken on trust) */
#define RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static int openat2_beneath(int dir, const char *path, int flags, mode_t mode) {
    struct open_how how = {.flags = flags, .mode = mode, .resolve = RESOLVE};
    return syscall(SYS_openat2, dir, path, &how, sizeof how);
}

static int fail(char *err, const char *step, const char *what) {
    snprintf(err, ERR, "sandbox step '%s' failed: %s%s%s", step, what ? what : "", what ? ": " : "", strerror(errno));
    return -1;
}

static int give(int root, const char *rel) {
    if (!*rel || !strcmp(rel, ".")) return fchown(root, S.recipe.uid, S.recipe.uid);
    int fd = openat2_beneath(root, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    int rc = fchown(fd, S.recipe.uid, S.recipe.uid);
    close(fd);
    return rc;
}

/* a directory of the workspace given to the task (a metadata copy-up on the overlay), with the
 * parents the workspace lacks made and given too */
static int make_writable_dir(int root, const char *rel) {
    char buf[4096];
    size_t len = strlen(rel);
    if (len >= sizeof buf) return errno = ENAMETOOLONG, -1;
    memcpy(buf, rel, len + 1);
    for (char *p = buf; *p; p++) {
        if (p[1] != '/' && p[1] != '\0') continue;
        char saved = p[1];
        p[1] = '\0';
        if (mkdirat(root, buf, 0755) == 0) {
            if (give(root, buf)) return -1;
        } else if (errno != EEXIST) {
            return -1;
        }
        p[1] = saved;
    }
    return give(root, rel);
}

static int write_file(int root, const char *rel, const char *data, size_t len) {
    int fd = openat2_beneath(root, rel, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    struct stat st;
    int rc = fstat(fd, &st);
    if (!rc && !S_ISREG(st.st_mode)) errno = EISDIR, rc = -1;
    while (!rc && len) {
        ssize_t n = write(fd, data, len);
        if (n < 0) rc = -1;
        else data += n, len -= n;
    }
    if (!rc) rc = fchown(fd, S.recipe.uid, S.recipe.uid);
    close(fd);
    return rc;
}

/* /sandbox as mount_workspace left it: opened once, for its dirs and then the request's files */
static int sandbox = -1;

/* the workspace overlay and /tmp at the language's sizes, its writable dirs given */
int mount_workspace(struct span w, char *err) {
    if (apply_records(w, K_W_MOUNT, NULL, err)) return -1;
    if ((sandbox = open("/sandbox", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0) return fail(err, "open /sandbox", NULL);
    for (size_t i = w.from; i < w.to; i++) {
        const struct rec *r = &S.recipe.recs[i];
        if (r->kind == K_W_DIR && make_writable_dir(sandbox, r->args[0].p)) return fail(err, "make the writable dirs", r->args[0].p);
    }
    return 0;
}

static const char *part_path(struct span w, const char *part) {
    for (size_t i = w.from; i < w.to; i++)
        if (S.recipe.recs[i].kind == K_W_PART && !strcmp(S.recipe.recs[i].args[0].p, part)) return S.recipe.recs[i].args[1].p;
    return NULL;
}

/* after mount_workspace */
int write_parts(struct span w, const struct job *job, char *err) {
    for (int i = 0; i < job->nparts; i++) {
        const char *path = part_path(w, job->part_names[i]);
        if (!path) errno = ENOENT;
        if (!path || write_file(sandbox, path, job->blob[i], job->blob_len[i])) return fail(err, "write the request's files", path ? path : job->part_names[i]);
    }
    return 0;
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

/* both ends close-on-exec; the read end non-blocking for the poll loop */
int output_pipe(int ends[2]) {
    if (pipe2(ends, O_CLOEXEC) < 0) return -1;
    return fcntl(ends[0], F_SETFL, O_NONBLOCK);
}

/* What init makes for the task from here (its pipes) is owned by the task's user, as if the
 * task had made it: a pipe's owner is its maker's filesystem uid, and a program that reopens
 * /dev/stdout (/proc/self/fd/1) opens its own pipe, which only its owner may. */
void make_as_task(int yes) {
    syscall(SYS_setfsgid, yes ? S.recipe.uid : 0);
    syscall(SYS_setfsuid, yes ? S.recipe.uid : 0);
}

/* plan.task_rlimits' RLIMIT_CPU, from the recipe's terms */
long cpu_limit_s(struct span w, long long timeout_ms) {
    for (size_t i = w.from; i < w.to; i++)
        if (S.recipe.recs[i].kind == K_W_RLIMIT_CPU)
            return (timeout_ms + 999) / 1000 * arg_int(&S.recipe.recs[i].args[0]) + arg_int(&S.recipe.recs[i].args[1]);
    return 0;
}

/* soft = hard = the plan's value, or the current hard limit where that is lower: raising a
 * hard limit takes CAP_SYS_RESOURCE, which a service manager may have withheld */
static int set_rlimit(int which, rlim_t limit) {
    struct rlimit current;
    getrlimit(which, &current);
    if (current.rlim_max != RLIM_INFINITY && limit > current.rlim_max) limit = current.rlim_max;
    struct rlimit wanted = {limit, limit};
    return setrlimit(which, &wanted);
}

int take_limits(struct span w, long long timeout_ms, char *err) {
    long cpu = cpu_limit_s(w, timeout_ms);
    if (cpu > 0 && set_rlimit(RLIMIT_CPU, cpu)) return fail(err, "set rlimits", "RLIMIT_CPU");
    for (size_t i = w.from; i < w.to; i++)
        if (S.recipe.recs[i].kind == K_W_RLIMIT && set_rlimit(arg_int(&S.recipe.recs[i].args[0]), arg_int(&S.recipe.recs[i].args[1])))
            return fail(err, "set rlimits", S.recipe.recs[i].args[0].p);
    const char *cwd = S.recipe.cwd;
    if (!cwd) errno = ENOENT;
    return !cwd || chdir(cwd) < 0 ? fail(err, "enter the workspace", cwd) : 0;
}

int take_filter(char *err) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return fail(err, "set no_new_privs", NULL);
    for (size_t i = 0; i < S.recipe.n; i++) {
        const struct rec *r = &S.recipe.recs[i];
        if (r->kind != K_SECCOMP) continue;
        struct sock_fprog prog = {r->args[0].len / 8, (struct sock_filter *)r->args[0].p};
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) return fail(err, "load seccomp", NULL);
    }
    return 0;
}

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

void keep_only(int *keep, int n) {
    qsort(keep, n, sizeof *keep, cmp_int);
    unsigned first = 3;
    for (int i = 0; i < n; i++) {
        if (keep[i] < 3) continue;
        if ((unsigned)keep[i] > first) syscall(SYS_close_range, first, keep[i] - 1, 0);
        first = keep[i] + 1;
        fcntl(keep[i], F_SETFD, FD_CLOEXEC);
    }
    syscall(SYS_close_range, first, ~0U, 0);
}

/* no exec of the job's (file capabilities, setuid root) gains a capability */
int empty_bounding_set(void) {
    int cap = 0;
    while (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) cap++;
    if (errno != EINVAL) return -1; /* EINVAL: past the last capability this kernel has */
    return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

void arm_death_signal(void) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct pollfd zygote = {S.zygote, POLLIN, 0};
    if (poll(&zygote, 1, 0) > 0) _exit(0); /* the zygote died before the signal was armed */
}

/* The task's identity, taken by the task's own process while still root (the spawned
 * task's child before its exec, or a forked task as it enters its slot), never by init, which
 * keeps root: a process may reschedule, re-pin, renice or prlimit only processes of its own
 * uid, so nothing the task does reaches the process that enforces its limits. Into the slot's
 * cgroup (init never joins: its own memory and CPU are never the run's), a cgroup namespace
 * rooted there (the task sees "/", nothing of kiln's tree), then wholly the slot's user: no
 * groups, every uid non-zero (the kernel clears the permitted and effective sets) and no
 * inheritable capability either. Raw syscalls: they change this thread only, and a spawned
 * task's child shares init's memory until its exec. Returns 0 or -1 with errno set. */
int take_identity(void) {
    struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[2] = {{0}};
    long uid = S.recipe.uid;
    for (int i = 0; i < S.n_procs; i++)
        if (syscall(SYS_write, S.cg_procs[i], "0", 1) != 1) return -1;
    if (syscall(SYS_unshare, CLONE_NEWCGROUP) || syscall(SYS_setgroups, 0, NULL) || syscall(SYS_setresgid, uid, uid, uid) ||
        syscall(SYS_setresuid, uid, uid, uid) || syscall(SYS_capset, &head, none))
        return -1;
    return 0;
}

/* The task's own first steps, in its child before the exec (vfork.c): its identity and the
 * filter (last: it allows neither), its descriptors laid out, the signals init ignores back
 * at their default. */
struct layout {
    const int *fds;
    int nfds;
    const char *failed; /* the step that failed, for init's error */
};

static int prepare_task(void *arg) {
    struct layout *out = arg;
    char err[ERR];
    if (take_identity()) return out->failed = "take the slot's cgroup and user", errno;
    if (take_filter(err)) return out->failed = "load seccomp", errno;
    for (int i = 0; i < out->nfds; i++) {
        /* every source is above the targets' range or is its own target (fds are made after
         * init's 0-2): a dup2 never overwrites a source still to be laid out */
        if (out->fds[i] == i) syscall(SYS_fcntl, i, F_SETFD, 0);
        else if (syscall(SYS_dup2, out->fds[i], i) < 0) return out->failed = "lay out descriptors", errno;
    }
    set_disposition(SIGPIPE, SIG_DFL);
    set_disposition(SIGXFSZ, SIG_DFL);
    return 0;
}

/* the argv of records argv_kind and the K_W_ENV environment of a language */
int command_of(struct span w, uint32_t argv_kind, char *argv[COMMAND_MAX], char *envp[COMMAND_MAX]) {
    int argc = 0, envc = 0;
    for (size_t i = w.from; i < w.to; i++) {
        const struct rec *r = &S.recipe.recs[i];
        for (uint32_t k = 0; r->kind == argv_kind && k < r->nargs && argc < COMMAND_MAX - 1; k++) argv[argc++] = (char *)r->args[k].p;
        for (uint32_t k = 0; r->kind == K_W_ENV && k < r->nargs && envc < COMMAND_MAX - 1; k++) envp[envc++] = (char *)r->args[k].p;
    }
    argv[argc] = envp[envc] = NULL;
    return argc;
}

int spawn_in_cgroup(struct span w, uint32_t argv_kind, const int *fds, int nfds, pid_t *pid, char *err) {
    char *argv[COMMAND_MAX], *envp[COMMAND_MAX];
    const char *step = argv_kind == K_W_PRESTART_ARGV ? "start the prestart command" : "exec the test command";
    if (!command_of(w, argv_kind, argv, envp)) return errno = EINVAL, fail(err, step, "(no command)");
    struct layout layout = {fds, nfds, NULL};
    *pid = vfork_exec(0, argv[0], argv, envp, prepare_task, &layout);
    int error = errno;
    for (int i = 0; i < S.n_procs; i++) close(S.cg_procs[i]); /* init never moves a process */
    S.n_procs = 0;
    return *pid < 0 ? (errno = error, fail(err, step, layout.failed ? layout.failed : argv[0])) : 0;
}
