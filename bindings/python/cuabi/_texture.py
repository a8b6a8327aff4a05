"""CUDA arrays, mipmapped arrays, texture and surface objects, with the
names of cuda.core's `texture` namespace (cuabi.texture re-exports them):
ArrayFormat, OpaqueArray, MipmappedArray, ResourceDescriptor,
TextureDescriptor, TextureObject, SurfaceObject, AddressMode, FilterMode,
ReadMode. As in cuda.core, `handle` of these objects is the driver's value
(CUarray, CUmipmappedArray, CUtexObject, CUsurfObject), and each object keeps
what it reads alive.

cuabi's extras keep their own names: OpaqueArray.from_dlpack and
TextureObject.from_image (a numpy / torch / CuPy image becomes an array or a
texture in one call), ResourceDescriptor.from_view (a texture over GPU
memory in place), copy regions (offset=, extent=), layered and cube-map
arrays, and copies between arrays, buffers, views and host memory in every
direction, synchronous without a stream.

A texture or surface object is a kernel argument: it packs as its 64-bit
value into a `handle` parameter (or any 8-byte integer one: a
cudaTextureObject_t is an unsigned long long), and a pack or launch keeps
the Python object alive while it uses it (with a graph a capture made)."""
from __future__ import annotations

import ctypes as C
import enum
from dataclasses import dataclass

from . import _callbacks, _capi
from ._core import Device
from ._handle import Handle
from ._lib import call, fast, holding, hooks, lib, new_struct, raw
from ._memory import Buffer, _host_bytes, _stream_arg
from .errors import ClosedHandleError, U32_MAX, U64_MAX, dims_arg, index_arg
from .typing import AddressModeType, ArrayFormatType, FilterModeType, ReadModeType

__all__ = ["AddressMode", "ArrayFormat", "FilterMode", "MipmappedArray", "MipmappedArrayOptions",
           "OpaqueArray", "OpaqueArrayOptions", "ReadMode", "ResourceDescriptor",
           "SurfaceObject", "TextureDescriptor", "TextureObject", "TextureObjectOptions"]

_FORMATS = {k[len("CUABI_ARRAY_FORMAT_"):]: v
            for k, v in _capi.ENUMS["cuabi_array_format"].items()}
# Element format of an array (CUarray_format): every format the driver takes.
ArrayFormat = enum.IntEnum("ArrayFormat", _FORMATS, module=__name__)
ArrayFormat.__doc__ = ("Element format of a CUDA array (CUarray_format): UINT8, UINT16, UINT32, "
                       "INT8, INT16, INT32, FLOAT16, FLOAT32, and the packed, block-compressed "
                       "and video formats.")


class AddressMode(enum.IntEnum):
    """What a texture returns for coordinates outside it."""
    WRAP = _capi.CUABI_TEXTURE_ADDRESS_WRAP
    CLAMP = _capi.CUABI_TEXTURE_ADDRESS_CLAMP
    MIRROR = _capi.CUABI_TEXTURE_ADDRESS_MIRROR
    BORDER = _capi.CUABI_TEXTURE_ADDRESS_BORDER


class FilterMode(enum.IntEnum):
    """Texel sampling: the nearest element, or linear interpolation."""
    POINT = _capi.CUABI_TEXTURE_FILTER_POINT
    LINEAR = _capi.CUABI_TEXTURE_FILTER_LINEAR


class ReadMode(enum.IntEnum):
    """ELEMENT_TYPE: the element as stored; NORMALIZED_FLOAT: 8/16-bit
    integers as floats in [0, 1] (unsigned) or [-1, 1] (signed)."""
    ELEMENT_TYPE = _capi.CUABI_TEXTURE_READ_ELEMENT_TYPE
    NORMALIZED_FLOAT = _capi.CUABI_TEXTURE_READ_NORMALIZED_FLOAT


_BY_DTYPE = {"uint8": ArrayFormat.UINT8, "int8": ArrayFormat.INT8, "bool": ArrayFormat.UINT8,
             "uint16": ArrayFormat.UINT16, "int16": ArrayFormat.INT16,
             "uint32": ArrayFormat.UINT32, "int32": ArrayFormat.INT32,
             "float16": ArrayFormat.FLOAT16, "float32": ArrayFormat.FLOAT32}
_DTYPE_OF = {ArrayFormat.UINT8: "uint8", ArrayFormat.INT8: "int8", ArrayFormat.UINT16: "uint16",
             ArrayFormat.INT16: "int16", ArrayFormat.UINT32: "uint32",
             ArrayFormat.INT32: "int32", ArrayFormat.FLOAT16: "float16",
             ArrayFormat.FLOAT32: "float32"}


def _format_type(fmt):
    """cuda.core's ArrayFormatType of a CUarray_format, or cuabi's
    ArrayFormat for one cuda.core does not name."""
    f = ArrayFormat(fmt)
    name = _DTYPE_OF.get(f)
    return f if name is None else ArrayFormatType(name)


_FLAGS = {"layered": _capi.CUABI_ARRAY_LAYERED, "cubemap": _capi.CUABI_ARRAY_CUBEMAP,
          "is_surface_load_store": _capi.CUABI_ARRAY_SURFACE_LDST,
          "texture_gather": _capi.CUABI_ARRAY_TEXTURE_GATHER}


def _format(v) -> ArrayFormat:
    """An ArrayFormat from itself, an int, a name ("FLOAT32", "float32") or a
    numpy dtype."""
    if isinstance(v, (ArrayFormat, int)) and not isinstance(v, bool):
        return ArrayFormat(v)
    name = getattr(v, "name", None) or getattr(v, "__name__", None) or str(v)
    f = _BY_DTYPE.get(name) or _FORMATS.get(name.upper())
    if f is None:
        raise ValueError(f"format {v!r} is not an ArrayFormat, nor a dtype an array holds "
                         f"({', '.join(_BY_DTYPE)})")
    return ArrayFormat(f)


