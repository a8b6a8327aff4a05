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

/* ---- handles in use (cuabi/_lib.py "handles in use"; docs/RELIABILITY.md,
 * "Threat model: threads, finalizers and captures")
 *
 * Every handle object counts the C calls in flight on its handle in its
 * _uses slot (a Python int; unset means 0), so that close() on another
 * thread leaves the release (its _fin) to the last of them. Under the GIL
 * each of these is atomic: no Python code runs inside them, except the
 * `handle` property of an object without a value (closed, a lazy view) in
 * fast_use and the release itself in fast_done, after the count is
 * settled. The common cases -- 0 -> 1 and 1 -> 0 on an open object -- swap
 * two cached ints. */
extern Py_ssize_t fast_uses_off, fast_fin_off;
extern PyObject *fast_int0, *fast_int1;
extern PyTypeObject *fast_handle_type;  /* cuabi._handle.Handle: what has those slots */

/* set_handle_class(Handle, ClosedHandleError): the slots' offsets. */
int fast_handles_setup(PyObject *handle_class, PyObject *closed_error);
/* handle_use, handle_done, handle_close, handle_swap_release: the
 * primitives cuabi._lib uses in the compiled backend. */
int fast_handles_init(PyObject *module);

/* After a fast_use of `obj` failed for the C function `fn`: a
 * ClosedHandleError names the function ("fn: Stream is closed", as the
 * ctypes path's); other errors stay. Returns -1. */
int fast_closed_in(const char *fn, PyObject *obj);

/* fast_use's and fast_done's other cases. */
void *fast_use_slow(PyObject *obj);
void fast_done_slow(PyObject *obj);

/* Count one call on obj's handle and return the handle value; NULL with
 * the exception its `handle` property raises (ClosedHandleError when
 * closed). obj must be a fast_handle_type instance. */
static inline void *fast_use(PyObject *obj)
{
    PyObject **u = (PyObject **)((char *)obj + fast_uses_off);
    PyObject *h = fast_slot_get(obj, fast_handle_off);
    if (__builtin_expect((*u == fast_int0 || !*u) && h && PyLong_CheckExact(h), 1)) {
        void *v = PyLong_AsVoidPtr(h);
        if (__builtin_expect(v != NULL, 1)) {
            PyObject *old = *u;
            Py_INCREF(fast_int1);
            *u = fast_int1;
            Py_XDECREF(old);            /* fast_int0 holds a reference of its own */
            return v;
        }
    }
    return fast_use_slow(obj);
}

/* fast_use for an object whose handle value the caller has already (it
 * never changes while the object is open): count the call; 0, or -1 with
 * the exception its `handle` property raises (ClosedHandleError). Saves the
 * int conversion on the hot paths. */
static inline int fast_hold(PyObject *obj)
{
    PyObject **u = (PyObject **)((char *)obj + fast_uses_off);
    PyObject *h = fast_slot_get(obj, fast_handle_off);
    if (__builtin_expect((*u == fast_int0 || !*u) && h && h != Py_None, 1)) {
        PyObject *old = *u;
        Py_INCREF(fast_int1);
        *u = fast_int1;
        Py_XDECREF(old);
        return 0;
    }
    return fast_use_slow(obj) ? 0 : -1;
}

/* An argument's handle value, counted in use (fast_use); NULL with
 * TypeError for an object that is not a cuabi handle object (`what` names
 * the argument), or the exception its `handle` property raises. */
void *fast_use_arg(PyObject *obj, const char *what);

/* The call fast_use counted is over. Runs the release close() left to it
 * when it is the last one (keeping any exception set). */
static inline void fast_done(PyObject *obj)
{
    PyObject **u = (PyObject **)((char *)obj + fast_uses_off);
    PyObject *h = fast_slot_get(obj, fast_handle_off);
    if (__builtin_expect(*u == fast_int1 && h && h != Py_None, 1)) {
        Py_INCREF(fast_int0);
        *u = fast_int0;
        Py_DECREF(fast_int1);           /* never the last reference */
        return;
    }
    fast_done_slow(obj);
}

#endif
