"""Launching kernels: LaunchConfig, launch(), prepared launches."""
from __future__ import annotations

import ctypes as C

from . import _capi
from ._argpack import ArgPack
from ._core import Stream, _as_device
from ._handle import Handle
from ._lib import call, lib, new_struct, raise_last, raw


def _dim3(v):
    if isinstance(v, int):
        return (v, 1, 1)
    v = tuple(v)
    return v + (1,) * (3 - len(v))


class LaunchConfig:
    """grid, block (ints or up to 3-tuples), cluster, shared_mem (dynamic
    bytes), cooperative. The C struct is built once and reused."""

    __slots__ = ("grid", "block", "cluster", "shared_mem", "cooperative", "_c")

    def __init__(self, grid=1, block=1, cluster=None, shared_mem: int = 0,
                 cooperative: bool = False):
        self.grid, self.block = _dim3(grid), _dim3(block)
        self.cluster = _dim3(cluster) if cluster else (0, 0, 0)
        self.shared_mem, self.cooperative = shared_mem, cooperative
        c = new_struct(_capi.cuabi_launch_config)
        c.grid[:], c.block[:], c.cluster[:] = self.grid, self.block, self.cluster
        c.dynamic_shared_bytes, c.cooperative = shared_mem, int(cooperative)
        self._c = c

    def _for(self, stream):
        c = self._c
        c.stream = None if stream is None else stream.handle
        return c

    def __repr__(self):
        return f"LaunchConfig(grid={self.grid}, block={self.block}, shared_mem={self.shared_mem})"


_launch = raw("cuabi_launch")
_set_blob = raw("cuabi_argpack_set_blob")
_prepared_launch = raw("cuabi_prepared_launch")


def _kernel_pack(kernel):
    cache = kernel.__dict__.setdefault("_launch_cache", {})
    pack = cache.get("pack")
    if pack is None:
        pack = cache["pack"] = ArgPack.for_kernel(kernel)
        cache["args"] = (C.c_void_p(kernel.handle), C.c_void_p(pack.handle))
    return pack, cache["args"]


def launch(stream, config: LaunchConfig, kernel, *args) -> None:
    """Launch `kernel(*args)` on `stream` (a cuabi Stream, a foreign stream
    or None for the legacy default stream). Arguments are packed in Python
    into one blob; see docs/python.md for what each parameter accepts."""
    if stream is not None and not isinstance(stream, Stream):
        stream = Stream.wrap(stream)
    pack, (kh, ph) = _kernel_pack(kernel)
    p = pack._packer
    st = _set_blob(ph, p.pack(*args), C.c_size_t(p.size))
    if st:
        raise_last(st, "cuabi_argpack_set_blob")
    st = _launch(kh, ph, C.byref(config._for(stream)))
    if st:
        raise_last(st, "cuabi_launch")


class PreparedLaunch(Handle):
    """A kernel, its arguments and its configuration bound once: calling it
    crosses into C once with one argument. set(*args) changes the arguments."""

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
        self._arg = C.c_void_p(self._h)

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
        self._arg = C.c_void_p(None)
        super().close()


def prepare(kernel, config: LaunchConfig, stream=None, *args) -> PreparedLaunch:
    return PreparedLaunch(kernel, config, stream, *args)
