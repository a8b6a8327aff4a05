"""Kernel argument packs and the Python-side packer.

A Packer turns Python arguments into the packed parameter blob of a kernel
with one struct.pack_into() call into a preallocated buffer, so a launch
crosses into C once. Conversions: Python/numpy ints and floats to the
parameter's type, Buffers/Views/DLPack/CUDA-array-interface objects to their
device address, numpy structured scalars (or bytes) to struct parameters."""
from __future__ import annotations

import ctypes as C
import struct
import sys

from . import _capi
from ._handle import Handle
from ._lib import call, lib, new_struct

K = _capi  # CUABI_ARG_* constants
# kind -> struct format for a plain scalar slot
_FMT = {K.CUABI_ARG_I8: "b", K.CUABI_ARG_I16: "h", K.CUABI_ARG_I32: "i", K.CUABI_ARG_I64: "q",
        K.CUABI_ARG_U8: "B", K.CUABI_ARG_U16: "H", K.CUABI_ARG_U32: "I", K.CUABI_ARG_U64: "Q",
        K.CUABI_ARG_F16: "e", K.CUABI_ARG_F32: "f", K.CUABI_ARG_F64: "d", K.CUABI_ARG_BOOL: "?",
        K.CUABI_ARG_PTR: "Q", K.CUABI_ARG_HANDLE: "Q", K.CUABI_ARG_BUFFER: "Q",
        K.CUABI_ARG_VIEW: "Q", K.CUABI_ARG_C64: "ff", K.CUABI_ARG_C128: "dd"}
_KIND_NAMES = {v: k[len("CUABI_ARG_"):].lower() for k, v in _capi.ENUMS["cuabi_arg_kind"].items()}


def _numpy_scalar(v) -> bool:
    # numpy scalars exist only once numpy is imported: no import here.
    np = sys.modules.get("numpy")
    return np is not None and isinstance(v, np.generic)


def is_scalar(v) -> bool:
    """A true number (Python or numpy scalar), not an array of one element."""
    return isinstance(v, (int, float, complex)) or _numpy_scalar(v)


def is_array_like(v) -> bool:
    """Something whose kernel argument is its data address: cuabi Buffers and
    Views, __cuda_array_interface__ / __array_interface__ / DLPack objects
    (numpy, CuPy, torch, JAX arrays), objects with data_ptr(). Checked before
    any conversion to a number: .item() of an array is not its address."""
    if getattr(type(v), "_cuabi_pointer_", False):
        return True
    if is_scalar(v) or isinstance(v, (bytes, bytearray, memoryview, str)):
        return False
    return (hasattr(v, "__cuda_array_interface__") or callable(getattr(v, "data_ptr", None))
            or hasattr(v, "__array_interface__") or hasattr(v, "__dlpack__"))


def device_pointer(obj) -> int:
    """The address an argument stands for: ints as they are, cuabi Buffers
    and Views, __cuda_array_interface__ objects (CuPy, numba), torch tensors
    (data_ptr()), __array_interface__ objects (numpy: host memory), any DLPack
    producer."""
    if obj is None:
        return 0
    if isinstance(obj, int):
        return obj
    if getattr(type(obj), "_cuabi_pointer_", False):   # cuabi Buffer / View
        return obj.ptr
    if _numpy_scalar(obj):                             # numpy integers
        return obj.__index__()
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0] or 0)
    dp = getattr(obj, "data_ptr", None)                # torch, without DLPack's cost
    if callable(dp):
        return int(dp())
    ai = getattr(obj, "__array_interface__", None)     # numpy arrays (host memory)
    if ai is not None:
        return int(ai["data"][0] or 0)
    if hasattr(obj, "__dlpack__"):
        from ._view import from_dlpack
        v = from_dlpack(obj)
        try:
            return v.ptr
        finally:
            v.close()
    if hasattr(obj, "__index__"):
        return obj.__index__()
    raise TypeError(f"cannot pass {type(obj).__name__} as a pointer argument")


def _to_complex(v):
    c = complex(v)
    return (c.real, c.imag)


