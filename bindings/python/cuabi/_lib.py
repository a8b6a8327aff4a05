"""Loading libcuabi, checking that it matches this binding, and choosing the
backend of the hot calls.

`lib` gives every function of the API description as a ctypes function
bound with its generated signature (argtypes/restype from _capi.FUNCTIONS),
bound on first use; functions returning cuabi_status raise a CuabiError
subclass on failure. `call()` handles output parameters generically, so most
of the hand-written layer is one line per method.

The hot paths (launch, prepared launches, from_dlpack) run in the compiled
extension cuabi._fast when it is there (`backend == "compiled"`), else in
Python over ctypes (`"ctypes"`); CUABI_BACKEND=ctypes or =compiled forces
one. Both accept the same inputs and raise the same exceptions: the
extension hands whatever it does not handle itself to the Python code.

`hooks` are how a lower module reaches a class of a higher one without
importing it (the package sets them; cuabi/README.md).
"""
from __future__ import annotations

import ctypes as C
import os
from types import SimpleNamespace

from . import _capi
from .errors import ClosedHandleError, CuabiImportError, error_class

STATUS_T = C.c_int
_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("CUABI_LIBRARY")
    if env:
        yield env, "CUABI_LIBRARY"
        return
    # A wheel bundles the library next to the package (docs/python.md).
    bundled = os.path.join(_HERE, f"libcuabi.so.{_capi.ABI_VERSION}")
    if os.path.exists(bundled):
        yield bundled, "the copy bundled with the package"
    yield f"libcuabi.so.{_capi.ABI_VERSION}", "the dynamic loader"
    # Last: find_library runs `ldconfig -p` (tens of milliseconds).
    import ctypes.util        # lazy: import time (only when the loader found nothing)
    found = ctypes.util.find_library("cuabi")
    if found:
        yield found, "ctypes.util.find_library('cuabi')"
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


# ------------------------------------------------------------- the checks

def _missing_message(path, missing) -> str:
    return (f"cuabi: {path} lacks {len(missing)} function(s) this binding needs "
            f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); "
            "the library is older than the Python package: install matching versions")


def _abi_message(path, lib_abi, ours) -> str:
    return (f"cuabi: {path} has ABI version {lib_abi}, this binding was generated for "
            f"ABI {ours}: install matching versions of libcuabi and the Python package")


def _layout_message(path, problems) -> str:
    return (f"cuabi: struct layouts of {path} differ from this binding (mismatched "
            "versions or a different platform ABI):\n  " + "\n  ".join(problems))


def _missing_functions(cdll, functions) -> list:
    """Functions of the description the library lacks. The whole API: one
    call (cuabi_get_api's table is shorter in an older library) instead of
    a dlsym per function."""
    if functions is not None:
        return [n for n in functions if not hasattr(cdll, n)]
    try:
        get_api = cdll["cuabi_get_api"]
    except AttributeError:
        return [n for n in _capi.FUNCTIONS if not hasattr(cdll, n)]
    get_api.restype, get_api.argtypes = STATUS_T, [C.c_uint, C.POINTER(C.c_void_p)]
    table = C.c_void_p()
    if get_api(_capi.API_TABLE_VERSION, C.byref(table)) != 0 or not table.value:
        return [n for n in _capi.FUNCTIONS if not hasattr(cdll, n)]
    # struct cuabi_api { unsigned version; size_t size; functions... }
    have = (C.c_size_t.from_address(table.value + 8).value - 16) // 8
    return list(_capi.TABLE_FUNCTIONS[max(have, 0):])


def check_library(cdll, path: str, structs=None, functions=None) -> None:
    """Refuse a library whose exports, ABI version or struct layouts differ
    from the description this binding was generated from (the ctypes
    backend's check; the compiled one makes the same checks in C)."""
    missing = _missing_functions(cdll, functions)
    if missing:
        raise CuabiImportError(_missing_message(path, missing))
    abi = cdll["cuabi_abi_version"]
    abi.restype, abi.argtypes = C.c_uint, []
    if abi() != _capi.ABI_VERSION:
        raise CuabiImportError(_abi_message(path, abi(), _capi.ABI_VERSION))
    problems = layout_problems(cdll, _capi.STRUCTS if structs is None else structs)
    if problems:
        raise CuabiImportError(_layout_message(path, problems))


