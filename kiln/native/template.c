/* A language's template: its interpreter started and loaded once, and every prestarted task of
 * the language forked from it instead of started afresh (python: ~1 ms of CPU a task instead
 * of ~12). The workspace's `template` command loads a binding of this core from descriptor 4
 * (template_python.c, template_node.c) and calls its serve(3); kiln-init's template mode
 * (launch.c) started that command in a copy of the sandbox's root, as root, with the zygote's
 * socket on descriptor 3.
 *
 *   serve(3)  the zygote's requests, one message a slot: the flags, path, argv and environment
 *             of kiln-init and the descriptors it keeps (KILN_X=#i in the environment: the
 *             i-th descriptor of the message). For each, a child is cloned into the slot's new
 *             namespaces as the zygote's own child (CLONE_PARENT); it forks the task, its first
 *             child, and execs kiln-init as the slot's PID 1 (KILN_FORKED: the task's socket).
 *             The template answers the child's pid, and serves the next request.
 *   task      waits for kiln-init to finish the slot, then enters it (enter_slot: namespaces,
 *             session, limits, cgroup, user, descriptors 0-3, filter) and serve() returns
 *             true: from there on it is the prestart command before its go.
 *   EOF       serve() returns false in the template: the zygote is gone.
 *
 * The template holds nothing of any request: the task inherits an interpreter that loaded the
 * workspace's harness and nothing else. */
#include "kiln.h"
#include "template.h"
#include "vfork.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_MESSAGE 65536
#define MAX_STRINGS 256
#define MAX_PASSED 32
#define ENTER_FDS 6 /* mount and network namespaces, stdin, stdout, stderr, go; then cgroup.procs */

struct request {
    unsigned long flags;
    char *argv[MAX_STRINGS], *envp[MAX_STRINGS + 3];
    int fds[MAX_PASSED], nfds, program, recipe_fd;
    const char *slug;
    char message[MAX_MESSAGE], env[MAX_MESSAGE];
};

static int receive_fds(int sock, char *buf, size_t cap, int *fds, int *nfds) {
    char control[CMSG_SPACE(sizeof(int) * MAX_PASSED)];
    struct iovec iov = {buf, cap};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    ssize_t n;
    do n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    *nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); n >= 0 && c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        memcpy(fds + *nfds, CMSG_DATA(c), count * sizeof(int));
        *nfds += count;
    }
    if (n > 0 && (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) return errno = EMSGSIZE, -1;
    return n;
}

static void close_all(const int *fds, int n) {
    for (int i = 0; i < n; i++) close(fds[i]);
}

/* "KEY=#0,#3" -> "KEY=<fds[0]>,<fds[3]>" written at *out; other entries as they are */
/* the value of environment `entry` if it is `name`'s, else NULL */
static const char *value_of(const char *entry, const char *name) {
    size_t n = strlen(name);
    return !strncmp(entry, name, n) && entry[n] == '=' ? entry + n + 1 : NULL;
}

static char *substitute(const struct request *req, char *entry, char **out, const char *end) {
    char *value = strchr(entry, '=');
    if (!value || value[1] != '#') return entry;
    char *start = *out, *at = start, *p = value + 1;
    at += snprintf(at, end - at, "%.*s", (int)(value - entry + 1), entry);
    for (;;) {
        if (*p != '#' || at >= end) return NULL;
        long i = strtol(p + 1, &p, 10);
        if (i < 0 || i >= req->nfds - 1) return NULL;
        at += snprintf(at, end - at, "%d", req->fds[i]);
        if (!*p) break;
        if (*p != ',' || at >= end - 1) return NULL;
        *at++ = ',', p++;
    }
    if (at >= end) return NULL;
    *out = at + 1;
    return start;
}

/* the message: u64 flags | argv... NUL | NUL | environment... NUL; its last descriptor, the
 * program (kiln-init, whose path means nothing in the template's root) */
static int parse_request(struct request *req, size_t len) {
    if (len < sizeof req->flags + 2 || req->message[len - 1] != '\0' || req->nfds < 1) return errno = EINVAL, -1;
    memcpy(&req->flags, req->message, sizeof req->flags);
    char *p = req->message + sizeof req->flags, *end = req->message + len, *env = req->env;
    int argc = 0, envc = 0;
    req->program = req->fds[req->nfds - 1];
    for (; p < end && *p && argc < MAX_STRINGS - 1; p += strlen(p) + 1) req->argv[argc++] = p;
    if (p >= end || *p || !argc) return errno = EINVAL, -1;
    req->recipe_fd = -1, req->slug = NULL;
    for (p++; p < end && envc < MAX_STRINGS - 1; p += strlen(p) + 1) {
        if (!(req->envp[envc] = substitute(req, p, &env, req->env + sizeof req->env))) return errno = EINVAL, -1;
        const char *value;
        if ((value = value_of(req->envp[envc], START_VAR(RECIPE)))) req->recipe_fd = atoi(value);
        if ((value = value_of(req->envp[envc], START_VAR(PRESTART)))) req->slug = value;
        envc++;
    }
    req->argv[argc] = req->envp[envc] = NULL;
    return req->recipe_fd < 0 || !req->slug ? (errno = EINVAL, -1) : 0;
}

