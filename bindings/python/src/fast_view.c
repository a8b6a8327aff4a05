/* from_dlpack() without a stream, per type of array (the handler is chosen
 * once per type by cuabi._view._fast_handler_for):
 *
 *   numpy.ndarray    its C struct (PyArrayObject, numpy's ABI; the offsets
 *                    are checked on probe arrays by cuabi._view first), as
 *                    the Python handler reads it, into a lazy View;
 *   torch.Tensor     its DLPack exchange table's dltensor_from_py_object_
 *                    no_sync (one C call, no attribute read) into a lazy
 *                    View owning the tensor;
 *   any other type   with an exchange table: its owning export straight
 *                    into the C import (cuabi_view_from_exchange);
 *   everything else  the Python handler (CuPy, CUDA array interface,
 *                    capsules, views, ...).
 *
 * A case the C code does not take (an unusual dtype or layout, a failing
 * exchange function) goes to the Python handler of the same type, which
 * decides exactly as with the ctypes backend. */
#include "fast_view.h"
#include "fast_pack.h"

#include <stdbool.h>
#include <string.h>

enum { H_PYTHON = 0, H_NUMPY = 1, H_DLTENSOR = 2, H_MANAGED = 3 };

typedef struct {
    PyObject_HEAD
    int kind;
    PyObject *fallback;                 /* the Python handler of this type */
    const DLPackExchangeAPI *table;     /* H_DLTENSOR, H_MANAGED */
} Handler;

static void handler_dealloc(Handler *self)
{
    Py_XDECREF(self->fallback);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject Handler_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cuabi._fast._Handler",
    .tp_basicsize = sizeof(Handler),
    .tp_dealloc = (destructor)handler_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "How from_dlpack() reads one type of array (cached per type).",
};

static PyTypeObject *view_type;
static Py_ssize_t off_h = -1, off_fin, off_info, off_stream, off_owner, off_d;
static PyObject *python_from_dlpack;    /* cuabi._view.from_dlpack_py */
static PyObject *handler_for;           /* cuabi._view._fast_handler_for(type) */
static PyObject *view_new;              /* View._new(handle) */
static PyObject *handlers;              /* type -> Handler */
static PyObject *str_stream, *str_dlpack_device, *str_is_conj;
static PyTypeObject *stream_type;       /* cuabi.Stream: stream= the C route takes */
static PyObject *python_from_producer;  /* cuabi._view._from_producer(obj, stream) */
static int supported[16][17];           /* [dtype code][bits / 8]: a view dtype */

PyTypeObject *fast_view_type(void) { return view_type; }

/* A View with description `d` and no C view (cuabi._view._lazy). */
PyObject *fast_view_new_lazy(PyObject *d, PyObject *owner, PyObject *stream)
{
    PyObject *v = view_type->tp_alloc(view_type, 0);
    if (!v)
        return NULL;
    fast_slot_set(v, off_h, Py_None);
    fast_slot_set(v, off_fin, Py_None);
    fast_slot_set(v, off_info, Py_None);
    fast_slot_set(v, off_stream, stream ? stream : Py_None);
    fast_slot_set(v, off_owner, owner);
    fast_slot_set(v, off_d, d);
    return v;
}

PyObject *fast_view_from_handle(void *view)
{
    PyObject *h = PyLong_FromVoidPtr(view);
    PyObject *v = h ? PyObject_CallOneArg(view_new, h) : NULL;
    Py_XDECREF(h);
    if (!v)
        fast_api->view_release(view);
    return v;
}

static PyObject *int64_tuple(int n, const int64_t *values)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *x = PyLong_FromLongLong(values[i]);
        if (!x) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* (ptr, device type, device id, code, bits, shape, strides, flags, unit):
 * the lazy description of cuabi._view (strides None = row-major; in units
 * of `unit` bytes). Steals shape and strides. */
