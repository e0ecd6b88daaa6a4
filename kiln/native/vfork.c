#include "vfork.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct request {
    const char *path;
    char *const *argv, *const *envp;
    vfork_prepare prepare;
    void *arg;
    volatile int error;
};

struct kernel_sigaction {
    unsigned long handler, flags, restorer;
    uint64_t mask;
};

void set_disposition(int sig, void (*handler)(int)) {
    struct kernel_sigaction action = {(unsigned long)handler, 0, 0, 0};
    syscall(SYS_rt_sigaction, sig, &action, NULL, 8);
}

void reset_signals_for_init(void) {
    for (int sig = 1; sig < 65; sig++)
        if (sig != SIGKILL && sig != SIGSTOP) set_disposition(sig, sig == SIGPIPE || sig == SIGXFSZ ? SIG_IGN : SIG_DFL);
}

static int child(void *arg) {
    struct request *req = arg;
    int error = req->prepare ? req->prepare(req->arg) : 0;
    if (!error) {
        uint64_t none = 0;
        syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8);
        syscall(SYS_execve, req->path, req->argv, req->envp);
        error = errno ? errno : ENOEXEC;
    }
    req->error = error;
    syscall(SYS_exit, 127);
    return 127;
}

void reap(pid_t pid) {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

pid_t vfork_exec(unsigned long flags, const char *path, char *const argv[], char *const envp[], vfork_prepare prepare, void *arg) {
    static char stack[64 * 1024] __attribute__((aligned(16)));
    struct request req = {path, argv, envp, prepare, arg, 0};
    pid_t pid = clone(child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | flags | SIGCHLD, &req);
    if (pid < 0 || !req.error) return pid;
    reap(pid);
    errno = req.error;
    return -1;
}
