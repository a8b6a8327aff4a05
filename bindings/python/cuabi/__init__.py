"""cuabi: CUDA through libcuabi's stable C ABI, from Python.

The ctypes layer (cuabi._capi, generated from the API description) and the
compiled fast path (cuabi._fast) are checked against the loaded library at
import; see docs/python.md. Modules are exposed as the API description (and
so the library) provides them, and imported on first use: `import cuabi`
loads the library and the exceptions, and cuabi.Program, cuabi.launch, ...
import their modules when first named.
"""
# The package's modules form layers, each importing only the ones below it;
# this module is the top (cuabi/README.md).
from . import _capi
from . import errors
from .errors import CuabiError, CuabiImportError, ClosedHandleError, ERRORS
from .errors import *  # noqa: F401,F403  (one exception class per status)
from ._lib import LIBRARY_PATH, backend, backend_note, status_name, status_message
from ._lib import hooks as _hooks

# name -> (module, function of the description it needs): imported on first use.
_LAZY = {}
for _names, _module, _needs in (
        (("Device", "Event", "Stream", "abi_version", "device_count", "raw_stream_of",
          "runtime_info", "version", "ComputeCapability", "DeviceProperties", "Context",
          "StreamOptions", "EventOptions", "LEGACY_DEFAULT_STREAM",
          "PER_THREAD_DEFAULT_STREAM"), "_core", "cuabi_version_string"),
        (("ArgPack", "Packer", "device_pointer"), "_argpack", "cuabi_argpack_create"),
        (("Buffer", "MemoryResource", "default_resource", "DeviceMemoryResource",
          "DeviceMemoryResourceOptions", "LegacyPinnedMemoryResource", "PinnedMemoryResource",
          "PinnedMemoryResourceOptions", "GraphMemoryResource"), "_memory",
         "cuabi_buffer_allocate"),
        (("IPCAllocationHandle",), "_ipc_pool", "cuabi_ipc_pool_create"),
        (("GreenContext", "ContextOptions", "DeviceResources", "SMResource", "SMResourceOptions",
          "WorkqueueResource", "WorkqueueResourceOptions"),
         "_green", "cuabi_green_ctx_create"),
        (("system",), "_system", "cuabi_nvml_device_count"),
        (("Host", "VirtualMemoryResource", "VirtualMemoryResourceOptions",
          "ManagedMemoryResource", "ManagedMemoryResourceOptions", "ManagedBuffer", "copy_batch",
          "CopyOptions", "MemcpySrcAccessOrder", "MemcpyOverlapMode", "CopyBatchResult"),
         "_memory_ext", "cuabi_vmm_resource_create"),
        (("ObjectCode", "Kernel", "Linker", "LinkerOptions"), "_compile",
         "cuabi_objcode_from_memory"),
        (("Program", "ProgramOptions", "cache", "supported_archs"), "_compile",
         "cuabi_program_compile"),
        (("arch_limits", "known_archs", "KernelOccupancy", "OfflineOccupancy",
          "OccupancyReport", "MaxPotentialBlockSizeOccupancyResult", "GridWaves"), "_occupancy",
         "cuabi_arch_limits_get"),
        (("LaunchConfig", "PreparedLaunch", "launch", "prepare", "AccessPolicyWindow"),
         "_launch", "cuabi_prepared_create"),
        (("CompleteOptions", "Graph", "GraphBuilder", "GraphExec", "GraphNode", "host_launch",
          "GraphCompleteOptions"), "_graph", "cuabi_graph_create"),
        (("View", "from_dlpack", "StridedMemoryView", "args_viewable_as_strided_memory"),
         "_view", "cuabi_view_create"),
        (("Communicator", "get_unique_id", "nccl_version", "nccl_group", "TCPStore",
          "FileStore"), "_nccl", "cuabi_nccl_comm_init_rank"),
        (("TensorMapDescriptor", "TensorMapDescriptorOptions", "TensorMapDataType",
          "TensorMapInterleave", "TensorMapSwizzle", "TensorMapL2Promotion",
          "TensorMapOOBFill"), "_tensormap", "cuabi_tensormap_encode_tiled"),
        (("OpaqueArray", "MipmappedArray", "ResourceDescriptor", "TextureDescriptor",
          "TextureObject", "SurfaceObject", "ArrayFormat", "AddressMode", "FilterMode",
          "ReadMode"), "_texture", "cuabi_texture_create_from_array")):
    if _needs in _capi.FUNCTIONS:
        _LAZY.update(dict.fromkeys(_names, _module))
del _names, _module, _needs


def _set_hooks():
    """cuabi._lib.hooks: the classes lower layers hand out from higher ones.
    Each hook imports its module on first use (lazy: `import cuabi` loads
    none of them)."""
    def capture_class():
        from ._graph import _Capture                     # lazy: import time
        return _Capture

    def graph_builder_class():
        from ._graph import GraphBuilder                 # lazy: import time
        return GraphBuilder

    def view_class():
        from ._view import View                          # lazy: import time
        return View

    def tensor_map_class():
        from ._tensormap import TensorMapDescriptor      # lazy: import time
        return TensorMapDescriptor

    def memory_resource_class():
        from ._memory import MemoryResource              # lazy: import time
        return MemoryResource

    def buffer_class():
        from ._memory import Buffer                      # lazy: import time
        return Buffer

    def green_context_class():
        from ._green import GreenContext                 # lazy: import time
        return GreenContext

    def device_resources_class():
        from ._green import DeviceResources              # lazy: import time
        return DeviceResources

    def texture_factories_class():
        from ._texture import _Factories                 # lazy: import time
        return _Factories

    def graph_def_module():
        from . import _graph_def                         # lazy: import time
        return _graph_def

    def system_device_class():
        from ._system import Device                      # lazy: import time
        return Device

    for hook in (capture_class, graph_builder_class, view_class, tensor_map_class,
                 memory_resource_class, buffer_class, green_context_class,
                 device_resources_class, texture_factories_class, graph_def_module,
                 system_device_class):
        setattr(_hooks, hook.__name__, hook)


_set_hooks()
del _set_hooks, _hooks


# Public submodules, imported on first use: cuabi.checkpoint (cuda.core's
# cuda.core.checkpoint).
_SUBMODULES = {"checkpoint": "cuabi_checkpoint_process_state"}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None and name in _SUBMODULES and _SUBMODULES[name] in _capi.FUNCTIONS:
        import importlib                                 # lazy: import time
        value = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = value
        return value
    if module is None:
        if name in ("utils", "graph", "texture", "typing"):   # cuda.core's submodules
            import importlib                             # lazy: import time
            return importlib.import_module(f"{__name__}.{name}")
        if name == "__version__":
            from ._core import version                   # lazy: import time
            globals()["__version__"] = v = version()
            return v
        raise AttributeError(f"module 'cuabi' has no attribute {name!r}")
    import importlib                                     # lazy: import time
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value            # later uses are plain attribute reads
    if module == "_core" and "_graph" in _LAZY.values():
        # The graph module loads with the core (devices and streams), as
        # cuda.core's graph modules load with its package: a process's first
        # stream capture pays no import (issue 24; docs/PERFORMANCE.md).
        importlib.import_module(f"{__name__}._graph")
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES) | {"__version__"})


# (the default streams need a driver to exist: not in `from cuabi import *`)
__all__ = sorted(set(_LAZY) - {"LEGACY_DEFAULT_STREAM", "PER_THREAD_DEFAULT_STREAM"} | {"CuabiError", "CuabiImportError", "ClosedHandleError",
                               "ERRORS", "LIBRARY_PATH", "backend", "backend_note",
                               "status_name", "status_message"})
