/* launch(stream, config, kernel, *args) and prepared launches, crossing
 * into C once.
 *
 * A plain launch packs its arguments straight into a pack made from the
 * kernel's parameter info (cuabi_argpack_blob_pointer), per slot kind
 * (fast_pack.c), and calls cuabi_launch with the GIL released. Per kernel,
 * a PlainLaunch keeps that pack; while one thread's launch is in flight
 * (GIL released), another thread launching the same kernel takes a second
 * pack ("lane") instead of overwriting the first one's arguments.
 *
 * Whatever is not the common case goes to cuabi._launch's Python code,
 * which the ctypes backend runs: a stream that is not a cuabi Stream (None,
 * foreign streams), a closed handle, an argument the compiled packer
 * leaves to Python (fast_pack.c). Errors are raised by the same Python
 * functions in both backends. A kernel's first launch makes its entries with
 * cuabi._launch._plain (so launch_py and graph nodes find theirs) and then
 * packs here: the Python packer of launch_py, generated per tuple of
 * argument types, is not built for a launch the compiled packer can do.
 *
 * A GraphBuilder (cuda.core's spelling of a capture) stands for its stream:
 * launches on it take that Stream here (its _cuabi_stream_), not a stream
 * wrapped again per launch by launch_py.
 *
 * A launch while a Python graph capture is in progress stays here too: it
 * hands its arguments to cuabi._callbacks.keep_for_captures afterwards, as
 * launch_py does (the capture's graph keeps what C cannot see: arrays passed
 * by address). Sending them to launch_py instead would pack them with its
 * own pack and Python packer, not the ones plain launches made and warmed. */
#include "fast_launch.h"
#include "fast_pack.h"

#include <string.h>

#define MAX_LANES 8

static PyTypeObject *stream_type, *config_type;
static Py_ssize_t config_addr_off = -1;     /* LaunchConfig._addr */
static Py_ssize_t config_held_off = -1;     /* LaunchConfig._held: the events its attributes
                                               name (a tuple), in use during a launch */
static PyTypeObject *argpack_type;          /* cuabi.ArgPack */
static Py_ssize_t argpack_held_off = -1;    /* ArgPack._held: the Buffers and Views its
                                               slots name (a tuple) */
static Py_ssize_t prepared_pack_off = -1;   /* PreparedLaunch._pack */
static PyObject *python_launch;             /* cuabi._launch.launch_py */
static PyObject *launch_failed;             /* cuabi._launch._launch_failed(status, kernel) */
static PyObject *captures;                  /* cuabi._callbacks.captures: Python graph
                                               captures in progress */
static PyObject *keep_for_captures;         /* cuabi._callbacks.keep_for_captures(args) */
static PyObject *kernel_setup;              /* cuabi._launch._plain(kernel): its entries */
static PyObject *str_launch_cache, *str_fast, *str_cuabi_stream;

typedef struct lane {
    void *pack;                 /* cuabi_argpack *, owned by `keep` */
    unsigned char *blob;        /* the pack's own storage */
    PyObject *packer;           /* Python: packer(*args) packs every argument or raises */
    PyObject *keep;             /* what owns pack and blob */
    int busy;                   /* a launch with this lane is in flight */
} lane;

typedef struct {
    PyObject_HEAD
    void *kernel;               /* cuabi_kernel * (the Kernel object owns it) */
    Py_ssize_t nslots;
    fast_arg_slot *slots;
    PyObject *new_lane;         /* () -> (pack, blob address, packer, keepalive) */
    int nlanes;
    lane lanes[MAX_LANES];
} PlainLaunch;

static int plain_traverse(PlainLaunch *self, visitproc visit, void *arg)
{
    Py_VISIT(self->new_lane);
    for (int i = 0; i < self->nlanes; i++) {
        Py_VISIT(self->lanes[i].packer);
        Py_VISIT(self->lanes[i].keep);
    }
    return 0;
}

