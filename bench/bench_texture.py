#!/usr/bin/env python3
"""Creating and destroying a texture object over a 2-D array from Python:
cuabi's TextureObject.from_descriptor + close() beside CuPy's
cupy.cuda.texture.TextureObject (made from prebuilt descriptors, destroyed
by `del`) and cuda.core's TextureObject.from_descriptor + close() when the
installed cuda.core has a texture module, all over a 512 x 512 float32
array with the same description (clamp, linear filtering, element reads);
and the raw driver pair through cuda.bindings when it is installed.

    CUABI_LIBRARY=.libs/libcuabi.so PYTHONPATH=bindings/python python3 bench/bench_texture.py \\
        [--iters 20000] [--rounds 9] [--json FILE]

Each row is the median over --rounds rounds of --iters pairs, the rounds of
every row interleaved (row order rotating) so that the host's drift is
shared. Needs a GPU; prints "skipped" without one. Target: cuabi <= CuPy.
"""
import argparse
import json
import statistics
import sys
import time


def cuabi_row():
    import cuabi
    from cuabi.texture import (FilterMode, OpaqueArray, ResourceDescriptor, TextureDescriptor,
                               TextureObject)
    arr = OpaqueArray.from_descriptor(shape=(512, 512), format="float32")
    rd = ResourceDescriptor.from_opaque_array(arr)
    td = TextureDescriptor(filter_mode=FilterMode.LINEAR)

    def pair():
        TextureObject.from_descriptor(resource=rd, texture_descriptor=td).close()
    pair()
    return f"cuabi {cuabi.version()} ({cuabi.backend})", pair, arr


def cupy_row():
    try:
        import cupy
        from cupy.cuda import runtime, texture
    except Exception as e:          # noqa: BLE001 - any import failure skips the row
        return None, f"CuPy: not available ({type(e).__name__})"
    ch = texture.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindFloat)
    arr = texture.CUDAArray(ch, 512, 512)
    res = texture.ResourceDescriptor(runtime.cudaResourceTypeArray, cuArr=arr)
    tex = texture.TextureDescriptor([runtime.cudaAddressModeClamp] * 2,
                                    runtime.cudaFilterModeLinear,
                                    runtime.cudaReadModeElementType)

    def pair():
        t = texture.TextureObject(res, tex)
        del t
    pair()
    return (f"CuPy {cupy.__version__} TextureObject", pair, (arr, res, tex)), None


def cuda_core_row():
    try:
        import cuda.core as cc
        from cuda.core.texture import (FilterMode, ResourceDescriptor, TextureDescriptor,
                                       TextureObject)
        try:
            from cuda.core.texture import OpaqueArray as Arr
        except ImportError:
            from cuda.core.texture import CUDAArray as Arr
        from cuda.core.texture import ArrayFormat
    except Exception as e:          # noqa: BLE001
        return None, f"cuda.core: no texture module ({type(e).__name__})"
    cc.Device(0).set_current()
    arr = Arr.from_descriptor(shape=(512, 512), format=ArrayFormat.FLOAT32, num_channels=1)
    rd = ResourceDescriptor.from_opaque_array(arr) if hasattr(ResourceDescriptor,
                                                              "from_opaque_array") \
        else ResourceDescriptor.from_cuda_array(arr)
    td = TextureDescriptor(filter_mode=FilterMode.LINEAR)

    def pair():
        TextureObject.from_descriptor(resource=rd, texture_descriptor=td).close()
    pair()
    return (f"cuda.core {getattr(cc, '__version__', '?')} TextureObject", pair, arr), None


def raw_row(arr_native):
    try:
        from cuda.bindings import driver as drv
    except Exception as e:          # noqa: BLE001
        return None, f"cuda.bindings: not available ({type(e).__name__})"
    res = drv.CUDA_RESOURCE_DESC()
    res.resType = drv.CUresourcetype.CU_RESOURCE_TYPE_ARRAY
    res.res.array.hArray = drv.CUarray(arr_native)
    td = drv.CUDA_TEXTURE_DESC()
    td.addressMode = [drv.CUaddress_mode.CU_TR_ADDRESS_MODE_CLAMP] * 3
    td.filterMode = drv.CUfilter_mode.CU_TR_FILTER_MODE_LINEAR
    td.flags = 1

    def pair():
        err, t = drv.cuTexObjectCreate(res, td, None)
        drv.cuTexObjectDestroy(t)
    pair()
    return ("cuda.bindings cuTexObjectCreate + Destroy (Python)", pair, None), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--json")
    a = ap.parse_args()
    import cuabi
    try:
        n = cuabi.device_count()
    except cuabi.CuabiError as e:
        print(f"texture_create_destroy (Python): skipped ({e.message})")
        return
    if n == 0:
        print("texture_create_destroy (Python): skipped (no GPU)")
        return
    rows, notes = [], []
    name, pair, arr = cuabi_row()
    rows.append((name, pair))
    for make in (cupy_row, cuda_core_row):
        row, note = make()
        if row:
            rows.append(row[:2])
        else:
            notes.append(note)
    row, note = raw_row(arr.handle)
    if row:
        rows.append(row[:2])
    else:
        notes.append(note)
    times = {r[0]: [] for r in rows}
    for rnd in range(a.rounds):
        order = rows[rnd % len(rows):] + rows[:rnd % len(rows)]
        for rname, fn in order:
            t0 = time.perf_counter()
            for _ in range(a.iters):
                fn()
            times[rname].append((time.perf_counter() - t0) / a.iters * 1e6)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"texture create + destroy over a 512x512 float32 array, us per pair (median of "
          f"{a.rounds} rounds x {a.iters}):")
    base = med[rows[0][0]]
    for k, v in med.items():
        print(f"  {k:<52} {v:8.3f}   x{v / base:.2f} of cuabi")
    cupy_key = next((k for k in med if k.startswith("CuPy")), None)
    if cupy_key:
        print(f"texture_python_cuabi_over_cupy {base / med[cupy_key]:.3f}  (target <= 1.0)")
    for n_ in notes:
        print("  " + n_)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"us_per_pair": med, "rounds": times, "notes": notes}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