def _flags(flags=0, **named) -> int:
    out = index_arg(flags, "flags", 0, U32_MAX)
    for k, on in named.items():
        if on:
            out |= _FLAGS[k]
    return out


def _region(offset, extent, what="region"):
    """A cuabi_array_region from (x[, y[, z]]) and (width[, height[, depth]])
    (0: to the end), or None for the whole array."""
    if offset is None and extent is None:
        return None
    r = new_struct(_capi.cuabi_array_region)
    off = dims_arg(offset or (), f"{what} offset", 0, U64_MAX, max_length=3)
    ext = dims_arg(extent or (), f"{what} extent", 0, U64_MAX, max_length=3)
    for name, v in zip(("x", "y", "z"), off):
        setattr(r, name, v)
    for name, v in zip(("width", "height", "depth"), ext):
        setattr(r, name, v)
    return C.byref(r)


def _as_view(obj, stream=None):
    view_cls = hooks.view_class()
    return obj if isinstance(obj, view_cls) else view_cls(obj, stream=stream)


def _guess_channels(view, num_channels):
    """num_channels as given, else the last dimension of a 3-D image when it
    is 2 or 4 (an H x W x C image), else 1."""
    if num_channels is not None:
        return index_arg(num_channels, "num_channels", 0, U32_MAX)
    shape = view.shape
    return shape[-1] if len(shape) == 3 and shape[-1] in (2, 4) else 1


def _is_host_bytes(obj) -> bool:
    # Plain buffer-protocol objects (bytes, bytearray, memoryview, array.array):
    # no array interface to describe a layout, so copied as packed bytes.
    return isinstance(obj, (bytes, bytearray, memoryview)) or (
        not hasattr(obj, "__array_interface__") and not hasattr(obj, "__dlpack__")
        and not hasattr(obj, "__cuda_array_interface__") and _has_buffer(obj))


def _has_buffer(obj) -> bool:
    try:
        memoryview(obj)
        return True
    except TypeError:
        return False


class _Release:
    """The release of a texture's or surface's C reference (its `_fin`):
    when called (close(), or the last call in flight after it) or when
    collected. A weakref.finalize costs more than the whole creation of a
    texture object (bench/bench_texture.py), so these objects release as
    views do (cuabi._view._CView)."""
    __slots__ = ("h", "fn")

    def __call__(self):
        h = self.h
        if h is not None:
            self.h = None
            self.fn(C.c_void_p(h))

    def __del__(self):
        h = self.h
        if h is not None:
            self.h = None
            try:
                self.fn(C.c_void_p(h))
            except BaseException:  # interpreter shutdown
                pass


def _light(cls, h, release):
    """A new `cls` owning handle `h`, released by `release` (a raw function)."""
    obj = cls.__new__(cls)
    obj._h = h
    r = _Release.__new__(_Release)
    r.h, r.fn = h, release
    obj._fin = r
    if fast is None:
        obj._uses = []          # the ctypes backend's count (cuabi._handle.Handle)
    return obj


class _NativeHandle(Handle):
    """A cuabi object whose `handle`, as in cuda.core, is the driver's value;
    the cuabi handle goes to the library (`_as_parameter_`)."""

    __slots__ = ("_native",)
    _native_fn = None           # the C function giving the native value, when asked lazily

    @property
    def handle(self) -> int:
        if self._h is None:
            raise ClosedHandleError(f"{type(self).__name__} is closed")
        v = self._native
        if v is None:
            v = call(self._native_fn, self)
            if self._h is None:
                raise ClosedHandleError(f"{type(self).__name__} is closed")
            self._native = v
        return v

    @property
    def _as_parameter_(self):
        h = self._h
        if h is None:
            raise ClosedHandleError(f"{type(self).__name__} is closed")
        return C.c_void_p(h)

    def __repr__(self):
        try:
            return f"<cuabi.{type(self).__name__} 0x{self.handle:x}>"
        except ClosedHandleError:
            return f"<cuabi.{type(self).__name__} closed>"


def _info(fn, obj):
    out = new_struct(_capi.cuabi_array_info)
    getattr(lib, fn)(C.byref(out), obj)
    return out


def _shape_of(info) -> tuple:
    return tuple(v for v in (info.width, info.height, info.depth) if v) or (info.width,)


# ------------------------------------------------------------ arrays

