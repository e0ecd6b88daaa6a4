/* A prestarted slot: warmed for one language, its prestart command spawned while the slot warms
 * and waiting for its go (or, for a language with a template, the task the template forked,
 * handed the slot: the template hand-off); released at its request, or found gone. */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORKED_ENTER_TIMEOUT_MS 10000

/* the prestart command's descriptors 0-3 (/dev/null, its stdout and stderr pipes, the read end
 * of its go pipe) into task[], init's other ends into s->prestarted; all the task's own */
static int prestart_ends(struct slot *s, int task[4], char *err) {
    int go[2], out[2], errp[2], null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    make_as_task(s, 1);
    int failed = null < 0 || pipe2(go, O_CLOEXEC) || output_pipe(out) || output_pipe(errp);
    make_as_task(s, 0);
    if (failed) return snprintf(err, ERR, "sandbox step 'start the prestart command' failed: pipes: %s", strerror(errno)), -1;
    task[0] = null, task[1] = out[1], task[2] = errp[1], task[3] = go[0];
    s->prestarted.go = go[1], s->prestarted.out = out[0], s->prestarted.err = errp[0];
    return 0;
}

/* its language's workspace and limits, the prestart command spawned (it takes the slot's user
 * and filter itself, and waits for its go), then init takes the filter for good: what is left of
 * its work, the request's files, supervision, the result, needs neither a mount nor more than
 * root's file access */
int start_prestarted(struct slot *s, struct span w, char *err) {
    int task[4];
    if (mount_workspace(s, w, NULL, err) || apply_cgroup_limits(s, w, K_W_PRESTART_LIMIT, err) || take_limits(s, w, s->recipe.timeout_max_ms, 0, err) ||
        prestart_ends(s, task, err) || spawn_task(s, w, K_W_PRESTART_ARGV, NULL, 0, task, 4, &s->prestarted.pid, &s->prestarted.shell, err) || take_filter(s, err))
        return -1;
    for (int i = 0; i < 4; i++) close(task[i]);
    return 0;
}

static int send_fds(int sock, const char *text, const int *fds, int n) {
    char control[CMSG_SPACE(sizeof(int) * (6 + MAX_FDS))] = {0};
    struct iovec iov = {(void *)text, strlen(text)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* A slot cloned by its language's template (template.c): the prestart command is the task the
 * template forked, init's first child, still root and outside the slot's network and mount
 * namespaces. Init finishes the slot as for its own spawn, hands the task what it needs to
 * enter it (both namespaces, its descriptors 0-3, the slot's cgroup.procs) and waits for it to
 * have entered (the task took its own rlimits: template.c); then init takes its cwd and filter
 * as in start_prestarted. */
int start_forked(struct slot *s, struct span w, int task_sock, pid_t task, char *err) {
    int fds[6 + MAX_FDS], n = 6;
    if (mount_workspace(s, w, NULL, err) || apply_cgroup_limits(s, w, K_W_PRESTART_LIMIT, err) || prestart_ends(s, fds + 2, err)) return -1;
    if ((fds[0] = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC)) < 0 || (fds[1] = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
        return snprintf(err, ERR, "sandbox step 'hand the forked task its slot' failed: %s", strerror(errno)), -1;
    for (int i = 0; i < s->n_procs; i++) fds[n++] = s->cg_procs[i];
    char said[ERR] = "";
    struct pollfd answer = {task_sock, POLLIN, 0};
    ssize_t got = -1;
    if (send_fds(task_sock, "enter", fds, n) == 0 && poll(&answer, 1, FORKED_ENTER_TIMEOUT_MS) == 1)
        got = recv(task_sock, said, sizeof said - 1, 0);
    for (int i = 0; i < 6; i++) close(fds[i]);
    drop_cgroup_procs(s);
    close(task_sock);
    if (got != 2 || memcmp(said, "ok", 2)) {
        said[got > 0 ? got : 0] = '\0';
        return snprintf(err, ERR, "sandbox step 'the forked task enters its slot' failed: %s", got > 0 ? said : "no answer"), -1;
    }
    s->prestarted.pid = task;
    return take_limits(s, w, s->recipe.timeout_max_ms, 0, err) || take_filter(s, err) ? -1 : 0;
}

/* A prestart command found gone when its request comes (a stale build that does not wait, a
 * crash at start-up) must not answer for the test command: the front runs the request again
 * in a plain slot and stops prestarting the language. */
int prestart_gone(struct slot *s) {
    int status;
    if (waitpid(s->prestarted.pid, &status, WNOHANG) == 0) return 0;
    char said[4096] = "", text[ERR];
    size_t n = 0;
    for (int i = 0; i < 2; i++) {
        ssize_t got = read(i ? s->prestarted.out : s->prestarted.err, said + n, 2048 - (n > 2048 ? 2048 : n) - 1);
        if (got > 0) n += got;
    }
    said[n] = '\0';
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : 0;
    snprintf(text, sizeof text, "the prestart command exited (%d) before its request: %.400s", code, said);
    send_error(s->sock, "prestart_failed", text);
    return 1;
}

/* its go: the prestarted task runs on from where it waited, its run supervised from here */
int release_prestarted(struct slot *s, struct run *run, char *err) {
    if (write(s->prestarted.go, "g", 1) != 1) return snprintf(err, ERR, "sandbox step 'release the prestarted task' failed: %s", strerror(errno)), -1;
    close(s->prestarted.go);
    *run = (struct run){.pid = s->prestarted.pid, .out_fd = s->prestarted.out, .err_fd = s->prestarted.err, .forward_fd = -1, .shell = s->prestarted.shell, .report_fd = -1};
    return 0;
}
