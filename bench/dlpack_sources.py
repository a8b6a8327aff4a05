"""What the array producers offer from_dlpack(), and what each read costs.

Prints, for numpy, torch and CuPy (whichever import): whether the type has a
DLPack C exchange API (`__dlpack_c_exchange_api__`, DLPack 1.3, or the older
`__c_dlpack_exchange_api__`) and its capsule name and version, then the time
of each attribute read or call the cuabi from_dlpack handlers could make,
and of the producers' own exports (`__dlpack__`, the CUDA array interface)
for scale. A diagnostic for choosing handlers, not a target benchmark.
Usage: python3 bench/dlpack_sources.py
"""
import ctypes
import sys
import timeit

N = 200000


def us(stmt, g):
    t = min(timeit.repeat(stmt, globals=g, number=N, repeat=5))
    return t / N * 1e6


def exchange_api(tp):
    for name in ("__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"):
        obj = getattr(tp, name, None)
        if obj is None:
            continue
        if isinstance(obj, int):
            return name, "int", obj
        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        cname = api.PyCapsule_GetName(obj)
        return name, cname, api.PyCapsule_GetPointer(obj, cname)
    return None


def describe(label, x, stmts):
    tp = type(x)
    api = exchange_api(tp)
    line = f"{label}: {tp.__module__}.{tp.__qualname__}"
    if api:
        name, kind, ptr = api
        major, minor = (ctypes.c_uint32 * 2).from_address(ptr)
        line += f"  exchange API {name} ({kind}) version {major}.{minor}"
    else:
        line += "  no exchange API"
    print(line)
    g = {"x": x, **stmts.pop("_globals", {})}
    for s in stmts:
        try:
            print(f"  {us(s, g):7.3f} us  {s}")
        except Exception as e:  # a producer without that attribute
            print(f"     n/a     {s}  ({type(e).__name__}: {e})")


def main():
    print(sys.version.split()[0])
    try:
        import numpy as np
        a = np.zeros((64, 64), np.float32)
        describe(f"numpy {np.__version__}", a, {
            "x.dtype": 0, "x.shape": 0, "x.strides": 0, "x.__array_interface__": 0,
            "x.__dlpack__()": 0, "type(x).__dlpack_c_exchange_api__": 0})
    except ImportError:
        pass
    try:
        import torch
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        t = torch.zeros((64, 64), device=dev)
        describe(f"torch {torch.__version__} ({dev})", t, {
            "x.dtype": 0, "x.device": 0, "x.device.index": 0, "x.shape": 0, "x.stride()": 0,
            "x.data_ptr()": 0, "x.requires_grad": 0, "x.is_conj()": 0, "x.is_neg()": 0,
            "x.layout": 0, "x.__dlpack__()": 0, "type(x).__dlpack_c_exchange_api__": 0})
        c = torch.tensor([1 + 2j, 3 - 4j], device=dev)
        neg = c.conj().imag
        try:
            got = torch.from_dlpack(neg.__dlpack__()).tolist()
        except Exception as e:
            got = f"{type(e).__name__}: {e}"
        print(f"  negative bit {neg.is_neg()}: values {neg.tolist()}, "
              f"through its own __dlpack__: {got}")
    except ImportError:
        pass
    try:
        import cupy
        x = cupy.zeros((64, 64), cupy.float32)
        from cupy_backends.cuda import stream as cs
        describe(f"cupy {cupy.__version__}", x, {
            "_globals": {"cupy": cupy, "cs": cs},
            "x.dtype": 0, "x.shape": 0, "x.strides": 0, "x._c_contiguous": 0, "x.size": 0,
            "x.data": 0, "x.data.ptr": 0, "x.device": 0, "x.device.id": 0,
            "cupy.cuda.get_current_stream()": 0, "cupy.cuda.get_current_stream().ptr": 0,
            "cupy.cuda.stream.get_current_stream_ptr()": 0, "x.data.device_id": 0,
            "cs.get_default_stream_ptr()": 0,
            "x.__cuda_array_interface__": 0, "x.__dlpack__()": 0,
            "type(x).__dlpack_c_exchange_api__": 0})
    except ImportError:
        pass
    try:
        from cuda.core import StridedMemoryView
        import numpy as np
        probes = {"_globals": {"SMV": StridedMemoryView}}
        for label, mod, make in (("numpy", "numpy", "np.zeros((64, 64), np.float32)"),
                                 ("torch", "torch", "torch.zeros((64, 64), device='cuda')"),
                                 ("cupy", "cupy", "cupy.zeros((64, 64), cupy.float32)")):
            try:
                m = __import__(mod)
                probes["_globals"][label] = eval(make, {"np": np, mod: m})
                fn = "from_dlpack" if hasattr(StridedMemoryView, "from_dlpack") else None
                probes[f"SMV.from_dlpack({label}, -1)" if fn else f"SMV({label}, -1)"] = 0
            except Exception:
                pass
        describe("cuda.core StridedMemoryView", 0, probes)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