def _bf16(v) -> int:
    # Round-to-nearest-even of the float32 bit pattern's top half.
    bits = struct.unpack("<I", struct.pack("<f", float(v)))[0]
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return (bits >> 16) | 0x40  # quiet NaN
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _as_bytes(size, raw=False):
    """Bytes for a struct/raw slot. Raw slots (a kernel's parameter info gives
    sizes only) also take Python/numpy numbers, packed by size (ints as
    integers, floats as f16/f32/f64), and pointer-like objects (8 bytes)."""
    ffmt = {2: "<e", 4: "<f", 8: "<d"}.get(size)

    def conv(v):
        if isinstance(v, (bytes, bytearray, memoryview)):
            b = bytes(v)
        elif raw and is_array_like(v):      # before any number conversion
            if size != 8:
                raise TypeError(f"cannot pass {type(v).__name__} (an array: its address) "
                                f"to a {size}-byte parameter")
            return device_pointer(v).to_bytes(8, "little")
        elif raw and is_scalar(v) and not (getattr(v, "dtype", None) is not None
                                           and v.dtype.itemsize == size):
            v = v.item() if not isinstance(v, (int, float, complex)) else v
            if isinstance(v, complex):
                raise TypeError("complex numbers need a c64/c128 parameter (use an ArgPack)")
            if isinstance(v, float):
                if ffmt is None:
                    raise TypeError(f"no float type of {size} bytes")
                return struct.pack(ffmt, v)
            try:
                return int(v).to_bytes(size, "little", signed=v < 0)
            except OverflowError:
                raise TypeError(f"kernel argument {v} does not fit {size} bytes") from None
        elif hasattr(v, "tobytes"):         # numpy scalars of the slot's size, records
            b = v.tobytes()
        elif raw and size == 8:
            return device_pointer(v).to_bytes(8, "little")
        else:
            b = bytes(v)
        if len(b) != size:
            raise ValueError(f"argument has {len(b)} bytes, the parameter {size}")
        return b
    return conv


class Packer:
    """Packs arguments for a parameter list given as (kind, size, offset)
    per slot into one blob of `blob_size` bytes: `pack(*args)` is a function
    generated for this list that makes one struct.pack_into() call."""

    __slots__ = ("slots", "blob", "size", "pack")

    def __init__(self, slots, blob_size: int, target=None):
        """target: writable memory of blob_size bytes to pack into (the
        pack's own storage), else a new buffer."""
        self.slots = list(slots)
        self.size = blob_size
        self.blob = C.create_string_buffer(max(blob_size, 1)) if target is None else target
        fmt, pos, exprs, env = ["<"], 0, [], {}
        for i, (kind, size, offset) in enumerate(self.slots):
            if offset < pos:
                raise ValueError("argument slots overlap")
            fmt.append("x" * (offset - pos))
            if kind == K.CUABI_ARG_BF16:
                f, conv = "H", _bf16
            elif kind in (K.CUABI_ARG_C64, K.CUABI_ARG_C128):
                f, conv = _FMT[kind], _to_complex
            elif kind in (K.CUABI_ARG_PTR, K.CUABI_ARG_HANDLE):
                f, conv = "Q", device_pointer
            elif kind in (K.CUABI_ARG_BUFFER, K.CUABI_ARG_VIEW):
                f, conv = "Q", _handle_value
            elif kind in _FMT:              # ints, floats, bool: struct converts
                f, conv = _FMT[kind], None  # (numpy scalars too, via __index__/__float__)
            else:                           # struct, raw, tensormap: bytes
                f, conv = f"{size}s", _as_bytes(size, raw=kind == K.CUABI_ARG_RAW)
            fmt.append(f)
            if conv is None:
                exprs.append(f"a{i}")
            else:
                env[f"c{i}"] = conv
                exprs.append(("*" if len(f) == 2 and f[0] == f[1] else "") + f"c{i}(a{i})")
            pos = offset + size
        fmt.append("x" * (blob_size - pos))
        env["_pack_into"] = struct.Struct("".join(fmt)).pack_into
        env["_blob"] = self.blob
        env["_error"] = struct.error
        params = ", ".join(f"a{i}" for i in range(len(self.slots)))
        src = (f"def pack({params}):\n"
               f"    try:\n"
               f"        _pack_into(_blob, 0{''.join(', ' + e for e in exprs)})\n"
               f"    except _error as e:\n"
               f"        raise TypeError('kernel argument does not fit its parameter: '"
               f" + str(e)) from None\n"
               f"    return _blob\n")
        exec(src, env)
        self.pack = env["pack"]


