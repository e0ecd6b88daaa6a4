/* kiln-init: a slot's init as a small static program (init.c has the order of its steps), and
 * the core a language's template shares with it (template.c). One header; its sections follow
 * the files, one kernel concern each. Context is passed, never global: a `struct slot`. It is
 * longer than a module should be because it is the index of ~25 small files (each section its
 * file's few declarations) and the contract's tables, which kiln-init's `contract` mode prints. */
#ifndef KILN_H
#define KILN_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>

#define ERR 512
#define MAX_FDS 16
#define MAX_PARTS 66     /* a job's files: a build's judge file and up to 64 more; a test's three parts */
#define FILE_NAME_MAX 100 /* a judge job's file name (header.c file_name) */
#define KEPT_FILES 16    /* a slot's cgroup files kept open: its figures and its peak resets (one descriptor where a file is both) */

/* --- recipe.c: what the zygote decided, as records (kiln/zygote/recipe.py writes them) ------ */

/* Record types: recipe.py's K_* (`kiln-init contract` prints them; tests/unit/test_contract.py
 * compares). X(name, code, shape): the shape names the record's arguments (RECORD_SHAPES). */
#define RECORD_TYPES(X)                                                                           \
    X(K_CONSTS, 1, CONSTS)           /* the constants, one value each in RECIPE_CONSTS' order */  \
    X(K_SECCOMP, 2, SECCOMP)         /* the task's filter */                                      \
    X(K_STAT, 3, STAT)               /* where a figure of the slot's cgroup is read */            \
    X(K_BUILD, 4, STEP_OP)           /* the index's root image */                                 \
    X(K_FINISH, 5, STEP_OP)          /* every slot's own /tmp, /proc, upper layer */              \
    X(K_WARM_LIMIT, 6, CGROUP_WRITE) /* cgroup limits written while warming */                    \
    X(K_WORKLOAD, 7, WORKLOAD)       /* a language: the records up to the next are its */         \
    X(K_W_MOUNT, 8, STEP_OP)         /* the workspace overlay, sizes */                           \
    X(K_W_DIR, 9, W_DIR)             /* a directory below /sandbox, given to the task */          \
    X(K_W_PART, 10, W_PART)          /* where a test job's part is written */                     \
    X(K_W_LIMIT, 11, CGROUP_WRITE)   /* the language's cgroup limits, where a plain slot's differ */ \
    X(K_W_ARGV, 12, ARGV)            /* the workspace's test command */                           \
    X(K_W_ENV, 13, ENV)              /* the task's environment */                                 \
    X(K_W_RLIMIT, 14, RLIMIT)                                                                     \
    X(K_W_RLIMIT_CPU, 15, CPU_TERMS)  /* RLIMIT_CPU from the run's timeout */                     \
    X(K_W_PRESTART_ARGV, 16, ARGV)   /* the workspace's prestart command */                       \
    X(K_W_PRESTART_LIMIT, 17, CGROUP_WRITE) /* a prestarted slot's limits, from fresh */          \
    X(K_W_TEMPLATE_ARGV, 18, ARGV)   /* the workspace's template command (template.c) */          \
    X(K_JOB_LIMIT, 19, JOB_LIMIT)    /* where a job's own memory or pids limit goes */            \
    X(K_W_BUILD_ARGV, 20, ARGV)      /* the workspace's build command (a judge's build job) */    \
    X(K_W_EXEC_ARGV, 21, ARGV)       /* the workspace's exec command (a judge's test job) */      \
    X(K_FRESH, 22, STEP_OP)          /* a judge test's own upper layer and /tmp */                \
    X(K_PEAK_RESET, 23, CGROUP_WRITE) /* the cgroup's memory peak back to now */                  \
    X(K_UNLIMIT, 24, CGROUP_WRITE)   /* a kept slot's limits lifted */                            \
    X(K_TEST_PROC, 25, STEP_OP)      /* a later judge test's /proc, of its own pid namespace */   \
    X(K_TEST_CG_PARENT, 26, CGROUP_WRITE) /* the slot's cgroup made the parent of its tests' (kept.c) */
#define RECORD_TYPE_ENUM(name, code, shape) name = code,
enum { RECORD_TYPES(RECORD_TYPE_ENUM) };

/* Each shape's arguments, in order (recipe.py's RECORD_ARGS, compared as data): SHAPE_x(A, R, s)
 * calls A(s, name) for one argument, R(s, name) for any number more (the contract prints
 * "name..."). C reads an argument as r->args[ARG(STAT, file)]; recipe_load refuses a record of
 * another arity, so that no reader checks nargs. */
#define RECORD_SHAPES(S) \
    S(CONSTS) S(SECCOMP) S(STAT) S(STEP_OP) S(CGROUP_WRITE) S(WORKLOAD) S(W_DIR) S(W_PART) S(ARGV) S(ENV) S(RLIMIT) S(CPU_TERMS) S(JOB_LIMIT)
