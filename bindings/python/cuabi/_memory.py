"""Memory resources and buffers."""
from __future__ import annotations

import ctypes as C
import threading
import weakref
from dataclasses import dataclass

from . import _callbacks, _capi
from ._core import Device, Stream, _as_device, device_count
from ._handle import Handle
from ._lib import (call, done, hooks, lib, new_struct, raise_last, raw, struct_to_namespace,
                   swap_release, use)
from .errors import ClosedHandleError, INT_MAX, U32_MAX, bytes_arg, error_class, index_arg

HOST, DEVICE, PINNED, MANAGED = (_capi.CUABI_MEMORY_HOST, _capi.CUABI_MEMORY_DEVICE,
                                 _capi.CUABI_MEMORY_PINNED, _capi.CUABI_MEMORY_MANAGED)
_KINDS = {"host": HOST, "device": DEVICE, "pinned": PINNED, "managed": MANAGED}
_KIND_NAMES = {v: k for k, v in _KINDS.items()}


_ipc_module = None


def _ipc():
    """cuabi._ipc_pool, imported on first use (lazy: import time) and kept:
    a pickled list of buffers asks for it once per buffer."""
    global _ipc_module
    if _ipc_module is None:
        from . import _ipc_pool          # lazy: import time
        _ipc_module = _ipc_pool
    return _ipc_module


def _kind(kind) -> int:
    return _KINDS[kind] if isinstance(kind, str) else int(kind)


def _stream_arg(stream):
    """None, a cuabi Stream, or anything Stream.wrap() takes."""
    if stream is None or isinstance(stream, Stream):
        return stream
    return Stream.wrap(stream)


# ---- user-defined resources: C callbacks into Python methods

def _py_allocate(out, size, alignment, stream, payload):
    try:
        ptr = _callbacks.get(payload).allocate_ptr(size, alignment, stream)
        C.c_size_t.from_address(out).value = index_arg(ptr, "allocate() result (an address)")
        return 0
    except BaseException as e:  # never let an exception cross into C
        _callbacks.note_exception(e)
        return 1


def _py_deallocate(ptr, size, alignment, stream, payload):
    try:
        _callbacks.get(payload).deallocate_ptr(ptr, size, alignment, stream)
        return 0
    except BaseException as e:
        _callbacks.note_exception(e)
        return 1


def _py_release(payload):
    _callbacks.drop(payload)


_ALLOC = _capi.cuabi_memory_allocate_fn(_py_allocate)
_DEALLOC = _capi.cuabi_memory_deallocate_fn(_py_deallocate)
_RELEASE = _capi.cuabi_memory_payload_release_fn(_py_release)


