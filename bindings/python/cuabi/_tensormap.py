"""TMA tensor maps (CUtensorMap) from arrays, with cuda.core's names:
TensorMapDescriptor.from_tiled / from_im2col (and View.as_tensor_map),
TensorMapDescriptorOptions and the TensorMap* enums. A descriptor is a
kernel argument by value: pass it where the kernel takes a
`const __grid_constant__ CUtensorMap` (its 128 bytes go into the launch)."""
from __future__ import annotations

import ctypes as C
import enum
from dataclasses import dataclass

from . import _capi
from ._handle import Handle
from ._lib import call, lib, new_struct
from .errors import INT_MAX, INT_MIN, U32_MAX, dims_arg, index_arg

__all__ = ["TensorMapDescriptor", "TensorMapDescriptorOptions", "TensorMapDataType",
           "TensorMapInterleave", "TensorMapSwizzle", "TensorMapL2Promotion",
           "TensorMapOOBFill"]


class TensorMapDataType(enum.IntEnum):
    """Element types (CUtensorMapDataType)."""
    UINT8 = _capi.CUABI_TENSORMAP_DATA_TYPE_UINT8
    UINT16 = _capi.CUABI_TENSORMAP_DATA_TYPE_UINT16
    UINT32 = _capi.CUABI_TENSORMAP_DATA_TYPE_UINT32
    INT32 = _capi.CUABI_TENSORMAP_DATA_TYPE_INT32
    UINT64 = _capi.CUABI_TENSORMAP_DATA_TYPE_UINT64
    INT64 = _capi.CUABI_TENSORMAP_DATA_TYPE_INT64
    FLOAT16 = _capi.CUABI_TENSORMAP_DATA_TYPE_FLOAT16
    FLOAT32 = _capi.CUABI_TENSORMAP_DATA_TYPE_FLOAT32
    FLOAT64 = _capi.CUABI_TENSORMAP_DATA_TYPE_FLOAT64
    BFLOAT16 = _capi.CUABI_TENSORMAP_DATA_TYPE_BFLOAT16
    FLOAT32_FTZ = _capi.CUABI_TENSORMAP_DATA_TYPE_FLOAT32_FTZ
    TFLOAT32 = _capi.CUABI_TENSORMAP_DATA_TYPE_TFLOAT32
    TFLOAT32_FTZ = _capi.CUABI_TENSORMAP_DATA_TYPE_TFLOAT32_FTZ


class TensorMapInterleave(enum.IntEnum):
    NONE = _capi.CUABI_TENSORMAP_INTERLEAVE_NONE
    INTERLEAVE_16B = _capi.CUABI_TENSORMAP_INTERLEAVE_16B
    INTERLEAVE_32B = _capi.CUABI_TENSORMAP_INTERLEAVE_32B


class TensorMapSwizzle(enum.IntEnum):
    NONE = _capi.CUABI_TENSORMAP_SWIZZLE_NONE
    SWIZZLE_32B = _capi.CUABI_TENSORMAP_SWIZZLE_32B
    SWIZZLE_64B = _capi.CUABI_TENSORMAP_SWIZZLE_64B
    SWIZZLE_128B = _capi.CUABI_TENSORMAP_SWIZZLE_128B
    SWIZZLE_128B_ATOM_32B = _capi.CUABI_TENSORMAP_SWIZZLE_128B_ATOM_32B
    SWIZZLE_128B_ATOM_32B_FLIP_8B = _capi.CUABI_TENSORMAP_SWIZZLE_128B_ATOM_32B_FLIP_8B
    SWIZZLE_128B_ATOM_64B = _capi.CUABI_TENSORMAP_SWIZZLE_128B_ATOM_64B


class TensorMapL2Promotion(enum.IntEnum):
    NONE = _capi.CUABI_TENSORMAP_L2_PROMOTION_NONE
    L2_64B = _capi.CUABI_TENSORMAP_L2_PROMOTION_64B
    L2_128B = _capi.CUABI_TENSORMAP_L2_PROMOTION_128B
    L2_256B = _capi.CUABI_TENSORMAP_L2_PROMOTION_256B


class TensorMapOOBFill(enum.IntEnum):
    NONE = _capi.CUABI_TENSORMAP_OOB_FILL_NONE
    NAN_REQUEST_ZERO_FMA = _capi.CUABI_TENSORMAP_OOB_FILL_NAN_REQUEST_ZERO_FMA


