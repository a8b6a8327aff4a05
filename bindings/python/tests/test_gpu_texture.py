"""Arrays, textures, surfaces and stream memory operations from Python on a
GPU (skipped without one): linear filtering against a host bilinear
interpolation, a blur through a texture against numpy, a surface read and
written, a layered texture, a mipmapped lookup, textures over torch tensors
(from_image, and in place), the seed's 14-argument kernel fed cuabi's own
objects, producer and consumer streams synchronised by write/wait value,
and a captured graph replayed. The examples texture_blur.py and
texture_kernel_args.py run here too."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import cuabi
from cuabi.texture import (AddressMode, FilterMode, MipmappedArray, OpaqueArray, ReadMode,
                           ResourceDescriptor, SurfaceObject, TextureDescriptor, TextureObject)

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
extern "C" __global__ void layered(cudaTextureObject_t t, float *out, int w, int h) {
    int x = threadIdx.x, y = blockIdx.x, l = blockIdx.y;
    if (x < w && y < h) out[(l * h + y) * w + x] = tex2DLayered<float>(t, x + 0.5f, y + 0.5f, l);
}
extern "C" __global__ void lod(cudaTextureObject_t t, const float *lods, float *out, int n) {
    if (threadIdx.x < n) out[threadIdx.x] = tex2DLod<float>(t, 0.5f, 0.5f, lods[threadIdx.x]);
}
extern "C" __global__ void produce(float *data, int n, long long spin) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) { }
    for (int i = threadIdx.x; i < n; i += blockDim.x) data[i] = 3.0f * i + 1.0f;
}
extern "C" __global__ void consume(const float *data, float *out, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = data[i];
}
'''
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "..", "examples", "python")


@pytest.fixture(scope="module")
def code(gpu):
    return cuabi.Program(SRC).compile(arch=gpu.arch)


@pytest.fixture
def stream(gpu):
    with gpu.create_stream(non_blocking=False) as s:
        yield s


def tex_value(x, y):
    return ((x * 7 + y * 13) % 23) / 23.0 + y * 0.01


def image(w=16, h=8):
    y, x = np.mgrid[0:h, 0:w]
    return tex_value(x, y).astype(np.float32)


def bilinear(img, u, v):
    h, w = img.shape
    xb, yb = u - 0.5, v - 0.5
    i, j = int(np.floor(xb)), int(np.floor(yb))
    a, b = xb - i, yb - j

    def at(x, y):
        return float(img[min(max(y, 0), h - 1), min(max(x, 0), w - 1)])
    return ((1 - a) * (1 - b) * at(i, j) + a * (1 - b) * at(i + 1, j) +
            (1 - a) * b * at(i, j + 1) + a * b * at(i + 1, j + 1))


def sample(code, stream, tex, pts):
    pts = np.ascontiguousarray(pts, np.float32)
    dp = cuabi.Buffer.from_host(pts, stream=stream)
    out = cuabi.Buffer(4 * len(pts), stream=stream)
    cuabi.launch(stream, cuabi.LaunchConfig(grid=(len(pts) + 127) // 128, block=128),
                 code.get_kernel("sample2d"), tex, dp, out, np.int32(len(pts)))
    got = np.frombuffer(out.to_bytes(stream=stream), np.float32)
    stream.synchronize()
    return got


def test_linear_filtering_matches_the_host(code, stream):
    img = image()
    tex = TextureObject.from_image(img, TextureDescriptor(filter_mode=FilterMode.LINEAR))
    ys, xs = np.mgrid[0:4 * 8, 0:4 * 16] / 4.0
    pts = np.stack([xs.ravel(), ys.ravel()], axis=1)
    pts = np.concatenate([pts, [[-3, -3], [21, 2.25], [4.75, -1]]])
    got = sample(code, stream, tex, pts)
    want = np.array([bilinear(img, u, v) for u, v in pts], np.float32)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_border_and_wrap(code, stream):
    img = image()
    arr = OpaqueArray.from_dlpack(img)
    border = TextureObject.from_descriptor(
        resource=ResourceDescriptor.from_opaque_array(arr),
        texture_descriptor=TextureDescriptor(address_mode=AddressMode.BORDER,
                                             border_color=(0.625, 0, 0, 0)))
    got = sample(code, stream, border, [[-2.5, 1.5], [3.5, 2.5]])
    assert got[0] == np.float32(0.625) and got[1] == img[2, 3]
    wrap = TextureObject.from_descriptor(
        resource=ResourceDescriptor.from_opaque_array(arr),
        texture_descriptor=TextureDescriptor(address_mode=AddressMode.WRAP,
                                             normalized_coords=True))
    u, v = 3.5 / 16, 2.5 / 8
    got = sample(code, stream, wrap, [[u, v], [u + 1, v], [u, v - 2]])
    assert (got == img[2, 3]).all()


def test_surface_read_and_write(code, stream):
    img = np.arange(9 * 40, dtype=np.float32).reshape(9, 40) - 7
    src = OpaqueArray.from_dlpack(img, is_surface_load_store=True)
    dst = OpaqueArray.from_descriptor(shape=(40, 9), format="float32", is_surface_load_store=True)
    cuabi.launch(stream, cuabi.LaunchConfig(grid=(1, 9), block=64), code.get_kernel("surf_scale"),
                 SurfaceObject.from_array(src), SurfaceObject.from_array(dst), np.int32(40),
                 np.int32(9))
    stream.synchronize()
    out = np.zeros_like(img)
    dst.copy_to(out)
    np.testing.assert_array_equal(out, img * 2 + 1)


def test_layered_texture(code, stream):
    # float32 throughout (an int64 term would promote the sum to float64,
    # which no array format holds)
    stack = (np.arange(5 * 6 * 12, dtype=np.float32)
             + np.float32(1000) * np.repeat(np.arange(5, dtype=np.float32), 72)).reshape(5, 6, 12)
    tex = TextureObject.from_image(stack, layered=True)
    out = cuabi.Buffer(stack.nbytes, stream=stream)
    cuabi.launch(stream, cuabi.LaunchConfig(grid=(6, 5), block=32), code.get_kernel("layered"),
                 tex, out, np.int32(12), np.int32(6))
    got = np.frombuffer(out.to_bytes(stream=stream), np.float32).reshape(stack.shape)
    stream.synchronize()
    np.testing.assert_array_equal(got, stack)


def test_mipmapped_lookup(code, stream):
    m = MipmappedArray.from_descriptor(shape=(64, 32), format="float32", num_levels=6)
    for level in range(6):
        lv = m.get_level(level)
        w, h = lv.shape
        lv.copy_from(np.full((h, w), level + 1, np.float32))
    tex = TextureObject.from_descriptor(
        resource=ResourceDescriptor.from_mipmapped_array(m),
        texture_descriptor=TextureDescriptor(normalized_coords=True, max_mipmap_level_clamp=5,
                                             mipmap_filter_mode=FilterMode.LINEAR))
    lods = np.array([0, 1, 2, 3, 4, 5, 0.5, 2.25], np.float32)
    dl = cuabi.Buffer.from_host(lods, stream=stream)
    out = cuabi.Buffer(lods.nbytes, stream=stream)
    cuabi.launch(stream, cuabi.LaunchConfig(grid=1, block=32), code.get_kernel("lod"), tex, dl,
                 out, np.int32(len(lods)))
    got = np.frombuffer(out.to_bytes(stream=stream), np.float32)
    stream.synchronize()
    np.testing.assert_allclose(got, [1, 2, 3, 4, 5, 6, 1.5, 3.25], atol=1e-6)


def test_torch_images_become_textures(code, stream):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    img = torch.from_numpy(image()).cuda()
    torch.cuda.synchronize()
    tex = TextureObject.from_image(img, TextureDescriptor(filter_mode=FilterMode.LINEAR))
    got = sample(code, stream, tex, [[3.5, 2.5], [4.0, 2.5]])
    np.testing.assert_allclose(got, [bilinear(image(), 3.5, 2.5), bilinear(image(), 4.0, 2.5)],
                               atol=1e-5)
    # In place: rows padded to a multiple of 64 floats (the pitch alignment).
    padded = torch.zeros((8, 64), dtype=torch.float32, device="cuda")
    padded[:, :16] = img
    torch.cuda.synchronize()
    view = padded[:, :16]
    in_place = TextureObject.from_descriptor(resource=ResourceDescriptor.from_view(view))
    assert in_place.resource.kind == "pitch2d" and in_place.resource.pitch_bytes == 256
    got = sample(code, stream, in_place, [[3.5, 2.5], [15.5, 7.5]])
    assert got[0] == image()[2, 3] and got[1] == image()[7, 15]


def _word(where, size):
    """A zeroed word in cuMemAlloc memory, pinned memory or the device's pool."""
    mr = {"cumemalloc": cuabi.MemoryResource.ipc, "pinned": cuabi.MemoryResource.pinned,
          "pool": lambda: None}[where]()
    w = cuabi.Buffer(size, mr)
    w.fill(0)
    return w


