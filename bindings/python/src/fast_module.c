/* cuabi._fast: the compiled fast path of the Python package; this file is
 * the module (attach() and its checks) and the top of its layers.
 *
 * A CPython extension (C and Python.h only: it builds wherever the library
 * builds, from the dist tarball too). It never links libcuabi: cuabi._lib
 * loads the library with ctypes and hands this module the address of its
 * cuabi_get_api, so both layers use the same copy of the library (also the
 * one CUABI_LIBRARY names) through the plugin table.
 *
 * What it does (docs/python.md, "The compiled fast path"), in layers: a
 * file calls only files listed below it, through their headers (fast_X.h
 * declares what fast_X.c defines), and only this file calls the parts'
 * *_init functions (tests/test_import_layers.py checks both):
 *   fast_module.c    the module: attach(): table version, ABI version, every
 *                    struct layout checked against the library (the refusal
 *                    of docs/python.md "Loading and checks"); set_handle_class;
 *                    calls each part's *_init
 *   fast_exchange.c  the DLPackExchangeAPI table cuabi.View exports
 *                    (uses fast_view.c)
 *   fast_graph.c     graph capture begin and end, a new graph, the default
 *                    instantiate (what every captured graph calls)
 *   fast_stream.c    Stream.wait(stream)
 *   fast_launch.c    launch(stream, config, kernel, *args) and prepared
 *                    launches: one crossing into C, packing in C (uses
 *                    fast_pack.c)
 *   fast_view.c      from_dlpack(): numpy arrays from their C struct, torch
 *                    through its DLPack exchange table, lazy View objects
 *                    (uses fast_pack.c)
 *   fast_pack.c      kernel arguments to slot bytes, per slot kind
 *   fast_common.c    what every file shares: the attached library table,
 *                    errors raised as cuabi._lib raises them, reading
 *                    __slots__ of the package's Python classes, handle
 *                    arguments counted in use
 *
 * The rule of every fast path: it handles the common, well-defined cases
 * itself and hands anything else to the Python code the ctypes backend
 * runs, so both backends accept the same inputs and raise the same
 * exceptions. */
#include "fast_common.h"
#include "fast_exchange.h"
#include "fast_graph.h"
#include "fast_stream.h"
#include "fast_launch.h"
#include "fast_pack.h"
#include "fast_view.h"

#include <stddef.h>

typedef struct fast_layout {
    const char *type, *field;          /* field NULL: the struct's size */
    size_t value;
} fast_layout;

#include "generated.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

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
    if (PyList_GET_SIZE(problems) == 0)
        fast_set_attached(api, raiser);
    return problems;
fail:
    Py_DECREF(problems);
    return NULL;
}

/* set_handle_class(Handle, ClosedHandleError): the slots holding every
 * handle value, its count of calls in flight and its release. */
static PyObject *set_handle_class(PyObject *module, PyObject *args)
{
    PyObject *cls, *closed;
    if (!PyArg_ParseTuple(args, "OO:set_handle_class", &cls, &closed) ||
        fast_handles_setup(cls, closed) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"attach", attach, METH_VARARGS,
     "attach(get_api_address, raise_last) -> problems: bind to the library's plugin "
     "table after checking its version, ABI and struct layouts (empty list: attached)."},
    {"set_handle_class", set_handle_class, METH_VARARGS,
     "set_handle_class(Handle, ClosedHandleError): where handle objects keep their value, "
     "their calls in flight and their release (the _h, _uses and _fin slots)."},
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
        fast_handles_init(m) < 0 || fast_pack_init(m) < 0 || fast_launch_init(m) < 0 || fast_view_init(m) < 0 ||
        fast_exchange_init(m) < 0 || fast_graph_init(m) < 0 || fast_stream_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
