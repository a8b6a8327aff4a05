/* Kernel arguments to slot bytes, per slot kind (cuabi_arg_kind), with the
 * conversion rules of docs/launch.md:
 *   integer slots  Python int/bool, numpy integer scalars; range-checked
 *   float slots    Python int/float, numpy integer and float scalars
 *   bool slots     Python bool, numpy bool_
 *   integer slots of unknown signedness (PTX .u32: CUABI_ARG_INTEGER): as
 *                  integers, a value that fits signed or unsigned
 *   pointer slots  arrays (Buffer, View, torch, CUDA array interface, ...),
 *                  non-negative ints, None (NULL); intptr (PTX .u64) also
 *                  negative ints; handle slots no arrays
 *   raw slots      (the kernel's types are unknown) a Python int as an
 *                  integer of the slot's size, a numpy scalar of exactly
 *                  that size bit for bit, an array's address (8 bytes)
 * Everything else -- refusals included -- is "not handled": the caller
 * packs those arguments with the Python packer, which converts what it
 * knows and raises the documented TypeError/ValueError for the rest. So
 * this file never raises; it only decides the cases it is sure of. */
#include "fast_pack.h"

#include <string.h>

/* What the classifier (cuabi._launch._arg_class) says about a type. */
enum {
    ARG_UNKNOWN = 0,
    ARG_NP_INT = 1,      /* numpy signed integer scalar */
    ARG_NP_UINT = 2,     /* numpy unsigned integer scalar */
    ARG_NP_FLOAT = 3,    /* numpy float16/32/64 scalar */
    ARG_NP_BOOL = 4,     /* numpy bool_ */
    ARG_POINTER = 5,     /* an array: getter(obj) -> address */
    ARG_BUFFER = 6,      /* cuabi.Buffer: its cached _ptr, else getter */
    ARG_VIEW = 7,        /* cuabi.View: a lazy view's description, else getter */
};

typedef struct {
    PyObject_HEAD
    int cls;
    int itemsize;
    PyObject *getter;
} ArgClass;

static void argclass_dealloc(ArgClass *self)
{
    Py_XDECREF(self->getter);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject ArgClass_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cuabi._fast._ArgClass",
    .tp_basicsize = sizeof(ArgClass),
    .tp_dealloc = (destructor)argclass_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "How the compiled packer reads arguments of one type (cached per type).",
};

static PyObject *classes;            /* type -> ArgClass */
static PyObject *classify;           /* cuabi._launch._arg_class(obj) -> (cls, itemsize, getter) */
static Py_ssize_t scalar_offset = -1; /* of a numpy scalar's value (verified by the classifier) */
static Py_ssize_t view_d_off = -1;   /* View._d */
static PyObject *str_ptr;            /* "_ptr" */

void fast_pack_set_view_offset(Py_ssize_t offset) { view_d_off = offset; }

static ArgClass *class_of(PyObject *arg)
{
    PyObject *tp = (PyObject *)Py_TYPE(arg);
    PyObject *c = PyDict_GetItemWithError(classes, tp);
    if (c || PyErr_Occurred() || !classify)
        return (ArgClass *)c;
    PyObject *r = PyObject_CallOneArg(classify, arg);
    if (!r)
        return NULL;
    ArgClass *ac = PyObject_New(ArgClass, &ArgClass_Type);
    if (!ac) {
        Py_DECREF(r);
        return NULL;
    }
    ac->getter = NULL;
    PyObject *get = Py_None;
    if (!PyArg_ParseTuple(r, "iiO", &ac->cls, &ac->itemsize, &get)) {
        Py_DECREF(r);
        Py_DECREF(ac);
        return NULL;
    }
    ac->getter = get == Py_None ? NULL : Py_NewRef(get);
    Py_DECREF(r);
    int st = PyDict_SetItem(classes, tp, (PyObject *)ac);
    Py_DECREF(ac);                       /* the dict holds it */
    return st < 0 ? NULL : ac;
}

/* ------------------------------------------------------------ values */

typedef enum { V_SIGNED, V_UNSIGNED, V_DOUBLE, V_BOOL, V_NP_BOOL, V_NONE, V_ADDRESS } vtag;

typedef struct {
    vtag tag;
    long long s;
    unsigned long long u;
    double d;
    const void *bytes;       /* a numpy scalar's own bytes, else NULL */
    int nbytes;
    int python_int;          /* from a Python int (doubles come from PyLong_AsDouble) */
} value;

