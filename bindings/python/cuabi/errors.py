"""Exceptions. Every failed cuabi call raises a CuabiError subclass chosen by
its status; the instance carries the details of cuabi_last_error()."""
from __future__ import annotations

from . import _capi


class CuabiImportError(ImportError):
    """libcuabi could not be found, or does not match this binding."""


class CuabiError(Exception):
    """A cuabi call failed.

    Attributes: status (int), status_name ("CUABI_ERROR_..."), message (the
    library's message, naming the function), log (compiler/linker log or ""),
    cu_result / nvrtc_result / nvjitlink_result (underlying codes or 0)."""

    status = -1
    status_name = "CUABI_ERROR_UNKNOWN"

    def __init__(self, message: str, *, status: int | None = None, log: str = "",
                 cu_result: int = 0, nvrtc_result: int = 0, nvjitlink_result: int = 0):
        if status is not None:
            self.status = status
            self.status_name = _capi.STATUS_NAMES.get(status, f"status {status}")
        self.message = message
        self.log = log
        self.cu_result = cu_result
        self.nvrtc_result = nvrtc_result
        self.nvjitlink_result = nvjitlink_result
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
}


def _class_name(status_name: str) -> str:
    words = status_name.removeprefix("CUABI_ERROR_").split("_")
    special = {"NVRTC": "Nvrtc", "NVJITLINK": "NvJitLink", "IO": "IO", "DLPACK": "DLPack",
               "CUDA": "Cuda", "IPC": "IPC"}
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
