/* The recipe: records the zygote wrote into a sealed memfd (kiln/zygote/recipe.py).
 *
 *     "KILNRCP1" | record... ; record = u32 type | u32 nargs | arg... ; arg = u32 len | bytes | NUL
 *
 * The zygote is root and wrote it for this slot: it is checked for shape, not trusted less. The
 * mapping outlives the memfd's descriptor, which init closes with the others it does not keep. */
#include "kiln.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int take_u32(const char **at, const char *end, uint32_t *value) {
    if (end - *at < 4) return -1;
    memcpy(value, *at, 4);
    *at += 4;
    return 0;
}

/* One pass over the records: counts them (recs == NULL) or fills recs and args. */
static int walk(const char *data, const char *end, struct rec *recs, struct arg *args, size_t *n_recs, size_t *n_args) {
    const char *at = data;
    *n_recs = *n_args = 0;
    while (at < end) {
        uint32_t type, nargs;
        if (take_u32(&at, end, &type) || take_u32(&at, end, &nargs) || nargs > 4096) return -1;
        if (recs) recs[*n_recs] = (struct rec){type, nargs, args + *n_args};
        for (uint32_t i = 0; i < nargs; i++) {
            uint32_t len;
            if (take_u32(&at, end, &len) || (size_t)(end - at) < (size_t)len + 1 || at[len] != '\0') return -1;
            if (recs) args[*n_args] = (struct arg){at, len};
            ++*n_args;
            at += len + 1;
        }
        ++*n_recs;
    }
    return 0;
}

/* the constants every step reads (limits, the uid, the working directory) as fields: a job's
 * path never looks them up. One K_CONSTS record with exactly RECIPE_CONSTS' values, or none. */
#define INT(a) strtoll((a)->p, NULL, 10)
#define TEXT(a) ((a)->len ? (a)->p : NULL)
#define COUNT_CONST(field, form) +1
#define READ_CONST(field, form) r->field = form(&c->args[i]), i++;
static int read_consts(struct recipe *r, char *err, size_t errlen) {
    const struct rec *c = NULL;
    for (size_t i = 0; i < r->n; i++)
        if (r->recs[i].type == K_CONSTS) {
            if (c) return snprintf(err, errlen, "recipe: two K_CONSTS records"), -1;
            c = &r->recs[i];
        }
    if (!c || c->nargs != 0 RECIPE_CONSTS(COUNT_CONST))
        return snprintf(err, errlen, "recipe: %u constants where kiln-init reads %d (kiln-init is older or newer than kiln: make -C kiln/native)", c ? c->nargs : 0, 0 RECIPE_CONSTS(COUNT_CONST)), -1;
    size_t i = 0;
    RECIPE_CONSTS(READ_CONST)
    return 0;
}

/* Each record type's arity, from its shape: `fixed` arguments, and any number more if `rest`. */
#define COUNT_ONE(shape, name) +1
#define COUNT_NONE(shape, name)
#define TYPE_ARITY(type, code, shape) [code] = {0 SHAPE_##shape(COUNT_ONE, COUNT_NONE, shape), 0 SHAPE_##shape(COUNT_NONE, COUNT_ONE, shape)},
static const struct {
    uint32_t fixed, rest;
} ARITY[] = {RECORD_TYPES(TYPE_ARITY)};
#define N_TYPES (sizeof ARITY / sizeof *ARITY)

/* every record of a type kiln-init knows, with its shape's arguments: a reader takes
 * args[ARG(shape, name)] without counting them */
static int check_arities(const struct recipe *r, char *err, size_t errlen) {
    for (size_t i = 0; i < r->n; i++) {
        uint32_t type = r->recs[i].type, nargs = r->recs[i].nargs;
        if (type && type < N_TYPES && ARITY[type].rest ? nargs >= ARITY[type].fixed : type && type < N_TYPES && nargs == ARITY[type].fixed) continue;
        return snprintf(err, errlen, "recipe: record %zu (type %u) has %u arguments, not its shape's (kiln-init is older or newer than kiln: make -C kiln/native)", i, type, nargs), -1;
    }
    return 0;
}

/* The memfd is mapped, not copied (its pages are the page cache's), and indexed in one
 * allocation: every slot loads it while warming, 284 records for 15 languages. */
int recipe_load(int fd, struct recipe *out, char *err, size_t errlen) {
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < 8) {
        snprintf(err, errlen, "recipe: %s", st.st_size < 8 ? "too short" : strerror(errno));
        return -1;
    }
    const char *data = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED || memcmp(data, "KILNRCP1", 8) != 0) {
        snprintf(err, errlen, "recipe: %s", data == MAP_FAILED ? strerror(errno) : "bad magic");
        return -1;
    }
    const char *end = data + st.st_size;
    size_t n_recs, n_args;
    if (walk(data + 8, end, NULL, NULL, &n_recs, &n_args)) {
        snprintf(err, errlen, "recipe: malformed record %zu", n_recs);
        return -1;
    }
    out->recs = malloc(n_recs * sizeof *out->recs + n_args * sizeof(struct arg));
    out->n = n_recs, out->data = data, out->size = st.st_size;
    walk(data + 8, end, out->recs, (struct arg *)(out->recs + n_recs), &n_recs, &n_args);
    if (check_arities(out, err, errlen) || read_consts(out, err, errlen)) {
        recipe_unload(out);
        return -1;
    }
    return 0;
}

void recipe_unload(struct recipe *r) {
    munmap((void *)r->data, r->size);
    free(r->recs);
    *r = (struct recipe){0};
}


long long arg_int(const struct arg *a) {
    return strtoll(a->p, NULL, 0);
}

long find_workload_rec(const struct recipe *r, const char *slug) {
    for (size_t i = 0; i < r->n; i++)
        if (r->recs[i].type == K_WORKLOAD && !strcmp(r->recs[i].args[0].p, slug)) return i;
    return -1;
}

struct span workload_span(const struct recipe *r, size_t record) {
    struct span w = {record, record + 1};
    while (w.to < r->n && r->recs[w.to].type != K_WORKLOAD) w.to++;
    return w;
}
