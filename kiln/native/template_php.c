/* `kiln_template_php.so`, PHP's binding of the template (template.c): a plain shared library
 * that langs/php/check/prestart.php --template loads with FFI (in php-cli as installed: Debian's
 * ffi.enable=preload allows it in the CLI; no php-dev headers needed). kiln_template_serve(3) ->
 * 1 in each forked task, 0 when kiln is gone.
 *
 * A fork of php-cli needs nothing of its own: it is single-threaded (NTS), holds no descriptor
 * past its standard streams (those are the task's at the same numbers once it entered its slot),
 * and seeds its random generators at their first use, which the template never makes. */
#include "template.h"

#define EXPORT __attribute__((visibility("default")))

static void nothing(void) {}

static const struct template_hooks php = {
    .before_fork = nothing,
    .after_fork_parent = nothing,
    .after_fork_child = nothing,
    .entered = nothing,
    .populate = 1,
};

EXPORT int kiln_template_serve(int control) {
    return template_serve(control, &php);
}
