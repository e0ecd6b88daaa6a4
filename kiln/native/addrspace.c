/* A judge test's address-space limit (limits.address_space: RLIMIT_AS, memory as DMOJ and
 * Codeforces count it), and seeing that the task reached it.
 *
 * RLIMIT_AS alone refuses an allocation without a trace: malloc returns NULL, `new` throws, the
 * program dies as it may (an abort, a segfault, a wrong answer) and the judge would say RE or WA
 * where those judges say MLE. So the task's process also loads, before kiln's own filter (which
 * kills `seccomp`), a filter that hands its mmap, mremap and brk calls to init
 * (SECCOMP_RET_USER_NOTIF). Init answers each from supervise(): it reads the caller's VmSize
 * (its total_vm, what the kernel's may_expand_vm compares with RLIMIT_AS) and refuses with
 * ENOMEM, recording that the limit was reached, where the kernel would refuse; else the call
 * goes on (SECCOMP_USER_NOTIF_FLAG_CONTINUE) and the kernel decides. RLIMIT_AS stays set: the
 * kernel is the enforcer of last resort (a MAP_FIXED over a reservation, two threads at once,
 * the stack). The listener is created in the task's process before its exec and passed to init
 * over a socket pair (never left in the task, which could answer for itself); a later judge
 * test's task is spawned by its test's init (testinit.c), which inherits the same socket.
 *
 * brk is answered without a check: glibc's malloc falls back to mmap when brk fails, and that
 * mmap is checked. It is in the filter because it is the first call of every glibc program:
 * a task whose process dies of SIGSEGV before any call came was killed by its exec, which the
 * kernel ends so when the program's own segments (a huge static array's bss) do not fit the
 * limit (the exec is past its point of no return): that is the limit reached too.
 *
 * Only a job with an address-space limit pays any of it; the others have no second filter. */
#include "kiln.h"
#include "vfork.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "addrspace.c: the native audit arch of this architecture"
#endif

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

#define PAGE 4096LL /* the kernel counts total_vm in pages; VmSize is it in kB */

static long long pages(unsigned long long bytes) {
    return (long long)((bytes + PAGE - 1) / PAGE);
}

/* --- in the task's process, before kiln's filter ------------------------------------------ */

/* mmap, mremap and brk to the listener; every other call (and another arch: kiln's filter
 * kills those) allowed, for kiln's filter to decide */
static int load_notifying_filter(void) {
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mremap, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_brk, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
    };
    struct sock_fprog prog = {sizeof code / sizeof *code, code};
    return raw_syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, (long)&prog, 0);
}

static int send_listener(int sock, int listener) {
    char control[CMSG_SPACE(sizeof(int))] = {0};
    char byte = 'l';
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &listener, sizeof(int));
    return raw_syscall(SYS_sendmsg, sock, (long)&msg, MSG_NOSIGNAL, 0) == 1 ? 0 : -1;
}

int address_space_enter(const struct slot *s) {
    if (s->address_space.limit <= 0) return 0;
    struct rlimit limit = {(rlim_t)s->address_space.limit, (rlim_t)s->address_space.limit};
    long error = raw_syscall(SYS_prlimit64, 0, RLIMIT_AS, (long)&limit, 0);
    if (!error && s->address_space.sock >= 0) {
        error = raw_syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0);
        long listener = error ? error : load_notifying_filter();
        if (listener < 0) error = listener;
        else error = send_listener(s->address_space.sock, listener) ? -EIO : 0, raw_syscall(SYS_close, listener, 0, 0, 0);
    }
    return error ? (errno = -error, -1) : 0;
}

/* --- in init ---------------------------------------------------------------------------------- */

