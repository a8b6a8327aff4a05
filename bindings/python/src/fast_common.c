/* cuabi._fast, the bottom layer: the attached library, errors, slot
 * offsets (fast_common.h). Calls no other file of the extension. */
#include "fast_common.h"

#include <structmember.h>

const cuabi_api *fast_api;
static PyObject *raise_last;           /* cuabi._lib.raise_last */
Py_ssize_t fast_handle_off = -1;

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
