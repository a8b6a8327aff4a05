"""Programs (NVRTC), the compile cache and launch set-up without a GPU."""
import pytest

import cuabi

pytestmark = pytest.mark.skipif(not hasattr(cuabi, "Program"), reason="no program module")

SRC = r'''
template <typename T> __global__ void segsum(const T *x, T *out, const int *offsets, int n) {}
extern "C" __global__ void k(float *p, int n, float a) { if (n < 0) p[0] = a; }
'''


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path):
    if cuabi.runtime_info()["nvrtc_status"] != 0:
        pytest.skip("NVRTC not available")
    cuabi.cache.set_directory(str(tmp_path))
    yield
    cuabi.cache.set_directory(None)


def test_compile_and_kernels():
    prog = cuabi.Program(SRC)
    obj = prog.compile(arch="sm_90", name_expressions=["segsum<float>"])
    assert obj.code_type == "cubin" and obj.arch == 90
    k = obj.get_kernel("k")
    assert [s for _o, s in k.param_info] == [8, 4, 4]
    assert prog.lowered_name("segsum<float>").startswith("_Z")
    t = obj.get_kernel("segsum<float>")
    assert len(t.param_info) == 4


def test_compile_error_carries_log():
    with pytest.raises(cuabi.CompileError) as ei:
        cuabi.Program("__global__ void k() { this is not C++; }").compile(arch="sm_90")
    e = ei.value
    assert e.status_name == "CUABI_ERROR_COMPILE" and "error" in e.log


def test_options_and_cache():
    opts = cuabi.ProgramOptions(arch="sm_90", defines={"N": 4}, headers={"h.cuh": "#define M 2\n"})
    src = '#include "h.cuh"\nextern "C" __global__ void f(int *p) { p[0] = N + M; }\n'
    cuabi.Program(src).compile(opts)
    p2 = cuabi.Program(src)
    p2.compile(opts)
    assert p2.cache_hit in (1, 2)
    st = cuabi.cache.stats()
    assert st["memory_hits"] + st["disk_hits"] >= 1
    assert isinstance(cuabi.cache.directory(), str)
    cuabi.cache.clear()


def test_ptx_output_and_supported_archs():
    obj = cuabi.Program(SRC).compile(arch="sm_90", output="ptx")
    assert obj.code_type == "ptx" and b".entry k" in bytes(obj)
    assert 90 in cuabi.supported_archs()


@pytest.mark.skipif(not hasattr(cuabi, "launch"), reason="no launch module")
def test_launch_setup_without_gpu():
    cfg = cuabi.LaunchConfig(grid=(4, 2), block=128, shared_mem=256)
    assert cfg.grid == (4, 2, 1) and cfg._c.block[0] == 128
    k = cuabi.Program(SRC).compile(arch="sm_90").get_kernel("k")
    pack = cuabi.ArgPack.for_kernel(k)
    pack.set(0x1000, 5, 1.5)                 # raw slots: numbers packed by size
    assert pack[1] == (5).to_bytes(4, "little")
    pack.check(k)
    with pytest.raises(cuabi.ArgumentMismatchError):
        cuabi.ArgPack("ptr, i32").check(k)
    if cuabi.runtime_info()["driver_status"] != 0:
        with pytest.raises(cuabi.CuabiError):
            cuabi.launch(None, cfg, k, 0, 5, 1.0)
