"""NVVM IR programs (libNVVM) without a GPU: Program(code, "nvvm") as
cuda.core spells it, text and bitcode, PTX and LTO-IR, libdevice, errors."""
import os

import pytest

import cuabi

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                    "tests", "fixtures", "data")


def _data(name):
    path = os.path.join(os.environ.get("CUABI_TEST_SRCDIR", ""), "tests", "fixtures", "data", name)
    if not os.path.exists(path):
        path = os.path.join(DATA, name)
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path):
    info = cuabi.runtime_info()
    if info["nvrtc_status"] != 0:
        pytest.skip("NVRTC not available")
    cuabi.cache.set_directory(str(tmp_path))
    yield
    cuabi.cache.set_directory(None)


def _nvvm_or_skip(prog, *args, **kw):
    try:
        return prog.compile(*args, **kw)
    except cuabi.CuabiError as e:
        if e.status_name == "CUABI_ERROR_NOT_SUPPORTED" and "libNVVM" in str(e):
            pytest.skip("libNVVM not available")
        raise


@pytest.mark.parametrize("name", ["nvvm_kernels.ll", "nvvm_kernels.bc"])
def test_text_and_bitcode_to_ptx(name):
    src = _data(name)
    code = src.decode() if name.endswith(".ll") else src
    prog = cuabi.Program(code, "nvvm")
    obj = _nvvm_or_skip(prog, arch="sm_90", use_libdevice=True)  # default target: PTX
    assert obj.code_type == "ptx"
    ptx = bytes(obj)
    assert b".entry expk(" in ptx and b".entry scale(" in ptx
    assert b"__nv_expf" not in ptx          # libdevice linked in
    assert sorted(obj.kernel_names) == ["expk", "scale"]
    plain = prog.compile("ptx", options=cuabi.ProgramOptions(arch="sm_90"))
    assert b"__nv_expf" in bytes(plain)     # an external call without it


def test_ltoir_and_name_lookup():
    prog = cuabi.Program(_data("nvvm_kernels.bc"), "nvvm")
    obj = _nvvm_or_skip(prog, target_type="ltoir", name_expressions=["scale"], arch="sm_90",
                        libdevice=True)
    assert obj.code_type == "ltoir"
    assert prog.lowered_name("scale") == "scale"
    with pytest.raises(cuabi.CuabiError) as ei:
        prog.compile("ltoir", name_expressions=["nothere"], arch="sm_90")
    assert ei.value.status_name == "CUABI_ERROR_NOT_FOUND"


def test_cuda_core_options_map_to_libnvvm():
    prog = cuabi.Program(_data("nvvm_kernels.ll").decode(), "nvvm")
    opts = cuabi.ProgramOptions(arch="sm_90", ftz=True, prec_div=False, prec_sqrt=False,
                                fma=True, device_code_optimize=True, use_libdevice=True)
    ptx = bytes(_nvvm_or_skip(prog, "ptx", options=opts))
    assert b"mul.ftz.f32" in ptx
    ptx = bytes(prog.compile("ptx", options=cuabi.ProgramOptions(arch="sm_90", ftz=False)))
    assert b"mul.ftz.f32" not in ptx


def test_cubin_is_refused_and_malformed_ir_fails_cleanly():
    prog = cuabi.Program(_data("nvvm_kernels.ll").decode(), "nvvm")
    _nvvm_or_skip(prog, arch="sm_90")
    with pytest.raises(cuabi.CuabiError) as ei:
        prog.compile("cubin", arch="sm_90")
    assert ei.value.status_name == "CUABI_ERROR_NOT_SUPPORTED" and "PTX" in str(ei.value)
    bad = cuabi.Program("define void @k() {\n  bogus\n}\n", "nvvm")
    with pytest.raises(cuabi.CompileError) as ei:
        bad.compile(arch="sm_90")
    assert "program.ll" in str(ei.value) and "parse" in ei.value.log
    assert "parse" in bad.log


def test_cache_hit():
    src = _data("nvvm_kernels.ll").decode()
    a = cuabi.Program(src, "nvvm")
    _nvvm_or_skip(a, arch="sm_90", libdevice=True)
    b = cuabi.Program(src, "nvvm")
    b.compile(arch="sm_90", libdevice=True)
    assert b.cache_hit in (1, 2)
    b.compile(arch="sm_90")
    assert b.cache_hit == 0                   # libdevice is part of the key


def test_links_with_cxx_ltoir():
    ir = cuabi.Program(_data("nvvm_kernels.ll").decode(), "nvvm")
    lto_ir = _nvvm_or_skip(ir, target_type="ltoir", arch="sm_90", libdevice=True)
    cxx = cuabi.Program('extern "C" __device__ float unused(float x) { return x; }\n')
    lto_cxx = cxx.compile("ltoir", arch="sm_90", relocatable=True)
    linked = cuabi.Linker(lto_ir, lto_cxx, arch="sm_90", lto=True).link("cubin")
    assert sorted(linked.kernel_names) == ["expk", "scale"]
