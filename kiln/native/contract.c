/* `kiln-init contract`: the tables this kiln-init was built with, as JSON on stdout, so that the
 * Python side's (kiln/zygote/recipe.py, kiln/wire/protocol.py, kiln/slots.py, kiln/runtime.py)
 * are compared with them as data (tests/unit/test_contract.py), not read out of C sources:
 * record types and each one's arguments, the recipe's constants, the start's variables, ops,
 * stats, job limits, a job header's keys, commands, parts, outcomes, a result's keys, a layer
 * entry's head and types, the slots' titles and a few single values. Every string here is a C
 * identifier, a lower-case word, a path or a printf format without quotes or backslashes:
 * nothing needs escaping. */
#include "kiln.h"

#include <stdio.h>

#define PRINT_TYPE(name, code, shape) printf("%s\"%s\": %d", n++ ? ", " : "", #name, code);
#define PRINT_ARG(shape, name) printf("%s\"%s\"", k++ ? ", " : "", #name);
#define PRINT_REST(shape, name) printf("%s\"%s...\"", k++ ? ", " : "", #name);
#define PRINT_TYPE_ARGS(type, code, shape)                            \
    printf("%s\"%s\": [", n++ ? ", " : "", #type), k = 0;          \
    SHAPE_##shape(PRINT_ARG, PRINT_REST, shape) printf("]");
#define PRINT_OP_ARGS(code, name)                                  \
    printf("%s\"%s\": [", n++ ? ", " : "", #name), k = 0;          \
    OP_ARGS_##name(PRINT_ARG, name) printf("]");
#define PRINT_NAME(name) printf("%s\"%s\"", n++ ? ", " : "", #name);
#define PRINT_CONST(field, form) printf("%s\"%s\"", n++ ? ", " : "", #field);
#define PRINT_START(name) printf("%s\"%s\"", n++ ? ", " : "", START_VAR(name));
#define PRINT_KEY(key, format) printf("%s\"%s\"", n++ ? ", " : "", #key);
#define PRINT_LAYER_FIELD(field, bytes) printf("%s\"%s\": %d", n++ ? ", " : "", #field, bytes);
#define PRINT_LAYER_TYPE(name, byte) printf("%s\"%c\"", n++ ? ", " : "", byte);
#define PRINT_TITLE(name) printf("%s\"%s\": \"%s\"", n++ ? ", " : "", #name, TITLE_##name);

static void print_list(const char *key, const char *(*name)(unsigned), unsigned from) {
    printf(", \"%s\": [", key);
    for (unsigned i = from; name(i); i++) printf("%s\"%s\"", i > from ? ", " : "", name(i));
    printf("]");
}

int print_contract(void) {
    int n = 0, k;
    printf("{\"record_types\": {");
    RECORD_TYPES(PRINT_TYPE)
    n = 0;
    printf("}, \"record_args\": {");
    RECORD_TYPES(PRINT_TYPE_ARGS)
    n = 0;
    printf("}, \"consts\": [");
    RECIPE_CONSTS(PRINT_CONST)
    n = 0;
    printf("], \"start\": [");
    START_VARIABLES(PRINT_START)
    n = 0;
    printf("], \"stats\": [");
    STATS(PRINT_NAME)
    n = 0;
    printf("], \"job_limits\": [");
    JOB_LIMITS(PRINT_NAME)
    n = 0;
    printf("], \"job_keys\": [");
    JOB_KEYS(PRINT_NAME)
    n = 0;
    printf("], \"op_args\": {");
    OPS(PRINT_OP_ARGS)
    printf("}");
    print_list("ops", op_name, OP_MOUNT);
    print_list("commands", command_name, 0);
    print_list("parts", part_name, 0);
    print_list("outcomes", outcome_name, 0);
    n = 0;
    printf(", \"result_fields\": [");
    RESULT_FIELDS(PRINT_KEY)
    printf("]");
    n = 0;
    printf(", \"layer_head\": {");
    LAYER_HEAD(PRINT_LAYER_FIELD)
    n = 0;
    printf("}, \"layer_types\": [");
    LAYER_TYPES(PRINT_LAYER_TYPE)
    n = 0;
    printf("], \"titles\": {");
    TITLES(PRINT_TITLE)
    /* single values the Python side states too */
    printf("}, \"title_every_s\": %g, \"max_file_fds\": %d, \"task_shell\": \"%s\", \"held_stdout\": \"%s\", \"ready_root_image\": \"%s\"",
           TITLE_EVERY_S, MAX_FILE_FDS, TASK_SHELL, HELD_STDOUT, READY_ROOT_IMAGE);
    printf("}\n");
    return fflush(stdout) ? 70 : 0;
}
