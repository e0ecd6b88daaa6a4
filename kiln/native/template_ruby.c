/* `kiln_template_ruby.so`, Ruby's binding of the template (template.c): a plain shared library
 * that langs/ruby/check/prestart.rb --template loads with Fiddle (Ruby's stdlib; no ruby-dev
 * headers needed) and calls holding the GVL. kiln_template_serve(3) -> 1 in each forked task, 0
 * when kiln is gone, -1 when this ruby's fork steps cannot be found; kiln_template_fork_alike()
 * -> a child made as a task is (its pid; 0 in the child), for the template to see that a fork of
 * this ruby works before it serves any. libruby's symbols are resolved when ruby loads it.
 *
 * What a fork of ruby needs is what Ruby's own fork (process.c rb_fork_ruby) does around it: its
 * timer (a POSIX timer that wakes blocked threads) stopped in the parent before the fork and
 * started again after it in both, which in the child also makes its signal descriptors (two
 * eventfds a signal handler writes to) its own; and rb_thread_atfork in the child (its thread
 * list and GVL, and a fresh seed for Random). Without them a forked ruby crashes ([BUG]
 * timer_posix was not dead) or misses its signals. The timer's three functions are not exported;
 * rb_proc_exec is, and for an empty command it is exactly stop, reset, start (proc_exec_sh finds
 * nothing to run): their addresses are read from its calls. Its code is checked byte for byte
 * against the form Ruby 3.1 compiles it to, so another build is refused (the harness then says
 * so and kiln spawns the prestart command instead), never guessed. The template's descriptors are
 * replaced in the task (reserve_descriptors): ruby closes its old eventfds by number as it starts
 * its timer, and a closed number would be a [BUG]. */
#define _GNU_SOURCE
#include "template.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* libruby's own (ruby/internal/intern/thread.h, process.h) */
void rb_thread_atfork(void);
int rb_proc_exec(const char *command);

static void (*stop_timer)(void), (*reset_timer)(void), (*start_timer)(void);

/* rb_proc_exec as Debian's Ruby 3.1 (gcc, x86-64) compiles it: push %rbx; mov %rdi,%rbx;
 * call stop; mov %rbx,%rdi; xor %esi,%esi; call proc_exec_sh; mov %eax,%ebx; call reset;
 * call start. 0xe8 bytes are calls (their rel32 after each), the rest must match. */
static const unsigned char PROC_EXEC[] = {
    0x53, 0x48, 0x89, 0xfb, 0xe8, 0, 0, 0, 0, 0x48, 0x89, 0xdf, 0x31, 0xf6, 0xe8, 0, 0, 0, 0,
    0x89, 0xc3, 0xe8, 0, 0, 0, 0, 0xe8, 0, 0, 0, 0,
};

/* the function a call at `call` calls, or NULL when that is not in the caller's own library */
static void *call_target(const unsigned char *call) {
    int32_t offset;
    memcpy(&offset, call + 1, sizeof offset);
    const unsigned char *target = call + 5 + offset;
    Dl_info caller, callee;
    if (!dladdr(call, &caller) || !dladdr(target, &callee) || caller.dli_fbase != callee.dli_fbase) return NULL;
    return (void *)target;
}

static int find_timer(void) {
#if defined(__x86_64__)
    const unsigned char *code = (const unsigned char *)rb_proc_exec;
    for (size_t i = 0; i < sizeof PROC_EXEC;) {
        if (code[i] != PROC_EXEC[i]) return -1;
        i += PROC_EXEC[i] == 0xe8 ? 5 : 1;
    }
    void *stop = call_target(code + 4), *reset = call_target(code + 21), *start = call_target(code + 26);
    if (!stop || !reset || !start) return -1;
    stop_timer = (void (*)(void))stop, reset_timer = (void (*)(void))reset, start_timer = (void (*)(void))start;
    return 0;
#else
    return -1;
#endif
}

static void restart_timer(void) {
    reset_timer();
    start_timer();
}

static void forked_child(void) {
    restart_timer();
    rb_thread_atfork();
}

static void nothing(void) {}

static const struct template_hooks ruby = {
    .before_fork = nothing, /* stop_timer, once: see kiln_template_serve */
    .after_fork_parent = nothing,
    .after_fork_child = forked_child,
    .entered = nothing,
    .populate = 1,
    .reserve_descriptors = 1,
};

/* The template's timer stays stopped while it serves: it runs no Ruby code from then on (serve
 * blocks in C holding the GVL), and each task starts its own. */
EXPORT int kiln_template_serve(int control) {
    if (!stop_timer && find_timer()) return -1;
    stop_timer();
    int forked = template_serve(control, &ruby);
    if (!forked) restart_timer();
    return forked;
}

EXPORT int kiln_template_fork_alike(void) {
    if (!stop_timer && find_timer()) return -1;
    stop_timer();
    pid_t pid = template_fork_alike(&ruby);
    if (pid != 0) restart_timer();
    return pid;
}
