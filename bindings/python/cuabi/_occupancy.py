"""Occupancy: per-architecture limits (more as the C module grows)."""
from __future__ import annotations

import ctypes as C

from . import _callbacks, _capi
from ._lib import lib, new_struct, struct_to_dict


def arch_limits(arch: str | int) -> dict:
    """Hardware limits of an architecture ("sm_90", 90, "9.0")."""
    out = new_struct(_capi.cuabi_arch_limits)
    lib.cuabi_arch_limits_get(C.byref(out), str(arch).encode())
    d = struct_to_dict(out)
    d.pop("version", None)
    return d


def known_archs() -> list[int]:
    """Every architecture of the limits table, ascending."""
    archs, out = [], new_struct(_capi.cuabi_arch_limits)
    i = 0
    while True:
        st = lib.cuabi_arch_limits_at.ctypes_function
        try:
            st(C.byref(out), i)
        except Exception:
            return archs
        archs.append(out.arch)
        i += 1


def limiter_name(limiter: int) -> str:
    return lib.cuabi_occupancy_limiter_name(limiter).decode()


def block_smem_callback(fn):
    """A cuabi_block_smem_fn calling the Python `fn(block_size) -> bytes of
    dynamic shared memory`. Keep the returned object alive during the call.
    An exception stops the query (CallbackError chained to it)."""
    if fn is None:
        return None
    if isinstance(fn, int):
        const = fn
        fn = lambda block_size: const  # noqa: E731

    def thunk(block_size, payload):
        try:
            return int(fn(block_size))
        except BaseException as e:
            _callbacks.note_exception(e)
            return C.c_size_t(-1).value  # SIZE_MAX: an impossible request
    return _capi.cuabi_block_smem_fn(thunk)