# dtype names -> the element type of that name (for data_type="float32" etc.)
_BY_DTYPE = {"uint8": TensorMapDataType.UINT8, "uint16": TensorMapDataType.UINT16,
             "uint32": TensorMapDataType.UINT32, "int32": TensorMapDataType.INT32,
             "uint64": TensorMapDataType.UINT64, "int64": TensorMapDataType.INT64,
             "float16": TensorMapDataType.FLOAT16, "float32": TensorMapDataType.FLOAT32,
             "float64": TensorMapDataType.FLOAT64, "bfloat16": TensorMapDataType.BFLOAT16}


def _data_type(v) -> int:
    if v is None:
        return _capi.CUABI_TENSORMAP_DATA_TYPE_AUTO
    if isinstance(v, (TensorMapDataType, int)):
        return int(TensorMapDataType(v))
    name = getattr(v, "name", None) or str(v)     # numpy / ml_dtypes dtypes, or a name
    try:
        return int(_BY_DTYPE[name])
    except KeyError:
        raise ValueError(f"data_type {v!r} has no TMA element type; use one of "
                         f"{', '.join(_BY_DTYPE)} or a TensorMapDataType") from None


@dataclass
class TensorMapDescriptorOptions:
    """How a tiled descriptor reads its tensor (cuda.core's fields): the
    box, and optionally element strides, element type, interleave,
    swizzle, L2 promotion and out-of-bounds fill. Box and element strides
    are in the tensor's order (outermost first, as its shape)."""
    box_dim: tuple
    element_strides: tuple | None = None
    data_type: object = None
    interleave: TensorMapInterleave = TensorMapInterleave.NONE
    swizzle: TensorMapSwizzle = TensorMapSwizzle.NONE
    l2_promotion: TensorMapL2Promotion = TensorMapL2Promotion.NONE
    oob_fill: TensorMapOOBFill = TensorMapOOBFill.NONE

    def __post_init__(self):
        self.box_dim = dims_arg(self.box_dim, "box_dim", 0, U32_MAX)
        if self.element_strides is not None:
            self.element_strides = dims_arg(self.element_strides, "element_strides", 0, U32_MAX)
        self.interleave = TensorMapInterleave(self.interleave)
        self.swizzle = TensorMapSwizzle(self.swizzle)
        self.l2_promotion = TensorMapL2Promotion(self.l2_promotion)
        self.oob_fill = TensorMapOOBFill(self.oob_fill)


def _c_options(rank, element_strides, data_type, interleave, swizzle, l2_promotion, oob_fill,
               device):
    o = new_struct(_capi.cuabi_tensormap_options)
    o.data_type = _data_type(data_type)
    if element_strides is not None:
        es = dims_arg(element_strides, "element_strides", 0, U32_MAX, length=rank)
        o.element_strides[:len(es)] = es
    o.interleave = int(TensorMapInterleave(interleave))
    o.swizzle = int(TensorMapSwizzle(swizzle))
    o.l2_promotion = int(TensorMapL2Promotion(l2_promotion))
    o.oob_fill = int(TensorMapOOBFill(oob_fill))
    o.device = -1 if device is None else index_arg(getattr(device, "ordinal", device),
                                                    "device", 0, INT_MAX)
    return o


def _as_view(tensor):
    from ._view import View          # lazy: import time (the enums and options need no view)
    return tensor if isinstance(tensor, View) else View(tensor)