def _handle_value(obj) -> int:
    return obj.handle if isinstance(obj, Handle) else int(obj)


def _pack_slots(pack):
    n = call("cuabi_argpack_count", pack)
    return [(call("cuabi_argpack_slot_kind", pack, i), call("cuabi_argpack_slot_size", pack, i),
             call("cuabi_argpack_slot_offset", pack, i)) for i in range(n)]


class ArgPack(Handle):
    """A kernel parameter list with storage for its values.

    ArgPack("ptr, i32, f32") or ArgPack.from_sizes(sizes, offsets); set the
    values with pack.set(*args) (one call into C) or pack[i] = value."""

    _ctype = "cuabi_argpack"

    def __init__(self, signature: str):
        Handle.__init__(self, call("cuabi_argpack_create", signature.encode()))
        self._init()

    def _init(self):
        self._packer = Packer(_pack_slots(self), call("cuabi_argpack_blob_size", self))

    @classmethod
    def _wrap(cls, value):
        obj = super()._wrap(value)
        obj._init()
        return obj

    @classmethod
    def from_sizes(cls, sizes, offsets=None) -> "ArgPack":
        n = len(sizes)
        arr = C.c_size_t * max(n, 1)
        offs = arr(*offsets) if offsets is not None else None
        return cls._wrap(call("cuabi_argpack_create_from_sizes", arr(*sizes), offs, n))

    @classmethod
    def for_kernel(cls, kernel) -> "ArgPack":
        """One raw slot per kernel parameter (sizes from its parameter info)."""
        return cls._wrap(call("cuabi_argpack_create_for_kernel", kernel))

    def check(self, kernel) -> None:
        """Raise unless the pack matches the kernel's parameters."""
        lib.cuabi_argpack_check_kernel(self, kernel)

    @classmethod
    def from_types(cls, types) -> "ArgPack":
        """types: sequence of (kind, align, size, member_count) tuples or
        kind names ("i32"), depth first as cuabi_arg_type says."""
        n = len(types)
        arr = (_capi.cuabi_arg_type * max(n, 1))()
        for i, t in enumerate(types):
            entry = new_struct(_capi.cuabi_arg_type)
            if isinstance(t, str):
                t = (getattr(_capi, "CUABI_ARG_" + t.upper()),)
            kind, align, size, members = (tuple(t) + (0, 0, 0))[:4]
            entry.kind, entry.align, entry.size, entry.member_count = kind, align, size, members
            arr[i] = entry
        return cls._wrap(call("cuabi_argpack_create_from_types", arr, n))

    def __len__(self):
        return len(self._packer.slots)

    @property
    def blob_size(self) -> int:
        return self._packer.size

    @property
    def slots(self) -> list[tuple[str, int, int]]:
        """(kind name, size, offset) per parameter."""
        return [(_KIND_NAMES.get(k, "?"), s, o) for k, s, o in self._packer.slots]

    def items(self) -> list[dict]:
        """Layout of every slot and struct member (cuabi_argpack_item)."""
        from ._lib import struct_to_dict
        out = []
        for i in range(call("cuabi_argpack_item_count", self)):
            info = new_struct(_capi.cuabi_arg_info)
            lib.cuabi_argpack_item(C.byref(info), self, i)
            d = struct_to_dict(info)
            d.pop("version")
            d["kind"] = _KIND_NAMES.get(d["kind"], "?")
            out.append(d)
        return out

    def set(self, *args) -> "ArgPack":
        """Set every slot from Python values: one blob, one call into C."""
        blob = self._packer.pack(*args)
        lib.cuabi_argpack_set_blob(self, blob, self._packer.size)
        return self

    def __setitem__(self, slot: int, value):
        kind, size, _off = self._packer.slots[slot]
        p = Packer([(kind, size, 0)], size)
        blob = p.pack(value)
        lib.cuabi_argpack_set_bytes(self, slot, blob, size)

    def __getitem__(self, slot: int) -> bytes:
        """The slot's current bytes."""
        size = self._packer.slots[slot][1]
        buf = C.create_string_buffer(size)
        lib.cuabi_argpack_get_bytes(buf, size, self, slot)
        return buf.raw