static PyObject *description(uintptr_t ptr, int dev_type, int dev_id, int code, int bits,
                             PyObject *shape, PyObject *strides, unsigned flags, int unit)
{
    if (!shape || !strides) {
        Py_XDECREF(shape);
        Py_XDECREF(strides);
        return NULL;
    }
    /* Built item by item: Py_BuildValue parses its format on every call,
     * a measurable part of a 0.4 us from_dlpack. */
    PyObject *d = PyTuple_New(9);
    if (!d) {
        Py_DECREF(shape);
        Py_DECREF(strides);
        return NULL;
    }
    PyObject *items[9] = {PyLong_FromSize_t(ptr), PyLong_FromLong(dev_type),
                          PyLong_FromLong(dev_id), PyLong_FromLong(code), PyLong_FromLong(bits),
                          shape, strides, PyLong_FromUnsignedLong(flags), PyLong_FromLong(unit)};
    for (int i = 0; i < 9; i++) {
        if (!items[i]) {
            for (int j = i + 1; j < 9; j++)
                Py_XDECREF(items[j]);
            Py_DECREF(d);   /* drops the items set so far */
            return NULL;
        }
        PyTuple_SET_ITEM(d, i, items[i]);
    }
    return d;
}

static int dtype_supported(int code, int bits, int lanes)
{
    return lanes == 1 && code >= 0 && code < 16 && bits > 0 && bits % 8 == 0 && bits <= 128 &&
           supported[code][bits / 8];
}

/* ------------------------------------------------------------ numpy */

/* PyArrayObject_fields offsets and the native built-in dtypes, from
 * numpy_setup() (checked against probe arrays there). */
static struct {
    PyTypeObject *type;
    Py_ssize_t data, nd, dims, strides, base, descr, flags;
    long c_contiguous, writeable;
    int ndtypes;
    struct { PyObject *descr; int code, bits, itemsize; } dtypes[16];
} np = {.type = NULL};

/* cuabi._view._layout_ok: whether the C import accepts the layout (byte
 * strides; NULL = row-major) with its first element at `ptr`. Exact, like
 * Python's unbounded integers: the count times the item size, the lowest
 * and the highest byte reached fit in 63 bits, and no element's address
 * wraps around the address space. */
static int layout_ok(int nd, const int64_t *shape, const int64_t *strides, int64_t itemsize,
                     uintptr_t ptr)
{
    if (nd > CUABI_VIEW_MAX_NDIM)
        return 0;
    for (int i = 0; i < nd; i++)
        if (shape[i] < 0)
            return 0;
    for (int i = 0; i < nd; i++)
        if (shape[i] == 0)
            return 1;
    const __int128 limit = (__int128)1 << 63;
    __int128 n = 1;
    for (int i = 0; i < nd; i++) {
        n *= shape[i];
        if (n >= limit)
            return 0;
    }
    if (!ptr || n * itemsize >= limit)
        return 0;
    __int128 lo = 0, end = n * itemsize;
    if (strides) {
        __int128 hi = 0;
        for (int i = 0; i < nd; i++) {
            if (shape[i] == 1)
                continue;
            __int128 r = (__int128)(shape[i] - 1) * strides[i];
            if (r > 0)
                hi += r;
            else
                lo += r;
        }
        end = hi + itemsize;
        if (-lo > limit || end >= limit)
            return 0;
    }
    return (__int128)ptr + lo >= 0 && (__int128)ptr + end <= ((__int128)1 << 64);
}

/* cuabi._view._np_strides_ok for a non-C-contiguous array at `ptr`. */
static int np_strides_ok(int nd, const int64_t *shape, const int64_t *strides, int itemsize,
                         uintptr_t ptr)
{
    __int128 size = 1;
    for (int i = 0; i < nd; i++)
        size *= shape[i];
    if (size != 1)
        for (int i = 0; i < nd; i++)
            if (shape[i] != 1 && strides[i] % itemsize)
                return 0;
    return layout_ok(nd, shape, strides, itemsize, ptr);
}

