"""Argument packs and the Python packer (no GPU needed)."""
import struct

import pytest

import cuabi

pytestmark = pytest.mark.skipif(not hasattr(cuabi, "ArgPack"), reason="no argpack module")
np = pytest.importorskip("numpy")


def test_signature_layout():
    p = cuabi.ArgPack("ptr, i32, f32, struct{f32, f32, f32, i32}, f64")
    assert len(p) == 5
    assert [s[0] for s in p.slots] == ["ptr", "i32", "f32", "struct", "f64"]
    assert [s[2] for s in p.slots] == [0, 8, 12, 16, 32]
    assert p.blob_size == 40
    items = p.items()
    assert len(items) == 9 and items[3]["member_count"] == 4


def test_set_packs_and_converts():
    p = cuabi.ArgPack("ptr, i32, f32, u8, f64")
    p.set(0x1000, np.int32(-5), 2.5, np.uint8(7), np.float64(1.25))
    assert p[0] == struct.pack("<Q", 0x1000)
    assert p[1] == struct.pack("<i", -5)
    assert p[2] == struct.pack("<f", 2.5)
    assert p[3] == b"\x07"
    assert p[4] == struct.pack("<d", 1.25)
    p[1] = 42
    assert p[1] == struct.pack("<i", 42)


def test_python_int_float_convert_to_param_types():
    p = cuabi.ArgPack("i64, f32, f16, bf16, bool, c64, c128")
    p.set(1 << 40, 3, 1.5, 1.0, True, 1 + 2j, np.complex128(3 - 4j))
    assert p[0] == struct.pack("<q", 1 << 40)
    assert p[1] == struct.pack("<f", 3.0)
    assert p[2] == struct.pack("<e", 1.5)
    assert p[3] == struct.pack("<H", 0x3F80)
    assert p[4] == b"\x01"
    assert p[5] == struct.pack("<ff", 1, 2)
    assert p[6] == struct.pack("<dd", 3, -4)


def test_out_of_range_and_wrong_count():
    p = cuabi.ArgPack("i8, f32")
    with pytest.raises(TypeError, match="does not fit"):
        p.set(300, 1.0)
    with pytest.raises(TypeError):
        p.set(1)
    with pytest.raises(TypeError):
        p.set(1, 2.0, 3)


def test_numpy_structured_scalar_for_struct_param():
    p = cuabi.ArgPack("i32, struct{f32, f32, f32, i32}")
    dt = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("n", "<i4")])
    rec = np.array([(1.0, 2.0, 3.0, 9)], dtype=dt)[0]
    p.set(1, rec)
    assert p[1] == rec.tobytes()
    with pytest.raises(ValueError, match="bytes"):
        p.set(1, b"\0" * 3)


def test_vector_alignment():
    p = cuabi.ArgPack("i32, float4")
    assert p.slots[1][2] == 16 and p.blob_size == 32


def test_pointer_arguments_from_objects():
    class CAI:
        __cuda_array_interface__ = {"data": (0xABC0, False), "shape": (1,), "typestr": "<f4",
                                    "version": 3}
    p = cuabi.ArgPack("ptr, ptr, ptr")
    p.set(CAI(), None, np.uint64(0x20))
    assert p[0] == struct.pack("<Q", 0xABC0)
    assert p[1] == bytes(8)
    assert p[2] == struct.pack("<Q", 0x20)
    with pytest.raises(TypeError, match="pointer"):
        p.set("x", 0, 0)


def test_from_sizes_and_types():
    p = cuabi.ArgPack.from_sizes([8, 4, 4])
    assert p.blob_size == 16 and [s[0] for s in p.slots] == ["raw"] * 3
    p.set(b"\1" * 8, b"\2" * 4, b"\3" * 4)
    assert p[2] == b"\3" * 4
    q = cuabi.ArgPack.from_types(["ptr", "i32"])
    assert [s[0] for s in q.slots] == ["ptr", "i32"]


def test_bad_signature_raises():
    with pytest.raises(cuabi.InvalidArgumentError) as ei:
        cuabi.ArgPack("ptr, wibble")
    assert "wibble" in str(ei.value)


def test_closed_pack():
    p = cuabi.ArgPack("i32")
    p.close()
    with pytest.raises(cuabi.ClosedHandleError):
        p.set(1)
