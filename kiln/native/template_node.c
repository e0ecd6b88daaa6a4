/* `kiln_template.node`, the Node-API binding of the template (template.c): serve(3) -> in each
 * forked task a fresh nonzero 31-bit seed for Math.random, false when kiln is gone; pid() -> the
 * caller's pid; pipe() -> a pipe's two ends; forkAlike() and waitFor(pid): a child made as a
 * task is, for the template to see that a fork of this node ends cleanly before it serves any
 * (langs/js/check/harness.js --template). Node-API is a stable C ABI: its few
 * functions are declared here, so no node headers are needed to build it.
 *
 * What a fork of node needs, beyond what a fork of any process gets:
 * - V8 marks its heap's pages MADV_DONTFORK: a child would find none of its objects. They are
 *   made inheritable again when the template starts serving (it runs no JavaScript from then
 *   on: no page is mapped afresh) and before the self-check's fork.
 * - libuv's loop holds an epoll instance, an eventfd and a signal pipe, which the task would
 *   share with the template and every other task: uv_loop_fork makes them its own.
 * - V8's and node's worker threads are not forked. The template runs node --single-threaded,
 *   so that V8 never hands work (compiles, GC) to a thread the task does not have. As it exits,
 *   node joins those threads, which glibc cannot do for threads of another process (it
 *   crashes), and destroys the conditions they wait on and their mutexes, which glibc does only
 *   once the waiters left (never). The task's pthread_create, pthread_join,
 *   pthread_cond_destroy and pthread_mutex_destroy are redirected (their GOT entries, in node
 *   and the libraries it loaded) to wrappers that know the threads the task started: joining
 *   another returns at once, as for a thread that ended; a condition or mutex is destroyed
 *   without waiting or refusing. Node's exit also runs its tracing agent's loop and wakes its
 *   timer thread through descriptors of the template's: the task has its own of the same type
 *   at those numbers (template.c, reserve_descriptors).
 * - Math.random seeds itself lazily from the isolate's generator, the same in every task: the
 *   harness seeds it with the number serve() returns; and process.pid, which node took once at
 *   start, is set again from pid(). */
#define _GNU_SOURCE
#include "template.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;
typedef struct napi_callback_info__ *napi_callback_info;
typedef int napi_status;
typedef napi_value (*napi_callback)(napi_env env, napi_callback_info info);
napi_status napi_create_function(napi_env env, const char *name, size_t length, napi_callback cb, void *data, napi_value *result);
napi_status napi_get_cb_info(napi_env env, napi_callback_info info, size_t *argc, napi_value *argv, napi_value *this_arg, void **data);
napi_status napi_get_value_int32(napi_env env, napi_value value, int32_t *result);
napi_status napi_create_uint32(napi_env env, uint32_t value, napi_value *result);
napi_status napi_create_int32(napi_env env, int32_t value, napi_value *result);
napi_status napi_create_array_with_length(napi_env env, size_t length, napi_value *result);
napi_status napi_set_element(napi_env env, napi_value object, uint32_t index, napi_value value);
napi_status napi_throw_error(napi_env env, const char *code, const char *msg);
napi_status napi_get_boolean(napi_env env, bool value, napi_value *result);
napi_status napi_set_named_property(napi_env env, napi_value object, const char *name, napi_value value);
napi_status napi_throw_type_error(napi_env env, const char *code, const char *msg);
typedef struct uv_loop_s uv_loop_t;
uv_loop_t *uv_default_loop(void);
int uv_loop_fork(uv_loop_t *loop);

#define NAPI_AUTO_LENGTH SIZE_MAX
#define NAPI_VERSION 8
#define EXPORT __attribute__((visibility("default")))

static void inheritable_heap(void) {
    FILE *maps = fopen("/proc/self/maps", "re");
    char line[512];
    int at_start = 1; /* of a line: a long path is read in pieces */
    while (maps && fgets(line, sizeof line, maps)) {
        unsigned long from, to;
        if (at_start && sscanf(line, "%lx-%lx", &from, &to) == 2) madvise((void *)from, to - from, MADV_DOFORK);
        at_start = strchr(line, '\n') != NULL;
    }
    if (maps) fclose(maps);
}