/* *handled = 0: the Python handler decides. */
static PyObject *numpy_view(PyObject *a, int *handled)
{
    const char *base = (const char *)a;
    PyObject *descr = *(PyObject *const *)(base + np.descr);
    int k = 0;
    while (k < np.ndtypes && np.dtypes[k].descr != descr)
        k++;
    *handled = 0;
    if (k == np.ndtypes)
        return NULL;
    int code = np.dtypes[k].code, bits = np.dtypes[k].bits, isz = np.dtypes[k].itemsize;
    int nd = *(const int *)(base + np.nd);
    long flags = *(const int *)(base + np.flags);
    const int64_t *dims = *(int64_t *const *)(base + np.dims);
    const int64_t *strides = *(int64_t *const *)(base + np.strides);
    if (nd < 0 || nd > CUABI_VIEW_MAX_NDIM ||
        (!(flags & np.c_contiguous) &&
         !np_strides_ok(nd, dims, strides, isz, *(const uintptr_t *)(base + np.data))))
        return NULL;
    int dev_type = 1, dev_id = 0;
    if (*(PyObject *const *)(base + np.base)) {
        /* Arrays from a capsule report the capsule's device. */
        PyObject *dev = PyObject_CallMethodNoArgs(a, str_dlpack_device);
        if (!dev)
            return NULL;
        int ok = PyArg_ParseTuple(dev, "ii", &dev_type, &dev_id);
        Py_DECREF(dev);
        if (!ok) {
            PyErr_Clear();
            return NULL;
        }
        if (dev_type != 1 && dev_type != 2 && dev_type != 3 && dev_type != 13)
            return NULL;
    }
    *handled = 1;
    uintptr_t data = *(const uintptr_t *)(base + np.data);
    PyObject *d = description(data, dev_type, dev_id, code, bits, int64_tuple(nd, dims),
                              int64_tuple(nd, strides),
                              (flags & np.writeable) ? 0u : (unsigned)CUABI_VIEW_READ_ONLY, isz);
    if (!d)
        return NULL;
    PyObject *v = fast_view_new_lazy(d, a, NULL);
    Py_DECREF(d);
    return v;
}

/* numpy_setup(ndarray, (data, nd, dims, strides, base, descr, flags),
 *             c_contiguous_flag, writeable_flag, [(dtype, code, bits), ...]) */
static PyObject *numpy_setup(PyObject *module, PyObject *args)
{
    PyObject *type, *dtypes;
    Py_ssize_t o[7];
    long cc, wr;
    if (!PyArg_ParseTuple(args, "O!(nnnnnnn)llO:numpy_setup", &PyType_Type, &type, &o[0], &o[1],
                          &o[2], &o[3], &o[4], &o[5], &o[6], &cc, &wr, &dtypes))
        return NULL;
    PyObject *seq = PySequence_Fast(dtypes, "numpy_setup: dtypes must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > 16) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "numpy_setup: at most 16 dtypes");
        return NULL;
    }
    for (int i = 0; i < np.ndtypes; i++)
        Py_CLEAR(np.dtypes[i].descr);
    np.ndtypes = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *dt;
        int code, bits;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "Oii", &dt, &code, &bits)) {
            Py_DECREF(seq);
            return NULL;
        }
        np.dtypes[i].descr = Py_NewRef(dt);   /* kept alive: its address is its identity */
        np.dtypes[i].code = code;
        np.dtypes[i].bits = bits;
        np.dtypes[i].itemsize = bits / 8;
        np.ndtypes = (int)i + 1;
    }
    Py_DECREF(seq);
    np.data = o[0], np.nd = o[1], np.dims = o[2], np.strides = o[3], np.base = o[4];
    np.descr = o[5], np.flags = o[6];
    np.c_contiguous = cc, np.writeable = wr;
    Py_INCREF(type);
    Py_XSETREF(np.type, (PyTypeObject *)type);
    Py_RETURN_NONE;
}

/* ------------------------------------------------- exchange producers */

/* torch: a borrowed DLTensor (valid until we return) into a lazy View that
 * owns the tensor, as the attribute handler makes it. Complex dtypes (the
 * conjugate bit), other devices and unusual tensors: the Python handler.
 * *gpu (when not NULL): the tensor's GPU, -1 for host memory. `stream`: the
 * View's (may be NULL). */
static PyObject *dltensor_view(const Handler *h, PyObject *obj, PyObject *stream, int *handled,
                               int *gpu)
{
    DLTensor t;
    memset(&t, 0, sizeof t);
    *handled = 0;
    if (h->table->dltensor_from_py_object_no_sync(obj, &t) != 0) {
        PyErr_Clear();
        return NULL;
    }
    if (t.ndim < 0 || t.ndim > CUABI_VIEW_MAX_NDIM || (!t.shape && t.ndim) ||
        !dtype_supported(t.dtype.code, t.dtype.bits, t.dtype.lanes) ||
        t.dtype.code == CUABI_DTYPE_COMPLEX)
        return NULL;
    int dev_type = (int)t.device.device_type, dev_id = t.device.device_id;
    if (dev_type == CUABI_DLPACK_CPU)
        dev_id = 0;
    else if (dev_type != CUABI_DLPACK_CUDA)
        return NULL;
    *handled = 1;
    if (gpu)
        *gpu = dev_type == CUABI_DLPACK_CUDA ? dev_id : -1;
    PyObject *strides = t.strides ? int64_tuple(t.ndim, t.strides) : Py_NewRef(Py_None);
    PyObject *d = description((uintptr_t)t.data + (uintptr_t)t.byte_offset, dev_type, dev_id,
                              t.dtype.code, t.dtype.bits, int64_tuple(t.ndim, t.shape), strides,
                              0, 1);
    if (!d)
        return NULL;
    PyObject *v = fast_view_new_lazy(d, obj, stream);
    Py_DECREF(d);
    return v;
}