#define SHAPE_CONSTS(A, R, s) R(s, consts)                           /* RECIPE_CONSTS */
#define SHAPE_SECCOMP(A, R, s) A(s, program)                         /* BPF, struct sock_filter[] */
#define SHAPE_STAT(A, R, s) A(s, what) A(s, dir_index) A(s, file) A(s, key) A(s, divisor) /* what: STATS' code */
#define SHAPE_STEP_OP(A, R, s) A(s, step) A(s, op) R(s, args)        /* op: an OPS code; args: its OP_ARGS_<op> */
#define SHAPE_CGROUP_WRITE(A, R, s) A(s, dir_index) A(s, file) A(s, value)
#define SHAPE_WORKLOAD(A, R, s) A(s, slug) A(s, has_client_harness) A(s, memory_max) A(s, pids_max)
#define SHAPE_W_DIR(A, R, s) A(s, relpath)                           /* below /sandbox */
#define SHAPE_W_PART(A, R, s) A(s, part) A(s, relpath)
#define SHAPE_ARGV(A, R, s) R(s, argv)
#define SHAPE_ENV(A, R, s) R(s, variables)                           /* KEY=VALUE */
#define SHAPE_RLIMIT(A, R, s) A(s, resource) A(s, value)
#define SHAPE_CPU_TERMS(A, R, s) A(s, seconds_per_started_second) A(s, extra)
#define SHAPE_JOB_LIMIT(A, R, s) A(s, what) A(s, dir_index) A(s, file) /* what: JOB_LIMITS' code */
#define ARG(shape, name) ARG_##shape##_##name
#define ARG_ENUM(shape, name) ARG(shape, name),
#define RECORD_SHAPE_ENUM(shape) enum { SHAPE_##shape(ARG_ENUM, ARG_ENUM, shape) };
RECORD_SHAPES(RECORD_SHAPE_ENUM)

/* What a K_STAT record reads (its `what`, by code: recipe.py's STATS) */
#define STATS(X) X(memory_peak) X(cpu) X(oom_kills) X(pids_hits) X(cpu_starved)
#define STAT_ENUM(name) STAT_##name,
enum cgroup_stat { STATS(STAT_ENUM) N_STATS };

/* A job's own limits: the job header's "limits", in this order (protocol.py's Limits), and the
 * code a K_JOB_LIMIT record's `what` says */
#define JOB_LIMITS(X) X(cpu_ms) X(memory) X(pids) X(output) X(address_space)
#define JOB_LIMIT_ENUM(name) JOB_LIMIT_##name,
enum job_limit { JOB_LIMITS(JOB_LIMIT_ENUM) N_JOB_LIMITS };

/* The K_CONSTS record's values, in this order (recipe.py's CONSTS): X(field, form), form INT (a
 * decimal number) or TEXT (a path; empty: none, NULL). A recipe with more or fewer is refused. */
#define RECIPE_CONSTS(X)                                                                                 \
    X(index, INT) X(uid, INT) X(input_max, INT) X(output_max, INT) X(timeout_max_ms, INT)               \
    X(starved_max_times, INT) X(judge_part_max, INT) X(layer_max, INT) X(cwd, TEXT) X(judge_dir, TEXT) \
    X(upper, TEXT) X(layers, TEXT) X(setgroups, INT) X(test_cgroups, TEXT)

struct arg {
    const char *p; /* NUL-terminated (the NUL is not counted in len) */
    uint32_t len;
};

struct rec {
    uint32_t type, nargs;
    struct arg *args;
};

struct recipe {
    struct rec *recs;
    size_t n;
    const char *data; /* the mapping */
    size_t size;
    /* its K_CONSTS record, read once by recipe_load; uid 0 only rootless with one id mapped
     * (kiln/rootless.py) */
    long index, uid;
    long setgroups; /* 1: the task drops its supplementary groups; 0: its user namespace forbids it */
    long long input_max, output_max, timeout_max_ms;
    long long starved_max_times; /* a deadline moves on by starved time up to this many times the timeout */
    long long judge_part_max, layer_max; /* a judge job's file or stdin; what a build may leave */
    const char *cwd;
    const char *judge_dir;  /* below /sandbox: where a build job's files go */
    const char *upper;      /* the workspace overlay's upper layer: what a build job leaves */
    const char *layers;     /* where the builds' layers are, while the root is the slot's */
    const char *test_cgroups; /* the name of a kept slot's later tests' own cgroups, before their
                                 number (the memory peak cannot be set back: kept.c); NULL: none */
};

/* a language's records: from its K_WORKLOAD up to the next */
struct span {
    size_t from, to;
};