class MemoryResource(Handle):
    """An allocator of one kind of memory.

    Built-in resources come from the class methods (host(), device_default(),
    pool(), pinned(), managed()) and cuda.core's classes
    (DeviceMemoryResource, PinnedMemoryResource, LegacyPinnedMemoryResource,
    GraphMemoryResource). allocate(size, stream=None) returns a Buffer and
    deallocate(ptr, size, stream=None) frees an address, as in cuda.core;
    allocate_ptr/deallocate_ptr are the raw calls with an alignment.

    To write one in Python, subclass and define allocate_ptr(size, alignment,
    stream) -> address and deallocate_ptr(ptr, size, alignment, stream)
    (stream is a raw CUstream int), then call
    super().__init__(device, kind="device", stream_ordered=True)."""

    _ctype = "cuabi_memory_resource"

    def __init__(self, device=None, kind="device", stream_ordered: bool = True):
        if type(self).allocate_ptr is MemoryResource.allocate_ptr:
            raise TypeError("MemoryResource() is abstract: use MemoryResource.host(), "
                            ".device_default(dev), ... or subclass it and define "
                            "allocate_ptr() and deallocate_ptr()")
        cbs = new_struct(_capi.cuabi_memory_resource_callbacks)
        cbs.allocate, cbs.deallocate, cbs.release_payload = _ALLOC, _DEALLOC, _RELEASE
        cbs.kind = _kind(kind)
        cbs.stream_ordered = int(bool(stream_ordered))
        dev = None if cbs.kind == HOST and device is None else _as_device(device)
        # The registry keeps self alive until the library releases the payload
        # (after the resource's last buffer): close() the resource when done.
        key = _callbacks.keep(self)
        try:
            h = call("cuabi_memory_resource_user", dev, C.byref(cbs), key)
        except BaseException:
            _callbacks.drop(key)
            raise
        Handle.__init__(self, h)

    def allocate(self, size: int, stream=None) -> "Buffer":
        """cuda.core's allocate: a Buffer of `size` bytes, ordered on `stream`
        (a Stream, GraphBuilder or __cuda_stream__ object; None: unordered).
        cuabi's former raw form is allocate_ptr()."""
        size = index_arg(size, "allocate: size")
        b = Buffer(size, self, stream)
        b._mr = self                # memory_resource: this object, as cuda.core's
        if stream is not None:      # cuda.core: close() frees on the allocation stream
            b._dealloc_stream = _stream_arg(stream)
        return b

    @classmethod
    def _device_resource(cls, device) -> "MemoryResource":
        """Device.memory_resource's default: the device's default pool."""
        return DeviceMemoryResource(device)

    @property
    def allocation_handle(self):
        """cuda.core's name of get_allocation_handle()."""
        return self.get_allocation_handle()

    def deallocate(self, ptr: int, size: int, stream=None) -> None:
        """cuda.core's deallocate: free an address allocate_ptr() gave
        (Buffers free themselves: Buffer.close(stream))."""
        MemoryResource.deallocate_ptr(self, ptr, size, 0, stream)

    def allocate_ptr(self, size: int, alignment: int = 0, stream=None) -> int:
        """Raw allocation, an address (most code wants allocate(), a Buffer
        that frees itself). What Python-defined resources override."""
        return call("cuabi_memory_resource_allocate", self, index_arg(size, "allocate: size"),
                    index_arg(alignment, "allocate: alignment"), _stream_arg(stream))

    def deallocate_ptr(self, ptr: int, size: int, alignment: int = 0, stream=None) -> None:
        lib.cuabi_memory_resource_deallocate(self, index_arg(ptr, "deallocate: ptr"),
                                             index_arg(size, "deallocate: size"),
                                             index_arg(alignment, "deallocate: alignment"),
                                             _stream_arg(stream))

    # Python subclasses override allocate_ptr; keep the library's own call
    # reachable for them under another name.
    def _raw_allocate(self, size, alignment=0, stream=None):
        return MemoryResource.allocate_ptr(self, size, alignment, stream)

    # ---- cuda.core's descriptive properties
    @property
    def is_device_accessible(self) -> bool:
        return self.kind in ("device", "managed", "pinned")

    @property
    def is_host_accessible(self) -> bool:
        return self.kind in ("host", "pinned", "managed")

    @property
    def is_managed(self) -> bool:
        return self.kind == "managed"

    @property
    def device_id(self) -> int:
        """The device's ordinal (-1 for host memory, as cuda.core)."""
        d = self.device
        return -1 if d is None else d.ordinal

    @property
    def is_closed(self) -> bool:
        return self._h is None

    @classmethod
    def host(cls) -> "MemoryResource":
        """Plain host memory; needs no GPU."""
        return cls._wrap(call("cuabi_memory_resource_host"))

    @classmethod
    def device_default(cls, device=None) -> "MemoryResource":
        """The device's default stream-ordered pool."""
        return cls._wrap(call("cuabi_memory_resource_device_default", _as_device(device)))

    @classmethod
    def pool(cls, device=None, release_threshold: int | None = None) -> "MemoryResource":
        opts = new_struct(_capi.cuabi_memory_pool_options)
        if release_threshold is not None:
            opts.release_threshold = index_arg(release_threshold, "pool: release_threshold")
        return cls._wrap(call("cuabi_memory_resource_pool_create", _as_device(device),
                              C.byref(opts)))

    @classmethod
    def pinned(cls, device=None) -> "MemoryResource":
        return cls._wrap(call("cuabi_memory_resource_pinned", _as_device(device)))

    @classmethod
    def managed(cls, device=None) -> "MemoryResource":
        return cls._wrap(call("cuabi_memory_resource_managed", _as_device(device)))

    @property
    def kind(self) -> str:
        """"host", "device", "pinned" or "managed"."""
        return _KIND_NAMES.get(call("cuabi_memory_resource_kind", self), "?")

    @property
    def device(self) -> Device | None:
        return Device._borrowed_of("cuabi_memory_resource_device", self)

    def trim(self, keep_bytes: int = 0) -> None:
        lib.cuabi_memory_resource_trim(self, index_arg(keep_bytes, "trim: keep_bytes"))

    # ---- pool statistics (issue 25; cuda.core's mr.attributes)
    @property
    def attributes(self) -> "PoolAttributes":
        """The pool's statistics and attributes as properties (cuda.core's
        names): used_mem_current / _high, reserved_mem_current / _high,
        release_threshold, reuse_*; NotSupportedError for non-pools."""
        return PoolAttributes(self)

    def pool_stats(self):
        """Every statistic in one call (cuabi's extra), as a namespace."""
        return struct_to_namespace(call("cuabi_pool_stats_get", self))

    def pool_summary(self) -> str:
        """One line for logs: "pool device 0: reserved 64.0 MiB (high ..."."""
        st = call("cuabi_pool_stats_get", self)
        n = C.c_size_t(0)
        try:
            lib.cuabi_pool_stats_format(None, C.byref(n), C.byref(st))
        except error_class(_capi.CUABI_ERROR_BUFFER_TOO_SMALL):
            pass
        out = C.create_string_buffer(n.value)
        lib.cuabi_pool_stats_format(out, C.byref(n), C.byref(st))
        return out.value.decode()

    def reset_high_water(self) -> None:
        """Both high-water marks back to the current figures."""
        lib.cuabi_pool_reset_high_water(self)

    # ---- several GPUs and processes (issue 15)
    @classmethod
    def ipc(cls, device=None) -> "MemoryResource":
        """Device memory other processes can import (cuMemAlloc, not
        stream-ordered): its buffers pickle to IPC descriptors."""
        return cls._wrap(call("cuabi_ipc_memory_resource", _as_device(device)))

    # ---- IPC-enabled pools (cuda.core's names; see cuabi/_ipc_pool.py)
    @classmethod
    def ipc_pool(cls, device=None, max_size: int = 0,
                 release_threshold: int | None = None) -> "MemoryResource":
        """A stream-ordered pool other processes can map (cuda.core's
        DeviceMemoryResource with ipc_enabled=True): its buffers pickle to
        136-byte descriptors, the pool itself to its descriptor and fd
        (multiprocessing sends the fd once per message)."""
        from . import _ipc_pool          # lazy: import time
        return _ipc_pool.create(cls, device, max_size, release_threshold)

    def get_allocation_handle(self):
        """The pool's shareable handle (an IPCAllocationHandle: a new fd, yours
        to close, and the pool's descriptor) for from_allocation_handle() in
        another process."""
        from . import _ipc_pool          # lazy: import time
        return _ipc_pool.allocation_handle(self)

    @classmethod
    def _of_mapped(cls, h) -> "MemoryResource":
        """The object of a pool mapped from another process (cuabi._ipc_pool):
        a PinnedMemoryResource for a pool in host memory, else a
        MemoryResource."""
        mr = MemoryResource._wrap(h)
        if mr.kind != "pinned":
            return mr
        pinned = PinnedMemoryResource._shared(mr)
        mr.close()
        return pinned

    @classmethod
    def from_allocation_handle(cls, device, handle) -> "MemoryResource":
        """Map a pool another process exported, from its IPCAllocationHandle
        (or a (fd, descriptor) pair): a resource that receives its buffers
        (Buffer.from_ipc_descriptor(mr, d)) and cannot allocate. A pool is
        mapped once per process. The fd is not closed: close the handle."""
        from . import _ipc_pool          # lazy: import time
        fd, desc = (handle.handle, handle.descriptor) if hasattr(handle, "descriptor") \
            else handle
        mr = _ipc_pool.from_descriptor(fd, desc)
        if device is not None and mr.device is not None \
                and mr.device.ordinal != _as_device(device).ordinal:
            raise ValueError(f"the pool lives on device {mr.device.ordinal}, "
                             f"not {_as_device(device).ordinal}")
        return mr

    def _ipc_role(self):
        return call("cuabi_ipc_pool_info", self)[0]

    @property
    def is_ipc_enabled(self) -> bool:
        """An IPC pool: made by ipc_pool() here, or mapped from another process."""
        return self._ipc_role() != _capi.CUABI_IPC_POOL_NONE

    @property
    def is_mapped(self) -> bool:
        """Mapped from another process (receives buffers, cannot allocate)."""
        return self._ipc_role() == _capi.CUABI_IPC_POOL_MAPPED

    def __reduce__(self):
        """IPC pools of this process pickle (through multiprocessing) to their
        descriptor and fd; other resources do not pickle."""
        if self._ipc_role() != _capi.CUABI_IPC_POOL_EXPORTER:
            raise TypeError("only IPC pools made by MemoryResource.ipc_pool() pickle "
                            "(a mapped pool cannot be sent on)")
        from . import _ipc_pool          # lazy: import time
        return _ipc_pool.reduce_resource(self)

    def set_peer_access(self, device, access: str = "rw") -> None:
        """Access `device` gets to this pool's memory: "rw", "r" or "none"."""
        lib.cuabi_peer_set_pool_access(self, _as_device(device), _ACCESS[access])

    def get_peer_access(self, device) -> str:
        return _ACCESS_NAMES[call("cuabi_peer_get_pool_access", self, _as_device(device))]

    @property
    def peer_accessible_by(self) -> tuple:
        """Ordinals of the other devices with read-write access (cuda.core's
        name); assign an iterable of devices or ordinals to change it."""
        own = self.device.ordinal
        return tuple(i for i in range(device_count())
                     if i != own and self.get_peer_access(i) == "rw")

    @peer_accessible_by.setter
    def peer_accessible_by(self, devices) -> None:
        want = {d.ordinal if isinstance(d, Device) else int(d) for d in devices}
        own = self.device.ordinal
        for i in range(device_count()):
            if i != own:
                self.set_peer_access(i, "rw" if i in want else "none")


