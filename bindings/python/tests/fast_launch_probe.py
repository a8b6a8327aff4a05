"""Run by test_fast_launch.py in a subprocess whose CUDA driver is the
do-nothing bench/.libs/fake_libcuda.so (CUABI_DRIVER_PATH): every launch
case, good and bad, through the compiled launch and through the Python one
(the ctypes backend's), printing what each did as JSON: the packed argument
bytes, or the exception's class and message."""
import json
import sys

import numpy as np

import cuabi
from cuabi import _launch, _lib

SRC = 'extern "C" __global__ void k(float* p, int n, float a) { if (n < 0) p[0] = a; }\n'


class BadIndex:
    def __index__(self):
        raise RuntimeError("no index")

    def __repr__(self):
        return "BadIndex()"


class DataPtr:
    def data_ptr(self):
        return 0x5000


def main():
    dev = cuabi.Device(0)
    s = dev.create_stream(non_blocking=False)
    prog = cuabi.Program(SRC)

    def kernel():
        return prog.compile(arch="sm_90").get_kernel("k")
    k = kernel()
    cfg = cuabi.LaunchConfig(grid=2, block=32)
    host = cuabi.MemoryResource.host()
    buf = cuabi.Buffer(64, stream=s)
    closed_buf = cuabi.Buffer(64, stream=s)
    closed_buf.close()
    view = buf.view("float32", (4,))
    lazy = cuabi.from_dlpack(np.zeros(4, np.float32))
    closed_s = dev.create_stream(non_blocking=False)
    closed_s.close()
    sentinel = object()
    good = {
        "buffer, numpy int32, numpy float32": (buf, np.int32(5), np.float32(1.5)),
        "buffer, int, numpy float32": (buf, 7, np.float32(2.0)),
        "view, negative int, numpy float32": (view, -3, np.float32(0.5)),
        "lazy view": (lazy, 1, np.float32(1)),
        "int pointer, 2**32 - 1": (0x10000, 2**32 - 1, np.float32(1)),
        "numpy array pointer": (np.zeros(4, np.float32), 1, np.float32(1)),
        "torch-like data_ptr()": (DataPtr(), 1, np.float32(1)),
        "host buffer": (cuabi.Buffer(16, resource=host), 1, np.float32(1)),
        "python float (the Python rules)": (buf, 1, 2.5),
        "numpy int64 for 4 bytes": (buf, np.int64(9), np.float32(1)),
        "None pointer": (None, 1, np.float32(1)),
    }
    bad = {
        "too few": (buf, 1),
        "too many": (buf, 1, np.float32(1), 4),
        "no arguments": (),
        "string": (buf, "x", np.float32(1)),
        "object": (buf, sentinel, np.float32(1)),
        "raising __index__": (buf, BadIndex(), np.float32(1)),
        "too large": (buf, 2**40, np.float32(1)),
        "negative pointer": (-1, 1, np.float32(1)),
        "array for a 4-byte slot": (buf, np.zeros(2), np.float32(1)),
        "closed buffer": (closed_buf, 1, np.float32(1)),
        "bytes of the wrong size": (buf, b"ab", np.float32(1)),
        "complex": (buf, 1j, np.float32(1)),
    }
    out = []

    def packs(kern):
        """Every pack the two paths pack into (one thread: one of each)."""
        cache = getattr(kern, "_launch_cache", {})
        return cache.get("lanes", []) + cache.get("free", [])

    def run(fn, stream, config, kern, args, kw=None):
        for pl in packs(kern):
            pl.blob[:] = b"\xee" * len(pl.blob)      # what was packed, not what was left
        try:
            fn(stream, config, kern, *args, **(kw or {}))
        except Exception as e:
            return ["error", type(e).__name__, str(e)]
        used = [pl.blob.raw.hex() for pl in packs(kern) if pl.blob.raw != b"\xee" * len(pl.blob)]
        return ["ok", used[0] if len(used) == 1 else used]

    same = object()

    def both(name, args, stream=s, config=cfg, kern=same):
        kern = k if kern is same else kern
        r = [run(f, stream, config, kern, args) for f in (_lib.fast.launch, _launch.launch_py)]
        out.append([name] + r)

    for name, args in list(good.items()) + list(bad.items()):
        both(name, args)
    args = (buf, 1, np.float32(1))
    both("stream None (the legacy default stream)", args, stream=None)
    both("foreign stream (an int)", args, stream=s.raw)
    both("stream of a wrong type", args, stream=sentinel)
    both("closed stream", args, stream=closed_s)
    both("config None", args, config=None)
    both("config of a wrong type", args, config={"grid": 1})
    zero = cuabi.LaunchConfig(grid=1)     # LaunchConfig refuses 0 itself, as cuda.core's does
    zero._c.grid[0] = 0
    both("a zero grid (refused by the library)", args, config=zero)
    both("kernel None", args, kern=None)
    both("kernel of a wrong type", args, kern=5)
    k2 = kernel()
    both("first launch of a kernel", args, kern=k2)
    k3 = kernel()
    _launch.launch_py(s, cfg, k3, *args)
    k3.close()
    both("closed kernel", args, kern=k3)
    k4 = kernel()
    k4.close()
    both("kernel closed before its first launch", args, kern=k4)
    kw = []
    for f in (_lib.fast.launch, _launch.launch_py):
        try:
            f(s, cfg, kernel=k)
            kw.append(["ok"])
        except Exception as e:
            kw.append(["error", type(e).__name__, str(e)])
    out.append(["keyword arguments"] + kw)
    # A closed prepared launch: ClosedHandleError, or INVALID_HANDLE returned.
    prep = cuabi.prepare(k, cfg, s, *args)
    prep()
    prep.close()
    try:
        prep()
        r = ["ok"]
    except Exception as e:
        r = ["error", type(e).__name__, str(e)]
    out.append(["closed prepared launch", r, ["error", "ClosedHandleError", r[-1]]])
    out.append(["closed prepared raw_launch", ["ok", prep.raw_launch()], ["ok", 2]])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