def test_a_word_in_pool_memory_works_or_the_error_names_the_pool(stream):
    """An H100 run (2026-11-27) saw CUDA_ERROR_INVALID_VALUE for words in
    pool memory: either the driver takes them, or cuabi's error says where
    the word lies."""
    word = _word("pool", 8)
    try:
        stream.write_value32(word, 5)
    except cuabi.CudaError as e:
        assert "lies in a stream-ordered memory pool" in str(e), str(e)
        return
    stream.synchronize()
    assert np.frombuffer(word.to_bytes(), np.uint32)[0] == 5


def test_a_word_in_managed_memory_is_refused(stream):
    managed = cuabi.ManagedMemoryResource()
    word = cuabi.Buffer(8, managed)
    with pytest.raises(ValueError, match="managed memory"):
        stream.write_value32(word, 5)


def _done_or_fail(gpu, stream, release, what, seconds=30.0):
    """Wait for `stream` at most `seconds`; if it is still blocked, release
    its wait from a stream of its own (the memory operations `release`) and fail (a hang is a failure, not a
    stuck test run)."""
    ev = stream.record()
    end = time.monotonic() + seconds
    while not ev.is_done and time.monotonic() < end:
        time.sleep(0.005)
    if not ev.is_done:
        with gpu.create_stream(non_blocking=True) as rescue:
            rescue.batch_mem_op(release)
            rescue.synchronize()
        stream.synchronize()
        pytest.fail(f"{what}: the consumer was still waiting after {seconds} s")
    stream.synchronize()


