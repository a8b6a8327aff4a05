"""Launching kernels: LaunchConfig, launch(), prepared launches."""
from __future__ import annotations

import ctypes as C

from . import _capi
import struct
from functools import partial
from operator import attrgetter, methodcaller

from ._argpack import ArgPack, Packer, device_pointer, is_array_like, is_scalar
from ._core import Stream, _as_device
from ._handle import Handle
from ._lib import call, fast, hot, lib, new_struct, raise_last


def _dim3(v):
    if isinstance(v, int):
        return (v, 1, 1)
    v = tuple(v)
    return v + (1,) * (3 - len(v))


class LaunchConfig:
    """grid, block (ints or up to 3-tuples), cluster, shared_mem (dynamic
    bytes), cooperative. The C struct is built once and reused."""

    # _c: the C struct; _addr: its address, which the compiled launch reads
    # (whatever else LaunchConfig grows, both must name the struct in use).
    __slots__ = ("grid", "block", "cluster", "shared_mem", "cooperative", "_c", "_p", "_addr")

    def __init__(self, grid=1, block=1, cluster=None, shared_mem: int = 0,
                 cooperative: bool = False):
        self.grid, self.block = _dim3(grid), _dim3(block)
        self.cluster = _dim3(cluster) if cluster else (0, 0, 0)
        self.shared_mem, self.cooperative = shared_mem, cooperative
        c = new_struct(_capi.cuabi_launch_config)
        c.grid[:], c.block[:], c.cluster[:] = self.grid, self.block, self.cluster
        c.dynamic_shared_bytes, c.cooperative = shared_mem, int(cooperative)
        self._c = c
        self._addr = C.addressof(c)
        self._p = _ptr(self._addr)

    def _for(self, stream):
        c = self._c
        c.stream = None if stream is None else stream.handle
        return c

    def __repr__(self):
        return f"LaunchConfig(grid={self.grid}, block={self.block}, shared_mem={self.shared_mem})"


_launch, _ptr = hot("cuabi_launch")
_prepared_launch, _ = hot("cuabi_prepared_launch")

