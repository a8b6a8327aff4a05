"""Loading libcuabi and checking that it matches this binding.

`lib` is the ctypes CDLL with every function of the API description bound
(argtypes/restype from the generated _capi.FUNCTIONS); functions returning
cuabi_status raise a CuabiError subclass on failure. `call()` handles output
parameters generically, so most of the hand-written layer is one line per
method. Hot paths fetch raw function pointers with `raw()` instead.
"""
from __future__ import annotations

import ctypes as C
import ctypes.util
import os

from . import _capi
from .errors import CuabiImportError, error_class

STATUS_T = C.c_int


def _candidates():
    env = os.environ.get("CUABI_LIBRARY")
    if env:
        yield env, "CUABI_LIBRARY"
        return
    found = ctypes.util.find_library("cuabi")
    if found:
        yield found, "ctypes.util.find_library('cuabi')"
    yield f"libcuabi.so.{_capi.ABI_VERSION}", "the dynamic loader"
    yield "libcuabi.so", "the dynamic loader"


def load_library() -> tuple[C.CDLL, str]:
    tried = []
    for path, how in _candidates():
        try:
            return C.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({how}): {e}")
    raise CuabiImportError(
        "cuabi: cannot load libcuabi. Set CUABI_LIBRARY to the path of libcuabi.so "
        "or install the library where the dynamic loader finds it. Tried:\n  "
        + "\n  ".join(tried))


def check_library(cdll, path: str, structs=None, functions=None) -> None:
    """Refuse a library whose ABI version, exports or struct layouts differ
    from the description this binding was generated from."""
    structs = _capi.STRUCTS if structs is None else structs
    functions = _capi.FUNCTIONS if functions is None else functions
    missing = [n for n in functions if not hasattr(cdll, n)]
    if missing:
        raise CuabiImportError(
            f"cuabi: {path} lacks {len(missing)} function(s) this binding needs "
            f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); "
            "the library is older than the Python package: install matching versions")
    abi = cdll["cuabi_abi_version"]
    abi.restype, abi.argtypes = C.c_uint, []
    if abi() != _capi.ABI_VERSION:
        raise CuabiImportError(
            f"cuabi: {path} has ABI version {abi()}, this binding was generated for "
            f"ABI {_capi.ABI_VERSION}: install matching versions of libcuabi and the "
            "Python package")
    size = cdll["cuabi_struct_size"]
    size.restype, size.argtypes = STATUS_T, [C.POINTER(C.c_size_t), C.c_char_p]
    offset = cdll["cuabi_struct_field_offset"]
    offset.restype = STATUS_T
    offset.argtypes = [C.POINTER(C.c_size_t), C.c_char_p, C.c_char_p]
    out = C.c_size_t()
    problems = []
    for name, cls in structs.items():
        if size(C.byref(out), name.encode()) != 0:
            problems.append(f"{name}: unknown to the library")
            continue
        if out.value != C.sizeof(cls):
            problems.append(f"{name}: size {out.value} in the library, "
                            f"{C.sizeof(cls)} in the binding")
        for fname, *_ in cls._fields_:
            if offset(C.byref(out), name.encode(), fname.encode()) != 0:
                problems.append(f"{name}.{fname}: unknown to the library")
            elif out.value != getattr(cls, fname).offset:
                problems.append(f"{name}.{fname}: offset {out.value} in the library, "
                                f"{getattr(cls, fname).offset} in the binding")
    if problems:
        raise CuabiImportError(
            f"cuabi: struct layouts of {path} differ from this binding (mismatched "
            "versions or a different platform ABI):\n  " + "\n  ".join(problems))


_cdll, LIBRARY_PATH = load_library()
check_library(_cdll, LIBRARY_PATH)

_last_error = _cdll.cuabi_last_error
_last_error.restype = C.POINTER(_capi.cuabi_error_info)
_last_error.argtypes = []


def _str(b) -> str:
    return b.decode("utf-8", "replace") if b else ""


def raise_last(status: int, where: str = ""):
    """Raise the exception for `status` with the thread's last-error record."""
    info = _last_error().contents
    if info.status == status:
        msg = _str(info.message)
        log = info.log[:info.log_size].decode("utf-8", "replace") if info.log else ""
        codes = dict(cu_result=info.cu_result, nvrtc_result=info.nvrtc_result,
                     nvjitlink_result=info.nvjitlink_result)
    else:  # no record for this status (should not happen): say what we know
        msg, log, codes = f"{where} failed", "", {}
    if where and not msg.startswith(where):
        msg = f"{where}: {msg}"
    err = error_class(status)(msg, status=status, log=log, **codes)
    from ._callbacks import take_exception
    cause = take_exception() if status == _capi.CUABI_ERROR_CALLBACK else None
    raise err from cause


def _errcheck(result, func, args):
    if result:
        raise_last(result, func.__name__)
    return result


def _closed_arg(args):
    from ._handle import Handle
    for a in args:
        if isinstance(a, Handle) and a.closed:
            return a
    return None


def _checked(fn):
    def call_checked(*args):
        try:
            return fn(*args)
        except C.ArgumentError:
            closed = _closed_arg(args)
            if closed is None:
                raise
            from .errors import ClosedHandleError
            raise ClosedHandleError(f"{fn.__name__}: {type(closed).__name__} "
                                    "is closed") from None
    call_checked.__name__ = fn.__name__
    call_checked.ctypes_function = fn
    return call_checked