class TensorMapDescriptor(Handle):
    """A TMA descriptor of a tensor in GPU memory (compute capability 9.0+).

    Made by from_tiled() / from_im2col() (or View.as_tensor_map()); a broken
    TMA rule raises TensorMapError naming it. The descriptor keeps the
    tensor alive. Pass it to a kernel as an argument; replace_address()
    points it at another tensor of the same layout."""

    _ctype = "cuabi_tensormap"
    __slots__ = ("_view", "_source")

    def __init__(self, *args, **kwargs):
        raise TypeError("make a TensorMapDescriptor with TensorMapDescriptor.from_tiled(), "
                        ".from_im2col() or View.as_tensor_map()")

    @classmethod
    def _make(cls, h, view, source):
        obj = cls.__new__(cls)
        Handle.__init__(obj, h)
        obj._view, obj._source = view, source
        return obj

    @classmethod
    def from_tiled(cls, tensor, box_dim=None, *, options=None, element_strides=None,
                   data_type=None, interleave=TensorMapInterleave.NONE,
                   swizzle=TensorMapSwizzle.NONE, l2_promotion=TensorMapL2Promotion.NONE,
                   oob_fill=TensorMapOOBFill.NONE, device=None) -> "TensorMapDescriptor":
        """A tiled descriptor: each copy moves a box of `box_dim` elements
        (one per dimension of `tensor`, outermost first, 1..256 each).
        `tensor` is a View or anything View() takes (DLPack, CUDA array
        interface: torch, CuPy, ...). `options` (TensorMapDescriptorOptions)
        replaces the keywords. `device` picks the GPU for pinned or managed
        memory (default: the tensor's, device 0 for those)."""
        if options is not None:
            if box_dim is not None or element_strides is not None or data_type is not None:
                raise TypeError("give either options or the individual arguments, not both")
            o = options if isinstance(options, TensorMapDescriptorOptions) else \
                TensorMapDescriptorOptions(**options)
            box_dim, element_strides, data_type = o.box_dim, o.element_strides, o.data_type
            interleave, swizzle, l2_promotion, oob_fill = (o.interleave, o.swizzle,
                                                          o.l2_promotion, o.oob_fill)
        if box_dim is None:
            raise TypeError("box_dim is required unless options is given")
        view = _as_view(tensor)
        box = dims_arg(box_dim, "box_dim", 0, U32_MAX)
        c_opts = _c_options(view.ndim, element_strides, data_type, interleave, swizzle,
                            l2_promotion, oob_fill, device)
        arr = (C.c_uint32 * max(len(box), 1))(*box)
        h = call("cuabi_tensormap_encode_tiled", view, arr, len(box), C.byref(c_opts))
        return cls._make(h, view, tensor)

    @classmethod
    def from_im2col(cls, tensor, pixel_box_lower_corner, pixel_box_upper_corner,
                    channels_per_pixel: int, pixels_per_column: int, *, element_strides=None,
                    data_type=None, interleave=TensorMapInterleave.NONE,
                    swizzle=TensorMapSwizzle.NONE, l2_promotion=TensorMapL2Promotion.NONE,
                    oob_fill=TensorMapOOBFill.NONE, device=None) -> "TensorMapDescriptor":
        """An im2col descriptor of an N, spatial..., C tensor (rank 3 to 5):
        the corners offset the bounding box per spatial dimension (tensor
        order); a copy gathers `pixels_per_column` pixels of
        `channels_per_pixel` channels."""
        view = _as_view(tensor)
        lower = dims_arg(pixel_box_lower_corner, "pixel_box_lower_corner", INT_MIN, INT_MAX)
        upper = dims_arg(pixel_box_upper_corner, "pixel_box_upper_corner", INT_MIN, INT_MAX)
        if len(lower) != len(upper):
            raise ValueError("pixel_box_lower_corner and pixel_box_upper_corner differ in length")
        c_opts = _c_options(view.ndim, element_strides, data_type, interleave, swizzle,
                            l2_promotion, oob_fill, device)
        n = max(len(lower), 1)
        h = call("cuabi_tensormap_encode_im2col", view, (C.c_int * n)(*lower),
                 (C.c_int * n)(*upper), len(lower),
                 index_arg(channels_per_pixel, "channels_per_pixel", 0, U32_MAX),
                 index_arg(pixels_per_column, "pixels_per_column", 0, U32_MAX), C.byref(c_opts))
        return cls._make(h, view, tensor)

    def replace_address(self, tensor) -> None:
        """Point the descriptor at `tensor`: same element size, shape,
        strides and device; only the address changes."""
        view = _as_view(tensor)
        lib.cuabi_tensormap_replace_address(self, view)
        self._view, self._source = view, tensor

    def tobytes(self) -> bytes:
        """The 128-byte CUtensorMap a kernel receives."""
        buf = C.create_string_buffer(_capi.CUABI_TENSORMAP_BYTES)
        lib.cuabi_tensormap_bytes(buf, len(buf.raw), self)
        return buf.raw

    __bytes__ = tobytes

    @property
    def info(self):
        """The cuabi_tensormap_info: kind, data_type, rank, address, shape,
        byte_strides, box, element_strides, interleave, swizzle, ..."""
        out = new_struct(_capi.cuabi_tensormap_info)
        lib.cuabi_tensormap_get_info(C.byref(out), self)
        return out

    @property
    def data_type(self) -> TensorMapDataType:
        return TensorMapDataType(self.info.data_type)

    @property
    def device(self):
        from ._core import Device        # lazy: import time
        return Device(self.info.device)

    def __repr__(self):
        if self.closed:
            return "TensorMapDescriptor(closed)"
        i = self.info
        kind = "tiled" if i.kind == _capi.CUABI_TENSORMAP_TILED else "im2col"
        return (f"TensorMapDescriptor({kind}, rank={i.rank}, "
                f"dtype={TensorMapDataType(i.data_type).name}, "
                f"swizzle={TensorMapSwizzle(i.swizzle).name})")