/* --- the task's threads ------------------------------------------------------------------ */

/* Threads the task starts get their stacks from a region of its own, so that a thread's handle
 * (its descriptor, at the top of its stack) is never one of the template's: glibc keeps the
 * template threads' stacks in its cache after the fork and would hand them out again. */
#define MAX_OWN_THREADS 4096
#define MAX_SPARE_STACKS 64
#define STACK_REGION (1UL << 30) /* address space, reserved on the first thread: no memory */

struct own_thread {
    pthread_t thread;
    char *stack;
    size_t size;
};

static int (*glibc_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static int (*glibc_join)(pthread_t, void **);
static int (*glibc_cond_destroy)(pthread_cond_t *), (*glibc_mutex_destroy)(pthread_mutex_t *); /* unused */
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static struct own_thread own[MAX_OWN_THREADS], spare[MAX_SPARE_STACKS];
static int owned, spares;
static char *region, *region_next;

/* under own_lock */
static char *stack_for(size_t size) {
    for (int i = 0; i < spares; i++)
        if (spare[i].size == size) {
            char *stack = spare[i].stack;
            spare[i] = spare[--spares];
            return stack;
        }
    long page = sysconf(_SC_PAGESIZE);
    if (!region) {
        region = mmap(NULL, STACK_REGION, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (region == MAP_FAILED) return region = NULL;
        region_next = region;
    }
    char *stack = region_next + page; /* below it, a page left inaccessible: its guard */
    if (stack + size > region + STACK_REGION || mprotect(stack, size, PROT_READ | PROT_WRITE)) return NULL;
    region_next = stack + size;
    return stack;
}

static int task_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
    size_t size = 0;
    int detached = PTHREAD_CREATE_JOINABLE;
    pthread_attr_t mine;
    if (attr) {
        pthread_attr_getstacksize(attr, &size);
        pthread_attr_getdetachstate(attr, &detached);
    } else if (!pthread_getattr_default_np(&mine)) {
        pthread_attr_getstacksize(&mine, &size);
        pthread_attr_destroy(&mine);
    }
    long page = sysconf(_SC_PAGESIZE);
    size = (size < (1UL << 16) ? (1UL << 16) : size + page - 1) & ~(page - 1);
    pthread_mutex_lock(&own_lock);
    char *stack = stack_for(size);
    pthread_mutex_unlock(&own_lock);
    int error;
    if (stack && !pthread_attr_init(&mine)) {
        pthread_attr_setdetachstate(&mine, detached);
        pthread_attr_setstack(&mine, stack, size);
        error = glibc_create(thread, &mine, start, arg);
        pthread_attr_destroy(&mine);
    } else {
        error = glibc_create(thread, attr, start, arg); /* no room left: glibc's (this stays joinable) */
    }
    pthread_mutex_lock(&own_lock);
    if (error && stack && spares < MAX_SPARE_STACKS) spare[spares++] = (struct own_thread){0, stack, size};
    if (!error && detached == PTHREAD_CREATE_JOINABLE && owned < MAX_OWN_THREADS) own[owned++] = (struct own_thread){*thread, stack, size};
    pthread_mutex_unlock(&own_lock);
    return error;
}

static int task_join(pthread_t thread, void **result) {
    struct own_thread found = {0, NULL, 0};
    int mine = 0;
    pthread_mutex_lock(&own_lock);
    for (int i = 0; i < owned && !mine; i++)
        if (pthread_equal(own[i].thread, thread)) found = own[i], own[i] = own[--owned], mine = 1;
    pthread_mutex_unlock(&own_lock);
    if (!mine) {
        if (result) *result = NULL; /* the template's: it never ran in this process */
        return 0;
    }
    int error = glibc_join(thread, result);
    pthread_mutex_lock(&own_lock);
    if (!error && found.stack && spares < MAX_SPARE_STACKS) spare[spares++] = found;
    pthread_mutex_unlock(&own_lock);
    return error;
}

/* glibc's waits for a condition's waiters to leave, and refuses (EBUSY, on which libuv aborts)
 * a mutex such a waiter still counts as a user: the template's threads that waited at the fork
 * never will leave. Destroying either frees nothing in glibc: both become no-ops. */
static int task_cond_destroy(pthread_cond_t *cond) {
    return 0;
}

static int task_mutex_destroy(pthread_mutex_t *mutex) {
    return 0;
}

struct redirect {
    const char *name;
    void *to, **was;
};

static uintptr_t address(uintptr_t base, uintptr_t value) {
    return value < base ? base + value : value; /* ld.so relocated the dynamic section, or not */
}

/* Points the GOT entries of `r` in one loaded object at their wrappers, write-protected
 * again where the object's RELRO covers them. */
static void redirect_in(struct dl_phdr_info *info, const struct redirect *r, int count) {
    ElfW(Dyn) *dyn = NULL;
    uintptr_t relro = 0, relro_end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO)
            relro = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr, relro_end = relro + info->dlpi_phdr[i].p_memsz;
    }
    ElfW(Sym) *symbols = NULL;
    const char *names = NULL;
    ElfW(Rela) *tables[2] = {NULL, NULL};
    size_t sizes[2] = {0, 0};
    for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t at = address(info->dlpi_addr, dyn->d_un.d_ptr);
        switch (dyn->d_tag) {
        case DT_SYMTAB: symbols = (void *)at; break;
        case DT_STRTAB: names = (void *)at; break;
        case DT_JMPREL: tables[0] = (void *)at; break;
        case DT_PLTRELSZ: sizes[0] = dyn->d_un.d_val; break;
        case DT_RELA: tables[1] = (void *)at; break;
        case DT_RELASZ: sizes[1] = dyn->d_un.d_val; break;
        }
    }
    long page = sysconf(_SC_PAGESIZE);
    for (int t = 0; t < 2 && symbols && names; t++)
        for (size_t i = 0; tables[t] && i < sizes[t] / sizeof(ElfW(Rela)); i++) {
            ElfW(Sym) *symbol = &symbols[ELF64_R_SYM(tables[t][i].r_info)];
            for (int k = 0; k < count; k++) {
                if (!symbol->st_name || strcmp(names + symbol->st_name, r[k].name)) continue;
                void **slot = (void **)(info->dlpi_addr + tables[t][i].r_offset);
                void *start = (void *)((uintptr_t)slot & ~(page - 1));
                int guarded = (uintptr_t)slot >= relro && (uintptr_t)slot < relro_end;
                if (guarded && mprotect(start, page, PROT_READ | PROT_WRITE)) continue;
                if (*slot != r[k].to) *r[k].was = *slot;
                *slot = r[k].to;
                if (guarded) mprotect(start, page, PROT_READ);
            }
        }
}