def layout_problems(cdll, structs) -> list:
    """Each size or field offset of the ctypes structs `structs` (name ->
    class) that differs from the library's (cuabi_struct_size/_field_offset)."""
    size = cdll["cuabi_struct_size"]
    size.restype, size.argtypes = STATUS_T, [C.POINTER(C.c_size_t), C.c_char_p]
    offset = cdll["cuabi_struct_field_offset"]
    offset.restype = STATUS_T
    offset.argtypes = [C.POINTER(C.c_size_t), C.c_char_p, C.c_char_p]
    out = C.c_size_t()
    ref = C.byref(out)
    problems = []
    for name, cls in structs.items():
        bname = name.encode()
        if size(ref, bname) != 0:
            problems.append(f"{name}: unknown to the library")
            continue
        if out.value != C.sizeof(cls):
            problems.append(f"{name}: size {out.value} in the library, "
                            f"{C.sizeof(cls)} in the binding")
        for fname, *_ in cls._fields_:
            if offset(ref, bname, fname.encode()) != 0:
                problems.append(f"{name}.{fname}: unknown to the library")
            elif out.value != getattr(cls, fname).offset:
                problems.append(f"{name}.{fname}: offset {out.value} in the library, "
                                f"{getattr(cls, fname).offset} in the binding")
    return problems


_cdll, LIBRARY_PATH = load_library()

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
                     nvjitlink_result=info.nvjitlink_result,
                     nvml_result=info.nvml_result if info.version >= 2 else 0)
    else:  # no record for this status (should not happen): say what we know
        msg, log, codes = f"{where} failed", "", {}
    if where and not msg.startswith(where):
        msg = f"{where}: {msg}"
    err = error_class(status)(msg, status=status, log=log, **codes)
    from ._callbacks import take_exception   # lazy: import time (threading, for `import cuabi`)
    cause = take_exception() if status == _capi.CUABI_ERROR_CALLBACK else None
    raise err from cause


def address(name: str) -> int:
    return C.cast(getattr(_cdll, name), C.c_void_p).value


# ------------------------------------------------------------ the backend

def _attach_compiled():
    """cuabi._fast attached to this library, or None with the reason."""
    try:
        from . import _fast      # lazy: optional, and never loaded under CUABI_BACKEND=ctypes
    except ImportError as e:
        return None, f"cuabi._fast not importable ({e})"
    problems = _fast.attach(address("cuabi_get_api"), raise_last)
    if problems:
        raise refusal(problems, LIBRARY_PATH)
    return _fast, f"cuabi._fast ({os.path.basename(_fast.__file__)})"


def refusal(problems, path) -> CuabiImportError:
    """The CuabiImportError for what cuabi._fast.attach() found (the same
    messages as check_library's)."""
    for kind, *detail in problems:
        if kind == "missing":
            return CuabiImportError(_missing_message(path, detail[0]))
        if kind == "abi":
            return CuabiImportError(_abi_message(path, *detail))
        if kind == "table":
            return CuabiImportError(f"cuabi: {path}: {detail[0]}: the library is older "
                                    "than the Python package: install matching versions")
    return CuabiImportError(_layout_message(path, [d for k, d in problems]))


_choice = os.environ.get("CUABI_BACKEND", "").strip().lower()
if _choice not in ("", "auto", "compiled", "ctypes"):
    raise CuabiImportError(
        f"cuabi: CUABI_BACKEND={_choice!r}: use 'compiled' (the extension cuabi._fast), "
        "'ctypes' or leave it unset (the extension when it is there)"
        + (" -- the cffi backend was replaced by cuabi._fast" if _choice == "cffi" else ""))
fast = None
if _choice == "ctypes":
    backend_note = "CUABI_BACKEND=ctypes"
else:
    fast, backend_note = _attach_compiled()
    if fast is None and _choice == "compiled":
        raise CuabiImportError(f"cuabi: CUABI_BACKEND=compiled but {backend_note}")
if fast is None:
    check_library(_cdll, LIBRARY_PATH)
#: "compiled" (cuabi._fast) or "ctypes": what runs the hot calls.
backend = "compiled" if fast is not None else "ctypes"


# ------------------------------------------------------------- handles in use
#
# docs/RELIABILITY.md, "Threat model: threads, finalizers and captures". A
# Python object owning a cuabi handle (cuabi._handle.Handle) counts the C
# calls in flight on its handle in its `_uses` slot (unset: none; an int in
# the compiled backend, a list of one item per call in the ctypes one):
#
#   use(obj) -> h    count one call and return the handle value; a closed
#                    object raises ClosedHandleError (a lazy view makes its C
#                    view first, a graph still capturing raises RuntimeError:
#                    whatever its `cuabi_handle` property raises)
#   done(obj)        the call is over; the last one after a close() runs the
#                    release close() left to it
#   close_handle(obj)   mark closed (new calls raise at once) and release now
#                    when no call is in flight, else leave the release to the
#                    last done(); never blocks, idempotent
#   swap_release(obj, fin) -> old   close, with `fin` as the release to run
#                    (Buffer.free_async); old: the release it replaces (None
#                    if none), False when the object was closed already
#
# The release is the object's `_fin` (a weakref.finalize, or a view's
# _CView): taken out of the slot by whoever runs it, so it runs once.
# Calls through `lib` and `call()` count every Handle among their arguments
# (`counted` holds the classes; cuabi._handle adds each); code passing a
# handle value (structs, arrays, hot paths) holds its objects itself. The
# compiled backend does all four in C (cuabi._fast, atomic under the GIL;
# its launches count their stream and kernel in C); the ctypes backend under
# a lock of its own.

