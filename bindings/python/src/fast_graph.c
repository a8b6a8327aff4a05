/* cuabi._fast: the calls every captured graph makes -- capture begin and end,
 * a GraphBuilder's new graph, the default instantiate -- straight to the
 * library's table. Through ctypes each cost a few microseconds, and a
 * process's first capture paid tens of microseconds more for ctypes' first
 * calls (issue 24: a first capture as fast as cuda.core's). Same errors as
 * cuabi._graph's ctypes path: a closed object raises what its `handle`
 * property raises, named by the C function ("cuabi_graph_instantiate: Graph
 * is closed", as the ctypes path's), a failure the exception of its status
 * (fast_raise). */
#include "fast_graph.h"

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

/* cuabi_graph_capture_begin on the stream object: 0, or -1 with the error. */
static int begin_on(PyObject *stream, int mode)
{
    void *s = fast_use_arg(stream, "stream");
    if (!s)
        return fast_closed_in("cuabi_graph_capture_begin", stream);
    cuabi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fast_api->graph_capture_begin(s, (cuabi_capture_mode)mode);
    Py_END_ALLOW_THREADS
    fast_done(stream);
    return st == CUABI_SUCCESS ? 0 : fast_raise(st, "cuabi_graph_capture_begin");
}

/* cuabi_graph_capture_end on the stream object: 0 with the new graph
 * reference in *g, or -1 with the error. */