/* Any other producer with a table: its owning export into the C import
 * (cuabi_view_from_exchange), which keeps the tensor's flags. A failing
 * export: the Python handler (the producer's __dlpack__ decides); a
 * refused tensor: the C error. */
static PyObject *managed_view(const Handler *h, PyObject *obj, int *handled)
{
    cuabi_view *view = NULL;
    *handled = 0;
    cuabi_status st = fast_api->view_from_exchange(&view, h->table, obj);
    if (st == CUABI_ERROR_CALLBACK) {  /* the producer failed */
        PyErr_Clear();
        return NULL;
    }
    *handled = 1;
    if (st != CUABI_SUCCESS)
        return fast_raise(st, "cuabi_view_from_exchange"), NULL;
    return fast_view_from_handle(view);
}

/* ------------------------------------------------------- from_dlpack */

static Handler *handler_of(PyObject *obj)
{
    PyObject *tp = (PyObject *)Py_TYPE(obj);
    PyObject *found = PyDict_GetItemWithError(handlers, tp);
    if (found || PyErr_Occurred())
        return (Handler *)found;
    PyObject *r = PyObject_CallOneArg(handler_for, tp);
    if (!r)
        return NULL;
    int kind;
    PyObject *fallback, *table;
    if (!PyArg_ParseTuple(r, "iOO", &kind, &fallback, &table)) {
        Py_DECREF(r);
        return NULL;
    }
    Handler *h = PyObject_New(Handler, &Handler_Type);
    if (!h) {
        Py_DECREF(r);
        return NULL;
    }
    h->kind = kind;
    h->fallback = Py_NewRef(fallback);
    h->table = table == Py_None ? NULL : PyLong_AsVoidPtr(table);
    Py_DECREF(r);
    if (PyErr_Occurred() || (kind == H_NUMPY && !np.type) ||
        ((kind == H_DLTENSOR || kind == H_MANAGED) && !h->table) ||
        (kind == H_DLTENSOR && !h->table->dltensor_from_py_object_no_sync))
        h->kind = H_PYTHON;            /* nothing to be fast with: the Python handler */
    PyErr_Clear();
    int st = PyDict_SetItem(handlers, tp, (PyObject *)h);
    Py_DECREF(h);                      /* the dict holds it */
    return st < 0 ? NULL : h;
}

/* The stream= keyword (borrowed; NULL when absent or None). Returns 0 when
 * it is the only keyword given, -1 otherwise (the Python function decides:
 * unknown keywords, a stream given twice). */
static int stream_keyword(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                          PyObject **stream)
{
    *stream = NULL;
    if (!kwnames)
        return 0;
    if (PyTuple_GET_SIZE(kwnames) != 1 ||
        PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), str_stream) != 0)
        return -1;
    if (args[nargs] != Py_None)
        *stream = args[nargs];
    return 0;
}

/* Whether the compiled route may take from_dlpack(obj, stream=s) for an
 * object read by `h`: a producer whose exchange table can export and name
 * its current work stream (cuabi._view._exchange_on_table's rule), and for
 * torch (H_DLTENSOR) no conjugate bit, which torch's __dlpack__ refuses and
 * its C export would not. -1 with an exception when is_conj() raised. */
static int exchange_on_ok(const Handler *h, PyObject *obj)
{
    if ((h->kind != H_DLTENSOR && h->kind != H_MANAGED) || !h->table ||
        !h->table->managed_tensor_from_py_object_no_sync || !h->table->current_work_stream)
        return 0;
    if (h->kind != H_DLTENSOR)
        return 1;
    PyObject *conj = PyObject_CallMethodNoArgs(obj, str_is_conj);
    if (!conj)
        return -1;
    int yes = PyObject_IsTrue(conj);
    Py_DECREF(conj);
    return yes < 0 ? -1 : !yes;
}

enum { ROUTE_DONE, ROUTE_OWNING, ROUTE_PRODUCER };

