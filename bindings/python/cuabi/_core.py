"""Library information, devices, streams and events."""
from __future__ import annotations

import contextlib
import ctypes as C
import os
import threading
from collections import namedtuple
from dataclasses import dataclass

from . import _capi
from ._handle import Handle
from ._lib import call, fast, holding, hooks, lib, new_struct, struct_to_dict
from .errors import INT_MAX, INT_MIN, U32_MAX, U64_MAX, bytes_arg, index_arg


def version() -> str:
    """libcuabi's version, "MAJOR.MINOR.PATCH"."""
    return lib.cuabi_version_string().decode()


def abi_version() -> int:
    return lib.cuabi_abi_version()


def runtime_info() -> dict:
    """What the library found: driver, NVRTC, nvJitLink, libNVVM (nvvm_*)
    and nvFatbin (nvfatbin_*) versions, paths, and why any of them is
    unusable (``<lib>_status`` 0: usable, else ``<lib>_error`` says why)."""
    info = new_struct(_capi.cuabi_runtime_info)
    lib.cuabi_runtime_info_get(C.byref(info))
    d = struct_to_dict(info)
    d.pop("version", None)
    return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in d.items()}


def device_count() -> int:
    """Number of visible GPUs (0 with a driver but no GPU); raises
    DriverNotFoundError without a driver."""
    return call("cuabi_device_count")


# cuabi_graph_capture_status values (Stream.capture_status; cuabi._graph's
# capture_status() reads them through it).
_CAPTURE_STATUS = {_capi.CUABI_CAPTURE_STATUS_NONE: "none",
                   _capi.CUABI_CAPTURE_STATUS_ACTIVE: "active",
                   _capi.CUABI_CAPTURE_STATUS_INVALIDATED: "invalidated"}

# The device each thread made current (Device.set_current keeps it alive).
_current = threading.local()


ComputeCapability = namedtuple("ComputeCapability", ("major", "minor"))
ComputeCapability.__doc__ = "cuda.core's ComputeCapability: (major, minor), a tuple."

