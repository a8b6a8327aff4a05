"""Compiling, linking and loading code: Program, Linker, ObjectCode, Kernel,
and control of the compile cache."""
from __future__ import annotations

import ctypes as C
import dataclasses
import hashlib
import os
import threading
import warnings
import weakref
from collections import namedtuple
from types import SimpleNamespace

from . import _callbacks, _capi
from ._core import Device, _as_device, runtime_info
from ._handle import Handle
from ._lib import call, holding, lib, new_struct, struct_to_dict, struct_to_namespace
from ._program_cache import ProgramCacheResource
from .errors import INT_MAX, INT_MIN, CuabiError, index_arg
from .typing import CompilerBackendType, PCHStatusType

_CODE = {"none": 0, "c++": 1, "cuda": 1, "cu": 1, "ptx": 2, "cubin": 3, "ltoir": 4,
         "fatbin": 5, "object": 6, "library": 7, "nvvm": 8}
_CODE_NAMES = {1: "c++", 2: "ptx", 3: "cubin", 4: "ltoir", 5: "fatbin", 6: "object",
               7: "library", 8: "nvvm", 0: "none"}


def code_type(t) -> int:
    if t is None:
        return 0
    return _CODE[t.lower()] if isinstance(t, str) else int(t)


def _s(v) -> bytes | None:
    return None if v is None else (v.encode() if isinstance(v, str) else bytes(v))


def _str_array(items, keep):
    items = [_s(x) for x in items]
    arr = (C.c_char_p * max(len(items), 1))(*items)
    keep.append(arr)
    return C.cast(arr, C.POINTER(C.c_char_p)), len(items)


def _arch_one(a):
    """"sm_90" for cuda.core's Device.arch spelling "90" (and "90a"); other
    spellings as given."""
    if isinstance(a, int):
        return f"sm_{a}"
    if isinstance(a, str) and a[:1].isdigit():
        return "sm_" + a
    return a


def _arch_list(arch):
    """A fatbin's architectures as the C API takes them: "sm_80,sm_90"."""
    if isinstance(arch, (list, tuple)):
        return ",".join(_arch_one(a) for a in arch)
    return _arch_one(arch)


def _text(ptr) -> str:
    if isinstance(ptr, int):
        ptr = C.string_at(ptr)
    return ptr.decode("utf-8", "replace") if ptr else ""


# cuda.core's ProgramOptions spellings accepted beside cuabi's own: alias ->
# (cuabi field, how the value becomes that field's value).
def _as_list(v):
    return [] if v is None else [v] if isinstance(v, (str, tuple, int)) else list(v)


def _macros(v):
    out = []
    for m in _as_list(v):
        out.append(m if isinstance(m, str) else f"{m[0]}={m[1]}")
    return out


_ALIASES = {
    "relocatable_device_code": ("relocatable", bool),
    "lineinfo": ("line_info", bool),
    "link_time_optimization": ("lto", bool),
    "use_fast_math": ("fast_math", bool),
    "define_macro": ("defines", _macros),
    "include_path": ("include_paths", _as_list),
    "use_libdevice": ("libdevice", bool),
}
# cuda.core options without a cuabi field: NVRTC command-line options.
_FLAG_OPTIONS = {
    "max_register_count": lambda v: [f"--maxrregcount={int(v)}"],
    "ftz": lambda v: [f"--ftz={'true' if v else 'false'}"],
    "prec_sqrt": lambda v: [f"--prec-sqrt={'true' if v else 'false'}"],
    "prec_div": lambda v: [f"--prec-div={'true' if v else 'false'}"],
    "fma": lambda v: [f"--fmad={'true' if v else 'false'}"],
    "device_code_optimize": lambda v: [f"--dopt={'on' if v else 'off'}"],
    "ptxas_options": lambda v: [f"--ptxas-options={o}" for o in _as_list(v)],
    "undefine_macro": lambda v: [f"--undefine-macro={m}" for m in _as_list(v)],
    "pre_include": lambda v: [f"--pre-include={h}" for h in _as_list(v)],
    "disable_warnings": lambda v: ["--disable-warnings"] if v else [],
    "restrict": lambda v: ["--restrict"] if v else [],
    "extra_device_vectorization": lambda v: ["--extra-device-vectorization"] if v else [],
    "device_int128": lambda v: ["--device-int128"] if v else [],
    # the rest of cuda.core 1.2's ProgramOptions, as NVRTC spells them
    "extensible_whole_program": lambda v: ["--extensible-whole-program"] if v else [],
    "gen_opt_lto": lambda v: ["--gen-opt-lto"] if v else [],
    "no_source_include": lambda v: ["--no-source-include"] if v else [],
    "builtin_move_forward": lambda v: [f"--builtin-move-forward={'true' if v else 'false'}"],
    "builtin_initializer_list": lambda v: [
        f"--builtin-initializer-list={'true' if v else 'false'}"],
    "device_as_default_execution_space": lambda v: (
        ["--device-as-default-execution-space"] if v else []),
    "optimization_info": lambda v: [f"--optimization-info={v}"],
    "no_display_error_number": lambda v: ["--no-display-error-number"] if v else [],
    "diag_error": lambda v: [f"--diag-error={n}" for n in _as_list(v)],
    "diag_suppress": lambda v: [f"--diag-suppress={n}" for n in _as_list(v)],
    "diag_warn": lambda v: [f"--diag-warn={n}" for n in _as_list(v)],
    "brief_diagnostics": lambda v: [f"--brief-diagnostics={'true' if v else 'false'}"],
    "time": lambda v: [f"--time={v}"],
    "split_compile": lambda v: [f"--split-compile={int(v)}"],
    "fdevice_syntax_only": lambda v: ["--fdevice-syntax-only"] if v else [],
    "minimal": lambda v: ["--minimal"] if v else [],
    "fdevice_time_trace": lambda v: [f"--fdevice-time-trace={v}"],
    "device_float128": lambda v: ["--device-float128"] if v else [],
    "frandom_seed": lambda v: [f"--frandom-seed={v}"],
    "ofast_compile": lambda v: [f"--Ofast-compile={v}"],
}
# The NVRTC flags of the PCH options, which the C options struct carries
# (version 3): for make_program_cache_key's refusals only -- the compile
# gets them from the C library (ProgramOptions.as_bytes shows them).
_PCH_FLAGS = {"pch": "--pch", "create_pch": "--create-pch", "use_pch": "--use-pch",
              "pch_dir": "--pch-dir"}
# The same options as libNVVM spells them (NVVM IR programs); NVRTC-only
# ones (--dopt) have no libNVVM counterpart and are dropped.
_NVVM_FLAGS = {
    "--ftz=": "-ftz=", "--prec-sqrt=": "-prec-sqrt=", "--prec-div=": "-prec-div=",
    "--fmad=": "-fma=",
}


def _nvvm_option(opt: str):
    for nvrtc, nvvm in _NVVM_FLAGS.items():
        if opt.startswith(nvrtc):
            return nvvm + ("1" if opt[len(nvrtc):] in ("true", "1") else "0")
    return None if opt.startswith("--dopt=") else opt