static int end_on(PyObject *stream, cuabi_graph **g)
{
    void *s = fast_use_arg(stream, "stream");
    if (!s)
        return fast_closed_in("cuabi_graph_capture_end", stream);
    cuabi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fast_api->graph_capture_end(g, s);
    Py_END_ALLOW_THREADS
    fast_done(stream);
    return st == CUABI_SUCCESS ? 0 : fast_raise(st, "cuabi_graph_capture_end");
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
    if (begin_on(args[0], mode) < 0)
        return NULL;
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
    void *s = fast_use_arg(args[0], "stream");
    if (!s)
        return fast_closed_in("cuabi_graph_capture_begin_to_graph", args[0]), NULL;
    void *g = fast_use_arg(args[1], "graph");
    if (!g) {
        fast_done(args[0]);
        return fast_closed_in("cuabi_graph_capture_begin_to_graph", args[1]), NULL;
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
    cuabi_graph *g = NULL;
    if (end_on(stream, &g) < 0)
        return NULL;
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
    void *g = fast_use_arg(graph, "graph");
    if (!g)
        return fast_closed_in("cuabi_graph_instantiate", graph), NULL;
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

/* What Graph.instantiate() makes (set_exec_class): a GraphExec as its _wrap
 * does, built here rather than by Python code run after the driver's
 * instantiate, which has left the caches cold (two H200s: the Python wrapper
 * cost ~10 us after a 100-node instantiate, 1 us warm; issue 24). */
static PyTypeObject *exec_type;         /* cuabi._graph.GraphExec */
static PyObject *exec_releaser;         /* GraphExec._releaser(): cuabi_graph_exec_destroy */
static PyObject *str_graphs;
/* _ReleaseOnDeath and its slots: set_capture_classes's (below), given first. */
static PyTypeObject *release_type;
static Py_ssize_t off_rel_fn, off_rel_value;
static PyObject *empty_args;           /* () (made at module init, below) */

/* graph_exec_new(graph) -> a GraphExec of the graph (default options) */
static PyObject *graph_exec_new(PyObject *self, PyObject *graph)
{
    if (!exec_type)
        return fast_not_attached(), NULL;
    PyObject *h = graph_instantiate(self, graph);
    if (!h)
        return NULL;
    PyObject *x = exec_type->tp_new(exec_type, empty_args, NULL);
    PyObject *rel = x ? release_type->tp_new(release_type, empty_args, NULL) : NULL;
    PyObject *graphs = rel ? PyList_New(1) : NULL;
    if (!graphs) {
        Py_XDECREF(rel);
        Py_XDECREF(x);
        fast_api->graph_exec_release(PyLong_AsVoidPtr(h));
        Py_DECREF(h);
        return NULL;
    }
    fast_slot_set(rel, off_rel_fn, exec_releaser);
    fast_slot_set(rel, off_rel_value, h);
    fast_slot_set(x, fast_handle_off, h);   /* from here the object owns the executable */
    fast_slot_set(x, fast_fin_off, rel);
    Py_DECREF(rel);
    Py_DECREF(h);
    Py_INCREF(graph);
    PyList_SET_ITEM(graphs, 0, graph);
    int r = PyObject_SetAttr(x, str_graphs, graphs);
    Py_DECREF(graphs);
    if (r < 0)
        Py_CLEAR(x);          /* its _ReleaseOnDeath releases the executable */
    return x;
}

/* set_exec_class(GraphExec, releaser), after set_capture_classes */
static PyObject *set_exec_class(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    if (n != 2 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "set_exec_class(GraphExec, releaser)");
        return NULL;
    }
    if (!fast_handle_type || !release_type)
        return fast_not_attached(), NULL;
    if (!PyType_IsSubtype((PyTypeObject *)args[0], fast_handle_type)) {
        PyErr_SetString(PyExc_TypeError, "set_exec_class: GraphExec must be a Handle class");
        return NULL;
    }
    if (!str_graphs && !(str_graphs = PyUnicode_InternFromString("_graphs")))
        return NULL;
    Py_INCREF(args[0]);
    Py_XSETREF(exec_type, (PyTypeObject *)args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(exec_releaser, args[1]);
    Py_RETURN_NONE;
}

/* ------------------------------------------------ `with stream.capture()`
 *
 * The context manager of cuabi._graph (its _Capture) compiled: a process's
 * first capture paid ~40 us more in Python than its later ones (bytecode run
 * for the first time, a WeakValueDictionary insert, a weakref.finalize),
 * where cuda.core's GraphBuilder is compiled (issue 24: a first capture as
 * fast as cuda.core's). Same objects as the Python one: a Graph placeholder
 * with a fresh _GraphState, its keep list in cuabi._callbacks.captures while
 * the capture runs, filled when the block ends (its release a
 * _ReleaseOnDeath), its state in the table of graph states. */

/* What cuabi._graph gives once (set_capture_classes). */
static PyTypeObject *graph_type;        /* cuabi._graph.Graph */
static PyTypeObject *state_type;        /* cuabi._graph._GraphState */
static PyObject *graph_releaser;        /* Graph._releaser(): cuabi_graph_release */
static PyObject *captures;              /* cuabi._callbacks.captures (a list) */
static PyObject *states;                /* handle value -> weakref.ref to its _GraphState */
static Py_ssize_t states_sweep_at = 64;
static Py_ssize_t off_keep, off_keys, off_kernels, off_meta, off_state_fin;
static PyObject *str_device_arg, *str_state, *str_keep, *str_keys, *str_kernels, *str_pending;
static PyObject *str_global, *str_thread_local, *str_relaxed;

/* The state of a live weak reference, or NULL (borrowed). */
static PyObject *weak_target(PyObject *ref)
{
    PyObject *o = PyWeakref_GetObject(ref);
    return o == Py_None ? NULL : o;
}

/* Drop the entries whose state is gone, once the table has doubled since
 * the last time: atomic under the GIL (no Python code runs here). */
static int states_sweep(void)
{
    PyObject *dead = PyList_New(0), *k, *v;
    Py_ssize_t pos = 0;
    if (!dead)
        return -1;
    while (PyDict_Next(states, &pos, &k, &v))
        if (!weak_target(v) && PyList_Append(dead, k) < 0) {
            Py_DECREF(dead);
            return -1;
        }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(dead); i++)
        if (PyDict_DelItem(states, PyList_GET_ITEM(dead, i)) < 0)
            PyErr_Clear();
    Py_DECREF(dead);
    Py_ssize_t n = PyDict_GET_SIZE(states);
    states_sweep_at = n * 2 > 64 ? n * 2 : 64;
    return 0;
}

static int states_set(PyObject *h, PyObject *state)
{
    PyObject *ref = PyWeakref_NewRef(state, NULL);
    if (!ref)
        return -1;
    int r = PyDict_SetItem(states, h, ref);
    Py_DECREF(ref);
    if (r == 0 && PyDict_GET_SIZE(states) >= states_sweep_at)
        r = states_sweep();
    return r;
}

/* graph_state_set(handle value, state): the table's write (cuabi._graph._StateTable). */
static PyObject *graph_state_set(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    if (!states)
        return fast_not_attached(), NULL;
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "graph_state_set(handle value, state)");
        return NULL;
    }
    if (states_set(args[0], args[1]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* A fresh _GraphState (its __init__'s fields); *keep: its keep list (borrowed). */
static PyObject *new_state(PyObject **keep)
{
    PyObject *st = state_type->tp_new(state_type, empty_args, NULL);
    PyObject *k = PyList_New(0), *keys = PyList_New(0);
    PyObject *kernels = PyDict_New(), *meta = PyDict_New();
    if (st && k && keys && kernels && meta) {
        fast_slot_set(st, off_keep, k);
        fast_slot_set(st, off_keys, keys);
        fast_slot_set(st, off_kernels, kernels);
        fast_slot_set(st, off_meta, meta);
        fast_slot_set(st, off_state_fin, Py_None);
        *keep = k;
    } else {
        Py_CLEAR(st);
    }
    Py_XDECREF(k);
    Py_XDECREF(keys);
    Py_XDECREF(kernels);
    Py_XDECREF(meta);
    return st;
}

/* Graph._placeholder(device): a graph filled when its capture ends. */
static PyObject *new_placeholder(PyObject *device, PyObject **keep)
{
    PyObject *st = new_state(keep);
    if (!st)
        return NULL;
    PyObject *g = graph_type->tp_new(graph_type, empty_args, NULL);
    if (!g || PyObject_SetAttr(g, str_device_arg, device) < 0 ||
        PyObject_SetAttr(g, str_state, st) < 0 ||
        PyObject_SetAttr(g, str_keep, *keep) < 0 ||
        PyObject_SetAttr(g, str_keys, fast_slot_get(st, off_keys)) < 0 ||
        PyObject_SetAttr(g, str_kernels, fast_slot_get(st, off_kernels)) < 0 ||
        PyObject_SetAttr(g, str_pending, Py_True) < 0)
        Py_CLEAR(g);
    else {
        fast_slot_set(g, fast_handle_off, Py_None);
        fast_slot_set(g, fast_fin_off, Py_None);
    }
    Py_DECREF(st);     /* the graph holds it */
    return g;
}

/* End the capture begun on `stream` and let its graph go, keeping the
 * exception set (a failure after the capture began). */
static void abandon(PyObject *stream)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    cuabi_graph *g = NULL;
    if (end_on(stream, &g) == 0)
        fast_api->graph_release(g);
    else
        PyErr_Clear();
    PyErr_Restore(t, v, tb);
}

/* Graph._fill: the graph placeholder `g` gets the new reference `cg` (its
 * release a _ReleaseOnDeath) and its state a place in the table. */
static int fill(PyObject *g, cuabi_graph *cg)
{
    PyObject *h = PyLong_FromVoidPtr(cg);
    PyObject *rel = h ? release_type->tp_new(release_type, empty_args, NULL) : NULL;
    if (!rel) {
        Py_XDECREF(h);
        fast_api->graph_release(cg);
        return -1;
    }
    fast_slot_set(rel, off_rel_fn, graph_releaser);
    fast_slot_set(rel, off_rel_value, h);
    fast_slot_set(g, fast_handle_off, h);    /* from here the graph owns cg */
    fast_slot_set(g, fast_fin_off, rel);
    Py_DECREF(rel);
    PyObject *st = NULL;
    int r = PyObject_SetAttr(g, str_pending, Py_False);
    if (r == 0)
        r = (st = PyObject_GetAttr(g, str_state)) ? states_set(h, st) : -1;
    Py_XDECREF(st);
    Py_DECREF(h);
    return r;
}

/* Take `keep` out of the captures in progress (the newest first). */
static int forget(PyObject *keep)
{
    for (Py_ssize_t i = PyList_GET_SIZE(captures); i-- > 0;)
        if (PyList_GET_ITEM(captures, i) == keep)
            return PyList_SetSlice(captures, i, i + 1, NULL);
    return 0;
}

typedef struct {
    PyObject_HEAD
    PyObject *stream;
    PyObject *graph;        /* the last __enter__'s; NULL before */
    PyObject *keep;         /* its keep list while the capture runs */
    int mode;
} Capture;

static int mode_of(PyObject *obj, int *mode)
{
    if (!PyUnicode_Check(obj))
        return mode_arg(obj, mode);
    if (PyUnicode_Compare(obj, str_global) == 0)
        *mode = CUABI_CAPTURE_MODE_GLOBAL;
    else if (PyUnicode_Compare(obj, str_thread_local) == 0)
        *mode = CUABI_CAPTURE_MODE_THREAD_LOCAL;
    else if (PyUnicode_Compare(obj, str_relaxed) == 0)
        *mode = CUABI_CAPTURE_MODE_RELAXED;
    else {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "capture mode must be one of ['global', 'relaxed', "
                         "'thread_local'], not %R", obj);
        return -1;
    }
    return 0;
}

static PyObject *capture_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"stream", "mode", NULL};
    PyObject *stream, *mode_obj = NULL;
    int mode = CUABI_CAPTURE_MODE_GLOBAL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:capture", kwlist, &stream, &mode_obj))
        return NULL;
    if (!graph_type)
        return fast_not_attached(), NULL;
    if (mode_obj && mode_of(mode_obj, &mode) < 0)
        return NULL;
    Capture *self = (Capture *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->stream = Py_NewRef(stream);
    self->mode = mode;
    return (PyObject *)self;
}

