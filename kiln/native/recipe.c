/* The recipe: records the zygote wrote into a sealed memfd (kiln/sandbox/recipe.py).
 *
 *     "KILNRCP1" | record... ; record = u32 kind | u32 nargs | arg... ; arg = u32 len | bytes | NUL
 *
 * The zygote is root and wrote it for this slot: it is checked for shape, not trusted less. */
#include "kiln.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int take_u32(const char **at, const char *end, uint32_t *value) {
    if (end - *at < 4) return -1;
    memcpy(value, *at, 4);
    *at += 4;
    return 0;
}

int recipe_load(int fd, struct recipe *out, char *err, size_t errlen) {
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < 8) {
        snprintf(err, errlen, "recipe: %s", st.st_size < 8 ? "too short" : strerror(errno));
        return -1;
    }
    char *data = malloc(st.st_size);
    if (!data || pread(fd, data, st.st_size, 0) != st.st_size) {
        snprintf(err, errlen, "recipe: cannot read it");
        return -1;
    }
    if (memcmp(data, "KILNRCP1", 8) != 0) {
        snprintf(err, errlen, "recipe: bad magic");
        return -1;
    }
    const char *at = data + 8, *end = data + st.st_size;
    size_t cap = 64;
    out->recs = malloc(cap * sizeof *out->recs);
    out->n = 0;
    while (at < end) {
        struct rec rec;
        if (take_u32(&at, end, &rec.kind) || take_u32(&at, end, &rec.nargs) || rec.nargs > 4096) goto bad;
        rec.args = malloc((rec.nargs + 1) * sizeof *rec.args);
        for (uint32_t i = 0; i < rec.nargs; i++) {
            uint32_t len;
            if (take_u32(&at, end, &len) || (size_t)(end - at) < (size_t)len + 1 || at[len] != '\0') goto bad;
            rec.args[i].p = at;
            rec.args[i].len = len;
            at += len + 1;
        }
        if (out->n == cap) out->recs = realloc(out->recs, (cap *= 2) * sizeof *out->recs);
        out->recs[out->n++] = rec;
    }
    return 0;
bad:
    snprintf(err, errlen, "recipe: malformed record %zu", out->n);
    return -1;
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