@dataclasses.dataclass
class ProgramOptions:
    """Options of Program.compile(); None/False fields keep the library's
    defaults. `arch` like "sm_90" (None: the current device's, or NVRTC's
    default); `output` "cubin", "ptx", "ltoir" or "fatbin" (then `arch` is a
    list, or a comma-separated string, of sm_XX for CUBINs and compute_XX
    for PTX: ["sm_80", "sm_90", "compute_90"]); `defines` a list of
    "NAME=VALUE" or a dict; `headers` a dict of name -> content. NVVM IR
    programs ("nvvm") compile to "ptx" or "ltoir"; `libdevice` (cuda.core:
    use_libdevice) links libdevice's math functions into them.

    cuda.core's names are accepted too (docs/python.md): name,
    relocatable_device_code, lineinfo, link_time_optimization, use_fast_math,
    define_macro (str, (name, value) or a list of them), include_path (str
    or list), max_register_count, ftz, prec_sqrt, prec_div, fma,
    device_code_optimize, ptxas_options, undefine_macro, pre_include,
    disable_warnings, restrict, extra_device_vectorization, device_int128.
    Giving both an alias and cuabi's own field raises ValueError."""
    arch: str | list | None = None
    output: str = "cubin"
    std: str | None = None
    opt_level: int | None = None
    debug: bool = False
    line_info: bool = False
    fast_math: bool = False
    relocatable: bool = False
    lto: bool = False
    defines: list | dict = dataclasses.field(default_factory=list)
    include_paths: list = dataclasses.field(default_factory=list)
    headers: dict = dataclasses.field(default_factory=dict)
    name_expressions: list = dataclasses.field(default_factory=list)
    extra_options: list = dataclasses.field(default_factory=list)
    cache: bool = True
    libdevice: bool = False
    # cuda.core spellings (aliases); None: not given
    name: str | None = None
    relocatable_device_code: bool | None = None
    lineinfo: bool | None = None
    link_time_optimization: bool | None = None
    use_fast_math: bool | None = None
    define_macro: object = None
    include_path: object = None
    max_register_count: int | None = None
    ftz: bool | None = None
    prec_sqrt: bool | None = None
    prec_div: bool | None = None
    fma: bool | None = None
    device_code_optimize: bool | None = None
    ptxas_options: object = None
    undefine_macro: object = None
    pre_include: object = None
    disable_warnings: bool | None = None
    restrict: bool | None = None
    extra_device_vectorization: bool | None = None
    device_int128: bool | None = None
    use_libdevice: bool | None = None
    extensible_whole_program: bool | None = None
    gen_opt_lto: bool | None = None
    no_source_include: bool | None = None
    builtin_move_forward: bool | None = None
    builtin_initializer_list: bool | None = None
    device_as_default_execution_space: bool | None = None
    optimization_info: str | None = None
    no_display_error_number: bool | None = None
    diag_error: object = None
    diag_suppress: object = None
    diag_warn: object = None
    brief_diagnostics: bool | None = None
    time: str | None = None
    split_compile: int | None = None
    fdevice_syntax_only: bool | None = None
    minimal: bool | None = None
    no_cache: bool | None = None
    fdevice_time_trace: str | None = None
    device_float128: bool | None = None
    frandom_seed: str | None = None
    ofast_compile: str | None = None
    pch: bool | None = None
    create_pch: str | None = None
    use_pch: str | None = None
    pch_dir: str | None = None
    pch_verbose: bool | None = None
    pch_messages: bool | None = None
    instantiate_templates_in_pch: bool | None = None
    use_bundled_headers: bool | None = None
    extra_sources: object = None
    numba_debug: bool | None = None

    def __post_init__(self):
        if self.extra_sources is not None:
            _check_extra_sources(self.extra_sources)
        defaults = {f.name: (f.default if f.default is not dataclasses.MISSING
                             else f.default_factory()) for f in dataclasses.fields(self)}
        for alias, (field, conv) in _ALIASES.items():
            v = getattr(self, alias)
            if v is None:
                continue
            if getattr(self, field) != defaults[field]:
                raise ValueError(f"ProgramOptions: give {alias} (cuda.core's name) or {field}, "
                                 "not both")
            setattr(self, field, conv(v))
            setattr(self, alias, None)
        if self.no_cache is not None:       # cuda.core's no_cache: cuabi's cache off
            if self.no_cache:
                self.cache = False
            self.no_cache = None
        extra = []
        for opt, make in _FLAG_OPTIONS.items():
            v = getattr(self, opt)
            if v is not None:
                extra += make(v)
                setattr(self, opt, None)
        if extra:
            self.extra_options = list(self.extra_options) + extra

    def _to_c(self, kind: int = 1):
        keep = []
        o = new_struct(_capi.cuabi_program_options)
        o.arch = _s(_arch_list(self.arch))
        o.output = code_type(self.output)
        o.std = _s(self.std)
        if self.opt_level is not None:
            o.opt_level = self.opt_level
        o.debug, o.line_info = int(self.debug), int(self.line_info)
        o.fast_math, o.relocatable, o.lto = int(self.fast_math), int(self.relocatable), int(self.lto)
        defines = self.defines
        if isinstance(defines, dict):
            defines = [k if v is None else f"{k}={v}" for k, v in defines.items()]
        o.defines, o.num_defines = _str_array(defines, keep)
        o.include_paths, o.num_include_paths = _str_array(self.include_paths, keep)
        o.header_names, o.num_headers = _str_array(list(self.headers), keep)
        o.header_contents, _ = _str_array(list(self.headers.values()), keep)
        o.name_expressions, o.num_name_expressions = _str_array(self.name_expressions, keep)
        extra = list(self.extra_options)
        if kind == _CODE["nvvm"]:
            extra = [x for x in map(_nvvm_option, extra) if x is not None]
        o.extra_options, o.num_extra_options = _str_array(extra, keep)
        o.cache = int(self.cache)
        o.libdevice = int(self.libdevice)
        # version 3: precompiled headers, bundled headers, numba_debug, NVVM modules
        o.pch = int(bool(self.pch))
        o.create_pch, o.use_pch = _s(self.create_pch), _s(self.use_pch)
        o.pch_dir = _s(self.pch_dir)
        for f in ("pch_verbose", "pch_messages", "instantiate_templates_in_pch"):
            v = getattr(self, f)
            setattr(o, f, -1 if v is None else int(bool(v)))
        o.use_bundled_headers = int(bool(self.use_bundled_headers))
        if self.numba_debug and kind == _CODE["ptx"]:
            warnings.warn("ProgramOptions.numba_debug is ignored for code_type='ptx': the "
                          "linker (nvJitLink) cannot honor it", UserWarning, stacklevel=3)
        o.numba_debug = int(bool(self.numba_debug)) and kind != _CODE["ptx"]
        if self.extra_sources:
            names, srcs = [], []
            for name, src in self.extra_sources:
                names.append(name.encode("utf-8"))
                srcs.append(src.encode("utf-8") if isinstance(src, str) else bytes(src))
            keep += [names, srcs]
            o.extra_source_names, o.num_extra_sources = _str_array(names, keep)
            o.extra_sources, _ = _str_array(srcs, keep)
            sizes = (C.c_size_t * len(srcs))(*map(len, srcs))
            keep.append(sizes)
            o.extra_source_sizes = C.cast(sizes, C.POINTER(C.c_size_t))
        return o, keep

    def as_bytes(self, backend, target_type=None) -> list:
        """cuda.core's ProgramOptions.as_bytes: the options as the compiler
        receives them, each a bytes -- rendered by the C library
        (cuabi_program_options_render), the very list a compile passes.
        backend "nvrtc" (CUDA C++) or "nvvm" (NVVM IR); target_type ("ptx",
        "cubin", "ltoir") is the output when given. cuabi's lists start with
        -arch= and, for NVRTC, its built-in pre-include. ValueError for
        another backend, or an option the backend does not take."""
        b = str(backend).lower()
        kind = {"nvrtc": _CODE["c++"], "nvvm": _CODE["nvvm"]}.get(b)
        if kind is None:
            raise ValueError(f"Unknown backend '{backend}'. Must be one of: 'nvrtc', 'nvvm'")
        opts = self
        if target_type is not None:
            opts = dataclasses.replace(self, output=str(target_type))
        elif kind == _CODE["nvvm"] and opts.output == "cubin":
            opts = dataclasses.replace(self, output="ptx")   # libNVVM makes no CUBIN
        o, keep = opts._to_c(kind)
        try:
            return _rendered(lib.cuabi_program_options_render, kind, C.byref(o))
        finally:
            del keep


def _rendered(fn, *args) -> list:
    """The NUL-separated list a cuabi_*_options_render call writes, as bytes
    strings: asked for its size first (CUABI_ERROR_BUFFER_TOO_SMALL tells it)."""
    size = C.c_size_t(0)
    try:
        fn(None, C.byref(size), *args)
    except CuabiError as e:
        if e.status != _capi.CUABI_ERROR_BUFFER_TOO_SMALL:
            raise
    buf = C.create_string_buffer(max(size.value, 1))
    size = C.c_size_t(len(buf))
    fn(buf, C.byref(size), *args)
    return buf.raw[:size.value].split(b"\0")[:-1]


def _check_extra_sources(v):
    """cuda.core's checks of ProgramOptions.extra_sources."""
    if isinstance(v, (str, bytes, bytearray)) or not isinstance(v, (list, tuple)):
        raise TypeError("extra_sources must be a sequence of 2-tuples: "
                        "((name1, source1), (name2, source2), ...)")
    for i, module in enumerate(v):
        if not isinstance(module, tuple) or len(module) != 2:
            raise TypeError(f"Each extra module must be a 2-tuple (name, source), got "
                            f"{type(module).__name__} at index {i}")
        name, src = module
        if not isinstance(name, str):
            raise TypeError(f"Module name at index {i} must be a string, got "
                            f"{type(name).__name__}")
        if not isinstance(src, (str, bytes, bytearray)):
            raise TypeError(f"Module source at index {i} must be str (textual LLVM IR), bytes "
                            f"(textual LLVM IR or bitcode), or bytearray, got "
                            f"{type(src).__name__}")
        if len(src) == 0:
            raise ValueError(f"Module source for '{name}' (index {i}) cannot be empty")