static PyObject *capture_enter(Capture *self, PyObject *unused)
{
    if (!fast_api)
        return fast_not_attached(), NULL;
    if (begin_on(self->stream, self->mode) < 0)
        return NULL;
    PyObject *keep = NULL;
    PyObject *g = new_placeholder(self->stream, &keep);   /* its device: read when needed */
    if (!g || PyList_Append(captures, keep) < 0) {
        Py_XDECREF(g);
        abandon(self->stream);
        return NULL;
    }
    Py_XSETREF(self->keep, Py_NewRef(keep));
    Py_XSETREF(self->graph, Py_NewRef(g));
    return g;
}

/* __exit__(exc_type, exc, tb): the graph is filled; after an exception in
 * the block the capture ends and makes no graph. */
static PyObject *capture_exit(Capture *self, PyObject *const *args, Py_ssize_t n)
{
    if (!self->graph || !self->keep) {
        PyErr_SetString(PyExc_RuntimeError, "the capture was not entered (use `with "
                        "stream.capture() as graph:`)");
        return NULL;
    }
    int failed = n > 0 && args[0] != Py_None;
    PyObject *keep = self->keep;
    self->keep = NULL;
    int r = forget(keep);
    Py_DECREF(keep);
    if (r < 0)
        return NULL;
    cuabi_graph *cg = NULL;
    if (end_on(self->stream, &cg) < 0) {
        if (!failed)
            return NULL;
        PyErr_Clear();          /* the block's own exception explains more */
        Py_RETURN_FALSE;
    }
    if (failed) {
        fast_api->graph_release(cg);
        Py_RETURN_FALSE;
    }
    if (fill(self->graph, cg) < 0)
        return NULL;
    Py_RETURN_FALSE;
}