int recipe_load(int fd, struct recipe *out, char *err, size_t errlen);
void recipe_unload(struct recipe *r);
long long arg_int(const struct arg *a);
long find_workload_rec(const struct recipe *r, const char *slug); /* its K_WORKLOAD record, or -1 */
struct span workload_span(const struct recipe *r, size_t record);

/* --- kiln-init's start: the variables of its environment ------------------------------------ */

/* The zygote writes them (kiln/zygote/start.py Start), a language's template adds the FORKED
 * pair for the slot it forks (template.c); `kiln-init contract` prints the names. START_VAR(X) is
 * "KILN_X", and fails to compile for a name not in the table. */
#define START_VARIABLES(X)                                                                        \
    X(SOCK) X(ZYGOTE) X(RECIPE) X(ROOT_IMAGE) X(CG_DIRS) X(CG_PROCS) X(LOWER_WORKSPACES) X(LOWER_LAYERS) \
    X(PRESTART) X(TEMPLATE_MODULE) X(TEMPLATE_OF) X(FORKED) X(FORKED_PID)
#define START_VARIABLE_ENUM(name) START_##name,
enum { START_VARIABLES(START_VARIABLE_ENUM) };
#define START_VAR(name) ((void)START_##name, "KILN_" #name)

/* --- start.c: kiln-init's start ----------------------------------------------------------- */

struct slot;
/* what the environment says, beyond the slot's own fields */
struct start {
    int root_image, forked, module; /* root_image: KILN_ROOT_IMAGE, the index's root image; -1 none yet */
    pid_t forked_pid;
    char prestart[64], template_of[64];
};
int env_fd(const char *name); /* the descriptor a start variable names; -1 none */
void read_environment(struct slot *s, struct start *start);
void keep_descriptors(const struct slot *s, const struct start *start); /* every other one closed */
int become_init(struct slot *s, char *err); /* death signal, empty bounding set, a session of its own */

/* --- the slot: everything kiln-init knows, handed from step to step ------------------------ */

struct slot {
    struct recipe recipe;
    int sock, zygote;                            /* the socket its jobs come on; the zygote's pidfd */
    int cg_dirs[MAX_FDS], cg_procs[MAX_FDS];     /* SlotCgroup.fd_groups() */
    int n_dirs, n_procs;
    int born_in_cgroup; /* the task's process is created in cg_dirs[0], a v2 cgroup (clone3
                           CLONE_INTO_CGROUP: vfork.h clone_child); 0: it joins by cgroup.procs */
    int sandbox;                                 /* /sandbox, once mount_workspace opened it */
    const char *layer;                           /* the job's build layer, for OP_OVERLAY; NULL none */
    int lower_held[2];  /* the zygote's read-only clones of the workspaces and the layers folders, for
                           OP_OVERLAY (RootPlan.lower_held); -1: none, their binds below the root's LOWER_DIR */
    int base_ns;        /* a judge slot's warm mount namespace: each test runs in a fresh copy; -1 none */
    int tests_served;   /* judge tests this slot has run (one after another, each its own sandbox) */
    int pid_ns;         /* init's own pid namespace, kept once a later test needed one of its own (testinit.c); -1 none */
    struct {            /* a kept slot's later test's own cgroup (recipe.test_cgroups; kept.c) */
        int dir, procs; /* the slot's own cg_dirs[0] and cg_procs[0], while the test's stand in for them; -1: no test's */
        int parent;     /* 1: the slot's cgroup gave its controllers to its children (K_TEST_CG_PARENT) */
        char name[32];  /* the test's cgroup's, below the slot's */
    } test_cg;
    struct task_rlimit { /* the next task's rlimits (limits.c take_limits), set on its own process */
        int resource;
        rlim_t value;
    } rlimits[RLIM_NLIMITS];
    int n_rlimits;
    struct {            /* the last test's language and own limits, once written to the cgroup (kept.c) */
        long workload_rec;
        long long memory, pids;
    } limits_written;
    struct kept_file {  /* cgroup files opened once, kept for the slot's life (result.c) */
        long dir_index;
        const char *file; /* in the recipe's mapping */
        int flags, fd;
    } kept[KEPT_FILES];
    int n_kept;
    struct {                                     /* a slot warmed for one language */
        long workload_rec;                       /* its K_WORKLOAD record; -1: a plain slot */
        pid_t pid;                               /* the prestart command, waiting on its fd 3 */
        int shell;                               /* it is TASK_SHELL (run.shell); 0 when forked: the runtime itself */
        int go, out, err;                        /* init's ends of its pipes */
    } prestarted;
    struct {                                     /* the next task's address-space limit (addrspace.c) */
        long long limit;                         /* bytes; 0: none */
        int sock, listener_end, proc;            /* where its process sends its listener, where init takes it, the slot's /proc; -1 none */
    } address_space;
    struct standby {                             /* a plain slot's task process, waiting in its cgroups (standby.c) */
        pid_t pid;                               /* 0: none (made yet, or released) */
        volatile int state, tid;                 /* its step; its tid until the kernel clears it (exec, exit) */
        const char *path;                        /* what init releases it with */
        char *const *argv, *const *envp;
        const int *fds;
        int nfds;
        const char *failed;                      /* the step that failed (NULL: the exec), and its errno */
        int error;
    } standby;
    char *title;                                 /* argv[0]: where `ps` reads the slot's state */
    size_t title_cap;
};