/* torch with a stream: its borrowed DLTensor into a lazy View for `stream`
 * (as without a stream), then its current work stream of the tensor's GPU
 * ordered before the stream (sh, its handle: cuabi_stream_wait_raw). NULL
 * without an exception: *route says where to go instead (ROUTE_OWNING: a
 * tensor dltensor_view leaves to others; ROUTE_PRODUCER: the producer's
 * current_work_stream failed). */
static PyObject *dltensor_view_on(const Handler *h, PyObject *obj, PyObject *stream, void *sh,
                                  int *route)
{
    int handled = 0, gpu = -1;
    *route = ROUTE_DONE;
    PyObject *v = dltensor_view(h, obj, stream, &handled, &gpu);
    if (!handled) {
        if (!PyErr_Occurred())
            *route = ROUTE_OWNING;
        return NULL;
    }
    if (!v || gpu < 0)
        return v;
    void *ps = NULL;
    if (h->table->current_work_stream((DLDeviceType)CUABI_DLPACK_CUDA, gpu, &ps) != 0) {
        Py_DECREF(v);
        PyErr_Clear();
        *route = ROUTE_PRODUCER;
        return NULL;
    }
    cuabi_status st = fast_api->stream_wait_raw(sh, gpu, (uintptr_t)ps);
    if (st != CUABI_SUCCESS) {
        Py_DECREF(v);
        return fast_raise(st, "cuabi_stream_wait_raw"), NULL;
    }
    return v;
}

/* Any other producer with a stream: cuabi_view_from_exchange_on (its owning
 * export, then the ordering) and View._new(handle, stream). */
static PyObject *owning_view_on(const Handler *h, PyObject *obj, PyObject *stream, void *sh,
                                int *route)
{
    cuabi_view *view = NULL;
    *route = ROUTE_DONE;
    cuabi_status st = fast_api->view_from_exchange_on(&view, h->table, obj, sh);
    if (st == CUABI_ERROR_CALLBACK || st == CUABI_ERROR_NOT_SUPPORTED) {
        PyErr_Clear();                 /* the producer's exception: its __dlpack__ says it */
        *route = ROUTE_PRODUCER;
        return NULL;
    }
    if (st != CUABI_SUCCESS)
        return fast_raise(st, "cuabi_view_from_exchange_on"), NULL;
    PyObject *hv = PyLong_FromVoidPtr(view);
    PyObject *v = hv ? PyObject_CallFunctionObjArgs(view_new, hv, stream, NULL) : NULL;
    Py_XDECREF(hv);
    if (!v)
        fast_api->view_release(view);
    return v;
}

/* from_dlpack(obj, stream=s) with s a cuabi Stream, as
 * cuabi._view._from_exchange_on does it, the DLPack stream contract kept in
 * C: the producer's current work stream ordered before s. Types read
 * without a table, and a closed stream: the Python function with the call
 * as given. A table without current_work_stream, torch's conjugate tensors,
 * and the producer's refusal (its export or current_work_stream failing) or
 * the table's: _from_producer, where the producer's __dlpack__(stream=)
 * decides. */
static PyObject *from_dlpack_on(PyObject *obj, PyObject *stream, PyObject *const *args,
                                size_t nargsf, PyObject *kwnames)
{
    Handler *h = handler_of(obj);
    if (!h)
        return NULL;
    Py_INCREF(h);                      /* the dict may drop it while Python code runs */
    PyObject *v = NULL;
    int route = ROUTE_PRODUCER, ok = exchange_on_ok(h, obj);
    bool table = h->kind == H_DLTENSOR || h->kind == H_MANAGED;
    void *sh = fast_handle_value(fast_slot_get(stream, fast_handle_off));
    if (ok < 0)
        goto out;
    if (!ok && !table)
        goto python;
    if (ok) {
        if (!sh || fast_hold(stream) < 0)   /* closed: the Python function says so */
            goto python;
        route = ROUTE_OWNING;
        if (h->kind == H_DLTENSOR)
            v = dltensor_view_on(h, obj, stream, sh, &route);
        if (route == ROUTE_OWNING)
            v = owning_view_on(h, obj, stream, sh, &route);
        fast_done(stream);
    }
    if (route == ROUTE_PRODUCER)
        v = PyObject_CallFunctionObjArgs(python_from_producer, obj, stream, NULL);
    goto out;
python:
    PyErr_Clear();
    v = PyObject_Vectorcall(python_from_dlpack, args, nargsf, kwnames);
out:
    Py_DECREF(h);
    return v;
}

