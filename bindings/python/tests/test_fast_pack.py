"""The compiled packer (cuabi._fast, fast_pack.c) against the Python one.

For every slot kind and a wide set of values: whatever the compiled packer
writes itself, the Python packer writes byte for byte (and does not refuse);
everything else it leaves to the Python packer (None here), which converts
or raises. So the compiled launch accepts exactly what the ctypes backend
accepts. And the common cases do take the compiled path."""
import math

import numpy as np
import pytest

import cuabi
from cuabi import _capi, _lib
from cuabi._argpack import Packer

fast = _lib.fast
pytestmark = pytest.mark.skipif(fast is None, reason="cuabi._fast not in use")

KINDS = {name[len("CUABI_ARG_"):].lower(): v for name, v in _capi.ENUMS["cuabi_arg_kind"].items()}
SIZES = {"i8": 1, "i16": 2, "i32": 4, "i64": 8, "u8": 1, "u16": 2, "u32": 4, "u64": 8,
         "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16, "bool": 1, "ptr": 8,
         "handle": 8}
SLOTS = ([(KINDS[k], s) for k, s in SIZES.items()] + [(KINDS["raw"], s) for s in (1, 2, 4, 8, 16, 3)]
         + [(KINDS["integer"], s) for s in (1, 2, 4, 8)] + [(KINDS["intptr"], 8)])

INTS = [0, 1, -1, 5, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769, 65535, 65536,
        2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, -2**63,
        -2**63 - 1, 2**64 - 1, 2**64, -2**64, 10**30]
FLOATS = [0.0, -0.0, 1.5, -2.25, 1e-8, 65504.0, 65520.0, 3.4e38, 3.5e38, 1e300, -1e300,
          math.inf, -math.inf, math.nan]
NP_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
            np.float16, np.float32, np.float64, np.bool_]


class DataPtr:
    def __init__(self, p):
        self.p = p

    def data_ptr(self):
        return self.p


class CAI:
    def __init__(self, p):
        self.__cuda_array_interface__ = {"shape": (1,), "typestr": "<f4", "data": (p, False),
                                         "version": 3}


class BadIndex:
    def __index__(self):
        raise RuntimeError("no index")


class BadDataPtr:
    def data_ptr(self):
        raise RuntimeError("no pointer")


def numpy_values():
    out = []
    for t in NP_TYPES:
        info = np.iinfo(t) if np.issubdtype(t, np.integer) else None
        if info is not None:
            vals = [0, 1, info.max, info.min]
        elif t is np.bool_:
            vals = [True, False]
        else:
            vals = [0.0, 1.5, -2.0, np.inf, np.nan, np.finfo(t).max]
        out += [t(v) for v in vals]
    return out


def values():
    host = cuabi.MemoryResource.host()
    buf = cuabi.Buffer(64, resource=host)
    view = buf.view("float32", (4,))
    arr = np.zeros(4, np.float32)
    return (INTS + [True, False] + FLOATS + numpy_values() +
            [None, "s", b"abcd", b"12345678", bytearray(8), 1 + 2j, np.complex64(1), object(),
             buf, view, cuabi.from_dlpack(arr), arr, np.zeros(()), DataPtr(0x1000), DataPtr(-5),
             CAI(0x2000), BadIndex(), BadDataPtr()])


def python_pack(kind, size, v):
    try:
        return ("ok", bytes(Packer([(kind, size, 0)], size).pack(v)))
    except Exception as e:     # the Python packer's refusal
        return ("error", type(e).__name__)


def test_compiled_packer_writes_what_python_writes():
    checked = handled = 0
    vals = values()
    for kind, size in SLOTS:
        for v in vals:
            c = fast.pack([(kind, size, 0)], size, v)
            if c is None:
                continue
            handled += 1
            py = python_pack(kind, size, v)
            assert py == ("ok", c), (kind, size, repr(v), py, c)
            checked += 1
    assert checked == handled and handled > 300


