/* kiln-init: a slot's init as a small static program (see init.c). Shared declarations. */
#ifndef KILN_H
#define KILN_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

/* --- recipe.c: what the zygote decided, as records (kiln/sandbox/recipe.py writes them) --- */
enum {
    K_CONST = 1,      /* name value */
    K_SECCOMP = 2,    /* BPF program */
    K_STAT = 3,       /* what dir_index file key divisor */
    K_BUILD = 4,      /* step op args...: the index's template root */
    K_FINISH = 5,     /* step op args...: every slot's own /tmp, /proc, upper layer */
    K_WARM_LIMIT = 6, /* dir_index file value: cgroup limits written while warming */
    K_WORKLOAD = 7,   /* slug has_checker: the records up to the next K_WORKLOAD are its */
    K_W_MOUNT = 8,    /* step op args...: the workspace overlay, sizes */
    K_W_DIR = 9,      /* relpath below /sandbox, given to the task */
    K_W_PART = 10,    /* part relpath */
    K_W_LIMIT = 11,   /* dir_index file value */
    K_W_ARGV = 12,    /* argv... */
    K_W_ENV = 13,     /* KEY=VALUE... */
    K_W_RLIMIT = 14,  /* resource value */
    K_W_RLIMIT_CPU = 15, /* seconds_per_started_second extra: RLIMIT_CPU from the run's timeout */
    K_W_PRESTART_ARGV = 16,  /* argv...: the workspace's prestart command */
    K_W_PRESTART_LIMIT = 17, /* dir_index file value: a prestarted slot's limits, from fresh */
    K_W_TEMPLATE_ARGV = 18,  /* argv...: the workspace's template command (template.c) */
};

struct arg {
    const char *p; /* NUL-terminated (the NUL is not counted in len) */
    uint32_t len;
};

struct rec {
    uint32_t kind, nargs;
    struct arg *args;
};

struct recipe {
    struct rec *recs;
    size_t n;
    const char *data; /* the mapping */
    size_t size;
    /* its K_CONST records, read once by recipe_load (absent: index -1, the others 0 or NULL) */
    long index, uid;
    long long input_max, output_max, timeout_max_ms;
    const char *cwd;
};

int recipe_load(int fd, struct recipe *out, char *err, size_t errlen);
void recipe_unload(struct recipe *r);
long long arg_int(const struct arg *a);

/* --- the slot, as init.c set it up from its environment and recipe --- */
#define MAX_FDS 16
struct slot {
    struct recipe recipe;
    int sock, zygote;
    int cg_dirs[MAX_FDS], cg_procs[MAX_FDS]; /* SlotCgroup.fd_groups() */
    int n_dirs, n_procs;
};
extern struct slot S;

/* a language's records: from its K_WORKLOAD up to the next */
struct span {
    size_t from, to;
};
struct span workload_span(size_t record);
long find_workload(const struct recipe *r, const char *slug); /* its K_WORKLOAD record, or -1 */

#define ERR 512

/* --- ops.c: the steps of a plan (mounts, files, cgroup limit writes) --- */
int apply_records(struct span span, uint32_t kind, int *template_fd, char *err);

/* --- frames.c --- */
#define MAX_PARTS 4
struct job {
    int workload;        /* index of its K_WORKLOAD record */
    long long timeout_ms;
    int nparts;          /* files, then stdin if any */
    const char *part_names[MAX_PARTS];
    const char *blob[MAX_PARTS];
    size_t blob_len[MAX_PARTS];
    const char *stdin_data;
    size_t stdin_len;
    int has_stdin;
};
int read_frame(int fd, size_t max, char **body, size_t *len, char *err, size_t errlen);
int parse_job(const struct recipe *r, char *body, size_t len, struct job *job, char *err, size_t errlen);
int send_json(int fd, const char *json, int pass_fd);
void json_escape(char *out, size_t cap, const char *text);
int send_result(int fd, const char *header_fields, const char *out, size_t out_len, const char *err, size_t err_len);

/* --- supervise.c --- */
struct run {
    pid_t pid;
    int task_fd, out_fd, err_fd, cancel_fd;
    size_t output_max;
    char *out, *err;
    size_t out_len, err_len;
    int status, has_status, timed_out, overflow, cancelled;
    double ended_at;
    struct rusage rusage;
    int has_rusage;
};
void supervise(struct run *run, double deadline, const char *title);
double monotonic_s(void);
void kill_all(void);

/* --- task.c: the workspace and the task's process --- */
int mount_workspace(struct span w, char *err);
int write_parts(struct span w, const struct job *job, char *err);
int open_stdin(const struct job *job);
int output_pipe(int ends[2]);
void make_as_task(int yes); /* 1: what init makes is the task's (fsuid, fsgid); 0: root's again */
long cpu_limit_s(struct span w, long long timeout_ms);
int take_limits(struct span w, long long timeout_ms, char *err);
int take_filter(char *err);
int take_identity(void); /* the task's: the slot's cgroup and user, for good; -1 with errno */
#define COMMAND_MAX 256
/* the argv of records argv_kind and the K_W_ENV environment of a language; returns argc */
int command_of(struct span w, uint32_t argv_kind, char *argv[COMMAND_MAX], char *envp[COMMAND_MAX]);
/* the command of argv_kind with fds[i] on descriptor i, taking the task's identity and filter
 * in its own process (init stays root and unfiltered by it) */
int spawn_in_cgroup(struct span w, uint32_t argv_kind, const int *fds, int nfds, pid_t *pid, char *err);
void arm_death_signal(void);
/* every descriptor above 2 closed but `keep` (sorted in place), those made close-on-exec */
void keep_only(int *keep, int n);
int empty_bounding_set(void); /* and the ambient set */

/* --- result.c --- */
double cgroup_cpu_ms(void); /* < 0: no cgroup CPU figure */
void send_failure(const char *message);
void send_result_of(const struct run *run, double started, long cpu_limit_ms, double cpu_before_ms);

/* --- init.c --- */
void set_title(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