class ObjectCode(Handle):
    """Compiled or loaded device code (CUBIN, PTX, LTO-IR, fatbin, ...)."""

    _ctype = "cuabi_objcode"

    @property
    def handle(self) -> int:
        """cuda.core's: the CUlibrary (context-independent; an int), loading
        the code if needed; valid while this ObjectCode lives. cuabi's own
        handle is cuabi_handle."""
        return call("cuabi_objcode_library", self)

    @classmethod
    def from_bytes(cls, data, code_type=None, name: str = "code") -> "ObjectCode":
        data = _s(data)
        return cls._wrap(call("cuabi_objcode_from_memory", globals()["code_type"](code_type),
                              data, len(data), name.encode()))

    @classmethod
    def from_file(cls, path, code_type=None) -> "ObjectCode":
        return cls._wrap(call("cuabi_objcode_from_file", globals()["code_type"](code_type),
                              os.fsencode(path)))

    @classmethod
    def _from_module(cls, module, kind, name, symbol_mapping):
        """cuda.core's from_cubin/from_ptx/...: bytes, or a path (str or
        PathLike); symbol_mapping maps name expressions to lowered names."""
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        if symbol_mapping is not None and not isinstance(symbol_mapping, dict):
            raise TypeError(f"symbol_mapping must be a dict, not {type(symbol_mapping).__name__}")
        if isinstance(module, (str, os.PathLike)):
            obj = cls.from_file(module, kind)
        else:
            obj = cls.from_bytes(module, kind, name=name or f"<{kind}>")
        obj._symbols = dict(symbol_mapping or {})
        obj._name = name or ""
        return obj

    @classmethod
    def from_cubin(cls, module, *, name: str = "", symbol_mapping=None) -> "ObjectCode":
        return cls._from_module(module, "cubin", name, symbol_mapping)

    @classmethod
    def from_ptx(cls, module, *, name: str = "", symbol_mapping=None) -> "ObjectCode":
        return cls._from_module(module, "ptx", name, symbol_mapping)

    @classmethod
    def from_ltoir(cls, module, *, name: str = "", symbol_mapping=None) -> "ObjectCode":
        return cls._from_module(module, "ltoir", name, symbol_mapping)

    @classmethod
    def from_fatbin(cls, module, *, name: str = "", symbol_mapping=None) -> "ObjectCode":
        return cls._from_module(module, "fatbin", name, symbol_mapping)

    @classmethod
    def from_object(cls, module, *, name: str = "", symbol_mapping=None) -> "ObjectCode":
        """cuda.core's from_object: a relocatable device object (bytes, or a
        path), an input of Linker."""
        return cls._from_module(module, "object", name, symbol_mapping)

    @classmethod
    def from_library(cls, module, *, name: str = "", symbol_mapping=None) -> "ObjectCode":
        """cuda.core's from_library: a device code library (an archive of
        device objects; bytes, or a path), an input of Linker."""
        return cls._from_module(module, "library", name, symbol_mapping)

    def get_module(self, device=None) -> int:
        """cuda.core's ObjectCode.get_module: the CUmodule of this code's
        CUlibrary in the current device's context (cuLibraryGetModule), an
        int, for legacy driver APIs that take a CUmodule; `device` (cuabi's
        extra) another device's. Valid while this ObjectCode lives. Loads
        the code if needed; an object or a library (linked, never loaded)
        raises NotSupportedError."""
        dev = Device() if device is None else _as_device(device)
        return call("cuabi_objcode_module", self, dev)

    @property
    def name(self) -> str:
        """cuda.core's ObjectCode.name: the name it was made with (from_*'s
        name=, ProgramOptions.name / LinkerOptions.name for compiled or linked
        code), "" when none was given."""
        return getattr(self, "_name", "")

    @property
    def symbol_mapping(self) -> dict:
        """cuda.core's ObjectCode.symbol_mapping: a copy of the mapping from
        name expressions to lowered (mangled) names -- the one given to
        from_*, and for code Program.compile made, each name expression
        given to it with NVRTC's lowered name."""
        out = {}
        for expr in getattr(self, "_name_expressions", ()):
            try:
                out[expr] = self.lowered_name(expr)
            except Exception:                          # noqa: BLE001 (not registered)
                pass
        out.update(getattr(self, "_symbols", {}))
        return out

    @property
    def code_type(self) -> str:
        return _CODE_NAMES.get(call("cuabi_objcode_code_type", self), "?")

    @property
    def arch(self) -> int:
        return call("cuabi_objcode_arch", self)

    def __bytes__(self):
        ptr, size = call("cuabi_objcode_bytes", self)
        return C.string_at(ptr, size) if size else b""

    code = property(__bytes__)

    def load(self) -> "ObjectCode":
        lib.cuabi_objcode_load(self)
        return self

    # ---- pickling (issue 23): compiled code travels to Dask and Ray workers
    @property
    def cache_key(self) -> str:
        """The key an ObjectCode travels under: a SHA-256 of its code type
        and bytes. A worker that unpickles the same key again gets the
        ObjectCode it already has (loaded once per process)."""
        key = getattr(self, "_key", None)
        if key is None:
            h = hashlib.sha256()
            h.update(self.code_type.encode() + b"\0")
            h.update(bytes(self))
            key = self._key = h.hexdigest()
        return key

    def __reduce__(self):
        """Pickles as its bytes, code type, kernel name mapping and cache
        key: never as source; nothing compiles on the receiving side."""
        return (_objcode_from_pickle, (bytes(self), self.code_type,
                                       dict(getattr(self, "_symbols", {})), self.cache_key))

    def get_kernel(self, name: str) -> "Kernel":
        """A kernel by entry name or registered name expression (spaces
        inside template arguments do not matter: "t<float,4>" finds
        "t<float, 4>")."""
        name = getattr(self, "_symbols", {}).get(name, name)
        k = Kernel._wrap(call("cuabi_objcode_get_kernel", self, name.encode()))
        _KERNEL_SOURCES.add(self)              # Kernel.from_handle without mod
        return k

    __getitem__ = get_kernel

    @property
    def kernel_names(self) -> list[str]:
        n = call("cuabi_objcode_kernel_count", self)
        return [_text(call("cuabi_objcode_kernel_name", self, i)) for i in range(n)]

    def lowered_name(self, name_expression: str) -> str:
        return _text(call("cuabi_objcode_lowered_name", self, name_expression.encode()))

    def kernel_resources(self, name: str, arch: str | None = None) -> SimpleNamespace:
        """Resources read offline; a fatbin answers per architecture it
        holds (arch="sm_80")."""
        name = getattr(self, "_symbols", {}).get(name, name)
        r = new_struct(_capi.cuabi_kernel_resources)
        lib.cuabi_objcode_kernel_resources(C.byref(r), self, name.encode(), _s(arch))
        return struct_to_namespace(r)

    # ---- fatbins

    @classmethod
    def pack_fatbin(cls, images) -> "ObjectCode":
        """One fatbin of CUBIN and PTX ObjectCodes (nvFatbin, else the
        fatbinary tool)."""
        images = list(images)
        with holding(*images) as hs:        # in use until the fatbin is made
            arr = (C.c_void_p * max(len(images), 1))(*hs)
            return cls._wrap(call("cuabi_fatbin_create", arr, len(images)))

    @property
    def fatbin_archs(self) -> list[int]:
        """The SM architectures of a fatbin's CUBINs (90 for sm_90), ascending."""
        count = C.c_size_t()
        lib.cuabi_fatbin_archs(None, 0, C.byref(count), self)
        arr = (C.c_int * max(count.value, 1))()
        lib.cuabi_fatbin_archs(arr, count.value, C.byref(count), self)
        return list(arr[:count.value])

    @property
    def fatbin_images(self) -> list[tuple[str, int]]:
        """A fatbin's images as (code type, arch): [("cubin", 80), ("ptx", 90)]."""
        n = call("cuabi_fatbin_image_count", self)
        out = []
        for i in range(n):
            t, a = call("cuabi_fatbin_image_info", self, i)
            out.append((_CODE_NAMES.get(t, "?"), a))
        return out

    @property
    def fatbin_packer(self) -> str:
        """"nvfatbin" or "fatbinary" for a fatbin cuabi made, else ""."""
        return _text(call("cuabi_fatbin_packer", self))

    def extract(self, arch: str) -> "ObjectCode":
        """One image of a fatbin: "sm_90" its CUBIN, "compute_90" its PTX."""
        obj = ObjectCode._wrap(call("cuabi_fatbin_extract", self, arch.encode()))
        obj._symbols = dict(getattr(self, "_symbols", {}))
        return obj