/* --- in the task: enter the slot kiln-init finished ------------------------------------- */

static int fail(char *err, const char *step) {
    snprintf(err, ERR, "the forked task could not %s: %s", step, strerror(errno));
    return -1;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels refuse it, and the run faults instead */
#endif

/* The pages the template wrote, which the task shares with it copy-on-write, copied now while
 * the slot warms rather than one fault at a time during the run (~700 for python a+b, ~1.7 ms
 * of its latency on a VM). Only those: present in the page table and anonymous (pagemap bits
 * 63 and 61), not what the template never touched nor what still is the file's. */
#define PAGE 4096UL
#define PM_PRESENT (1ULL << 63)
#define PM_FILE_OR_SHARED (1ULL << 61)

static void populate_range(int pagemap, unsigned long from, unsigned long to) {
    uint64_t entries[512];
    unsigned long run = 0; /* start of a run of pages to copy, 0: none */
    for (unsigned long at = from; at < to;) {
        size_t n = (to - at) / PAGE < 512 ? (to - at) / PAGE : 512;
        if (pread(pagemap, entries, n * 8, at / PAGE * 8) != (ssize_t)(n * 8)) return;
        for (size_t i = 0; i < n; i++, at += PAGE) {
            int wanted = (entries[i] & PM_PRESENT) && !(entries[i] & PM_FILE_OR_SHARED);
            if (wanted && !run) run = at;
            if (!wanted && run) madvise((void *)run, at - run, MADV_POPULATE_WRITE), run = 0;
        }
    }
    if (run) madvise((void *)run, to - run, MADV_POPULATE_WRITE);
}

static void populate_written(void) {
    char maps[65536];
    size_t n = 0;
    ssize_t got = 1;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC), pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got > 0 && n < sizeof maps - 1)
        if ((got = read(fd, maps + n, sizeof maps - 1 - n)) > 0) n += got;
    maps[n] = '\0';
    for (char *line = maps; pagemap >= 0 && line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        unsigned long from, to;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &from, &to, perms) == 3 && perms[0] == 'r' && perms[1] == 'w' && perms[3] == 'p')
            populate_range(pagemap, from, to);
    }
    if (fd >= 0) close(fd);
    if (pagemap >= 0) close(pagemap);
}

/* The same confinement as a task spawned by init (exec.c), taken by the task itself: it was
 * forked from root outside the slot, so it also moves into the slot's network and mount
 * namespaces, its session, and empties its bounding set. Filter last: it allows none of this. */
static int enter_slot(int sock, int recipe_fd, const char *slug, int populate, char *err) {
    char message[16];
    int fds[ENTER_FDS + MAX_FDS], n;
    ssize_t got = receive_fds(sock, message, sizeof message, fds, &n);
    if (got <= 0) _exit(0); /* the slot was given up while warming */
    if (n < ENTER_FDS || n > ENTER_FDS + MAX_FDS) return errno = EPROTO, fail(err, "read its slot's descriptors");
    struct slot slot = {.sock = -1, .zygote = -1, .sandbox = -1, .base_ns = -1};
    if (recipe_load(recipe_fd, &slot.recipe, err, ERR)) return -1;
    close(recipe_fd);
    long workload_rec = find_workload_rec(&slot.recipe, slug);
    if (slot.recipe.uid < 0 || workload_rec < 0) return errno = ENOENT, fail(err, "find its language in the recipe");
    struct span w = workload_span(&slot.recipe, workload_rec);
    if (setns(fds[1], CLONE_NEWNET) || setns(fds[0], CLONE_NEWNS)) return fail(err, "enter the slot's namespaces");
    if (setsid() < 0) return fail(err, "start its session");
    if (empty_bounding_set()) return fail(err, "empty its bounding set");
    if (take_limits(&slot, w, slot.recipe.timeout_max_ms, 0, err)) return -1;
    if (give_rlimits(&slot, 0)) return fail(err, "set rlimits");
    for (int i = ENTER_FDS; i < n; i++) slot.cg_procs[slot.n_procs++] = fds[i];
    if (take_identity(&slot)) return fail(err, "take the slot's cgroup and user");
    for (int i = 0; i < 4; i++)
        if (dup2(fds[2 + i], i) < 0) return fail(err, "lay out its descriptors");
    for (int i = 0; i < n; i++)
        if (fds[i] > 3) close(fds[i]);
    slot.n_procs = 0;
    /* dumpable as after an exec (a uid change made it not); the task holds nothing that is not
     * its own */
    if (prctl(PR_SET_DUMPABLE, 1)) return fail(err, "become dumpable");
    if (populate) populate_written(); /* dumpable first: /proc/self/pagemap is root's otherwise */
    if (take_filter(&slot, err)) return -1;
    recipe_unload(&slot.recipe); /* the sandbox's plan, host paths included, is not the task's */
    return 0;
}