static int capture_traverse(Capture *self, visitproc visit, void *arg)
{
    Py_VISIT(self->stream);
    Py_VISIT(self->graph);
    Py_VISIT(self->keep);
    return 0;
}

static int capture_clear(Capture *self)
{
    Py_CLEAR(self->stream);
    Py_CLEAR(self->graph);
    Py_CLEAR(self->keep);
    return 0;
}

static void capture_dealloc(Capture *self)
{
    PyObject_GC_UnTrack(self);
    capture_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *capture_graph(Capture *self, void *closure)
{
    return Py_NewRef(self->graph ? self->graph : Py_None);
}

static PyMethodDef capture_methods[] = {
    {"__enter__", (PyCFunction)capture_enter, METH_NOARGS,
     "Begin the capture: the Graph, filled when the block ends."},
    {"__exit__", (PyCFunction)(void (*)(void))capture_exit, METH_FASTCALL,
     "End the capture (no graph after an exception in the block)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef capture_getset[] = {
    {"graph", (getter)capture_graph, NULL, "The graph of the last `with` (None before).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Capture_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cuabi._fast.Capture",
    .tp_basicsize = sizeof(Capture),
    .tp_dealloc = (destructor)capture_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Capture(stream, mode='global'): `with stream.capture(mode) as graph:` -- the "
              "graph is filled when the block ends; an exception inside the block ends the "
              "capture and makes no graph.",
    .tp_traverse = (traverseproc)capture_traverse,
    .tp_clear = (inquiry)capture_clear,
    .tp_methods = capture_methods,
    .tp_getset = capture_getset,
    .tp_new = capture_new,
};

static int type_arg(PyObject *obj, PyTypeObject **out, const char *what)
{
    if (!PyType_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "set_capture_classes: %s must be a class", what);
        return -1;
    }
    Py_INCREF(obj);
    Py_XSETREF(*out, (PyTypeObject *)obj);
    return 0;
}

/* set_capture_classes(Graph, _GraphState, _ReleaseOnDeath, releaser,
 *                     captures, states) */
static PyObject *set_capture_classes(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    if (n != 6 || !PyList_CheckExact(args[4]) || !PyDict_CheckExact(args[5])) {
        PyErr_SetString(PyExc_TypeError, "set_capture_classes(Graph, _GraphState, "
                        "_ReleaseOnDeath, releaser, captures list, states dict)");
        return NULL;
    }
    if (!fast_handle_type)
        return fast_not_attached(), NULL;
    if (!PyType_Check(args[0]) ||
        !PyType_IsSubtype((PyTypeObject *)args[0], fast_handle_type)) {
        PyErr_SetString(PyExc_TypeError, "set_capture_classes: Graph must be a Handle class");
        return NULL;
    }
    if (fast_slot_offset(args[1], "keep", &off_keep) < 0 ||
        fast_slot_offset(args[1], "keys", &off_keys) < 0 ||
        fast_slot_offset(args[1], "kernels", &off_kernels) < 0 ||
        fast_slot_offset(args[1], "meta", &off_meta) < 0 ||
        fast_slot_offset(args[1], "_fin", &off_state_fin) < 0 ||
        fast_slot_offset(args[2], "fn", &off_rel_fn) < 0 ||
        fast_slot_offset(args[2], "value", &off_rel_value) < 0 ||
        type_arg(args[0], &graph_type, "Graph") < 0 ||
        type_arg(args[1], &state_type, "_GraphState") < 0 ||
        type_arg(args[2], &release_type, "_ReleaseOnDeath") < 0)
        return NULL;
    Py_INCREF(args[3]);
    Py_XSETREF(graph_releaser, args[3]);
    Py_INCREF(args[4]);
    Py_XSETREF(captures, args[4]);
    Py_INCREF(args[5]);
    Py_XSETREF(states, args[5]);
    Py_RETURN_NONE;
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
    {"graph_exec_new", graph_exec_new, METH_O,
     "graph_exec_new(graph) -> a GraphExec of the graph (default options; after set_exec_class)."},
    {"set_exec_class", (PyCFunction)(void (*)(void))set_exec_class, METH_FASTCALL,
     "set_exec_class(GraphExec, releaser): what graph_exec_new makes (once, after "
     "set_capture_classes)."},
    {"graph_state_set", (PyCFunction)(void (*)(void))graph_state_set, METH_FASTCALL,
     "graph_state_set(handle value, state): cuabi._graph's table of graph states, written."},
    {"set_capture_classes", (PyCFunction)(void (*)(void))set_capture_classes, METH_FASTCALL,
     "set_capture_classes(Graph, _GraphState, _ReleaseOnDeath, releaser, captures, states): "
     "what Capture makes (cuabi._graph, once)."},
    {NULL, NULL, 0, NULL},
};

int fast_graph_init(PyObject *module)
{
    empty_args = PyTuple_New(0);
    str_device_arg = PyUnicode_InternFromString("_device_arg");
    str_state = PyUnicode_InternFromString("_state");
    str_keep = PyUnicode_InternFromString("_keep");
    str_keys = PyUnicode_InternFromString("_keys");
    str_kernels = PyUnicode_InternFromString("_kernels");
    str_pending = PyUnicode_InternFromString("_pending");
    str_global = PyUnicode_InternFromString("global");
    str_thread_local = PyUnicode_InternFromString("thread_local");
    str_relaxed = PyUnicode_InternFromString("relaxed");
    if (!empty_args || !str_device_arg || !str_state || !str_keep || !str_keys || !str_kernels ||
        !str_pending || !str_global || !str_thread_local || !str_relaxed ||
        PyType_Ready(&Capture_Type) < 0 || PyModule_AddFunctions(module, methods) < 0)
        return -1;
    return PyModule_AddObject(module, "Capture", Py_NewRef((PyObject *)&Capture_Type));
}
