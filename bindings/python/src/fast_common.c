/* cuabi._fast, the bottom layer: the attached library, errors, slot
 * offsets (fast_common.h). Calls no other file of the extension. */
#include "fast_common.h"

#include <structmember.h>

const cuabi_api *fast_api;
static PyObject *raise_last;           /* cuabi._lib.raise_last */
Py_ssize_t fast_handle_off = -1;
Py_ssize_t fast_uses_off = -1;
Py_ssize_t fast_fin_off = -1;
PyObject *fast_int0, *fast_int1;
PyTypeObject *fast_handle_type;
static PyObject *closed_error;          /* cuabi.errors.ClosedHandleError */
static PyObject *str_handle;

void fast_set_attached(const cuabi_api *api, PyObject *raiser)
{
    fast_api = api;
    Py_INCREF(raiser);
    Py_XSETREF(raise_last, raiser);
}

int fast_raise(cuabi_status status, const char *where)
{
    if (!raise_last) {
        PyErr_Format(PyExc_RuntimeError, "%s failed (status %d)", where, (int)status);
        return -1;
    }
    PyObject *r = PyObject_CallFunction(raise_last, "is", (int)status, where);
    Py_XDECREF(r);
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_SystemError, "cuabi._fast: raise_last() returned for %s", where);
    return -1;
}

int fast_not_attached(void)
{
    PyErr_SetString(PyExc_RuntimeError,
                    "cuabi._fast is not attached to libcuabi (import cuabi first)");
    return -1;
}

