"""The Python texture layer against the C tests' fake driver (no GPU): run
by test_texture.py in a process whose CUABI_DRIVER_PATH names
tests/fixtures/.libs/fake_cuda_graph.so (tests/fixtures/fake_texture.h:
arrays are host memory, copies move bytes, texture and surface objects are
tokens, memory operations write and check words at once). Fake "device"
memory is host memory."""
import gc
import struct

import numpy as np
import pytest

import cuabi
from cuabi.texture import (AddressMode, ArrayFormat, FilterMode, MipmappedArray, OpaqueArray,
                           ReadMode, ResourceDescriptor, SurfaceObject, TextureDescriptor,
                           TextureObject)

SRC = ('extern "C" __global__ void takes(unsigned long long t, unsigned long long s, '
       'unsigned long long n) {}\n')


@pytest.fixture(scope="module")
def kernel():
    assert cuabi.device_count() > 0, "the fake driver is not loaded"
    return cuabi.Program(SRC).compile(arch="sm_90").get_kernel("takes")


@pytest.fixture
def stream():
    return cuabi.Stream()


def f32_array(w=8, h=4, **kw):
    return OpaqueArray.from_descriptor(shape=(w, h), format=ArrayFormat.FLOAT32, **kw)


# ------------------------------------------------------------ arrays

def test_an_array_says_what_it_is():
    a = f32_array(8, 4, num_channels=2, is_surface_load_store=True)
    assert a.shape == (8, 4)
    assert a.array_format == ArrayFormat.FLOAT32 and a.format is cuabi.typing.ArrayFormatType.FLOAT32 and a.num_channels == 2
    assert a.element_bytes == a.element_size == 8
    assert a.size_bytes == 8 * 4 * 8
    assert a.is_surface_load_store and not a.is_layered and not a.is_cubemap
    assert a.level is None and a.device.ordinal == 0
    assert isinstance(a.handle, int) and a.handle != 0
    assert a.info.dims == 2
    a.close()
    with pytest.raises(cuabi.ClosedHandleError):
        a.handle


def test_kinds_and_formats_by_name():
    one = OpaqueArray.from_descriptor(shape=(100,), format="uint8")
    assert one.shape == (100,) and one.info.dims == 1
    vol = OpaqueArray.from_descriptor(shape=(8, 8, 8), format=np.dtype(np.int16))
    assert vol.shape == (8, 8, 8) and vol.array_format == ArrayFormat.INT16
    layers = OpaqueArray.from_descriptor(shape=(16, 16, 3), format="FLOAT16", layered=True)
    assert layers.is_layered and layers.info.layers == 3
    rows = OpaqueArray.from_descriptor(shape=(64, 5), format="float32", layered=True)
    assert rows.info.height == 0 and rows.info.depth == 5 and rows.info.dims == 1
    cube = OpaqueArray.from_descriptor(shape=(16, 16), format="float32", cubemap=True)
    assert cube.is_cubemap and cube.info.depth == 6
    bc = OpaqueArray.from_descriptor(shape=(16, 8), format=ArrayFormat.BC1_UNORM, num_channels=4)
    assert bc.info.block == 4 and bc.size_bytes == 4 * 2 * 8
    with pytest.raises(ValueError, match="not an ArrayFormat"):
        OpaqueArray.from_descriptor(shape=(4,), format="float64")
    with pytest.raises(ValueError, match="1, 2 or 4 channels"):
        OpaqueArray.from_descriptor(shape=(4, 4), format="uint8", num_channels=3)
    with pytest.raises(ValueError, match="shape"):
        OpaqueArray.from_descriptor(shape=(4, 4, 4, 4), format="uint8")


