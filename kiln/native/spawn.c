/* The zygote's spawn of a slot's init (vfork.c) into the slot's new namespaces: the zygote's
 * Python pages are neither copied nor made copy-on-write, where a fork of a Python process
 * costs both sides hundreds of page copies. Loaded by kiln/native/__init__.py with ctypes. */
#include "vfork.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

struct inherit {
    const int *keep;
    int nkeep;
};

/* the zygote's handlers are not init's, and an exec keeps what is ignored; the kept
 * descriptors made inheritable in the child only */
static int prepare(void *arg) {
    const struct inherit *in = arg;
    reset_signals_for_init();
    for (int i = 0; i < in->nkeep; i++) syscall(SYS_fcntl, in->keep[i], F_SETFD, 0);
    return 0;
}

/* Returns the child's pid, or -1 with errno set (ctypes reads it: use_errno). */
pid_t kiln_spawn_init(unsigned long flags, const char *path, char *const argv[], char *const envp[], const int *keep, int nkeep) {
    struct inherit in = {keep, nkeep};
    uint64_t all = ~0ULL, old;
    /* no handler of the zygote may run on the shared memory while the child borrows it */
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
    pid_t pid = vfork_exec(flags, path, argv, envp, prepare, &in);
    int error = errno;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
    errno = error;
    return pid;
}