/* --- in the child cloned for a slot ---------------------------------------------------- */

#define MAX_TEMPLATE_FDS 256

/* The template's descriptors (/proc/self/fd) and what each is. The task closes them or, for a
 * runtime that still uses some (hooks->reserve_descriptors), replaces each with one of its own
 * of the same type: node, as it exits, runs the loop of its tracing agent once, which adds its
 * pipe and eventfd to its epoll instance, and writes to its platform's timer thread's eventfd.
 * Those become an empty epoll instance, a fresh eventfd, an end of a fresh pipe, the rest
 * /dev/null: the numbers stay taken, what the runtime does with them still works, and nothing
 * the template holds is shared with the task. Only the template's: whatever the fork itself
 * opened stays, even at a number the template had (libuv's pthread_atfork handler makes its
 * signal lock's pipe afresh): a different file there is left alone. */
enum fd_type { OTHER_FD, EPOLL_FD, EVENT_FD, PIPE_FD };

struct template_fd {
    int fd, flags;
    enum fd_type type;
    dev_t dev;
    ino_t ino;
};

static enum fd_type type_of(int fd) {
    char path[32], target[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    if (!strncmp(target, "pipe:", 5)) return PIPE_FD;
    return !strcmp(target, "anon_inode:[eventpoll]") ? EPOLL_FD : !strcmp(target, "anon_inode:[eventfd]") ? EVENT_FD : OTHER_FD;
}

static int open_descriptors(struct template_fd *fds, int cap) {
    char buf[4096];
    struct stat st;
    int n = 0, dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    long got;
    while (dir >= 0 && (got = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0)
        for (long at = 0; at < got;) {
            struct dirent64 { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type; char name[]; } *d = (void *)(buf + at);
            int fd = atoi(d->name);
            if (d->name[0] != '.' && fd > 2 && fd != dir && n < cap && fstat(fd, &st) == 0)
                fds[n++] = (struct template_fd){fd, fcntl(fd, F_GETFL), type_of(fd), st.st_dev, st.st_ino};
            at += d->reclen;
        }
    if (dir < 0) return -1;
    close(dir);
    return n;
}

static void replace_descriptor(const struct template_fd *f) {
    struct stat st;
    if (fstat(f->fd, &st) || st.st_dev != f->dev || st.st_ino != f->ino) return; /* not the template's any more */
    int own = -1, pipe_ends[2];
    if (f->type == EPOLL_FD) own = epoll_create1(EPOLL_CLOEXEC);
    if (f->type == EVENT_FD) own = eventfd(0, EFD_CLOEXEC | (f->flags & O_NONBLOCK));
    if (f->type == PIPE_FD && !pipe2(pipe_ends, O_CLOEXEC | (f->flags & O_NONBLOCK))) {
        int writes = (f->flags & O_ACCMODE) == O_WRONLY;
        own = pipe_ends[writes];
        close(pipe_ends[!writes]);
    }
    if (f->type == OTHER_FD) own = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (own < 0 || dup3(own, f->fd, O_CLOEXEC) < 0) close(f->fd);
    if (own >= 0) close(own);
}

/* The template's descriptors, listed only where the fork replaces them (reserve); -1: not
 * listed, and the fork closes every one (close_range) but those it keeps. */
static int list_descriptors(struct template_fd *fds, int reserve) {
    return reserve ? open_descriptors(fds, MAX_TEMPLATE_FDS) : -1;
}

/* In a fork: the listed descriptors replaced, all but `keep`; unlisted (or too many to list),
 * every descriptor but `keep` closed */
static void leave_descriptors(const struct template_fd *fds, int count, int *keep, int nkeep) {
    if (count < 0 || count == MAX_TEMPLATE_FDS) {
        keep_only(keep, nkeep);
        return;
    }
    for (int i = 0; i < count; i++) {
        int kept = 0;
        for (int k = 0; k < nkeep; k++) kept |= fds[i].fd == keep[k];
        if (!kept) replace_descriptor(&fds[i]);
    }
}

/* PID 1 of the slot's namespaces: forks the task and becomes kiln-init; returns only in the
 * task, with its end of the socket to init */
static void become_slot(struct request *req, int reserve, int *task_sock) {
    int pair[2];
    struct template_fd template_fds[MAX_TEMPLATE_FDS];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair)) _exit(71);
    int count = list_descriptors(template_fds, reserve);
    pid_t task = fork();
    if (task < 0) _exit(71);
    if (task == 0) {
        /* the slot's own descriptors are init's, never the runtime's: closed, not replaced */
        for (int i = 0; i < req->nfds; i++)
            if (req->fds[i] != req->recipe_fd) close(req->fds[i]);
        close(pair[0]);
        int keep[2] = {pair[1], req->recipe_fd};
        leave_descriptors(template_fds, count, keep, 2);
        *task_sock = pair[1];
        return;
    }
    char forked[32], forked_pid[32];
    int envc = 0;
    while (req->envp[envc]) envc++;
    snprintf(forked, sizeof forked, "%s=%d", START_VAR(FORKED), pair[0]);
    snprintf(forked_pid, sizeof forked_pid, "%s=%d", START_VAR(FORKED_PID), task);
    req->envp[envc++] = forked, req->envp[envc++] = forked_pid, req->envp[envc] = NULL;
    fcntl(pair[0], F_SETFD, 0);
    for (int i = 0; i < req->nfds; i++) fcntl(req->fds[i], F_SETFD, 0);
    reset_signals_for_init();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    syscall(SYS_execveat, req->program, "", req->argv, req->envp, AT_EMPTY_PATH);
    _exit(127); /* the zygote sees the slot die while warming */
}

