"""Arrays, textures, surfaces and stream memory operations without a GPU:
the names (cuda.core's `texture` namespace), descriptions and refusals here,
and the whole layer against the C tests' fake driver in a separate process
(fake_texture_checks.py; the fake is tests/fixtures/.libs/fake_cuda_graph.so)."""

import pytest

from fake_driver_run import run_checks

import cuabi
from cuabi import _texture


def test_texture_layer_against_the_fake_driver():
    run_checks("fake_texture_checks.py")


def test_cuda_core_names():
    import cuabi.texture as t
    for name in ("AddressMode", "ArrayFormat", "FilterMode", "MipmappedArray", "OpaqueArray",
                 "ReadMode", "ResourceDescriptor", "SurfaceObject", "TextureDescriptor",
                 "TextureObject"):
        assert getattr(t, name) is getattr(cuabi, name) is getattr(_texture, name)
    assert cuabi.texture is t
    assert [m.name for m in t.AddressMode] == ["WRAP", "CLAMP", "MIRROR", "BORDER"]
    assert [m.name for m in t.FilterMode] == ["POINT", "LINEAR"]
    assert [m.name for m in t.ReadMode] == ["ELEMENT_TYPE", "NORMALIZED_FLOAT"]
    for name in ("UINT8", "UINT16", "UINT32", "INT8", "INT16", "INT32", "FLOAT16", "FLOAT32",
                 "BC7_UNORM", "NV12", "UNORM_INT8X4"):
        assert hasattr(t.ArrayFormat, name)
    # The driver's values (CUarray_format).
    assert (t.ArrayFormat.UINT8, t.ArrayFormat.FLOAT16, t.ArrayFormat.FLOAT32) == (1, 16, 32)
    d = t.TextureDescriptor()
    assert (d.address_mode, d.filter_mode, d.read_mode, d.normalized_coords, d.max_anisotropy,
            d.border_color) == (t.AddressMode.CLAMP, t.FilterMode.POINT,
                                t.ReadMode.ELEMENT_TYPE, False, 0, None)
    s = cuabi.Stream
    for m in ("wait_value32", "wait_value64", "write_value32", "write_value64", "batch_mem_op"):
        assert callable(getattr(s, m))


def test_formats_by_any_name():
    import numpy as np
    f = _texture._format
    assert f("float32") == f("FLOAT32") == f(np.dtype(np.float32)) == f(32) == \
        _texture.ArrayFormat.FLOAT32
    assert f(np.float16) == _texture.ArrayFormat.FLOAT16
    assert f("bool") == _texture.ArrayFormat.UINT8
    with pytest.raises(ValueError, match="not an ArrayFormat"):
        f("complex64")
    with pytest.raises(ValueError):
        f(12345)


def test_texture_descriptor_in_c():
    t = _texture
    d = t.TextureDescriptor(address_mode=(t.AddressMode.WRAP, t.AddressMode.BORDER),
                            filter_mode=t.FilterMode.LINEAR,
                            read_mode=t.ReadMode.NORMALIZED_FLOAT, normalized_coords=True,
                            srgb=True, max_anisotropy=4, mipmap_level_bias=0.5,
                            border_color=(0.25, 0, 0, 1))._c()
    assert list(d.address_mode) == [0, 3, 1]
    assert (d.filter_mode, d.read_mode, d.normalized_coords, d.srgb, d.max_anisotropy) == \
        (1, 1, 1, 1, 4)
    assert d.mipmap_level_bias == 0.5 and list(d.border_color) == [0.25, 0, 0, 1]
    c = t.TextureDescriptor(address_mode=t.AddressMode.MIRROR)._c()
    assert list(c.address_mode) == [2, 2, 2]
    with pytest.raises(ValueError, match="border_color"):
        t.TextureDescriptor(border_color=(1, 2))._c()
    with pytest.raises(ValueError):
        t.TextureDescriptor(address_mode=7)._c()


def test_regions():
    r = _texture._region((1, 2), (3,))
    assert r is not None
    assert _texture._region(None, None) is None
    with pytest.raises(ValueError, match="at most 3"):
        _texture._region((1, 2, 3, 4), None)
    with pytest.raises(ValueError, match="non-negative"):
        _texture._region((-1,), None)


def test_no_driver_is_a_clear_error():
    if cuabi.runtime_info()["driver_status"] == 0:
        pytest.skip("a driver is loaded")
    with pytest.raises(cuabi.CuabiError, match="driver"):
        cuabi.OpaqueArray.from_descriptor(shape=(4,), format="uint8")
