"""Library information, devices, streams and events."""
from __future__ import annotations

import ctypes as C
import threading
from types import SimpleNamespace

from . import _capi
from ._handle import Handle
from ._lib import call, holding, hooks, lib, new_struct, struct_to_dict
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
        d = bytes_arg(descriptor, "Event.from_ipc_descriptor: descriptor")
        return cls._wrap(call("cuabi_ipc_event_import", (C.c_uint8 * len(d)).from_buffer_copy(d)
                              if d else None, len(d)))

    def __reduce__(self):
        return (Event.from_ipc_descriptor, (self.get_ipc_descriptor(),))