static int plain_clear(PlainLaunch *self)
{
    Py_CLEAR(self->new_lane);
    for (int i = 0; i < self->nlanes; i++) {
        Py_CLEAR(self->lanes[i].packer);
        Py_CLEAR(self->lanes[i].keep);
        self->lanes[i].pack = NULL;
        self->lanes[i].blob = NULL;
    }
    self->nlanes = 0;
    return 0;
}

static void plain_dealloc(PlainLaunch *self)
{
    PyObject_GC_UnTrack(self);
    plain_clear(self);
    PyMem_Free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* PlainLaunch(kernel_handle, slots, new_lane): slots is a sequence of
 * (kind, size, offset) as cuabi_argpack_slot_* give them. */
static PyObject *plain_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *kh, *slots_obj, *new_lane;
    static char *kwlist[] = {"kernel", "slots", "new_lane", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO:PlainLaunch", kwlist, &kh, &slots_obj,
                                     &new_lane))
        return NULL;
    void *kernel = PyLong_AsVoidPtr(kh);
    if (!kernel) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "PlainLaunch: NULL kernel handle");
        return NULL;
    }
    if (!PyCallable_Check(new_lane)) {
        PyErr_SetString(PyExc_TypeError, "PlainLaunch: new_lane must be callable");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(slots_obj, "PlainLaunch: slots must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PlainLaunch *self = (PlainLaunch *)type->tp_alloc(type, 0);
    if (!self) {
        Py_DECREF(seq);
        return NULL;
    }
    self->slots = PyMem_Calloc((size_t)(n ? n : 1), sizeof *self->slots);
    if (!self->slots) {
        Py_DECREF(seq);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        fast_arg_slot *s = &self->slots[i];
        PyObject *sz, *off;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iOO", &s->kind, &sz, &off) ||
            fast_size_arg(sz, "PlainLaunch: slot size", PY_SSIZE_T_MAX, &s->size) < 0 ||
            fast_size_arg(off, "PlainLaunch: slot offset", PY_SSIZE_T_MAX, &s->offset) < 0) {
            Py_DECREF(seq);
            Py_DECREF(self);
            return NULL;
        }
    }
    Py_DECREF(seq);
    self->nslots = n;
    self->kernel = kernel;
    self->new_lane = Py_NewRef(new_lane);
    return (PyObject *)self;
}

static PyTypeObject PlainLaunch_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cuabi._fast.PlainLaunch",
    .tp_basicsize = sizeof(PlainLaunch),
    .tp_dealloc = (destructor)plain_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Per kernel: the packs plain launches pack into (see cuabi._launch).",
    .tp_traverse = (traverseproc)plain_traverse,
    .tp_clear = (inquiry)plain_clear,
    .tp_new = plain_new,
};

/* Whether `k` is a handle object (a Kernel: plain_of found its entry). The
 * last type that passed is remembered (a reference kept): one compare. */
static PyTypeObject *kernel_type_seen;
static int is_kernel(PyObject *k)
{
    if (__builtin_expect(Py_TYPE(k) == kernel_type_seen, 1))
        return 1;
    if (!PyObject_TypeCheck(k, fast_handle_type))
        return 0;
    Py_INCREF(Py_TYPE(k));
    Py_XSETREF(kernel_type_seen, Py_TYPE(k));
    return 1;
}

/* Count every object of `held` (a tuple of handle objects; NULL, None or
 * () for none) in use: 0, or -1 with the exception and none counted. */
static int use_all(PyObject *held)
{
    Py_ssize_t n = held && PyTuple_CheckExact(held) ? PyTuple_GET_SIZE(held) : 0, i;
    for (i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(held, i);
        if (!PyObject_TypeCheck(o, fast_handle_type)) {
            PyErr_Format(PyExc_TypeError, "cuabi: %.100s is not a cuabi handle object",
                         Py_TYPE(o)->tp_name);
            break;
        }
        if (!fast_use(o))
            break;
    }
    if (i == n)
        return 0;
    while (i-- > 0)
        fast_done(PyTuple_GET_ITEM(held, i));
    return -1;
}

