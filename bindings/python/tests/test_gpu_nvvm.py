"""NVVM IR programs on a GPU: a libNVVM kernel with libdevice runs, and NVVM
LTO-IR linked with C++ LTO-IR through nvJitLink runs (skipped without one)."""
import numpy as np
import pytest

import cuabi

IR = r'''
target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"
target triple = "nvptx64-nvidia-cuda"
@llvm.used = appending global [1 x i8*] [i8* bitcast (void (float*, i32)* @k to i8*)], section "llvm.metadata"
declare float @cxx_op(float)
declare float @__nv_expf(float)
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
  %e = call float @__nv_expf(float %x)
  %y = call float @cxx_op(float %e)
  store float %y, float* %p
  br label %done
done:
  ret void
}
!nvvm.annotations = !{!0}
!0 = !{void (float*, i32)* @k, !"kernel", i32 1}
!nvvmir.version = !{!1}
!1 = !{i32 2, i32 0, i32 3, i32 1}
'''
CXX = 'extern "C" __device__ float cxx_op(float x) { return 3.0f * x + 1.0f; }\n'
EXP_ONLY = IR.replace("declare float @cxx_op(float)\n",
                   "define float @cxx_op(float %x) {\n  ret float %x\n}\n")


def _run(gpu, kernel, x):
    with gpu.create_stream(non_blocking=False) as s:
        buf = cuabi.Buffer.from_host(x, stream=s)
        cuabi.launch(s, cuabi.LaunchConfig(grid=(len(x) + 127) // 128, block=128), kernel,
                     buf.view("float32"), np.int32(len(x)))
        out = np.zeros_like(x)
        buf.copy_to(out, stream=s)
        s.synchronize()
    return out


def test_nvvm_kernel_with_libdevice_runs(gpu):
    obj = cuabi.Program(EXP_ONLY, "nvvm").compile("ptx", arch=gpu.arch, use_libdevice=True)
    x = np.linspace(-5, 5, 1000, dtype=np.float32)
    np.testing.assert_allclose(_run(gpu, obj.get_kernel("k"), x), np.exp(x), rtol=2e-6)


def test_nvvm_ltoir_linked_with_cxx_runs(gpu):
    ir = cuabi.Program(IR, "nvvm").compile("ltoir", arch=gpu.arch, use_libdevice=True)
    cxx = cuabi.Program(CXX).compile("ltoir", arch=gpu.arch, relocatable=True)
    linked = cuabi.Linker(ir, cxx, arch=gpu.arch, lto=True).link("cubin")
    x = np.linspace(0, 4, 1000, dtype=np.float32)
    np.testing.assert_allclose(_run(gpu, linked.get_kernel("k"), x), 3 * np.exp(x) + 1,
                               rtol=4e-6)