static inline double monotonic_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* --- mounts.c: the slot's mount namespace ------------------------------------------------- */

/* Ops of the STEP_OP records (K_BUILD, K_FINISH, K_FRESH, K_TEST_PROC, K_W_MOUNT): recipe.py's
 * OP_ARGS, compared as data. X(code, name), codes from 1; OP_ARGS_name(A, o) its own arguments
 * after step and op, A(o, arg) each, read as a[OPARG(name, arg)]; OPARG(name, count) of them. */
#define OPS(X)                                                                                  \
    X(OP_MOUNT, mount) X(OP_SETATTR, setattr) X(OP_MKDIR, mkdir) X(OP_MKDIRS, mkdirs) X(OP_TOUCH, touch) \
    X(OP_WRITE, write) X(OP_SYMLINK, symlink) X(OP_MKNOD, mknod) X(OP_PIVOT, pivot) X(OP_SAVE_NS, save_ns) \
    X(OP_UNSHARE_NS, unshare_ns) X(OP_HOSTNAME, hostname) X(OP_DETACH, detach) X(OP_OVERLAY, overlay)
#define OP_ARGS_mount(A, o) A(o, source) A(o, target) A(o, fstype) A(o, flags) A(o, data) /* mount(2)'s */
#define OP_ARGS_setattr(A, o) A(o, target) A(o, attr_set) A(o, recursive)
#define OP_ARGS_mkdir(A, o) A(o, path) A(o, mode) A(o, uid) A(o, gid) /* uid < 0: not chowned */
#define OP_ARGS_mkdirs(A, o) A(o, path)
#define OP_ARGS_touch(A, o) A(o, path) A(o, mode)
#define OP_ARGS_write(A, o) A(o, path) A(o, mode) A(o, content)
#define OP_ARGS_symlink(A, o) A(o, target) A(o, path)
#define OP_ARGS_mknod(A, o) A(o, path) A(o, mode) A(o, major) A(o, minor)
#define OP_ARGS_pivot(A, o) A(o, new_root)
#define OP_ARGS_save_ns(A, o)
#define OP_ARGS_unshare_ns(A, o)
#define OP_ARGS_hostname(A, o) A(o, name)
#define OP_ARGS_detach(A, o) A(o, target)
#define OP_ARGS_overlay(A, o) A(o, target) A(o, lower) A(o, upper) A(o, work) A(o, flags)
#define OPARG(op, name) OPARG_##op##_##name
#define OPARG_ENUM(op, name) OPARG(op, name),
#define OP_ENUM(code, name) code,
enum op { OP_NONE, OPS(OP_ENUM) N_OPS };
#define OP_ARGS_ENUM(code, name) enum { OP_ARGS_##name(OPARG_ENUM, name) OPARG(name, count) };
OPS(OP_ARGS_ENUM)

int apply_ops(struct slot *s, struct span span, uint32_t type, int *root_image, char *err);
const char *op_name(unsigned code); /* NULL: no such op */
/* the index's root image built (its descriptor: >= 0) or a private copy of it entered (-1),
 * then the slot's own; -2 on error */
int build_root(struct slot *s, int root_image, char *err);
/* the workspace overlay (on the build `layer` when not NULL) and /tmp at the language's sizes,
 * its writable dirs given; opens s->sandbox */
int mount_workspace(struct slot *s, struct span w, const char *layer, char *err);
/* `kiln-init probe-lower DIR`: 0 when the kernel mounts an overlay, in a mount namespace of its
 * own, whose lower layer is a detached clone made outside it (of DIR, an empty folder), 1 when it
 * refuses, 2 when it could not try */
int probe_lower(const char *dir);

/* --- files.c: what the request writes below /sandbox --------------------------------------- */

struct job;
int give_dirs(const struct slot *s, struct span w, char *err); /* the language's K_W_DIR, made and the task's */
int write_parts(const struct slot *s, struct span w, const struct job *job, char *err);
/* a judge job's: /sandbox given to the task; its files (a build's sources, an exec job's
 * arguments) written in the judge dir, their paths below /sandbox in paths[] */