static void done_all(PyObject *held)
{
    Py_ssize_t n = held && PyTuple_CheckExact(held) ? PyTuple_GET_SIZE(held) : 0;
    for (Py_ssize_t i = 0; i < n; i++)
        fast_done(PyTuple_GET_ITEM(held, i));
}

/* A lane no launch is using, marked busy; a new one when all are. */
static lane *take_lane(PlainLaunch *pl)
{
    for (int i = 0; i < pl->nlanes; i++)
        if (!pl->lanes[i].busy) {
            pl->lanes[i].busy = 1;
            return &pl->lanes[i];
        }
    if (pl->nlanes == MAX_LANES) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cuabi.launch: more than 8 threads launching one kernel at once "
                        "(use one PreparedLaunch per thread)");
        return NULL;
    }
    PyObject *r = PyObject_CallNoArgs(pl->new_lane);
    if (!r)
        return NULL;
    PyObject *pack, *blob, *packer, *keep;
    if (!PyArg_ParseTuple(r, "OOOO", &pack, &blob, &packer, &keep)) {
        Py_DECREF(r);
        return NULL;
    }
    lane *ln = &pl->lanes[pl->nlanes];
    ln->pack = PyLong_AsVoidPtr(pack);
    ln->blob = PyLong_AsVoidPtr(blob);
    if (PyErr_Occurred() || !ln->pack || !ln->blob) {
        Py_DECREF(r);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "cuabi.launch: a lane without pack or blob");
        return NULL;
    }
    ln->packer = Py_NewRef(packer);
    ln->keep = Py_NewRef(keep);
    ln->busy = 1;
    pl->nlanes++;
    Py_DECREF(r);
    return ln;
}

/* The kernel's compiled entry (_launch_cache["fast"], borrowed), made by
 * kernel_setup at its first launch. -1 with the exception of kernel_setup
 * (a closed kernel: what launch_py raises too); else 0, with *out NULL for
 * what is not a Kernel (launch_py says why). */
static int plain_of(PyObject *kernel, PlainLaunch **out)
{
    *out = NULL;
    PyObject *cache = PyObject_GetAttr(kernel, str_launch_cache);
    if (!cache) {
        PyErr_Clear();
        return 0;
    }
    PyObject *pl = NULL;
    if (PyDict_CheckExact(cache)) {
        pl = PyDict_GetItemWithError(cache, str_fast);
        if (!pl && !PyErr_Occurred()) {
            PyObject *r = PyObject_CallOneArg(kernel_setup, kernel);
            if (!r) {
                Py_DECREF(cache);
                return -1;
            }
            Py_DECREF(r);
            pl = PyDict_GetItemWithError(cache, str_fast);
        }
    }
    Py_DECREF(cache);                  /* the dict lives in the kernel: pl stays valid */
    if (!pl || Py_TYPE(pl) != &PlainLaunch_Type) {
        PyErr_Clear();
        return 0;
    }
    *out = (PlainLaunch *)pl;
    return 0;
}

/* Whether a launch argument needs no keeping by a graph: its value went
 * into the pack (Python numbers, None). Everything else -- Buffers and
 * arrays passed by address, numpy scalars alike -- is kept. */
static int plain_value(PyObject *a)
{
    PyTypeObject *tp = Py_TYPE(a);
    return tp == &PyLong_Type || tp == &PyFloat_Type || tp == &PyBool_Type || a == Py_None;
}

/* Hand a captured launch's arguments to the captures in progress (the
 * tuple launch_py's *args would be), as keep_for_captures does: appended
 * here to each keep-list (plain lists; anything else goes through
 * keep_for_captures) without a Python call per launch, which cost a
 * captured launch about 1,600 instructions (a third of it). Nothing is
 * kept for a launch whose arguments are all plain numbers. */
