/* from_dlpack() and lazy View objects in C (fast_view.c). */
#ifndef CUABI_FAST_VIEW_H
#define CUABI_FAST_VIEW_H

#include "fast_common.h"

/* cuabi.View (NULL before view_setup()). */
PyTypeObject *fast_view_type(void);

/* A lazy View of `description`, keeping `owner` (and `stream`) alive. */
PyObject *fast_view_new_lazy(PyObject *description, PyObject *owner, PyObject *stream);

/* View._new(handle): a View owning the C view `view`. */
PyObject *fast_view_from_handle(void *view);

/* Adds this part's functions, types and constants to the module (called by
 * fast_module.c only). */
int fast_view_init(PyObject *module);

#endif