_pool_get = raw("cuabi_pool_get_attribute")


class PoolAttributes:
    """A pool's attributes (cuda.core's _MemPoolAttributes): reads go to the
    driver each time; release_threshold and the reuse_* flags can be set,
    used_mem_high / reserved_mem_high only to 0 (a reset)."""
    __slots__ = ("_mr",)
    _NAMES = {"reuse_follow_event_dependencies": _capi.CUABI_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES,
              "reuse_allow_opportunistic": _capi.CUABI_POOL_REUSE_ALLOW_OPPORTUNISTIC,
              "reuse_allow_internal_dependencies":
                  _capi.CUABI_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
              "release_threshold": _capi.CUABI_POOL_RELEASE_THRESHOLD,
              "reserved_mem_current": _capi.CUABI_POOL_RESERVED_MEM_CURRENT,
              "reserved_mem_high": _capi.CUABI_POOL_RESERVED_MEM_HIGH,
              "used_mem_current": _capi.CUABI_POOL_USED_MEM_CURRENT,
              "used_mem_high": _capi.CUABI_POOL_USED_MEM_HIGH}

    def __init__(self, mr):
        self._mr = mr

    def __dir__(self):
        return sorted(PoolAttributes._NAMES)

    def __repr__(self):
        return "PoolAttributes(" + ", ".join(f"{k}={getattr(self, k)}"
                                             for k in PoolAttributes._NAMES) + ")"


def _pool_property(name, a):
    is_bool = a <= _capi.CUABI_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES

    def get(self):
        # The unchecked entry point (a statistic is read in hot loops): the
        # library validates the handle value, so a resource closed meanwhile
        # gives an error, never a stale read.
        v = C.c_uint64()
        st = _pool_get(C.byref(v), C.c_void_p(self._mr.handle), a)
        if st:
            raise_last(st, "cuabi_pool_get_attribute")
        return bool(v.value) if is_bool else v.value

    def put(self, value):
        lib.cuabi_pool_set_attribute(self._mr, a, int(value))
    return property(get, put, doc=f"The pool's {name} (cuMemPoolGetAttribute).")


for _name, _a in PoolAttributes._NAMES.items():
    setattr(PoolAttributes, _name, _pool_property(_name, _a))
del _name, _a


_ACCESS = {"none": _capi.CUABI_PEER_ACCESS_NONE, "r": _capi.CUABI_PEER_ACCESS_READ,
           "rw": _capi.CUABI_PEER_ACCESS_READ_WRITE}
_ACCESS_NAMES = {v: k for k, v in _ACCESS.items()}


_default_resources: dict = {}


def default_resource(device=None) -> MemoryResource:
    """The device's default pool (cached per ordinal)."""
    dev = _as_device(device)
    key = dev.ordinal
    res = _default_resources.get(key)
    if res is None or res.closed:
        res = _default_resources[key] = MemoryResource.device_default(dev)
    return res


# ---- cuda.core's resource classes, over cuabi's resources

# cuda.core's process-wide registry of memory resources by uuid (its
# DeviceMemoryResource / PinnedMemoryResource .register and .from_registry):
# weak, so a registered resource goes away with its last other reference.
_registry = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()