@pytest.mark.parametrize("where", ["cumemalloc", "pinned"])
def test_producer_and_consumer_streams_synchronised_by_memory_operations(gpu, code, where):
    n, spin = 4096, gpu.attribute(13) * 50       # CLOCK_RATE (kHz): ~50 ms of work first
    flag = _word(where, 16)
    # Non-blocking streams: work on the legacy default stream (a free of an
    # earlier test's garbage) would otherwise wait for the blocked consumer and
    # hold the producer back (the H100 run of 2026-11-28 hung here).
    with gpu.create_stream(non_blocking=True) as producer, \
            gpu.create_stream(non_blocking=True) as consumer:
        data, out = cuabi.Buffer(4 * n), cuabi.Buffer(4 * n)
        # Both kernels run once first: with lazy loading (CUDA's default) a
        # kernel's first launch loads it, which may wait for the context's
        # other streams -- the consumer, blocked on the flag (an H100 run of
        # 2026-11-28 hung here).
        cuabi.launch(producer, cuabi.LaunchConfig(grid=1, block=256), code.get_kernel("produce"),
                     data, np.int32(n), np.int64(0))
        cuabi.launch(consumer, cuabi.LaunchConfig(grid=1, block=256), code.get_kernel("consume"),
                     data, out, np.int32(n))
        data.fill(0, stream=producer)      # the real run must see the producer's data
        out.fill(0, stream=producer)
        producer.synchronize()
        consumer.synchronize()
        consumer.wait_value32(flag, 1, condition="eq")
        cuabi.launch(consumer, cuabi.LaunchConfig(grid=1, block=256), code.get_kernel("consume"),
                     data, out, np.int32(n))
        cuabi.launch(producer, cuabi.LaunchConfig(grid=1, block=256), code.get_kernel("produce"),
                     data, np.int32(n), np.int64(spin))
        producer.write_value32(flag, 1)
        _done_or_fail(gpu, consumer, [("write32", flag, 1)], "wait_value32 / write_value32")
        producer.synchronize()
        got = np.frombuffer(out.to_bytes(), np.float32)
        np.testing.assert_array_equal(got, 3 * np.arange(n, dtype=np.float32) + 1)
        # The 64-bit pair, batched, and a torch tensor as the word.
        out.fill(0)
        consumer.batch_mem_op([("wait64", flag, 2**32 + 7, 8, "geq")])
        cuabi.launch(consumer, cuabi.LaunchConfig(grid=1, block=256), code.get_kernel("consume"),
                     data, out, np.int32(n))
        producer.batch_mem_op([("barrier", "gpu"), ("write64", flag, 2**32 + 7, 8)])
        _done_or_fail(gpu, consumer, [("write64", flag, 2**32 + 7, 8)],
                      "batched wait64 / write64")
        np.testing.assert_array_equal(np.frombuffer(out.to_bytes(), np.float32), got)


