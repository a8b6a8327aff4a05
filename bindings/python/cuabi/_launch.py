"""Launching kernels: LaunchConfig, launch(), prepared launches."""
from __future__ import annotations

import ctypes as C

from . import _capi
from functools import partial

from ._argpack import ArgPack, Packer
from ._core import Stream, _as_device
from ._handle import Handle
from ._lib import call, hot, lib, new_struct, raise_last


def _dim3(v):
    if isinstance(v, int):
        return (v, 1, 1)
    v = tuple(v)
    return v + (1,) * (3 - len(v))


class LaunchConfig:
    """grid, block (ints or up to 3-tuples), cluster, shared_mem (dynamic
    bytes), cooperative. The C struct is built once and reused. cuda.core's
    keywords shmem_size= and cooperative_launch= are accepted too."""

    __slots__ = ("grid", "block", "cluster", "shared_mem", "cooperative", "_c", "_p")

    def __init__(self, grid=1, block=1, cluster=None, shared_mem: int = 0,
                 cooperative: bool = False, *, shmem_size: int | None = None,
                 cooperative_launch: bool | None = None):
        if shmem_size is not None:
            if shared_mem:
                raise ValueError("LaunchConfig: give shared_mem or shmem_size, not both")
            shared_mem = shmem_size
        if cooperative_launch is not None:
            if cooperative:
                raise ValueError("LaunchConfig: give cooperative or cooperative_launch, not both")
            cooperative = cooperative_launch
        self.grid, self.block = _dim3(grid), _dim3(block)
        self.cluster = _dim3(cluster) if cluster else (0, 0, 0)
        self.shared_mem, self.cooperative = shared_mem, cooperative
        c = new_struct(_capi.cuabi_launch_config)
        c.grid[:], c.block[:], c.cluster[:] = self.grid, self.block, self.cluster
        c.dynamic_shared_bytes, c.cooperative = shared_mem, int(cooperative)
        self._c = c
        self._p = _ptr(C.addressof(c))

    def _for(self, stream):
        c = self._c
        c.stream = None if stream is None else stream.handle
        return c

    @property
    def shmem_size(self) -> int:
        """cuda.core's name of shared_mem."""
        return self.shared_mem

    @property
    def cooperative_launch(self) -> bool:
        """cuda.core's name of cooperative."""
        return self.cooperative

    def __repr__(self):
        return f"LaunchConfig(grid={self.grid}, block={self.block}, shared_mem={self.shared_mem})"


_launch, _ptr = hot("cuabi_launch")
_prepared_launch, _ = hot("cuabi_prepared_launch")

class _PlainLaunch(Packer):
    """Per kernel: one pack made for it (typed slots from its name or PTX,
    cuabi_argpack_create_for_kernel), packed in place
    (cuabi_argpack_blob_pointer) by the Packer's per-argument-types
    functions, so a plain launch is Python packing plus one C call."""

    __slots__ = ("argpack", "k", "p")

    def __init__(self, kernel):
        self.argpack = ArgPack.for_kernel(kernel)
        src = self.argpack._packer
        size = src.size
        mem = (C.c_char * max(size, 1)).from_address(
            call("cuabi_argpack_blob_pointer", self.argpack))
        Packer.__init__(self, src.slots, size, target=mem,
                        type_names=[s.type_name for s in src._slot_objs], what=src._what,
                        vectors={s.index: s.vector for s in src._slot_objs if s.vector})
        self.k, self.p = _ptr(kernel.handle), _ptr(self.argpack.handle)


def _plain(kernel) -> _PlainLaunch:
    pl = kernel._launch_cache.get("plain")
    if pl is None:
        if kernel._h is None:
            kernel.handle   # raises ClosedHandleError
        pl = kernel._launch_cache["plain"] = _PlainLaunch(kernel)
    return pl


def launch(stream, config: LaunchConfig, kernel, *args) -> None:
    """Launch `kernel(*args)` on `stream`: a cuabi Stream, a foreign stream,
    or None for the legacy default stream of the current device (the device
    whose context is current on this thread, else the first the kernel was
    loaded on, else device 0). Arguments are packed in Python straight into
    the kernel's pack, typed as the kernel's name or PTX says (docs/launch.md
    lists what each parameter kind takes); then one call into C."""
    pl = kernel._launch_cache.get("plain") or _plain(kernel)
    pl.pack(*args)
    c = config._c
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
        if kernel._h is None:
            kernel.handle
        raise_last(st, "cuabi_launch")


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
        self._arg = _ptr(self._h)
        self.raw_launch = partial(_prepared_launch, self._arg)

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
        self._arg = _ptr(None)
        self.raw_launch = partial(_prepared_launch, self._arg)
        super().close()


def prepare(kernel, config: LaunchConfig, stream=None, *args) -> PreparedLaunch:
    return PreparedLaunch(kernel, config, stream, *args)