static int keep_arguments(PyObject *const *args, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n && plain_value(args[i]))
        i++;
    if (i == n)
        return 0;
    PyObject *t = PyTuple_New(n);
    if (!t)
        return -1;
    for (i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, i, Py_NewRef(args[i]));
    Py_ssize_t ncap = PyList_GET_SIZE(captures);
    for (i = 0; i < ncap && PyList_CheckExact(PyList_GET_ITEM(captures, i)); i++)
        ;
    int st = 0;
    if (i < ncap) {                            /* not all ours: the Python way */
        PyObject *r = PyObject_CallOneArg(keep_for_captures, t);
        st = r ? 0 : -1;
        Py_XDECREF(r);
    } else {
        /* PyList_Append runs no Python code: the captures cannot change
         * during the loop. */
        for (i = 0; st == 0 && i < ncap; i++)
            st = PyList_Append(PyList_GET_ITEM(captures, i), t);
    }
    Py_DECREF(t);
    return st;
}

/* The cuabi Stream that `obj` stands for (its _cuabi_stream_: a
 * GraphBuilder's stream), a new reference; NULL without an exception for
 * anything else (None, foreign streams: launch_py wraps those). */
static PyObject *stream_standing_for(PyObject *obj)
{
    if (obj == Py_None || PyLong_Check(obj))
        return NULL;
    PyObject *s = PyObject_GetAttr(obj, str_cuabi_stream);
    if (!s || Py_TYPE(s) != stream_type) {
        Py_XDECREF(s);
        PyErr_Clear();
        return NULL;
    }
    return s;
}

/* launch(stream, ...) with stream_obj a cuabi Stream: args[0] itself or the
 * Stream it stands for. Anything off goes to launch_py with args as given. */
static PyObject *launch_on(PyObject *stream_obj, PyObject *const *args, Py_ssize_t nargs)
{
    /* The kernel first, as launch_py takes it first (its errors come first);
     * the handles after it, since making its entries runs Python code. */
    PlainLaunch *pl;
    if (plain_of(args[2], &pl) < 0)
        return NULL;
    /* A closed stream: launch_py raises (after its own checks). */
    void *stream = fast_handle_value(fast_slot_get(stream_obj, fast_handle_off));
    const cuabi_launch_config *cfgp =
        fast_handle_value(fast_slot_get(args[1], config_addr_off));
    if (!pl || !stream || !cfgp)
        return PyObject_Vectorcall(python_launch, args, (size_t)nargs, NULL);
    /* A private copy, taken before any Python code runs (an argument's
     * data_ptr() could replace the config); other threads use it too. The
     * stream goes in once it is counted, below. */
    cuabi_launch_config cfg;
    memcpy(&cfg, cfgp, sizeof cfg);
    Py_INCREF(pl);                     /* the cache may change while Python code packs */
    lane *ln = take_lane(pl);
    if (!ln) {
        Py_DECREF(pl);
        return NULL;
    }
    Py_ssize_t n = nargs - 3;
    int packed = n == pl->nslots;
    for (Py_ssize_t i = 0; packed && i < n; i++)
        packed = fast_pack_arg(&pl->slots[i], ln->blob, args[3 + i]);
    if (!packed) {                     /* the Python packer: converts or raises */
        PyObject *r = PyObject_Vectorcall(ln->packer, args + 3, (size_t)n, NULL);
        if (!r) {
            ln->busy = 0;
            Py_DECREF(pl);
            return NULL;
        }
        Py_DECREF(r);
    }
    /* The stream, the kernel and the config's events are in use until the
     * launch returns: a close() on another thread meanwhile leaves their
     * release to fast_done (fast_common.h). Counted last: packing ran
     * Python code, which may have closed them (ClosedHandleError then). */
    void *pack = ln->pack, *kernel = pl->kernel;
    PyObject *held = fast_slot_get(args[1], config_held_off);
    if (held && (!PyTuple_CheckExact(held) || PyTuple_GET_SIZE(held) == 0))
        held = NULL;                   /* the common case: no events */
    Py_XINCREF(held);                  /* the config may drop it while we launch */
    cfg.stream = stream;
    if (fast_hold(stream_obj) < 0)
        goto unused;
    if (!is_kernel(args[2])) {         /* not a Kernel: launch_py's error */
        PyErr_SetString(PyExc_TypeError, "launch: kernel must be a cuabi.Kernel");
        goto unuse_stream;
    }
    if (fast_hold(args[2]) < 0)        /* its handle is pl->kernel (its own cache) */
        goto unuse_stream;
    if (held && use_all(held) < 0)
        goto unuse;
    cuabi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fast_api->launch(kernel, pack, &cfg);
    Py_END_ALLOW_THREADS
    ln->busy = 0;
    if (held) {
        done_all(held);
        Py_DECREF(held);
    }
    fast_done(args[2]);
    fast_done(stream_obj);
    Py_DECREF(pl);
    if (st != CUABI_SUCCESS) {
        PyObject *r = PyObject_CallFunction(launch_failed, "iO", (int)st, args[2]);
        Py_XDECREF(r);
        if (!PyErr_Occurred())
            fast_raise(st, "cuabi_launch");
        return NULL;
    }
    /* Checked after the launch, as launch_py does: the GIL was released. */
    if (PyList_GET_SIZE(captures) > 0 && keep_arguments(args + 3, n) < 0)
        return NULL;
    Py_RETURN_NONE;
unuse:
    fast_done(args[2]);
unuse_stream:
    fast_done(stream_obj);
unused:
    Py_XDECREF(held);
    ln->busy = 0;
    Py_DECREF(pl);
    return NULL;
}