# cuda.core's DeviceProperties names: each a CUdevice_attribute (the name,
# upper-cased, after CU_DEVICE_ATTRIBUTE_), read through cuabi_device_attribute.
_INT_PROPERTIES = {
    "max_threads_per_block": 1,
    "max_block_dim_x": 2,
    "max_block_dim_y": 3,
    "max_block_dim_z": 4,
    "max_grid_dim_x": 5,
    "max_grid_dim_y": 6,
    "max_grid_dim_z": 7,
    "max_shared_memory_per_block": 8,
    "total_constant_memory": 9,
    "warp_size": 10,
    "max_pitch": 11,
    "maximum_texture1d_width": 21,
    "maximum_texture1d_linear_width": 69,
    "maximum_texture1d_mipmapped_width": 77,
    "maximum_texture2d_width": 22,
    "maximum_texture2d_height": 23,
    "maximum_texture2d_linear_width": 70,
    "maximum_texture2d_linear_height": 71,
    "maximum_texture2d_linear_pitch": 72,
    "maximum_texture2d_mipmapped_width": 73,
    "maximum_texture2d_mipmapped_height": 74,
    "maximum_texture3d_width": 24,
    "maximum_texture3d_height": 25,
    "maximum_texture3d_depth": 26,
    "maximum_texture3d_width_alternate": 47,
    "maximum_texture3d_height_alternate": 48,
    "maximum_texture3d_depth_alternate": 49,
    "maximum_texturecubemap_width": 52,
    "maximum_texture1d_layered_width": 42,
    "maximum_texture1d_layered_layers": 43,
    "maximum_texture2d_layered_width": 27,
    "maximum_texture2d_layered_height": 28,
    "maximum_texture2d_layered_layers": 29,
    "maximum_texturecubemap_layered_width": 53,
    "maximum_texturecubemap_layered_layers": 54,
    "maximum_surface1d_width": 55,
    "maximum_surface2d_width": 56,
    "maximum_surface2d_height": 57,
    "maximum_surface3d_width": 58,
    "maximum_surface3d_height": 59,
    "maximum_surface3d_depth": 60,
    "maximum_surface1d_layered_width": 61,
    "maximum_surface1d_layered_layers": 62,
    "maximum_surface2d_layered_width": 63,
    "maximum_surface2d_layered_height": 64,
    "maximum_surface2d_layered_layers": 65,
    "maximum_surfacecubemap_width": 66,
    "maximum_surfacecubemap_layered_width": 67,
    "maximum_surfacecubemap_layered_layers": 68,
    "max_registers_per_block": 12,
    "clock_rate": 13,
    "texture_alignment": 14,
    "texture_pitch_alignment": 51,
    "multiprocessor_count": 16,
    "compute_mode": 20,
    "pci_bus_id": 33,
    "pci_device_id": 34,
    "pci_domain_id": 50,
    "memory_clock_rate": 36,
    "global_memory_bus_width": 37,
    "l2_cache_size": 38,
    "max_threads_per_multiprocessor": 39,
    "compute_capability_major": 75,
    "compute_capability_minor": 76,
    "max_shared_memory_per_multiprocessor": 81,
    "max_registers_per_multiprocessor": 82,
    "multi_gpu_board_group_id": 85,
    "single_to_double_precision_perf_ratio": 87,
    "max_shared_memory_per_block_optin": 97,
    "max_blocks_per_multiprocessor": 106,
    "max_persisting_l2_cache_size": 108,
    "max_access_policy_window_size": 109,
    "reserved_shared_memory_per_block": 111,
    "gpu_direct_rdma_flush_writes_options": 117,
    "gpu_direct_rdma_writes_ordering": 118,
    "mempool_supported_handle_types": 119,
    "numa_config": 130,
    "numa_id": 131,
    "surface_alignment": 30,
    "async_engine_count": 40,
    "maximum_texture2d_gather_width": 45,
    "maximum_texture2d_gather_height": 46,
    "mem_sync_domain_count": 126,
    "host_numa_id": 134,
    "mem_decompress_algorithm_mask": 136,
    "mem_decompress_maximum_length": 137,
    "gpu_pci_device_id": 139,
    "gpu_pci_subsystem_id": 140,
}
_BOOL_PROPERTIES = {
    "gpu_overlap": 15,
    "kernel_exec_timeout": 17,
    "integrated": 18,
    "can_map_host_memory": 19,
    "concurrent_kernels": 31,
    "ecc_enabled": 32,
    "tcc_driver": 35,
    "unified_addressing": 41,
    "global_l1_cache_supported": 79,
    "local_l1_cache_supported": 80,
    "managed_memory": 83,
    "multi_gpu_board": 84,
    "host_native_atomic_supported": 86,
    "pageable_memory_access": 88,
    "concurrent_managed_access": 89,
    "compute_preemption_supported": 90,
    "can_use_host_pointer_for_registered_mem": 91,
    "cooperative_launch": 95,
    "pageable_memory_access_uses_host_page_tables": 100,
    "direct_managed_mem_access_from_host": 101,
    "virtual_memory_management_supported": 102,
    "handle_type_posix_file_descriptor_supported": 103,
    "handle_type_win32_handle_supported": 104,
    "handle_type_win32_kmt_handle_supported": 105,
    "generic_compression_supported": 107,
    "gpu_direct_rdma_with_cuda_vmm_supported": 110,
    "sparse_cuda_array_supported": 112,
    "read_only_host_register_supported": 113,
    "memory_pools_supported": 115,
    "gpu_direct_rdma_supported": 116,
    "deferred_mapping_cuda_array_supported": 121,
    "multicast_supported": 132,
    "can_tex2d_gather": 44,
    "stream_priorities_supported": 78,
    "can_flush_remote_writes": 98,
    "host_register_supported": 99,
    "timeline_semaphore_interop_supported": 114,
    "cluster_launch": 120,
    "can_use_64_bit_stream_mem_ops": 122,
    "can_use_stream_wait_value_nor": 123,
    "dma_buf_supported": 124,
    "ipc_event_supported": 125,
    "tensor_map_access_supported": 127,
    "handle_type_fabric_supported": 128,
    "unified_function_pointers": 129,
    "mps_enabled": 133,
    "d3d12_cig_supported": 135,
    "vulkan_cig_supported": 138,
    "host_numa_virtual_memory_management_supported": 141,
    "host_numa_memory_pools_supported": 142,
    "host_numa_multinode_ipc_supported": 143,
    "host_memory_pools_supported": 144,
    "host_virtual_memory_management_supported": 145,
    "host_alloc_dma_buf_supported": 146,
    "only_partial_host_native_atomic_supported": 147,
}


class DeviceProperties:
    """cuda.core's Device.properties: every CUdevice_attribute under its
    cuda.core name (an int, or a bool where cuda.core gives one), read when
    asked (an attribute this driver does not know raises the driver's
    error). The cuabi_device_properties fields (name, uuid,
    compute_capability_major, max_block_dim, total_memory, ...) are there
    too, under their own names where cuda.core has none."""

    __slots__ = ("_device", "_struct")

    def __init__(self, device: "Device"):
        self._device = device
        self._struct = None

    def _fields(self) -> dict:
        d = self._struct
        if d is None:
            props = new_struct(_capi.cuabi_device_properties)
            lib.cuabi_device_get_properties(C.byref(props), self._device)
            d = struct_to_dict(props)
            d.pop("version", None)
            self._struct = d
        return d

    def __getattr__(self, name):
        a = _INT_PROPERTIES.get(name)
        if a is not None:
            return self._device.attribute(a)
        a = _BOOL_PROPERTIES.get(name)
        if a is not None:
            return bool(self._device.attribute(a))
        d = self._fields()
        if name in d:
            return d[name]
        raise AttributeError(f"DeviceProperties has no attribute {name!r}")

    def __dir__(self):
        return sorted(set(_INT_PROPERTIES) | set(_BOOL_PROPERTIES) | set(self._fields()))

    def __repr__(self):
        return f"<cuabi.DeviceProperties of device {self._device.device_id}>"


@dataclass
class StreamOptions:
    """cuda.core's StreamOptions: non-blocking by default; priority None =
    the default priority (lower numbers are higher priorities)."""
    nonblocking: bool = True
    priority: int | None = None


@dataclass
class EventOptions:
    """cuda.core's EventOptions (timing off by default)."""
    timing_enabled: bool | None = False
    blocking_sync: bool | None = False
    ipc_enabled: bool | None = False


