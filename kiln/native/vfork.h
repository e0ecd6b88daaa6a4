/* A child that borrows the caller's memory until its exec (clone with CLONE_VM | CLONE_VFORK,
 * as posix_spawn does): no page is copied or made copy-on-write on either side. Used by the
 * zygote's rare spawns of kiln-init (spawn.c: a slot's own does not wait for its exec) and
 * init's spawn of the task (exec.c). clone_child, which vfork_exec uses, also makes a plain
 * slot's standby (standby.c), and creates either in the slot's v2 cgroup. */
#ifndef KILN_VFORK_H
#define KILN_VFORK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/types.h>

/* Runs in the child before its exec, on the caller's memory: raw syscalls only, no libc state
 * touched. Returns 0, or an errno that fails the spawn. */
typedef int (*vfork_prepare)(void *arg);

/* fn(arg) in a child cloned with `flags` (SIGCHLD its exit signal) on [stack, stack + size),
 * clearing *child_tid at its exit or exec where flags have CLONE_CHILD_CLEARTID. With cgroup >= 0
 * and *born, it is created in that cgroup v2 directory (clone3 with CLONE_INTO_CGROUP): it never
 * migrates, which would cost an RCU grace period. A kernel without that (Linux < 5.7) sets *born
 * to 0, before the child runs, and the child is created in the caller's cgroup: it must then join
 * by cgroup.procs. The first call while a slot warms is the probe: later ones never retry. Returns
 * its pid, or -1 with errno set. */
pid_t clone_child(unsigned long flags, int cgroup, int *born, char *stack, size_t size, int (*fn)(void *), void *arg, volatile int *child_tid);

/* `path` in a child cloned with CLONE_VM | CLONE_VFORK | flags (CLONE_NEW* allowed), in `cgroup`
 * as clone_child says (-1: the caller's), its signal mask emptied before the exec. Returns its
 * pid once it has exec'd, or -1 with errno set (clone's, prepare's or the exec's; a child that
 * got as far as prepare is reaped). The caller must be single-threaded, and block its signals
 * around the call if it has handlers. */
pid_t vfork_exec(unsigned long flags, int cgroup, int *born, const char *path, char *const argv[], char *const envp[], vfork_prepare prepare, void *arg);

/* waitpid(pid) until it reaps, through EINTR: a child that failed before its exec */
void reap(pid_t pid);

/* a syscall that never touches errno (-errno on failure): for a child that shares its memory,
 * and so its errno, with a parent that goes on running */
long raw_syscall(long n, long a, long b, long c, long d);

/* rt_sigaction(2) itself: libc's refuses the real-time signals it keeps for its own use */
void set_disposition(int sig, void (*handler)(int));

/* what kiln-init starts with, whoever execs it: every disposition at its default but SIGPIPE
 * and SIGXFSZ ignored (a closed socket or a full file is an error to init, not a death) */
void reset_signals_for_init(void);

#endif