static PyObject *launch(PyObject *module, PyObject *const *args, size_t nargsf,
                        PyObject *kwnames)
{
    if (!fast_api || !python_launch)
        return fast_not_attached(), NULL;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 3 || (kwnames && PyTuple_GET_SIZE(kwnames)) || Py_TYPE(args[1]) != config_type)
        return PyObject_Vectorcall(python_launch, args, nargsf, kwnames);
    if (Py_TYPE(args[0]) == stream_type)
        return launch_on(args[0], args, nargs);
    PyObject *own = stream_standing_for(args[0]);
    if (!own)
        return PyObject_Vectorcall(python_launch, args, (size_t)nargs, NULL);
    PyObject *r = launch_on(own, args, nargs);
    Py_DECREF(own);
    return r;
}

/* --------------------------------------------------------- prepared */

/* The Buffers and Views a PreparedLaunch's pack names (a new reference to
 * the pack's _held tuple, or NULL for none). */
static PyObject *pack_held(PyObject *prep)
{
    PyObject *pack = prepared_pack_off >= 0 ? fast_slot_get(prep, prepared_pack_off) : NULL;
    if (!pack || !argpack_type || !PyObject_TypeCheck(pack, argpack_type))
        return NULL;
    PyObject *held = fast_slot_get(pack, argpack_held_off);
    return held && PyTuple_CheckExact(held) && PyTuple_GET_SIZE(held) ? Py_NewRef(held) : NULL;
}

static PyObject *prepared_call(PyObject *self, PyObject *unused)
{
    if (!fast_api || fast_handle_off < 0)
        return fast_not_attached(), NULL;
    /* In use while it runs (a closed one raises ClosedHandleError, as the
     * ctypes layer's call does). */
    void *h = fast_use(self);
    if (!h)
        return NULL;
    PyObject *held = pack_held(self);
    if (use_all(held) < 0) {
        Py_XDECREF(held);
        fast_done(self);
        return NULL;
    }
    cuabi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fast_api->prepared_launch(h);
    Py_END_ALLOW_THREADS
    done_all(held);
    Py_XDECREF(held);
    fast_done(self);
    if (st != CUABI_SUCCESS)
        return fast_raise(st, "cuabi_prepared_launch"), NULL;
    Py_RETURN_NONE;
}

