/* The zygote's spawn of a slot's init: clone(2) into the slot's new namespaces with the
 * zygote's memory shared until the exec (CLONE_VM | CLONE_VFORK, as posix_spawn does), so the
 * zygote's pages are neither copied nor made copy-on-write: a fork of a Python process costs
 * both sides hundreds of page copies. Loaded by kiln/native/__init__.py with ctypes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STACK_SIZE (64 * 1024)

struct request {
    const char *path;
    char *const *argv, *const *envp;
    const int *keep;
    int nkeep;
    volatile int error;
};

struct kernel_sigaction {
    unsigned long handler, flags, restorer;
    uint64_t mask;
};

static int child(void *arg) {
    struct request *req = arg;
    /* every disposition to default but what init must ignore (a closed socket is an error to
     * it, not a death): the zygote's handlers are not init's, and an exec keeps what is ignored */
    for (int sig = 1; sig < 65; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        struct kernel_sigaction action = {(sig == SIGPIPE || sig == SIGXFSZ) ? (unsigned long)SIG_IGN : (unsigned long)SIG_DFL, 0, 0, 0};
        syscall(SYS_rt_sigaction, sig, &action, NULL, 8);
    }
    for (int i = 0; i < req->nkeep; i++) fcntl(req->keep[i], F_SETFD, 0);
    uint64_t none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8);
    execve(req->path, req->argv, req->envp);
    req->error = errno ? errno : ENOEXEC;
    _exit(127);
}

/* Returns the child's pid, or -1 with *error set to clone's errno. A child whose exec failed
 * has exited (127; the caller reaps it) and *error is the exec's errno. `keep`: the descriptors
 * the child inherits (close-on-exec in the zygote). */
pid_t kiln_spawn_init(unsigned long flags, const char *path, char *const argv[], char *const envp[], const int *keep, int nkeep, int *error) {
    static char stack[STACK_SIZE] __attribute__((aligned(16)));
    struct request req = {path, argv, envp, keep, nkeep, 0};
    uint64_t all = ~0ULL, old;
    /* no handler of the zygote may run on the shared memory while the child borrows it */
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
    pid_t pid = clone(child, stack + STACK_SIZE, CLONE_VM | CLONE_VFORK | flags | SIGCHLD, &req);
    int clone_errno = errno;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
    if (pid < 0) {
        *error = clone_errno;
        return -1;
    }
    *error = req.error;
    return pid;
}
