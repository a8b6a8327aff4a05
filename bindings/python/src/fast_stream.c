/* Stream.wait(other_stream) straight to the library's table: through ctypes
 * the call cost ~2 us more than the two driver calls it makes (H200,
 * bench_python.py's Stream.wait row), where cuda.core's whole wait is ~1.7.
 * Same errors as the ctypes path: a closed stream raises what its `handle`
 * property raises, named by the C function; a failure the exception of its
 * status (fast_raise). */
#include "fast_stream.h"

/* stream_wait_stream(stream, other) -> None: cuabi_stream_wait_stream */
static PyObject *stream_wait_stream(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "stream_wait_stream(stream, other) takes 2 arguments");
        return NULL;
    }
    if (!fast_api)
        return fast_not_attached(), NULL;
    void *s = fast_use_arg(args[0], "stream");
    if (!s)
        return fast_closed_in("cuabi_stream_wait_stream", args[0]), NULL;
    void *o = fast_use_arg(args[1], "other");
    if (!o) {
        fast_done(args[0]);
        return fast_closed_in("cuabi_stream_wait_stream", args[1]), NULL;
    }
    /* GIL released, as around every fast path's driver calls: a record can
     * wait for room in a full queue, which a Python host callback ahead in
     * it (holding up the GPU) needs the GIL to drain. */
    cuabi_status st;
    Py_BEGIN_ALLOW_THREADS
    st = fast_api->stream_wait_stream(s, o);
    Py_END_ALLOW_THREADS
    fast_done(args[1]);
    fast_done(args[0]);
    if (st != CUABI_SUCCESS)
        return fast_raise(st, "cuabi_stream_wait_stream"), NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"stream_wait_stream", (PyCFunction)(void (*)(void))stream_wait_stream, METH_FASTCALL,
     "stream_wait_stream(stream, other): later work on stream waits for other's work so far "
     "(cuabi_stream_wait_stream)."},
    {NULL, NULL, 0, NULL},
};

int fast_stream_init(PyObject *module)
{
    return PyModule_AddFunctions(module, methods);
}