# Raw-slot formats by size for the typed packers of plain launches.
_INT_FMT = {1: "b", 2: "h", 4: "i", 8: "q"}
_FLOAT_FMT = {2: "e", 4: "f", 8: "d"}
_NP_FMT = {("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q",
           ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q",
           ("f", 2): "e", ("f", 4): "f", ("f", 8): "d", ("b", 1): "?"}


def _pointer_getter(t):
    """The fastest address getter for arguments of array-like type t."""
    if getattr(t, "_cuabi_pointer_", False):
        return attrgetter("ptr")
    if callable(getattr(t, "data_ptr", None)) and not hasattr(t, "__cuda_array_interface__"):
        return methodcaller("data_ptr")
    return device_pointer


def _slot_format(size, value):
    """(struct format, converter or None) for one raw slot and an argument
    like `value`; None when only the generic packer knows (then it is used)."""
    t = type(value)
    if is_array_like(value):
        if size != 8:
            return None
        return "Q", _pointer_getter(t)
    if t is float:
        f = _FLOAT_FMT.get(size)
        return (f, None) if f else None
    if t is int or t is bool:
        f = _INT_FMT.get(size)                  # signed; unsigned-only values take
        return (f, None) if f else None         # the generic path on struct.error
    dt = getattr(value, "dtype", None)
    if dt is not None and is_scalar(value) and dt.itemsize == size:
        f = _NP_FMT.get((dt.kind, size))
        return (f, None) if f else None
    return None


class _PlainLaunch:
    """Per kernel: one pack made from its parameter info, packed in place
    (cuabi_argpack_blob_pointer), and one packer per tuple of argument types,
    so a plain launch is Python packing plus one C call (cuabi_launch)."""

    __slots__ = ("pack", "mem", "slots", "generic", "packers", "k", "p", "last", "__weakref__")

    def __init__(self, kernel):
        self.pack = ArgPack.for_kernel(kernel)
        size = self.pack.blob_size
        self.mem = (C.c_char * max(size, 1)).from_address(
            call("cuabi_argpack_blob_pointer", self.pack))
        self.slots = self.pack._packer.slots
        self.generic = Packer(self.slots, size, target=self.mem).pack
        self.packers = {}
        self.last = self._first
        self.k, self.p = _ptr(kernel.handle), _ptr(self.pack.handle)

    @staticmethod
    def _first(*args):
        return False

    def pack_args(self, *args) -> None:
        """Pack `args` for a launch (also the compiled launch's fallback)."""
        try:
            same_types = self.last(*args)
        except TypeError:        # another number of arguments: _build says so
            same_types = False
        if not same_types:       # other argument types than last time
            self.last = fn = self.packer(args)
            fn(*args)

    def lane(self):
        """What the compiled launch packs into: (pack handle, blob address,
        packer, owner)."""
        return self.pack.handle, C.addressof(self.mem), self.pack_args, self

    def packer(self, args):
        key = tuple(map(type, args))
        fn = self.packers.get(key)
        if fn is None:
            fn = self.packers[key] = self._build(args)
        return fn

    def _build(self, args):
        if len(args) != len(self.slots):
            raise TypeError(f"launch: the kernel takes {len(self.slots)} argument(s), "
                            f"{len(args)} given")
        fmt, pos, exprs, env = ["<"], 0, [], {}
        for i, ((_kind, size, offset), a) in enumerate(zip(self.slots, args)):
            sf = _slot_format(size, a)
            if sf is None:
                return self.generic
            fmt.append("x" * (offset - pos) + sf[0])
            if sf[1] is None:
                exprs.append(f"a{i}")
            else:
                env[f"c{i}"] = sf[1]
                exprs.append(f"c{i}(a{i})")
            pos = offset + size
        fmt.append("x" * (self.pack.blob_size - pos))
        env.update(_pack_into=struct.Struct("".join(fmt)).pack_into, _mem=self.mem,
                   _error=struct.error, _generic=self.generic)
        params = ", ".join(f"a{i}" for i in range(len(args)))
        # The guard lets launch() try the last packer without building a key.
        guard = " or ".join(f"type(a{i}) is not _T{i}" for i in range(len(args))) or "False"
        env.update({f"_T{i}": type(a) for i, a in enumerate(args)})
        src = (f"def pack({params}):\n"
               f"    if {guard}:\n"
               f"        return False\n"
               f"    try:\n"
               f"        _pack_into(_mem, 0{''.join(', ' + e for e in exprs)})\n"
               f"    except _error:\n"          # e.g. an unsigned value: the exact path
               f"        _generic({params})\n"
               f"    return True\n")
        exec(src, env)
        return env["pack"]


def _plain(kernel) -> _PlainLaunch:
    pl = kernel._launch_cache.get("plain")
    if pl is None:
        if kernel._h is None:
            kernel.handle   # raises ClosedHandleError
        pl = _PlainLaunch(kernel)
        if fast is not None:     # both or neither: the compiled launch needs its own
            kernel._launch_cache["fast"] = fast.PlainLaunch(kernel._h, tuple(pl.slots),
                                                            _lanes(pl, kernel))
        kernel._launch_cache["plain"] = pl
    return pl


def _lanes(first: _PlainLaunch, kernel):
    """The compiled launch's packs for `kernel`: its plain launch's own
    first, then one more per thread launching it at the same time."""
    made = [first]

    def new_lane():
        if made:
            return made.pop().lane()
        return _PlainLaunch(kernel).lane()
    return new_lane


def _launch_failed(status: int, kernel) -> None:
    """Raise for a failed cuabi_launch, as launch() does."""
    if kernel._h is None:
        kernel.handle
    raise_last(status, "cuabi_launch")


def launch_py(stream, config: LaunchConfig, kernel, *args) -> None:
    """Launch `kernel(*args)` on `stream` (a cuabi Stream, a foreign stream
    or None for the legacy default stream). Arguments are packed in Python
    straight into the kernel's pack; then one call into C. See docs/python.md
    for what each parameter accepts."""
    try:
        pl = kernel._launch_cache.get("plain") or _plain(kernel)
    except AttributeError:
        if hasattr(kernel, "_launch_cache"):
            raise
        raise TypeError(f"launch: kernel must be a cuabi.Kernel, not "
                        f"{type(kernel).__name__}") from None
    try:                         # pl.pack_args(*args), inline: a call less
        same_types = pl.last(*args)
    except TypeError:            # another number of arguments: _build says so
        same_types = False
    if not same_types:           # other argument types than last time
        pl.last = fn = pl.packer(args)
        fn(*args)
    try:
        c = config._c
    except AttributeError:
        raise TypeError(f"launch: config must be a cuabi.LaunchConfig, not "
                        f"{type(config).__name__}") from None
    if stream is None:
        if c.stream is not None:
            c.stream = None
    else:
        if type(stream) is not Stream:
            stream = stream if isinstance(stream, Stream) else Stream.wrap(stream)
        h = stream._h
        if h is None:
            stream.handle   # raises ClosedHandleError
        if c.stream != h:
            c.stream = h
    st = _launch(pl.k, pl.p, config._p)
    if st:
        _launch_failed(st, kernel)


class PreparedLaunch(Handle):
    """A kernel, its arguments and its configuration bound once: calling it
    crosses into C once with one argument. set(*args) changes the arguments.
    `raw_launch()` is the foreign function itself, bound to the handle: it
    returns the status (0 on success) instead of raising, for tight loops."""

    _ctype = "cuabi_prepared"

    def __init__(self, kernel, config: LaunchConfig, stream=None, *args, pack=None):
        if stream is not None and not isinstance(stream, Stream):
            stream = Stream.wrap(stream)
        self._pack = pack if pack is not None else ArgPack.for_kernel(kernel)
        if args:
            self._pack.set(*args)
        self._stream = stream
        Handle.__init__(self, call("cuabi_prepared_create", kernel, self._pack,
                                   C.byref(config._for(stream))))
        self._bind(self._h)

    def _bind(self, h) -> None:
        self._arg = _ptr(h)
        self.raw_launch = (fast.BoundPrepared(h) if fast is not None
                           else partial(_prepared_launch, self._arg))

    def __call__(self) -> None:
        st = _prepared_launch(self._arg)
        if st:
            raise_last(st, "cuabi_prepared_launch")

    launch = __call__

    def set(self, *args) -> "PreparedLaunch":
        self._pack.set(*args)
        return self

    def set_grid(self, grid) -> None:
        lib.cuabi_prepared_set_grid(self, *_dim3(grid))

    def close(self) -> None:
        self._bind(None)
        super().close()


def _arg_class(v):
    """How the compiled packer reads arguments of type(v) (asked once per
    type): (class, item size, address getter) with the classes of
    fast_pack.c. Arrays: their address, by the getter launch() uses; numpy
    scalars: their value, read from the object once its layout is checked
    here; anything else: the Python packer's."""
    t = type(v)
    if is_array_like(v):
        from ._memory import Buffer
        from ._view import View
        cls = (fast.ARG_VIEW if t is View else fast.ARG_BUFFER if t is Buffer
               else fast.ARG_POINTER)
        return cls, 8, _pointer_getter(t)
    dt = getattr(v, "dtype", None)
    if dt is not None and t.__module__ == "numpy" and is_scalar(v) and _scalar_layout_holds(v):
        cls = {"i": fast.ARG_NP_INT, "u": fast.ARG_NP_UINT, "f": fast.ARG_NP_FLOAT,
               "b": fast.ARG_NP_BOOL}.get(dt.kind)
        if cls is not None and dt.itemsize in (1, 2, 4, 8) and dt.isnative:
            return cls, dt.itemsize, None
    return fast.ARG_UNKNOWN, 0, None


_SCALAR_VALUE_OFFSET = object.__basicsize__   # numpy scalars: the value after the header


def _scalar_layout_holds(v) -> bool:
    """A numpy scalar type keeps its value right after the object header
    (numpy's Py<Type>ScalarObject): checked on two values of the type."""
    t = type(v)
    try:
        probes = (t(1), t(0))
        return all(C.string_at(id(p) + _SCALAR_VALUE_OFFSET, p.dtype.itemsize) == p.tobytes()
                   for p in probes + (v,))
    except Exception:
        return False


def prepare(kernel, config: LaunchConfig, stream=None, *args) -> PreparedLaunch:
    return PreparedLaunch(kernel, config, stream, *args)


if fast is not None:
    # The compiled backend: launch() and PreparedLaunch.__call__ in C, with
    # launch_py as the path for everything they leave to Python.
    PreparedLaunch.__call__ = PreparedLaunch.launch = fast.launch_setup(
        Stream, LaunchConfig, PreparedLaunch, launch_py, _launch_failed)
    fast.pack_setup(_arg_class, _SCALAR_VALUE_OFFSET)
    launch = fast.launch
else:
    launch = launch_py
