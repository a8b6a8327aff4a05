"""cuda.core's compile-side names on a GPU (skipped without one): the code an
NVVM program compiled with extra_sources makes runs, a kernel compiled with a
precompiled header (create_pch, then use_pch) runs and matches one compiled
without, and the bytes NVRTC / nvJitLink hold behind Program.handle and
Linker.handle are the code that is loaded and run."""
import ctypes as C
import os

import numpy as np
import pytest

import cuabi

HEAD = r'''
target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"
target triple = "nvptx64-nvidia-cuda"
'''
VER = '!nvvmir.version = !{!9}\n!9 = !{i32 2, i32 0, i32 3, i32 1}\n'
MAIN = HEAD + r'''
declare float @op(float)
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
define void @k(float* %v, i32 %n) {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %b128 = mul i32 %b, 128
  %i = add i32 %b128, %t
  %ok = icmp slt i32 %i, %n
  br i1 %ok, label %body, label %done
body:
  %p = getelementptr float, float* %v, i32 %i
  %x = load float, float* %p
  %y = call float @op(float %x)
  store float %y, float* %p
  br label %done
done:
  ret void
}
!nvvm.annotations = !{!0}
!0 = !{void (float*, i32)* @k, !"kernel", i32 1}
''' + VER
OP = HEAD + r'''
define float @op(float %x) {
  %m = fmul float %x, 3.0
  %r = fadd float %m, 1.0
  ret float %r
}
''' + VER

CXX = r'''
#include "ops.h"
extern "C" __global__ void k(float *v, int n)
{
    int i = blockIdx.x * 128 + threadIdx.x;
    if (i < n) v[i] = affine(v[i]);
}
'''
OPS_H = r'''
#pragma once
template <typename T> __device__ T scale(T x) { return T(3) * x; }
__device__ inline float affine(float x) { return scale(x) + 1.0f; }
'''


def _loaded(stem):
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith(stem + ".so"):
                return path
    pytest.skip(f"{stem} is not loaded")


def _run(gpu, kernel, x):
    with gpu.create_stream(non_blocking=False) as s:
        buf = cuabi.Buffer.from_host(x, stream=s)
        cuabi.launch(s, cuabi.LaunchConfig(grid=(len(x) + 127) // 128, block=128), kernel,
                     buf.view("float32"), np.int32(len(x)))
        out = np.zeros_like(x)
        buf.copy_to(out, stream=s)
        s.synchronize()
    return out


def test_nvvm_extra_sources_run(gpu, tmp_path):
    cuabi.cache.set_directory(str(tmp_path / "cache"))
    try:
        p = cuabi.Program(MAIN, "nvvm")
        obj = p.compile("ptx", arch=gpu.arch, extra_sources=[("op.ll", OP)])
        x = np.linspace(-4, 4, 1000, dtype=np.float32)
        np.testing.assert_allclose(_run(gpu, obj.get_kernel("k"), x), 3 * x + 1,
                                   rtol=1e-6, atol=1e-6)  # fma on the GPU
        # bitcode-sized bytes work the same (sizes passed), and hit the cache
        q = cuabi.Program(MAIN, "nvvm")
        obj2 = q.compile("ptx", arch=gpu.arch, extra_sources=(("op.ll", OP.encode()),))
        assert q.cache_hit == 1
        np.testing.assert_allclose(_run(gpu, obj2.get_kernel("k"), x), 3 * x + 1,
                                   rtol=1e-6, atol=1e-6)  # fma on the GPU
    finally:
        cuabi.cache.set_directory(None)


def test_precompiled_header_kernels_run(gpu, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "ops.h").write_text(OPS_H)
    pch = str(tmp_path / "ops.pch")
    x = np.linspace(-4, 4, 1000, dtype=np.float32)
    want = 3 * x + 1
    opts = {"arch": gpu.arch, "include_path": str(inc), "cache": False}
    made = cuabi.Program(CXX, "c++", dict(opts, create_pch=pch))
    obj = made.compile("cubin")
    if made.pch_status is None:
        pytest.skip("NVRTC without PCH status (older than 12.8)")
    assert made.pch_status == "created" and os.path.getsize(pch) > 0
    np.testing.assert_allclose(_run(gpu, obj.get_kernel("k"), x), want,
                                   rtol=1e-6, atol=1e-6)  # fma on the GPU
    used = cuabi.Program(CXX, "c++", dict(opts, use_pch=pch))
    np.testing.assert_allclose(_run(gpu, used.compile("cubin").get_kernel("k"), x), want,
                               rtol=1e-6, atol=1e-6)  # fma on the GPU
    assert used.pch_status is None
    auto = tmp_path / "auto"
    auto.mkdir()
    a = cuabi.Program(CXX, "c++", dict(opts, pch=True, pch_dir=str(auto)))
    np.testing.assert_allclose(_run(gpu, a.compile("cubin").get_kernel("k"), x), want,
                               rtol=1e-6, atol=1e-6)  # fma on the GPU
    assert a.pch_status in ("created", "not_attempted")


def test_handles_hold_the_code_that_runs(gpu, tmp_path):
    cuabi.cache.set_directory(str(tmp_path / "cache"))
    try:
        inc = tmp_path / "inc"
        inc.mkdir()
        (inc / "ops.h").write_text(OPS_H)
        p = cuabi.Program(CXX, "c++", {"arch": gpu.arch, "include_path": str(inc)})
        assert p.handle                                   # asked first: kept from now on
        obj = p.compile("cubin")
        nvrtc = C.CDLL(_loaded("libnvrtc"))
        n = C.c_size_t()
        assert nvrtc.nvrtcGetCUBINSize(C.c_void_p(p.handle), C.byref(n)) == 0
        buf = C.create_string_buffer(n.value)
        assert nvrtc.nvrtcGetCUBIN(C.c_void_p(p.handle), buf) == 0
        assert buf.raw == bytes(obj)
        x = np.linspace(-4, 4, 1000, dtype=np.float32)
        np.testing.assert_allclose(_run(gpu, obj.get_kernel("k"), x), 3 * x + 1,
                                   rtol=1e-6, atol=1e-6)  # fma on the GPU

        ptx = cuabi.Program(CXX, "c++", {"arch": gpu.arch, "include_path": str(inc)}).compile(
            "ptx")
        lk = cuabi.Linker(arch=f"sm_{gpu.arch}")
        h = lk.handle                                     # opens the session: uncached now
        lk.add(ptx)
        linked = lk.link("cubin")
        jl = C.CDLL(_loaded("libnvJitLink"))
        assert jl.nvJitLinkGetLinkedCubinSize(C.c_void_p(h), C.byref(n)) == 0
        buf = C.create_string_buffer(n.value)
        assert jl.nvJitLinkGetLinkedCubin(C.c_void_p(h), buf) == 0
        assert buf.raw == bytes(linked) and lk.cache_hit == 0
        np.testing.assert_allclose(_run(gpu, linked.get_kernel("k"), x), 3 * x + 1,
                                   rtol=1e-6, atol=1e-6)  # fma on the GPU
    finally:
        cuabi.cache.set_directory(None)