static int redirect_each(struct dl_phdr_info *info, size_t size, void *data) {
    static const struct redirect threads[] = {
        {"pthread_create", (void *)task_create, (void **)&glibc_create},
        {"pthread_join", (void *)task_join, (void **)&glibc_join},
        {"pthread_cond_destroy", (void *)task_cond_destroy, (void **)&glibc_cond_destroy},
        {"pthread_mutex_destroy", (void *)task_mutex_destroy, (void **)&glibc_mutex_destroy},
    };
    Dl_info self;
    const char *name = info->dlpi_name;
    if (name && (strstr(name, "/libc.so") || strstr(name, "linux-vdso") || strstr(name, "ld-linux"))) return 0;
    if (dladdr((void *)task_join, &self) && info->dlpi_addr == (uintptr_t)self.dli_fbase) return 0;
    redirect_in(info, threads, sizeof threads / sizeof *threads);
    return 0;
}

static void own_threads(void) {
    dl_iterate_phdr(redirect_each, NULL);
}

static void nothing(void) {}

static void own_loop(void) {
    uv_loop_fork(uv_default_loop());
}

static const struct template_hooks node = {
    .before_fork = nothing,
    .after_fork_parent = nothing,
    .after_fork_child = own_threads,
    .entered = own_loop, /* its descriptors land above 0-3, which are laid out by then */
    /* not copied ahead: a run writes ~half of node's ~1,400 written pages, and copying all of
     * them while the slot warms cost more CPU than it saved (bench/cpu.py js-ab prestarted: 20.7
     * ms a run against 16.2, for ~1 ms of p50); the warm slot shares them with the template */
    .populate = 0,
    .reserve_descriptors = 1,
};