static PyObject *from_dlpack(PyObject *module, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames)
{
    if (!fast_api || !view_type)
        return fast_not_attached(), NULL;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *stream;
    if (nargs != 1 || stream_keyword(args, nargs, kwnames, &stream) < 0)
        return PyObject_Vectorcall(python_from_dlpack, args, nargsf, kwnames);
    PyObject *obj = args[0];
    if (stream) {
        if (stream_type && python_from_producer && Py_TYPE(stream) == stream_type)
            return from_dlpack_on(obj, stream, args, nargsf, kwnames);
        return PyObject_Vectorcall(python_from_dlpack, args, nargsf, kwnames);
    }
    Handler *h = handler_of(obj);
    if (!h)
        return NULL;
    Py_INCREF(h);
    PyObject *v = NULL;
    int handled = 0;
    switch (h->kind) {
    case H_NUMPY:
        v = Py_TYPE(obj) == np.type ? numpy_view(obj, &handled) : NULL;
        break;
    case H_DLTENSOR:
        v = dltensor_view(h, obj, NULL, &handled, NULL);
        break;
    case H_MANAGED:
        v = managed_view(h, obj, &handled);
        break;
    }
    if (!handled && !PyErr_Occurred())
        v = PyObject_CallOneArg(h->fallback, obj);
    Py_DECREF(h);
    return v;
}

/* view_setup(View, from_dlpack_py, handler_for, view_new, dtypes[, Stream,
 * from_producer]): without the last two, from_dlpack with a stream is all
 * Python. */
static PyObject *view_setup(PyObject *module, PyObject *args)
{
    PyObject *view, *py, *hf, *vn, *dtypes, *st = NULL, *fp = NULL;
    if (!PyArg_ParseTuple(args, "O!OOOO|O!O:view_setup", &PyType_Type, &view, &py, &hf, &vn,
                          &dtypes, &PyType_Type, &st, &fp))
        return NULL;
    Py_ssize_t o[6];
    static const char *const names[] = {"_h", "_fin", "_info", "_stream", "_owner", "_d"};
    for (int i = 0; i < 6; i++)
        if (fast_slot_offset(view, names[i], &o[i]) < 0)
            return NULL;
    PyObject *seq = PySequence_Fast(dtypes, "view_setup: dtypes must be a sequence");
    if (!seq)
        return NULL;
    memset(supported, 0, sizeof supported);
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        int code, bits;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "ii", &code, &bits)) {
            Py_DECREF(seq);
            return NULL;
        }
        if (code >= 0 && code < 16 && bits > 0 && bits % 8 == 0 && bits <= 128)
            supported[code][bits / 8] = 1;
    }
    Py_DECREF(seq);
    off_h = o[0], off_fin = o[1], off_info = o[2], off_stream = o[3], off_owner = o[4];
    off_d = o[5];
    fast_pack_set_view_offset(off_d);
    Py_INCREF(view);
    Py_XSETREF(view_type, (PyTypeObject *)view);
    Py_INCREF(py);
    Py_XSETREF(python_from_dlpack, py);
    Py_INCREF(hf);
    Py_XSETREF(handler_for, hf);
    Py_INCREF(vn);
    Py_XSETREF(view_new, vn);
    Py_XINCREF(st);
    Py_XSETREF(stream_type, (PyTypeObject *)st);
    Py_XINCREF(fp);
    Py_XSETREF(python_from_producer, fp);
    PyDict_Clear(handlers);
    Py_RETURN_NONE;
}

/* lazy_view(description, owner, stream=None) -> View: cuabi._view._lazy in
 * C, for the Python handlers (CuPy, array interfaces). */
static PyObject *lazy_view(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (!view_type)
        return fast_not_attached(), NULL;
    if (nargs < 2 || nargs > 3 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != 9) {
        PyErr_SetString(PyExc_TypeError, "lazy_view(description: 9-tuple, owner, stream=None)");
        return NULL;
    }
    return fast_view_new_lazy(args[0], args[1], nargs == 3 ? args[2] : NULL);
}

/* handler_kind(type) -> the kind chosen for `type` (H_*), or None when no
 * object of it went through from_dlpack yet. */