def test_copies_round_trip_host_buffer_views_and_arrays(stream):
    a = f32_array(8, 4)
    img = np.arange(32, dtype=np.float32).reshape(4, 8)
    a.copy_from(img)
    out = np.zeros_like(img)
    assert a.copy_to(out) is out and (out == img).all()
    # A box, into packed bytes.
    box = np.frombuffer(a.copy_to(offset=(2, 1), extent=(3, 2)), np.float32).reshape(2, 3)
    assert (box == img[1:3, 2:5]).all()
    # A strided numpy view: every other column of a wider image.
    wide = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)
    a.copy_from(wide[:, ::2].copy())
    a.copy_from(wide[:, 3:11])
    a.copy_to(out)
    assert (out == wide[:, 3:11]).all()
    # A Buffer (pitched), on a stream; bytes; another array.
    buf = cuabi.Buffer(4 * 64, stream=stream)
    a.copy_to(buf, stream=stream, pitch=64)
    b = f32_array(8, 4)
    b.copy_from(buf, stream=stream, pitch=64)
    stream.synchronize()
    assert (np.frombuffer(b.copy_to(), np.float32).reshape(4, 8) == wide[:, 3:11]).all()
    raw = bytearray(img.tobytes())
    b.copy_from(raw)
    c = f32_array(8, 4)
    c.copy_from(b)
    assert bytes(c.copy_to()) == bytes(raw)
    c.copy_from(a, offset=(4, 0), extent=(4, 4))       # a's left half at x 4
    got = np.frombuffer(c.copy_to(), np.float32).reshape(4, 8)
    assert (got[:, 4:] == wide[:, 3:7]).all() and (got[:, :4] == img[:, :4]).all()
    with pytest.raises(cuabi.CuabiError, match="does not match the region"):
        a.copy_from(np.zeros((4, 7), np.float32))
    with pytest.raises(cuabi.CuabiError, match="only 127 are given"):
        a.copy_from(bytes(127))
    with pytest.raises(cuabi.CuabiError, match="past the array"):
        a.copy_to(offset=(8, 0))
    with pytest.raises(ValueError, match="writable"):
        a.copy_to(bytes(128))


def test_an_rgba_image_becomes_an_array_in_one_call():
    rgba = (np.arange(3 * 5 * 4) * 7 % 256).astype(np.uint8).reshape(3, 5, 4)
    a = OpaqueArray.from_dlpack(rgba)
    assert a.shape == (5, 3) and a.num_channels == 4 and a.array_format == ArrayFormat.UINT8
    back = np.zeros_like(rgba)
    a.copy_to(back)
    assert (back == rgba).all()
    vol = OpaqueArray.from_dlpack(rgba, num_channels=1)     # a 3-D volume of 4 wide
    assert vol.shape == (4, 5, 3) and vol.num_channels == 1
    layers = OpaqueArray.from_dlpack(np.zeros((6, 8, 8), np.float32), layered=True)
    assert layers.is_layered and layers.shape == (8, 8, 6)
    with pytest.raises(cuabi.CuabiError, match="float64 to float32"):
        OpaqueArray.from_dlpack(np.zeros((4, 4)))


def test_mipmap_levels_keep_their_array():
    m = MipmappedArray.from_descriptor(shape=(16, 8), format="float32", num_levels=4)
    assert m.num_levels == 4 and m.shape == (16, 8) and m.handle
    lv = m.get_level(2)
    assert lv.shape == (4, 2) and lv.level == 2
    m.close()
    del m
    gc.collect()
    lv.copy_from(np.ones((2, 4), np.float32))
    assert (np.frombuffer(lv.copy_to(), np.float32) == 1).all()
    with pytest.raises(cuabi.CuabiError, match="halves to 1"):
        MipmappedArray.from_descriptor(shape=(16, 8), format="float32", num_levels=6)


# ------------------------------------------------------------ textures, surfaces

