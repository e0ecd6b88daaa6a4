/* What a slot's life costs when nothing of it is Python: the floor for issue 6's rate target.
 *
 * A small parent keeps a template mount namespace (a tmpfs root with /usr bound read-only and
 * the merged-/usr links, as kiln's), then for each run: clones a child into new pid, ipc, uts
 * and cgroup namespaces (one network namespace kept, as kiln keeps one per slot index); the
 * child enters a private copy of the template, mounts its own /tmp, /proc and upper tmpfs and
 * an overlay on /sandbox, writes a file, takes uid 9999 and a one-instruction seccomp filter,
 * spawns /usr/bin/true (vfork + exec), reaps it and exits. The parent reaps the child. No
 * cgroup is made (kiln's zygote makes and removes one a slot: ~0.15 ms on v1 here).
 *
 *     gcc -O2 -o slot_floor bench/slot_floor.c && ./slot_floor 2000 <workspace dir>
 *
 * Prints the CPU a run of the parent and of its children (slots and tasks), as bench/cpu.py
 * does for kiln's zygote and slots. Run by bench/slot_floor.py.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static void die(const char *what) {
    fprintf(stderr, "slot_floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void must(int result, const char *what) {
    if (result < 0) die(what);
}

/* In a child of its own mount namespace: the read-only root every run copies. */
static int build_template(const char *staging, const char *workspace, int ready) {
    char path[512];
    must(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "make private");
    must(mount("floor", staging, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755"), "root tmpfs");
    const char *dirs[] = {"usr", "etc", "tmp", "proc", "sys", "dev", "sandbox", "ws", "upper"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(path, sizeof path, "%s/%s", staging, dirs[i]);
        must(mkdir(path, 0755), path);
    }
    const char *links[][2] = {{"usr/bin", "bin"}, {"usr/lib", "lib"}, {"usr/lib64", "lib64"}, {"usr/sbin", "sbin"}};
    for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
        snprintf(path, sizeof path, "%s/%s", staging, links[i][1]);
        must(symlink(links[i][0], path), path);
    }
    snprintf(path, sizeof path, "%s/usr", staging);
    must(mount("/usr", path, NULL, MS_BIND | MS_REC, NULL), "bind /usr");
    must(mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL), "ro /usr");
    snprintf(path, sizeof path, "%s/ws", staging);
    must(mount(workspace, path, NULL, MS_BIND, NULL), "bind the workspace");
    must(mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL), "ro workspace");
    must(chdir(staging), "chdir staging");
    must(syscall(SYS_pivot_root, ".", "."), "pivot_root");
    must(umount2(".", MNT_DETACH), "detach the old root");
    must(chdir("/"), "chdir /");
    must(mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL), "ro root");
    must(write(ready, "r", 1), "say ready");
    pause();  /* the parent keeps the namespace through /proc/<pid>/ns/mnt, then kills us */
    return 0;
}

static int run_slot(int template_fd) {
    must(setns(template_fd, CLONE_NEWNS), "setns template");
    must(unshare(CLONE_NEWNS), "unshare a copy");
    must(mount("floor", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,nr_inodes=4096,mode=1777"), "/tmp");
    must(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "subset=pid,hidepid=invisible"), "/proc");
    must(mount("floor", "/upper", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,nr_inodes=4096,mode=700"), "/upper");
    must(mkdir("/upper/u", 0755), "upper dir");
    must(mkdir("/upper/w", 0700), "work dir");
    must(chown("/upper/u", 9999, 9999), "chown upper");
    must(mount("floor", "/sandbox", "overlay", MS_NOSUID | MS_NODEV, "lowerdir=/ws,upperdir=/upper/u,workdir=/upper/w"), "overlay");
    int fd = open("/sandbox/solution.py", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    must(fd, "write the solution");
    must(write(fd, "print(1)\n", 9), "write");
    must(fchown(fd, 9999, 9999), "fchown");
    close(fd);
    must(sethostname("kiln", 4), "hostname");
    must(chdir("/sandbox"), "chdir");
    must(syscall(SYS_setgroups, 0, NULL), "setgroups");
    must(syscall(SYS_setresgid, 9999, 9999, 9999), "setresgid");
    must(syscall(SYS_setresuid, 9999, 9999, 9999), "setresuid");
    must(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs");
    struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog prog = {1, allow};
    must(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0), "seccomp");
    pid_t task;
    char *argv[] = {"/usr/bin/true", NULL};
    if (posix_spawn(&task, argv[0], NULL, NULL, argv, environ) != 0) die("spawn");
    int status;
    must(waitpid(task, &status, 0), "wait the task");
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static pid_t clone_into(int flags) {
    return (pid_t)syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
}

static double cpu_seconds(int who) {
    struct rusage usage;
    getrusage(who, &usage);
    return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: slot_floor RUNS WORKSPACE STAGING\n");
        return 2;
    }
    int runs = atoi(argv[1]);
    int ready[2];
    must(pipe(ready), "pipe");
    pid_t builder = clone_into(CLONE_NEWNS);
    must(builder, "clone the template's builder");
    if (builder == 0) return build_template(argv[3], argv[2], ready[1]);
    char path[64], byte;
    if (read(ready[0], &byte, 1) != 1) die("the template's builder failed");
    snprintf(path, sizeof path, "/proc/%d/ns/mnt", builder);
    int template_fd = open(path, O_RDONLY | O_CLOEXEC);
    must(template_fd, "open the template");
    kill(builder, SIGKILL);
    waitpid(builder, NULL, 0);
    int netns = -1;
    struct timespec start, end;
    double self_before = 0, children_before = 0;
    int failures = 0;
    for (int i = -50; i < runs; i++) {  /* 50 warm-up runs */
        if (i == 0) {
            self_before = cpu_seconds(RUSAGE_SELF);
            children_before = cpu_seconds(RUSAGE_CHILDREN);
            clock_gettime(CLOCK_MONOTONIC, &start);
        }
        int flags = CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | (netns < 0 ? CLONE_NEWNET : 0);
        pid_t slot = clone_into(flags);
        must(slot, "clone a slot");
        if (slot == 0) {
            if (netns >= 0) must(setns(netns, CLONE_NEWNET), "setns net");
            _exit(run_slot(template_fd));
        }
        if (netns < 0) {
            snprintf(path, sizeof path, "/proc/%d/ns/net", slot);
            netns = open(path, O_RDONLY | O_CLOEXEC);
        }
        int status;
        must(waitpid(slot, &status, 0), "wait a slot");
        failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double wall = (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9;
    printf("runs %d failures %d parent_cpu_ms %.4f children_cpu_ms %.4f wall_ms %.4f\n", runs, failures,
           1000 * (cpu_seconds(RUSAGE_SELF) - self_before) / runs, 1000 * (cpu_seconds(RUSAGE_CHILDREN) - children_before) / runs, 1000 * wall / runs);
    return failures != 0;
}
