/* What a task pays for its seccomp filter: the load (the kernel checks the program, JITs it and
 * runs it for every syscall number to prepare its action cache) and a syscall the filter decides
 * (one it cannot cache: an argument check, or a refusal).
 *
 *   seccomp_load ROUNDS CALLS FILTER...   (each FILTER a file of struct sock_filter; "-" = allow-all)
 *
 * Each round forks one child per filter, in an order rotated round by round; the child sets
 * no_new_privs, loads the filter (timed), then times CALLS calls each of prlimit64(0, NOFILE, NULL,
 * &old) (checked by argument), io_uring_setup(0, NULL) (refused with EPERM) and getppid (allowed,
 * cached). Prints per filter: instructions, then the load's and each call's median, p10 and p90. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXF 8
#define NFIG 4 /* load us, prlimit64 ns, io_uring_setup ns, getppid ns */

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void child(struct sock_fprog *prog, int calls, int out) {
    double fig[NFIG];
    struct rlimit old;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) _exit(2);
    double t0 = now_ns();
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog)) _exit(3);
    fig[0] = (now_ns() - t0) / 1e3;
    t0 = now_ns();
    for (int i = 0; i < calls; i++) syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &old);
    fig[1] = (now_ns() - t0) / calls;
    t0 = now_ns();
    for (int i = 0; i < calls; i++) syscall(SYS_io_uring_setup, 0, NULL);
    fig[2] = (now_ns() - t0) / calls;
    t0 = now_ns();
    for (int i = 0; i < calls; i++) syscall(SYS_getppid);
    fig[3] = (now_ns() - t0) / calls;
    _exit(write(out, fig, sizeof fig) == sizeof fig ? 0 : 4);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc - 3 > MAXF) return fprintf(stderr, "usage: %s ROUNDS CALLS FILTER...\n", argv[0]), 2;
    int rounds = atoi(argv[1]), calls = atoi(argv[2]), nf = argc - 3;
    static struct sock_filter allow_all[1] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog progs[MAXF];
    double *figs[MAXF][NFIG];
    for (int f = 0; f < nf; f++) {
        if (strcmp(argv[3 + f], "-") == 0) {
            progs[f] = (struct sock_fprog){1, allow_all};
        } else {
            FILE *in = fopen(argv[3 + f], "rb");
            static char buf[MAXF][4096 * 8];
            size_t n = in ? fread(buf[f], 1, sizeof buf[f], in) : 0;
            if (!in || n == 0 || n % 8) return fprintf(stderr, "%s: not a filter\n", argv[3 + f]), 2;
            fclose(in);
            progs[f] = (struct sock_fprog){n / 8, (struct sock_filter *)buf[f]};
        }
        for (int k = 0; k < NFIG; k++) figs[f][k] = calloc(rounds, sizeof(double));
    }
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < nf; j++) {
            int f = (r + j) % nf, fds[2];
            double fig[NFIG];
            if (pipe(fds)) return perror("pipe"), 1;
            pid_t pid = fork();
            if (pid == 0) child(&progs[f], calls, fds[1]);
            close(fds[1]);
            int status;
            ssize_t got = read(fds[0], fig, sizeof fig);
            close(fds[0]);
            waitpid(pid, &status, 0);
            if (got != sizeof fig || status != 0) return fprintf(stderr, "filter %s: child failed (%#x)\n", argv[3 + f], status), 1;
            for (int k = 0; k < NFIG; k++) figs[f][k][r] = fig[k];
        }
    for (int f = 0; f < nf; f++) {
        printf("%s %u", argv[3 + f], progs[f].len);
        for (int k = 0; k < NFIG; k++) {
            qsort(figs[f][k], rounds, sizeof(double), cmp);
            printf(" %.2f %.2f %.2f", figs[f][k][rounds / 2], figs[f][k][rounds / 10], figs[f][k][rounds * 9 / 10]);
        }
        printf("\n");
    }
    return 0;
}