class Context:
    """cuda.core's Context: what Device.context (the primary context,
    PrimaryContext) and Device.create_context (a green context,
    cuabi._green.GreenContext) give; `handle` is the CUcontext (an int) and
    `is_green` tells them apart. A base without state, so that both are
    instances of cuabi.Context as in cuda.core."""

    __slots__ = ()
    is_green = False

    # What every context has (cuda.core's Context); the two kinds define them.
    @property
    def handle(self) -> int:
        raise NotImplementedError

    @property
    def is_closed(self) -> bool:
        raise NotImplementedError

    def create_stream(self, options: StreamOptions | None = None) -> "Stream":
        raise NotImplementedError

    @property
    def resources(self):
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class PrimaryContext(Context):
    """A device's primary context: `handle` is the CUcontext (an int)."""

    __slots__ = ("_device", "handle")

    def __init__(self, device: "Device", raw: int):
        self._device, self.handle = device, raw

    @property
    def is_closed(self) -> bool:
        return self.handle is None

    def close(self) -> None:
        """Forget the context (a primary context stays with its device)."""
        self.handle = None

    def create_stream(self, options: StreamOptions | None = None) -> "Stream":
        return self._device.create_stream(options=options)

    @property
    def resources(self):
        """cuda.core's Context.resources: a primary context has the whole
        device's (DeviceResources: .sm, .workqueue). RuntimeError once
        closed, as cuda.core's."""
        if self.handle is None:
            raise RuntimeError("Context.resources: the context is closed")
        return hooks.device_resources_class()(self._device)

    def __eq__(self, other):
        return isinstance(other, Context) and other.handle == self.handle

    def __hash__(self):
        return hash(("Context", self.handle))

    def __int__(self):
        return self.handle

    def __repr__(self):
        return f"<cuabi.Context 0x{self.handle:x} of device {self._device.device_id}>"


def _per_thread_default() -> bool:
    """cuda.core's switch: CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM set to
    a non-zero value makes Device.default_stream the per-thread stream."""
    v = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "").strip()
    try:
        return int(v) != 0
    except ValueError:
        return v != ""


