"""The cuda.core 1.2 names of issue 24's last rows on a real GPU (skipped
without one): Device.create_opaque_array / create_texture_object /
create_surface_object / create_mipmapped_array sampled and written by
kernels; host objects and a host library (nvcc -rdc) linked by nvJitLink
through ObjectCode.from_object / from_library and launched;
ObjectCode.get_module against the driver's own cuModuleGetFunction (where
cuda.bindings is installed); Kernel.from_handle launched; GraphDebugPrintOptions
reaching the driver's DOT writer; StridedMemoryView.view / copy_from /
copy_to across host and device with strided ends, checked against numpy;
and, where cuda.core is installed, the same calls there."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import cuabi
from cuabi.texture import (MipmappedArrayOptions, OpaqueArrayOptions, ResourceDescriptor,
                           TextureObjectOptions)
from cuabi.utils import StridedMemoryView

SRC = r'''
extern "C" __global__ void sample2d(cudaTextureObject_t t, const float2 *pts, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float>(t, pts[i].x, pts[i].y);
}
extern "C" __global__ void surf_scale(cudaSurfaceObject_t in, cudaSurfaceObject_t out, int w,
                                      int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= w || y >= h) return;
    float v;
    surf2Dread(&v, in, x * 4, y);
    surf2Dwrite(v * 2.0f + 1.0f, out, x * 4, y);
}
extern "C" __global__ void lod(cudaTextureObject_t t, const float *lods, float *out, int n) {
    if (threadIdx.x < n) out[threadIdx.x] = tex2DLod<float>(t, 0.5f, 0.5f, lods[threadIdx.x]);
}
extern "C" __global__ void inc(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}
'''


@pytest.fixture(scope="module")
def code(gpu):
    return cuabi.Program(SRC, "c++", {"arch": f"sm_{gpu.arch}"}).compile("cubin")


@pytest.fixture
def stream(gpu):
    gpu.set_current()
    with gpu.create_stream() as s:
        yield s


def _device_array(gpu, a, stream):
    b = cuabi.Buffer(a.nbytes, gpu.memory_resource, stream=stream)
    b.copy_from(np.ascontiguousarray(a), stream=stream)
    return b


def _host(b, dtype, stream):
    stream.sync()
    return np.frombuffer(b.to_bytes(), dtype)


def test_texture_factories_sample_and_write(gpu, code, stream):
    w, h = 16, 8
    img = np.arange(w * h, dtype=np.float32).reshape(h, w)
    arr = gpu.create_opaque_array(OpaqueArrayOptions(shape=(w, h), format="float32",
                                                     num_channels=1,
                                                     is_surface_load_store=True))
    arr.copy_from(img)
    res = ResourceDescriptor.from_opaque_array(arr)
    tex = gpu.create_texture_object(resource=res, options=TextureObjectOptions(
        address_mode="clamp", filter_mode="point"))
    assert tex.options.filter_mode == "point"
    ys, xs = np.mgrid[0:h, 0:w]
    pts = np.stack([xs.ravel() + 0.5, ys.ravel() + 0.5], axis=1).astype(np.float32)
    # clamped: coordinates past the edge read the edge texels
    pts = np.concatenate([pts, np.array([[-3, 0.5], [w + 7, h + 7]], np.float32)])
    dpts = _device_array(gpu, pts, stream)
    out = cuabi.Buffer(4 * len(pts), gpu.memory_resource, stream=stream)
    cuabi.launch(stream, cuabi.LaunchConfig(grid=1, block=len(pts)), code.get_kernel("sample2d"),
                 tex, dpts, out, np.int32(len(pts)))
    got = _host(out, np.float32, stream)
    assert got[:w * h].tolist() == img.ravel().tolist()
    assert got[w * h:].tolist() == [img[0, 0], img[h - 1, w - 1]]
    # linear filtering between two texels (normalized_coords off, 0.5 between centres)
    lin = gpu.create_texture_object(resource=res, options=TextureObjectOptions(
        filter_mode="linear"))
    dpt = _device_array(gpu, np.array([[1.0, 0.5]], np.float32), stream)
    one = cuabi.Buffer(4, gpu.memory_resource, stream=stream)
    cuabi.launch(stream, cuabi.LaunchConfig(grid=1, block=1), code.get_kernel("sample2d"),
                 lin, dpt, one, np.int32(1))
    assert abs(_host(one, np.float32, stream)[0] - 0.5) < 1e-2
    # a surface written by a kernel, read back through the array
    dst = gpu.create_opaque_array({"shape": (w, h), "format": np.float32, "num_channels": 1,
                                   "is_surface_load_store": True})
    sin = gpu.create_surface_object(resource=res)
    sout = gpu.create_surface_object(resource=ResourceDescriptor.from_opaque_array(dst))
    cuabi.launch(stream, cuabi.LaunchConfig(grid=(1, h), block=w), code.get_kernel("surf_scale"),
                 sin, sout, np.int32(w), np.int32(h))
    stream.sync()
    back = np.asarray(dst.copy_to()).view(np.float32).reshape(h, w)
    assert back.tolist() == (img * 2 + 1).tolist()
    for o in (sin, sout, tex, lin, dst, arr, dpts, out, dpt, one):
        o.close()


def test_mipmapped_array_from_the_device(gpu, code, stream):
    m = gpu.create_mipmapped_array(MipmappedArrayOptions(shape=(8, 8), format="float32",
                                                         num_channels=1, num_levels=4))
    for lvl in range(4):
        n = 8 >> lvl
        m.get_level(lvl).copy_from(np.full((n, n), float(lvl + 1), np.float32))
    tex = gpu.create_texture_object(resource=ResourceDescriptor.from_mipmapped_array(m),
                                    options=TextureObjectOptions(normalized_coords=True,
                                                                 mipmap_filter_mode="point",
                                                                 max_mipmap_level_clamp=3.0))
    lods = _device_array(gpu, np.array([0, 1, 2, 3], np.float32), stream)
    out = cuabi.Buffer(16, gpu.memory_resource, stream=stream)
    cuabi.launch(stream, cuabi.LaunchConfig(grid=1, block=4), code.get_kernel("lod"), tex, lods,
                 out, np.int32(4))
    assert _host(out, np.float32, stream).tolist() == [1.0, 2.0, 3.0, 4.0]
    for o in (tex, m, lods, out):
        o.close()


def test_objects_and_libraries_link_and_run(gpu, stream, tmp_path):
    if cuabi.runtime_info()["nvjitlink_status"] != 0:
        pytest.skip("nvJitLink not available")
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                    if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None or shutil.which("ar") is None:
        pytest.skip("nvcc / ar not found")
    arch = f"sm_{gpu.arch}"
    (tmp_path / "a.cu").write_text('extern __device__ int twice(int);\n'
                                   'extern "C" __global__ void k(int *p) { *p = twice(*p); }\n')
    (tmp_path / "b.cu").write_text('__device__ int twice(int x) { return 2 * x + 1; }\n')
    # the tools run without a sanitizer build's preloaded runtime (nvcc crashes under it)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    for n in ("a", "b"):
        subprocess.run([nvcc, "-c", "-rdc=true", f"-arch={arch}", str(tmp_path / f"{n}.cu"),
                        "-o", str(tmp_path / f"{n}.o")], check=True, timeout=300, env=env)
    subprocess.run(["ar", "rcs", str(tmp_path / "libb.a"), str(tmp_path / "b.o")], check=True,
                   env=env)
    a = cuabi.ObjectCode.from_object(str(tmp_path / "a.o"))
    b = cuabi.ObjectCode.from_library(str(tmp_path / "libb.a"), name="libb")
    linked = cuabi.Linker(a, b, options=cuabi.LinkerOptions(arch=arch)).link("cubin")
    p = _device_array(gpu, np.array([20], np.int32), stream)
    cuabi.launch(stream, cuabi.LaunchConfig(grid=1, block=1), linked.get_kernel("k"), p)
    assert _host(p, np.int32, stream).tolist() == [41]
    with pytest.raises(NotImplementedError):
        a.get_module()
    p.close()


def test_get_module_and_from_handle(gpu, code, stream):
    m = code.get_module()
    assert m and code.get_module() == m
    k = code.get_kernel("inc")
    again = cuabi.Kernel.from_handle(k.raw, code)
    assert again.raw == k.raw and again.name == "inc"
    p = _device_array(gpu, np.arange(64, dtype=np.int32), stream)
    cuabi.launch(stream, cuabi.LaunchConfig(grid=1, block=64), again, p, np.int32(64))
    assert _host(p, np.int32, stream).tolist() == list(range(1, 65))
    p.close()
    try:
        from cuda.bindings import driver
    except ImportError:
        pytest.skip("cuda.bindings is not installed: the CUmodule is not checked by the driver")
    err, f = driver.cuModuleGetFunction(driver.CUmodule(m), b"inc")
    assert err == driver.CUresult.CUDA_SUCCESS
    assert int(f) == k.function(gpu)                   # the same CUfunction


def test_graph_debug_print_options_reach_the_driver(gpu, code, stream, tmp_path):
    from cuabi.graph import GraphDebugPrintOptions
    p = _device_array(gpu, np.zeros(32, np.int32), stream)
    gb = stream.create_graph_builder()
    gb.begin_building()
    cuabi.launch(gb, cuabi.LaunchConfig(grid=1, block=32), code.get_kernel("inc"), p,
                 np.int32(32))
    gb.end_building()
    plain, verbose = tmp_path / "plain.dot", tmp_path / "verbose.dot"
    gb.debug_dot_print(str(plain))
    gb.debug_dot_print(str(verbose), GraphDebugPrintOptions(verbose=True))
    params = tmp_path / "params.dot"
    gb.debug_dot_print(str(params), GraphDebugPrintOptions(kernel_node_params=True,
                                                           handles=True))
    for f in (plain, verbose, params):
        assert f.read_text().lstrip().startswith("digraph"), f
    assert len(verbose.read_text()) > len(plain.read_text())
    assert len(params.read_text()) > len(plain.read_text())
    gb.close()
    p.close()


def test_strided_memory_view_copies_on_the_gpu(gpu, stream):
    class Layout:
        def __init__(self, shape, strides):
            self.shape, self.strides = shape, strides

    a = np.random.default_rng(7).standard_normal((64, 48)).astype(np.float32)
    buf = cuabi.Buffer(a.nbytes, gpu.memory_resource, stream=stream)
    dv = StridedMemoryView.from_buffer(buf, a.shape, dtype=np.float32)
    dv.copy_from(StridedMemoryView(a, -1), stream)
    out = np.zeros_like(a)
    dv.copy_to(StridedMemoryView(out, -1), stream)
    assert (out == a).all()
    # the transpose on the device, to host and device, through view()
    dt = dv.view(Layout((48, 64), (1, 48)))
    out_t = np.zeros((48, 64), np.float32)
    dt.copy_to(StridedMemoryView(out_t, -1), stream)
    assert (out_t == a.T).all()
    buf2 = cuabi.Buffer(a.nbytes, gpu.memory_resource, stream=stream)
    d2 = StridedMemoryView.from_buffer(buf2, (48, 64), dtype=np.float32)
    d2.copy_from(dt, stream, blocking=True)
    assert (np.frombuffer(buf2.to_bytes(), np.float32).reshape(48, 64) == a.T).all()
    # a strided host source into a column block of the device view (cuMemcpy3D)
    block = dv.view(Layout((64, 16), (48, 1)))
    src = np.asfortranarray(a[:, :16] * 3)
    block.copy_from(StridedMemoryView(src, -1), stream)
    dv.copy_to(StridedMemoryView(out, -1), stream)
    want = a.copy()
    want[:, :16] = a[:, :16] * 3
    assert (out == want).all()
    # reinterpreted bits
    bits = dv.view(dtype=np.uint32)
    ob = np.zeros(a.shape, np.uint32)
    bits.copy_to(StridedMemoryView(ob, -1), stream)
    assert (ob == want.view(np.uint32)).all()
    buf.close()
    buf2.close()


def test_beside_cuda_core(gpu, tmp_path):
    cc = pytest.importorskip("cuda.core")
    typing = pytest.importorskip("cuda.core.typing")
    from cuabi import typing as ours
    for name in typing.__all__:
        theirs = getattr(typing, name)
        if isinstance(theirs, type) and hasattr(theirs, "__members__"):
            assert {m.name: m.value for m in theirs} == \
                {m.name: m.value for m in getattr(ours, name)}, name
    tex = getattr(cc, "texture", None)
    if tex is None or not hasattr(tex, "OpaqueArrayOptions"):
        pytest.skip("this cuda.core has no texture options")
    dev = cc.Device(gpu.ordinal)
    dev.set_current()
    theirs = dev.create_opaque_array(tex.OpaqueArrayOptions(shape=(8, 4), format="float32",
                                                            num_channels=2))
    ours_arr = gpu.create_opaque_array(OpaqueArrayOptions(shape=(8, 4), format="float32",
                                                          num_channels=2))
    assert tuple(theirs.shape) == ours_arr.shape and theirs.num_channels == ours_arr.num_channels
    theirs.close()
    ours_arr.close()
