/* kiln-init's start: what its environment says, the descriptors it keeps, and becoming the
 * slot's init. The variables are kiln.h's START_VARIABLES (kiln/zygote/start.py writes them):
 * KILN_SOCK, KILN_ZYGOTE (a pidfd), KILN_RECIPE (a memfd), KILN_ROOT_IMAGE (the index's root
 * image, a mount namespace, once built), KILN_CG_DIRS and KILN_CG_PROCS (SlotCgroup.fd_groups),
 * KILN_LOWER_WORKSPACES and KILN_LOWER_LAYERS (the zygote's read-only clones, if the kernel takes
 * them), KILN_PRESTART (a language) for a prestarted slot, KILN_FORKED and KILN_FORKED_PID for one
 * cloned by its language's template, KILN_TEMPLATE_OF and KILN_TEMPLATE_MODULE for a template
 * (launch.c). */
#include "kiln.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int env_fd(const char *name) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : -1;
}

static int env_fds(const char *name, int *fds) {
    const char *v = getenv(name);
    int n = 0;
    while (v && *v && n < MAX_FDS) {
        fds[n++] = strtol(v, (char **)&v, 10);
        if (*v == ',') v++;
    }
    return n;
}

/* the descriptors and settings the environment names, copied out of it (it is cleared) */
void read_environment(struct slot *s, struct start *start) {
    s->sock = env_fd(START_VAR(SOCK)), s->zygote = env_fd(START_VAR(ZYGOTE));
    s->n_dirs = env_fds(START_VAR(CG_DIRS), s->cg_dirs), s->n_procs = env_fds(START_VAR(CG_PROCS), s->cg_procs);
    start->root_image = env_fd(START_VAR(ROOT_IMAGE));
    start->forked = env_fd(START_VAR(FORKED)), start->module = env_fd(START_VAR(TEMPLATE_MODULE));
    s->lower_held[0] = env_fd(START_VAR(LOWER_WORKSPACES)), s->lower_held[1] = env_fd(START_VAR(LOWER_LAYERS));
    const char *forked_pid = getenv(START_VAR(FORKED_PID)), *prestart = getenv(START_VAR(PRESTART)), *template_of = getenv(START_VAR(TEMPLATE_OF));
    start->forked_pid = forked_pid ? atoi(forked_pid) : -1;
    snprintf(start->prestart, sizeof start->prestart, "%s", prestart ? prestart : "");
    snprintf(start->template_of, sizeof start->template_of, "%s", template_of ? template_of : "");
}

/* close-on-exec: they came without it, never the task's; the recipe's memfd is mapped: closed too */
void keep_descriptors(const struct slot *s, const struct start *start) {
    int keep[3 * MAX_FDS + 6], n = 0;
    keep[n++] = s->sock, keep[n++] = s->zygote;
    for (int i = 0; i < s->n_dirs; i++) keep[n++] = s->cg_dirs[i];
    for (int i = 0; i < s->n_procs; i++) keep[n++] = s->cg_procs[i];
    const int optional[] = {start->root_image, start->forked, start->module, s->lower_held[0], s->lower_held[1]};
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++)
        if (optional[i] >= 0) keep[n++] = optional[i];
    keep_only(keep, n);
}

/* init's own process: it dies with the zygote, no exec below it gains a capability (the
 * bounding set empty), and it is a session of its own */
int become_init(struct slot *s, char *err) {
    arm_death_signal(s);
    if (empty_bounding_set()) return snprintf(err, ERR, "cannot empty the capability bounding set"), -1;
    /* a session of its own: kill(0, SIGCONT) from a task, allowed within a session whatever the
     * uid, would otherwise reach kiln's processes and the other slots */
    setsid();
    signal(SIGPIPE, SIG_IGN); /* a closed socket is an error to init, not a death */
    signal(SIGXFSZ, SIG_IGN);
    return 0;
}