def test_textures_over_every_resource():
    a = f32_array(8, 4)
    td = TextureDescriptor(address_mode=(AddressMode.BORDER, AddressMode.CLAMP),
                           filter_mode=FilterMode.LINEAR, border_color=(1, 0, 0, 1))
    t = TextureObject.from_descriptor(resource=ResourceDescriptor.from_opaque_array(a),
                                      texture_descriptor=td)
    assert t.handle and t.resource.kind == "array" and t.texture_descriptor is td
    assert t.info.resource == cuabi._capi.CUABI_TEXTURE_RESOURCE_ARRAY
    assert t.array.shape == (8, 4) and t.device.ordinal == 0
    a.close()                            # the texture keeps the array
    assert t.array.shape == (8, 4)
    m = MipmappedArray.from_descriptor(shape=(16, 16), format="float32", num_levels=3)
    with pytest.raises(ValueError, match="normalized coordinates"):
        TextureObject.from_descriptor(resource=ResourceDescriptor.from_mipmapped_array(m))
    tm = TextureObject.from_descriptor(resource=ResourceDescriptor.from_mipmapped_array(m),
                                       texture_descriptor=TextureDescriptor(
                                           normalized_coords=True, address_mode=AddressMode.WRAP))
    assert tm.info.mipmapped_array
    buf = cuabi.Buffer(4096)
    lin = ResourceDescriptor.from_linear(buf, format=ArrayFormat.FLOAT32, num_channels=2,
                                         size_bytes=800)
    assert (lin.kind, lin.size_bytes, lin.num_channels) == ("linear", 800, 2)
    tl = TextureObject.from_descriptor(resource=lin)
    assert tl.info.width == 100
    pitched = ResourceDescriptor.from_pitch2d(buf, format="uint16", width=30, height=20,
                                              pitch_bytes=64)
    tp = TextureObject.from_descriptor(resource=pitched, texture_descriptor=TextureDescriptor(
        read_mode=ReadMode.NORMALIZED_FLOAT, filter_mode=FilterMode.LINEAR))
    assert (tp.info.width, tp.info.height, tp.info.pitch) == (30, 20, 64)
    with pytest.raises(cuabi.CuabiError, match="pitch alignment"):
        TextureObject.from_descriptor(resource=ResourceDescriptor.from_pitch2d(
            buf, format="uint16", width=30, height=20, pitch_bytes=80))
    with pytest.raises(ValueError, match="WRAP, which needs normalized"):
        TextureObject.from_descriptor(resource=ResourceDescriptor.from_opaque_array(f32_array()),
                                      texture_descriptor=TextureDescriptor(
                                          address_mode=AddressMode.WRAP))
    with pytest.raises(ValueError, match="NORMALIZED_FLOAT to filter"):
        TextureObject.from_image(np.zeros((4, 4), np.uint8),
                                 TextureDescriptor(filter_mode=FilterMode.LINEAR))
    with pytest.raises(TypeError, match="ResourceDescriptor"):
        TextureObject.from_descriptor(resource=f32_array())
    buf.close()
    del buf
    gc.collect()
    assert tl.info.view                  # the linear texture keeps its memory


def test_an_image_becomes_a_texture_in_one_call():
    rgba = (np.arange(6 * 9 * 4) % 256).astype(np.uint8).reshape(6, 9, 4)
    t = TextureObject.from_image(rgba, TextureDescriptor(read_mode=ReadMode.NORMALIZED_FLOAT,
                                                         filter_mode=FilterMode.LINEAR))
    arr = t.array
    assert arr.shape == (9, 6) and arr.num_channels == 4
    back = np.zeros_like(rgba)
    arr.copy_to(back)
    assert (back == rgba).all()
    assert t.resource.kind == "array"


def test_surfaces():
    with pytest.raises(ValueError, match="SURFACE_LDST"):
        SurfaceObject.from_array(f32_array())
    a = f32_array(is_surface_load_store=True)
    s = SurfaceObject.from_array(a)
    assert s.handle and s.resource.source is a and s.device.ordinal == 0
    with pytest.raises(TypeError, match="from_opaque_array"):
        SurfaceObject.from_descriptor(resource=ResourceDescriptor.from_linear(
            cuabi.Buffer(64), format="float32"))


# ------------------------------------------------------------ kernel arguments

def test_objects_pack_as_their_values():
    a = f32_array(is_surface_load_store=True)
    t = TextureObject.from_descriptor(resource=ResourceDescriptor.from_opaque_array(a))
    s = SurfaceObject.from_array(a)
    p = cuabi.ArgPack("handle, handle, u64")
    p.set(t, s, t)
    q = struct.Struct("<Q")
    assert p[0] == q.pack(t.handle) and p[1] == q.pack(s.handle) and p[2] == q.pack(t.handle)
    assert t in p._held and s in p._held
    p[1] = s                             # the pack keeps the handle (C); resolved at launch
    assert p[1] == q.pack(s._h)
    with pytest.raises(TypeError, match="handle parameter or a 64-bit integer"):
        cuabi.ArgPack("f32, handle").set(t, t)
    with pytest.raises(TypeError, match="handle parameter"):
        cuabi.ArgPack("ptr")[0] = s


