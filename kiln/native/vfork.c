#include "vfork.h"

#include <errno.h>
#include <linux/sched.h>
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

/* clone3 running fn(arg) in the child, on [stack, stack + size): with CLONE_VM the child shares
 * the caller's memory, so it must not return into the caller's frames. The child starts after
 * the syscall instruction with the caller's registers but its own stack pointer; fn and arg wait
 * in callee-saved registers (the kernel copies them into the child), the stack is aligned as a
 * call expects and the frame pointer cleared (the child's first frame has no caller), and the
 * child exits with fn's value. Returns the child's pid, or -errno. */
static long clone3_run(struct clone_args *args, int (*fn)(void *), void *arg) {
#if defined(__x86_64__)
    long ret;
    register long r12 __asm__("r12") = (long)fn, r13 __asm__("r13") = (long)arg;
    __asm__ volatile("syscall\n\t"
                     "test %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     "xor %%ebp, %%ebp\n\t"
                     "and $-16, %%rsp\n\t"
                     "mov %%r13, %%rdi\n\t"
                     "call *%%r12\n\t"
                     "mov %%eax, %%edi\n\t"
                     "mov %[exit], %%eax\n\t"
                     "syscall\n\t"
                     "hlt\n"
                     "1:"
                     : "=a"(ret)
                     : "a"((long)SYS_clone3), "D"(args), "S"(sizeof *args), "r"(r12), "r"(r13), [exit] "i"(SYS_exit)
                     : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_clone3, x0 __asm__("x0") = (long)args, x1 __asm__("x1") = sizeof *args;
    register long x19 __asm__("x19") = (long)fn, x20 __asm__("x20") = (long)arg;
    __asm__ volatile("svc 0\n\t"
                     "cbnz x0, 1f\n\t"
                     "mov x29, xzr\n\t"
                     "mov x30, xzr\n\t"
                     "mov x9, sp\n\t"
                     "and x9, x9, #-16\n\t"
                     "mov sp, x9\n\t"
                     "mov x0, x20\n\t"
                     "blr x19\n\t"
                     "mov x8, %[exit]\n\t"
                     "svc 0\n"
                     "1:"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x19), "r"(x20), [exit] "i"(SYS_exit)
                     : "x9", "memory");
    return x0;
#else
#error "vfork.c: clone3_run() needs this architecture's trampoline"
#endif
}

/* clone3's answers where the kernel cannot create a process in a cgroup: no clone3 (Linux < 5.3:
 * ENOSYS), or one without CLONE_INTO_CGROUP (< 5.7: E2BIG for arguments larger than it knows,
 * EINVAL for the flag) */
static int lacks_clone_into_cgroup(long error) {
    return error == -ENOSYS || error == -E2BIG || error == -EINVAL;
}

pid_t clone_child(unsigned long flags, int cgroup, int *born, char *stack, size_t size, int (*fn)(void *), void *arg, volatile int *child_tid) {
    if (cgroup >= 0 && *born) {
        struct clone_args args = {.flags = flags | CLONE_INTO_CGROUP, .child_tid = (uintptr_t)child_tid, .exit_signal = SIGCHLD,
                                  .stack = (uintptr_t)stack, .stack_size = size, .cgroup = cgroup};
        long pid = clone3_run(&args, fn, arg);
        if (pid >= 0) return pid;
        if (!lacks_clone_into_cgroup(pid)) return errno = -pid, -1;
        *born = 0; /* from now on: the child joins by cgroup.procs (read by it: set before it runs) */
    }
    return clone(fn, stack + size, flags | SIGCHLD, arg, NULL, NULL, child_tid);
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

pid_t vfork_exec(unsigned long flags, int cgroup, int *born, const char *path, char *const argv[], char *const envp[], vfork_prepare prepare, void *arg) {
    static char stack[64 * 1024] __attribute__((aligned(16)));
    struct request req = {path, argv, envp, prepare, arg, 0};
    pid_t pid = clone_child(CLONE_VM | CLONE_VFORK | flags, cgroup, born, stack, sizeof stack, child, &req, NULL);
    if (pid < 0 || !req.error) return pid;
    reap(pid);
    errno = req.error;
    return -1;
}