counted: set = set()
_finish = None      # the ctypes backend's (below)

if fast is not None:
    use, done, close_handle, swap_release = (fast.handle_use, fast.handle_done,
                                             fast.handle_close, fast.handle_swap_release)
else:
    # The ctypes backend: no C code touches _uses, so it holds a list, one
    # item per call in flight (append and pop are atomic under the GIL, and
    # in free-threaded builds); only making the list and taking the release
    # need the lock.
    import _thread          # not threading: `import cuabi` stays cheap
    _uses_lock = _thread.RLock()    # reentrant: a finalizer may run inside it

    def _finish(obj):
        # obj is closed and idle: take its release (under the lock) and run it
        # (also the end of a call counted inline: PreparedLaunch.__call__).
        with _uses_lock:
            fin = obj._fin
            obj._fin = None
        if fin is not None:
            try:
                fin()
            except Exception:      # a release never raises (cuabi._handle._release)
                pass

    def _first_use(obj):
        with _uses_lock:
            try:
                obj._uses.append(None)
            except AttributeError:      # never counted before
                obj._uses = [None]

    def use(obj, _again=True):
        try:
            obj._uses.append(None)
        except AttributeError:
            _first_use(obj)
        h = obj._h
        if h is None:
            done(obj)
            if not _again:  # closed meanwhile
                raise ClosedHandleError(f"{type(obj).__name__} is closed")
            obj.cuabi_handle    # raises (closed), or makes the C view of a lazy view
            return use(obj, False)
        return h

    def done(obj):
        u = obj._uses
        u.pop()
        if not u and obj._h is None:
            _finish(obj)

    def close_handle(obj):
        obj._h = None
        if not getattr(obj, "_uses", None):
            _finish(obj)

    def swap_release(obj, fin):
        with _uses_lock:
            if obj._h is None:
                return False
            old = obj._fin
            obj._fin = fin
            obj._h = None
        if not getattr(obj, "_uses", None):
            _finish(obj)
        return old


class holding:
    """`with holding(a, b) as (ha, hb):` -- the handle values of Handle
    objects (None stays None), counted as in use for the block: for code
    that puts handle values into structs and arrays instead of passing the
    objects to a `lib` function."""
    __slots__ = ("objs", "n")

    def __init__(self, *objs):
        self.objs = objs
        self.n = 0

    def __enter__(self):
        hs = []
        try:
            for o in self.objs:
                hs.append(None if o is None else use(o))
                self.n += 1
        except BaseException:
            self.__exit__()
            raise
        return hs

    def __exit__(self, *exc):
        objs, n, self.n = self.objs, self.n, 0
        for o in objs[:n]:
            if o is not None:
                done(o)


# ------------------------------------------------------------- the functions

def _errcheck(result, func, args):
    if result:
        raise_last(result, func.__name__)
    return result


def _closed_arg(args):
    # A closed cuabi._handle.Handle, known by its class's _ctype and its
    # `closed` (_handle is a layer above this module: not imported here).
    for a in args:
        if hasattr(type(a), "_ctype") and getattr(a, "closed", False) is True:
            return a
    return None


def _raise_closed(fn, args):
    closed = _closed_arg(args)
    if closed is None:
        raise
    raise ClosedHandleError(f"{fn.__name__}: {type(closed).__name__} is closed") from None


def _use_for(fn, a):
    try:
        use(a)
    except ClosedHandleError:
        raise ClosedHandleError(f"{fn.__name__}: {type(a).__name__} is closed") from None