def test_a_captured_graph_copies_samples_and_signals(code, stream):
    img = image()
    staging = cuabi.Buffer.from_host(img)
    arr = OpaqueArray.from_descriptor(shape=(16, 8), format="float32")
    tex = TextureObject.from_descriptor(resource=ResourceDescriptor.from_opaque_array(arr))
    pts = cuabi.Buffer.from_host(np.array([[3.5, 2.5], [15.5, 7.5]], np.float32))
    out, flag = cuabi.Buffer(8), _word("cumemalloc", 8)
    with stream.capture() as g:
        arr.copy_from(staging, stream=stream)
        cuabi.launch(stream, cuabi.LaunchConfig(grid=1, block=32), code.get_kernel("sample2d"),
                     tex, pts, out, np.int32(2))
        stream.write_value32(flag, 1234)
    del arr, tex, staging
    exe = g.instantiate()
    for _ in range(2):
        flag.fill(0, stream=stream)
        exe.launch(stream)
        stream.synchronize()
        assert list(np.frombuffer(out.to_bytes(), np.float32)) == [img[2, 3], img[7, 15]]
        assert np.frombuffer(flag.to_bytes(), np.uint32)[0] == 1234


SEED = r'''
struct Pair { int a; float b; };
extern "C" __global__ void seed14(signed char c, short s, int i, long long ll, unsigned u,
                                  float f, double d, Pair p, float4 v, bool flag,
                                  unsigned long long sz, cudaTextureObject_t tex,
                                  cudaSurfaceObject_t surf, double *out) {
    out[0] = c; out[1] = s; out[2] = i; out[3] = (double)ll; out[4] = u; out[5] = f;
    out[6] = d; out[7] = p.a; out[8] = p.b; out[9] = v.x + 10 * v.y + 100 * v.z + 1000 * v.w;
    out[10] = flag ? 1 : 0; out[11] = (double)sz;
    out[12] = tex2D<float>(tex, 2.5f, 1.5f);
    float r; surf2Dread(&r, surf, 3 * (int)sizeof(float), 2);
    out[13] = r;
    surf2Dwrite(-7.5f, surf, 0, 0);
}
'''


def test_the_seed_14_argument_kernel_takes_cuabi_objects(gpu, stream):
    k = cuabi.Program(SEED).compile(arch=gpu.arch).get_kernel("seed14")
    img = (np.arange(32, dtype=np.float32) * 1.25).reshape(4, 8)
    arr = OpaqueArray.from_dlpack(img, is_surface_load_store=True)
    tex = TextureObject.from_descriptor(resource=ResourceDescriptor.from_opaque_array(arr))
    surf = SurfaceObject.from_array(arr)
    pair = np.array((17, 0.5), dtype=np.dtype([("a", np.int32), ("b", np.float32)]))[()]
    want = [-5, -300, 70000, 1e12, 4e9, 1.5, -2.25, 17, 0.5, 4321, 1, 123456789012,
            img[1, 2], img[2, 3]]
    out = cuabi.Buffer(14 * 8, stream=stream)
    args = (np.int8(-5), np.int16(-300), np.int32(70000), np.int64(10**12), np.uint32(4 * 10**9),
            np.float32(1.5), np.float64(-2.25), pair, np.array([1, 2, 3, 4], np.float32).tobytes(),
            True, np.uint64(123456789012), tex, surf, out)
    cuabi.launch(stream, cuabi.LaunchConfig(grid=1, block=1), k, *args)
    assert list(np.frombuffer(out.to_bytes(stream=stream), np.float64)) == want
    # Through a typed pack and a prepared launch, with the raw values too.
    p = cuabi.ArgPack("i8, i16, i32, i64, u32, f32, f64, struct{i32, f32}, float4, bool, u64, "
                      "handle, handle, buffer")
    p.set(*args[:8], (1, 2, 3, 4), True, 123456789012, tex.handle, surf, out)
    cuabi.PreparedLaunch(k, cuabi.LaunchConfig(grid=1, block=1), stream, pack=p)()
    assert list(np.frombuffer(out.to_bytes(stream=stream), np.float64)) == want
    corner = np.zeros(1, np.float32)
    arr.copy_to(corner, extent=(1, 1))
    assert corner[0] == -7.5
    tex.close()
    with pytest.raises(cuabi.ClosedHandleError):
        cuabi.launch(stream, cuabi.LaunchConfig(grid=1, block=1), k, *args)


@pytest.mark.parametrize("script", ["texture_blur.py", "texture_kernel_args.py"])
def test_the_examples_run(gpu, script):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "CUABI_BACKEND", "CUABI_PYTHON_PATH")}
    env["CUABI_LIBRARY"] = cuabi.LIBRARY_PATH
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "nothing to do" not in r.stdout
