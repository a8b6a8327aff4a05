#!/usr/bin/env python3
"""Link PTX into a CUBIN with nvJitLink and inspect the kernel, without a GPU.

    python3 examples/python/link_ptx.py

Runs from any directory of a source checkout built in build/ (see
_cuabi_path.py); elsewhere install the package (pip install ./bindings/python)
or set CUABI_LIBRARY to the absolute path of libcuabi.so.
"""
import _cuabi_path  # noqa: F401  (finds bindings/python and build/.libs)
import cuabi

PTX = b""".version 8.0
.target sm_90
.address_size 64
.visible .entry scale(.param .u64 p, .param .u32 n, .param .f32 a) { ret; }
"""

with cuabi.Linker(cuabi.ObjectCode.from_bytes(PTX, "ptx"), arch="sm_90") as linker:
    cubin = linker.link("cubin")
k = cubin.get_kernel("scale")
print(cubin.code_type, cubin.arch, cubin.kernel_names, k.param_info)
print("registers:", k.resources.registers, "limits:", cuabi.arch_limits("sm_90")["registers_per_sm"])
