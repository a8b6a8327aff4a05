"""Compiling, linking and loading code: Program, Linker, ObjectCode, Kernel,
and control of the compile cache."""
from __future__ import annotations

import ctypes as C
import dataclasses
import os
from types import SimpleNamespace

from . import _callbacks, _capi
from ._core import Device, _as_device
from ._handle import Handle
from ._lib import call, lib, new_struct, struct_to_dict

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


def _text(ptr) -> str:
    if isinstance(ptr, int):
        ptr = C.string_at(ptr)
    return ptr.decode("utf-8", "replace") if ptr else ""


@dataclasses.dataclass
class ProgramOptions:
    """Options of Program.compile(); None/False fields keep the library's
    defaults. `arch` like "sm_90" (None: the current device's, or NVRTC's
    default); `output` "cubin", "ptx" or "ltoir"; `defines` a list of
    "NAME=VALUE" or a dict; `headers` a dict of name -> content."""
    arch: str | None = None
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

    def _to_c(self):
        keep = []
        o = new_struct(_capi.cuabi_program_options)
        o.arch = _s(self.arch)
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
        o.extra_options, o.num_extra_options = _str_array(self.extra_options, keep)
        o.cache = int(self.cache)
        return o, keep


class ObjectCode(Handle):
    """Compiled or loaded device code (CUBIN, PTX, LTO-IR, fatbin, ...)."""

    _ctype = "cuabi_objcode"

    @classmethod
    def from_bytes(cls, data, code_type=None, name: str = "code") -> "ObjectCode":
        data = _s(data)
        return cls._wrap(call("cuabi_objcode_from_memory", globals()["code_type"](code_type),
                              data, len(data), name.encode()))

    @classmethod
    def from_file(cls, path, code_type=None) -> "ObjectCode":
        return cls._wrap(call("cuabi_objcode_from_file", globals()["code_type"](code_type),
                              os.fsencode(path)))

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

    def get_kernel(self, name: str) -> "Kernel":
        """A kernel by entry name or registered name expression."""
        return Kernel._wrap(call("cuabi_objcode_get_kernel", self, name.encode()))

    __getitem__ = get_kernel

    @property
    def kernel_names(self) -> list[str]:
        n = call("cuabi_objcode_kernel_count", self)
        return [_text(call("cuabi_objcode_kernel_name", self, i)) for i in range(n)]

    def lowered_name(self, name_expression: str) -> str:
        return _text(call("cuabi_objcode_lowered_name", self, name_expression.encode()))

    def kernel_resources(self, name: str, arch: str | None = None) -> SimpleNamespace:
        r = new_struct(_capi.cuabi_kernel_resources)
        lib.cuabi_objcode_kernel_resources(C.byref(r), self, name.encode(), _s(arch))
        return _resources(r)


def _resources(r) -> SimpleNamespace:
    d = struct_to_dict(r)
    d.pop("version", None)
    return SimpleNamespace(**d)


class Kernel(Handle):
    """One kernel of an ObjectCode (which it keeps alive)."""

    _ctype = "cuabi_kernel"

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
        return ObjectCode._borrowed(call("cuabi_kernel_objcode", self))

    def attribute(self, attribute: int, device=None) -> int:
        return call("cuabi_kernel_attribute", self, _as_device(device), int(attribute))

    def set_attribute(self, attribute: int, value: int, device=None) -> None:
        lib.cuabi_kernel_set_attribute(self, _as_device(device), int(attribute), int(value))

    @property
    def param_info(self) -> list[tuple[int, int]]:
        """(offset, size) of each parameter (from the driver or the CUBIN)."""
        if self._params is None:
            n = call("cuabi_kernel_param_count", self)
            self._params = [call("cuabi_kernel_param_info", self, i) for i in range(n)]
        return self._params

    @property
    def resources(self) -> SimpleNamespace:
        r = new_struct(_capi.cuabi_kernel_resources)
        lib.cuabi_kernel_get_resources(C.byref(r), self)
        return _resources(r)

    def function(self, device=None) -> int:
        """The CUfunction in the device's primary context."""
        return call("cuabi_kernel_function", self, _as_device(device))

    @property
    def raw(self) -> int:
        return call("cuabi_kernel_raw", self)


class Program(Handle):
    """Source code to compile: Program(source, code_type="c++")."""

    _ctype = "cuabi_program"

    def __init__(self, source, code_type="c++", name: str = "program.cu"):
        src = _s(source)
        Handle.__init__(self, call("cuabi_program_create", globals()["code_type"](code_type),
                                   src, len(src), name.encode()))

    def compile(self, options: ProgramOptions | None = None, **kw) -> ObjectCode:
        """Compile (or fetch from the cache). Keywords are ProgramOptions
        fields, e.g. compile(arch="sm_90", name_expressions=["k<float>"]).
        A compile error raises CompileError whose .log holds NVRTC's messages."""
        if options is None:
            options = ProgramOptions(**kw)
        elif kw:
            options = dataclasses.replace(options, **kw)
        opts, keep = options._to_c()
        out = call("cuabi_program_compile", self, C.byref(opts))
        del keep
        return ObjectCode._wrap(out)

    @property
    def log(self) -> str:
        return _text(call("cuabi_program_log", self))

    def lowered_name(self, name_expression: str) -> str:
        return _text(call("cuabi_program_lowered_name", self, name_expression.encode()))

    @property
    def cache_hit(self) -> int:
        """0 compiled, 1 in-memory cache, 2 on-disk cache (last compile)."""
        return call("cuabi_program_cache_hit", self)


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
    """Options of Linker(); None keeps nvJitLink's default."""
    arch: str | None = None
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

    def _to_c(self):
        keep = []
        o = new_struct(_capi.cuabi_linker_options)
        o.arch = _s(self.arch)
        o.lto, o.debug, o.line_info = int(self.lto), int(self.debug), int(self.line_info)
        o.verbose, o.max_registers = int(self.verbose), self.max_registers
        for f in ("optimization", "ftz", "prec_div", "prec_sqrt", "fma"):
            v = getattr(self, f)
            if v is not None:
                setattr(o, f, int(v))
        o.extra_options, o.extra_option_count = _str_array(self.extra_options, keep)
        return o, keep


class Linker(Handle):
    """nvJitLink: Linker(*inputs, arch="sm_90", lto=True).link("cubin")."""

    _ctype = "cuabi_linker"

    def __init__(self, *inputs, options: LinkerOptions | None = None, **kw):
        if options is None:
            options = LinkerOptions(**kw)
        opts, keep = options._to_c()
        Handle.__init__(self, call("cuabi_linker_create", C.byref(opts)))
        del keep
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
        return ObjectCode._wrap(call("cuabi_linker_complete", self, code_type(output)))

    @property
    def info_log(self) -> str:
        return _text(call("cuabi_linker_info_log", self))

    @property
    def error_log(self) -> str:
        return _text(call("cuabi_linker_error_log", self))


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
        """Compile each source (str, or (name, source)) for each arch ("sm_90")
        into the cache. progress(done, total, name, arch, status, cache_hit)
        may return False to stop."""
        options = options or ProgramOptions()
        opts, keep = options._to_c()
        items = (_capi.cuabi_precompile_item * max(len(sources), 1))()
        for i, src in enumerate(sources):
            name, text = src if isinstance(src, tuple) else (f"source{i}.cu", src)
            it = new_struct(_capi.cuabi_precompile_item)
            b = _s(text)
            keep += [b, _s(name)]
            it.source, it.size, it.name = b, len(b), keep[-1]
            it.options = C.pointer(opts)
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
