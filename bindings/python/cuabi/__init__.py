"""cuabi: CUDA through libcuabi's stable C ABI, from Python.

The ctypes layer (cuabi._capi, generated from the API description) is
checked against the loaded library at import; see docs/python.md. Modules
are exposed as the API description (and so the library) provides them.
"""
from . import _capi
from . import errors
from .errors import CuabiError, CuabiImportError, ClosedHandleError, ERRORS
from .errors import *  # noqa: F401,F403  (one exception class per status)
from ._lib import LIBRARY_PATH, backend, backend_note, status_name, status_message
from ._core import (Device, Event, Stream, abi_version, device_count, raw_stream_of,
                    runtime_info, version)


def _has(fn: str) -> bool:
    return fn in _capi.FUNCTIONS


if _has("cuabi_argpack_create"):
    from ._argpack import ArgPack, Packer, device_pointer  # noqa: F401
if _has("cuabi_buffer_allocate"):
    from ._memory import Buffer, MemoryResource, default_resource  # noqa: F401
if _has("cuabi_objcode_from_memory"):
    from ._compile import ObjectCode, Kernel, Linker, LinkerOptions  # noqa: F401
if _has("cuabi_program_compile"):
    from ._compile import Program, ProgramOptions, cache, supported_archs  # noqa: F401
if _has("cuabi_arch_limits_get"):
    from ._occupancy import arch_limits, known_archs  # noqa: F401
if _has("cuabi_prepared_create"):
    from ._launch import LaunchConfig, PreparedLaunch, launch, prepare  # noqa: F401
    from ._launch import AccessPolicyWindow  # noqa: F401
if _has("cuabi_graph_create"):
    from ._graph import (CompleteOptions, Graph, GraphBuilder, GraphExec,  # noqa: F401
                         GraphNode)
if _has("cuabi_view_create"):
    from ._view import View, from_dlpack  # noqa: F401
if _has("cuabi_tensormap_encode_tiled"):
    from ._tensormap import (TensorMapDescriptor, TensorMapDescriptorOptions,  # noqa: F401
                             TensorMapDataType, TensorMapInterleave, TensorMapSwizzle,
                             TensorMapL2Promotion, TensorMapOOBFill)

__version__ = version()