int give_judge_files(const struct slot *s, const struct job *job, char paths[][FILE_NAME_MAX + 64], char *err);
int open_stdin(const struct job *job); /* a sealed memfd, or /dev/null */
/* Where a harness holds what loading the solution prints (below /sandbox) until its report takes
 * it: a file, not the runtime's memory, so that a load ended abruptly (os._exit, a kill, the
 * timeout, an OOM) leaves it behind, and init passes it on after the task's stdout. The harnesses
 * (langs/<slug>/check) name it as /sandbox/ + this; kiln/runtime.py HELD_STDOUT owns it. */
#define HELD_STDOUT "check/.kiln-held-stdout"
struct run;
void pass_on_held_stdout(const struct slot *s, struct run *run);
/* an exec job's give_back file after its run: at most max + 1 bytes in *data (malloc'd) */
int read_given_back(const struct slot *s, const struct job *job, size_t max, char **data, size_t *len, char *err);

/* --- limits.c: rlimits and cgroup limits -------------------------------------------------- */

int apply_cgroup_limits(struct slot *s, struct span span, uint32_t type, char *err);
int apply_job_limits(struct slot *s, const struct job *job, char *err); /* its own memory and pids, if any */
/* RLIMIT_CPU: from the job's CPU limit (cpu_ms > 0), else from its timeout */
long cpu_limit_s(const struct slot *s, struct span w, long long timeout_ms, long long cpu_ms);
/* the task's rlimits: recorded for the process that becomes the task, given to the standby at
 * once; and the workspace as cwd */
int take_limits(struct slot *s, struct span w, long long timeout_ms, long long cpu_ms, char *err);
/* the recorded rlimits set on `pid` (0: the calling process), each capped at its hard limit:
 * 0, or 1 + the resource that could not be set (errno says why) */
int give_rlimits(const struct slot *s, pid_t pid);

/* --- identity.c: who a process is, what it holds, what it may call ------------------------- */

int take_identity(struct slot *s);  /* the task's: the slot's cgroup and user, for good; -1 with errno */
int join_cgroups(struct slot *s);   /* ... its first half: the slot's cgroups and a cgroup namespace */
void choose_task_birth(struct slot *s); /* born_in_cgroup: a slot with one cgroup, a v2 one */
int birth_cgroup(const struct slot *s); /* the cgroup the task's process is created in; -1: init's */
int take_user(const struct slot *s); /* ... its second: the slot's user, no capability */
int take_filter(const struct slot *s, char *err); /* no_new_privs, then the recipe's seccomp program */
int empty_bounding_set(void);       /* and the ambient set */
void arm_death_signal(const struct slot *s);
/* every descriptor above 2 closed but `keep` (sorted in place), those made close-on-exec */
void keep_only(int *keep, int n);

/* --- exec.c: the task's process ------------------------------------------------------------ */

#define COMMAND_MAX 256
/* the shell of a test command with shell syntax (runtime.py SHELL): its exit status 128+N may say
 * that a child of it died of signal N, where a program kiln execs itself says only its own */
#define TASK_SHELL "/bin/sh"
int output_pipe(int ends[2]);
void make_as_task(const struct slot *s, int yes); /* 1: what init makes is the task's (fsuid); 0: root's */
/* a plain slot's task's stdin and output pipes, its own; init's read ends in ends[] */
int task_stdio(const struct slot *s, const struct job *job, int stdio[3], int ends[2], char *err);
/* the argv of records argv_type and the K_W_ENV environment of a language; returns argc */
int command_of(const struct slot *s, struct span w, uint32_t argv_type, char *argv[COMMAND_MAX], char *envp[COMMAND_MAX]);
/* init never moves a process: once the task's process joined the cgroups, cgroup.procs closed */
void drop_cgroup_procs(struct slot *s);
/* the command of argv_type, with `args` after its own, and fds[i] on descriptor i, taking the
 * task's identity and filter in its own process (init stays root and unfiltered by it); *shell:
 * whether the command is TASK_SHELL's */
int spawn_task(struct slot *s, struct span w, uint32_t argv_type, char *const *args, int nargs, const int *fds, int nfds, pid_t *pid, int *shell, char *err);

/* --- standby.c: a plain slot's task process, made while warming, joined to its cgroups ------ */

/* the standby made (0) or an error in err (-1); a slot with cgroups only */
int standby_make(struct slot *s, char *err);
/* the standby execs `path` with fds[i] on descriptor i: its pid once exec'd, or -1 with the
 * step that failed (NULL: the exec) and its errno */
pid_t standby_release(struct slot *s, const char *path, char *const argv[], char *const envp[], const int *fds, int nfds, const char **failed, int *error);

/* --- frames.c, header.c: a job frame in, answers out --------------------------------------- */

#define LAYER_NAME_MAX 64

/* what a job runs: the workspace's test command (POST /run), or a judge's build or test */
enum command { CMD_TEST, CMD_BUILD, CMD_EXEC };

/* The job header's keys, in the order the front writes them (protocol.py's JOB_KEYS; `kiln-init
 * contract` prints them); header.c reads each with its read_<key>, in this order. The frame's
 * "blobs" follows, absent when the job carries none. */
