"""Library information, devices, streams and events."""
from __future__ import annotations

import ctypes as C
import threading
from types import SimpleNamespace

from . import _capi
from ._handle import Handle
from ._lib import call, hooks, lib, new_struct, struct_to_dict
from .errors import INT_MAX, INT_MIN, index_arg


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


class Device(Handle):
    """One GPU and its primary context. Device(0) is the first GPU."""

    _ctype = "cuabi_device"

    def __init__(self, ordinal: int = 0):
        Handle.__init__(self, call("cuabi_device_get",
                                   index_arg(ordinal, "Device: ordinal", 0, INT_MAX)))

    @property
    def ordinal(self) -> int:
        return call("cuabi_device_ordinal", self)

    @property
    def properties(self) -> SimpleNamespace:
        """The cuabi_device_properties fields as attributes (name, uuid,
        compute_capability_major, multiprocessor_count, ...)."""
        props = new_struct(_capi.cuabi_device_properties)
        lib.cuabi_device_get_properties(C.byref(props), self)
        d = struct_to_dict(props)
        d.pop("version", None)
        return SimpleNamespace(**d)

    @property
    def name(self) -> str:
        return self.properties.name

    @property
    def compute_capability(self) -> tuple[int, int]:
        p = self.properties
        return p.compute_capability_major, p.compute_capability_minor

    @property
    def arch(self) -> str:
        """"sm_90" style architecture name, for compiler options."""
        return "sm_%d%d" % self.compute_capability

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

    def synchronize(self) -> None:
        lib.cuabi_device_synchronize(self)

    @property
    def context(self) -> int:
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

    def create_stream(self, non_blocking: bool = False, priority: int = 0) -> "Stream":
        return Stream(self, non_blocking=non_blocking, priority=priority)

    # ---- green contexts (issue 26; cuabi._green, a layer above: through
    # cuabi._lib.hooks). cuda.core's names.
    @property
    def resources(self):
        """The device's resources (cuda.core's DeviceResources): .sm, all its
        SMs, to split into partitions for green contexts."""
        return hooks.device_resources_class()(self)

    def create_context(self, options=None):
        """A green context of the SM resources in `options`
        (ContextOptions(resources=[group, ...]); groups of one split)."""
        return hooks.green_context_class()._create(self, options)

    def create_event(self, timing: bool = True, blocking_sync: bool = False) -> "Event":
        return Event(self, timing=timing, blocking_sync=blocking_sync)

    def default_stream(self) -> "Stream":
        """The legacy default stream (CU_STREAM_LEGACY)."""
        return Stream._wrap(call("cuabi_stream_legacy_default", self))

    def per_thread_default_stream(self) -> "Stream":
        return Stream._wrap(call("cuabi_stream_per_thread_default", self))


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
        """Make later work on this stream wait for an event (or for the work
        queued so far on another stream)."""
        if isinstance(event_or_stream, Stream):
            ev = event_or_stream.record()
            try:
                lib.cuabi_stream_wait_event(self, ev)
            finally:
                ev.close()
            return
        lib.cuabi_stream_wait_event(self, event_or_stream)

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


class Event(Handle):
    """A CUDA event: a marker on a stream, for ordering and timing."""

    _ctype = "cuabi_event"

    def __init__(self, device=None, timing: bool = True, blocking_sync: bool = False):
        opts = new_struct(_capi.cuabi_event_options)
        opts.flags = ((0 if timing else _capi.CUABI_EVENT_DISABLE_TIMING) |
                      (_capi.CUABI_EVENT_BLOCKING_SYNC if blocking_sync else 0))
        Handle.__init__(self, call("cuabi_event_create", _as_device(device), C.byref(opts)))

    def record(self, stream: Stream) -> "Event":
        lib.cuabi_event_record(self, stream)
        return self

    def synchronize(self) -> None:
        lib.cuabi_event_synchronize(self)

    def query(self) -> bool:
        return bool(call("cuabi_event_query", self))

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
        return cls._wrap(call("cuabi_ipc_event_create", _as_device(device)))

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
        d = bytes(descriptor)
        return cls._wrap(call("cuabi_ipc_event_import", (C.c_uint8 * len(d)).from_buffer_copy(d)
                              if d else None, len(d)))

    def __reduce__(self):
        return (Event.from_ipc_descriptor, (self.get_ipc_descriptor(),))
