"""cuda.core's spellings work on cuabi's classes (issue 17 item 2): a
cuda.core user changes the import, not the calls. No GPU needed."""
import io

import pytest

import cuabi

pytestmark = pytest.mark.skipif(not hasattr(cuabi, "Program"), reason="no program module")

SRC = r'''
#ifndef SCALE
#error SCALE is not defined
#endif
#include "inc.h"
template <typename T, int N> __global__ void t(T *x, T a, int n) { if (n < 0) x[0] = a * N * SCALE + EXTRA; }
extern "C" __global__ void k(float *p, int n, double a) { if (n < 0) p[0] = a; }
'''


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path):
    if cuabi.runtime_info()["nvrtc_status"] != 0:
        pytest.skip("NVRTC not available")
    cuabi.cache.set_directory(str(tmp_path / "cache"))
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "inc.h").write_text("#define EXTRA 1\n")
    yield str(tmp_path / "inc")
    cuabi.cache.set_directory(None)


def test_program_with_options_and_positional_target(_cache_dir):
    opts = cuabi.ProgramOptions(arch="sm_90", std="c++17", include_path=_cache_dir,
                                define_macro=[("SCALE", "2"), "UNUSED"], lineinfo=True,
                                relocatable_device_code=False, max_register_count=64,
                                name="mine.cu")
    prog = cuabi.Program(SRC, "c++", options=opts)
    log = io.StringIO()
    obj = prog.compile("cubin", name_expressions=["t<float, 4>"], logs=log)
    assert obj.code_type == "cubin" and obj.arch == 90
    assert isinstance(log.getvalue(), str)
    # cuda.core's positional form Program(code, code_type, options) too
    obj2 = cuabi.Program(SRC, "c++", opts).compile("ptx", name_expressions=("t<float, 4>",))
    assert obj2.code_type == "ptx"
    # the name-expression map survives; spacing does not matter
    k = obj.get_kernel("t<float,4>")
    assert k.num_arguments == 3
    assert [(a.offset, a.size) for a in k.arguments_info] == [(0, 8), (8, 4), (12, 4)]
    assert k.signature == "float*, float, int"


def test_aliases_map_to_cuabi_fields():
    o = cuabi.ProgramOptions(link_time_optimization=True, use_fast_math=True,
                             include_path=["a", "b"], define_macro="X", lineinfo=True,
                             relocatable_device_code=True, ftz=True, prec_div=False,
                             ptxas_options=["-v"], device_int128=True)
    assert o.lto and o.fast_math and o.line_info and o.relocatable
    assert o.include_paths == ["a", "b"] and o.defines == ["X"]
    assert "--ftz=true" in o.extra_options and "--prec-div=false" in o.extra_options
    assert "--ptxas-options=-v" in o.extra_options and "--device-int128" in o.extra_options
    with pytest.raises(ValueError, match="include_path .* or include_paths, not both"):
        cuabi.ProgramOptions(include_path="a", include_paths=["b"])
    with pytest.raises(TypeError):
        cuabi.ProgramOptions(no_such_option=1)


def test_lto_through_cuda_core_names():
    src = 'extern "C" __global__ void k(float *p) { p[0] = 1; }'
    code = cuabi.Program(src, "c++", cuabi.ProgramOptions(arch="sm_90",
                         link_time_optimization=True)).compile("ltoir")
    assert code.code_type == "ltoir"


def test_compile_errors_are_clear():
    prog = cuabi.Program('extern "C" __global__ void k() {}')
    with pytest.raises(TypeError, match="target_type must be"):
        prog.compile(3)
    with pytest.raises(TypeError, match="unknown option bogus"):
        prog.compile("cubin", bogus=1)
    with pytest.raises(TypeError, match="options must be a ProgramOptions"):
        cuabi.Program("x", "c++", options=["arch", "sm_90"])
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        cuabi.Program("x", "c++", options={"bogus": 1})      # a dict: ProgramOptions(**d)
    # the old spelling keeps working
    assert prog.compile(cuabi.ProgramOptions(arch="sm_90")).code_type == "cubin"
    assert prog.compile(arch="sm_90", output="ptx").code_type == "ptx"


def test_object_code_from_cuda_core_constructors(tmp_path):
    src = 'extern "C" __global__ void k(float *p, int n) {}'
    cubin = bytes(cuabi.Program(src).compile(arch="sm_90").code)
    ptx = bytes(cuabi.Program(src).compile(arch="sm_90", output="ptx").code)
    a = cuabi.ObjectCode.from_cubin(cubin, name="k.cubin")
    assert a.code_type == "cubin" and a.kernel_names == ["k"]
    path = tmp_path / "k.ptx"
    path.write_bytes(ptx)
    b = cuabi.ObjectCode.from_ptx(str(path))
    assert b.code_type == "ptx"
    c = cuabi.ObjectCode.from_ptx(path, symbol_mapping={"kern": "k"})
    assert c.get_kernel("kern").name == "k"
    assert c.get_kernel("kern").signature == ".u64, .u32"


def test_get_kernel_miss_lists_the_expressions():
    src = "template <typename T, int N> __global__ void t(T *x) {}"
    obj = cuabi.Program(src).compile(arch="sm_90", name_expressions=["t<float, 4>"])
    with pytest.raises(cuabi.NotFoundError, match=r'name expressions: "t<float, 4>"'):
        obj.get_kernel("t<int,4>")


def test_launch_config_aliases():
    c = cuabi.LaunchConfig(grid=2, block=64, shmem_size=128, cooperative_launch=True)
    assert c.shared_mem == 128 and c.shmem_size == 128 and c.cooperative_launch
    assert c._c.dynamic_shared_bytes == 128 and c._c.cooperative == 1
    with pytest.raises(ValueError, match="shmem_size or shared_mem"):
        cuabi.LaunchConfig(shared_mem=1, shmem_size=2)


def test_prepare_with_wrong_count_says_how_many():
    src = 'extern "C" __global__ void k(float *p, int n, float a) {}'
    k = cuabi.Program(src).compile(arch="sm_90").get_kernel("k")
    pack = cuabi.ArgPack.for_kernel(k)
    with pytest.raises(TypeError, match=r"kernel k takes 3 arguments \(.u64, .u32, .f32\), 1 given"):
        pack.set(0)
