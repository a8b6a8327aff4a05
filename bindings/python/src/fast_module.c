/* cuabi._fast: module, attach() and its checks, errors, slot offsets. */
#include "fast.h"

#include <stddef.h>
#include <string.h>
#include <structmember.h>

const cuabi_api *fast_api;
static PyObject *raise_last;           /* cuabi._lib.raise_last */
Py_ssize_t fast_handle_off = -1;

typedef struct fast_layout {
    const char *type, *field;          /* field NULL: the struct's size */
    size_t value;
} fast_layout;

#include "generated.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

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

/* ------------------------------------------------------------- attach() */

static int add(PyObject *list, PyObject *item)
{
    if (!item)
        return -1;
    int r = PyList_Append(list, item);
    Py_DECREF(item);
    return r;
}

/* ("layout", text) for every struct or field whose size or offset in the
 * library differs from this extension's (the same headers as the ctypes
 * layer's generated declarations). */
static int check_layouts(const cuabi_api *api, PyObject *problems)
{
    for (size_t i = 0; i < COUNT(fast_layouts); i++) {
        const fast_layout *e = &fast_layouts[i];
        size_t lib = 0;
        cuabi_status st = e->field ? api->struct_field_offset(&lib, e->type, e->field)
                                   : api->struct_size(&lib, e->type);
        PyObject *msg = NULL;
        if (st != CUABI_SUCCESS)
            msg = PyUnicode_FromFormat("%s%s%s: unknown to the library", e->type,
                                       e->field ? "." : "", e->field ? e->field : "");
        else if (lib != e->value)
            msg = PyUnicode_FromFormat("%s%s%s: %s %zu in the library, %zu in the binding",
                                       e->type, e->field ? "." : "", e->field ? e->field : "",
                                       e->field ? "offset" : "size", lib, e->value);
        if (msg && add(problems, Py_BuildValue("(sN)", "layout", msg)) < 0)
            return -1;
    }
    return 0;
}

/* attach(get_api_address, raise_last) -> list of problems, each a tuple
 * ("table", text) / ("missing", [names]) / ("abi", library, binding) /
 * ("layout", text). Empty: attached. cuabi._lib turns problems into the
 * CuabiImportError the ctypes checks raise. */
static PyObject *attach(PyObject *module, PyObject *args)
{
    PyObject *address, *raiser;
    if (!PyArg_ParseTuple(args, "OO:attach", &address, &raiser))
        return NULL;
    cuabi_get_api_fn get_api = (cuabi_get_api_fn)PyLong_AsVoidPtr(address);
    if (!get_api) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "attach: the address of cuabi_get_api is NULL");
        return NULL;
    }
    if (!PyCallable_Check(raiser)) {
        PyErr_SetString(PyExc_TypeError, "attach: raise_last must be callable");
        return NULL;
    }
    PyObject *problems = PyList_New(0);
    if (!problems)
        return NULL;
    const cuabi_api *api = NULL;
    cuabi_status st = get_api(CUABI_API_TABLE_VERSION, &api);
    if (st != CUABI_SUCCESS || !api) {
        if (add(problems, Py_BuildValue("(ss)", "table",
                                        "cuabi_get_api refused this binding's table version")) < 0)
            goto fail;
    } else if (api->size < sizeof(cuabi_api)) {
        /* An older library: the table ends before this binding's functions. */
        size_t have = (api->size - offsetof(cuabi_api, size) - sizeof(size_t)) / sizeof(void (*)(void));
        PyObject *names = PyList_New(0);
        if (!names)
            goto fail;
        for (size_t i = have; i < COUNT(fast_table_functions); i++)
            if (add(names, PyUnicode_FromString(fast_table_functions[i])) < 0) {
                Py_DECREF(names);
                goto fail;
            }
        if (add(problems, Py_BuildValue("(sN)", "missing", names)) < 0)
            goto fail;
    } else if (api->abi_version() != CUABI_ABI_VERSION) {
        if (add(problems, Py_BuildValue("(sII)", "abi", api->abi_version(),
                                        (unsigned)CUABI_ABI_VERSION)) < 0)
            goto fail;
    } else if (check_layouts(api, problems) < 0) {
        goto fail;
    }
    if (PyList_GET_SIZE(problems) == 0) {
        fast_api = api;
        Py_INCREF(raiser);
        Py_XSETREF(raise_last, raiser);
    }
    return problems;
fail:
    Py_DECREF(problems);
    return NULL;
}

/* set_handle_class(Handle): the slot holding every handle value. */
static PyObject *set_handle_class(PyObject *module, PyObject *cls)
{
    if (fast_slot_offset(cls, "_h", &fast_handle_off) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"attach", attach, METH_VARARGS,
     "attach(get_api_address, raise_last) -> problems: bind to the library's plugin "
     "table after checking its version, ABI and struct layouts (empty list: attached)."},
    {"set_handle_class", set_handle_class, METH_O,
     "set_handle_class(Handle): where handle objects keep their value (the _h slot)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "cuabi._fast",
    "The compiled fast path of cuabi (docs/python.md): launches, prepared launches, "
    "from_dlpack and the DLPack C exchange API.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fast(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (PyModule_AddIntConstant(m, "ABI_VERSION", CUABI_ABI_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "API_TABLE_VERSION", CUABI_API_TABLE_VERSION) < 0 ||
        fast_pack_init(m) < 0 || fast_launch_init(m) < 0 || fast_view_init(m) < 0 ||
        fast_exchange_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
