; NVVM IR (typed pointers, as libNVVM reads them) for tests/test_nvvm.c and
; tests/test_gpu_nvvm.c. nvvm_kernels.bc is `llvm-as-14 nvvm_kernels.ll`.
;   expk(out, in, n):  out[i] = expf(in[i])  through libdevice's __nv_expf
;   scale(y, x, a, n): y[i] = a * x[i]
target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

; nvJitLink (LTO-IR output) keeps only the kernels llvm.used names
@llvm.used = appending global [2 x i8*] [i8* bitcast (void (float*, float*, i32)* @expk to i8*), i8* bitcast (void (float*, float*, float, i32)* @scale to i8*)], section "llvm.metadata"

declare float @__nv_expf(float)
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()

define i32 @global_index() {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %d = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %bd = mul i32 %b, %d
  %i = add i32 %bd, %t
  ret i32 %i
}

define void @expk(float* %out, float* %in, i32 %n) {
entry:
  %i = call i32 @global_index()
  %ok = icmp slt i32 %i, %n
  br i1 %ok, label %body, label %done
body:
  %ie = sext i32 %i to i64
  %pi = getelementptr float, float* %in, i64 %ie
  %x = load float, float* %pi
  %y = call float @__nv_expf(float %x)
  %po = getelementptr float, float* %out, i64 %ie
  store float %y, float* %po
  br label %done
done:
  ret void
}

define void @scale(float* %y, float* %x, float %a, i32 %n) {
entry:
  %i = call i32 @global_index()
  %ok = icmp slt i32 %i, %n
  br i1 %ok, label %body, label %done
body:
  %ie = sext i32 %i to i64
  %px = getelementptr float, float* %x, i64 %ie
  %v = load float, float* %px
  %r = fmul float %a, %v
  %py = getelementptr float, float* %y, i64 %ie
  store float %r, float* %py
  br label %done
done:
  ret void
}

!nvvm.annotations = !{!0, !1}
!0 = !{void (float*, float*, i32)* @expk, !"kernel", i32 1}
!1 = !{void (float*, float*, float, i32)* @scale, !"kernel", i32 1}
!nvvmir.version = !{!2}
!2 = !{i32 2, i32 0, i32 3, i32 1}