def _register(mr, uuid):
    """cuda.core's register: the resource registered under `uuid` (the one
    registered before, if any, else `mr`)."""
    if uuid is None:
        raise TypeError("register: uuid is None (give a uuid.UUID)")
    try:
        hash(uuid)
    except TypeError:
        raise TypeError(f"register: a uuid is hashable (a uuid.UUID), not "
                        f"{type(uuid).__name__}") from None
    with _registry_lock:
        existing = _registry.get(uuid)
        if existing is not None:
            return existing
        _registry[uuid] = mr
        return mr


def _from_registry(uuid):
    """cuda.core's from_registry: RuntimeError when nothing is registered
    under `uuid` (or what was is gone)."""
    try:
        with _registry_lock:
            return _registry[uuid]
    except (KeyError, TypeError):
        raise RuntimeError(f"Memory resource {uuid} was not found") from None


class _Registered:
    """register / from_registry, as cuda.core's DeviceMemoryResource and
    PinnedMemoryResource have them (one registry for both, as cuda.core's)."""

    __slots__ = ()

    def register(self, uuid):
        """Register this resource under `uuid` (a uuid.UUID) in the
        process-wide registry; returns the resource registered under it
        (one registered earlier wins, as in cuda.core)."""
        return _register(self, uuid)

    @staticmethod
    def from_registry(uuid):
        """The resource registered under `uuid`; RuntimeError if none is."""
        return _from_registry(uuid)


@dataclass
class DeviceMemoryResourceOptions:
    """cuda.core's DeviceMemoryResourceOptions: ipc_enabled makes an
    IPC-enabled pool (MemoryResource.ipc_pool); max_size its size limit (0:
    the driver's default)."""
    ipc_enabled: bool = False
    max_size: int = 0


class DeviceMemoryResource(_Registered, MemoryResource):
    """cuda.core's DeviceMemoryResource: DeviceMemoryResource(dev) is the
    device's default (current) stream-ordered pool;
    DeviceMemoryResource(dev, options) creates a new pool (IPC-enabled with
    options.ipc_enabled)."""

    def __new__(cls, device_id=..., options: DeviceMemoryResourceOptions | dict | None = None):
        if device_id is ...:                # Handle._wrap's bare object
            return super().__new__(cls)
        dev = _as_device(device_id)
        if isinstance(options, dict):
            options = DeviceMemoryResourceOptions(**options)
        if options is None:
            return cls._wrap(call("cuabi_memory_resource_device_default", dev))
        if options.ipc_enabled:
            from . import _ipc_pool          # lazy: import time
            return _ipc_pool.create(cls, dev, options.max_size, None)
        opts = new_struct(_capi.cuabi_memory_pool_options)
        opts.max_size = index_arg(options.max_size, "DeviceMemoryResourceOptions: max_size")
        return cls._wrap(call("cuabi_memory_resource_pool_create", dev, C.byref(opts)))

    def __init__(self, device_id=..., options=None):
        pass                                # made by __new__


@dataclass
class PinnedMemoryResourceOptions:
    """cuda.core's PinnedMemoryResourceOptions: ipc_enabled makes an
    IPC-enabled pool (on a host NUMA node: `numa_id`, else the current
    device's host_numa_id); max_size the pool's size limit (0: the
    driver's default); numa_id the host NUMA node (None: OS-managed
    placement, CU_MEM_LOCATION_TYPE_HOST, unless ipc_enabled)."""
    ipc_enabled: bool = False
    max_size: int = 0
    numa_id: int | None = None


class LegacyPinnedMemoryResource(MemoryResource):
    """cuda.core's LegacyPinnedMemoryResource: page-locked host memory
    (cuMemAllocHost), reachable from the device; frees are synchronous."""

    def __init__(self, device=None):
        Handle.__init__(self, call("cuabi_memory_resource_pinned", _as_device(device)))

    @property
    def device_id(self) -> int:
        return -1                   # cuda.core: host memory, no device


_LOC_HOST, _LOC_HOST_NUMA = _capi.CUABI_LOCATION_HOST, _capi.CUABI_LOCATION_HOST_NUMA


def _pinned_numa_id(options) -> int:
    """The NUMA node of a new pinned pool (-1: OS-managed placement), as
    cuda.core derives it."""
    if options.numa_id is not None:
        if isinstance(options.numa_id, int) and not isinstance(options.numa_id, bool) \
                and options.numa_id < 0:
            raise ValueError(f"numa_id must be >= 0, got {options.numa_id}")
        return index_arg(options.numa_id, "PinnedMemoryResourceOptions: numa_id", 0, INT_MAX)
    if not options.ipc_enabled:
        return -1
    node = _as_device(None).properties.host_numa_id
    if node < 0:
        raise RuntimeError("Cannot determine host NUMA ID for IPC-enabled pinned memory pool. "
                           "The system may not support NUMA, or no CUDA context is active. Set "
                           "numa_id explicitly or call Device.set_current() first.")
    return node


