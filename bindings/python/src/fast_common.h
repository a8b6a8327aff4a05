/* cuabi._fast: what every part of the extension shares, defined in
 * fast_common.c, the bottom layer (fast.h lists the layers): the library's
 * plugin table once attached, errors raised as cuabi._lib raises them, and
 * the __slots__ of the package's Python classes read by offset. */
#ifndef CUABI_FAST_COMMON_H
#define CUABI_FAST_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cuabi.h>

/* Public from Python 3.11; before, the same functions were private (with
 * unsigned char pointers). */
#if PY_VERSION_HEX < 0x030B0000
static inline int fast_float_pack2(double x, char *p, int le)
{
    return _PyFloat_Pack2(x, (unsigned char *)p, le);
}
static inline int fast_float_pack4(double x, char *p, int le)
{
    return _PyFloat_Pack4(x, (unsigned char *)p, le);
}
static inline double fast_float_unpack2(const char *p, int le)
{
    return _PyFloat_Unpack2((const unsigned char *)p, le);
}
#define PyFloat_Pack2 fast_float_pack2
#define PyFloat_Pack4 fast_float_pack4
#define PyFloat_Unpack2 fast_float_unpack2
#endif

/* The library's entry points (set by attach(); NULL before). */
extern const cuabi_api *fast_api;

/* What attach() (fast_module.c) found good: the library's table and
 * cuabi._lib.raise_last, which fast_raise calls (a new reference is kept). */
void fast_set_attached(const cuabi_api *api, PyObject *raise_last);

/* Raise the exception cuabi._lib.raise_last() raises for `status` (the
 * same classes and messages as the ctypes layer). Returns -1. */
int fast_raise(cuabi_status status, const char *where);

/* An integer argument from 0 to `max` (a size, count or offset), by the
 * package's one rule (cuabi.errors.index_arg): an exact int in range is
 * taken here; anything else (numpy integers, bools, floats, out of range)
 * goes to index_arg itself, which converts it or raises the same TypeError
 * or InvalidArgumentError as the ctypes backend, naming `name`. Returns 0,
 * or -1 with the exception set. */
int fast_size_arg(PyObject *obj, const char *name, size_t max, size_t *out);

/* Refuse a call before attach() succeeded. Returns -1 with RuntimeError. */
int fast_not_attached(void);

/* __slots__ of the package's Python classes, read and written by offset
 * (their member descriptors' offsets, found once). */
int fast_slot_offset(PyObject *cls, const char *name, Py_ssize_t *offset);

static inline PyObject *fast_slot_get(PyObject *obj, Py_ssize_t offset)
{
    return *(PyObject **)((char *)obj + offset);   /* borrowed; may be NULL */
}

static inline void fast_slot_set(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject **p = (PyObject **)((char *)obj + offset);
    PyObject *old = *p;
    Py_XINCREF(value);
    *p = value;
    Py_XDECREF(old);
}

/* A handle value held by a Python object (an int, or None when closed). */
static inline void *fast_handle_value(PyObject *value)
{
    return (value && PyLong_CheckExact(value)) ? PyLong_AsVoidPtr(value) : NULL;
}

/* Where every handle object keeps its value (Handle._h; -1 until
 * set_handle_class). */
extern Py_ssize_t fast_handle_off;

#endif