static PyObject *handler_kind(PyObject *module, PyObject *type)
{
    PyObject *h = PyDict_GetItemWithError(handlers, type);
    if (!h)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    return PyLong_FromLong(((Handler *)h)->kind);
}

/* clear_handlers(): forget every type's handler (tests swap modules). */
static PyObject *clear_handlers(PyObject *module, PyObject *unused)
{
    PyDict_Clear(handlers);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------- __dlpack__ */

/* View.__dlpack__ in C for the common call (what torch.from_dlpack and
 * numpy make): no copy, no dl_device, a stream needing no ordering, a
 * max_version of two ints. The export is the C library's; the capsule's
 * destructor is C too (a ctypes callback per capsule cost microseconds).
 * Anything else goes to the Python method (View._dlpack_py), which raises
 * what the ctypes backend raises. */
static PyObject *python_dlpack;         /* View._dlpack_py */
static PyObject *str_max_version, *str_dl_device, *str_copy, *str_handle;

static void dlpack_capsule_destructor(PyObject *capsule)
{
    /* An export nobody consumed keeps its name and still owns the tensor;
     * a consumer renamed it "used_*" and took the deleter with it. */
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (m && m->deleter)
            m->deleter(m);
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
        if (m && m->deleter)
            m->deleter(m);
    }
}

static void dlpack_delete(void *ptr, int versioned)
{
    if (versioned) {
        DLManagedTensorVersioned *m = ptr;
        if (m->deleter)
            m->deleter(m);
    } else {
        DLManagedTensor *m = ptr;
        if (m->deleter)
            m->deleter(m);
    }
}

/* The keywords of a call the C export takes: 1 = fast, 0 = Python's. */
static int dlpack_keywords(PyObject *const *values, PyObject *kwnames, PyObject **stream,
                           PyObject **max_version)
{
    Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i), *v = values[i];
        if (k == str_stream)
            *stream = v;
        else if (k == str_max_version)
            *max_version = v;
        else if (!((k == str_dl_device && v == Py_None) ||
                   (k == str_copy && (v == Py_None || v == Py_False))))
            return 0;
    }
    return 1;
}

/* max_version (a, b) -> versioned export? -1: leave it to Python. */
static int dlpack_versioned(PyObject *max_version)
{
    if (max_version == Py_None)
        return 0;
    if (!PyTuple_CheckExact(max_version) || PyTuple_GET_SIZE(max_version) != 2 ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(max_version, 0)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(max_version, 1)))
        return -1;
    long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
    long minor = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 1));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return major > 1 || (major == 1 && minor >= 0);
}

static PyObject *view_dlpack(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    PyObject *stream = Py_None, *max_version = Py_None, *self;
    int versioned;
    if (!python_dlpack || !fast_api || nargs != 1 || !view_type ||
        !PyObject_TypeCheck(args[0], view_type) ||
        !dlpack_keywords(args + 1, kwnames, &stream, &max_version) ||
        (versioned = dlpack_versioned(max_version)) < 0)
        goto python;
    self = args[0];
    /* A stream other than None / -1 asks for ordering after the view's
     * producer stream, when it has one: Python's part. */
    int any_stream = stream != Py_None;
    if (any_stream) {
        if (!PyLong_CheckExact(stream))
            goto python;
        long long sv = PyLong_AsLongLong(stream);
        if (sv == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto python;
        }
        PyObject *producer = fast_slot_get(self, off_stream);
        any_stream = sv != -1;
        if (any_stream && producer && producer != Py_None)
            goto python;
    }
    PyObject *h = fast_slot_get(self, off_h);
    void *view;
    if (h && h != Py_None) {
        view = fast_handle_value(h);
    } else {   /* a lazy view: its C view is made now (or closed: raises) */
        PyObject *made = PyObject_GetAttr(self, str_handle);
        if (!made)
            return NULL;
        view = fast_handle_value(made);
        Py_DECREF(made);
    }
    if (!view)
        goto python;
    void *ptr = NULL;
    cuabi_status st = versioned
        ? fast_api->view_to_dlpack_versioned((DLManagedTensorVersioned **)&ptr, view)
        : fast_api->view_to_dlpack((DLManagedTensor **)&ptr, view);
    if (st != CUABI_SUCCESS)
        return fast_raise(st, versioned ? "cuabi_view_to_dlpack_versioned"
                                        : "cuabi_view_to_dlpack"), NULL;
    DLDevice dev = versioned ? ((DLManagedTensorVersioned *)ptr)->dl_tensor.device
                             : ((DLManagedTensor *)ptr)->dl_tensor.device;
    if (any_stream && dev.device_type == kDLCPU) {   /* refused by Python's part */
        dlpack_delete(ptr, versioned);
        goto python;
    }
    PyObject *capsule = PyCapsule_New(ptr, versioned ? "dltensor_versioned" : "dltensor",
                                      dlpack_capsule_destructor);
    if (!capsule)
        dlpack_delete(ptr, versioned);
    return capsule;
python:
    if (!python_dlpack) {
        PyErr_SetString(PyExc_RuntimeError, "cuabi._fast: dlpack_setup() was not called");
        return NULL;
    }
    return PyObject_Vectorcall(python_dlpack, args, (size_t)nargs, kwnames);
}