class PinnedMemoryResource(_Registered, MemoryResource):
    """cuda.core's PinnedMemoryResource: a stream-ordered pool of page-locked
    host memory, reachable from the device. PinnedMemoryResource() is the
    driver's current pool of the host (cuabi_pool_at_location: not owned,
    close() leaves it); PinnedMemoryResource(options) creates a pool, owned
    by the resource: at CU_MEM_LOCATION_TYPE_HOST, or on a host NUMA node
    (options.numa_id; with options.ipc_enabled the current device's
    host_numa_id unless numa_id says), IPC-enabled with ipc_enabled (its
    allocation_handle, from_allocation_handle(handle), pickling through
    multiprocessing as DeviceMemoryResource's IPC pools). Buffers are
    "pinned": host- and device-accessible (DLPack kDLCUDAHost). The
    current device orders stream-less calls and gets read-write access.
    cuMemAllocHost memory is LegacyPinnedMemoryResource."""

    def __new__(cls, options: PinnedMemoryResourceOptions | dict | None = None):
        if isinstance(options, dict):
            options = PinnedMemoryResourceOptions(**options)
        dev = _as_device(None)
        if options is None:
            return cls._wrap(call("cuabi_pool_at_location", dev, _LOC_HOST, 0,
                                  _capi.CUABI_POOL_CURRENT))
        if not isinstance(options, PinnedMemoryResourceOptions):
            raise TypeError(f"PinnedMemoryResource: options must be a "
                            f"PinnedMemoryResourceOptions, a dict or None, not "
                            f"{type(options).__name__}")
        numa = _pinned_numa_id(options)
        max_size = index_arg(options.max_size, "PinnedMemoryResourceOptions: max_size")
        if options.ipc_enabled:
            from . import _ipc_pool          # lazy: import time
            return _ipc_pool.create(cls, dev, max_size, None, _LOC_HOST_NUMA, numa)
        opts = new_struct(_capi.cuabi_memory_pool_options)
        opts.max_size = max_size
        opts.location_type = _LOC_HOST if numa < 0 else _LOC_HOST_NUMA
        opts.location_id = max(numa, 0)
        return cls._wrap(call("cuabi_memory_resource_pool_create", dev, C.byref(opts)))

    def __init__(self, options=None):
        pass                                # made by __new__

    @classmethod
    def _wrap(cls, value: int):
        obj = object.__new__(cls)           # not __new__: PinnedMemoryResource() makes a pool
        Handle.__init__(obj, value)
        return obj

    @classmethod
    def from_allocation_handle(cls, alloc_handle) -> "PinnedMemoryResource":
        """cuda.core's from_allocation_handle: map the pinned pool another
        process exported, from its IPCAllocationHandle (or an (fd,
        descriptor) pair; cuabi needs the descriptor, so a bare fd is a
        TypeError). A resource that receives the exporter's buffers and
        cannot allocate; a pool is mapped once per process. The fd is not
        closed: close the handle."""
        if isinstance(alloc_handle, int):
            raise TypeError("PinnedMemoryResource.from_allocation_handle: cuabi maps a pool from "
                            "its IPCAllocationHandle (the fd and the pool's descriptor), not a "
                            "bare file descriptor")
        from . import _ipc_pool              # lazy: import time
        fd, desc = (alloc_handle.handle, alloc_handle.descriptor) \
            if hasattr(alloc_handle, "descriptor") else alloc_handle
        mr = _ipc_pool.from_descriptor(fd, desc)
        if not isinstance(mr, PinnedMemoryResource):
            raise TypeError("PinnedMemoryResource.from_allocation_handle: the handle is a device "
                            "pool's (DeviceMemoryResource.from_allocation_handle maps it)")
        return mr

    @property
    def allocation_handle(self):
        """The pool's shareable handle (an IPCAllocationHandle: a new fd,
        yours to close, and the pool's descriptor); RuntimeError when the
        pool is not IPC-enabled, as cuda.core."""
        if not self.is_ipc_enabled:
            raise RuntimeError("Memory resource is not IPC-enabled")
        return self.get_allocation_handle()

    @property
    def device_id(self) -> int:
        """-1: pinned memory is host memory, no device's (cuda.core)."""
        return -1

    @property
    def numa_id(self) -> int:
        """The host NUMA node of the pool, or -1 for OS-managed placement
        (CU_MEM_LOCATION_TYPE_HOST)."""
        st = call("cuabi_pool_stats_get", self)
        return st.location_id if st.location_type == _LOC_HOST_NUMA else -1

    @property
    def is_device_accessible(self) -> bool:
        return True

    @property
    def is_host_accessible(self) -> bool:
        return True


class GraphMemoryResource(MemoryResource):
    """cuda.core's GraphMemoryResource: allocations on a capturing stream
    (a GraphBuilder) become graph memory nodes; allocate() refuses a stream
    that is not capturing."""

    def __init__(self, device_id):
        Handle.__init__(self, call("cuabi_memory_resource_device_default",
                                   _as_device(device_id)))

    def allocate(self, size: int, stream=None) -> "Buffer":
        s = _stream_arg(stream)
        if s is None or s.capture_status != "active":
            raise RuntimeError("GraphMemoryResource.allocate: the stream must be capturing "
                               "(a GraphBuilder between begin_building and end_building)")
        return MemoryResource.allocate(self, size, stream)


def _host_bytes(obj):
    """(address, nbytes, keepalive) of a host object with the buffer protocol."""
    mv = memoryview(obj)
    if not mv.c_contiguous:
        raise ValueError("host data must be C-contiguous")
    nbytes = mv.nbytes
    if mv.readonly:
        buf = (C.c_char * nbytes).from_buffer_copy(mv) if nbytes else None
    else:
        buf = (C.c_char * nbytes).from_buffer(mv.cast("B")) if nbytes else None
    return (C.addressof(buf) if buf is not None else None), nbytes, buf


_buffer_destroy = raw("cuabi_buffer_destroy")


class _FreeAsync:
    """The release Buffer.free_async puts in place of the finalizer:
    cuabi_buffer_free_async on the stream (in use during the call). A
    failure is kept for free_async to raise, and the buffer is destroyed
    then (the library leaves it alone when it refuses the call; a buffer it
    did release answers INVALID_HANDLE, which is ignored)."""
    __slots__ = ("h", "stream", "error")

    def __init__(self, h, stream):
        self.h, self.stream, self.error = h, stream, None

    def __call__(self):
        try:
            lib.cuabi_buffer_free_async(C.c_void_p(self.h), self.stream)
        except BaseException as e:
            self.error = e
            _buffer_destroy(C.c_void_p(self.h))
        self.stream = None


def _py_buffer_release(ptr, size, payload):
    _callbacks.drop(payload)


_BUF_RELEASE = _capi.cuabi_buffer_release_fn(_py_buffer_release)


