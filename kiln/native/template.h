/* The core of a language's template (template.c), shared by its bindings: the CPython extension
 * (template_python.c) and the Node-API addon (template_node.c). A binding says what its runtime
 * needs around the forks; serve() is the same loop for all. */
#ifndef KILN_TEMPLATE_H
#define KILN_TEMPLATE_H

#include <sys/types.h>

struct template_hooks {
    void (*before_fork)(void);       /* in the template, before each slot's clone */
    void (*after_fork_parent)(void); /* in the template, after it */
    void (*after_fork_child)(void);  /* in the task, just forked: nothing of the slot entered */
    void (*entered)(void);           /* in the task, in its slot (filter on), before serve returns */
    int populate;                    /* copy the pages the template wrote while the slot warms */
    int reserve_descriptors;         /* the template's descriptors replaced in the task, not closed */
};

/* Serves the zygote's requests on `control`: 1 in each forked task, in its slot with descriptor
 * 3 its go pipe; 0 in the template once the zygote is gone. */
int template_serve(int control, const struct template_hooks *hooks);

/* A child made as a forked task is (the template's descriptors left, the hooks run), in no
 * slot: a binding's test that its runtime survives the fork. Its pid in the template, 0 in the
 * child, -1 with errno. */
pid_t template_fork_alike(const struct template_hooks *hooks);

#endif
