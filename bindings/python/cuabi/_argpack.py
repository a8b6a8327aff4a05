"""Kernel argument packs and the Python-side packer.

A Packer turns Python arguments into the packed parameter blob of a kernel
with one struct.pack_into() call into a preallocated buffer, so a launch
crosses into C once. Conversions: Python/numpy ints and floats to the
parameter's type, Buffers/Views/DLPack/CUDA-array-interface objects to their
device address, numpy structured scalars (or bytes) to struct parameters."""
from __future__ import annotations

import ctypes as C
import operator
import struct
import sys
from operator import attrgetter, methodcaller

from . import _capi
from ._handle import Handle
from ._lib import call, holding, lib, new_struct, struct_to_dict
from .errors import I64_MAX, I64_MIN, INT_MAX, INT_MIN, U64_MAX, dims_arg, index_arg

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
        from ._view import from_dlpack       # lazy: import time (only DLPack-only objects)
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


# ---- what each slot kind takes (docs/launch.md, "Python values per slot kind")

_INT_KINDS = {K.CUABI_ARG_I8, K.CUABI_ARG_I16, K.CUABI_ARG_I32, K.CUABI_ARG_I64,
              K.CUABI_ARG_U8, K.CUABI_ARG_U16, K.CUABI_ARG_U32, K.CUABI_ARG_U64}
