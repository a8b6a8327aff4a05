"""cuda.core.typing's names, as cuabi has them: `from cuabi.typing import
ArrayFormatType, AddressModeType, ...` (a cuda.core program changes only its
import). The enumerations are string enums whose values are cuda.core's
strings ("float32", "clamp", "nvJitLink", ...): cuabi's functions take a
member, or the plain string, wherever cuda.core does (texture options, the
virtual-memory options, code types, Program.backend). The type aliases and
the stream protocol are for annotations. Imports no cuabi module."""
from __future__ import annotations

import enum
import sys
from typing import Literal, Protocol, Sequence, Union, runtime_checkable

__all__ = [
    "AddressModeType", "ArrayFormatType", "CompilerBackendType", "DevicePointerType",
    "DeviceResourcesType", "FilterModeType", "GraphConditionalType", "GraphMemoryType",
    "IsStreamType", "ManagedMemoryLocationType", "ObjectCodeFormatType", "PCHStatusType",
    "ProcessStateType", "ReadModeType", "SourceCodeType", "VirtualMemoryAccessType",
    "VirtualMemoryAllocationType", "VirtualMemoryGranularityType", "VirtualMemoryHandleType",
    "VirtualMemoryLocationType", "WorkqueueSharingScopeType",
]

if sys.version_info >= (3, 11):
    _StrEnum = enum.StrEnum
else:                                                   # Python 3.10
    class _StrEnum(str, enum.Enum):
        """A str whose members print as their values (enum.StrEnum of 3.11)."""

        def __str__(self):
            return str(self.value)

        def __format__(self, spec):
            return format(str(self.value), spec)


@runtime_checkable
class IsStreamType(Protocol):
    """Anything that is a CUDA stream: __cuda_stream__() returns (0, the
    CUstream's address) (cuabi.Stream, cuabi.GraphBuilder, CuPy's and
    torch's streams)."""

    def __cuda_stream__(self) -> tuple[int, int]: ...


# Buffer.handle: the device pointer as an int (None: no memory).
DevicePointerType = Union[int, None]

# ContextOptions.resources: the resources a green context is made of
# (SMResource groups of DeviceResources.sm.split).
DeviceResourcesType = Sequence["SMResource"]

# checkpoint.Process.state's values.
ProcessStateType = Literal["running", "locked", "checkpointed", "failed"]


class SourceCodeType(_StrEnum):
    """What a Program compiles: C++ source, PTX text or NVVM IR."""
    CXX = "c++"
    PTX = "ptx"
    NVVM = "nvvm"


class ObjectCodeFormatType(_StrEnum):
    """What Program.compile / Linker.link make, and ObjectCode.code_type."""
    PTX = "ptx"
    CUBIN = "cubin"
    LTOIR = "ltoir"
    FATBIN = "fatbin"
    OBJECT = "object"
    LIBRARY = "library"


class CompilerBackendType(_StrEnum):
    """Program.backend: the compiler behind a program's code type."""
    NVRTC = "NVRTC"
    NVVM = "NVVM"
    NVJITLINK = "nvJitLink"
    DRIVER = "driver"


class PCHStatusType(_StrEnum):
    """What became of a precompiled header."""
    CREATED = "created"
    NOT_ATTEMPTED = "not_attempted"
    FAILED = "failed"


class GraphConditionalType(_StrEnum):
    """The kinds of conditional graph nodes."""
    IF = "if"
    WHILE = "while"
    SWITCH = "switch"


class GraphMemoryType(_StrEnum):
    """Where a graph's allocation node allocates."""
    DEVICE = "device"
    HOST = "host"
    MANAGED = "managed"


class ManagedMemoryLocationType(_StrEnum):
    """The kinds of destination of managed-memory prefetch and advice."""
    DEVICE = "device"
    HOST = "host"
    HOST_NUMA = "host_numa"


class VirtualMemoryHandleType(_StrEnum):
    """VirtualMemoryResourceOptions.handle_type: how an allocation is shared."""
    POSIX_FD = "posix_fd"
    WIN32_KMT = "win32_kmt"
    FABRIC = "fabric"


class VirtualMemoryLocationType(_StrEnum):
    """VirtualMemoryResourceOptions.location_type: where the memory lives."""
    DEVICE = "device"
    HOST = "host"
    HOST_NUMA = "host_numa"
    HOST_NUMA_CURRENT = "host_numa_current"


class VirtualMemoryGranularityType(_StrEnum):
    """VirtualMemoryResourceOptions.granularity."""
    MINIMUM = "minimum"
    RECOMMENDED = "recommended"


class VirtualMemoryAccessType(_StrEnum):
    """Access of a device to a virtual-memory mapping."""
    READ_WRITE = "rw"
    READ = "r"


class VirtualMemoryAllocationType(_StrEnum):
    """VirtualMemoryResourceOptions.allocation_type."""
    PINNED = "pinned"
    MANAGED = "managed"


class ArrayFormatType(_StrEnum):
    """The element formats of an OpaqueArray cuda.core names (each a numpy
    dtype); cuabi.texture.ArrayFormat has every CUarray_format."""
    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    FLOAT16 = "float16"
    FLOAT32 = "float32"


class AddressModeType(_StrEnum):
    """What a texture returns for coordinates outside it."""
    WRAP = "wrap"
    CLAMP = "clamp"
    MIRROR = "mirror"
    BORDER = "border"


class FilterModeType(_StrEnum):
    """Texel sampling: the nearest texel, or linear interpolation."""
    POINT = "point"
    LINEAR = "linear"


class ReadModeType(_StrEnum):
    """ELEMENT_TYPE: the element as stored; NORMALIZED_FLOAT: integers as
    floats in [0, 1] (unsigned) or [-1, 1] (signed)."""
    ELEMENT_TYPE = "element_type"
    NORMALIZED_FLOAT = "normalized_float"


class WorkqueueSharingScopeType(_StrEnum):
    """How a green context shares the device's work queues."""
    DEVICE_CTX = "device_ctx"
    GREEN_CTX_BALANCED = "green_ctx_balanced"