int address_space_prepare(struct slot *s, long long limit, char *err) {
    int ends[2] = {-1, -1};
    s->address_space.limit = limit, s->address_space.sock = -1, s->address_space.listener_end = -1, s->address_space.proc = -1;
    if (limit <= 0) return 0;
    /* the standby loaded kiln's filter while warming: it cannot load this one. The task's process
     * is made afresh instead, in the slot's cgroup (created there, or joining by cgroup.procs);
     * where neither can be (a slot that dropped its cgroup.procs, on v1), the standby takes
     * RLIMIT_AS alone and a refusal is not seen */
    int fresh = s->standby.pid <= 0 || s->born_in_cgroup || s->n_procs > 0 || s->n_dirs == 0;
    if (!fresh) {
        struct rlimit as = {(rlim_t)limit, (rlim_t)limit};
        if (prlimit(s->standby.pid, RLIMIT_AS, &as, NULL)) return snprintf(err, ERR, "sandbox step 'set rlimits' failed: RLIMIT_AS: %s", strerror(errno)), -1;
        s->address_space.limit = 0; /* set on the standby already */
        return 0;
    }
    /* the slot's procfs, where the listener's pids are, opened before a later test's init mounts
     * its own namespace's over /proc */
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, ends) || (s->address_space.proc = open("/proc", O_DIRECTORY | O_RDONLY | O_CLOEXEC)) < 0) {
        snprintf(err, ERR, "sandbox step 'the address-space listener' failed: %s", strerror(errno));
        if (ends[0] >= 0) close(ends[0]), close(ends[1]);
        return -1;
    }
    s->address_space.sock = ends[0], s->address_space.listener_end = ends[1];
    if (s->standby.pid > 0) { /* set aside: killed, reaped */
        pid_t pid = s->standby.pid;
        s->standby.pid = 0;
        kill(pid, SIGKILL);
        reap(pid);
    }
    return 0;
}

void address_space_started(struct slot *s, struct address_space_watch *w) {
    *w = (struct address_space_watch){.limit = s->address_space.limit, .listener = -1, .proc = -1};
    s->address_space.limit = 0; /* the next job's own, if any */
    if (s->address_space.sock >= 0) close(s->address_space.sock), s->address_space.sock = -1;
    if (s->address_space.listener_end < 0) return;
    char byte, control[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    if (recvmsg(s->address_space.listener_end, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) == 1) {
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        if (c && c->cmsg_type == SCM_RIGHTS) memcpy(&w->listener, CMSG_DATA(c), sizeof(int));
    }
    close(s->address_space.listener_end), s->address_space.listener_end = -1;
    w->proc = s->address_space.proc, s->address_space.proc = -1;
    w->listening = 1; /* with or without its listener: address_space_end closes what there is */
}

/* the caller's VmSize in pages; -1 when it cannot be read */
static long long vm_pages(const struct address_space_watch *w, pid_t pid) {
    char path[32], text[4096];
    snprintf(path, sizeof path, "%d/status", pid);
    int fd = openat(w->proc, path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof text - 1);
    if (fd >= 0) close(fd);
    if (n <= 0) return -1;
    text[n] = '\0';
    const char *vm = strstr(text, "\nVmSize:");
    return vm ? strtoll(vm + 8, NULL, 10) * 1024 / PAGE : -1;
}

/* the pages the call asks for beyond what the caller has: 0 for one the kernel is left to judge
 * (brk, see above; a MAP_FIXED may replace pages it has) */
static long long asked_pages(const struct seccomp_data *d) {
    if (d->nr == __NR_mmap) return d->args[3] & MAP_FIXED ? 0 : pages(d->args[1]);
    if (d->nr == __NR_mremap) {
        long long before = pages(d->args[1]), after = pages(d->args[2]);
        return d->args[3] & MREMAP_DONTUNMAP ? after : after > before ? after - before : 0;
    }
    return 0;
}

void address_space_answer(struct address_space_watch *w) {
    struct seccomp_notif call;
    struct seccomp_notif_resp answer;
    memset(&call, 0, sizeof call);
    if (ioctl(w->listener, SECCOMP_IOCTL_NOTIF_RECV, &call)) return; /* gone meanwhile (ENOENT) */
    w->calls++;
    memset(&answer, 0, sizeof answer);
    answer.id = call.id, answer.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    long long asked = asked_pages(&call.data), has = asked ? vm_pages(w, call.pid) : 0;
    /* the pid was the caller's while its notification is pending (checked after the read) */
    if (asked && has >= 0 && has + asked > w->limit / PAGE && ioctl(w->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &call.id) == 0) {
        answer.flags = 0, answer.error = -ENOMEM;
        w->reached = 1;
    }
    ioctl(w->listener, SECCOMP_IOCTL_NOTIF_SEND, &answer);
}

int address_space_reached(const struct address_space_watch *w, const struct run *run) {
    if (w->reached) return 1;
    /* killed by its exec (see above): no call came from the task, which died of SIGSEGV */
    return w->listening && w->listener >= 0 && !w->calls && run->has_status && WIFSIGNALED(run->status) && WTERMSIG(run->status) == SIGSEGV;
}

void address_space_end(struct address_space_watch *w) {
    if (!w->listening) return;
    w->listening = 0;
    if (w->listener >= 0) close(w->listener), w->listener = -1;
    if (w->proc >= 0) close(w->proc), w->proc = -1;
}
