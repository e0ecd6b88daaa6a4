/* The slot's title, where `ps` and `kiln slots` read what it is doing: kiln.slots owns its
 * grammar; the formats are kiln.h's TITLES, which `kiln-init contract` prints. */
#include "kiln.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

void set_title(struct slot *s, const char *fmt, ...) {
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t n = strlen(text) < s->title_cap ? strlen(text) : s->title_cap;
    memcpy(s->title, text, n); /* argv[0]: the zygote left room for the longest title */
    memset(s->title + n, 0, s->title_cap - n);
    prctl(PR_SET_NAME, text);
}