static int address_of(PyObject *get, PyObject *arg, unsigned long long *out)
{
    PyObject *r = PyObject_CallOneArg(get, arg);
    if (!r || !PyLong_Check(r)) {
        Py_XDECREF(r);
        PyErr_Clear();
        return 0;
    }
    *out = PyLong_AsUnsignedLongLong(r);
    Py_DECREF(r);
    if (*out == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

static int pointer_of(const ArgClass *c, PyObject *arg, unsigned long long *out)
{
    if (c->cls == ARG_VIEW && view_d_off >= 0) {
        PyObject *d = fast_slot_get(arg, view_d_off);
        if (d && PyTuple_CheckExact(d) && PyTuple_GET_SIZE(d) > 0 &&
            PyLong_CheckExact(PyTuple_GET_ITEM(d, 0))) {
            *out = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(d, 0));
            if (!PyErr_Occurred())
                return 1;
            PyErr_Clear();
            return 0;
        }
    } else if (c->cls == ARG_BUFFER) {
        PyObject *p = PyObject_GetAttr(arg, str_ptr);
        if (p && PyLong_CheckExact(p)) {
            *out = PyLong_AsUnsignedLongLong(p);
            Py_DECREF(p);
            if (!PyErr_Occurred())
                return 1;
            PyErr_Clear();
            return 0;
        }
        Py_XDECREF(p);
        PyErr_Clear();
    }
    return c->getter ? address_of(c->getter, arg, out) : 0;
}

static int numpy_value(const ArgClass *c, PyObject *arg, value *v)
{
    const char *p = (const char *)arg + scalar_offset;
    v->bytes = p;
    v->nbytes = c->itemsize;
    switch (c->cls) {
    case ARG_NP_INT:
        v->tag = V_SIGNED;
        switch (c->itemsize) {
        case 1: { int8_t x; memcpy(&x, p, 1); v->s = x; return 1; }
        case 2: { int16_t x; memcpy(&x, p, 2); v->s = x; return 1; }
        case 4: { int32_t x; memcpy(&x, p, 4); v->s = x; return 1; }
        case 8: { int64_t x; memcpy(&x, p, 8); v->s = x; return 1; }
        }
        return 0;
    case ARG_NP_UINT:
        v->tag = V_UNSIGNED;
        switch (c->itemsize) {
        case 1: { uint8_t x; memcpy(&x, p, 1); v->u = x; return 1; }
        case 2: { uint16_t x; memcpy(&x, p, 2); v->u = x; return 1; }
        case 4: { uint32_t x; memcpy(&x, p, 4); v->u = x; return 1; }
        case 8: { uint64_t x; memcpy(&x, p, 8); v->u = x; return 1; }
        }
        return 0;
    case ARG_NP_FLOAT:
        v->tag = V_DOUBLE;
        switch (c->itemsize) {
        case 2:
            v->d = PyFloat_Unpack2(p, 1);
            if (v->d == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
            return 1;
        case 4: { float x; memcpy(&x, p, 4); v->d = x; return 1; }
        case 8: { double x; memcpy(&x, p, 8); v->d = x; return 1; }
        }
        return 0;
    case ARG_NP_BOOL:
        v->tag = V_NP_BOOL;
        v->u = *(const unsigned char *)p != 0;
        return c->itemsize == 1;
    }
    return 0;
}

/* Read `arg` into *v; 0 when it is not a kind of value handled here. */
static int value_of(PyObject *arg, value *v)
{
    v->bytes = NULL;
    v->nbytes = 0;
    v->python_int = 0;
    PyTypeObject *tp = Py_TYPE(arg);
    if (tp == &PyLong_Type) {
        int overflow;
        v->python_int = 1;
        v->s = PyLong_AsLongLongAndOverflow(arg, &overflow);
        if (overflow == 0) {
            if (v->s == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
            v->tag = V_SIGNED;
            return 1;
        }
        if (overflow < 0)
            return 0;
        v->u = PyLong_AsUnsignedLongLong(arg);      /* 2**63 <= value */
        if (v->u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        v->tag = V_UNSIGNED;
        return 1;
    }
    if (tp == &PyFloat_Type) {
        v->tag = V_DOUBLE;
        v->d = PyFloat_AS_DOUBLE(arg);
        return 1;
    }
    if (tp == &PyBool_Type) {
        v->tag = V_BOOL;
        v->u = arg == Py_True;
        return 1;
    }
    if (arg == Py_None) {
        v->tag = V_NONE;
        return 1;
    }
    ArgClass *c = class_of(arg);
    if (!c) {
        PyErr_Clear();
        return 0;
    }
    switch (c->cls) {
    case ARG_NP_INT: case ARG_NP_UINT: case ARG_NP_FLOAT: case ARG_NP_BOOL:
        return scalar_offset >= 0 && numpy_value(c, arg, v);
    case ARG_POINTER: case ARG_BUFFER: case ARG_VIEW:
        v->tag = V_ADDRESS;
        return pointer_of(c, arg, &v->u);
    }
    return 0;
}

/* ------------------------------------------------------------ writers */

/* An integer value in [lo, hi] (as signed) or [0, uhi] (unsigned): the
 * two's-complement low `size` bytes. */
static int put_int(unsigned char *dst, size_t size, const value *v, int is_signed)
{
    unsigned long long bits;
    if (v->tag == V_SIGNED) {
        long long s = v->s;
        if (is_signed) {
            long long lo = size == 8 ? INT64_MIN : -(1LL << (8 * size - 1));
            long long hi = size == 8 ? INT64_MAX : (1LL << (8 * size - 1)) - 1;
            if (s < lo || s > hi)
                return 0;
        } else if (s < 0 || (size < 8 && (unsigned long long)s >> (8 * size))) {
            return 0;
        }
        bits = (unsigned long long)s;
    } else if (v->tag == V_UNSIGNED) {
        unsigned long long u = v->u;
        if (is_signed ? (size == 8 ? u > (unsigned long long)INT64_MAX
                                   : u > (1ULL << (8 * size - 1)) - 1)
                      : (size < 8 && u >> (8 * size)))
            return 0;
        bits = u;
    } else {
        return 0;
    }
    memcpy(dst, &bits, size);          /* little-endian hosts (x86-64, aarch64) */
    return 1;
}

static int put_float(unsigned char *dst, int kind, PyObject *arg, const value *v)
{
    double d;
    if (v->tag == V_DOUBLE) {
        d = v->d;
    } else if (v->tag == V_SIGNED || v->tag == V_UNSIGNED) {
        if (v->python_int) {            /* correctly rounded, as struct does */
            d = PyLong_AsDouble(arg);
            if (d == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
        } else {
            d = v->tag == V_SIGNED ? (double)v->s : (double)v->u;
        }
    } else {
        return 0;
    }
    int r;
    switch (kind) {
    case CUABI_ARG_F64:
        memcpy(dst, &d, 8);
        return 1;
    case CUABI_ARG_F32:
        r = PyFloat_Pack4(d, (char *)dst, 1);   /* OverflowError beyond float's range */
        break;
    case CUABI_ARG_F16:
        r = PyFloat_Pack2(d, (char *)dst, 1);
        break;
    default:
        return 0;
    }
    if (r < 0) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

static int put_raw(unsigned char *dst, size_t size, const value *v)
{
    if (size != 1 && size != 2 && size != 4 && size != 8)
        return 0;
    if (v->bytes) {                    /* a numpy scalar of exactly the slot's size */
        if ((size_t)v->nbytes != size)
            return 0;
        memcpy(dst, v->bytes, size);
        return 1;
    }
    if (v->python_int) {               /* signed, else unsigned, of the slot's size */
        if (put_int(dst, size, v, 1))
            return 1;
        return put_int(dst, size, v, 0);
    }
    if (v->tag == V_ADDRESS && size == 8) {
        memcpy(dst, &v->u, 8);
        return 1;
    }
    return 0;                          /* floats, bools, None: the Python rules */
}

int fast_pack_arg(const fast_arg_slot *slot, unsigned char *blob, PyObject *arg)
{
    value v;
    if (!value_of(arg, &v))
        return 0;
    unsigned char *dst = blob + slot->offset;
    switch (slot->kind) {
    case CUABI_ARG_RAW:
        return put_raw(dst, slot->size, &v);
    case CUABI_ARG_I8: case CUABI_ARG_I16: case CUABI_ARG_I32: case CUABI_ARG_I64:
    case CUABI_ARG_U8: case CUABI_ARG_U16: case CUABI_ARG_U32: case CUABI_ARG_U64: {
        if (slot->size != 1 && slot->size != 2 && slot->size != 4 && slot->size != 8)
            return 0;
        if (v.tag == V_BOOL)
            v.tag = V_SIGNED, v.s = (long long)v.u;
        int is_signed = slot->kind <= CUABI_ARG_I64;
        return put_int(dst, slot->size, &v, is_signed);
    }
    case CUABI_ARG_F16: case CUABI_ARG_F32: case CUABI_ARG_F64:
        if (slot->size != (slot->kind == CUABI_ARG_F16 ? 2 : slot->kind == CUABI_ARG_F32 ? 4 : 8))
            return 0;
        return put_float(dst, slot->kind, arg, &v);
    case CUABI_ARG_BOOL:
        if (slot->size != 1 || (v.tag != V_BOOL && v.tag != V_NP_BOOL))
            return 0;
        *dst = (unsigned char)v.u;
        return 1;
    case CUABI_ARG_INTEGER:            /* PTX .u8/.u16/.u32: either signedness */
        if (slot->size != 1 && slot->size != 2 && slot->size != 4 && slot->size != 8)
            return 0;
        if (v.tag == V_BOOL)
            v.tag = V_SIGNED, v.s = (long long)v.u;
        return put_int(dst, slot->size, &v, 1) || put_int(dst, slot->size, &v, 0);
    case CUABI_ARG_PTR: case CUABI_ARG_HANDLE: case CUABI_ARG_INTPTR:
        if (slot->size != 8)
            return 0;
        if (v.tag == V_NONE) {
            memset(dst, 0, 8);
            return 1;
        }
        if (v.tag == V_ADDRESS) {      /* an array: not for an opaque handle */
            if (slot->kind == CUABI_ARG_HANDLE)
                return 0;
            memcpy(dst, &v.u, 8);
            return 1;
        }
        if (slot->kind == CUABI_ARG_INTPTR)   /* PTX .u64: long and pointers alike */
            return put_int(dst, 8, &v, 1) || put_int(dst, 8, &v, 0);
        return put_int(dst, 8, &v, 0);
    default:                           /* bf16, complex, structs, tensor maps, ... */
        return 0;
    }
}

/* pack_setup(classify, scalar_value_offset) */
static PyObject *pack_setup(PyObject *module, PyObject *args)
{
    PyObject *fn;
    Py_ssize_t off;
    if (!PyArg_ParseTuple(args, "On:pack_setup", &fn, &off))
        return NULL;
    Py_INCREF(fn);
    Py_XSETREF(classify, fn);
    scalar_offset = off;
    PyDict_Clear(classes);
    Py_RETURN_NONE;
}

/* pack(kinds_sizes_offsets, blob_size, *args) -> bytes or None: the
 * compiled packer alone, for tests comparing it with the Python one. */
static PyObject *pack_test(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "pack(slots, blob_size, *args)");
        return NULL;
    }
    PyObject *slots = PySequence_Fast(args[0], "pack: slots must be a sequence");
    if (!slots)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(slots);
    size_t size;
    if (fast_size_arg(args[1], "pack: blob_size", PY_SSIZE_T_MAX, &size) < 0 ||
        n != nargs - 2) {
        Py_DECREF(slots);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "pack: one argument per slot");
        return NULL;
    }
    PyObject *blob = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!blob) {
        Py_DECREF(slots);
        return NULL;
    }
    memset(PyBytes_AS_STRING(blob), 0, (size_t)size);
    for (Py_ssize_t i = 0; i < n; i++) {
        fast_arg_slot s;
        PyObject *sz, *off;
        /* Sizes and offsets are checked, and the slot must lie inside the
         * blob without a sum that wraps (a negative offset was a write
         * before the blob). */
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(slots, i), "iOO", &s.kind, &sz, &off) ||
            fast_size_arg(sz, "pack: slot size", size, &s.size) < 0 ||
            fast_size_arg(off, "pack: slot offset", size, &s.offset) < 0 ||
            s.size > size - s.offset) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "pack: slot outside the blob");
            Py_DECREF(slots);
            Py_DECREF(blob);
            return NULL;
        }
        if (!fast_pack_arg(&s, (unsigned char *)PyBytes_AS_STRING(blob), args[i + 2])) {
            Py_DECREF(slots);
            Py_DECREF(blob);
            Py_RETURN_NONE;
        }
    }
    Py_DECREF(slots);
    return blob;
}