# ObjectCodes a kernel was taken from (Kernel.from_handle without mod looks there).
_KERNEL_SOURCES: "weakref.WeakSet[ObjectCode]" = weakref.WeakSet()

ParamInfo = namedtuple("ParamInfo", "offset size")
ParamType = namedtuple("ParamType", "kind size offset source type_name")
_SOURCES = {0: "unknown", 1: "name", 2: "ptx"}


def _attribute(index, kind=int, doc=""):
    def get(self):
        return kind(self._kernel.attribute(index, self._device))
    return property(get, doc=doc)


class KernelAttributes:
    """A kernel's CUfunction attributes on one device, read from the driver
    at each access (cuda.core's KernelAttributes names)."""

    __slots__ = ("_kernel", "_device")

    def __init__(self, kernel, device):
        self._kernel, self._device = kernel, device

    def __getitem__(self, device) -> "KernelAttributes":
        return KernelAttributes(self._kernel, device)

    max_threads_per_block = _attribute(0)
    shared_size_bytes = _attribute(1)
    const_size_bytes = _attribute(2)
    local_size_bytes = _attribute(3)
    num_regs = _attribute(4)
    ptx_version = _attribute(5)
    binary_version = _attribute(6)
    cache_mode_ca = _attribute(7, bool)
    max_dynamic_shared_size_bytes = _attribute(8)
    preferred_shared_memory_carveout = _attribute(9)
    cluster_size_must_be_set = _attribute(10, bool)
    required_cluster_width = _attribute(11)
    required_cluster_height = _attribute(12)
    required_cluster_depth = _attribute(13)
    non_portable_cluster_size_allowed = _attribute(14, bool)
    cluster_scheduling_policy_preference = _attribute(15)


class Kernel(Handle):
    """One kernel of an ObjectCode (which it keeps alive)."""

    _ctype = "cuabi_kernel"

    @property
    def handle(self) -> int:
        """cuda.core's: the CUkernel (an int; the same as raw), loading the
        code if needed. cuabi's own handle is cuabi_handle."""
        return call("cuabi_kernel_raw", self)

    def __reduce__(self):
        """Pickles as its ObjectCode and its name: the receiving process
        finds the kernel again in its own context (its device, its load)."""
        return (_kernel_from_pickle, (self.objcode, self.name))

    @classmethod
    def _wrap(cls, value):
        obj = super()._wrap(value)
        obj._params = None
        obj._launch_cache = {}
        return obj

    @property
    def name(self) -> str:
        return _text(call("cuabi_kernel_name", self))

    def __repr__(self):
        return f"<cuabi.Kernel {self.name if not self.closed else 'closed'}>"

    @property
    def objcode(self) -> ObjectCode:
        return ObjectCode._borrowed_of("cuabi_kernel_objcode", self)

    def attribute(self, attribute: int, device=None) -> int:
        return call("cuabi_kernel_attribute", self, _as_device(device), int(attribute))

    def set_attribute(self, attribute: int, value: int, device=None) -> None:
        lib.cuabi_kernel_set_attribute(self, _as_device(device), int(attribute),
                                       index_arg(value, "set_attribute: value", INT_MIN, INT_MAX))

    @property
    def param_info(self) -> list[tuple[int, int]]:
        """(offset, size) of each parameter (from the driver or the CUBIN)."""
        if self._params is None:
            n = call("cuabi_kernel_param_count", self)
            self._params = [call("cuabi_kernel_param_info", self, i) for i in range(n)]
        return self._params

    @property
    def num_arguments(self) -> int:
        """Number of parameters (cuda.core's name)."""
        return len(self.param_info)

    @property
    def arguments_info(self) -> list["ParamInfo"]:
        """ParamInfo(offset, size) of each parameter (cuda.core's name)."""
        return [ParamInfo(o, s) for o, s in self.param_info]

    @property
    def param_types(self) -> list["ParamType"]:
        """What is known of each parameter's type: ParamType(kind, size,
        offset, source, type_name). kind is the argument-pack slot kind
        ("i32", "f32", "ptr", "struct" for float4, "integer"/"intptr" from
        PTX, "raw" when unknown); source "name" (the C++ mangled name),
        "ptx" or "unknown"; type_name as the source spells it."""
        from ._argpack import _KIND_NAMES, kernel_param_types   # lazy: import time
        return [ParamType(_KIND_NAMES.get(k, "?"), size, off, _SOURCES.get(src, "?"), name)
                for k, size, off, src, name in kernel_param_types(self)]

    @property
    def signature(self) -> str:
        """The parameter types joined with ", " ("?" where unknown)."""
        return _text(call("cuabi_kernel_signature", self))

    @property
    def attributes(self) -> "KernelAttributes":
        """The kernel's attributes on device 0 (cuda.core's names);
        kernel.attributes[device] for another device."""
        return KernelAttributes(self, None)

    @property
    def occupancy(self) -> "KernelOccupancy":
        """Live occupancy queries on device 0 (cuda.core's
        KernelOccupancy methods, plus report()); kernel.occupancy[device]
        or kernel.occupancy_on(device) for another device."""
        from ._occupancy import KernelOccupancy      # lazy: import time
        return KernelOccupancy(self)

    def occupancy_on(self, device) -> "KernelOccupancy":
        """Live occupancy queries on `device` (a Device or an ordinal)."""
        from ._occupancy import KernelOccupancy      # lazy: import time
        return KernelOccupancy(self, device)

    def occupancy_for(self, arch, sm_count=None, max_dynamic_shared=None,
                      carveout=None) -> "OfflineOccupancy":
        """The same queries answered offline for architecture `arch`
        ("sm_90", 90, ...) from the kernel's resources, with no GPU.
        sm_count: SMs of the GPU (min_grid_size, cluster estimates; default
        the architecture's example GPU); max_dynamic_shared: the kernel's
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (default 48 KiB less
        its static shared memory); carveout: preferred shared-memory
        carveout in percent."""
        from ._occupancy import OfflineOccupancy     # lazy: import time
        return OfflineOccupancy(self, arch, sm_count, max_dynamic_shared, carveout)

    @property
    def resources(self) -> SimpleNamespace:
        r = new_struct(_capi.cuabi_kernel_resources)
        lib.cuabi_kernel_get_resources(C.byref(r), self)
        return struct_to_namespace(r)

    def function(self, device=None) -> int:
        """The CUfunction in the device's primary context."""
        return call("cuabi_kernel_function", self, _as_device(device))

    @property
    def raw(self) -> int:
        return call("cuabi_kernel_raw", self)

    @staticmethod
    def from_handle(handle, mod: "ObjectCode | None" = None) -> "Kernel":
        """cuda.core's Kernel.from_handle: the Kernel whose CUkernel is
        `handle` (an int, or an object int() takes; cuabi's Kernel.handle /
        cuabi_handle is found too). cuabi's kernels belong to an ObjectCode:
        with `mod`, its kernels are searched; without, those of every
        ObjectCode of this process a kernel was taken from. A CUkernel of
        code cuabi did not load is ValueError (load it with
        ObjectCode.from_cubin and pass it as mod)."""
        if isinstance(handle, bool):
            raise TypeError("handle must be a CUkernel (an int), not a bool")
        try:
            value = int(handle)
        except (TypeError, ValueError):
            raise TypeError(f"handle must be a CUkernel (an int), not "
                            f"{type(handle).__name__}") from None
        if mod is not None and not isinstance(mod, ObjectCode):
            raise TypeError(f"mod must be an ObjectCode, not {type(mod).__name__}")
        try:                                        # cuabi's own handle (Kernel.handle)?
            k = Kernel._borrowed(value) if 0 < value < 1 << 64 else None
        except CuabiError:                          # no: the library refuses other values
            k = None
        if k is not None and (mod is None or k.objcode.cuabi_handle == mod.cuabi_handle):
            return k
        codes = [mod] if mod is not None else list(_KERNEL_SOURCES)
        for code in codes:
            if code.closed:
                continue
            for name in code.kernel_names:
                k = code.get_kernel(name)
                if value in (k.raw, k.cuabi_handle):
                    return k
                k.close()
        where = "in mod" if mod is not None else "among the kernels of this process's ObjectCodes"
        raise ValueError(f"Kernel.from_handle: no kernel with handle {value:#x} {where} (cuabi "
                         "knows the kernels of code it loaded: pass its ObjectCode as mod)")


