/* The zygote's spawns of kiln-init into new namespaces: clones that share the zygote's memory
 * until their exec, so its Python pages are neither copied nor made copy-on-write (a fork of a
 * Python process costs both sides hundreds of page copies). Loaded by kiln/native/__init__.py
 * with ctypes. Two of them:
 *
 * - kiln_spawn_init (vfork.c's): returns once the child has exec'd, its exec's error its own.
 *   For the rare spawns (a template, the rootless zygote, the probe).
 * - kiln_start_init: returns as soon as the child exists. A slot's spawn: under load its child
 *   waits for a CPU before it gets to its exec (0.5 ms p50, 2.4 ms p99 with the CPUs busy), and
 *   a vfork would hold the zygote, and so the supply of every other slot, that long. The child
 *   runs on a launch area of its own (its stack, and copies of all it reads), which the kernel
 *   gives back by clearing its tid word at the child's exec or exit (CLONE_CHILD_CLEARTID, as
 *   the standby's); it makes only raw syscalls, so the zygote's errno stays the zygote's; an
 *   exec that fails is the child's exit with 127, its errno kept for kiln_start_error. */
#include "vfork.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct inherit {
    const int *keep;
    int nkeep;
};

/* the zygote's handlers are not init's, and an exec keeps what is ignored; the kept
 * descriptors made inheritable in the child only */
static void inherit(const int *keep, int nkeep) {
    reset_signals_for_init();
    for (int i = 0; i < nkeep; i++) raw_syscall(SYS_fcntl, keep[i], F_SETFD, 0, 0);
}

static int prepare(void *arg) {
    const struct inherit *in = arg;
    inherit(in->keep, in->nkeep);
    return 0;
}

/* Returns the child's pid, or -1 with errno set (ctypes reads it: use_errno). */
pid_t kiln_spawn_init(unsigned long flags, const char *path, char *const argv[], char *const envp[], const int *keep, int nkeep) {
    struct inherit in = {keep, nkeep};
    uint64_t all = ~0ULL, old;
    /* no handler of the zygote may run on the shared memory while the child borrows it */
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
    pid_t pid = vfork_exec(flags, -1, NULL, path, argv, envp, prepare, &in);
    int error = errno;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
    errno = error;
    return pid;
}

/* Launch areas used in turn: a zygote starts one slot at a time and each child lets its area go
 * within milliseconds, so a start waits for its area only when the previous LAUNCHES children
 * all still wait for a CPU. */
enum { LAUNCHES = 8, LAUNCH_STRINGS = 16 * 1024, LAUNCH_KEEP = 64, LAUNCH_POINTERS = 128 };

struct launch {
    int borrowed; /* non-zero while a child runs here; the kernel clears it (and wakes) */
    pid_t pid;
    int error; /* the child's exec's, kept for kiln_start_error */
    char *path, **argv, **envp;
    int keep[LAUNCH_KEEP], nkeep;
    char *pointers[LAUNCH_POINTERS];
    char strings[LAUNCH_STRINGS];
    char stack[32 * 1024] __attribute__((aligned(16)));
};

static struct launch launches[LAUNCHES];
static unsigned next_launch;

static int launched(void *arg) {
    struct launch *l = arg;
    inherit(l->keep, l->nkeep);
    uint64_t none = 0;
    raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, (long)&none, 0, 8);
    long error = raw_syscall(SYS_execve, (long)l->path, (long)l->argv, (long)l->envp, 0);
    l->error = (int)-error;
    raw_syscall(SYS_exit, 127, 0, 0, 0);
    return 127;
}

/* where the next copy goes in an area: its pointers from `pointer`, its strings from `room` */
struct cursor {
    int pointer; /* the next free entry of l->pointers */
    size_t room;
};

/* `text` copied into the area's strings, or NULL when they are full */
static char *copy_string(struct launch *l, struct cursor *at, const char *text) {
    size_t size = strlen(text) + 1;
    if (size > LAUNCH_STRINGS - at->room) return NULL;
    char *copy = memcpy(l->strings + at->room, text, size);
    at->room += size;
    return copy;
}

/* `list` (NULL-terminated) copied into the area, or NULL when it is too small */
static char **copy_list(struct launch *l, struct cursor *at, char *const list[]) {
    char **copy = &l->pointers[at->pointer];
    for (int i = 0;; i++) {
        if (at->pointer >= LAUNCH_POINTERS) return NULL;
        char *item = list[i] ? copy_string(l, at, list[i]) : NULL;
        if (list[i] && !item) return NULL;
        l->pointers[at->pointer++] = item;
        if (!item) return copy;
    }
}

static int fill(struct launch *l, const char *path, char *const argv[], char *const envp[], const int *keep, int nkeep) {
    struct cursor at = {0, 0};
    if (nkeep > LAUNCH_KEEP || !(l->path = copy_string(l, &at, path)) || !(l->argv = copy_list(l, &at, argv)) || !(l->envp = copy_list(l, &at, envp)))
        return E2BIG;
    memcpy(l->keep, keep, sizeof(int) * nkeep);
    l->nkeep = nkeep;
    l->error = 0;
    return 0;
}

/* Returns the child's pid once it exists, or -1 with errno set (the clone's, or E2BIG). */
pid_t kiln_start_init(unsigned long flags, const char *path, char *const argv[], char *const envp[], const int *keep, int nkeep) {
    struct launch *l = &launches[next_launch++ % LAUNCHES];
    for (int tid; (tid = __atomic_load_n(&l->borrowed, __ATOMIC_ACQUIRE)) != 0;) syscall(SYS_futex, &l->borrowed, FUTEX_WAIT, tid, NULL);
    int error = fill(l, path, argv, envp, keep, nkeep);
    if (error) return errno = error, -1;
    l->borrowed = 1;
    uint64_t all = ~0ULL, old;
    /* the child starts with every signal blocked, and unblocks them only at its exec */
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
    pid_t pid = clone(launched, l->stack + sizeof l->stack, CLONE_VM | CLONE_CHILD_CLEARTID | flags | SIGCHLD, l, NULL, NULL, &l->borrowed);
    error = errno;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
    l->pid = pid;
    if (pid < 0) l->borrowed = 0;
    errno = error;
    return pid;
}

/* Why `pid`, started by kiln_start_init, exited before it became kiln-init (its exec's errno),
 * or 0: it exec'd, or it is unknown (its area used again since; LAUNCHES starts later). */
int kiln_start_error(pid_t pid) {
    for (int i = 0; i < LAUNCHES; i++)
        if (launches[i].pid == pid && !__atomic_load_n(&launches[i].borrowed, __ATOMIC_ACQUIRE)) return launches[i].error;
    return 0;
}
