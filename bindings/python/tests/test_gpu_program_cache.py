"""cuda.core.utils's program caches on a GPU (issue 24): kernels whose code
came out of FileStreamProgramCache / InMemoryProgramCache -- a hit in a
fresh process that compiles nothing, a damaged entry compiled again, PTX
and LTO-IR targets, the manual make_program_cache_key pattern with name
expressions, the current device's architecture -- load and compute the
right answer. Skipped without a GPU (test_program_cache.py covers the
rest on the CPU)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cuabi
from cuabi import _compile
from cuabi.utils import FileStreamProgramCache, InMemoryProgramCache, make_program_cache_key

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''
TEMPLATE = r'''
template <typename T> __global__ void scale(T *x, T s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}
'''
N = 100_003


@pytest.fixture(autouse=True)
def _c_cache(tmp_path):
    """Keep cuabi's own C compile cache out of the way (its directory is the
    test's), so a "compiled nothing" below is the program cache's doing."""
    cuabi.cache.set_directory(str(tmp_path / "c-cache"))
    yield
    cuabi.cache.set_directory(None)


class _Compiles:
    def __init__(self, monkeypatch):
        self.n = 0
        real = _compile.Program._compile

        def counted(prog, options, logs):
            self.n += 1
            return real(prog, options, logs)
        monkeypatch.setattr(_compile.Program, "_compile", counted)


def _saxpy(gpu, kernel):
    rng = np.random.default_rng(7)
    x = rng.random(N, dtype=np.float32)
    y = rng.random(N, dtype=np.float32)
    with gpu.create_stream() as s:
        dx, dy = cuabi.Buffer.from_host(x, stream=s), cuabi.Buffer.from_host(y, stream=s)
        cuabi.launch(s, cuabi.LaunchConfig(grid=(N + 255) // 256, block=256), kernel,
                     np.float32(2.5), dx, dy, np.int32(N))
        out = np.zeros(N, np.float32)
        dy.copy_to(out, stream=s)
        s.synchronize()
    np.testing.assert_allclose(out, 2.5 * x + y, rtol=1e-6)


def test_file_cache_hit_in_a_fresh_process_runs(gpu, tmp_path):
    child = textwrap.dedent("""
        import sys, json
        sys.path.insert(0, sys.argv[1])
        import numpy as np
        import cuabi
        from cuabi import _compile
        from cuabi.utils import FileStreamProgramCache
        n = [0]
        real = _compile.Program._compile
        def counted(*a):
            n[0] += 1
            return real(*a)
        _compile.Program._compile = counted
        dev = cuabi.Device(0)
        dev.set_current()
        with FileStreamProgramCache(sys.argv[2]) as cache:
            obj = cuabi.Program(sys.argv[3], "c++", options=cuabi.ProgramOptions(
                arch=dev.arch)).compile("cubin", cache=cache)
        k = obj.get_kernel("saxpy")
        x = np.arange(1000, dtype=np.float32)
        with dev.create_stream() as s:
            dx = cuabi.Buffer.from_host(x, stream=s)
            dy = cuabi.Buffer.from_host(np.ones(1000, np.float32), stream=s)
            cuabi.launch(s, cuabi.LaunchConfig(grid=4, block=256), k, np.float32(2), dx, dy,
                         np.int32(1000))
            out = np.zeros(1000, np.float32)
            dy.copy_to(out, stream=s)
            s.synchronize()
        print(json.dumps({"compiles": n[0], "ok": bool((out == 2 * x + 1).all()),
                          "size": len(bytes(obj))}))
    """)
    import json
    pkg = os.path.dirname(os.path.dirname(cuabi.__file__))
    run = [sys.executable, "-c", child, pkg, str(tmp_path / "pc"), SAXPY]
    env = dict(os.environ, CUABI_CACHE="0")     # cuabi's C cache off: this cache only
    outs = [json.loads(subprocess.run(run, env=env, capture_output=True, text=True,
                                      check=True, timeout=300).stdout) for _ in range(2)]
    assert outs[0]["compiles"] == 1 and outs[1]["compiles"] == 0
    assert outs[0]["ok"] and outs[1]["ok"] and outs[0]["size"] == outs[1]["size"]


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_cached_cubin_and_ptx_run(gpu, tmp_path, monkeypatch, kind):
    cache = InMemoryProgramCache() if kind == "memory" else FileStreamProgramCache(tmp_path / "pc")
    compiles = _Compiles(monkeypatch)
    opts = cuabi.ProgramOptions(arch=gpu.arch)
    for target in ("cubin", "ptx"):
        for _ in range(2):
            obj = cuabi.Program(SAXPY, "c++", options=opts).compile(target, cache=cache)
            assert obj.code_type == target
            _saxpy(gpu, obj.get_kernel("saxpy"))
    assert compiles.n == 2 and len(cache) == 2


def test_arch_none_is_the_devices(gpu, monkeypatch):
    gpu.set_current()
    cache = InMemoryProgramCache()
    compiles = _Compiles(monkeypatch)
    a = cuabi.Program(SAXPY).compile("cubin", cache=cache)
    b = cuabi.Program(SAXPY).compile("cubin", cache=cache)
    assert compiles.n == 1 and b.arch == int(gpu.arch.rstrip("af"))
    _saxpy(gpu, b.get_kernel("saxpy"))
    key = make_program_cache_key(code=SAXPY, code_type="c++",
                                 options=cuabi.ProgramOptions(arch=gpu.arch),
                                 target_type="cubin")
    assert cache[key] == bytes(a)


def test_damaged_entry_is_compiled_again_and_runs(gpu, tmp_path, monkeypatch):
    import hashlib
    root = tmp_path / "pc"
    cache = FileStreamProgramCache(root)
    opts = cuabi.ProgramOptions(arch=gpu.arch)
    cuabi.Program(SAXPY, "c++", options=opts).compile("cubin", cache=cache)
    key = make_program_cache_key(code=SAXPY, code_type="c++", options=opts, target_type="cubin")
    h = hashlib.sha256(key).hexdigest()
    path = root / "entries" / h[:2] / h[2:]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])      # truncated: a miss, never loaded
    compiles = _Compiles(monkeypatch)
    obj = cuabi.Program(SAXPY, "c++", options=opts).compile("cubin", cache=cache)
    assert compiles.n == 1 and path.read_bytes() == data
    _saxpy(gpu, obj.get_kernel("saxpy"))


def test_ptx_program_through_the_cache(gpu, monkeypatch):
    ptx = bytes(cuabi.Program(SAXPY).compile("ptx", arch=gpu.arch)).decode()
    cache = InMemoryProgramCache()
    compiles = _Compiles(monkeypatch)
    opts = cuabi.ProgramOptions(arch=gpu.arch)
    for _ in range(2):
        obj = cuabi.Program(ptx, "ptx", options=opts).compile("cubin", cache=cache)
        _saxpy(gpu, obj.get_kernel("saxpy"))
    assert compiles.n == 1


def test_ltoir_from_the_cache_links_and_runs(gpu, monkeypatch):
    if cuabi.runtime_info()["nvjitlink_status"] != 0:
        pytest.skip("nvJitLink not available")
    cache = InMemoryProgramCache()
    opts = cuabi.ProgramOptions(arch=gpu.arch, link_time_optimization=True)
    compiles = _Compiles(monkeypatch)
    for _ in range(2):
        lto = cuabi.Program(SAXPY, "c++", options=opts).compile("ltoir", cache=cache)
        assert lto.code_type == "ltoir"
        cubin = cuabi.Linker(lto, options=cuabi.LinkerOptions(
            arch=gpu.arch, link_time_optimization=True)).link("cubin")
        _saxpy(gpu, cubin.get_kernel("saxpy"))
    assert compiles.n == 1


def test_manual_key_with_name_expressions(gpu, tmp_path):
    """cuda.core's escape hatch: key by hand, store the ObjectCode, rebuild
    it from the bytes on a hit and find the kernel by its lowered name (the
    name-expression mapping is not stored)."""
    cache = FileStreamProgramCache(tmp_path / "pc")
    opts = cuabi.ProgramOptions(arch=gpu.arch)
    key = make_program_cache_key(code=TEMPLATE, code_type="c++", options=opts,
                                 target_type="cubin", name_expressions=["scale<float>"])
    assert cache.get(key) is None
    prog = cuabi.Program(TEMPLATE, "c++", options=opts)
    obj = prog.compile("cubin", name_expressions=["scale<float>"])
    lowered = obj.lowered_name("scale<float>")
    cache[key] = obj
    again = cuabi.ObjectCode.from_cubin(cache[key], symbol_mapping={"scale<float>": lowered})
    k = again.get_kernel("scale<float>")
    x = np.arange(512, dtype=np.float32)
    with gpu.create_stream() as s:
        dx = cuabi.Buffer.from_host(x, stream=s)
        cuabi.launch(s, cuabi.LaunchConfig(grid=2, block=256), k, dx, np.float32(3), np.int32(512))
        out = np.zeros(512, np.float32)
        dx.copy_to(out, stream=s)
        s.synchronize()
    np.testing.assert_array_equal(out, 3 * x)
