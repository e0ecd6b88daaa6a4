/* The recipe: records the zygote wrote into a sealed memfd (kiln/sandbox/recipe.py).
 *
 *     "KILNRCP1" | record... ; record = u32 kind | u32 nargs | arg... ; arg = u32 len | bytes | NUL
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
        uint32_t kind, nargs;
        if (take_u32(&at, end, &kind) || take_u32(&at, end, &nargs) || nargs > 4096) return -1;
        if (recs) recs[*n_recs] = (struct rec){kind, nargs, args + *n_args};
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
    return 0;
}

void recipe_unload(struct recipe *r) {
    munmap((void *)r->data, r->size);
    free(r->recs);
    *r = (struct recipe){0};
}

const char *recipe_const(const struct recipe *r, const char *name) {
    for (size_t i = 0; i < r->n; i++)
        if (r->recs[i].kind == K_CONST && r->recs[i].nargs == 2 && strcmp(r->recs[i].args[0].p, name) == 0)
            return r->recs[i].args[1].p;
    return NULL;
}

long long arg_int(const struct arg *a) {
    return strtoll(a->p, NULL, 0);
}

long find_workload(const struct recipe *r, const char *slug) {
    for (size_t i = 0; i < r->n; i++)
        if (r->recs[i].kind == K_WORKLOAD && !strcmp(r->recs[i].args[0].p, slug)) return i;
    return -1;
}

struct span workload_span(size_t record) {
    struct span w = {record, record + 1};
    while (w.to < S.recipe.n && S.recipe.recs[w.to].kind != K_WORKLOAD) w.to++;
    return w;
}
