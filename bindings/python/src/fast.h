/* cuabi._fast: the compiled fast path of the Python package.
 *
 * A CPython extension (C and Python.h only: it builds wherever the library
 * builds, from the dist tarball too). It never links libcuabi: cuabi._lib
 * loads the library with ctypes and hands this module the address of its
 * cuabi_get_api, so both layers use the same copy of the library (also the
 * one CUABI_LIBRARY names) through the plugin table.
 *
 * What it does (docs/python.md, "The compiled fast path"):
 *   fast_module.c    attach(): table version, ABI version, every struct
 *                    layout checked against the library (the refusal of
 *                    docs/python.md "Loading and checks"); errors; helpers
 *                    for reading __slots__ of the package's Python classes
 *   fast_pack.c      kernel arguments to slot bytes, per slot kind
 *   fast_launch.c    launch(stream, config, kernel, *args) and prepared
 *                    launches: one crossing into C, packing in C
 *   fast_view.c      from_dlpack(): numpy arrays from their C struct, torch
 *                    through its DLPack exchange table, lazy View objects
 *   fast_exchange.c  the DLPackExchangeAPI table cuabi.View exports
 *
 * The rule of every fast path: it handles the common, well-defined cases
 * itself and hands anything else to the Python code the ctypes backend
 * runs, so both backends accept the same inputs and raise the same
 * exceptions. */
#ifndef CUABI_FAST_H
#define CUABI_FAST_H

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

/* Raise the exception cuabi._lib.raise_last() raises for `status` (the
 * same classes and messages as the ctypes layer). Returns -1. */
int fast_raise(cuabi_status status, const char *where);

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

/* Module parts: each adds its types and functions to the module. */
int fast_pack_init(PyObject *module);
int fast_launch_init(PyObject *module);
int fast_view_init(PyObject *module);
int fast_exchange_init(PyObject *module);

/* Shared between parts. */
extern Py_ssize_t fast_handle_off;     /* Handle._h */
PyObject *fast_view_new_lazy(PyObject *description, PyObject *owner, PyObject *stream);
PyObject *fast_view_from_handle(void *view);   /* View._new(handle) */
PyTypeObject *fast_view_type(void);

#endif