_FLOAT_KINDS = {K.CUABI_ARG_F16, K.CUABI_ARG_BF16, K.CUABI_ARG_F32, K.CUABI_ARG_F64}
_ADDRESS_KINDS = {K.CUABI_ARG_PTR, K.CUABI_ARG_HANDLE, K.CUABI_ARG_INTPTR}
_BYTES_KINDS = {K.CUABI_ARG_STRUCT, K.CUABI_ARG_TENSORMAP}
# Slots a texture or surface object goes to (cuabi._texture: `_cuabi_object_value_`).
_OBJECT_KINDS = {K.CUABI_ARG_HANDLE, K.CUABI_ARG_U64, K.CUABI_ARG_I64, K.CUABI_ARG_INTPTR}
_object_value = attrgetter("handle")     # CUtexObject / CUsurfObject; raises once closed
_INT_FMT = {1: "b", 2: "h", 4: "i", 8: "q"}
_UINT_FMT = {1: "B", 2: "H", 4: "I", 8: "Q"}
_FLOAT_FMT = {2: "e", 4: "f", 8: "d"}
# numpy scalar (dtype kind, itemsize) -> struct format, packed bit for bit
_NP_FMT = {("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q",
           ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q",
           ("f", 2): "e", ("f", 4): "f", ("f", 8): "d", ("b", 1): "?"}


def _np_kind(v):
    """numpy dtype kind ('i', 'u', 'f', 'c', 'b', ...) of a numpy scalar, else None."""
    return v.dtype.kind if _numpy_scalar(v) else None


def _int_range(kind, size):
    """(lowest, highest) value an integer slot takes."""
    if kind in (K.CUABI_ARG_U8, K.CUABI_ARG_U16, K.CUABI_ARG_U32, K.CUABI_ARG_U64):
        return 0, (1 << (8 * size)) - 1
    if kind == K.CUABI_ARG_BOOL:
        return 0, 1
    lo = -(1 << (8 * size - 1))
    if kind in (K.CUABI_ARG_INTEGER, K.CUABI_ARG_INTPTR, K.CUABI_ARG_RAW):
        return lo, (1 << (8 * size)) - 1      # signedness unknown: either range
    return lo, -lo - 1


def _pointer_getter(t):
    """The fastest address getter for arguments of array-like type t."""
    if getattr(t, "_cuabi_pointer_", False):
        return attrgetter("ptr")
    if callable(getattr(t, "data_ptr", None)) and not hasattr(t, "__cuda_array_interface__"):
        return methodcaller("data_ptr")
    return device_pointer


class _Slot:
    """One parameter as the packer sees it: kind, size, offset, and how to
    name it in messages ("argument 2 (float const*)")."""

    __slots__ = ("index", "kind", "size", "offset", "type_name", "vector")

    def __init__(self, index, kind, size, offset, type_name="", vector=None):
        self.index, self.kind, self.size, self.offset = index, kind, size, offset
        self.type_name = type_name
        self.vector = vector    # (count, element kind) of a struct of equal scalars

    def label(self):
        kind = _KIND_NAMES.get(self.kind, "?")
        name = self.type_name or kind
        return f"argument {self.index} ({name})"

    def refuse(self, value, why):
        return TypeError(f"{self.label()}: {why} (got {type(value).__name__} "
                         f"{_short_repr(value)})")

    # -- the plan for values of one type: (struct format, converter or None)

    def plan(self, value):
        """How to pack values of type(value) into this slot: (format,
        converter or None: struct converts). Raises TypeError, naming the
        argument, for a type the slot refuses (docs/launch.md)."""
        k, size = self.kind, self.size
        what = getattr(type(value), "_cuabi_object_value_", None)
        if what is not None:            # a texture or surface object: its 64-bit value
            if k in _OBJECT_KINDS or (k in (K.CUABI_ARG_RAW, K.CUABI_ARG_INTEGER) and size == 8):
                return "Q", _object_value
            raise self.refuse(value, f"a {what} object goes to a handle parameter or a 64-bit "
                              f"integer one (cuda{what.capitalize()}Object_t)")
        if k in _INT_KINDS or k == K.CUABI_ARG_INTEGER:
            self._want_integer(value, "an integer")
            fmt = (_UINT_FMT if k in _UNSIGNED else _INT_FMT)[size]
            # numpy bools have no __index__ (numpy 2): struct needs an int
            return (fmt, int) if _np_kind(value) == "b" else (fmt, None)
        if k == K.CUABI_ARG_BOOL:
            self._want_integer(value, "a bool")
            return "?", _checked_bool
        if k in _FLOAT_KINDS:
            self._want_number(value)
            if k == K.CUABI_ARG_BF16:
                return "H", _bf16
            return _FLOAT_FMT[size], None
        if k in (K.CUABI_ARG_C64, K.CUABI_ARG_C128):
            if is_array_like(value) or not (isinstance(value, (int, float, complex))
                                            or _np_kind(value) in ("i", "u", "b", "f", "c")):
                raise self.refuse(value, "the parameter is complex: pass a number")
            return _FMT[k], _to_complex
        if k in _ADDRESS_KINDS:
            return self._address_plan(value)
        if k in (K.CUABI_ARG_BUFFER, K.CUABI_ARG_VIEW):
            if not (isinstance(value, (Handle, int))):
                raise self.refuse(value, "the parameter is a cuabi "
                                  f"{'Buffer' if k == K.CUABI_ARG_BUFFER else 'View'}")
            return "Q", _handle_value
        if k == K.CUABI_ARG_RAW:
            return self._raw_plan(value)
        if self.vector and isinstance(value, (tuple, list)):
            n, elem = self.vector          # float4 from (x, y, z, w)
            return _FMT[elem] * n, self._vector
        return f"{size}s", self._bytes   # struct, tensor map: the bytes of the value

    def _want_integer(self, value, what):
        if isinstance(value, float) or _np_kind(value) in ("f", "c") or isinstance(value, complex):
            raise self.refuse(value, f"the parameter is {what}, a float is refused "
                              "(convert it with int() if truncation is meant)")
        if is_array_like(value):
            raise self.refuse(value, f"an array for a scalar parameter ({what})")
        if (not isinstance(value, int) and not hasattr(value, "__index__")
                and _np_kind(value) != "b"):
            raise self.refuse(value, f"the parameter is {what}")

    def _want_number(self, value):
        if is_array_like(value):
            raise self.refuse(value, "an array for a scalar parameter (a float)")
        if isinstance(value, (int, float)) or _np_kind(value) in ("i", "u", "b", "f"):
            return
        raise self.refuse(value, "the parameter is a float: pass a Python or numpy number")

    def _address_plan(self, value):
        k = self.kind
        signed = k == K.CUABI_ARG_INTPTR
        if value is None:
            return "Q", _zero
        if is_array_like(value):
            if k == K.CUABI_ARG_HANDLE:
                raise self.refuse(value, "an array for a 64-bit handle")
            return "Q", _pointer_getter(type(value))
        if isinstance(value, (float, complex)) or _np_kind(value) in ("f", "c"):
            what = "an integer or a pointer" if signed else "a pointer"
            raise self.refuse(value, f"the parameter is {what}, a float is refused")
        if isinstance(value, int) or hasattr(value, "__index__"):
            return ("q" if signed else "Q"), None
        raise self.refuse(value, "cannot pass it as a pointer")

    def _raw_plan(self, value):
        size = self.size
        a_size = _a_size(size)
        nk = _np_kind(value)    # first: numpy's float64 is also a Python float
        if nk is not None:
            if value.dtype.itemsize != size:
                raise self.refuse(value, f"a {value.dtype.itemsize}-byte numpy scalar for "
                                  f"{a_size} parameter of unknown type: pass a numpy scalar "
                                  f"of {size} bytes")
            f = _NP_FMT.get((nk, size))
            return (f, None) if f else (f"{size}s", self._bytes)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return f"{size}s", self._bytes
        if is_array_like(value):
            if size != 8:
                raise self.refuse(value, f"an array (its address) for {a_size} parameter")
            return "Q", _pointer_getter(type(value))
        if value is None and size == 8:
            return "Q", _zero
        if isinstance(value, float):
            raise self.refuse(value, f"a Python float for {a_size} parameter: the kernel's "
                              "parameter types are unknown (a CUBIN without PTX and an "
                              "extern \"C\" name); pass numpy.float32(x) or numpy.float64(x), "
                              "or declare the parameters with an ArgPack signature "
                              "(PreparedLaunch(..., pack=ArgPack(...)))")
        if isinstance(value, complex):
            raise self.refuse(value, "complex numbers need a c64/c128 parameter (use an ArgPack)")
        if isinstance(value, int):
            if size not in _INT_FMT:
                raise self.refuse(value, f"an integer for {a_size} parameter: pass bytes")
            return _INT_FMT[size], None
        if hasattr(value, "tobytes"):
            return f"{size}s", self._bytes
        raise self.refuse(value, f"cannot pass it to {a_size} parameter of unknown type")

    def _vector(self, v):
        """A tuple or list of numbers for a struct of equal scalars (a CUDA
        vector type): the count and each element's kind are checked."""
        n, elem = self.vector
        if len(v) != n:
            raise self.refuse(v, f"the parameter is a struct of {n} "
                              f"{_KIND_NAMES.get(elem, '?')}: give {n} numbers")
        want_int = elem not in _FLOAT_KINDS
        for x in v:
            if is_array_like(x) or not (isinstance(x, (int, float)) or
                                        _np_kind(x) in ("i", "u", "b", "f")):
                raise self.refuse(v, "give numbers")
            if want_int and (isinstance(x, float) or _np_kind(x) == "f"):
                raise self.refuse(v, f"the elements are {_KIND_NAMES.get(elem, '?')}: "
                                  "a float is refused")
        return tuple(v)

    def _bytes(self, v):
        """The bytes of a value for a struct/raw slot, checked for size."""
        if isinstance(v, (bytes, bytearray, memoryview)):
            b = bytes(v)
        elif hasattr(v, "tobytes"):
            b = v.tobytes()
        else:
            raise self.refuse(v, f"the parameter is {self.size} bytes of a struct: pass bytes "
                              "or a numpy structured scalar")
        if len(b) != self.size:
            raise ValueError(f"{self.label()}: {len(b)} bytes given, the parameter has "
                             f"{self.size}")
        return b

    # -- the exact, slow path: per slot, with range checks and messages

    def pack_exact(self, blob, value, offset=None):
        """Pack one value at its offset (or `offset`), exactly, or raise a
        TypeError/ValueError naming the argument."""
        fmt, conv = self.plan(value)
        if conv is None and len(fmt) == 1 and fmt in "bhiqBHIQ":
            v = operator.index(value)
            lo, hi = _int_range(self.kind, self.size)
            if not lo <= v <= hi:
                raise TypeError(f"{self.label()}: {v} does not fit (the parameter takes "
                                f"{lo}..{hi})")
            if v > (1 << (8 * self.size - 1)) - 1:
                fmt = _UINT_FMT[self.size]          # the unsigned bits of a large value
            value = v
        at = self.offset if offset is None else offset
        try:
            if conv is not None:
                value = conv(value)
            if isinstance(value, tuple):
                struct.pack_into("<" + fmt, blob, at, *value)
            else:
                struct.pack_into("<" + fmt, blob, at, value)
        except (struct.error, OverflowError) as e:
            raise TypeError(f"{self.label()}: {_short_repr(value)} does not fit: {e}") from None


_UNSIGNED = {K.CUABI_ARG_U8, K.CUABI_ARG_U16, K.CUABI_ARG_U32, K.CUABI_ARG_U64}


def _a_size(size):
    """"a 4-byte" / "an 8-byte"."""
    return f"{'an' if str(size)[0] == '8' or size in (11, 18) else 'a'} {size}-byte"


def _checked_bool(v):
    i = int(v) if _np_kind(v) == "b" else operator.index(v)
    if i not in (0, 1):
        raise OverflowError(f"{i} is not a bool (0 or 1)")
    return bool(i)


def _zero(_v):
    return 0


def _short_repr(v):
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


class _Missing:
    """Default of the generated packers' parameters: a missing argument."""


_MISSING = _Missing()


class Packer:
    """Packs arguments for a parameter list given as (kind, size, offset)
    per slot into one blob of `blob_size` bytes.

    `pack(*args)` is a function generated per tuple of argument types: the
    checks of docs/launch.md run when it is built (an argument of a refused
    type raises TypeError naming it), and a call is one struct.pack_into()
    behind a guard on the types. Values a fast format cannot hold (an
    unsigned value in an integer slot of unknown signedness, one out of
    range) take the exact path, which packs them or says why not."""

    __slots__ = ("slots", "blob", "size", "pack", "_packers", "_what", "_slot_objs",
                 "__weakref__")

    def __init__(self, slots, blob_size: int, target=None, type_names=None,
                 what: str = "the kernel", vectors=None):
        """target: writable memory of blob_size bytes to pack into (the
        pack's own storage), else a new buffer. type_names: the parameters'
        C types, for messages. vectors: {slot: (count, element kind)} for
        structs of equal scalars, which then also take a tuple of numbers."""
        self.slots = list(slots)
        self.size = blob_size
        self.blob = C.create_string_buffer(max(blob_size, 1)) if target is None else target
        names = list(type_names or [])
        pos = 0
        for (_k, size, offset) in self.slots:
            if offset < pos:
                raise ValueError("argument slots overlap")
            pos = offset + size
        vectors = vectors or {}
        self._slot_objs = [_Slot(i, k, s, o, names[i] if i < len(names) else "", vectors.get(i))
                           for i, (k, s, o) in enumerate(self.slots)]
        self._packers = {}
        self._what = what
        self.pack = self._first

    def _layout(self) -> dict:
        """Packer() keywords for another packer of these slots, whose
        messages name the arguments as this one's do."""
        return dict(slots=self.slots, blob_size=self.size,
                    type_names=[s.type_name for s in self._slot_objs], what=self._what,
                    vectors={s.index: s.vector for s in self._slot_objs if s.vector})

    def _first(self, *args):
        return self._dispatch(args)

    def _dispatch(self, args):
        """The slow entry: check the count, find or build the packer for
        these argument types, pack with it."""
        args = tuple(a for a in args if a is not _MISSING)
        if len(args) != len(self.slots):
            sig = ", ".join(s.type_name or _KIND_NAMES.get(s.kind, "?") for s in self._slot_objs)
            raise TypeError(f"{self._what} takes {len(self.slots)} argument"
                            f"{'' if len(self.slots) == 1 else 's'} ({sig}), "
                            f"{len(args)} given")
        key = tuple(map(type, args))
        fn = self._packers.get(key)
        if fn is None:
            fn = self._packers[key] = self._build(args)
        self.pack = fn
        return fn(*args)

    def pack_exact(self, args):
        """Pack slot by slot with the exact conversions (or raise)."""
        for slot, value in zip(self._slot_objs, args):
            slot.pack_exact(self.blob, value)
        return self.blob

    def _build(self, args):
        fmt, pos, exprs, env = ["<"], 0, [], {}
        for slot, a in zip(self._slot_objs, args):
            f, conv = slot.plan(a)       # raises for a refused type
            fmt.append("x" * (slot.offset - pos) + f)
            i = slot.index
            if conv is None:
                exprs.append(f"a{i}")
            else:
                env[f"c{i}"] = conv
                star = len(f) >= 2 and f == f[0] * len(f)   # complex, vectors: one value each
                exprs.append(("*" if star else "") + f"c{i}(a{i})")
            pos = slot.offset + slot.size
        fmt.append("x" * (self.size - pos))
        n = len(args)
        params = ", ".join(f"a{i}=_M" for i in range(n))
        names = ", ".join(f"a{i}" for i in range(n))
        guard = " or ".join(["_x"] + [f"type(a{i}) is not _T{i}" for i in range(n)])
        env.update({f"_T{i}": type(a) for i, a in enumerate(args)})
        env.update(_pack_into=struct.Struct("".join(fmt)).pack_into, _blob=self.blob,
                   _errors=(struct.error, OverflowError, TypeError, ValueError), _M=_MISSING,
                   _slow=self._dispatch, _exact=self.pack_exact)
        src = (f"def pack({params}{', ' if n else ''}*_x):\n"
               f"    if {guard}:\n"
               f"        return _slow(({names}{',' if n == 1 else ''}) + _x)\n"
               f"    try:\n"
               f"        _pack_into(_blob, 0{''.join(', ' + e for e in exprs)})\n"
               f"    except _errors:\n"
               f"        _exact(({names}{',' if n == 1 else ''}))\n"
               f"    return _blob\n")
        exec(src, env)
        return env["pack"]


def _handle_value(obj) -> int:
    return obj.cuabi_handle if isinstance(obj, Handle) else int(obj)


def kernel_param_types(kernel) -> list:
    """(kind, size, offset, source, type name) of each parameter of a kernel
    (cuabi_kernel_param_type)."""
    out = []
    for i in range(call("cuabi_kernel_param_count", kernel)):
        t = new_struct(_capi.cuabi_param_type)
        lib.cuabi_kernel_param_type(C.byref(t), kernel, i)
        name = t.type_name.decode("utf-8", "replace") if t.type_name else ""
        out.append((t.kind, t.size, t.offset, t.source, name))
    return out


def _kernel_label(kernel) -> str:
    try:
        return f"kernel {call('cuabi_kernel_name', kernel).decode('utf-8', 'replace')}"
    except Exception:
        return "the kernel"


def _vector_slots(pack) -> dict:
    """{slot: (count, element kind)} of the pack's structs whose members are
    equal scalars laid out without gaps (CUDA vector types such as float4)."""
    out, members, n = {}, {}, call("cuabi_argpack_item_count", pack)
    if n == call("cuabi_argpack_count", pack):
        return out                      # no struct members at all: nothing to read
    for i in range(n):
        info = new_struct(_capi.cuabi_arg_info)
        lib.cuabi_argpack_item(C.byref(info), pack, i)
        if info.depth == 1:
            members.setdefault(info.slot, []).append((info.kind, info.size, info.offset))
        elif info.depth > 1:
            members[info.slot] = None   # nested: not a vector
    for slot, ms in members.items():
        if not ms or len({k for k, _s, _o in ms}) != 1 or ms[0][0] not in _FMT or \
                len(_FMT[ms[0][0]]) != 1:
            continue
        if all(o == j * ms[0][1] for j, (_k, _s, o) in enumerate(ms)):
            out[slot] = (len(ms), ms[0][0])
    return out


def _pack_slots(pack):
    n = call("cuabi_argpack_count", pack)
    return [(call("cuabi_argpack_slot_kind", pack, i), call("cuabi_argpack_slot_size", pack, i),
             call("cuabi_argpack_slot_offset", pack, i)) for i in range(n)]


class ArgPack(Handle):
    """A kernel parameter list with storage for its values.

    ArgPack("ptr, i32, f32") or ArgPack.from_sizes(sizes, offsets); set the
    values with pack.set(*args) (one call into C) or pack[i] = value."""

    _ctype = "cuabi_argpack"
    # _refs: {slot: Buffer or View} the buffer and view slots name (the pack
    # keeps their handles, not references); _held: those objects, a tuple,
    # in use during every launch of the pack (prepared launches; the
    # compiled one reads the slot).
    __slots__ = ("_packer", "_refs", "_held", "__dict__")

    def __init__(self, signature: str):
        Handle.__init__(self, call("cuabi_argpack_create", signature.encode()))
        self._init()

    def _init(self, type_names=None, what="the pack"):
        self._packer = Packer(_pack_slots(self), call("cuabi_argpack_blob_size", self),
                              type_names=type_names, what=what, vectors=_vector_slots(self))

    @property
    def _ref_slots(self):
        ks = (K.CUABI_ARG_BUFFER, K.CUABI_ARG_VIEW)
        return [i for i, (k, _s, _o) in enumerate(self._packer.slots) if k in ks]

    def _set_refs(self, values: dict) -> None:
        """The buffer and view slots in `values` ({slot: value}) now name
        these objects (or, for ints, no object of ours)."""
        refs = dict(getattr(self, "_refs", None) or {})
        for slot, v in values.items():
            if isinstance(v, Handle):
                refs[slot] = v
            else:
                refs.pop(slot, None)
        self._refs = refs
        self._held = tuple(refs.values())

    @classmethod
    def _wrap(cls, value):
        obj = super()._wrap(value)
        obj._init()
        return obj

    @classmethod
    def from_sizes(cls, sizes, offsets=None) -> "ArgPack":
        sizes = dims_arg(sizes, "ArgPack.from_sizes: sizes", 0, U64_MAX)
        n = len(sizes)
        arr = C.c_size_t * max(n, 1)
        offs = None
        if offsets is not None:
            offs = arr(*dims_arg(offsets, "ArgPack.from_sizes: offsets", 0, U64_MAX, length=n))
        return cls._wrap(call("cuabi_argpack_create_from_sizes", arr(*sizes), offs, n))

    @classmethod
    def for_kernel(cls, kernel) -> "ArgPack":
        """One slot per kernel parameter, typed as the kernel's name or PTX
        says (raw where nothing does): see Kernel.param_types."""
        obj = Handle._wrap.__func__(cls, call("cuabi_argpack_create_for_kernel", kernel))
        obj._init([t[4] for t in kernel_param_types(kernel)], _kernel_label(kernel))
        return obj

    @classmethod
    def _for_kernel_like(cls, kernel, other: "ArgPack") -> "ArgPack":
        """ArgPack.for_kernel(kernel) where `other` is one already: the
        library makes the pack, the description is other's."""
        obj = Handle._wrap.__func__(cls, call("cuabi_argpack_create_for_kernel", kernel))
        obj._packer = Packer(**other._packer._layout())
        return obj

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
            entry.kind = index_arg(kind, f"ArgPack.from_types: types[{i}] kind", INT_MIN, INT_MAX)
            entry.align = index_arg(align, f"ArgPack.from_types: types[{i}] align")
            entry.size = index_arg(size, f"ArgPack.from_types: types[{i}] size")
            entry.member_count = index_arg(members, f"ArgPack.from_types: types[{i}] member_count")
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
        refs = self.__dict__.get("_ref_cache")
        if refs is None:
            refs = self._ref_slots
            self.__dict__["_ref_cache"] = refs
        if not refs:
            blob = self._packer.pack(*args)
            lib.cuabi_argpack_set_blob(self, blob, self._packer.size)
            if getattr(self, "_refs", None) or any(
                    getattr(type(a), "_cuabi_object_value_", None) for a in args):
                self._set_refs(dict(enumerate(args)))   # textures and surfaces: kept
            return self
        values = {i: args[i] for i in refs if i < len(args)}
        values.update((i, a) for i, a in enumerate(args)       # textures and surfaces
                      if getattr(type(a), "_cuabi_object_value_", None))
        objs = [v for v in values.values() if isinstance(v, Handle)]
        # Launches until the pack is set again hold the old objects and the
        # new ones; the new ones are in use while their handles are packed.
        self._held = tuple(getattr(self, "_held", ())) + tuple(objs)
        with holding(*objs):
            blob = self._packer.pack(*args)
            lib.cuabi_argpack_set_blob(self, blob, self._packer.size)
        self._set_refs(values)
        return self

    def _slot(self, slot) -> int:
        """A slot index as a list takes it (negative from the end; IndexError
        past either end), made non-negative for the C call."""
        n = len(self._packer.slots)
        i = index_arg(slot, "slot", I64_MIN, I64_MAX)
        i = i + n if i < 0 else i
        if not 0 <= i < n:
            raise IndexError(f"slot {slot} is out of range (the pack has {n})")
        return i

    def __setitem__(self, slot: int, value):
        slot = self._slot(slot)
        s = self._packer._slot_objs[slot]
        what = getattr(type(value), "_cuabi_object_value_", None)
        if what is not None:    # the pack keeps the texture's or surface's handle (C)
            s.plan(value)       # refuses slots that cannot take one
            getattr(lib, "cuabi_argpack_set_" + what)(self, slot, value)
            self._set_refs({slot: value})
            return
        if s.kind in (K.CUABI_ARG_BUFFER, K.CUABI_ARG_VIEW):   # the handle, not bytes
            s.plan(value)                                      # refuses non-handles
            fn = lib.cuabi_argpack_set_buffer if s.kind == K.CUABI_ARG_BUFFER \
                else lib.cuabi_argpack_set_view
            # A Handle goes as itself: in use during the call.
            fn(self, slot, value if isinstance(value, Handle) else C.c_void_p(int(value)))
            self._set_refs({slot: value})
            return
        blob = C.create_string_buffer(max(s.size, 1))
        s.pack_exact(blob, value, offset=0)
        lib.cuabi_argpack_set_bytes(self, slot, blob, s.size)

    def __getitem__(self, slot: int) -> bytes:
        """The slot's current bytes."""
        slot = self._slot(slot)
        size = self._packer.slots[slot][1]
        buf = C.create_string_buffer(size)
        lib.cuabi_argpack_get_bytes(buf, size, self, slot)
        return buf.raw