@pytest.mark.parametrize("kind,size,v", [
    ("i32", 4, 5), ("i32", 4, -7), ("i32", 4, True), ("i64", 8, 2**63 - 1), ("u64", 8, 2**64 - 1),
    ("u8", 1, np.uint8(200)), ("i16", 2, np.int64(-3)), ("f32", 4, 1.5), ("f32", 4, 3),
    ("f64", 8, np.float32(0.25)), ("f16", 2, 1.0), ("f32", 4, np.int32(7)), ("bool", 1, True),
    ("bool", 1, np.bool_(False)), ("ptr", 8, 0x1000), ("ptr", 8, None), ("ptr", 8, "buffer"),
    ("ptr", 8, "view"), ("ptr", 8, "numpy"), ("raw", 8, "buffer"), ("raw", 4, 5), ("raw", 4, -1),
    ("raw", 4, 2**32 - 1), ("raw", 8, 2**64 - 1), ("raw", 4, np.float32(1.5)),
    ("raw", 2, np.float16(2)), ("raw", 1, np.bool_(True)), ("raw", 8, np.int64(-9)),
    # the kinds a PTX signature gives (an extern "C" kernel cuabi compiled): the
    # benchmark's k(float *, int, float) is (intptr, integer, f32)
    ("integer", 4, 5), ("integer", 4, -5), ("integer", 4, 2**32 - 1), ("integer", 4, np.int32(3)),
    ("intptr", 8, "buffer"), ("intptr", 8, "view"), ("intptr", 8, "numpy"), ("intptr", 8, 0x1000),
    ("intptr", 8, -1), ("intptr", 8, None),
])
def test_common_arguments_take_the_compiled_path(kind, size, v):
    host = cuabi.MemoryResource.host()
    buf = cuabi.Buffer(64, resource=host)
    v = {"buffer": buf, "view": buf.view("uint8"),
         "numpy": np.zeros(2, np.float32)}.get(v, v) if isinstance(v, str) else v
    c = fast.pack([(KINDS[kind], size, 0)], size, v)
    assert c is not None, "left to Python"
    assert python_pack(KINDS[kind], size, v) == ("ok", c)


@pytest.mark.parametrize("kind,size,v", [
    ("i32", 4, 1.5), ("i32", 4, 2**31), ("u32", 4, -1), ("i8", 1, np.float32(1)),
    ("i32", 4, np.zeros(3)), ("raw", 4, 1.5), ("raw", 4, np.float64(1)), ("raw", 8, True),
    ("raw", 4, 2**32), ("raw", 4, "buffer"), ("ptr", 8, -1), ("ptr", 8, 1.0), ("f32", 4, 1e40),
    ("f32", 4, 10**400), ("bool", 1, 1), ("bf16", 2, 1.0), ("c64", 8, 1j), ("i32", 4, "s"),
    ("integer", 4, 1.5), ("integer", 4, 2**32), ("intptr", 8, 1.0), ("handle", 8, "buffer"),
])
def test_the_rest_is_left_to_python(kind, size, v):
    # Refusals and unusual conversions: the Python packer's (same errors).
    host = cuabi.MemoryResource.host()
    v = cuabi.Buffer(64, resource=host) if isinstance(v, str) and v == "buffer" else v
    assert fast.pack([(KINDS[kind], size, 0)], size, v) is None


def test_a_slot_in_the_middle_of_a_blob():
    i32, f32, ptr = KINDS["i32"], KINDS["f32"], KINDS["ptr"]
    slots = [(ptr, 8, 0), (i32, 4, 8), (f32, 4, 12)]
    blob = fast.pack(slots, 16, 0x1234, np.int32(5), 2.5)
    assert blob == bytes(Packer(slots, 16).pack(0x1234, 5, 2.5))
    assert fast.pack(slots, 16, 0x1234, 1.5, 2.5) is None     # a float for the int slot


def test_pack_helper_checks_its_arguments():
    with pytest.raises(TypeError):
        fast.pack([(KINDS["i32"], 4, 0)], 4)                  # one value short
    with pytest.raises(ValueError):
        fast.pack([(KINDS["i32"], 4, 2)], 4, 1)               # slot outside the blob
    with pytest.raises(TypeError):
        fast.pack(5, 4, 1)
    # Issue 29: negative sizes and offsets were taken as size_t: a slot at
    # offset -8 passed the bounds check (-8 + 8 wraps to 0) and was written
    # before the blob.
    i64 = KINDS["i64"]
    with pytest.raises(ValueError, match="slot offset is -8"):
        fast.pack([(i64, 8, -8)], 16, 1)
    with pytest.raises(ValueError, match="slot size is -1"):
        fast.pack([(i64, -1, 1)], 16, 1)
    with pytest.raises(ValueError, match="blob_size is -1"):
        fast.pack([(i64, 8, 0)], -1, 1)
    with pytest.raises(ValueError, match="slot outside the blob"):
        fast.pack([(i64, 8, 12)], 16, 1)
    with pytest.raises(TypeError, match="not float"):
        fast.pack([(i64, 8, 0)], 16.0, 1)
    assert fast.pack([(i64, 8, np.int64(8))], np.uint8(16), 1) == bytes(8) + (1).to_bytes(8, "little")