class Device(Handle):
    """One GPU and its primary context. Device(0) is the first GPU;
    Device() the current thread's device (or device 0), as in cuda.core."""

    _ctype = "cuabi_device"

    def __init__(self, device_id: "int | Device | None" = None, ordinal: int | None = None):
        if ordinal is not None:         # cuabi's keyword
            device_id = ordinal
        if isinstance(device_id, Device):
            device_id = device_id.ordinal
        if device_id is None:
            cur = getattr(_current, "device", None)
            device_id = cur.ordinal if cur is not None and not cur.closed else 0
        Handle.__init__(self, call("cuabi_device_get",
                                   index_arg(device_id, "Device: ordinal", 0, INT_MAX)))

    @property
    def ordinal(self) -> int:
        return call("cuabi_device_ordinal", self)

    device_id = ordinal         # cuda.core's name

    def __int__(self):
        return self.ordinal

    @classmethod
    def get_all_devices(cls) -> tuple:
        return tuple(cls(i) for i in range(device_count()))

    @property
    def properties(self) -> DeviceProperties:
        """cuda.core's DeviceProperties: every device attribute by its
        cuda.core name, plus cuabi's property fields (name, uuid,
        compute_capability_major, multiprocessor_count, ...)."""
        return DeviceProperties(self)

    @property
    def name(self) -> str:
        return self.properties.name

    @property
    def uuid(self) -> str:
        """The device UUID as cuda.core writes it: 8-4-4-4-12 hex digits."""
        u = bytes(self.properties.uuid).hex()
        return f"{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}"

    @property
    def pci_bus_id(self) -> str:
        """The PCI bus id, "DDDD:BB:DD.F"."""
        return self.properties._fields()["pci_bus_id"]     # (properties.pci_bus_id: the bus number)

    @property
    def compute_capability(self) -> ComputeCapability:
        p = self.properties
        return ComputeCapability(p.compute_capability_major, p.compute_capability_minor)

    @property
    def arch(self) -> str:
        """cuda.core's arch: the compute capability as digits, "90" for 9.0
        (compiler options take f"sm_{dev.arch}"; cuabi's "sm_90" is sm_arch)."""
        return "%d%d" % self.compute_capability

    @property
    def sm_arch(self) -> str:
        """"sm_90" style architecture name (cuabi's former Device.arch)."""
        return "sm_" + self.arch

    def attribute(self, attribute: int) -> int:
        return call("cuabi_device_attribute", self, int(attribute))

    def memory_info(self) -> tuple[int, int]:
        """(free, total) bytes."""
        return call("cuabi_device_memory_info", self)

    def set_current(self) -> None:
        """Make this GPU's primary context current on this thread. The
        device (and so its primary context) stays alive while it is this
        thread's current one, also when no other reference is kept
        (`cuabi.Device(0).set_current()`): otherwise the context would be
        released at once, and the next call would pay for making it again."""
        lib.cuabi_device_set_current(self)
        _current.device = self

    @contextlib.contextmanager
    def as_current(self):
        """This GPU's primary context current on this thread inside the
        `with` block, the thread's previous context (or none) after it,
        whatever happens inside (cuabi's extra: cuabi_device_push_current /
        cuabi_device_pop_current). For code that asks the runtime's current
        device: torch's tensor.__dlpack__(stream=...) refuses a tensor of
        another device than the current one, so cuabi.from_dlpack(t,
        stream=s) pushes t's device (the same C calls) around it."""
        lib.cuabi_device_push_current(self)
        before = getattr(_current, "device", None)
        _current.device = self
        try:
            yield self
        finally:
            _current.device = before
            lib.cuabi_device_pop_current(self)

    def synchronize(self) -> None:
        lib.cuabi_device_synchronize(self)

    sync = synchronize          # cuda.core's name

    @property
    def context(self) -> Context:
        """cuda.core's Context of the primary context (its `handle` is the
        CUcontext; cuabi's former int is context_handle)."""
        return PrimaryContext(self, self.context_handle)

    @property
    def context_handle(self) -> int:
        """The raw CUcontext (primary context)."""
        return call("cuabi_device_context", self)

    def stream_priority_range(self) -> tuple[int, int]:
        return call("cuabi_device_stream_priority_range", self)

    def can_access_peer(self, peer: "Device") -> bool:
        return bool(call("cuabi_device_can_access_peer", self, peer))

    # ---- several GPUs (issue 15)
    _PEER_ATTRIBUTES = {"performance_rank": 1, "access_supported": 2,
                        "native_atomic_supported": 3, "cuda_array_access_supported": 4}

    def enable_peer_access(self, peer: "Device") -> None:
        """Let kernels on this device reach memory allocated on `peer` (one
        direction; enabling twice is fine). PeerAccessError when impossible."""
        lib.cuabi_peer_enable(self, _as_device(peer))

    def disable_peer_access(self, peer: "Device") -> None:
        lib.cuabi_peer_disable(self, _as_device(peer))

    def peer_attribute(self, peer: "Device", attribute: str = "access_supported") -> int:
        """One attribute of the direction self -> peer: "performance_rank",
        "access_supported", "native_atomic_supported" or
        "cuda_array_access_supported" (or its cuabi_peer_attribute number)."""
        a = self._PEER_ATTRIBUTES[attribute] if isinstance(attribute, str) else int(attribute)
        return call("cuabi_peer_get_attribute", self, _as_device(peer), a)

    def create_stream(self, obj=None, options: StreamOptions | None = None, *,
                      non_blocking: bool | None = None, priority: int | None = None) -> "Stream":
        """cuda.core's create_stream: create_stream() a new stream (options:
        StreamOptions, non-blocking by default), create_stream(obj) wraps an
        object with `__cuda_stream__` (kept alive by the Stream). cuabi's
        keywords non_blocking= and priority= override the options."""
        if obj is not None:
            if isinstance(obj, bool):
                raise TypeError("create_stream(obj): obj is a __cuda_stream__ object; "
                                "pass non_blocking= as a keyword")
            if getattr(type(obj), "__cuda_stream__", None) is None and \
                    not isinstance(obj, Stream):
                raise TypeError(f"create_stream: {type(obj).__name__} has no __cuda_stream__")
            s = Stream.wrap(obj, self)
            if s is not obj:
                s._owner = obj
            return s
        opts = options if options is not None else StreamOptions()
        if isinstance(opts, dict):
            opts = StreamOptions(**opts)
        nb = bool(opts.nonblocking) if non_blocking is None else bool(non_blocking)
        pr = priority if priority is not None else opts.priority
        return Stream(self, non_blocking=nb, priority=0 if pr is None else pr)

    # ---- green contexts (issue 26; cuabi._green, a layer above: through
    # cuabi._lib.hooks). cuda.core's names.
    @property
    def resources(self):
        """The device's resources (cuda.core's DeviceResources): .sm, all its
        SMs, to split into partitions for green contexts."""
        return hooks.device_resources_class()(self)

    def to_system_device(self):
        """cuda.core's Device.to_system_device: the cuabi.system.Device (NVML)
        of this GPU, found by its UUID (NVML's and CUDA's are the same)."""
        return hooks.system_device_class()(uuid=self.uuid)

    def create_context(self, options=None):
        """A green context of the SM resources in `options`
        (ContextOptions(resources=[group, ...]); groups of one split)."""
        return hooks.green_context_class()._create(self, options)

    def create_event(self, options: EventOptions | None = None, *, timing: bool | None = None,
                     blocking_sync: bool | None = None) -> "Event":
        """cuda.core's create_event(options): timing off unless
        EventOptions(timing_enabled=True) (or cuabi's timing=True)."""
        opts = options if options is not None else EventOptions()
        if isinstance(opts, dict):
            opts = EventOptions(**opts)
        if opts.ipc_enabled:
            return Event.create_ipc(self)
        t = bool(opts.timing_enabled) if timing is None else bool(timing)
        b = bool(opts.blocking_sync) if blocking_sync is None else bool(blocking_sync)
        return Event(self, timing=t, blocking_sync=b)

    @property
    def default_stream(self) -> "Stream":
        """cuda.core's default_stream (a property): the legacy default stream,
        or the per-thread one when CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM
        is set. (cuabi's former method is legacy_default_stream().)"""
        if _per_thread_default():
            return self.per_thread_default_stream()
        return self.legacy_default_stream()

    def legacy_default_stream(self) -> "Stream":
        """The legacy default stream (CU_STREAM_LEGACY)."""
        return Stream._wrap(call("cuabi_stream_legacy_default", self))

    def per_thread_default_stream(self) -> "Stream":
        return Stream._wrap(call("cuabi_stream_per_thread_default", self))

    # ---- cuda.core's memory and graph entry points (classes of higher
    # layers, through cuabi._lib.hooks)
    @property
    def memory_resource(self):
        """cuda.core's Device.memory_resource: the resource Device.allocate
        uses (by default the device's default stream-ordered pool, a
        DeviceMemoryResource). Settable, per device and process."""
        mr = _memory_resources.get(self.ordinal)
        if mr is None or mr.closed:
            mr = hooks.memory_resource_class()._device_resource(self)
            _memory_resources[self.ordinal] = mr
        return mr

    @memory_resource.setter
    def memory_resource(self, mr) -> None:
        if not (hasattr(mr, "allocate") and hasattr(mr, "deallocate")):
            raise TypeError("memory_resource must be a MemoryResource")
        _memory_resources[self.ordinal] = mr

    def allocate(self, size: int, stream=None):
        """cuda.core's Device.allocate: a Buffer of `size` bytes from
        memory_resource, ordered on `stream` (None: the default stream)."""
        return self.memory_resource.allocate(size, stream=stream)

    def create_graph_builder(self):
        """cuda.core's Device.create_graph_builder: a GraphBuilder capturing
        on a new stream of this device (closed with the builder)."""
        return hooks.graph_builder_class()(self.create_stream(), owns_stream=True)

    # cuda.core's texture factories (cuabi.texture: the classes make them too)
    def create_opaque_array(self, options) -> "OpaqueArray":
        """cuda.core's Device.create_opaque_array: an OpaqueArray on this
        device as an OpaqueArrayOptions (or a dict of its fields) says."""
        return hooks.texture_factories_class().opaque_array(self, options)

    def create_mipmapped_array(self, options) -> "MipmappedArray":
        """cuda.core's Device.create_mipmapped_array: a MipmappedArray on this
        device as a MipmappedArrayOptions (or a dict of its fields) says."""
        return hooks.texture_factories_class().mipmapped_array(self, options)

    def create_texture_object(self, *, resource, options=None) -> "TextureObject":
        """cuda.core's Device.create_texture_object: a TextureObject over a
        ResourceDescriptor, sampling as a TextureObjectOptions (None: the
        defaults) says."""
        return hooks.texture_factories_class().texture_object(self, resource, options)

    def create_surface_object(self, *, resource) -> "SurfaceObject":
        """cuda.core's Device.create_surface_object: a SurfaceObject over a
        ResourceDescriptor of an OpaqueArray made with is_surface_load_store."""
        return hooks.texture_factories_class().surface_object(self, resource)