static PyMethodDef prepared_call_def = {
    "__call__", prepared_call, METH_NOARGS,
    "Launch again with the pack's current values (one call into C).",
};

/* BoundPrepared(prepared)(): cuabi_prepared_launch's status as an int,
 * never raising (PreparedLaunch.raw_launch). It holds a weak reference to
 * the PreparedLaunch (a strong one would make a cycle of the attribute
 * raw_launch), and counts the handle in use while it runs: a closed or
 * collected PreparedLaunch returns CUABI_ERROR_INVALID_HANDLE. */
typedef struct {
    PyObject_HEAD
    PyObject *ref;              /* weakref to the PreparedLaunch */
    void *h;                    /* its handle (it never changes while open) */
    vectorcallfunc vectorcall;
} BoundPrepared;

static PyObject *bound_call(PyObject *obj, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "raw_launch() takes no arguments");
        return NULL;
    }
    if (!fast_api)
        return fast_not_attached(), NULL;
    PyObject *prep = PyWeakref_GetObject(((BoundPrepared *)obj)->ref);   /* borrowed */
    if (!prep)
        return NULL;
    void *h = ((BoundPrepared *)obj)->h;
    if (prep == Py_None || !h)
        return PyLong_FromLong((long)CUABI_ERROR_INVALID_HANDLE);
    Py_INCREF(prep);
    if (fast_hold(prep) < 0) {             /* closed */
        Py_DECREF(prep);
        PyErr_Clear();
        return PyLong_FromLong((long)CUABI_ERROR_INVALID_HANDLE);
    }
    PyObject *held = pack_held(prep);
    if (use_all(held) < 0) {               /* a Buffer or View of the pack closed */
        Py_XDECREF(held);
        fast_done(prep);
        Py_DECREF(prep);
        PyErr_Clear();
        return PyLong_FromLong((long)CUABI_ERROR_INVALID_HANDLE);
    }
    cuabi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fast_api->prepared_launch(h);
    Py_END_ALLOW_THREADS
    done_all(held);
    Py_XDECREF(held);
    fast_done(prep);
    Py_DECREF(prep);
    return PyLong_FromLong((long)st);
}

static PyObject *bound_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *prep;
    if (!PyArg_ParseTuple(args, "O:BoundPrepared", &prep))
        return NULL;
    if (!fast_handle_type || !PyObject_TypeCheck(prep, fast_handle_type)) {
        PyErr_SetString(PyExc_TypeError, "BoundPrepared(prepared): a cuabi.PreparedLaunch");
        return NULL;
    }
    PyObject *ref = PyWeakref_NewRef(prep, NULL);
    if (!ref)
        return NULL;
    BoundPrepared *self = (BoundPrepared *)type->tp_alloc(type, 0);
    if (!self) {
        Py_DECREF(ref);
        return NULL;
    }
    self->ref = ref;
    self->h = fast_handle_value(fast_slot_get(prep, fast_handle_off));
    self->vectorcall = bound_call;
    return (PyObject *)self;
}

