#!/usr/bin/env python3
"""Share memory between numpy and cuabi through DLPack, both ways (no GPU needed).

    python3 examples/python/dlpack_numpy.py

Runs from any directory of a source checkout built in build/ (see
_cuabi_path.py); elsewhere install the package (pip install ./bindings/python)
or set CUABI_LIBRARY to the absolute path of libcuabi.so.
"""
import numpy as np

import _cuabi_path  # noqa: F401  (finds bindings/python and build/.libs)
import cuabi

a = np.arange(12, dtype=np.float32).reshape(3, 4)
v = cuabi.from_dlpack(a)                  # no copy: v points at a's memory
print(v, v.shape, v.strides, v.dtype)

with cuabi.MemoryResource.host() as host, cuabi.Buffer(48, host) as buf:
    w = buf.view("int32", (3, 4))
    arr = np.from_dlpack(w)               # numpy writes into the cuabi buffer
    arr[:] = 7
    print(bytes(buf.to_bytes())[:8])