# Device.memory_resource: ordinal -> the resource set (or made) for it.
_memory_resources: dict = {}


def _as_device(device) -> Device:
    if device is None:
        return Device(0)
    if isinstance(device, Device):
        return device
    tp = type(device)
    if not hasattr(tp, "__index__") and hasattr(tp, "__int__") and not issubclass(tp, float):
        device = int(device)      # device objects of other libraries (CuPy's) convert with int()
    return Device(device)


def raw_stream_of(obj) -> int:
    """The CUstream behind a cuabi Stream, a `__cuda_stream__` object
    (cuda.core), a torch.cuda.Stream (.cuda_stream), a CuPy stream (.ptr) or
    an int."""
    if isinstance(obj, Stream):
        return obj.raw
    proto = getattr(obj, "__cuda_stream__", None)
    if proto is not None:
        return int(proto()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(obj, attr, None)
        if isinstance(v, int):
            return v
    return int(obj)


# Stream.wait(stream): the compiled backend calls the library's table
# (cuabi._fast's fast_stream.c; ctypes' conversions cost more than the two
# driver calls). Same results and errors.
if fast is not None and hasattr(fast, "stream_wait_stream"):
    _wait_stream = fast.stream_wait_stream
else:
    def _wait_stream(stream, other):
        lib.cuabi_stream_wait_stream(stream, other)


class Stream(Handle):
    """A CUDA stream. Stream(device) creates one; Stream.wrap(x) adopts a
    stream created elsewhere (torch, CuPy, cuda.core, a raw CUstream)."""

    _ctype = "cuabi_stream"

    def __init__(self, device=None, non_blocking: bool = False, priority: int = 0):
        dev = _as_device(device)
        opts = new_struct(_capi.cuabi_stream_options)
        opts.flags = _capi.CUABI_STREAM_NON_BLOCKING if non_blocking else 0
        opts.priority = index_arg(priority, "Stream: priority", INT_MIN, INT_MAX)
        Handle.__init__(self, call("cuabi_stream_create", dev, C.byref(opts)))
        self._raw = None
        self._nonblocking = bool(non_blocking)

    @property
    def is_nonblocking(self) -> bool:
        """cuda.core's is_nonblocking: created with non_blocking (a wrapped
        foreign stream: None, not known here)."""
        return getattr(self, "_nonblocking", None)

    @classmethod
    def _wrap(cls, value):
        obj = super()._wrap(value)
        obj._raw = None
        return obj

    @classmethod
    def wrap(cls, obj, device=None) -> "Stream":
        """Adopt a foreign stream; the caller keeps the original alive."""
        if isinstance(obj, Stream):
            return obj
        own = getattr(obj, "_cuabi_stream_", None)     # a GraphBuilder: its capturing stream
        if isinstance(own, Stream):
            return own
        return cls._wrap(call("cuabi_stream_wrap", _as_device(device), raw_stream_of(obj)))

    @property
    def raw(self) -> int:
        """The CUstream value (cached: it never changes)."""
        r = self._raw
        if r is None:
            r = self._raw = call("cuabi_stream_raw", self)
        return r

    @property
    def handle(self) -> int:
        """cuda.core's Stream.handle: the CUstream (an int here; cuda.core
        gives a cuda.bindings CUstream, which int() turns into the same
        number). The cuabi handle is cuabi_handle."""
        return self.raw

    @staticmethod
    def from_handle(handle) -> "Stream":
        """cuda.core's Stream.from_handle: a Stream over a CUstream (an int,
        or anything int() takes) made elsewhere; the caller keeps it alive."""
        return Stream.wrap(int(handle))

    @property
    def is_closed(self) -> bool:
        return self._h is None

    @property
    def context(self):
        """cuda.core's Stream.context: the Context of the stream's device."""
        return self.device.context

    def __cuda_stream__(self):
        """cuda.core's stream protocol: (version, CUstream)."""
        return (0, self.raw)

    @property
    def device(self) -> Device:
        return Device._borrowed_of("cuabi_stream_device", self)

    @property
    def priority(self) -> int:
        return call("cuabi_stream_priority", self)

    @property
    def resources(self):
        """cuda.core's Stream.resources: the resources of the stream's
        context -- a green context's (its partition, its workqueue
        configuration) for a stream made on one, else the whole device's."""
        g = self.green_context
        return g.resources if g is not None else self.device.resources

    @property
    def green_context(self):
        """The green context (cuabi.Context) the stream was created on, or
        None for a stream of the device's primary context."""
        return hooks.green_context_class()._borrowed_of("cuabi_stream_green_ctx", self)

    def synchronize(self) -> None:
        lib.cuabi_stream_synchronize(self)

    sync = synchronize

    def query(self) -> bool:
        """True when all work on the stream has finished."""
        return bool(call("cuabi_stream_query", self))

    def wait(self, event_or_stream) -> None:
        """Make later work on this stream wait for an event, or for the work
        queued so far on another stream: a cuabi Stream (or GraphBuilder),
        or, as cuda.core takes, any object with __cuda_stream__ (a stream
        of this stream's GPU). Streams are ordered through the GPU's one
        ordering event: no event made per call (cuabi_stream_wait_stream,
        cuabi_stream_wait_raw). ValueError for anything else."""
        x = event_or_stream
        if isinstance(x, Stream):
            _wait_stream(self, x)
            return
        own = getattr(x, "_cuabi_stream_", None)        # a GraphBuilder: its stream
        if isinstance(own, Stream):
            _wait_stream(self, own)
            return
        if not isinstance(x, Handle):
            if getattr(x, "__cuda_stream__", None) is None:
                raise ValueError("Stream.wait: only an Event, a Stream or an object with "
                                 f"__cuda_stream__ can be waited for, not {type(x).__name__}")
            lib.cuabi_stream_wait_raw(self, self.device.ordinal, raw_stream_of(x))
            return
        lib.cuabi_stream_wait_event(self, x)

    def record(self, event: "Event | None" = None) -> "Event":
        """Record an event (a new timing-disabled one by default) on the stream."""
        if event is None:
            event = Event(self.device, timing=False)
        event.record(self)
        return event

    # CUDA graphs (cuabi._graph, a layer above: its classes come through
    # cuabi._lib.hooks; docs/graphs.md)

    def capture(self, mode: str = "global"):
        """`with stream.capture() as graph:` records the work queued on the
        stream (cuabi launches, copies, memsets, allocations, and torch/CuPy
        work on the same CUstream) into `graph` instead of running it. mode:
        "global", "thread_local" or "relaxed"."""
        return hooks.capture_class()(self, mode)

    def create_graph_builder(self):
        """cuda.core's spelling of capture: a GraphBuilder on this stream."""
        return hooks.graph_builder_class()(self)

    @property
    def capture_status(self) -> str:
        """"none", "active" or "invalidated"."""
        return _CAPTURE_STATUS.get(call("cuabi_graph_capture_status", self), "unknown")

    # Stream memory operations (cuabi's extras; docs/textures.md): the word is
    # a Buffer and a byte offset, or any array (numpy pinned, torch, CuPy,
    # a View) whose memory a stream can reach (device, pinned, managed).

    def wait_value32(self, buffer, value: int, offset: int = 0, condition="geq",
                     flush: bool = False) -> None:
        """Make the stream wait until the 32-bit word at `offset` of `buffer`
        meets `condition` with `value`: "geq" ((int32)(word - value) >= 0),
        "eq", "and" ((word & value) != 0) or "nor" (~(word | value) != 0);
        flush=True then flushes remote writes (cuStreamWaitValue32)."""
        _mem_op(self, "wait_value32", buffer, offset, index_arg(value, "value", 0, U32_MAX),
                _wait_flags(condition, flush))

    def wait_value64(self, buffer, value: int, offset: int = 0, condition="geq",
                     flush: bool = False) -> None:
        """The 64-bit wait (an 8-byte aligned word)."""
        _mem_op(self, "wait_value64", buffer, offset, index_arg(value, "value", 0, U64_MAX),
                _wait_flags(condition, flush))

    def write_value32(self, buffer, value: int, offset: int = 0,
                      memory_barrier: bool = True) -> None:
        """Write `value` to the 32-bit word at `offset` of `buffer` when the
        stream gets there; memory_barrier=False lets the write pass earlier
        writes of the stream (cuStreamWriteValue32)."""
        _mem_op(self, "write_value32", buffer, offset, index_arg(value, "value", 0, U32_MAX),
                0 if memory_barrier else _capi.CUABI_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)

    def write_value64(self, buffer, value: int, offset: int = 0,
                      memory_barrier: bool = True) -> None:
        """The 64-bit write (an 8-byte aligned word)."""
        _mem_op(self, "write_value64", buffer, offset, index_arg(value, "value", 0, U64_MAX),
                0 if memory_barrier else _capi.CUABI_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)

    def batch_mem_op(self, ops) -> None:
        """Queue several operations with one call (cuStreamBatchMemOp), each
        a tuple: ("wait32" | "wait64", buffer, value[, offset[, condition]]),
        ("write32" | "write64", buffer, value[, offset]), ("barrier"[, "gpu"
        | "system"]) or ("flush",). Every entry is checked before any is
        queued; at most 255."""
        entries, keep = [], []
        try:
            for i, op in enumerate(ops):
                entries.append(_batch_entry(op, i, keep))
            n = len(entries)
            if n == 0:
                raise ValueError("batch_mem_op: no operations")
            arr = (_capi.cuabi_stream_mem_op * n)()
            bufs = [b for b, _t in keep]
            with holding(*[b for b in bufs if b is not None]) as hs:
                it = iter(hs)
                for i, (e, (b, _t)) in enumerate(zip(entries, keep)):
                    e.buffer = next(it) if b is not None else None
                    arr[i] = e
                lib.cuabi_stream_batch_mem_op(self, arr, n)
        finally:
            for _b, tmp in keep:
                if tmp is not None:
                    tmp.close()


_CONDITIONS = {"geq": _capi.CUABI_STREAM_WAIT_VALUE_GEQ, "eq": _capi.CUABI_STREAM_WAIT_VALUE_EQ,
               "and": _capi.CUABI_STREAM_WAIT_VALUE_AND, "nor": _capi.CUABI_STREAM_WAIT_VALUE_NOR}
_BATCH_KINDS = {"wait32": _capi.CUABI_STREAM_MEM_OP_WAIT_VALUE_32,
                "write32": _capi.CUABI_STREAM_MEM_OP_WRITE_VALUE_32,
                "wait64": _capi.CUABI_STREAM_MEM_OP_WAIT_VALUE_64,
                "write64": _capi.CUABI_STREAM_MEM_OP_WRITE_VALUE_64,
                "barrier": _capi.CUABI_STREAM_MEM_OP_BARRIER,
                "flush": _capi.CUABI_STREAM_MEM_OP_FLUSH_REMOTE_WRITES}


def _wait_flags(condition, flush) -> int:
    if isinstance(condition, str):
        try:
            f = _CONDITIONS[condition.lower()]
        except KeyError:
            raise ValueError(f"condition {condition!r}: 'geq', 'eq', 'and' or 'nor'") from None
    else:
        f = index_arg(condition, "condition", 0, U32_MAX)
    return f | (_capi.CUABI_STREAM_WAIT_VALUE_FLUSH if flush else 0)


def _word_buffer(obj):
    """(buffer, temporary) for the word of a memory operation: a cuabi
    Buffer as it is, anything else as a Buffer wrapped over its View (the
    temporary, to close after the call; a capture keeps its memory)."""
    if getattr(type(obj), "_ctype", None) == "cuabi_buffer":
        return obj, None
    view_cls = hooks.view_class()
    v = obj if isinstance(obj, view_cls) else view_cls(obj)
    dev_type, dev_id = v.__dlpack_device__()
    kind = {2: "device", 3: "pinned", 13: "managed"}.get(int(dev_type), "host")
    b = hooks.buffer_class().wrap(v.ptr, v.nbytes, kind=kind,
                                  device=int(dev_id) if kind == "device" else 0, owner=v)
    return b, b


def _mem_op(stream, fn, buffer, offset, value, flags) -> None:
    b, tmp = _word_buffer(buffer)
    try:
        getattr(lib, "cuabi_stream_" + fn)(stream, b, index_arg(offset, "offset"), value, flags)
    finally:
        if tmp is not None:
            tmp.close()


def _batch_entry(op, i, keep):
    """One cuabi_stream_mem_op of a batch_mem_op() tuple; appends (buffer or
    None, temporary or None) to `keep`."""
    if isinstance(op, str):
        op = (op,)
    name = str(op[0]).lower() if op else ""
    kind = _BATCH_KINDS.get(name)
    if kind is None:
        raise ValueError(f"batch_mem_op: ops[{i}] {op!r}: the first item is one of "
                         f"{', '.join(_BATCH_KINDS)}")
    e = new_struct(_capi.cuabi_stream_mem_op)
    e.kind = kind
    if name in ("barrier", "flush"):
        scope = op[1] if len(op) > 1 else "system"
        if name == "barrier":
            scopes = {"system": _capi.CUABI_STREAM_BARRIER_SYSTEM,
                      "gpu": _capi.CUABI_STREAM_BARRIER_GPU}
            e.flags = scopes[scope] if scope in scopes else \
                index_arg(scope, f"ops[{i}] barrier scope", 0, U32_MAX)
        keep.append((None, None))
        return e
    if len(op) < 3:
        raise ValueError(f"batch_mem_op: ops[{i}] {op!r}: ({name!r}, buffer, value[, offset"
                         f"{', condition' if name.startswith('wait') else ''}])")
    wide = name.endswith("64")
    e.value = index_arg(op[2], f"ops[{i}] value", 0, U64_MAX if wide else U32_MAX)
    e.offset = index_arg(op[3] if len(op) > 3 else 0, f"ops[{i}] offset")
    if name.startswith("wait"):
        e.flags = _wait_flags(op[4] if len(op) > 4 else "geq", False)
    keep.append(_word_buffer(op[1]))
    return e


class Event(Handle):
    """A CUDA event: a marker on a stream, for ordering and timing."""

    _ctype = "cuabi_event"

    def __init__(self, device=None, timing: bool = True, blocking_sync: bool = False):
        opts = new_struct(_capi.cuabi_event_options)
        opts.flags = ((0 if timing else _capi.CUABI_EVENT_DISABLE_TIMING) |
                      (_capi.CUABI_EVENT_BLOCKING_SYNC if blocking_sync else 0))
        dev = _as_device(device)
        Handle.__init__(self, call("cuabi_event_create", dev, C.byref(opts)))
        self._facts = (bool(timing), bool(blocking_sync), False, dev)

    # cuda.core's facts of an event (None for events made elsewhere)
    @property
    def is_timing_enabled(self):
        f = getattr(self, "_facts", None)
        return f[0] if f else (False if getattr(self, "_ipc", False) else None)

    @property
    def is_blocking_sync(self):
        f = getattr(self, "_facts", None)
        return f[1] if f else None

    @property
    def is_ipc_enabled(self) -> bool:
        return bool(getattr(self, "_ipc", False))

    @property
    def device(self):
        f = getattr(self, "_facts", None)
        return f[3] if f else None

    @property
    def context(self):
        d = self.device
        return d.context if d is not None else None

    def record(self, stream: Stream) -> "Event":
        lib.cuabi_event_record(self, stream)
        return self

    def synchronize(self) -> None:
        lib.cuabi_event_synchronize(self)

    sync = synchronize          # cuda.core's name

    def query(self) -> bool:
        return bool(call("cuabi_event_query", self))

    @property
    def is_done(self) -> bool:
        """cuda.core's Event.is_done: True once the work before it finished."""
        return self.query()

    @property
    def is_closed(self) -> bool:
        return self._h is None

    @property
    def handle(self) -> int:
        """cuda.core's Event.handle: the CUevent (an int; cuabi_handle is
        the cuabi handle)."""
        return self.raw

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event to `end`."""
        return call("cuabi_event_elapsed_ms", self, end)

    def __sub__(self, start: "Event") -> float:
        """end - start: elapsed milliseconds, as cuda.core's events."""
        return start.elapsed_ms(self)

    @property
    def raw(self) -> int:
        return call("cuabi_event_raw", self)

    # ---- IPC (issue 15): cuda.core's names
    @classmethod
    def create_ipc(cls, device=None) -> "Event":
        """An event other processes can import and wait on (interprocess,
        no timing). Pickling it sends its IPC descriptor."""
        ev = cls._wrap(call("cuabi_ipc_event_create", _as_device(device)))
        ev._ipc = True
        return ev

    def get_ipc_descriptor(self) -> bytes:
        """The event's IPC descriptor (bytes), for Event.from_ipc_descriptor()
        in another process of this host."""
        out = (C.c_uint8 * _capi.CUABI_IPC_DESCRIPTOR_SIZE)()
        lib.cuabi_ipc_event_export(out, len(out), self)
        return bytes(out)

    @classmethod
    def from_ipc_descriptor(cls, descriptor: bytes) -> "Event":
        """Open an event another process exported (IPCError when the
        descriptor is malformed, stale, from another host or this process)."""
        d = bytes_arg(descriptor, "Event.from_ipc_descriptor: descriptor")
        return cls._wrap(call("cuabi_ipc_event_import", (C.c_uint8 * len(d)).from_buffer_copy(d)
                              if d else None, len(d)))

    def __reduce__(self):
        return (Event.from_ipc_descriptor, (self.get_ipc_descriptor(),))


def __getattr__(name):
    """cuda.core's LEGACY_DEFAULT_STREAM and PER_THREAD_DEFAULT_STREAM: the
    current device's default streams (made on first use: they need a driver)."""
    if name == "LEGACY_DEFAULT_STREAM":
        return Device().legacy_default_stream()
    if name == "PER_THREAD_DEFAULT_STREAM":
        return Device().per_thread_default_stream()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
