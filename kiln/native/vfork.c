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

long raw_syscall(long n, long a, long b, long c, long d) {
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = n, x0 __asm__("x0") = a, x1 __asm__("x1") = b, x2 __asm__("x2") = c, x3 __asm__("x3") = d;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
#else
#error "vfork.c: raw_syscall() needs this architecture's syscall instruction"
#endif
}

void set_disposition(int sig, void (*handler)(int)) {
    struct kernel_sigaction action = {(unsigned long)handler, 0, 0, 0};
    raw_syscall(SYS_rt_sigaction, sig, (long)&action, 0, 8);
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