def _checked(fn, handle_args=()):
    """fn, raising ClosedHandleError for a closed Handle argument. Every
    Handle among the arguments at `handle_args` (the parameters taking a
    handle or a pointer, which a Handle converts to) is in use until the call
    returns (see "handles in use" above): a close() on another thread
    meanwhile leaves the release to us."""
    if len(handle_args) == 1:           # the common case, kept short
        at = handle_args[0]

        def call_checked(*args):
            a = args[at] if at < len(args) else None
            if type(a) not in counted:
                try:
                    return fn(*args)
                except C.ArgumentError:
                    _raise_closed(fn, args)
            try:
                use(a)
            except ClosedHandleError:
                raise ClosedHandleError(f"{fn.__name__}: {type(a).__name__} "
                                        "is closed") from None
            try:
                return fn(*args)
            except C.ArgumentError:
                _raise_closed(fn, args)
            finally:
                done(a)
    else:
        def call_checked(*args):
            n = len(args)
            held = [a for i in handle_args if i < n and type(a := args[i]) in counted]
            k = 0
            try:
                for a in held:
                    _use_for(fn, a)
                    k += 1
                return fn(*args)
            except C.ArgumentError:
                _raise_closed(fn, args)
            finally:
                for a in held[:k]:
                    done(a)
    call_checked.__name__ = fn.__name__
    call_checked.ctypes_function = fn
    return call_checked


class _Lib:
    """Every function of the API, bound with its generated signature on
    first use (binding all of them at import cost milliseconds)."""

    def __init__(self, cdll):
        self._cdll = cdll

    def __getattr__(self, name):
        try:
            restype, argtypes, _params = _capi.FUNCTIONS[name]
        except KeyError:
            raise AttributeError(f"libcuabi has no function {name!r} in the API "
                                 "description") from None
        fn = self._cdll[name]          # its own _FuncPtr, unlike getattr(cdll, name)
        fn.restype = restype
        fn.argtypes = list(argtypes)
        if restype is C.c_int and name not in ("cuabi_status_name", "cuabi_status_message"):
            fn.errcheck = _errcheck
        bound = _checked(fn, tuple(i for i, t in enumerate(argtypes) if t is C.c_void_p))
        setattr(self, name, bound)
        return bound


lib = _Lib(_cdll)


def raw(name: str, restype=STATUS_T):
    """An unchecked function pointer without argtypes, for hot paths: pass
    ctypes objects (c_void_p, prebuilt arrays) so nothing is converted."""
    fn = _cdll[name]          # a fresh _FuncPtr, independent of lib.<name>
    fn.restype = restype
    return fn


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


def struct_to_namespace(s) -> SimpleNamespace:
    """struct_to_dict(s) without the struct's version field, as attributes
    (kernel resources: Kernel.resources, the offline occupancy's)."""
    d = struct_to_dict(s)
    d.pop("version", None)
    return SimpleNamespace(**d)


def status_name(status: int) -> str:
    return _str(lib.cuabi_status_name(status))


def status_message(status: int) -> str:
    return _str(lib.cuabi_status_message(status))


# ------------------------------------------------------------- upcalls

# Upcalls: the few places where an object of a lower layer hands out (or
# rebuilds) an object of a higher one. The lower module asks `hooks` for the
# higher class instead of importing the higher module, which would close an
# import circle (the layers: cuabi/README.md). The package (cuabi/__init__.py,
# the top layer, which may import any module) sets every hook at import to a
# function that imports the class's module on first use and returns the class.
#
#   hook                   returns                        for
#   capture_class          cuabi._graph._Capture          Stream.capture()
#   graph_builder_class    cuabi._graph.GraphBuilder      Stream.create_graph_builder()
#   view_class             cuabi._view.View               Buffer.view()
#   tensor_map_class       cuabi._tensormap.TensorMapDescriptor
#                                                         View.as_tensor_map()
#   memory_resource_class  cuabi._memory.MemoryResource   cuabi._ipc_pool: a pool
#                                                         mapped, or unpickled
#   buffer_class           cuabi._memory.Buffer           cuabi._ipc_pool: a pool's
#                                                         buffer unpickled
#   green_context_class    cuabi._green.GreenContext      Device.create_context,
#                                                         Stream.green_context
#   device_resources_class cuabi._green.DeviceResources   Device.resources
#   graph_def_module       cuabi._graph_def (the module)  cuabi._graph: the explicit-graph
#                                                         API, out of a capture's import
#   system_device_class    cuabi._system.Device           Device.to_system_device
HOOKS = ("capture_class", "graph_builder_class", "view_class", "tensor_map_class",
         "memory_resource_class", "buffer_class", "green_context_class",
         "device_resources_class", "texture_factories_class", "graph_def_module",
         "system_device_class")


def _hook_unset():
    raise RuntimeError("cuabi._lib.hooks: hook not set (cuabi/__init__.py sets every hook "
                       "when the package is imported)")


# A namespace, not a class of its own: making a class costs ~7 us at import.
hooks = SimpleNamespace(**dict.fromkeys(HOOKS, _hook_unset))


def hot(name: str):
    """(function, pointer) for a hot call of the ctypes backend: an
    unchecked ctypes function, and the maker of its pointer arguments
    (c_void_p) to build once, up front."""
    return raw(name), C.c_void_p
