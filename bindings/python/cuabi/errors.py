"""Exceptions. Every failed cuabi call raises a CuabiError subclass chosen by
its status; the instance carries the details of cuabi_last_error()."""
from __future__ import annotations

import operator

from . import _capi


class CuabiImportError(ImportError):
    """libcuabi could not be found, or does not match this binding."""


class CuabiError(Exception):
    """A cuabi call failed.

    Attributes: status (int), status_name ("CUABI_ERROR_..."), message (the
    library's message, naming the function), log (compiler/linker log or ""),
    cu_result / nvrtc_result / nvjitlink_result / nvml_result (underlying codes or 0)."""

    status = -1
    status_name = "CUABI_ERROR_UNKNOWN"

    def __init__(self, message: str, *, status: int | None = None, log: str = "",
                 cu_result: int = 0, nvrtc_result: int = 0, nvjitlink_result: int = 0,
                 nvml_result: int = 0):
        if status is not None:
            self.status = status
            self.status_name = _capi.STATUS_NAMES.get(status, f"status {status}")
        self.message = message
        self.log = log
        self.cu_result = cu_result
        self.nvrtc_result = nvrtc_result
        self.nvjitlink_result = nvjitlink_result
        self.nvml_result = nvml_result
        text = f"{self.status_name}: {message}"
        if log:
            text += "\n--- log ---\n" + log.rstrip()
        super().__init__(text)


class ClosedHandleError(CuabiError, ValueError):
    """The Python object was closed: its handle was already released."""
    status = _capi.CUABI_ERROR_INVALID_HANDLE
    status_name = "CUABI_ERROR_INVALID_HANDLE"


# Extra built-in bases, so callers can catch what Python users expect.
_MIXINS = {
    "CUABI_ERROR_INVALID_ARGUMENT": (ValueError,),
    "CUABI_ERROR_INVALID_VERSION": (ValueError,),
    "CUABI_ERROR_OUT_OF_MEMORY": (MemoryError,),
    "CUABI_ERROR_NOT_SUPPORTED": (NotImplementedError,),
    "CUABI_ERROR_NOT_FOUND": (LookupError,),
    "CUABI_ERROR_IO": (OSError,),
    "CUABI_ERROR_ARGUMENT_MISMATCH": (TypeError,),
    "CUABI_ERROR_DLPACK": (BufferError,),
    "CUABI_ERROR_TENSOR_MAP": (ValueError,),
    "CUABI_ERROR_TIMEOUT": (TimeoutError,),     # cuabi.TimeoutError is a builtins.TimeoutError
}


def _class_name(status_name: str) -> str:
    words = status_name.removeprefix("CUABI_ERROR_").split("_")
    special = {"NVRTC": "Nvrtc", "NVJITLINK": "NvJitLink", "IO": "IO", "DLPACK": "DLPack",
               "CUDA": "Cuda", "IPC": "IPC", "NCCL": "NCCL", "NVML": "NVML"}
    name = "".join(special.get(w, w.capitalize()) for w in words)
    return name if name.endswith("Error") else name + "Error"


#: status value -> exception class (one per status of the API description).
ERRORS: dict[int, type] = {}
for _status, _name in _capi.STATUS_NAMES.items():
    if _status == 0:
        continue
    _cls = type(_class_name(_name), (CuabiError,) + _MIXINS.get(_name, ()),
                {"status": _status, "status_name": _name, "__module__": __name__,
                 "__doc__": f"Raised for {_name}."})
    ERRORS[_status] = _cls
    globals()[_cls.__name__] = _cls
del _status, _name, _cls


def error_class(status: int) -> type:
    return ERRORS.get(status, CuabiError)


# ------------------------------------------------------------ integer arguments
#
# Sizes, counts, offsets, extents, strides, grid and block dimensions,
# alignments, device ordinals: every integer the package hands to a C
# parameter goes through index_arg (or dims_arg), because ctypes converts a
# Python int to a C integer by wrapping it silently (Buffer(2**64) was a
# buffer of 0 bytes, Buffer(-1) one of 2**64 - 1), and int() accepted floats
# (truncated) and strings. The rule, for both backends:
#
#   * an integer: an int or any object with __index__ (numpy integers), not
#     a float, a str, or a bool (True is 1 to Python, but a flag given where
#     a size is meant is a mistake: TypeError);
#   * in the C parameter's range (lo..hi), else InvalidArgumentError, a
#     ValueError (sizes are non-negative: -1 is refused, not 2**64 - 1).
#
# Each error names the argument (and the function, when given).

U64_MAX = (1 << 64) - 1            # size_t, uint64_t, uintptr_t
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
U32_MAX = (1 << 32) - 1            # unsigned int, uint32_t
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
_LIMIT_TEXT = {U64_MAX: "2**64 - 1", I64_MAX: "2**63 - 1", U32_MAX: "2**32 - 1",
               INT_MAX: "2**31 - 1", I64_MIN: "-2**63", INT_MIN: "-2**31"}


def _bad_type(value, name):
    kind = "a bool" if type(value).__name__ in ("bool", "bool_") else type(value).__name__
    return TypeError(f"{name} must be an integer, not {kind}")


def index_arg(value, name: str, lo: int = 0, hi: int = U64_MAX) -> int:
    """`value` as a Python int for an integer parameter of the C API, from
    `lo` to `hi` inclusive (default: a size, 0 .. 2**64 - 1). TypeError for
    anything but an integer (bool included), InvalidArgumentError (a
    ValueError) naming `name` when out of range."""
    if type(value) is not int:
        if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):
            raise _bad_type(value, name)
        try:
            value = operator.index(value)
        except TypeError:
            raise _bad_type(value, name) from None
    if lo <= value <= hi:
        return value
    if value < lo:
        need = "non-negative" if lo == 0 else f"at least {_LIMIT_TEXT.get(lo, lo)}"
    else:
        need = f"at most {_LIMIT_TEXT.get(hi, hi)}"
    raise ERRORS[_capi.CUABI_ERROR_INVALID_ARGUMENT](f"{name} is {value}; it must be {need}")


def dims_arg(values, name: str, lo: int = 0, hi: int = I64_MAX, length: int | None = None,
             max_length: int | None = None) -> tuple:
    """A sequence of integers (a shape, strides, a box, grid dimensions) as
    a tuple, each checked by index_arg (named name[i]); `length` (exactly)
    or `max_length` entries, else InvalidArgumentError naming `name`."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(f"{name} must be a sequence of integers, not {type(values).__name__}")
    n = len(values)
    if length is not None and n != length:
        raise ERRORS[_capi.CUABI_ERROR_INVALID_ARGUMENT](
            f"{name} has {n} entr{'y' if n == 1 else 'ies'}; {length} expected")
    if max_length is not None and n > max_length:
        raise ERRORS[_capi.CUABI_ERROR_INVALID_ARGUMENT](
            f"{name} has {n} entries; at most {max_length}")
    return tuple([index_arg(v, f"{name}[{i}]", lo, hi) for i, v in enumerate(values)])


def bytes_arg(value, name: str) -> bytes:
    """`value` as bytes for a byte-string parameter (an IPC descriptor): any
    object with the buffer protocol (bytes, bytearray, memoryview, a numpy
    uint8 array), never an int (bytes(n) would be n zero bytes: a size taken
    for data) or a str. TypeError naming `name` otherwise."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        raise TypeError(f"{name} must be bytes, not str")
    try:
        with memoryview(value) as m:
            return m.tobytes()
    except TypeError:
        raise TypeError(f"{name} must be bytes, not {type(value).__name__}") from None
