/* cuabi._fast: the calls every captured graph makes -- capture begin and end,
 * a GraphBuilder's new graph, the default instantiate -- straight to the
 * library's table. Through ctypes each cost a few microseconds, and a
 * process's first capture paid tens of microseconds more for ctypes' first
 * calls (issue 24: a first capture as fast as cuda.core's). Same errors as
 * cuabi._graph's ctypes path: a closed object raises what its `handle`
 * property raises, a failure the exception of its status (fast_raise). */
#include "fast_graph.h"

/* obj's handle value, counted in use (fast_use); NULL with TypeError for an
 * object that is not a cuabi handle object. */
static void *use_handle(PyObject *obj, const char *what)
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

static int mode_arg(PyObject *obj, int *mode)
{
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0 || v > CUABI_CAPTURE_MODE_RELAXED) {
        PyErr_Format(PyExc_ValueError, "%ld is not a capture mode", v);
        return -1;
    }
    *mode = (int)v;
    return 0;
}

/* graph_capture_begin(stream, mode) */
static PyObject *capture_begin(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    int mode;
    if (!fast_api)
        return fast_not_attached(), NULL;
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "graph_capture_begin(stream, mode)");
        return NULL;
    }
    if (mode_arg(args[1], &mode) < 0)
        return NULL;
    void *s = use_handle(args[0], "stream");
    if (!s)
        return NULL;
    cuabi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fast_api->graph_capture_begin(s, (cuabi_capture_mode)mode);
    Py_END_ALLOW_THREADS
    fast_done(args[0]);
    if (st != CUABI_SUCCESS)
        return fast_raise(st, "cuabi_graph_capture_begin"), NULL;
    Py_RETURN_NONE;
}

/* graph_capture_begin_to_graph(stream, graph, mode) */
static PyObject *capture_begin_to_graph(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    int mode;
    if (!fast_api)
        return fast_not_attached(), NULL;
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "graph_capture_begin_to_graph(stream, graph, mode)");
        return NULL;
    }
    if (mode_arg(args[2], &mode) < 0)
        return NULL;
    void *s = use_handle(args[0], "stream");
    if (!s)
        return NULL;
    void *g = use_handle(args[1], "graph");
    if (!g) {
        fast_done(args[0]);
        return NULL;
    }
    cuabi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fast_api->graph_capture_begin_to_graph(s, g, (cuabi_capture_mode)mode);
    Py_END_ALLOW_THREADS
    fast_done(args[1]);
    fast_done(args[0]);
    if (st != CUABI_SUCCESS)
        return fast_raise(st, "cuabi_graph_capture_begin_to_graph"), NULL;
    Py_RETURN_NONE;
}

/* graph_capture_end(stream) -> the new graph reference's handle value (an int) */
static PyObject *capture_end(PyObject *self, PyObject *stream)
{
    if (!fast_api)
        return fast_not_attached(), NULL;
    void *s = use_handle(stream, "stream");
    if (!s)
        return NULL;
    cuabi_graph *g = NULL;
    cuabi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fast_api->graph_capture_end(&g, s);
    Py_END_ALLOW_THREADS
    fast_done(stream);
    if (st != CUABI_SUCCESS)
        return fast_raise(st, "cuabi_graph_capture_end"), NULL;
    PyObject *v = PyLong_FromVoidPtr(g);
    if (!v)
        fast_api->graph_release(g);     /* no Python object will own it */
    return v;
}

/* graph_create() -> a new empty graph's handle value */
static PyObject *graph_create(PyObject *self, PyObject *unused)
{
    if (!fast_api)
        return fast_not_attached(), NULL;
    cuabi_graph *g = NULL;
    cuabi_status st = fast_api->graph_create(&g);
    if (st != CUABI_SUCCESS)
        return fast_raise(st, "cuabi_graph_create"), NULL;
    PyObject *v = PyLong_FromVoidPtr(g);
    if (!v)
        fast_api->graph_release(g);
    return v;
}

/* graph_instantiate(graph) -> the executable's handle value (default options) */
static PyObject *graph_instantiate(PyObject *self, PyObject *graph)
{
    if (!fast_api)
        return fast_not_attached(), NULL;
    void *g = use_handle(graph, "graph");
    if (!g)
        return NULL;
    cuabi_graph_exec *e = NULL;
    cuabi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fast_api->graph_instantiate(&e, g, NULL);
    Py_END_ALLOW_THREADS
    fast_done(graph);
    if (st != CUABI_SUCCESS)
        return fast_raise(st, "cuabi_graph_instantiate"), NULL;
    PyObject *v = PyLong_FromVoidPtr(e);
    if (!v)
        fast_api->graph_exec_release(e);
    return v;
}

static PyMethodDef methods[] = {
    {"graph_capture_begin", (PyCFunction)(void (*)(void))capture_begin, METH_FASTCALL,
     "graph_capture_begin(stream, mode): cuabi_graph_capture_begin."},
    {"graph_capture_begin_to_graph", (PyCFunction)(void (*)(void))capture_begin_to_graph,
     METH_FASTCALL, "graph_capture_begin_to_graph(stream, graph, mode)."},
    {"graph_capture_end", capture_end, METH_O,
     "graph_capture_end(stream) -> the captured graph's handle value (a new reference)."},
    {"graph_create", graph_create, METH_NOARGS,
     "graph_create() -> a new empty graph's handle value."},
    {"graph_instantiate", graph_instantiate, METH_O,
     "graph_instantiate(graph) -> the executable's handle value (default options)."},
    {NULL, NULL, 0, NULL},
};

int fast_graph_init(PyObject *module)
{
    return PyModule_AddFunctions(module, methods);
}
