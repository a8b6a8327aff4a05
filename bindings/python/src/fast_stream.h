/* The compiled backend's stream calls (docs/python.md): Stream.wait(stream). */
#ifndef CUABI_PY_FAST_STREAM_H
#define CUABI_PY_FAST_STREAM_H

#include "fast_common.h"

int fast_stream_init(PyObject *module);

#endif