class Program(Handle):
    """Source code to compile: Program(source, code_type="c++", name), or as
    cuda.core writes it, Program(code, code_type, options=ProgramOptions(...))
    (the options, and their name, become the defaults of compile())."""

    _ctype = "cuabi_program"

    def __init__(self, source, code_type="c++", name=None, options=None):
        if isinstance(name, (ProgramOptions, dict)):   # cuda.core: the third is options
            if options is not None:
                raise TypeError("Program: options given twice")
            name, options = None, name
        if isinstance(options, dict):              # cuda.core takes a dict of its fields
            options = ProgramOptions(**options)
        if options is not None and not isinstance(options, ProgramOptions):
            raise TypeError(f"Program: options must be a ProgramOptions, not "
                            f"{type(options).__name__}")
        kind = globals()["code_type"](code_type)
        if name is None:  # NVVM: the library names text "program.ll", bitcode "program.bc"
            name = (options.name if options is not None and options.name else
                    None if kind == _CODE["nvvm"] else
                    "program.ptx" if kind == 2 else "program.cu")
        src = _s(source)
        Handle.__init__(self, call("cuabi_program_create", kind, src, len(src), _s(name)))
        self._options = options
        self._kind = kind
        self._source = src
        self._name = name

    def compile(self, target_type=None, name_expressions=None, logs=None, *,
                options: ProgramOptions | None = None, cache=None, **kw) -> ObjectCode:
        """Compile (or fetch from the cache). Keywords are ProgramOptions
        fields, e.g. compile(arch="sm_90", name_expressions=["k<float>"]).
        cuda.core's form works too: compile("cubin", name_expressions=[...],
        logs=sys.stderr) — target_type is the output ("cubin", "ptx",
        "ltoir", "fatbin": compile("fatbin", arch=["sm_80", "sm_90"]); an NVVM
        IR program's default is "ptx"), logs an object with write() that gets
        the compile log.
        A compile error raises CompileError whose .log holds NVRTC's messages.
        cache (cuda.core's): a ProgramCacheResource (cuabi.utils) looked up
        under make_program_cache_key(...) of this program, its options and
        target: a hit returns a new ObjectCode of the stored bytes, compiling
        nothing (logs gets nothing); a miss compiles and stores the bytes.
        With cache, name_expressions raise ValueError (the mapping is not
        stored), as do options make_program_cache_key refuses. cache=True or
        False is cuabi's ProgramOptions.cache (the C compile cache on or off),
        as before."""
        if isinstance(cache, bool):     # cuabi's ProgramOptions.cache (the C cache) as before
            kw["cache"], cache = cache, None
        if isinstance(target_type, ProgramOptions):  # compile(options) as before
            if options is not None:
                raise TypeError("compile: options given twice")
            options, target_type = target_type, None
        if target_type is not None:
            if not isinstance(target_type, str):
                raise TypeError(f"compile: target_type must be \"cubin\", \"ptx\", "
                                f"\"ltoir\" or \"fatbin\", not {type(target_type).__name__}")
            if "output" in kw:
                raise TypeError("compile: target_type and output= both given")
            kw["output"] = target_type
        if name_expressions is not None:
            kw["name_expressions"] = list(name_expressions)
        base = options if options is not None else self._options
        fields = {f.name for f in dataclasses.fields(ProgramOptions)}
        unknown = sorted(set(kw) - fields)
        if unknown:
            raise TypeError(f"compile: unknown option{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(unknown)} (see ProgramOptions)")
        if self._kind == _CODE["nvvm"] and "output" not in kw and (
                base is None or base.output == "cubin"):
            kw["output"] = "ptx"  # libNVVM makes PTX or LTO-IR, never a CUBIN
        options = ProgramOptions(**kw) if base is None else dataclasses.replace(base, **kw)
        if cache is not None and not isinstance(cache, bool):
            return self._compile_cached(options, cache, logs)
        return self._compile(options, logs)

    def _compile(self, options: ProgramOptions, logs) -> ObjectCode:
        done = getattr(self, "_compiled", None)
        key = repr(options)
        if done is not None and key in done:      # compiled where it was pickled
            return done[key]
        opts, keep = options._to_c(self._kind)
        try:
            out = call("cuabi_program_compile", self, C.byref(opts))
        finally:
            del keep
            if logs is not None:
                logs.write(self.log)
        code = ObjectCode._wrap(out)
        code._name = options.name or "default_program"      # cuda.core's ProgramOptions.name
        if options.name_expressions:
            code._name_expressions = tuple(options.name_expressions)
        if done is None:
            done = self._compiled = {}
        done[key] = code
        return code

    def _compile_cached(self, options: ProgramOptions, cache, logs) -> ObjectCode:
        """compile(cache=...): cuda.core's Program.compile with a cache."""
        if not isinstance(cache, ProgramCacheResource):
            raise TypeError(f"compile: cache must be a ProgramCacheResource (cuabi.utils), not "
                            f"{type(cache).__name__}")
        if options.name_expressions:
            raise ValueError("compile: name_expressions with cache= is refused: the cache stores "
                             "the code, not the name-expression mapping, so a hit could not "
                             "answer get_kernel(name_expression); compile without cache=, or "
                             "key the cache by hand (make_program_cache_key)")
        if not options.arch:     # the key names the architecture the compile uses
            options = dataclasses.replace(options, arch=_default_arch())
        kind = _CODE_NAMES.get(self._kind, "?")
        key = _cache_key(self._source, kind, options, options.output, (), None, self._name)
        data = cache.get(key)
        if data is not None:
            try:
                return ObjectCode.from_bytes(data, options.output,
                                             name=self._name or f"<{options.output}>")
            except CuabiError:
                pass            # bytes the library refuses: a miss, compiled and stored again
        code = self._compile(options, logs)
        cache[key] = code
        return code

    def __reduce__(self):
        """Pickles as its source, code type, name and options, with every
        ObjectCode compiled from it so far (by the options that made it):
        compile() on the receiving side with those options returns the
        compiled code, never compiling the source again."""
        src = getattr(self, "_source", None)
        if src is None:
            raise TypeError("this Program was made before pickling was possible")
        return (_program_from_pickle, (src, self._kind, self._name, self._options,
                                       dict(getattr(self, "_compiled", None) or {})))

    @property
    def backend(self) -> "CompilerBackendType":
        """cuda.core's Program.backend: the compiler of the program's code
        type -- NVRTC for C++, nvJitLink for PTX, NVVM (libNVVM) for NVVM IR
        (a cuabi.typing.CompilerBackendType, a str)."""
        return {_CODE["nvvm"]: CompilerBackendType.NVVM,
                _CODE["ptx"]: CompilerBackendType.NVJITLINK}.get(self._kind,
                                                                CompilerBackendType.NVRTC)

    @property
    def log(self) -> str:
        return _text(call("cuabi_program_log", self))

    def lowered_name(self, name_expression: str) -> str:
        return _text(call("cuabi_program_lowered_name", self, name_expression.encode()))

    @property
    def cache_hit(self) -> int:
        """0 compiled, 1 in-memory cache, 2 on-disk cache (last compile)."""
        return call("cuabi_program_cache_hit", self)

    @property
    def handle(self) -> int:
        """cuda.core's Program.handle: the compiler's own program, as an int
        (cuda.core: int(Program.handle)) -- the nvrtcProgram of a "c++"
        program, the nvvmProgram of an "nvvm" one, and for "ptx" the
        nvJitLinkHandle of a Linker holding the PTX, as cuda.core's PTX
        programs have. Before any compile it is one made from the source;
        from the first ask on, each compile that runs the compiler keeps its
        own, so the handle is valid until the next such compile or close()
        (a cache hit keeps the last one). cuabi_handle is the cuabi handle."""
        if self._kind == _CODE["ptx"]:
            lk = getattr(self, "_ptx_linker", None)
            if lk is None or lk.is_closed:
                lk = self._ptx_linker = Linker(
                    ObjectCode.from_bytes(self._source, "ptx", name=self._name or "program.ptx"),
                    arch=_arch_list((self._options.arch if self._options else None)) or None,
                    cache=False)
            return lk.handle
        return call("cuabi_program_backend_handle", self) or 0

    @property
    def pch_status(self):
        """cuda.core's Program.pch_status: what became of the precompiled
        header the last compile was asked to create (ProgramOptions
        create_pch or pch) -- a cuabi.typing.PCHStatusType ("created",
        "not_attempted", "failed"), or None when none was asked for, before
        any compile, for PTX and NVVM IR programs, or with an NVRTC older
        than 12.8."""
        st = call("cuabi_program_pch_status", self)
        return {1: PCHStatusType.CREATED, 2: PCHStatusType.NOT_ATTEMPTED,
                3: PCHStatusType.FAILED}.get(int(st))