static PyMethodDef methods[] = {
    {"pack_setup", pack_setup, METH_VARARGS,
     "pack_setup(classify, scalar_value_offset): the Python classifier of argument types."},
    {"pack", (PyCFunction)(void (*)(void))pack_test, METH_FASTCALL,
     "pack(slots, blob_size, *args) -> bytes, or None when an argument is left to Python."},
    {NULL, NULL, 0, NULL},
};

int fast_pack_init(PyObject *module)
{
    if (PyType_Ready(&ArgClass_Type) < 0)
        return -1;
    classes = PyDict_New();
    str_ptr = PyUnicode_InternFromString("_ptr");
    if (!classes || !str_ptr || PyModule_AddFunctions(module, methods) < 0)
        return -1;
    static const struct { const char *name; int value; } consts[] = {
        {"ARG_UNKNOWN", ARG_UNKNOWN}, {"ARG_NP_INT", ARG_NP_INT}, {"ARG_NP_UINT", ARG_NP_UINT},
        {"ARG_NP_FLOAT", ARG_NP_FLOAT}, {"ARG_NP_BOOL", ARG_NP_BOOL},
        {"ARG_POINTER", ARG_POINTER}, {"ARG_BUFFER", ARG_BUFFER}, {"ARG_VIEW", ARG_VIEW},
    };
    for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
        if (PyModule_AddIntConstant(module, consts[i].name, consts[i].value) < 0)
            return -1;
    return 0;
}