class OpaqueArray(_NativeHandle):
    """A CUDA array (CUarray): GPU memory laid out by the driver for
    textures and surfaces, with no address a kernel can use. Filled and read
    by copies (copy_from / copy_to), read through a TextureObject, read and
    written through a SurfaceObject.

    OpaqueArray.from_descriptor(shape=(width[, height[, depth]]), format=...,
    num_channels=1|2|4, is_surface_load_store=False); layered=True makes the
    last extent the number of layers, cubemap=True a cube map (depth 6, or 6
    x layers). OpaqueArray.from_dlpack(image) makes one shaped as an image
    and copies it in."""

    _ctype = "cuabi_array"
    __slots__ = ("_desc", "_parent")

    @classmethod
    def _adopt(cls, h, parent=None):
        obj = cls._wrap(h)
        obj._native = call("cuabi_array_native_handle", obj)
        obj._desc = None
        obj._parent = parent
        return obj

    @classmethod
    def _adopt_borrowed(cls, h):
        lib.cuabi_array_retain(C.c_void_p(h))
        return cls._adopt(h)

    @classmethod
    def from_descriptor(cls, *, shape, format, num_channels: int = 1,
                        is_surface_load_store: bool = False, layered: bool = False,
                        cubemap: bool = False, texture_gather: bool = False, flags: int = 0,
                        device=None) -> "OpaqueArray":
        ext = dims_arg(shape, "shape", 0, U64_MAX, max_length=3)
        if not 1 <= len(ext) <= 3:
            raise ValueError(f"shape {tuple(ext)}: (width,), (width, height) or (width, height, "
                             "depth)")
        d = new_struct(_capi.cuabi_array_desc)
        d.width = ext[0]
        if layered and not cubemap and len(ext) == 2:
            d.depth = ext[1]                       # layers of 1-D rows
        else:
            d.height = ext[1] if len(ext) > 1 else 0
            d.depth = ext[2] if len(ext) > 2 else (6 if cubemap else 0)
        d.format = int(_format(format))
        d.num_channels = index_arg(num_channels, "num_channels", 0, U32_MAX)
        d.flags = _flags(flags, layered=layered, cubemap=cubemap,
                         is_surface_load_store=is_surface_load_store,
                         texture_gather=texture_gather)
        dev = device if isinstance(device, Device) else Device(device or 0)
        return cls._adopt(call("cuabi_array_create", dev, C.byref(d)))

    @classmethod
    def from_dlpack(cls, obj, *, num_channels: int | None = None, layered: bool = False,
                    cubemap: bool = False, is_surface_load_store: bool = False, device=None,
                    stream=None) -> "OpaqueArray":
        """A new array shaped as `obj` (anything View() takes: numpy, torch,
        CuPy, DLPack; host or GPU memory; strided) holding its contents: its
        dimensions are the array's, outermost first ([depth or layers,]
        [height,] width), then the channels when num_channels is 2 or 4
        (default: the last dimension of a 3-D image when it is 2 or 4).
        Synchronous unless a stream is given."""
        v = _as_view(obj, stream)
        ch = _guess_channels(v, num_channels)
        flags = _flags(layered=layered, cubemap=cubemap,
                       is_surface_load_store=is_surface_load_store)
        dev = None if device is None else (device if isinstance(device, Device)
                                          else Device(device))
        return cls._adopt(call("cuabi_array_create_from_view", v, ch, flags, dev,
                               _stream_arg(stream)))

    @property
    def _info(self):
        return _info("cuabi_array_get_info", self)

    @property
    def info(self):
        """The cuabi_array_info: extents, format, channels, flags, dims, layers,
        element_size, block, size_bytes, level, device, native."""
        return self._info

    @property
    def shape(self) -> tuple:
        """(width[, height[, depth]]) in elements, as made (depth: layers or
        faces of layered and cube arrays)."""
        return _shape_of(self._info)

    @property
    def format(self):
        """cuda.core's format: the element ArrayFormatType (cuabi.typing); a
        format cuda.core has no name for (block-compressed, NV12, ...) is
        cuabi's ArrayFormat. array_format is always cuabi's ArrayFormat."""
        return _format_type(self._info.format)

    @property
    def array_format(self) -> ArrayFormat:
        """cuabi's: the CUarray_format as an ArrayFormat."""
        return ArrayFormat(self._info.format)

    @property
    def num_channels(self) -> int:
        return self._info.num_channels

    @property
    def element_bytes(self) -> int:
        """Bytes per element (per 4x4 block of the block-compressed formats)."""
        return self._info.element_size

    element_size = element_bytes

    @property
    def size_bytes(self) -> int:
        """Bytes a copy of the whole array moves."""
        return self._info.size_bytes

    @property
    def is_surface_load_store(self) -> bool:
        return bool(self._info.flags & _capi.CUABI_ARRAY_SURFACE_LDST)

    @property
    def is_layered(self) -> bool:
        return bool(self._info.flags & _capi.CUABI_ARRAY_LAYERED)

    @property
    def is_cubemap(self) -> bool:
        return bool(self._info.flags & _capi.CUABI_ARRAY_CUBEMAP)

    @property
    def level(self) -> int | None:
        """The mipmap level this array is, or None."""
        lv = self._info.level
        return None if lv < 0 else lv

    @property
    def device(self) -> Device:
        return Device._borrowed_of("cuabi_array_device", self)

    def copy_from(self, src, *, stream=None, offset=None, extent=None, pitch: int = 0,
                  rows: int = 0) -> None:
        """Copy `src` into the array (or into the box at `offset` = (x[, y[,
        z]]) of `extent` elements, 0 = to the end): another OpaqueArray; a
        Buffer (rows `pitch` bytes apart, `rows` rows a slice, 0: packed);
        bytes-like host memory (same layout); any other array (numpy, torch,
        a View, ...: its shape is the box's, outermost first, channels last;
        strides as cuMemcpy3D takes them). Synchronous without a stream; on a
        captured stream the graph keeps the array and the source."""
        s = _stream_arg(stream)
        if isinstance(src, OpaqueArray):
            lib.cuabi_array_copy(self, _region(offset, None, "destination"), src,
                                 _region(None, extent, "source"), s)
            return
        region = _region(offset, extent)
        pitch = index_arg(pitch, "pitch")
        rows = index_arg(rows, "rows")
        if isinstance(src, Buffer):
            lib.cuabi_array_copy_from_buffer(self, region, src, 0, pitch, rows, s)
            return
        if _is_host_bytes(src):
            addr, nbytes, keep = _host_bytes(src)
            lib.cuabi_array_copy_from_host(self, region, addr, nbytes, pitch, rows, s)
            if _callbacks.captures and s is not None:    # a graph reads it at every replay
                _callbacks.keep_for_captures((src, keep))
            return
        v = _as_view(src, stream)
        lib.cuabi_array_copy_from_view(self, region, v, s)
        if _callbacks.captures and s is not None:
            _callbacks.keep_for_captures((src, v))

    def copy_to(self, dst=None, *, stream=None, offset=None, extent=None, pitch: int = 0,
                rows: int = 0):
        """Copy the array (or a box of it) into `dst`: an OpaqueArray (at its
        origin), a Buffer, writable bytes-like host memory, or any writable
        array (numpy, torch, ...) shaped as the box. None: a new bytearray of
        the box's packed bytes. Returns dst."""
        s = _stream_arg(stream)
        region = _region(offset, extent)
        if isinstance(dst, OpaqueArray):
            lib.cuabi_array_copy(dst, None, self, region, s)
            return dst
        pitch = index_arg(pitch, "pitch")
        rows = index_arg(rows, "rows")
        if dst is None:
            dst = bytearray(self._box_bytes(offset, extent))
        if isinstance(dst, Buffer):
            lib.cuabi_array_copy_to_buffer(dst, 0, pitch, rows, self, region, s)
            return dst
        if _is_host_bytes(dst):
            mv = memoryview(dst)
            if mv.readonly or not mv.c_contiguous:
                raise ValueError("copy_to: the destination must be writable and C-contiguous")
            buf = (C.c_char * mv.nbytes).from_buffer(mv.cast("B")) if mv.nbytes else None
            lib.cuabi_array_copy_to_host(buf, mv.nbytes, pitch, rows, self, region, s)
            if _callbacks.captures and s is not None:    # a graph writes it at every replay
                _callbacks.keep_for_captures((dst, buf))
            return dst
        v = _as_view(dst, stream)
        lib.cuabi_array_copy_to_view(v, self, region, s)
        if _callbacks.captures and s is not None:
            _callbacks.keep_for_captures((dst, v))
        return dst

    def _box_bytes(self, offset, extent) -> int:
        i = self._info
        full = [i.width, i.height or 1, i.depth or 1]
        off = list(offset or ()) + [0] * (3 - len(offset or ()))
        ext = list(extent or ()) + [0] * (3 - len(extent or ()))
        n = [(e or (f - o)) for f, o, e in zip(full, off, ext)]
        b = i.block or 1
        return -(-n[0] // b) * -(-n[1] // b) * n[2] * i.element_size


class MipmappedArray(_NativeHandle):
    """A mipmapped CUDA array (CUmipmappedArray): `num_levels` levels, each
    half the size of the one before. get_level(i) gives a level as an
    OpaqueArray (which keeps this object's storage alive) to fill or to bind
    as a surface; a TextureObject over it samples every level."""

    _ctype = "cuabi_mipmapped_array"
    __slots__ = ()

    @classmethod
    def from_descriptor(cls, *, shape, format, num_channels: int = 1, num_levels: int,
                        is_surface_load_store: bool = False, layered: bool = False,
                        cubemap: bool = False, device=None) -> "MipmappedArray":
        ext = dims_arg(shape, "shape", 0, U64_MAX, max_length=3)
        if not 1 <= len(ext) <= 3:
            raise ValueError(f"shape {tuple(ext)}: (width,), (width, height) or (width, height, "
                             "depth)")
        d = new_struct(_capi.cuabi_array_desc)
        d.width = ext[0]
        if layered and not cubemap and len(ext) == 2:
            d.depth = ext[1]
        else:
            d.height = ext[1] if len(ext) > 1 else 0
            d.depth = ext[2] if len(ext) > 2 else (6 if cubemap else 0)
        d.format = int(_format(format))
        d.num_channels = index_arg(num_channels, "num_channels", 0, U32_MAX)
        d.flags = _flags(layered=layered, cubemap=cubemap,
                         is_surface_load_store=is_surface_load_store)
        dev = device if isinstance(device, Device) else Device(device or 0)
        obj = cls._wrap(call("cuabi_mipmapped_array_create", dev, C.byref(d),
                             index_arg(num_levels, "num_levels", 0, U32_MAX)))
        obj._native = obj._info.native
        return obj

    @property
    def _info(self):
        return _info("cuabi_mipmapped_array_get_info", self)

    info = _info

    def get_level(self, level: int) -> OpaqueArray:
        """Level `level` (0 = the largest) as an OpaqueArray."""
        h = call("cuabi_mipmapped_array_get_level", self, index_arg(level, "level", 0, U32_MAX))
        return OpaqueArray._adopt(h, parent=self)

    @property
    def shape(self) -> tuple:
        """Level 0's (width[, height[, depth]])."""
        return _shape_of(self._info)

    @property
    def format(self):
        """cuda.core's format: the element ArrayFormatType (cuabi's
        ArrayFormat for a format cuda.core has no name for); array_format
        is always cuabi's ArrayFormat."""
        return _format_type(self._info.format)

    @property
    def array_format(self) -> ArrayFormat:
        """cuabi's: the CUarray_format as an ArrayFormat."""
        return ArrayFormat(self._info.format)

    @property
    def num_channels(self) -> int:
        return self._info.num_channels

    @property
    def num_levels(self) -> int:
        return self._info.num_levels

    @property
    def is_surface_load_store(self) -> bool:
        return bool(self._info.flags & _capi.CUABI_ARRAY_SURFACE_LDST)

    @property
    def device(self) -> Device:
        return Device(self._info.device)


# ------------------------------------------------------------ resources

class ResourceDescriptor:
    """What a TextureObject (or SurfaceObject) reads. Made by the from_*
    class methods: from_opaque_array, from_mipmapped_array, from_linear (a
    Buffer read by index: tex1Dfetch), from_pitch2d (a Buffer as rows of an
    image), and cuabi's from_view (any GPU array in place: 1-D as linear, 2-D
    as pitched; channels last). The texture keeps the source alive."""

    __slots__ = ("_kind", "_source", "_format", "_num_channels", "_size_bytes", "_width",
                 "_height", "_pitch_bytes", "_view")

    def __init__(self):
        for s in self.__slots__:
            setattr(self, s, None)

    @classmethod
    def from_opaque_array(cls, array: OpaqueArray) -> "ResourceDescriptor":
        if not isinstance(array, OpaqueArray):
            raise TypeError(f"from_opaque_array takes an OpaqueArray, not {type(array).__name__}")
        r = cls()
        r._kind, r._source = "array", array
        return r

    @classmethod
    def from_mipmapped_array(cls, mipmapped_array: MipmappedArray) -> "ResourceDescriptor":
        if not isinstance(mipmapped_array, MipmappedArray):
            raise TypeError("from_mipmapped_array takes a MipmappedArray, not "
                            f"{type(mipmapped_array).__name__}")
        r = cls()
        r._kind, r._source = "mipmapped_array", mipmapped_array
        return r

    @classmethod
    def from_linear(cls, buffer, *, format, num_channels: int = 1,
                    size_bytes: int | None = None) -> "ResourceDescriptor":
        f = _format(format)
        if f not in _DTYPE_OF:
            raise ValueError(f"linear textures take the 8-, 16- and 32-bit integer and float "
                             f"formats, not {f.name}")
        ch = index_arg(num_channels, "num_channels", 0, U32_MAX)
        if ch not in (1, 2, 4):
            raise ValueError(f"num_channels {ch}: textures have 1, 2 or 4 channels")
        size = buffer.size if size_bytes is None else index_arg(size_bytes, "size_bytes")
        elem = _itemsize(f) * ch
        n = size // elem
        shape = (n, ch) if ch > 1 else (n,)
        r = cls()
        r._kind, r._source, r._format, r._num_channels = "linear", buffer, f, ch
        r._size_bytes = n * elem
        r._view = buffer.view(_DTYPE_OF[f], shape)
        return r

    @classmethod
    def from_pitch2d(cls, buffer, *, format, num_channels: int = 1, width: int, height: int,
                     pitch_bytes: int) -> "ResourceDescriptor":
        f = _format(format)
        if f not in _DTYPE_OF:
            raise ValueError(f"pitched textures take the 8-, 16- and 32-bit integer and float "
                             f"formats, not {f.name}")
        ch = index_arg(num_channels, "num_channels", 0, U32_MAX)
        w, h = index_arg(width, "width"), index_arg(height, "height")
        pitch = index_arg(pitch_bytes, "pitch_bytes")
        item = _itemsize(f)
        if pitch % item:
            raise ValueError(f"pitch_bytes {pitch} is not a multiple of the {item}-byte channel")
        shape = (h, w, ch) if ch > 1 else (h, w)
        strides = (pitch // item, ch, 1) if ch > 1 else (pitch // item, 1)
        r = cls()
        r._kind, r._source, r._format, r._num_channels = "pitch2d", buffer, f, ch
        r._width, r._height, r._pitch_bytes = w, h, pitch
        r._view = buffer.view(_DTYPE_OF[f], shape, strides)
        return r

    @classmethod
    def from_view(cls, obj, *, num_channels: int | None = None) -> "ResourceDescriptor":
        """GPU memory read in place: a 1-D array (plus channels) as linear
        memory, a 2-D one as pitched (rows aligned as the device requires)."""
        v = _as_view(obj)
        ch = _guess_channels(v, num_channels)
        nd = len(v.shape) - (1 if ch > 1 else 0)
        r = cls()
        r._kind = "linear" if nd == 1 else "pitch2d"
        r._source, r._view, r._num_channels = obj, v, ch
        r._format = _BY_DTYPE.get(v.dtype)
        if nd == 2:
            r._height, r._width = v.shape[0], v.shape[1]
            r._pitch_bytes = v.strides[0] * v.itemsize if v.shape[0] > 1 else None
        else:
            r._size_bytes = v.nbytes
        return r

    @property
    def kind(self) -> str:
        """"array", "mipmapped_array", "linear" or "pitch2d"."""
        return self._kind

    @property
    def source(self):
        return self._source

    @property
    def format(self):
        """cuda.core's format: the element ArrayFormatType (None for
        array-backed); array_format is cuabi's ArrayFormat."""
        return None if self._format is None else _format_type(self._format)

    @property
    def array_format(self):
        """cuabi's: the element ArrayFormat (None for array-backed)."""
        return self._format

    @property
    def num_channels(self):
        return self._num_channels

    @property
    def size_bytes(self):
        return self._size_bytes

    @property
    def width(self):
        return self._width

    @property
    def height(self):
        return self._height

    @property
    def pitch_bytes(self):
        return self._pitch_bytes

    def _texture(self, desc) -> int:
        out = C.c_void_p()
        if self._kind == "array":
            lib.cuabi_texture_create_from_array(C.byref(out), self._source, desc)
        elif self._kind == "mipmapped_array":
            lib.cuabi_texture_create_from_mipmapped_array(C.byref(out), self._source, desc)
        else:
            lib.cuabi_texture_create_from_view(C.byref(out), self._view, self._num_channels or 1,
                                               desc)
        return out.value

    def __repr__(self):
        return f"ResourceDescriptor({self._kind}, {type(self._source).__name__})"


def _itemsize(f: ArrayFormat) -> int:
    return {"uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "float16": 2}.get(_DTYPE_OF[f], 4)


@dataclass
class TextureDescriptor:
    """How a TextureObject samples (CUDA_TEXTURE_DESC), with cuda.core's
    fields: address_mode (one AddressMode for every axis, or 1-3 of them),
    filter_mode, read_mode, normalized_coords, srgb,
    disable_trilinear_optimization, seamless_cubemap, max_anisotropy (0:
    off), mipmap_filter_mode, mipmap_level_bias, min/max_mipmap_level_clamp,
    border_color (4 floats for BORDER; None: zero)."""
    address_mode: object = AddressMode.CLAMP
    filter_mode: FilterMode = FilterMode.POINT
    read_mode: ReadMode = ReadMode.ELEMENT_TYPE
    normalized_coords: bool = False
    srgb: bool = False
    disable_trilinear_optimization: bool = False
    seamless_cubemap: bool = False
    max_anisotropy: int = 0
    mipmap_filter_mode: FilterMode = FilterMode.POINT
    mipmap_level_bias: float = 0.0
    min_mipmap_level_clamp: float = 0.0
    max_mipmap_level_clamp: float = 0.0
    border_color: tuple | None = None

    def _key(self):
        return (self.address_mode, self.filter_mode, self.read_mode, self.normalized_coords,
                self.srgb, self.disable_trilinear_optimization, self.seamless_cubemap,
                self.max_anisotropy, self.mipmap_filter_mode, self.mipmap_level_bias,
                self.min_mipmap_level_clamp, self.max_mipmap_level_clamp, self.border_color)

    def _c(self):
        """The cuabi_texture_desc, built again only when a field changed."""
        key = self._key()
        cached = self.__dict__.get("_c_cache")
        if cached is not None and cached[0] == key:
            return cached[1]
        d = self._build()
        self.__dict__["_c_cache"] = (key, d)
        return d

    def _build(self):
        d = new_struct(_capi.cuabi_texture_desc)
        modes = self.address_mode
        if isinstance(modes, (AddressMode, int)):
            modes = (modes,) * 3
        modes = tuple(AddressMode(m) for m in modes)
        if not 1 <= len(modes) <= 3:
            raise ValueError("address_mode: one AddressMode, or 1 to 3 of them")
        modes = modes + (AddressMode.CLAMP,) * (3 - len(modes))
        for i, m in enumerate(modes):
            d.address_mode[i] = int(m)
        d.filter_mode = int(FilterMode(self.filter_mode))
        d.read_mode = int(ReadMode(self.read_mode))
        d.normalized_coords = int(bool(self.normalized_coords))
        d.srgb = int(bool(self.srgb))
        d.disable_trilinear_optimization = int(bool(self.disable_trilinear_optimization))
        d.seamless_cubemap = int(bool(self.seamless_cubemap))
        d.max_anisotropy = index_arg(self.max_anisotropy, "max_anisotropy", 0, U32_MAX)
        d.mipmap_filter_mode = int(FilterMode(self.mipmap_filter_mode))
        d.mipmap_level_bias = float(self.mipmap_level_bias)
        d.min_mipmap_level_clamp = float(self.min_mipmap_level_clamp)
        d.max_mipmap_level_clamp = float(self.max_mipmap_level_clamp)
        if self.border_color is not None:
            bc = tuple(float(x) for x in self.border_color)
            if len(bc) != 4:
                raise ValueError("border_color: 4 floats (r, g, b, a)")
            for i, x in enumerate(bc):
                d.border_color[i] = x
        return d


# ------------------------------------------------------------ objects

class TextureObject(_NativeHandle):
    """A texture object (CUtexObject): `handle` is the 64-bit value a kernel's
    cudaTextureObject_t parameter takes; pass the object itself to launch()
    or an ArgPack, which keep it alive while they use it. It keeps what it
    reads alive. Made by from_descriptor(resource=..., texture_descriptor=...)
    or, from an image in one call, from_image(array_like, ...)."""

    _ctype = "cuabi_texture"
    _cuabi_object_value_ = "texture"      # packs as `handle` (cuabi._argpack)
    _native_fn = "cuabi_texture_object"
    __slots__ = ("_resource", "_tex_desc", "_options")
    _release_fn = raw("cuabi_texture_release")

    @classmethod
    def _adopt(cls, h, resource, desc):
        obj = _light(cls, h, cls._release_fn)
        obj._native = None                  # asked on first use (`handle`)
        obj._resource, obj._tex_desc = resource, desc
        obj._options = None
        return obj

    @classmethod
    def from_descriptor(cls, *, resource: ResourceDescriptor,
                        texture_descriptor: TextureDescriptor | None = None) -> "TextureObject":
        if not isinstance(resource, ResourceDescriptor):
            raise TypeError("resource must be a ResourceDescriptor (ResourceDescriptor.from_*)")
        td = texture_descriptor if texture_descriptor is not None else TextureDescriptor()
        c = td._c()
        return cls._adopt(resource._texture(C.byref(c)), resource, td)

    @classmethod
    def from_image(cls, image, texture_descriptor: TextureDescriptor | None = None, *,
                   num_channels: int | None = None, layered: bool = False, cubemap: bool = False,
                   is_surface_load_store: bool = False, device=None) -> "TextureObject":
        """A texture over a new array holding a copy of `image` (numpy, torch,
        CuPy, any DLPack array; host or GPU memory): shaped as
        OpaqueArray.from_dlpack says (an H x W x 4 uint8 image: a 2-D RGBA8
        texture). The texture keeps the array (`array`)."""
        v = _as_view(image)
        ch = _guess_channels(v, num_channels)
        td = texture_descriptor if texture_descriptor is not None else TextureDescriptor()
        c = td._c()
        flags = _flags(layered=layered, cubemap=cubemap,
                       is_surface_load_store=is_surface_load_store)
        dev = None if device is None else (device if isinstance(device, Device)
                                          else Device(device))
        h = call("cuabi_texture_create_from_image", v, ch, flags, C.byref(c), dev)
        obj = cls._adopt(h, None, td)
        obj._resource = ResourceDescriptor.from_opaque_array(obj.array)
        return obj

    @property
    def info(self):
        """The cuabi_texture_info (resource kind, format, extents, ...)."""
        out = new_struct(_capi.cuabi_texture_info)
        lib.cuabi_texture_get_info(C.byref(out), self)
        return out

    @property
    def array(self) -> OpaqueArray | None:
        """The array read (also the one from_image made), or None."""
        with holding(self):          # the texture keeps the array until it is retained
            h = self.info.array
            return OpaqueArray._adopt_borrowed(h) if h else None

    @property
    def resource(self) -> ResourceDescriptor:
        return self._resource

    @property
    def texture_descriptor(self) -> TextureDescriptor:
        return self._tex_desc

    @property
    def options(self) -> "TextureObjectOptions":
        """cuda.core's TextureObject.options: the TextureObjectOptions it was
        made with (Device.create_texture_object), or the same fields read
        from its texture_descriptor."""
        if self._options is None:
            self._options = TextureObjectOptions._of(self._tex_desc)
        return self._options

    @property
    def device(self) -> Device:
        return Device(self.info.device)


class SurfaceObject(_NativeHandle):
    """A surface object (CUsurfObject) over an OpaqueArray made with
    is_surface_load_store=True: a kernel reads and writes it with
    surf2Dread / surf2Dwrite (x in bytes). `handle` is the 64-bit value; pass
    the object to launch() or an ArgPack. It keeps the array alive."""

    _ctype = "cuabi_surface"
    _cuabi_object_value_ = "surface"
    _native_fn = "cuabi_surface_object"
    __slots__ = ("_resource",)
    _release_fn = raw("cuabi_surface_release")

    @classmethod
    def from_descriptor(cls, *, resource: ResourceDescriptor) -> "SurfaceObject":
        if not isinstance(resource, ResourceDescriptor) or resource.kind != "array":
            raise TypeError("a surface reads a ResourceDescriptor.from_opaque_array(...) (an "
                            "array made with is_surface_load_store=True)")
        out = C.c_void_p()
        lib.cuabi_surface_create(C.byref(out), resource.source)
        obj = _light(cls, out.value, cls._release_fn)
        obj._native = None                  # asked on first use (`handle`)
        obj._resource = resource
        return obj

    @classmethod
    def from_array(cls, array: OpaqueArray) -> "SurfaceObject":
        return cls.from_descriptor(resource=ResourceDescriptor.from_opaque_array(array))

    @property
    def resource(self) -> ResourceDescriptor:
        return self._resource

    @property
    def device(self) -> Device:
        return self._resource.source.device



# ------------------------------------------------------------ cuda.core's options

def _array_format_type(v) -> ArrayFormatType:
    """cuda.core's format coercion: an ArrayFormatType, its string
    ("float32") or a numpy dtype (or what numpy.dtype() takes) of one of the
    eight formats; ValueError for anything else."""
    if isinstance(v, ArrayFormatType):
        return v
    if isinstance(v, str):
        try:
            return ArrayFormatType(v)
        except ValueError:
            pass
    elif not isinstance(v, (bool, int, float)):
        name = getattr(v, "name", None)
        if name is None and isinstance(v, type):
            try:
                import numpy                                 # lazy: import time
                name = numpy.dtype(v).name
            except Exception:                                # noqa: BLE001 (not a dtype)
                name = None
        if isinstance(name, str) and name in ArrayFormatType._value2member_map_:
            return ArrayFormatType(name)
    raise ValueError(f"format {v!r}: an ArrayFormatType, one of "
                     f"{', '.join(repr(m.value) for m in ArrayFormatType)}, or a numpy dtype of one")


def _shape_tuple(shape) -> tuple:
    if isinstance(shape, (int, str, bytes)) or not hasattr(shape, "__iter__"):
        raise TypeError(f"shape must be a tuple of 1 to 3 ints, not {type(shape).__name__}")
    out = tuple(shape)
    if not 1 <= len(out) <= 3:
        raise ValueError(f"shape {out}: (width,), (width, height) or (width, height, depth)")
    for e in out:
        if isinstance(e, bool) or not isinstance(e, int):
            raise TypeError(f"shape {out}: every extent must be an int")
        if e < 1:
            raise ValueError(f"shape {out}: every extent must be >= 1")
    return out


def _channels(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"num_channels must be an int, not {type(n).__name__}")
    if n not in (1, 2, 4):
        raise ValueError(f"num_channels {n}: 1, 2 or 4")
    return n


@dataclass
class OpaqueArrayOptions:
    """cuda.core's OpaqueArrayOptions (Device.create_opaque_array): shape
    (width[, height[, depth]]) in elements, format (an ArrayFormatType, its
    string or a numpy dtype), num_channels (1, 2 or 4),
    is_surface_load_store. Checked when made: shape becomes a tuple, format
    an ArrayFormatType."""
    shape: tuple
    format: object
    num_channels: int
    is_surface_load_store: bool = False

    def __post_init__(self):
        self.shape = _shape_tuple(self.shape)
        self.format = _array_format_type(self.format)
        self.num_channels = _channels(self.num_channels)
        self.is_surface_load_store = bool(self.is_surface_load_store)


@dataclass
class MipmappedArrayOptions:
    """cuda.core's MipmappedArrayOptions (Device.create_mipmapped_array):
    OpaqueArrayOptions's fields for level 0, and num_levels (>= 1; more
    than the largest extent allows is the driver's error)."""
    shape: tuple
    format: object
    num_channels: int
    num_levels: int
    is_surface_load_store: bool = False

    def __post_init__(self):
        self.shape = _shape_tuple(self.shape)
        self.format = _array_format_type(self.format)
        self.num_channels = _channels(self.num_channels)
        if isinstance(self.num_levels, bool) or not isinstance(self.num_levels, int):
            raise TypeError(f"num_levels must be an int, not {type(self.num_levels).__name__}")
        if self.num_levels < 1:
            raise ValueError(f"num_levels {self.num_levels}: at least 1")
        self.is_surface_load_store = bool(self.is_surface_load_store)


def _str_enum(name, value, enum_type):
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        try:
            return enum_type(value)
        except ValueError:
            pass
    raise ValueError(f"{name} {value!r}: one of "
                     f"{', '.join(repr(m.value) for m in enum_type)} ({enum_type.__name__})")


@dataclass
class TextureObjectOptions:
    """cuda.core's TextureObjectOptions (Device.create_texture_object): how a
    texture samples (CUDA_TEXTURE_DESC). The modes are cuabi.typing's
    AddressModeType / FilterModeType / ReadModeType or their strings;
    address_mode one mode for every axis or a tuple of 1 to 3; border_color
    4 floats or None (zero). cuabi's TextureDescriptor holds the same fields
    with cuabi's IntEnum modes."""
    address_mode: object = AddressModeType.CLAMP
    filter_mode: object = FilterModeType.POINT
    read_mode: object = ReadModeType.ELEMENT_TYPE
    normalized_coords: bool = False
    srgb: bool = False
    disable_trilinear_optimization: bool = False
    seamless_cubemap: bool = False
    max_anisotropy: int = 0
    mipmap_filter_mode: object = FilterModeType.POINT
    mipmap_level_bias: float = 0.0
    min_mipmap_level_clamp: float = 0.0
    max_mipmap_level_clamp: float = 0.0
    border_color: tuple | None = None

    def __post_init__(self):
        m = self.address_mode
        if isinstance(m, (str, AddressModeType)):
            self.address_mode = _str_enum("address_mode", m, AddressModeType)
        else:
            if not isinstance(m, (tuple, list)) or not 1 <= len(m) <= 3:
                raise ValueError(f"address_mode {m!r}: one AddressModeType, or a tuple of 1 "
                                 "to 3 of them")
            self.address_mode = tuple(_str_enum("address_mode", x, AddressModeType) for x in m)
        self.filter_mode = _str_enum("filter_mode", self.filter_mode, FilterModeType)
        self.read_mode = _str_enum("read_mode", self.read_mode, ReadModeType)
        self.mipmap_filter_mode = _str_enum("mipmap_filter_mode", self.mipmap_filter_mode,
                                            FilterModeType)
        if isinstance(self.max_anisotropy, bool) or not isinstance(self.max_anisotropy, int):
            raise TypeError("max_anisotropy must be an int")
        if self.max_anisotropy < 0:
            raise ValueError(f"max_anisotropy {self.max_anisotropy}: 0 (off) or more")
        if self.border_color is not None:
            bc = tuple(float(x) for x in self.border_color)
            if len(bc) != 4:
                raise ValueError(f"border_color {self.border_color!r}: 4 floats (r, g, b, a)")
            self.border_color = bc

    def _descriptor(self) -> TextureDescriptor:
        """The same sampling as cuabi's TextureDescriptor."""
        m = self.address_mode
        modes = (AddressMode[m.name] if isinstance(m, AddressModeType)
                 else tuple(AddressMode[x.name] for x in m))
        return TextureDescriptor(
            address_mode=modes, filter_mode=FilterMode[self.filter_mode.name],
            read_mode=ReadMode[self.read_mode.name], normalized_coords=self.normalized_coords,
            srgb=self.srgb, disable_trilinear_optimization=self.disable_trilinear_optimization,
            seamless_cubemap=self.seamless_cubemap, max_anisotropy=self.max_anisotropy,
            mipmap_filter_mode=FilterMode[self.mipmap_filter_mode.name],
            mipmap_level_bias=self.mipmap_level_bias,
            min_mipmap_level_clamp=self.min_mipmap_level_clamp,
            max_mipmap_level_clamp=self.max_mipmap_level_clamp, border_color=self.border_color)

    @classmethod
    def _of(cls, d: TextureDescriptor) -> "TextureObjectOptions":
        """The options of a TextureDescriptor (TextureObject.options of a
        texture made by cuabi's constructors)."""
        m = d.address_mode
        modes = (AddressModeType[AddressMode(m).name] if isinstance(m, int)
                 else tuple(AddressModeType[AddressMode(x).name] for x in m))
        return cls(address_mode=modes, filter_mode=FilterModeType[FilterMode(d.filter_mode).name],
                   read_mode=ReadModeType[ReadMode(d.read_mode).name],
                   normalized_coords=bool(d.normalized_coords), srgb=bool(d.srgb),
                   disable_trilinear_optimization=bool(d.disable_trilinear_optimization),
                   seamless_cubemap=bool(d.seamless_cubemap), max_anisotropy=d.max_anisotropy,
                   mipmap_filter_mode=FilterModeType[FilterMode(d.mipmap_filter_mode).name],
                   mipmap_level_bias=d.mipmap_level_bias,
                   min_mipmap_level_clamp=d.min_mipmap_level_clamp,
                   max_mipmap_level_clamp=d.max_mipmap_level_clamp,
                   border_color=d.border_color)


def _options_of(cls, options, what):
    if isinstance(options, cls):
        return options
    if isinstance(options, dict):
        return cls(**options)
    raise TypeError(f"{what}: options must be a {cls.__name__} (or a dict of its fields), not "
                    f"{type(options).__name__}")


class _Factories:
    """Device.create_opaque_array, create_mipmapped_array,
    create_texture_object and create_surface_object (cuda.core's factories;
    Device, a lower layer, reaches them by _lib.hooks.texture_factories_class)."""

    @staticmethod
    def opaque_array(device, options) -> OpaqueArray:
        return _create_opaque_array(device, options)

    @staticmethod
    def mipmapped_array(device, options) -> MipmappedArray:
        return _create_mipmapped_array(device, options)

    @staticmethod
    def texture_object(device, resource, options) -> TextureObject:
        return _create_texture_object(device, resource, options)

    @staticmethod
    def surface_object(device, resource) -> SurfaceObject:
        return _create_surface_object(device, resource)


def _create_opaque_array(device, options) -> OpaqueArray:
    o = _options_of(OpaqueArrayOptions, options, "create_opaque_array")
    return OpaqueArray.from_descriptor(shape=o.shape, format=o.format.value,
                                       num_channels=o.num_channels,
                                       is_surface_load_store=o.is_surface_load_store,
                                       device=device)


def _create_mipmapped_array(device, options) -> MipmappedArray:
    o = _options_of(MipmappedArrayOptions, options, "create_mipmapped_array")
    return MipmappedArray.from_descriptor(shape=o.shape, format=o.format.value,
                                          num_channels=o.num_channels, num_levels=o.num_levels,
                                          is_surface_load_store=o.is_surface_load_store,
                                          device=device)


def _create_texture_object(device, resource, options) -> TextureObject:
    if not isinstance(resource, ResourceDescriptor):
        raise TypeError("create_texture_object: resource must be a ResourceDescriptor "
                        f"(ResourceDescriptor.from_*), not {type(resource).__name__}")
    o = TextureObjectOptions() if options is None else _options_of(
        TextureObjectOptions, options, "create_texture_object")
    tex = TextureObject.from_descriptor(resource=resource, texture_descriptor=o._descriptor())
    tex._options = o
    return tex


def _create_surface_object(device, resource) -> SurfaceObject:
    return SurfaceObject.from_descriptor(resource=resource)