static PyMethodDef view_dlpack_def = {
    "__dlpack__", (PyCFunction)(void (*)(void))view_dlpack, METH_FASTCALL | METH_KEYWORDS,
    "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> capsule\n\n"
    "The DLPack export (array API standard) of the view's memory, without copying."};

/* dlpack_setup(View._dlpack_py) -> the C __dlpack__, a method for View. */
static PyObject *dlpack_setup(PyObject *module, PyObject *py)
{
    if (!PyCallable_Check(py)) {
        PyErr_SetString(PyExc_TypeError, "dlpack_setup: a function is needed");
        return NULL;
    }
    Py_INCREF(py);
    Py_XSETREF(python_dlpack, py);
    PyObject *f = PyCFunction_New(&view_dlpack_def, module);
    if (!f)
        return NULL;
    PyObject *m = PyInstanceMethod_New(f);
    Py_DECREF(f);
    return m;
}

static PyMethodDef methods[] = {
    {"lazy_view", (PyCFunction)(void (*)(void))lazy_view, METH_FASTCALL,
     "lazy_view(description, owner, stream=None) -> a View with no C view yet."},
    {"handler_kind", handler_kind, METH_O,
     "handler_kind(type) -> how from_dlpack reads that type (H_*), or None if not yet seen."},
    {"clear_handlers", clear_handlers, METH_NOARGS,
     "clear_handlers(): forget the handler chosen for each type."},
    {"from_dlpack", (PyCFunction)(void (*)(void))from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(obj, *, stream=None) -> View\n\n"
     "A View of any array: a DLPack producer (asked for the versioned protocol first), a "
     "DLPack capsule, a __cuda_array_interface__ or __array_interface__ object. Shares "
     "memory; never copies.\n\n"
     "`stream` (a cuabi Stream, a foreign stream or a raw CUstream int) is where the "
     "caller will use a CUDA array: the producer orders its pending work before it, as "
     "the DLPack protocol says."},
    {"view_setup", view_setup, METH_VARARGS,
     "view_setup(View, from_dlpack_py, handler_for, view_new, dtypes)."},
    {"dlpack_setup", dlpack_setup, METH_O,
     "dlpack_setup(View._dlpack_py) -> View.__dlpack__ in C (a method)."},
    {"numpy_setup", numpy_setup, METH_VARARGS,
     "numpy_setup(ndarray, offsets, c_contiguous, writeable, dtypes): numpy's struct layout."},
    {NULL, NULL, 0, NULL},
};

int fast_view_init(PyObject *module)
{
    handlers = PyDict_New();
    str_stream = PyUnicode_InternFromString("stream");
    str_is_conj = PyUnicode_InternFromString("is_conj");
    str_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
    str_max_version = PyUnicode_InternFromString("max_version");
    str_dl_device = PyUnicode_InternFromString("dl_device");
    str_copy = PyUnicode_InternFromString("copy");
    str_handle = PyUnicode_InternFromString("cuabi_handle");
    if (!handlers || !str_stream || !str_dlpack_device || !str_max_version || !str_dl_device ||
        !str_copy || !str_handle || PyType_Ready(&Handler_Type) < 0 ||
        PyModule_AddFunctions(module, methods) < 0)
        return -1;
    static const struct { const char *name; int value; } consts[] = {
        {"H_PYTHON", H_PYTHON}, {"H_NUMPY", H_NUMPY}, {"H_DLTENSOR", H_DLTENSOR},
        {"H_MANAGED", H_MANAGED},
    };
    for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
        if (PyModule_AddIntConstant(module, consts[i].name, consts[i].value) < 0)
            return -1;
    return 0;
}