/* The runtime's hooks around a fork: a raw clone with `flags` (CLONE_PARENT, namespaces: no
 * atfork handler runs in the child, which only forks once more and execs), or with none
 * libc's fork (its atfork handlers run: the child goes on as the runtime). */
static pid_t hooked_fork(const struct template_hooks *hooks, unsigned long flags) {
    hooks->before_fork();
    pid_t pid = flags ? syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, 0) : fork();
    if (pid != 0) {
        int error = errno;
        hooks->after_fork_parent();
        errno = error;
    }
    return pid;
}

/* Returns the slot's pid in the template, 0 in the entered task, -1 with errno. */
static pid_t fork_slot(struct request *req, const struct template_hooks *hooks) {
    pid_t pid = hooked_fork(hooks, req->flags | CLONE_PARENT);
    if (pid != 0) return pid;
    int sock;
    become_slot(req, hooks->reserve_descriptors, &sock);
    hooks->after_fork_child();
    char err[ERR];
    if (enter_slot(sock, req->recipe_fd, req->slug, hooks->populate, err)) {
        send(sock, err, strlen(err), MSG_NOSIGNAL);
        _exit(70);
    }
    hooks->entered();
    send(sock, "ok", 2, MSG_NOSIGNAL);
    close(sock);
    return 0;
}

pid_t template_fork_alike(const struct template_hooks *hooks) {
    struct template_fd template_fds[MAX_TEMPLATE_FDS];
    int count = list_descriptors(template_fds, hooks->reserve_descriptors);
    pid_t pid = hooked_fork(hooks, 0);
    if (pid != 0) return pid;
    int none[1] = {-1};
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* it never outlives the template that waits for it */
    leave_descriptors(template_fds, count, none, 0);
    hooks->after_fork_child();
    hooks->entered();
    return 0;
}

int template_serve(int control, const struct template_hooks *hooks) {
    static struct request req;
    if (send(control, "r", 1, MSG_NOSIGNAL) != 1) return 0;
    for (;;) {
        ssize_t len = receive_fds(control, req.message, sizeof req.message, req.fds, &req.nfds);
        if (len == 0) return 0;
        int32_t answer = -EPROTO;
        if (len < 0 && errno != EMSGSIZE) return 0;
        if (len > 0 && parse_request(&req, len) == 0) {
            pid_t pid = fork_slot(&req, hooks);
            if (pid == 0) return 1;
            answer = pid > 0 ? pid : -errno;
        }
        close_all(req.fds, req.nfds);
        if (send(control, &answer, sizeof answer, MSG_NOSIGNAL) != sizeof answer) return 0;
    }
}