class _Lib:
    """Every function of the API, bound with its generated signature."""

    def __init__(self, cdll):
        for name, (restype, argtypes, _params) in _capi.FUNCTIONS.items():
            fn = getattr(cdll, name)
            fn.restype = restype
            fn.argtypes = list(argtypes)
            if restype is C.c_int and name not in ("cuabi_status_name", "cuabi_status_message"):
                fn.errcheck = _errcheck
            setattr(self, name, _checked(fn))


lib = _Lib(_cdll)


def raw(name: str, restype=STATUS_T):
    """An unchecked function pointer without argtypes, for hot paths: pass
    ctypes objects (c_void_p, prebuilt arrays) so nothing is converted."""
    fn = _cdll[name]          # a fresh _FuncPtr, independent of lib.<name>
    fn.restype = restype
    return fn


def address(name: str) -> int:
    return C.cast(getattr(_cdll, name), C.c_void_p).value


# ------------------------------------------------------------- generic calls

def _out_storage(ctype_text: str, argtype):
    """Storage for an output parameter, or None when the caller must pass it
    (buffers, arrays with a count)."""
    if not hasattr(argtype, "_type_") or argtype in (C.c_char_p, C.c_void_p):
        return None
    target = argtype._type_
    if isinstance(target, type) and issubclass(target, C.Structure):
        return new_struct(target)
    return target()


def call(name: str, *inputs):
    """Call `name`, passing `inputs` for the parameters that are not pure
    outputs, and return the outputs (one value, a tuple, or None). Handle
    outputs come back as ints; structs as ctypes instances."""
    _restype, argtypes, params = _capi.FUNCTIONS[name]
    args, outs, it = [], [], iter(inputs)
    for (pname, ctext, pdir, _k, _n, _o, count), at in zip(params, argtypes):
        store = _out_storage(ctext, at) if pdir == "out" and not count else None
        if store is None:
            try:
                args.append(next(it))
            except StopIteration:
                raise TypeError(f"{name}: missing argument {pname!r}") from None
        else:
            args.append(C.byref(store))
            outs.append(store)
    rest = list(it)
    if rest:
        raise TypeError(f"{name}: {len(rest)} argument(s) too many")
    getattr(lib, name)(*args)
    vals = [o if isinstance(o, C.Structure) else o.value for o in outs]
    return None if not vals else vals[0] if len(vals) == 1 else tuple(vals)


def new_struct(cls):
    """A struct filled with the library's defaults (`<name>_init`) when it is
    versioned, zeroed otherwise."""
    s = cls()
    if cls._cuabi_version_ is not None:
        getattr(lib, cls.__name__ + "_init")(C.byref(s), cls._cuabi_version_)
    return s


def struct_to_dict(s) -> dict:
    """Plain Python values of a ctypes struct: char arrays -> str, arrays -> tuples."""
    d = {}
    for fname, ftype in s._fields_:
        v = getattr(s, fname)
        if isinstance(v, bytes):                       # char[N] (ctypes strips at NUL)
            v = v.decode("utf-8", "replace")
        elif hasattr(v, "_length_"):
            v = bytes(v) if getattr(v, "_type_", None) is C.c_uint8 else tuple(v)
        elif isinstance(v, C.Structure):
            v = struct_to_dict(v)
        d[fname] = v
    return d


def status_name(status: int) -> str:
    return _str(lib.cuabi_status_name(status))


def status_message(status: int) -> str:
    return _str(lib.cuabi_status_message(status))


# Optional cffi backend for hot calls (ABI mode: no compiler needed).
# CUABI_BACKEND=ctypes forces ctypes (to compare); `backend` says which one
# the hot calls use and `backend_note` why, so benchmarks can print it.
ffi = cffi_lib = None
backend_note = ""
if os.environ.get("CUABI_BACKEND", "").lower() == "ctypes":
    backend_note = "CUABI_BACKEND=ctypes"
else:
    try:
        import cffi as _cffi
    except ImportError as e:  # ctypes always works
        backend_note = f"cffi not importable ({e})"
    else:
        from ._cdef import CDEF as _CDEF
        try:
            ffi = _cffi.FFI()
            ffi.cdef(_CDEF)
            cffi_lib = ffi.dlopen(LIBRARY_PATH)
            backend_note = f"cffi {_cffi.__version__} ABI mode"
        except Exception as e:  # cffi cannot parse/open: fall back to ctypes
            ffi = cffi_lib = None
            backend_note = f"cffi failed: {type(e).__name__}: {e}"
backend = "cffi" if cffi_lib is not None else "ctypes"


def hot(name: str):
    """(function, pointer) for a hot call: the cffi function when cffi is
    there (~0.1 us a call), else an unchecked ctypes pointer (raw()). Pass
    its pointer arguments made by pointer(value) once, up front."""
    if cffi_lib is not None:
        return getattr(cffi_lib, name), _cffi_pointer
    return raw(name), C.c_void_p


def _cffi_pointer(value):
    return ffi.cast("void *", value or 0)