class _DeallocateOnRelease:
    """Buffer.from_handle(ptr, size, mr): the owner object the library
    drops when the buffer goes; dropping it calls mr.deallocate."""

    __slots__ = ("mr", "ptr", "size", "stream")

    def __init__(self, mr, ptr, size, stream):
        self.mr, self.ptr, self.size, self.stream = mr, ptr, size, stream

    def __del__(self):
        try:
            self.mr.deallocate(self.ptr, self.size, stream=self.stream)
        except Exception:       # never raise from a release
            pass



class Buffer(Handle):
    """A range of memory with an owner.

    Buffer(size, resource=None, stream=None): from `resource` (default: the
    default pool of device 0; pass MemoryResource.host() for host memory),
    ordered on `stream`. Buffer.wrap(ptr, size, ...) adopts foreign memory."""

    _ctype = "cuabi_buffer"
    _cuabi_pointer_ = True     # a kernel argument: its address

    def __init__(self, size: int, resource: MemoryResource | None = None,
                 stream=None, alignment: int = 0):
        res = resource if resource is not None else default_resource()
        size = index_arg(size, "Buffer: size")
        alignment = index_arg(alignment, "Buffer: alignment")
        s = _stream_arg(stream)
        Handle.__init__(self, call("cuabi_buffer_allocate", res, size, alignment, s))
        self._ptr = None
        self._stream = s        # where it was allocated: __cuda_array_interface__'s stream

    @classmethod
    def _wrap(cls, value):
        obj = super()._wrap(value)
        obj._ptr = None
        obj._stream = False     # no stream known
        return obj

    @classmethod
    def wrap(cls, ptr: int, size: int, kind="device", device=None, owner=None) -> "Buffer":
        """Adopt memory allocated elsewhere; `owner` (any Python object) is kept
        alive until the buffer and every view over it are gone."""
        k = _kind(kind)
        ptr, size = index_arg(ptr, "Buffer.wrap: ptr"), index_arg(size, "Buffer.wrap: size")
        dev = None if (k == HOST and device is None) else _as_device(device)
        if owner is None:  # a NULL callback (ctypes refuses None for a function type)
            return cls._wrap(call("cuabi_buffer_wrap", dev, k, ptr, size,
                                  _capi.cuabi_buffer_release_fn(), None))
        key = _callbacks.keep(owner)
        try:
            return cls._wrap(call("cuabi_buffer_wrap", dev, k, ptr, size,
                                  _BUF_RELEASE, key))
        except BaseException:
            _callbacks.drop(key)
            raise

    @classmethod
    def from_host(cls, data, resource: MemoryResource | None = None, stream=None) -> "Buffer":
        """A new buffer holding a copy of a host object (bytes, numpy array, ...)."""
        nbytes = memoryview(data).nbytes
        buf = cls(nbytes, resource, stream)
        buf.copy_from(data, stream=stream)
        return buf

    @property
    def ptr(self) -> int:
        """The buffer's address (device pointer for device memory; an
        imported pool buffer has it from its import)."""
        p = self._ptr
        if p is None:
            p = call("cuabi_buffer_pointer", self)
            if self._h is None:     # closed meanwhile: no address to keep
                raise ClosedHandleError("Buffer is closed")
            self._ptr = p
        return p

    def close(self, stream=None) -> None:
        """Free the buffer (now, or when the last call on it that other
        threads have in flight returns; never blocks). Its address is
        forgotten: `ptr` and kernel arguments raise ClosedHandleError,
        `handle` is 0. close(stream) (cuda.core's form) frees it ordered on
        `stream` (free_async); without one, on the stream
        set_deallocation_stream() named, if any. Closing twice is fine."""
        if stream is None:
            stream = getattr(self, "_dealloc_stream", None)
        if stream is not None and self._h is not None:
            try:
                self.free_async(stream)
                return
            except ClosedHandleError:
                return
        self._ptr = None
        super().close()

    def set_deallocation_stream(self, stream) -> None:
        """cuda.core's set_deallocation_stream: a later close() without a
        stream frees the memory ordered on `stream` (the garbage
        collector's release does not: close buffers you ordered)."""
        if stream is None:
            raise TypeError("set_deallocation_stream: stream must be a stream, not None")
        if self._h is None:
            raise RuntimeError("Buffer is closed")
        self._dealloc_stream = _stream_arg(stream)

    @property
    def handle(self) -> int:
        """cuda.core's Buffer.handle: the address (int(buf.handle) as in
        cuda.core), 0 once closed. The cuabi handle is cuabi_handle."""
        if self._h is None:
            return 0
        return self.ptr

    @property
    def is_closed(self) -> bool:
        return self._h is None

    @property
    def device_id(self) -> int:
        """cuda.core's: its memory resource's device_id when it has one (-1 for
        a PinnedMemoryResource's or LegacyPinnedMemoryResource's buffer: host
        memory), else the ordinal of its memory's device (-1 for host memory)."""
        mr = getattr(self, "_mr", None)
        if mr is not None:
            return mr.device_id
        d = self.device
        return -1 if d is None else d.ordinal

    @property
    def memory_resource(self) -> "MemoryResource | None":
        """cuda.core's memory_resource: the resource object allocate() was
        called on, else `resource` (a new object for the same resource)."""
        mr = getattr(self, "_mr", None)
        return mr if mr is not None else self.resource

    @property
    def is_device_accessible(self) -> bool:
        return self.kind in ("device", "managed", "pinned")

    @property
    def is_host_accessible(self) -> bool:
        return self.kind in ("host", "pinned", "managed")

    @property
    def is_managed(self) -> bool:
        return self.kind == "managed"

    @property
    def is_mapped(self) -> bool:
        """cuda.core's Buffer.is_mapped: memory of another process mapped
        into this one through IPC (from_ipc_descriptor, an unpickled pool,
        legacy or VMM buffer); False for memory allocated here."""
        return getattr(self, "_mapped", False)

    @property
    def owner(self):
        return getattr(self, "_owner", None)

    @staticmethod
    def from_handle(ptr, size: int, mr: "MemoryResource | None" = None, owner=None, *,
                    stream=None) -> "Buffer":
        """cuda.core's Buffer.from_handle: a Buffer over an address made
        elsewhere. With `mr`, closing it calls mr.deallocate(ptr, size,
        stream); with `owner`, that object is kept alive; with neither, the
        memory is not freed. A host address (mr.is_device_accessible False)
        makes a host buffer."""
        if mr is not None and owner is not None:
            raise ValueError("from_handle: give mr or owner, not both")
        ptr = int(ptr)
        kind, dev = "device", None
        if mr is not None:
            kind = getattr(mr, "kind", None) or (
                "device" if mr.is_device_accessible else "host")
            did = getattr(mr, "device_id", -1)
            dev = None if did is None or did < 0 else did
            keep = _DeallocateOnRelease(mr, ptr, size, stream)
        else:
            keep = owner
        if dev is None and kind != "host":
            from ._core import _current   # lazy: import time
            cur = getattr(_current, "device", None)
            dev = 0 if cur is None or cur.closed else cur.ordinal
        b = Buffer.wrap(ptr, size, kind=kind, device=dev, owner=keep)
        b._owner = owner
        return b

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """cuda.core's Buffer.__dlpack__: the bytes as a 1-D int8 tensor."""
        v = self.view("int8")
        return v.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                            copy=copy)

    def __dlpack_device__(self):
        return self.view("int8").__dlpack_device__()

    @property
    def size(self) -> int:
        return call("cuabi_buffer_size", self)

    nbytes = size

    def __len__(self):
        return self.size

    @property
    def kind(self) -> str:
        return _KIND_NAMES.get(call("cuabi_buffer_kind", self), "?")

    @property
    def device(self) -> Device | None:
        return Device._borrowed_of("cuabi_buffer_device", self)

    @property
    def resource(self) -> MemoryResource | None:
        return MemoryResource._borrowed_of("cuabi_buffer_resource", self)

    def copy_from(self, src, offset: int = 0, stream=None) -> None:
        """Copy from another Buffer or a host object into this buffer at `offset`.
        With a stream, host memory must stay valid until the stream gets there."""
        offset = index_arg(offset, "copy_from: offset")
        if isinstance(src, Buffer):
            lib.cuabi_buffer_copy(self, offset, src, 0, src.size, _stream_arg(stream))
            return
        addr, nbytes, keep = _host_bytes(src)
        lib.cuabi_buffer_copy_from_host(self, offset, addr, nbytes, _stream_arg(stream))
        if _callbacks.captures and stream is not None:  # a graph reads it at every replay
            _callbacks.keep_for_captures((src, keep))
        del keep

    def copy_to(self, dst=None, offset: int = 0, size: int | None = None, stream=None,
                options=None):
        """Copy into `dst` (a Buffer or a writable host object) and return
        it. Without dst (cuda.core's meaning) a new Buffer of the same size
        from this buffer's memory resource; cuabi's former copy into a new
        bytearray is to_bytes()."""
        if options is not None:
            raise NotImplementedError("copy_to(options=CopyOptions): lands with issue 25")
        if dst is None:
            if offset or size is not None:
                raise TypeError("copy_to(): offset and size need a destination "
                                "(to_bytes(offset=, size=) reads into host memory)")
            mr = self.resource
            dst = (mr.allocate(self.size, stream=stream) if mr is not None
                   else Buffer(self.size, stream=stream))
        return self._copy_to(dst, offset, size, stream)

    def to_bytes(self, offset: int = 0, size: int | None = None, stream=None) -> bytearray:
        """The buffer's bytes (from `offset`, `size` of them) in a new
        bytearray. With a stream, read it after the stream gets there."""
        return self._copy_to(None, offset, size, stream)

    def _copy_to(self, dst, offset, size, stream):
        offset = index_arg(offset, "copy_to: offset")
        if size is not None:
            size = index_arg(size, "copy_to: size")
        elif offset > self.size:   # 0 bytes past the end: the library names the range
            size = 0
        if isinstance(dst, Buffer):
            n = self.size - offset if size is None else size
            lib.cuabi_buffer_copy(dst, 0, self, offset, n, _stream_arg(stream))
            return dst
        if dst is None:
            dst = bytearray(self.size - offset if size is None else size)
        mv = memoryview(dst)
        if mv.readonly or not mv.c_contiguous:
            raise ValueError("destination must be writable and C-contiguous")
        n = mv.nbytes if size is None else size
        index_arg(n, "copy_to: size", 0, mv.nbytes)   # more would write past the end of dst
        buf = (C.c_char * mv.nbytes).from_buffer(mv.cast("B")) if mv.nbytes else None
        lib.cuabi_buffer_copy_to_host(buf, self, offset, n, _stream_arg(stream))
        if _callbacks.captures and stream is not None:  # a graph writes it at every replay
            _callbacks.keep_for_captures((dst, buf))
        return dst

    def fill(self, value, width: int = 1, offset: int = 0, count: int | None = None,
             stream=None) -> None:
        """memset: `count` elements of `width` bytes (1, 2 or 4) set to
        `value`. As in cuda.core, `value` may be a 1, 2 or 4 byte buffer
        (bytes, numpy scalar): its bytes are the pattern."""
        if not isinstance(value, int) and hasattr(type(value), "__buffer__") or \
                isinstance(value, (bytes, bytearray, memoryview)) or hasattr(value, "tobytes"):
            raw_value = bytes(memoryview(value).cast("B")) if not hasattr(value, "tobytes") \
                else value.tobytes()
            if len(raw_value) not in (1, 2, 4):
                raise ValueError(f"fill: a pattern of {len(raw_value)} bytes (1, 2 or 4)")
            if width != 1 and width != len(raw_value):
                raise ValueError("fill: width and the pattern's size differ")
            width = len(raw_value)
            if count is None and (self.size - index_arg(offset, "fill: offset")) % width:
                raise ValueError(f"fill: buffer size is not a multiple of {width}")
            value = int.from_bytes(raw_value, "little")
        value = index_arg(value, "fill: value", 0, U32_MAX)
        width = index_arg(width, "fill: width", 0, U32_MAX)
        offset = index_arg(offset, "fill: offset")
        if count is None:
            count = max(self.size - offset, 0) // width if width else 0
        count = index_arg(count, "fill: count")
        lib.cuabi_buffer_memset(self, offset, value, width, count, _stream_arg(stream))

    def free_async(self, stream) -> None:
        """Destroy the handle; the memory goes back on `stream` once unused.
        With calls on the buffer in flight on other threads, the last of them
        frees it (on `stream`); errors are raised only when it is freed here."""
        s = _stream_arg(stream)
        h = use(self)           # ClosedHandleError when closed
        rel = _FreeAsync(h, s)
        try:
            old = swap_release(self, rel)       # closed now; rel frees it
            if old is False:
                raise ClosedHandleError("Buffer is closed")
            if old is not None:
                old.detach()    # its weakref.finalize: freed by rel, not at collection
            self._ptr = None
        finally:
            done(self)          # the last call in flight runs rel (here when none)
        if rel.error is not None:
            raise rel.error

    def view(self, dtype, shape=None, strides=None, offset: int = 0, readonly: bool = False):
        """A typed View of the buffer (strides in elements; None = row-major)."""
        # View: cuabi._view, a layer above (through cuabi._lib.hooks).
        return hooks.view_class().of_buffer(self, dtype, shape, strides, offset, readonly)

    # ---- several GPUs and processes (issue 15)
    def copy_peer(self, src: "Buffer", offset: int = 0, src_offset: int = 0,
                  size: int | None = None, stream=None) -> None:
        """Copy device memory of another device (or this one) into this buffer
        at `offset` (cuMemcpyPeer); with a stream of either device, ordered on it."""
        offset = index_arg(offset, "copy_peer: offset")
        src_offset = index_arg(src_offset, "copy_peer: src_offset")
        n = index_arg(src.size - src_offset if size is None else size, "copy_peer: size")
        lib.cuabi_peer_copy(self, offset, src, src_offset, n, _stream_arg(stream))

    def get_ipc_descriptor(self) -> bytes:
        """The buffer's IPC descriptor (bytes) for Buffer.from_ipc_descriptor()
        in another process of this host: for memory of MemoryResource.ipc() (or
        wrapped cudaMalloc memory) a legacy descriptor; for a buffer of
        MemoryResource.ipc_pool() a pool buffer's, which imports into the
        mapped pool. Keep this buffer alive while importers use it."""
        return _ipc().descriptor_of(self)

    @classmethod
    def from_ipc_descriptor(cls, mr_or_descriptor, descriptor: bytes | None = None) -> "Buffer":
        """Import memory another process exported. from_ipc_descriptor(d): a
        legacy descriptor, mapped until this buffer and its views are gone.
        from_ipc_descriptor(mr, d) (cuda.core's form): a buffer of the pool
        `mr` maps (MemoryResource.from_allocation_handle), freed here when
        this buffer and its views are gone. IPCError for a malformed, stale,
        other-host, same-process or other-pool descriptor."""
        if descriptor is not None:
            from . import _ipc_pool          # lazy: import time
            return _ipc_pool.import_buffer(cls, mr_or_descriptor, descriptor)
        d = bytes_arg(mr_or_descriptor, "Buffer.from_ipc_descriptor: descriptor")
        buf = cls._wrap(call("cuabi_ipc_buffer_import", d or None, len(d)))
        buf._mapped = True
        return buf

    @staticmethod
    def get_ipc_descriptors(buffers) -> list:
        """The IPC descriptors (bytes) of many buffers, those not exported
        yet in one C call (cuabi_ipc_buffers_export): get_ipc_descriptor()
        of each, faster. A cuabi extra (cuda.core exports one at a time)."""
        return _ipc().descriptors_of(buffers)

    @classmethod
    def from_ipc_descriptors(cls, mr: "MemoryResource", descriptors) -> list:
        """Buffers of the mapped pool `mr` from many descriptors (a sequence
        of them, or one bytes object of them end to end) in one C call
        (cuabi_ipc_pool_buffers_import), each with its address: all or
        nothing (IPCError naming the refused descriptor; the buffers imported
        before it are freed again). A cuabi extra."""
        return _ipc().import_buffers(cls, mr, descriptors)

    def __reduce__(self):
        """Pickling (multiprocessing) sends the IPC descriptor: the receiving
        process maps the same memory (a pool buffer sends its pool too, once
        per message). The first pickle keeps its value on the buffer; later
        ones return it (a descriptor does not change while the buffer lives)."""
        r = self.__dict__.get("_ipc_reduce")
        if r is not None and self._h is not None:
            a = r[1]            # (descriptor,) legacy; (resource, descriptor) a pool's
            if len(a) == 1 or a[0]._h is not None:
                return r
        return _ipc().reduce_buffer(self)

    @property
    def __cuda_array_interface__(self):
        """Version 3, bytes (typestr |u1), with the stream the buffer was
        allocated on (consumers such as mpi4py, Numba and nccl4py order
        their use after it): 1 for the legacy default stream, None for
        wrapped or imported memory (no stream known)."""
        if self.kind == "host":
            raise AttributeError("host buffers have no __cuda_array_interface__")
        s = getattr(self, "_stream", False)
        stream = None if s is False else 1 if s is None else (s.raw or 1)
        return {"shape": (self.size,), "typestr": "|u1", "data": (self.ptr, False),
                "strides": None, "version": 3, "stream": stream}