#define JOB_KEYS(X) \
    X(op) X(slug) X(command) X(timeout_ms) X(limits) X(layer) X(files) X(stdin) X(pipes) X(stdin_file) X(file_fds) X(give_back)

struct job {
    int workload_rec;    /* its language: the index of its K_WORKLOAD record */
    enum command command;
    long long timeout_ms;
    /* its own limits, each 0 for the language's: CPU time of the whole run, memory, pids,
     * stdout (stderr is cut there without a verdict); and its address space (0: none) */
#define JOB_LIMIT_FIELD(name) long long name;
    JOB_LIMITS(JOB_LIMIT_FIELD)
    char layer[LAYER_NAME_MAX + 1]; /* the build (a folder of recipe.layers) below the workspace; "" none */
    int nparts;          /* files, then stdin if any */
    const char *part_names[MAX_PARTS]; /* a test's parts, a build's file names */
    char file_names[MAX_PARTS][FILE_NAME_MAX + 1];
    const char *blob[MAX_PARTS];
    size_t blob_len[MAX_PARTS];
    const char *stdin_data;
    size_t stdin_len;
    int has_stdin;
    /* an interactive test's: the frame came with two descriptors, the task's stdin and where
     * its stdout goes on to (init forwards it as it comes, and keeps it for the result) */
    int has_pipes, pipe_fds[2];
    /* a judge's test whose input is a file of the store: the frame came with one descriptor of
     * it, open for reading, the task's stdin as it is (no copy in the front or here) */
    int has_stdin_file, stdin_fd;
    /* an exec job's files whose content is a file of the store (a checker's or an interactor's
     * input and answer): the frame came with a descriptor of each, after the pipes or the stdin
     * file, in the files' order; init copies each into the sandbox from its start (fd_size bytes,
     * checked within the judge's part maximum). by_fd[i]: file i is one; fd[i] its descriptor */
    int nfile_fds, by_fd[MAX_PARTS], fd[MAX_PARTS];
    long long fd_size[MAX_PARTS];
    /* an exec job's file whose content the task leaves goes back with the result (an
     * interactor's record, for the problem's checker): its index in the files, -1 none */
    int give_back;
};
#define MAX_FILE_FDS 4 /* an exec job's files by descriptor (protocol.FILE_FDS_MAX) */
#define MAX_JOB_FDS (2 + MAX_FILE_FDS)
/* the descriptors read with a frame: one more than a job may carry, so that too many is seen */
#define MAX_FRAME_FDS (MAX_JOB_FDS + 1)
int read_frame(int fd, size_t max, char **body, size_t *len, int *fds, int *nfds, char *err, size_t errlen);
int parse_job(const struct recipe *r, char *body, size_t len, struct job *job, char *err, size_t errlen);
/* the frame's descriptors, as the parsed job says it carries them (protocol.job_fds): checked,
 * and kept in the job; else all closed and -1 with the reason */
int take_descriptors(const struct recipe *r, struct job *job, const int *fds, int nfds, char *err, size_t errlen);
void close_file_fds(struct job *job); /* the files' descriptors a job kept, after its run */
const char *part_name(unsigned i);    /* a test's parts, protocol.PARTS; NULL past them */
const char *command_name(unsigned i); /* enum command's, protocol.COMMANDS; NULL past them */
int send_json(int fd, const char *json, int pass_fd);
void json_escape(char *out, size_t cap, const char *text);
/* the result's fields, then its blobs: stdout, stderr, and a build's layer (or the file an exec
 * job gives back) when `layer` is not NULL */
int send_result(int fd, const char *header_fields, const char *out, size_t out_len, const char *err, size_t err_len, const char *layer, size_t layer_len);
void send_error(int fd, const char *op, const char *error); /* {"op": op, "error": error} */
/* A warming slot's one frame to the zygote: {"op":"ready"}, or with this key true when the slot
 * built its index's root image, whose mount namespace rides with the frame (init.c warm;
 * protocol.READY_ROOT_IMAGE, zygote.py _from_slot); {"op":"failed","error":...} if it did not warm */
#define READY_ROOT_IMAGE "root_image"

/* --- supervise.c ----------------------------------------------------------------------------- */

/* starve.c: the time a run waited for CPUs other processes held. A deadline moves by that, up
 * to the recipe's starved_max_times the run's timeout (kiln.runtime.Runtime.starved_max_times). */
struct starve {
    double at, starved_s; /* the last sample's time; the starved seconds so far */
    double psi_ms;        /* the cgroup's cpu.pressure full total at `at`; < 0: none, the threads' times below */
    unsigned long long ran_ns, waited_ns;
};
void starve_begin(struct slot *s, struct starve *c, double now);
double starve_update(struct slot *s, struct starve *c, double now);