# ---- cuda.core.utils.make_program_cache_key (issue 24)

# Bumped when what a key is made of changes: old entries are then never hit.
_KEY_SCHEMA = b"cuabi-program-cache-1"
_KEY_TARGETS = {"c++": ("ptx", "cubin", "ltoir"), "ptx": ("cubin", "ptx"),
                "nvvm": ("ptx", "ltoir")}
# The library each code type is compiled by (runtime_info's prefix).
_KEY_COMPILER = {"c++": "nvrtc", "ptx": "nvjitlink", "nvvm": "nvvm"}
# ProgramOptions fields that are not compile inputs (or are keyed apart).
_KEY_SKIP = {"output", "cache", "name_expressions"}
# NVRTC flags whose files the key cannot see (the caller hashes them into
# extra_digest), and flags whose effect is a file a hit would not write.
_EXTERNAL_FLAGS = {"--pre-include", "-include", "--include-path", "--pch", "-pch",
                   "--use-pch", "-use-pch", "--pch-dir", "-pch-dir"}
_SIDE_EFFECT_FLAGS = {"--create-pch", "-create-pch", "--time", "-time",
                      "--fdevice-time-trace", "-fdevice-time-trace"}


# compiler -> (cuabi's version, label, the compiler's version), once it loaded
_KEY_PROBES: dict = {}


def _default_arch() -> str:
    """The architecture a compile without one uses: the current device's,
    else sm_90 (as the library chooses: src/compile/program.c)."""
    try:
        return Device().sm_arch
    except Exception:       # no driver, no GPU: the library's default
        return "sm_90"


def _flag(opt) -> str:
    opt = str(opt)
    return "-I" if opt.startswith("-I") else opt.split("=", 1)[0]


def _key_options(options: ProgramOptions, kind: str) -> list:
    """The options as the compile sees them, one (field, value) a field."""
    out = []
    for f in dataclasses.fields(options):
        if f.name in _KEY_SKIP:
            continue
        v = getattr(options, f.name)
        if f.name == "arch":
            v = _arch_list(v)
        elif f.name == "defines" and isinstance(v, dict):
            v = [k if x is None else f"{k}={x}" for k, x in v.items()]
        elif f.name == "headers":
            v = sorted((str(k), str(x)) for k, x in dict(v).items())
        elif f.name == "extra_options":
            v = [str(x) for x in v]
            if kind == "nvvm":
                v = [x for x in map(_nvvm_option, v) if x is not None]
        elif isinstance(v, (list, tuple)):
            v = list(v)
        out.append((f.name, v))
    return out


def _cache_key(code: bytes, kind: str, options: ProgramOptions, target: str, names,
               extra_digest, name) -> bytes:
    if kind not in _KEY_TARGETS:
        raise ValueError(f"code_type={kind!r} is not supported by the program cache "
                         f"(must be 'c++', 'nvvm' or 'ptx')")
    if not isinstance(target, str) or target.lower() not in _KEY_TARGETS[kind]:
        if isinstance(target, str) and target.lower() in ("ptx", "cubin", "ltoir"):
            raise ValueError(f"target_type={target!r} is not valid for code_type={kind!r} "
                             f"(supported: {sorted(_KEY_TARGETS[kind])})")
        raise ValueError(f"target_type={target!r} is not supported by the program cache "
                         f"(must be 'cubin', 'ltoir' or 'ptx')")
    target = target.lower()
    flags = [_flag(x) for x in options.extra_options] + [
        f for k, f in _PCH_FLAGS.items() if getattr(options, k)]
    if kind == "c++":
        side = sorted({f for f in flags if f in _SIDE_EFFECT_FLAGS})
        if side:
            raise ValueError(f"make_program_cache_key() refuses options with compile-time side "
                             f"effects ({', '.join(side)}): a cache hit skips the compile, so "
                             f"their files would not be written")
        if extra_digest is None:
            ext = (["include_path"] if options.include_paths else []) + sorted(
                {f for f in flags if f in _EXTERNAL_FLAGS or f == "-I"})
            if ext:
                raise ValueError(f"make_program_cache_key() refuses options that read files "
                                 f"the key cannot see ({', '.join(ext)}) without an "
                                 f"extra_digest: hash the headers/PCH the compile reads and "
                                 f"pass extra_digest=...")
            if isinstance(name, str) and ("/" in name or "\\" in name):
                raise ValueError(f"make_program_cache_key() refuses name={name!r} (a source "
                                 f"name with a directory: NVRTC finds quoted #includes there) "
                                 f"without an extra_digest")
    if kind == "nvvm" and options.libdevice and extra_digest is None:
        raise ValueError("make_program_cache_key() refuses an NVVM key with use_libdevice=True "
                         "and no extra_digest: the libdevice linked in can change under a "
                         "cached entry; pass an extra_digest of the libdevice file")
    h = hashlib.sha256()

    def put(label: str, payload: bytes):
        h.update(label.encode("ascii") + b"\0" + len(payload).to_bytes(8, "big"))
        h.update(payload)

    lib_name = _KEY_COMPILER[kind]
    probe = _KEY_PROBES.get(lib_name)
    if probe is None:
        info = runtime_info()
        if info.get(f"{lib_name}_status", 1) == 0:
            probe = (str(info.get("library_version", "")).encode(), lib_name,
                     str(info.get(f"{lib_name}_version", 0)).encode())
            _KEY_PROBES[lib_name] = probe   # a loaded library stays: asked once
        else:                # a stable key for a broken setup, never a working one's
            probe = (str(info.get("library_version", "")).encode(), f"{lib_name}_probe_failed",
                     str(info.get(f"{lib_name}_status")).encode())
    put("schema", _KEY_SCHEMA)
    put("cuabi", probe[0])
    put(probe[1], probe[2])
    put("code_type", kind.encode())
    put("target_type", target.encode())
    put("code", code)
    opts = _key_options(options, kind)
    put("option_count", str(len(opts)).encode())
    for field, value in opts:
        put("option", f"{field}={value!r}".encode())
    if kind == "c++":
        put("names_count", str(len(names)).encode())
        for n in names:
            put("name", n)
    if name is not None:
        put("name_of_source", str(name).encode())
    if extra_digest is not None:
        put("extra_digest", bytes(extra_digest))
    return h.digest()