int fast_slot_offset(PyObject *cls, const char *name, Py_ssize_t *offset)
{
    /* The member descriptor __slots__ creates for `name` in the class or a
     * base: an object slot at a fixed offset of every instance. */
    PyObject *d = NULL, *mro = PyType_Check(cls) ? ((PyTypeObject *)cls)->tp_mro : NULL;
    for (Py_ssize_t i = 0; mro && !d && i < PyTuple_GET_SIZE(mro); i++) {
        PyObject *dict = ((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_dict;
        d = dict ? PyDict_GetItemString(dict, name) : NULL;     /* borrowed */
    }
    if (!d || !PyObject_TypeCheck(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "cuabi._fast: %R has no slot %s", cls, name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX || (m->flags & READONLY)) {
        PyErr_Format(PyExc_TypeError, "cuabi._fast: %R.%s is not a writable object slot", cls,
                     name);
        return -1;
    }
    *offset = m->offset;
    return 0;
}

int fast_size_arg(PyObject *obj, const char *name, size_t max, size_t *out)
{
    if (PyLong_CheckExact(obj)) {
        size_t v = PyLong_AsSize_t(obj);
        if (!(v == (size_t)-1 && PyErr_Occurred()) && v <= max) {
            *out = v;
            return 0;
        }
        PyErr_Clear();
    }
    static PyObject *index_arg;            /* cuabi.errors.index_arg, found once */
    if (!index_arg) {
        PyObject *errors = PyImport_ImportModule("cuabi.errors");
        index_arg = errors ? PyObject_GetAttrString(errors, "index_arg") : NULL;
        Py_XDECREF(errors);
        if (!index_arg)
            return -1;
    }
    PyObject *hi = PyLong_FromSize_t(max);
    PyObject *r = hi ? PyObject_CallFunction(index_arg, "OsiO", obj, name, 0, hi) : NULL;
    Py_XDECREF(hi);
    if (!r)
        return -1;
    size_t v = PyLong_AsSize_t(r);
    Py_DECREF(r);
    if (v == (size_t)-1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

/* ------------------------------------------------------ handles in use */

int fast_handles_setup(PyObject *handle_class, PyObject *closed)
{
    Py_ssize_t h, u, f;
    if (fast_slot_offset(handle_class, "_h", &h) < 0 ||
        fast_slot_offset(handle_class, "_uses", &u) < 0 ||
        fast_slot_offset(handle_class, "_fin", &f) < 0)
        return -1;
    if (!PyType_Check(closed) || !PyType_IsSubtype((PyTypeObject *)closed,
                                                   (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "set_handle_class: an exception class is needed");
        return -1;
    }
    if (!fast_int0) {
        fast_int0 = PyLong_FromLong(0);
        fast_int1 = PyLong_FromLong(1);
        str_handle = PyUnicode_InternFromString("cuabi_handle");
        if (!fast_int0 || !fast_int1 || !str_handle)
            return -1;
    }
    Py_INCREF(closed);
    Py_XSETREF(closed_error, closed);
    Py_INCREF(handle_class);
    Py_XSETREF(fast_handle_type, (PyTypeObject *)handle_class);
    fast_handle_off = h, fast_uses_off = u, fast_fin_off = f;
    return 0;
}

static Py_ssize_t uses_of(PyObject *obj)
{
    PyObject *u = fast_slot_get(obj, fast_uses_off);
    if (!u || !PyLong_CheckExact(u))
        return 0;
    Py_ssize_t n = PyLong_AsSsize_t(u);
    if (n < 0) {
        PyErr_Clear();
        return 0;
    }
    return n;
}

static int set_uses(PyObject *obj, Py_ssize_t n)
{
    PyObject *v = n == 0 ? Py_NewRef(fast_int0) : n == 1 ? Py_NewRef(fast_int1)
                                                    : PyLong_FromSsize_t(n);
    if (!v)
        return -1;
    fast_slot_set(obj, fast_uses_off, v);
    Py_DECREF(v);
    return 0;
}

static int is_closed(PyObject *obj)
{
    PyObject *h = fast_slot_get(obj, fast_handle_off);
    return !h || h == Py_None;
}

/* obj is closed and no call is in flight: take its release out of _fin
 * (so it runs once) and run it, keeping the exception set, if any; a
 * release never raises (cuabi._handle._release). */
static void finish(PyObject *obj)
{
    PyObject *fin = fast_slot_get(obj, fast_fin_off);
    if (!fin || fin == Py_None)
        return;
    Py_INCREF(fin);
    fast_slot_set(obj, fast_fin_off, Py_None);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = PyObject_CallNoArgs(fin);
    if (r)
        Py_DECREF(r);
    else
        PyErr_Clear();
    PyErr_Restore(type, value, tb);
    Py_DECREF(fin);
}

void *fast_use_slow(PyObject *obj)
{
    if (fast_uses_off < 0)
        return fast_not_attached(), NULL;
    for (int pass = 0;; pass++) {
        PyObject *h = fast_slot_get(obj, fast_handle_off);
        if (h && PyLong_CheckExact(h)) {
            void *v = PyLong_AsVoidPtr(h);
            if (!v) {
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_ValueError, "%s has a NULL handle", Py_TYPE(obj)->tp_name);
                return NULL;
            }
            return set_uses(obj, uses_of(obj) + 1) < 0 ? NULL : v;
        }
        if (pass)
            break;
        /* Closed, a lazy view, a graph still capturing: what its `cuabi_handle`
         * property raises, or the C view it makes (Python code runs). */
        PyObject *r = PyObject_GetAttr(obj, str_handle);
        if (!r)
            return NULL;
        Py_DECREF(r);
    }
    PyErr_Format(closed_error, "%s is closed", Py_TYPE(obj)->tp_name);
    return NULL;
}

int fast_closed_in(const char *fn, PyObject *obj)
{
    if (closed_error && PyErr_ExceptionMatches(closed_error)) {
        PyErr_Clear();
        PyErr_Format(closed_error, "%s: %s is closed", fn, Py_TYPE(obj)->tp_name);
    }
    return -1;
}

void fast_done_slow(PyObject *obj)
{
    Py_ssize_t n = uses_of(obj) - 1;
    if (n < 0)
        n = 0;
    if (set_uses(obj, n) < 0) {     /* no int for the count: keep it (leaks, never frees early) */
        PyErr_Clear();
        return;
    }
    if (n == 0 && is_closed(obj))
        finish(obj);
}

/* handle_use(obj) -> handle value (an int) */
static int check_handle(PyObject *obj)
{
    if (fast_uses_off < 0)
        return fast_not_attached();
    if (!PyObject_TypeCheck(obj, fast_handle_type)) {
        PyErr_Format(PyExc_TypeError, "expected a cuabi handle object, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *handle_use(PyObject *module, PyObject *obj)
{
    if (check_handle(obj) < 0)
        return NULL;
    void *v = fast_use(obj);
    return v ? Py_NewRef(fast_slot_get(obj, fast_handle_off)) : NULL;
}

static PyObject *handle_done(PyObject *module, PyObject *obj)
{
    if (check_handle(obj) < 0)
        return NULL;
    fast_done(obj);
    Py_RETURN_NONE;
}

static PyObject *handle_close(PyObject *module, PyObject *obj)
{
    if (check_handle(obj) < 0)
        return NULL;
    fast_slot_set(obj, fast_handle_off, Py_None);
    if (uses_of(obj) == 0)
        finish(obj);
    Py_RETURN_NONE;
}

/* handle_swap_release(obj, fin) -> the release fin replaces (None if
 * none), or False when obj was closed already (fin is then not kept).
 * Closes obj; fin runs now when no call is in flight, else after the last
 * one. */
static PyObject *handle_swap_release(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "handle_swap_release(obj, fin)");
        return NULL;
    }
    PyObject *obj = args[0];
    if (check_handle(obj) < 0)
        return NULL;
    if (is_closed(obj))
        Py_RETURN_FALSE;
    PyObject *old = fast_slot_get(obj, fast_fin_off);
    old = Py_NewRef(old ? old : Py_None);
    fast_slot_set(obj, fast_fin_off, args[1]);
    fast_slot_set(obj, fast_handle_off, Py_None);
    if (uses_of(obj) == 0)
        finish(obj);
    return old;
}

static PyMethodDef handle_methods[] = {
    {"handle_use", handle_use, METH_O,
     "handle_use(obj) -> the handle value, one more call counted in flight on it "
     "(ClosedHandleError when closed)."},
    {"handle_done", handle_done, METH_O,
     "handle_done(obj): the call handle_use counted is over (the last one after a close "
     "releases the handle)."},
    {"handle_close", handle_close, METH_O,
     "handle_close(obj): closed now; released now or by the last call in flight."},
    {"handle_swap_release", (PyCFunction)(void (*)(void))handle_swap_release, METH_FASTCALL,
     "handle_swap_release(obj, fin) -> old release (False: closed already): close with fin "
     "as the release."},
    {NULL, NULL, 0, NULL},
};

int fast_handles_init(PyObject *module)
{
    return PyModule_AddFunctions(module, handle_methods);
}

void *fast_use_arg(PyObject *obj, const char *what)
{
    if (!fast_handle_type) {            /* set_handle_class not called yet */
        fast_not_attached();
        return NULL;
    }
    if (!PyObject_TypeCheck(obj, fast_handle_type)) {
        PyErr_Format(PyExc_TypeError, "%s must be a cuabi handle object, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return fast_use(obj);
}