def test_launches_take_objects_and_refuse_closed_ones(kernel, stream):
    a = f32_array(is_surface_load_store=True)
    t = TextureObject.from_descriptor(resource=ResourceDescriptor.from_opaque_array(a))
    s = SurfaceObject.from_array(a)
    cfg = cuabi.LaunchConfig(grid=1, block=32)
    cuabi.launch(stream, cfg, kernel, t, s, np.uint64(3))
    cuabi.launch(stream, cfg, kernel, t.handle, s.handle, 3)       # the raw values too
    t.close()
    with pytest.raises(cuabi.ClosedHandleError):
        cuabi.launch(stream, cfg, kernel, t, s, np.uint64(3))
    p = cuabi.ArgPack.for_kernel(kernel)
    p[0] = s
    p[1] = s
    p[2] = 1
    pl = cuabi.PreparedLaunch(kernel, cfg, stream, pack=p)
    pl()
    s.close()                            # held by the pack: a launch now says so
    with pytest.raises(cuabi.ClosedHandleError):
        pl()


# ------------------------------------------------------------ memory operations

def test_stream_memory_operations(stream):
    buf = cuabi.Buffer(64, stream=stream)
    buf.fill(0, stream=stream)
    stream.write_value32(buf, 7, offset=4)
    stream.write_value64(buf, 2**40, offset=8, memory_barrier=False)
    stream.wait_value32(buf, 7, offset=4, condition="eq")
    stream.wait_value64(buf, 2**40 - 1, offset=8, condition="geq", flush=True)
    stream.batch_mem_op([("write32", buf, 9), ("barrier", "gpu"),
                         ("wait64", buf, 2**40, 8, "eq"), "flush"])
    stream.synchronize()
    words = np.frombuffer(buf.to_bytes(), np.uint32)
    assert list(words[:4]) == [9, 7, 0, 256]
    with pytest.raises(cuabi.CuabiError, match="not 8-byte aligned"):
        stream.write_value64(buf, 1, offset=4)
    with pytest.raises(cuabi.CuabiError, match="plain host memory"):
        stream.write_value32(np.zeros(4, np.uint32), 1)
    with pytest.raises(ValueError, match="condition"):
        stream.wait_value32(buf, 1, condition="gt")
    with pytest.raises(ValueError, match="wait32"):
        stream.batch_mem_op([("poke", buf, 1)])
    with pytest.raises(ValueError, match=r"at most 2\*\*32 - 1"):
        stream.write_value32(buf, 2**32)
    pinned = cuabi.Buffer(16, cuabi.MemoryResource.pinned())
    stream.write_value32(pinned, 5)
    stream.synchronize()
    assert np.frombuffer(pinned.to_bytes(), np.uint32)[0] == 5
    managed = cuabi.Buffer(16, cuabi.MemoryResource.managed())
    with pytest.raises(ValueError, match="managed memory"):
        stream.write_value32(managed, 5)


def test_captured_copies_and_operations_replay(stream):
    a = f32_array(4, 2)
    src = cuabi.Buffer.from_host(np.arange(8, dtype=np.float32))
    flag = cuabi.Buffer(8)
    flag.fill(0)
    with stream.capture() as g:
        a.copy_from(src, stream=stream)
        stream.write_value32(flag, 11)
        stream.batch_mem_op([("wait32", flag, 11, 0, "eq"), ("write32", flag, 12, 4)])
    assert [n.kind for n in g.node_list] == ["memcpy", "batch_mem_op", "batch_mem_op"]
    assert np.frombuffer(flag.to_bytes(), np.uint32)[0] == 0      # recorded, not run
    src.close()
    a_handle = a.handle
    del a
    gc.collect()
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    assert list(np.frombuffer(flag.to_bytes(), np.uint32)) == [11, 12]
    assert a_handle