def make_program_cache_key(*, code, code_type: str, options, target_type: str,
                           name_expressions=(), extra_digest: bytes | None = None) -> bytes:
    """A key (32 bytes, SHA-256) for a program cache, from what a compile
    reads (cuda.core.utils.make_program_cache_key): the code (str; bytes
    too for "nvvm"), code_type ("c++", "ptx", "nvvm"), options (a
    ProgramOptions, or a dict of its fields; the architecture None is the
    current device's, as a compile resolves it), target_type ("ptx",
    "cubin", "ltoir", as code_type allows), name_expressions (order does not
    matter; "k" and b"k" differ; bytearray is refused) and extra_digest
    (bytes the caller mixes in). The compiler's version, cuabi's version and
    the key's schema are in it too, so an upgrade misses.

    ValueError for options whose files the key cannot see (include paths,
    pre-includes, PCH use, a name with a directory; NVVM's libdevice)
    without an extra_digest, and for options with compile-time side effects
    (create_pch, time, fdevice_time_trace)."""
    if isinstance(options, dict):
        options = ProgramOptions(**options)
    if not isinstance(options, ProgramOptions):
        raise TypeError(f"options must be a ProgramOptions, not {type(options).__name__}")
    kind = code_type.lower() if isinstance(code_type, str) else code_type
    if kind not in _KEY_TARGETS:
        raise ValueError(f"code_type={code_type!r} is not supported by the program cache "
                         f"(must be 'c++', 'nvvm' or 'ptx')")
    if isinstance(code, str):
        code = code.encode("utf-8")
    elif isinstance(code, (bytes, bytearray)):
        if kind != "nvvm":
            raise TypeError(f"code must be str for code_type={kind!r}; bytes/bytearray are "
                            f"only accepted for code_type='nvvm'")
        code = bytes(code)
    else:
        raise TypeError(f"code must be str or bytes, got {type(code).__name__}")
    if extra_digest is not None and not isinstance(extra_digest, (bytes, bytearray, memoryview)):
        raise TypeError(f"extra_digest must be bytes or None, not {type(extra_digest).__name__}")
    tags = []
    for n in name_expressions:
        if isinstance(n, bytes):
            tags.append(b"b:" + n)
        elif isinstance(n, str):
            tags.append(b"s:" + n.encode("utf-8"))
        else:
            raise TypeError(f"name_expressions elements must be str or bytes; got "
                            f"{type(n).__name__}")
    if not options.arch:
        options = dataclasses.replace(options, arch=_default_arch())
    # the name a Program(code, code_type, options=options) compiles under
    name = options.name or {"c++": "program.cu", "ptx": "program.ptx"}.get(kind)
    return _cache_key(code, kind, options, target_type, sorted(tags), extra_digest, name)


# ---- unpickling (issue 23)

# cache key -> ObjectCode of this process: the same code unpickled again
# (every task of a Dask graph, every Ray call) is loaded once.
_UNPICKLED: "weakref.WeakValueDictionary[str, ObjectCode]" = weakref.WeakValueDictionary()
_UNPICKLED_LOCK = threading.Lock()


def _objcode_from_pickle(data, kind, symbols, key):
    with _UNPICKLED_LOCK:
        obj = _UNPICKLED.get(key)
        if obj is not None and not obj.closed:
            return obj
        obj = ObjectCode.from_bytes(data, kind, name=f"<pickled {kind}>")
        if symbols:
            obj._symbols = dict(symbols)
        obj._key = key
        _UNPICKLED[key] = obj
        return obj


def _kernel_from_pickle(objcode, name):
    return objcode.get_kernel(name)


def _program_from_pickle(source, kind, name, options, compiled):
    prog = Program(source, kind, name=name, options=options)
    prog._compiled = dict(compiled)
    return prog


def supported_archs() -> list[int]:
    """Architectures the loaded NVRTC targets (90 for sm_90)."""
    cap = 64
    while True:
        arr = (C.c_int * cap)()
        count = C.c_size_t()
        lib.cuabi_program_supported_archs(arr, cap, C.byref(count))
        if count.value <= cap:
            return list(arr[:count.value])
        cap = count.value


@dataclasses.dataclass
class LinkerOptions:
    """Options of Linker(); None keeps nvJitLink's default. `arch` a list
    (or "sm_80,sm_90") links once per architecture: link("fatbin")."""
    arch: str | list | None = None
    lto: bool = False
    optimization: int | None = None
    debug: bool = False
    line_info: bool = False
    ftz: bool | None = None
    prec_div: bool | None = None
    prec_sqrt: bool | None = None
    fma: bool | None = None
    max_registers: int = 0
    verbose: bool = False
    extra_options: list = dataclasses.field(default_factory=list)
    cache: bool = True
    # cuda.core's names (aliases of the fields above, or nvJitLink options);
    # None: not given
    name: str | None = None
    link_time_optimization: bool | None = None
    optimization_level: int | None = None
    lineinfo: bool | None = None
    max_register_count: int | None = None
    ptx: bool | None = None
    time: bool | None = None
    kernels_used: object = None
    variables_used: object = None
    optimize_unused_variables: bool | None = None
    ptxas_options: object = None
    split_compile: int | None = None
    split_compile_extended: int | None = None
    no_cache: bool | None = None
    numba_debug: bool | None = None

    def __post_init__(self):
        if self.numba_debug is not None:
            warnings.warn("LinkerOptions.numba_debug is deprecated and has no effect: no "
                          "linking backend recognizes it; use ProgramOptions.numba_debug on an "
                          "NVVM or NVRTC compile (cuda.core 1.2 deprecates it too)",
                          DeprecationWarning, stacklevel=3)
        for alias, field in (("link_time_optimization", "lto"),
                             ("optimization_level", "optimization"),
                             ("lineinfo", "line_info"), ("max_register_count", "max_registers")):
            v = getattr(self, alias)
            if v is not None:
                setattr(self, field, v)
                setattr(self, alias, None)
        extra = []

        def names(v):
            return [v] if isinstance(v, str) else list(v)
        if self.ptx:
            extra.append("-ptx")
        if self.time:
            extra.append("-time")
        for n in names(self.kernels_used or ()):
            extra.append(f"-kernels-used={n}")
        for n in names(self.variables_used or ()):
            extra.append(f"-variables-used={n}")
        if self.optimize_unused_variables:
            extra.append("-optimize-unused-variables")
        for n in names(self.ptxas_options or ()):
            extra.append(f"-Xptxas={n}")
        if self.split_compile is not None:
            extra.append(f"-split-compile={self.split_compile}")
        if self.split_compile_extended is not None:
            extra.append(f"-split-compile-extended={self.split_compile_extended}")
        if self.no_cache:
            self.cache = False
        for f in ("ptx", "time", "kernels_used", "variables_used", "optimize_unused_variables",
                  "ptxas_options", "split_compile", "split_compile_extended", "no_cache"):
            setattr(self, f, None)
        if extra:
            self.extra_options = list(self.extra_options) + extra

    def _to_c(self):
        keep = []
        o = new_struct(_capi.cuabi_linker_options)
        o.arch = _s(_arch_list(self.arch))
        o.lto, o.debug, o.line_info = int(self.lto), int(self.debug), int(self.line_info)
        o.verbose = int(self.verbose)
        o.max_registers = index_arg(self.max_registers, "LinkerOptions: max_registers",
                                    INT_MIN, INT_MAX)
        o.cache = int(self.cache)
        for f in ("optimization", "ftz", "prec_div", "prec_sqrt", "fma"):
            v = getattr(self, f)
            if v is not None:
                setattr(o, f, int(v))
        o.extra_options, o.extra_option_count = _str_array(self.extra_options, keep)
        return o, keep

    def as_bytes(self, backend: str = "nvjitlink") -> list:
        """cuda.core's LinkerOptions.as_bytes: the options nvJitLink
        receives (nvJitLinkCreate), each a bytes, as the C library builds
        them for cuabi_linker_create (cuabi_linker_options_render).
        ValueError for a backend other than "nvjitlink"."""
        b = str(backend).lower()
        if b != "nvjitlink":
            raise ValueError(f"as_bytes() only supports 'nvjitlink' backend, got '{backend}'")
        o, keep = self._to_c()
        try:
            return _rendered(lib.cuabi_linker_options_render, C.byref(o))
        finally:
            del keep


