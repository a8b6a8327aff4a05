#!/usr/bin/env python3
"""The seed's 14-argument kernel -- every kind of argument cuLaunchKernel
takes, a texture and a surface among them -- launched with objects cuabi
made alone (no CuPy, no cuda-python): an OpaqueArray, a TextureObject over
it and a SurfaceObject writing it, next to a char, a short, an int, a long
long, an unsigned, a float, a double, a struct, a float4, a bool, a size_t
and a pointer. The kernel echoes what it received; the script checks it.

    python3 examples/python/texture_kernel_args.py

Needs a GPU (exits 0 saying so without one) and NVRTC.
"""
import numpy as np

import _cuabi_path  # noqa: F401  (finds bindings/python and build/.libs)
import cuabi
from cuabi.texture import OpaqueArray, ResourceDescriptor, SurfaceObject, TextureObject

SOURCE = r"""
struct Pair { int a; float b; };
extern "C" __global__ void seed14(signed char c, short s, int i, long long ll, unsigned u,
                                  float f, double d, Pair p, float4 v, bool flag,
                                  unsigned long long sz, cudaTextureObject_t tex,
                                  cudaSurfaceObject_t surf, double *out) {
    out[0] = c; out[1] = s; out[2] = i; out[3] = (double)ll; out[4] = u; out[5] = f;
    out[6] = d; out[7] = p.a; out[8] = p.b; out[9] = v.x + 10 * v.y + 100 * v.z + 1000 * v.w;
    out[10] = flag ? 1 : 0; out[11] = (double)sz;
    out[12] = tex2D<float>(tex, 2.5f, 1.5f);           // element (2, 1)
    float r; surf2Dread(&r, surf, 3 * (int)sizeof(float), 2);
    out[13] = r;                                        // element (3, 2)
    surf2Dwrite(-7.5f, surf, 0, 0);
}
"""

ARGS = (np.int8(-5), np.int16(-300), np.int32(70000), np.int64(10**12), np.uint32(4 * 10**9),
        np.float32(1.5), np.float64(-2.25))
PAIR = np.array((17, 0.5), dtype=np.dtype([("a", np.int32), ("b", np.float32)]))[()]
FLOAT4 = np.array([1, 2, 3, 4], np.float32)


def main():
    if cuabi.runtime_info()["nvrtc_status"] != 0:
        print("NVRTC is not available:", cuabi.runtime_info()["nvrtc_error"])
        return
    try:
        n = cuabi.device_count()
    except cuabi.CuabiError as e:
        n, why = 0, e.message
    else:
        why = "no GPU"
    if n == 0:
        print(f"texture_kernel_args needs a GPU ({why}); nothing to do")
        return
    dev = cuabi.Device(0)
    kernel = cuabi.Program(SOURCE).compile(arch=dev.arch).get_kernel("seed14")
    img = (np.arange(32, dtype=np.float32) * 1.25).reshape(4, 8)
    array = OpaqueArray.from_descriptor(shape=(8, 4), format="float32",
                                        is_surface_load_store=True)
    array.copy_from(img)
    tex = TextureObject.from_descriptor(resource=ResourceDescriptor.from_opaque_array(array))
    surf = SurfaceObject.from_array(array)
    with dev.create_stream(non_blocking=False) as s:
        out = cuabi.Buffer(14 * 8, stream=s)
        cuabi.launch(s, cuabi.LaunchConfig(grid=1, block=1), kernel, *ARGS, PAIR,
                     FLOAT4.tobytes(), True, np.uint64(123456789012), tex, surf, out)
        got = np.frombuffer(out.to_bytes(stream=s), np.float64)
        s.synchronize()
    want = [float(a) for a in ARGS] + [17, 0.5, 4321, 1, 123456789012, img[1, 2], img[2, 3]]
    for name, g, w in zip(("char", "short", "int", "long long", "unsigned", "float", "double",
                           "Pair.a", "Pair.b", "float4", "bool", "size_t", "texture",
                           "surface"), got, want):
        print(f"{name:>10}: {g!r}")
        if g != w:
            raise SystemExit(f"{name} reached the kernel as {g}, not {w}")
    corner = np.zeros(1, np.float32)
    array.copy_to(corner, extent=(1, 1))
    print(f"the surface wrote {corner[0]} at (0, 0)")
    if corner[0] != -7.5:
        raise SystemExit("the surface write did not land")


if __name__ == "__main__":
    main()