/* addrspace.c: what init sees of a task's address-space limit while it runs */
struct address_space_watch {
    long long limit;   /* bytes */
    int listening;     /* 0: no listener (no limit, or the standby's RLIMIT_AS alone): the rest unused */
    int listener, proc; /* the task's seccomp listener; the slot's /proc, where its pids are */
    long calls;        /* calls answered */
    int reached;       /* an allocation refused for the limit */
};

struct run {
    pid_t pid;
    int task_fd, out_fd, err_fd, cancel_fd;
    size_t output_max;
    int stderr_cut;            /* stderr past output_max is dropped, the run goes on (a judge's test) */
    double cpu_limit_ms, cpu_before_ms; /* > 0: killed once the cgroup's CPU passes it */
    int cpu_exceeded;
    double starved_max_s;      /* how far the deadline may move for the time the run was starved of CPU */
    struct starve starve;
    int oom_first;             /* the kernel had ended it for memory when its time was up */
    int forward_fd;            /* >= 0: stdout goes on there too (an interactive test's pipe) */
    int forwarding;            /* stdout goes on (forward_fd was >= 0 at the start): bounded by time, not by output_max */
    long long oom_before, pids_hits_before; /* the cgroup's counts before the run (a slot's later tests) */
    int next;                  /* the slot can run another judge test after this one (the result says so) */
    int report_fd;             /* >= 0: pid is the test's init, which reports the task's status here (testinit.c); -1 none */
    int shell;                 /* the task is TASK_SHELL: its status 128+N may be a child's signal N */
    size_t forwarded;          /* of out_len, how much has gone on */
    char *out, *err;
    size_t out_len, err_len;
    int status, has_status, timed_out, overflow, cancelled;
    double ended_at;
    struct rusage rusage;
    int has_rusage;
    struct address_space_watch address_space;
};
void supervise(struct slot *s, struct run *run, double deadline, const char *title);
void kill_all(void);

/* --- addrspace.c: a test's address-space limit (RLIMIT_AS), and seeing an allocation refused - */

/* init, before the spawn: the next task's limit (0: none), its listener's socket pair made (or,
 * where the task's process must be the standby, RLIMIT_AS set on it alone) */
int address_space_prepare(struct slot *s, long long limit, char *err);
/* the task's process, before kiln's filter: RLIMIT_AS, and its mmap/mremap/brk sent to init */
int address_space_enter(const struct slot *s);
/* init, after the spawn (done or failed): the listener taken into w */
void address_space_started(struct slot *s, struct address_space_watch *w);
void address_space_answer(struct address_space_watch *w); /* one call, from supervise() */
int address_space_reached(const struct address_space_watch *w, const struct run *run);
void address_space_end(struct address_space_watch *w);

/* --- prestart.c: a prestarted slot's command, spawned while warming or forked by its template - */

int start_prestarted(struct slot *s, struct span w, char *err); /* spawned, waiting for its go */
/* a slot cloned by its language's template: the task it forked handed the slot, and entered */
int start_forked(struct slot *s, struct span w, int task_sock, pid_t task, char *err);
int prestart_gone(struct slot *s); /* 1: exited before its request, the prestart_failed frame sent */
int release_prestarted(struct slot *s, struct run *run, char *err); /* its go; *run the task's */

/* --- kept.c: a kept slot, running a judge request's tests one after another ------------------- */

int fresh_sandbox(struct slot *s, char *err); /* a judge test's own mount, IPC, network namespaces */
/* the language's and the job's cgroup limits, unless the last test's were the same */
int write_limits(struct slot *s, const struct job *job, struct span w, char *err);
int ready_for_next(struct slot *s); /* 0: the last test's processes gone, the slot can run another */
/* a later test's own cgroup made below the slot's and standing in for it (cg_dirs[0]) until
 * ready_for_next removes it; where the recipe says (test_cgroups) */
int enter_test_cgroup(struct slot *s, char *err);

/* --- testinit.c: a later judge test's own pid namespace, under an init of its own ------------- */

/* spawn_task's, in a new pid namespace whose init (run->pid) spawned the task and reports its
 * status on run->report_fd; init's own children are made in the slot's namespace again after */
int spawn_under_test_init(struct slot *s, struct span w, uint32_t argv_type, char *const *args, int nargs, const int *fds, int nfds, struct run *run, char *err);
/* once the test's init is reaped: the task's status and rusage in place of its init's */
void test_init_status(struct run *run, int *status, struct rusage *usage);

/* --- result.c -------------------------------------------------------------------------------- */

/* What became of a run, by DESIGN.md's precedence (the first that holds), then the one that is
 * no run's (protocol.py's OUTCOMES; `kiln-init contract` prints them) */