class Linker(Handle):
    """nvJitLink: Linker(*inputs, arch="sm_90", lto=True).link("cubin")."""

    _ctype = "cuabi_linker"

    def __init__(self, *inputs, options: LinkerOptions | None = None, **kw):
        if options is None:
            options = LinkerOptions(**kw)
        opts, keep = options._to_c()
        Handle.__init__(self, call("cuabi_linker_create", C.byref(opts)))
        del keep
        self._name = options.name or "<default linker>"      # cuda.core's LinkerOptions.name
        for x in inputs:
            self.add(x)

    def add(self, code, code_type=None, name: str = "input") -> "Linker":
        """Add an ObjectCode, a path (str/PathLike) or bytes."""
        if isinstance(code, ObjectCode):
            lib.cuabi_linker_add_objcode(self, code)
        elif isinstance(code, (str, os.PathLike)):
            lib.cuabi_linker_add_file(self, globals()["code_type"](code_type), os.fsencode(code))
        else:
            data = bytes(code)
            lib.cuabi_linker_add_data(self, globals()["code_type"](code_type), data, len(data),
                                      name.encode())
        return self

    def link(self, output="cubin") -> ObjectCode:
        code = ObjectCode._wrap(call("cuabi_linker_complete", self, code_type(output)))
        code._name = getattr(self, "_name", "")                # ObjectCode.name
        return code

    @property
    def info_log(self) -> str:
        return _text(call("cuabi_linker_info_log", self))

    @property
    def error_log(self) -> str:
        return _text(call("cuabi_linker_error_log", self))

    def get_error_log(self) -> str:
        """cuda.core's name of error_log."""
        return self.error_log

    def get_info_log(self) -> str:
        """cuda.core's name of info_log."""
        return self.info_log

    @property
    def cache_hit(self) -> int:
        """0 linked by nvJitLink (or not linked yet), 1 in-memory cache, 2 on-disk cache."""
        return call("cuabi_linker_cache_hit", self)

    @property
    def handle(self) -> int:
        """cuda.core's Linker.handle: the nvJitLinkHandle, as an int. A linker
        going through the compile cache opens its nvJitLink session on the
        first ask (with the inputs so far) and then links without the cache.
        Valid while the linker lives; after link("ptx") or link("fatbin") it
        is the last session's. A link answered by the cache ran no session:
        NotFoundError. cuabi_handle is the cuabi handle."""
        return call("cuabi_linker_backend_handle", self) or 0

    @classmethod
    def which_backend(cls) -> "CompilerBackendType":
        """cuda.core's Linker.which_backend: the linking backend, which for
        cuabi is always nvJitLink (CompilerBackendType.NVJITLINK,
        "nvJitLink"): cuabi has no cuLink (driver) fallback, so without
        nvJitLink a Linker cannot be made at all (cuda.core would answer
        "driver" there)."""
        return CompilerBackendType.NVJITLINK


# ---- the compile cache

class cache:
    """Control of the compile cache (a namespace of functions)."""

    @staticmethod
    def set_directory(path) -> None:
        lib.cuabi_cache_set_directory(None if path is None else os.fsencode(path))

    @staticmethod
    def directory() -> str:
        size = C.c_size_t(0)
        try:
            lib.cuabi_cache_get_directory(None, C.byref(size))
        except Exception:
            pass  # BUFFER_TOO_SMALL reports the size needed
        buf = C.create_string_buffer(max(size.value, 1))
        size = C.c_size_t(len(buf))
        lib.cuabi_cache_get_directory(buf, C.byref(size))
        return buf.value.decode()

    @staticmethod
    def set_enabled(enabled: bool) -> None:
        lib.cuabi_cache_set_enabled(int(bool(enabled)))

    @staticmethod
    def set_size_limit(nbytes: int) -> None:
        lib.cuabi_cache_set_size_limit(nbytes)

    @staticmethod
    def stats() -> dict:
        s = new_struct(_capi.cuabi_cache_stats)
        lib.cuabi_cache_get_stats(C.byref(s))
        d = struct_to_dict(s)
        d.pop("version", None)
        return d

    @staticmethod
    def clear(memory: bool = True, disk: bool = True) -> None:
        lib.cuabi_cache_clear((1 if memory else 0) | (2 if disk else 0))

    @staticmethod
    def entries() -> list[dict]:
        out = []

        def each(entry, payload):
            try:
                info = _capi.cuabi_cache_entry_info.from_address(entry)
                d = struct_to_dict(info)
                d.pop("version", None)
                d["code_type"] = _CODE_NAMES.get(d["code_type"], "?")
                d["path"] = _text(info.path)
                out.append(d)
                return 0
            except BaseException as e:
                _callbacks.note_exception(e)
                return 1
        fn = _capi.cuabi_cache_list_fn(each)
        lib.cuabi_cache_list(fn, None)
        return out

    @staticmethod
    def precompile(sources, archs, options: ProgramOptions | None = None, progress=None):
        """Compile each source for each arch ("sm_90") into the cache, several
        at once. A source is its text, (name, text), or (name, text, options)
        with a ProgramOptions of its own (else `options` applies).
        progress(done, total, name, arch, status, cache_hit) is called on this
        thread, in order, and may return False to stop."""
        keep = []
        default = (options or ProgramOptions())._to_c()
        keep.append(default)
        items = (_capi.cuabi_precompile_item * max(len(sources), 1))()
        for i, src in enumerate(sources):
            own = None
            if isinstance(src, tuple):
                if len(src) not in (2, 3):
                    raise ValueError(f"precompile: source {i} is a tuple of {len(src)}; give "
                                     "(name, source) or (name, source, options)")
                name, text, own = (src + (None,))[:3]
            else:
                name, text = f"source{i}.cu", src
            if own is not None and not isinstance(own, ProgramOptions):
                raise TypeError(f"precompile: the options of source {i} ({name}) must be a "
                                f"ProgramOptions, not {type(own).__name__}")
            opts = default if own is None else own._to_c()
            keep.append(opts)
            it = new_struct(_capi.cuabi_precompile_item)
            b = _s(text)
            keep += [b, _s(name)]
            it.source, it.size, it.name = b, len(b), keep[-1]
            it.options = C.pointer(opts[0])
            items[i] = it
        arch_arr, narch = _str_array(archs, keep)

        def each(done, total, name, arch, status, hit, payload):
            try:
                if progress is None:
                    return 0
                r = progress(done, total, _text(name), _text(arch), status, hit)
                return 1 if r is False else 0
            except BaseException as e:
                _callbacks.note_exception(e)
                return 1
        cb = _capi.cuabi_precompile_progress_fn(each)
        lib.cuabi_cache_precompile(items, len(sources), arch_arr, narch, cb, None)
        del keep

    @staticmethod
    def warm(manifest, archs=None, jobs: int = 0, progress=None,
             allow_outside: bool = False) -> SimpleNamespace:
        """Precompile a project from its TOML manifest (docs/compile-cache.md),
        as `cuabi cache warm` does: cuabi.cache.warm("cuabi.toml").

        archs (list of "sm_XX") replaces the manifest's; jobs compiles at once
        (0: one per CPU). allow_outside=True lets the manifest name files,
        include paths and #includes outside its own directory tree (refused by
        default, as `cuabi cache warm --allow-outside` does; only for a
        manifest you trust). progress(result) is called on this thread for each
        outcome, in the manifest's order, and may return False to stop.
        Returns SimpleNamespace(total, compiled, cached, failed, problems,
        results); each result a SimpleNamespace(name, arch, line, status,
        cache_hit, message, log) — cache_hit -1 for a problem with the
        manifest. When anything failed, raises the first failure's CuabiError
        with .summary (that namespace) attached."""
        keep = []
        o = new_struct(_capi.cuabi_warm_options)
        o.jobs = index_arg(jobs, "warm: jobs", INT_MIN, INT_MAX)
        o.allow_outside = 1 if allow_outside else 0
        if archs is not None:
            o.archs, o.num_archs = _str_array(list(archs), keep)
        summary = new_struct(_capi.cuabi_warm_summary)
        results = []

        def each(event, payload):
            try:
                ev = _capi.cuabi_warm_event.from_address(event)
                r = SimpleNamespace(name=_text(ev.name), arch=_text(ev.arch), line=ev.line,
                                    status=_capi.STATUS_NAMES.get(ev.status, str(ev.status)),
                                    cache_hit=ev.cache_hit, message=_text(ev.message),
                                    log=_text(ev.log))
                results.append(r)
                return 1 if progress is not None and progress(r) is False else 0
            except BaseException as e:
                _callbacks.note_exception(e)
                return 1
        cb = _capi.cuabi_warm_progress_fn(each)

        def outcome():
            d = struct_to_dict(summary)
            d.pop("version", None)
            return SimpleNamespace(**d, results=results)
        try:
            lib.cuabi_cache_warm_manifest(C.byref(summary), os.fsencode(manifest), C.byref(o),
                                          cb, None)
        except Exception as e:
            e.summary = outcome()
            raise
        finally:
            del keep
        return outcome()

    @staticmethod
    def verify() -> SimpleNamespace:
        """Re-check every entry of the cache directory and remove the damaged
        ones, as `cuabi cache verify` does. Returns SimpleNamespace(checked,
        removed, bytes_removed, kept, problems=[(path, problem), ...])."""
        problems = []

        def each(path, problem, payload):
            problems.append((_text(path), _text(problem)))
            return 0
        cb = _capi.cuabi_cache_verify_fn(each)
        r = new_struct(_capi.cuabi_cache_verify_report)
        lib.cuabi_cache_verify(C.byref(r), cb, None)
        d = struct_to_dict(r)
        d.pop("version", None)
        return SimpleNamespace(**d, problems=problems)