static napi_value serve(napi_env env, napi_callback_info info) {
    size_t argc = 1;
    napi_value arg, result;
    int32_t control;
    if (napi_get_cb_info(env, info, &argc, &arg, NULL, NULL) || argc != 1 || napi_get_value_int32(env, arg, &control)) {
        napi_throw_type_error(env, NULL, "serve(descriptor): a descriptor number");
        return NULL;
    }
    inheritable_heap();
    if (!template_serve(control, &node)) {
        napi_get_boolean(env, false, &result);
        return result;
    }
    uint32_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed) seed = (uint32_t)getpid() * 2654435761u;
    seed &= 0x7fffffff;
    seed |= !seed;
    napi_create_uint32(env, seed, &result);
    return result;
}

/* pid() -> this process's pid: node took process.pid once, at the template's start */
static napi_value pid(napi_env env, napi_callback_info info) {
    napi_value result;
    napi_create_uint32(env, (uint32_t)getpid(), &result);
    return result;
}

/* forkAlike() -> a child made as a forked task is, in no slot: its pid, 0 in the child */
static napi_value fork_alike(napi_env env, napi_callback_info info) {
    napi_value result;
    inheritable_heap();
    pid_t pid = template_fork_alike(&node);
    if (pid < 0) {
        napi_throw_error(env, NULL, "fork() failed");
        return NULL;
    }
    napi_create_int32(env, pid, &result);
    return result;
}

/* waitFor(pid) -> its exit status or 128 + its signal (killed if not done within 5 s); -1 if it
 * is no child */
static napi_value wait_for(napi_env env, napi_callback_info info) {
    size_t argc = 1;
    napi_value arg, result;
    int32_t pid, status, code = -1;
    if (napi_get_cb_info(env, info, &argc, &arg, NULL, NULL) || argc != 1 || napi_get_value_int32(env, arg, &pid) || pid <= 0) {
        napi_throw_type_error(env, NULL, "waitFor(pid): a child's pid");
        return NULL;
    }
    for (int waited_ms = 0;; waited_ms++) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (done != 0) break; /* ended, or no child of ours */
        if (waited_ms == 5000) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            code = 128 + SIGKILL;
            break;
        }
        usleep(1000);
    }
    napi_create_int32(env, code, &result);
    return result;
}

/* pipe() -> [read end, write end], close-on-exec: what the template rehearses a run's stdout on */
static napi_value pipe_pair(napi_env env, napi_callback_info info) {
    int ends[2];
    napi_value result, end;
    if (pipe2(ends, O_CLOEXEC)) {
        napi_throw_error(env, NULL, "pipe() failed");
        return NULL;
    }
    napi_create_array_with_length(env, 2, &result);
    for (uint32_t i = 0; i < 2; i++) {
        napi_create_int32(env, ends[i], &end);
        napi_set_element(env, result, i, end);
    }
    return result;
}

EXPORT int32_t node_api_module_get_api_version_v1(void) {
    return NAPI_VERSION;
}

EXPORT napi_value napi_register_module_v1(napi_env env, napi_value exports) {
    static const struct {
        const char *name;
        napi_callback function;
    } functions[] = {{"serve", serve}, {"pid", pid}, {"pipe", pipe_pair}, {"forkAlike", fork_alike}, {"waitFor", wait_for}};
    for (size_t i = 0; i < sizeof functions / sizeof *functions; i++) {
        napi_value fn;
        if (napi_create_function(env, functions[i].name, NAPI_AUTO_LENGTH, functions[i].function, NULL, &fn) || napi_set_named_property(env, exports, functions[i].name, fn)) return NULL;
    }
    return exports;
}