static void bound_dealloc(BoundPrepared *self)
{
    Py_XDECREF(self->ref);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject BoundPrepared_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cuabi._fast.BoundPrepared",
    .tp_basicsize = sizeof(BoundPrepared),
    .tp_dealloc = (destructor)bound_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(BoundPrepared, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_doc = "cuabi_prepared_launch bound to one PreparedLaunch (weakly): calling it returns "
              "the status.",
    .tp_new = bound_new,
};

/* launch_setup(Stream, LaunchConfig, PreparedLaunch, launch_py, launch_failed,
 * captures, keep_for_captures, kernel_setup, ArgPack) -> the method
 * descriptor to install as PreparedLaunch.__call__. */
static PyObject *launch_setup(PyObject *module, PyObject *args)
{
    PyObject *stream, *config, *prepared, *py, *failed, *caps, *keep, *setup, *argpack;
    if (!PyArg_ParseTuple(args, "O!O!O!OOO!OOO!:launch_setup", &PyType_Type, &stream,
                          &PyType_Type, &config, &PyType_Type, &prepared, &py, &failed,
                          &PyList_Type, &caps, &keep, &setup, &PyType_Type, &argpack))
        return NULL;
    if (!PyCallable_Check(keep) || !PyCallable_Check(setup)) {
        PyErr_SetString(PyExc_TypeError,
                        "launch_setup: keep_for_captures and kernel_setup must be callable");
        return NULL;
    }
    if (fast_handle_off < 0)
        return fast_not_attached(), NULL;
    Py_ssize_t off, held_off, pack_off, pack_held_off;
    if (fast_slot_offset(config, "_addr", &off) < 0 ||
        fast_slot_offset(config, "_held", &held_off) < 0 ||
        fast_slot_offset(prepared, "_pack", &pack_off) < 0 ||
        fast_slot_offset(argpack, "_held", &pack_held_off) < 0)
        return NULL;
    PyObject *descr = PyDescr_NewMethod((PyTypeObject *)prepared, &prepared_call_def);
    if (!descr)
        return NULL;
    config_addr_off = off;
    config_held_off = held_off;
    prepared_pack_off = pack_off;
    argpack_held_off = pack_held_off;
    Py_INCREF(argpack);
    Py_XSETREF(argpack_type, (PyTypeObject *)argpack);
    Py_INCREF(stream);
    Py_XSETREF(stream_type, (PyTypeObject *)stream);
    Py_INCREF(config);
    Py_XSETREF(config_type, (PyTypeObject *)config);
    Py_INCREF(py);
    Py_XSETREF(python_launch, py);
    Py_INCREF(failed);
    Py_XSETREF(launch_failed, failed);
    Py_INCREF(caps);
    Py_XSETREF(captures, caps);
    Py_INCREF(keep);
    Py_XSETREF(keep_for_captures, keep);
    Py_INCREF(setup);
    Py_XSETREF(kernel_setup, setup);
    return descr;
}

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL | METH_KEYWORDS,
     "launch(stream, config, kernel, *args)\n\n"
     "Launch `kernel(*args)` on `stream` (a cuabi Stream, a foreign stream or None for "
     "the legacy default stream). Arguments are packed in C straight into the kernel's "
     "pack, then one call to cuabi_launch; see docs/python.md for what each parameter "
     "accepts."},
    {"launch_setup", launch_setup, METH_VARARGS,
     "launch_setup(Stream, LaunchConfig, PreparedLaunch, launch_py, launch_failed, captures, "
     "keep_for_captures, kernel_setup, ArgPack) -> the compiled PreparedLaunch.__call__."},
    {NULL, NULL, 0, NULL},
};

int fast_launch_init(PyObject *module)
{
    str_launch_cache = PyUnicode_InternFromString("_launch_cache");
    str_fast = PyUnicode_InternFromString("fast");
    str_cuabi_stream = PyUnicode_InternFromString("_cuabi_stream_");
    if (!str_launch_cache || !str_fast || !str_cuabi_stream ||
        PyType_Ready(&PlainLaunch_Type) < 0 || PyType_Ready(&BoundPrepared_Type) < 0 ||
        PyModule_AddFunctions(module, methods) < 0)
        return -1;
    if (PyModule_AddObject(module, "PlainLaunch", Py_NewRef((PyObject *)&PlainLaunch_Type)) < 0 ||
        PyModule_AddObject(module, "BoundPrepared",
                           Py_NewRef((PyObject *)&BoundPrepared_Type)) < 0)
        return -1;
    return 0;
}
