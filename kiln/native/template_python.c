/* `_kiln_template`, the CPython binding of the template (template.c): serve(3) -> True in each
 * forked task, False when kiln is gone (langs/python/check/harness.py --template). Built with
 * the system Python's headers (Makefile): the sandbox's interpreter loads it, never kiln's. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "template.h"

static void nothing(void) {}

static const struct template_hooks python = {
    .before_fork = PyOS_BeforeFork,
    .after_fork_parent = PyOS_AfterFork_Parent,
    .after_fork_child = PyOS_AfterFork_Child,
    .entered = nothing,
    .populate = 1,
};

static PyObject *serve(PyObject *self, PyObject *args) {
    int control;
    if (!PyArg_ParseTuple(args, "i", &control)) return NULL;
    return PyBool_FromLong(template_serve(control, &python));
}

static PyMethodDef methods[] = {
    {"serve", serve, METH_VARARGS, "Serve the zygote's slots on a descriptor; True in each forked task, False at its end."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kiln_template", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kiln_template(void) {
    return PyModule_Create(&module);
}