#define OUTCOMES(X) X(timed_out) X(out_of_memory) X(policy_violation) X(pids_limit) X(signaled) X(exited) X(infrastructure_failure)
#define OUTCOME_ENUM(name) OUTCOME_##name,
enum outcome { OUTCOMES(OUTCOME_ENUM) };
const char *outcome_name(unsigned i); /* NULL past them */
/* The result frame's fields before its blobs, in this order (protocol.py's RESULT_KEYS, which
 * decode_result reads; `kiln-init contract` prints them): X(key, the printf format of its value).
 * RESULT_FORMAT is the header's fields, one snprintf format that -Wformat checks. ended_ms: when
 * the task was reaped (the test's init, for a later judge test), on CLOCK_MONOTONIC, which every
 * slot of the host shares (no time namespaces): an interactive test's two results say which side
 * ended first (judge.py ended_first); the stamp reap() takes anyway for wall_ms. */
#define RESULT_FIELDS(X)                                                                          \
    X(op, "\"result\"") X(exit_code, "%s") X(outcome, "\"%s\"") X(wall_ms, "%.1f") X(cpu_ms, "%.1f")    \
    X(memory_peak_bytes, "%lld") X(signal, "%s") X(output_overflow, "%s") X(next, "%s") X(address_space_reached, "%s") \
    X(ended_ms, "%.3f")
#define RESULT_FIELD_FORMAT(key, format) ",\"" #key "\":" format
#define RESULT_FORMAT (RESULT_FIELDS(RESULT_FIELD_FORMAT) + 1) /* without the first field's comma */

double cgroup_figure(struct slot *s, enum cgroup_stat what); /* a K_STAT figure (STAT_cpu, STAT_cpu_starved); < 0: none */
double cgroup_cpu_ms(struct slot *s); /* < 0: no cgroup CPU figure */
void cgroup_counts(struct slot *s, long long *oom_kills, long long *pids_hits); /* so far */
int reset_peak(struct slot *s, char *err); /* the K_PEAK_RESET writes: the memory peak back to now */
void forget_cgroup_files(struct slot *s, long dir_index); /* the kept files of that directory closed */
void send_failure(const struct slot *s, const char *message);
void send_result_of(struct slot *s, const struct run *run, double started, long cpu_limit_ms, double cpu_before_ms, const char *layer, size_t layer_len);

/* --- layer.c: what a build job left, sent back as its layer ------------------------------------ */

/* An entry: its head, X(field, bytes) each big-endian, then its path and its data; its types, X(name,
 * byte). protocol.py's LAYER_ENTRY and LAYER_TYPES read them; `kiln-init contract` prints both. */
#define LAYER_HEAD(X) X(type, 1) X(mode, 2) X(path_len, 2) X(size, 4)
#define LAYER_TYPES(X) X(dir, 'd') X(file, 'f') X(link, 'l')
#define LAYER_TYPE_ENUM(name, byte) LAYER_##name = byte,
enum layer_type { LAYER_TYPES(LAYER_TYPE_ENUM) };
/* The upper layer's directories, regular files and symbolic links, walked without following
 * anything, as LAYER entries (kiln/wire/protocol.py reads them); *out malloc'd. */
int collect_layer(const struct slot *s, char **out, size_t *len, char *err);

/* --- title.c --------------------------------------------------------------------------------- */

/* The slot's titles (argv[0], where `ps` reads them): kiln.slots.TITLE owns their grammar and
 * reads the slot's (`kiln slots`); `kiln-init contract` prints TITLES, the test renders each. A
 * busy slot's title gets its run's age (TITLE_AGED) every TITLE_EVERY_S. A later judge test's
 * init (testinit.c) is no child of the zygote: `kiln slots` never reads its title. */
#define TITLE_WARMING "kiln: slot %ld warming"
#define TITLE_WARM "kiln: slot %ld warm%s%s" /* and " <slug>" when prestarted */
#define TITLE_BUSY "kiln: slot %ld busy %s"
#define TITLE_AGED "%s %.1fs"                /* a busy title, its run's age */
#define TITLE_TEST_INIT "kiln: slot %ld test init"
#define TITLES(X) X(WARMING) X(WARM) X(BUSY) X(AGED) X(TEST_INIT)
#define TITLE_EVERY_S 1.0 /* kiln.slots.TITLE_EVERY_S */
void set_title(struct slot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --- receive.c: a job taken: read within the slot's maximum, parsed, checked against the slot -- */

/* 1: *job taken (its blobs in *body, malloc'd); 0: the socket closed; -1: refused, why in err */
int receive_job(struct slot *s, struct job *job, char **body, char *err);

/* --- check.c, contract.c, launch.c: kiln-init's other modes ---------------------------------- */

int check_job(struct slot *s);                                     /* `kiln-init check` */
int print_contract(void);                                          /* `kiln-init contract` */
void exec_template(struct slot *s, int root_image, const char *slug, int module); /* KILN_TEMPLATE_OF */

#endif
