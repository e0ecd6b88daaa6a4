/* kiln-init's template mode (KILN_TEMPLATE_OF): a language's template (template.c) is its
 * `template` command, started in a private copy of the index's root image with the language's
 * workspace mounted, where the test command would start, but as root with every capability (it clones
 * the slots, and its forks enter them). Descriptor 3: the zygote's socket; 4: the template
 * module. It never sees a request. */
#include "kiln.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void fail(struct slot *s, const char *error) {
    send_error(s->sock, "failed", error);
    _exit(0);
}

void exec_template(struct slot *s, int root_image, const char *slug, int module) {
    char err[ERR], *argv[COMMAND_MAX], *envp[COMMAND_MAX];
    arm_death_signal(s);
    setsid();
    long workload_rec = find_workload_rec(&s->recipe, slug);
    if (workload_rec < 0 || root_image < 0) fail(s, "a template needs its index's root image and a language the recipe has");
    struct span w = workload_span(&s->recipe, workload_rec);
    if (build_root(s, root_image, err) == -2 || mount_workspace(s, w, NULL, err)) fail(s, err);
    int null = open("/dev/null", O_RDWR);
    if (!command_of(s, w, K_W_TEMPLATE_ARGV, argv, envp) || !s->recipe.cwd || chdir(s->recipe.cwd) || null < 0 || dup2(null, 0) < 0 ||
        dup2(null, 1) < 0 || dup2(s->sock, 3) < 0 || dup2(module, 4) < 0)
        fail(s, "cannot lay out the template command");
    s->sock = 3;
    syscall(SYS_close_range, 5, ~0U, 0);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
    execve(argv[0], argv, envp);
    snprintf(err, ERR, "cannot exec the template command %s: %s", argv[0], strerror(errno));
    fail(s, err);
}
