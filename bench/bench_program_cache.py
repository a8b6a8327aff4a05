#!/usr/bin/env python3
"""cuda.core's program caches on cuabi (issue 24): what a compile costs with
each cache, hit and miss.

    CUABI_LIBRARY=.libs/libcuabi.so PYTHONPATH=bindings/python \
        python3 bench/bench_program_cache.py [--runs 30] [--json FILE]

Per row, the median over --runs of one Program(...).compile("cubin", ...)
(a fresh Program each time, so nothing is remembered by the object):

  compile              cuabi's C cache off (CUABI_CACHE=0 semantics: cache=False), no cache=
  c_cache_hit          cuabi's own C cache (memory layer), no cache=
  key                  make_program_cache_key alone
  in_memory_hit        cache=InMemoryProgramCache()
  file_stream_hit      cache=FileStreamProgramCache(dir) (open, fstat, read, checksum, utime)
  file_stream_miss     a new key each time: compile (C cache off) + store (write, fsync, rename)
  file_stream_get      cache.get(key) alone
  cuda_core_file_hit   cuda.core's FileStreamProgramCache hit, when cuda.core is installed

and, with a GPU, `load_from_hit` (the hit's ObjectCode loaded and its kernel
found). No GPU is needed for the rest (NVRTC compiles without one).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

SRC = r'''
template <typename T> __device__ T sq(T x) { return x * x; }
extern "C" __global__ void k(float *y, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sq(x[i]) + 1.0f;
}
'''


def median_us(fn, runs):
    fn()                                            # warm
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json")
    args = ap.parse_args()
    import cuabi
    from cuabi.utils import FileStreamProgramCache, InMemoryProgramCache, make_program_cache_key
    arch = "sm_90"
    gpu = False
    try:
        if cuabi.device_count() > 0:
            gpu = True
            dev = cuabi.Device(0)
            dev.set_current()
            arch = dev.sm_arch
    except cuabi.CuabiError:
        pass
    opts = cuabi.ProgramOptions(arch=arch)
    off = cuabi.ProgramOptions(arch=arch, cache=False)
    rows = {}
    rows["compile"] = median_us(lambda: cuabi.Program(SRC, "c++", options=off).compile("cubin"),
                                max(3, args.runs // 5))
    rows["c_cache_hit"] = median_us(
        lambda: cuabi.Program(SRC, "c++", options=opts).compile("cubin"), args.runs)
    rows["key"] = median_us(lambda: make_program_cache_key(
        code=SRC, code_type="c++", options=opts, target_type="cubin"), args.runs)
    mem = InMemoryProgramCache()
    rows["in_memory_hit"] = median_us(
        lambda: cuabi.Program(SRC, "c++", options=opts).compile("cubin", cache=mem), args.runs)
    with tempfile.TemporaryDirectory() as d:
        fs = FileStreamProgramCache(os.path.join(d, "pc"))
        rows["file_stream_hit"] = median_us(
            lambda: cuabi.Program(SRC, "c++", options=opts).compile("cubin", cache=fs), args.runs)
        key = make_program_cache_key(code=SRC, code_type="c++", options=opts, target_type="cubin")
        rows["file_stream_get"] = median_us(lambda: fs.get(key), args.runs)
        n = [0]

        def miss():
            n[0] += 1
            src = SRC + f"\n// {n[0]}\n"
            cuabi.Program(src, "c++", options=off).compile("cubin", cache=fs)
        rows["file_stream_miss"] = median_us(miss, max(3, args.runs // 5))
        if gpu:
            def load():
                obj = cuabi.Program(SRC, "c++", options=opts).compile("cubin", cache=fs)
                obj.get_kernel("k")
            rows["load_from_hit"] = median_us(load, args.runs)
    try:
        from cuda.core import Program as CProgram, ProgramOptions as CProgramOptions
        from cuda.core.utils import FileStreamProgramCache as CFileStream
        with tempfile.TemporaryDirectory() as d:
            cfs = CFileStream(os.path.join(d, "pc"))
            copts = CProgramOptions(arch=arch)
            rows["cuda_core_file_hit"] = median_us(
                lambda: CProgram(SRC, "c++", options=copts).compile("cubin", cache=cfs), args.runs)
    except Exception as e:                         # not installed, or no GPU for cuda.core
        rows["cuda_core_file_hit"] = None
        print(f"(cuda.core: {type(e).__name__}: {e})", file=sys.stderr)
    print(f"arch {arch}, gpu {gpu}, median of {args.runs} (compile/miss: fewer)")
    for name, us in rows.items():
        print(f"  {name:20s} {'-' if us is None else f'{us:12.1f} us'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"arch": arch, "gpu": gpu, "us": rows}, f, indent=1)


if __name__ == "__main__":
    main()
