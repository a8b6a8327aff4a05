"""Virtual memory, managed memory and batched copies (issue 25), with
cuda.core's names where cuda.core has the capability: VirtualMemoryResource
(+Options, modify_allocation), ManagedMemoryResource (+Options), ManagedBuffer
(read_mostly, preferred_location, accessed_by, prefetch, discard,
discard_prefetch), Host, copy_batch with CopyOptions, MemcpySrcAccessOrder and
MemcpyOverlapMode. cuabi's extras keep their own names (VirtualMemoryResource
.info / .set_access / .export_chunks / .import_chunks, CopyBatchResult,
ManagedBuffer.range_info). See docs/memory.md."""
from __future__ import annotations

import ctypes as C
import dataclasses
import enum
import os
from collections import namedtuple
from collections.abc import MutableSet
from types import SimpleNamespace

from . import _capi
from ._core import Device, _as_device
from ._handle import Handle
from ._lib import call, holding, lib, new_struct, struct_to_namespace
from ._memory import Buffer, MemoryResource, _host_bytes, _stream_arg
from .errors import ClosedHandleError, index_arg

__all__ = ["Host", "VirtualMemoryResource", "VirtualMemoryResourceOptions",
           "ManagedMemoryResource", "ManagedMemoryResourceOptions", "ManagedBuffer",
           "copy_batch", "CopyOptions", "MemcpySrcAccessOrder", "MemcpyOverlapMode",
           "CopyBatchResult", "prefetch_batch", "discard_batch", "discard_prefetch_batch"]


# ---------------------------------------------------------------- locations

class Host:
    """The host as a memory location (cuda.core's Host): Host() for the host,
    Host(numa_id=n) for NUMA node n, Host.numa_current() for the calling
    thread's node."""
    __slots__ = ("_numa_id", "_current")

    def __init__(self, numa_id: int | None = None, *, is_numa_current: bool = False):
        if numa_id is not None and is_numa_current:
            raise ValueError("Host: numa_id and is_numa_current exclude each other")
        self._numa_id = None if numa_id is None else index_arg(numa_id, "Host: numa_id")
        self._current = bool(is_numa_current)

    @classmethod
    def numa_current(cls) -> "Host":
        return cls(is_numa_current=True)

    @property
    def numa_id(self) -> int | None:
        return self._numa_id

    @property
    def is_numa_current(self) -> bool:
        return self._current

    def __eq__(self, other):
        return isinstance(other, Host) and (self._numa_id, self._current) == \
            (other._numa_id, other._current)

    def __hash__(self):
        return hash((Host, self._numa_id, self._current))

    def __repr__(self):
        if self._current:
            return "Host.numa_current()"
        return "Host()" if self._numa_id is None else f"Host(numa_id={self._numa_id})"


def _location(loc, what: str):
    """(cuabi_location_type, id) of a Device, a device ordinal, a Host or None."""
    if loc is None:
        return _capi.CUABI_LOCATION_NONE, 0
    if isinstance(loc, Host):
        if loc.is_numa_current:
            return _capi.CUABI_LOCATION_HOST_NUMA_CURRENT, 0
        if loc.numa_id is not None:
            return _capi.CUABI_LOCATION_HOST_NUMA, loc.numa_id
        return _capi.CUABI_LOCATION_HOST, 0
    if isinstance(loc, Device):
        return _capi.CUABI_LOCATION_DEVICE, loc.ordinal
    if isinstance(loc, int) and not isinstance(loc, bool):
        return _capi.CUABI_LOCATION_DEVICE, index_arg(loc, what)
    raise TypeError(f"{what}: a Device, a device ordinal, a Host or None, not "
                    f"{type(loc).__name__}")


def _from_location(kind: int, ident: int):
    if kind == _capi.CUABI_LOCATION_DEVICE:
        return Device(ident)
    if kind == _capi.CUABI_LOCATION_HOST:
        return Host()
    if kind == _capi.CUABI_LOCATION_HOST_NUMA:
        return Host(numa_id=ident)
    if kind == _capi.CUABI_LOCATION_HOST_NUMA_CURRENT:
        return Host.numa_current()
    return None


# ------------------------------------------------------------ virtual memory

_ACCESS = {"rw": _capi.CUABI_PEER_ACCESS_READ_WRITE, "r": _capi.CUABI_PEER_ACCESS_READ,
           "none": _capi.CUABI_PEER_ACCESS_NONE, None: _capi.CUABI_PEER_ACCESS_NONE}
_ACCESS_NAMES = {_capi.CUABI_PEER_ACCESS_READ_WRITE: "rw", _capi.CUABI_PEER_ACCESS_READ: "r",
                 _capi.CUABI_PEER_ACCESS_NONE: "none"}
_VMM_LOCATIONS = {"device": _capi.CUABI_LOCATION_DEVICE, "host": _capi.CUABI_LOCATION_HOST,
                  "host_numa": _capi.CUABI_LOCATION_HOST_NUMA,
                  "host_numa_current": _capi.CUABI_LOCATION_HOST_NUMA_CURRENT}
_HANDLES = {"posix_fd": _capi.CUABI_VMM_HANDLE_POSIX_FD, "fabric": _capi.CUABI_VMM_HANDLE_FABRIC,
            None: _capi.CUABI_VMM_HANDLE_NONE, "none": _capi.CUABI_VMM_HANDLE_NONE}
_GRANULARITY = {"recommended": _capi.CUABI_VMM_GRANULARITY_RECOMMENDED,
                "minimum": _capi.CUABI_VMM_GRANULARITY_MINIMUM}


def _pick(table: dict, value, what: str):
    key = getattr(value, "value", value)      # enum members of cuda.core's typing
    try:
        return table[key]
    except (KeyError, TypeError):
        names = ", ".join(repr(k) for k in table if k is not None)
        raise ValueError(f"{what}: {value!r} is not one of {names}") from None


@dataclasses.dataclass
class VirtualMemoryResourceOptions:
    """How a VirtualMemoryResource allocates (cuda.core's names and values:
    location_type "device" | "host" | "host_numa" | "host_numa_current",
    handle_type "posix_fd" | "fabric" | None, granularity "recommended" |
    "minimum", self_access / peer_access "rw" | "r", peers: devices or ordinals
    granted peer_access). cuabi's extras: reserve_size (bytes of address space
    each buffer reserves so it grows in place up to them; 0: its size) and
    location_id (the NUMA node of "host_numa")."""
    location_type: str = "device"
    handle_type: str | None = "posix_fd"
    granularity: str = "recommended"
    gpu_direct_rdma: bool = False
    addr_align: int | None = None
    peers: tuple = ()
    self_access: str = "rw"
    peer_access: str = "rw"
    reserve_size: int = 0
    location_id: int = 0

    def _struct(self):
        o = new_struct(_capi.cuabi_vmm_options)
        o.location_type = _pick(_VMM_LOCATIONS, self.location_type, "location_type")
        o.location_id = index_arg(self.location_id, "location_id")
        o.handle_type = _pick(_HANDLES, self.handle_type, "handle_type")
        o.granularity = _pick(_GRANULARITY, self.granularity, "granularity")
        o.gpu_direct_rdma = int(bool(self.gpu_direct_rdma))
        o.reserve_size = index_arg(self.reserve_size, "reserve_size")
        o.addr_align = index_arg(self.addr_align or 0, "addr_align")
        o.self_access = _pick(_ACCESS, self.self_access, "self_access")
        return o


class VirtualMemoryResource(MemoryResource):
    """Device memory through CUDA's virtual memory management (cuda.core's
    VirtualMemoryResource): buffers are reserved address ranges backed by
    physical chunks, and grow in place (modify_allocation: the address never
    changes). Buffer(size, vmr) allocates; sizes round up to the granularity."""

    def __init__(self, device_id=None, config: VirtualMemoryResourceOptions | None = None):
        config = config if config is not None else VirtualMemoryResourceOptions()
        if not isinstance(config, VirtualMemoryResourceOptions):
            raise TypeError("config must be a VirtualMemoryResourceOptions")
        dev = _as_device(device_id)
        Handle.__init__(self, call("cuabi_vmm_resource_create", dev, C.byref(config._struct())))
        self.config = config
        for p in config.peers:
            self.set_peer_access(p, config.peer_access)

    @property
    def granularity(self) -> int:
        """Every size is a multiple of it (cuMemGetAllocationGranularity)."""
        return call("cuabi_vmm_granularity", self.device, C.byref(self.config._struct()))

    def set_peer_access(self, device, access: str = "rw") -> None:
        """Access `device` gets to the buffers allocated from now on ("rw",
        "r" or "none")."""
        lib.cuabi_vmm_resource_set_peer_access(self, _as_device(device),
                                               _pick(_ACCESS, access, "access"))

    def get_peer_access(self, device) -> str:
        raise TypeError("a VMM resource's access is per buffer: VirtualMemoryResource.get_access(buf, device)")

    def allocate_buffer(self, size: int, reserve: int = 0) -> Buffer:
        """A buffer of `size` bytes that can grow in place up to `reserve`
        (0: the options' reserve_size)."""
        return Buffer._wrap(call("cuabi_vmm_buffer_allocate", self, index_arg(size, "size"),
                                 index_arg(reserve, "reserve")))

    def modify_allocation(self, buf: Buffer, new_size: int, config=None, *, stream=None) -> Buffer:
        """Grow (or shrink) `buf` in place to `new_size` bytes (rounded up to
        the granularity); returns `buf`, whose pointer stays. Growing past the
        reservation raises InvalidArgumentError naming it. Shrinking
        synchronises `stream` (None: the device) and releases whole chunks."""
        if config is not None:
            raise ValueError("modify_allocation: the new chunks use the resource's options "
                             "(cuabi keeps one configuration per resource)")
        if not isinstance(buf, Buffer):
            raise TypeError(f"buf must be a Buffer, got {type(buf).__name__}")
        lib.cuabi_vmm_buffer_resize(buf, index_arg(new_size, "new_size"), _stream_arg(stream))
        buf._ptr = None
        return buf

    @staticmethod
    def info(buf: Buffer) -> SimpleNamespace:
        """address, requested, size, mapped, reserved, granularity, chunks,
        handle_type, imported."""
        return struct_to_namespace(call("cuabi_vmm_buffer_info", buf))

    @staticmethod
    def set_access(buf: Buffer, device, access: str = "rw") -> None:
        lib.cuabi_vmm_set_access(buf, _as_device(device), _pick(_ACCESS, access, "access"))

    @staticmethod
    def get_access(buf: Buffer, device) -> str:
        return _ACCESS_NAMES[call("cuabi_vmm_get_access", buf, _as_device(device))]

    @staticmethod
    def export_chunks(buf: Buffer) -> list:
        """[(fd, descriptor)] for every chunk (fd -1 for fabric handles, which
        the 136-byte descriptor carries); the fds are yours to close once sent
        (cuabi_ipc_fd_send / multiprocessing's reduction.send_handle)."""
        n = VirtualMemoryResource.info(buf).chunks
        out = []
        try:
            for i in range(n):
                d = (C.c_uint8 * _capi.CUABI_IPC_DESCRIPTOR_SIZE)()
                fd = C.c_int(-1)
                lib.cuabi_vmm_export_chunk(C.byref(fd), d, len(d), buf, i)
                out.append((fd.value, bytes(d)))
        except BaseException:
            for fd, _ in out:
                if fd >= 0:
                    os.close(fd)
            raise
        return out

    def import_chunks(self, chunks) -> Buffer:
        """Map another process's VMM buffer from its chunks [(fd, descriptor)]
        (in order) into a new range with this resource's access. The fds are
        not closed."""
        chunks = list(chunks)
        if not chunks:
            raise ValueError("import_chunks: no chunks")
        fds = (C.c_int * len(chunks))(*(int(f) for f, _ in chunks))
        blob = b"".join(bytes(d) for _, d in chunks)
        desc = (C.c_uint8 * len(blob)).from_buffer_copy(blob)
        fabric = all(f < 0 for f, _ in chunks)
        return Buffer._wrap(call("cuabi_vmm_import", self, None if fabric else fds, len(chunks),
                                 desc, len(blob)))

    def __repr__(self):
        return f"<VirtualMemoryResource device={self.device.ordinal} config={self.config}>"


# ----------------------------------------------------------- managed memory

_MANAGED_LOCATIONS = {"device": _capi.CUABI_LOCATION_DEVICE, "host": _capi.CUABI_LOCATION_HOST,
                      "host_numa": _capi.CUABI_LOCATION_HOST_NUMA}


@dataclasses.dataclass
class ManagedMemoryResourceOptions:
    """cuda.core's options: preferred_location (a device ordinal, -1 for the
    host, a NUMA node with "host_numa", or None) and preferred_location_type
    ("device", "host", "host_numa" or None: the ordinal / -1 form). cuabi's
    extra: attach ("global" or "host": cuMemAllocManaged's flag)."""
    preferred_location: int | None = None
    preferred_location_type: str | None = None
    attach: str = "global"

    def _struct(self):
        o = new_struct(_capi.cuabi_managed_options)
        o.attach = _pick({"global": _capi.CUABI_MANAGED_ATTACH_GLOBAL,
                          "host": _capi.CUABI_MANAGED_ATTACH_HOST}, self.attach, "attach")
        t, loc = self.preferred_location_type, self.preferred_location
        if t is None:
            if loc is None:
                o.preferred_location_type = _capi.CUABI_LOCATION_NONE
            elif loc == -1:
                o.preferred_location_type = _capi.CUABI_LOCATION_HOST
            else:
                o.preferred_location_type = _capi.CUABI_LOCATION_DEVICE
                o.preferred_location_id = index_arg(loc, "preferred_location")
            return o
        o.preferred_location_type = _pick(_MANAGED_LOCATIONS, t, "preferred_location_type")
        if o.preferred_location_type == _capi.CUABI_LOCATION_HOST:
            if loc is not None:
                raise ValueError('preferred_location must be None with "host"')
        elif loc is None:
            raise ValueError(f'preferred_location is needed with "{t}"')
        else:
            o.preferred_location_id = index_arg(loc, "preferred_location")
        return o


class ManagedMemoryResource(MemoryResource):
    """Managed memory (cuMemAllocManaged; cuda.core's ManagedMemoryResource,
    which in cuda.core is a managed pool): its buffers are reachable from the
    host and every device and migrate on demand. Use ManagedBuffer(size, mr)
    for the advice API. A buffer's DLPack device is kDLCUDAManaged."""

    def __init__(self, options: ManagedMemoryResourceOptions | None = None, *, device=None):
        options = options if options is not None else ManagedMemoryResourceOptions()
        if not isinstance(options, ManagedMemoryResourceOptions):
            raise TypeError("options must be a ManagedMemoryResourceOptions")
        Handle.__init__(self, call("cuabi_managed_resource_create", _as_device(device),
                                   C.byref(options._struct())))
        self.options = options

    def allocate(self, size: int, stream=None) -> "ManagedBuffer":
        """cuda.core's allocate: a ManagedBuffer (the advice API: read_mostly,
        preferred_location, accessed_by, prefetch, ...) of `size` bytes."""
        size = index_arg(size, "allocate: size")
        b = ManagedBuffer(size, self, stream)
        b._mr = self                # memory_resource: this object, as cuda.core's
        if stream is not None:      # cuda.core: close() frees on the allocation stream
            b._dealloc_stream = _stream_arg(stream)
        return b

    @property
    def is_managed(self) -> bool:
        return True

    @property
    def is_device_accessible(self) -> bool:
        return True

    @property
    def is_host_accessible(self) -> bool:
        return True

    @property
    def preferred_location(self):
        """(type, id) as the options say, or None."""
        t = self.options.preferred_location_type
        if t is None and self.options.preferred_location is None:
            return None
        return (t or ("host" if self.options.preferred_location == -1 else "device"),
                self.options.preferred_location)


def _accessed_by_list(buf) -> list:
    """The live CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY list of a managed buffer."""
    from ._core import device_count   # lazy: import time (a cheap call, once)
    n = max(device_count(), 1) + 1
    arr = (C.c_int32 * n)()
    lib.cuabi_managed_range_get(arr, n, buf, 0, buf.size, _capi.CUABI_MANAGED_RANGE_ACCESSED_BY)
    return [Host() if v == -1 else Device(v) for v in arr if v != -2]


class AccessedBySetProxy(MutableSet):
    """cuda.core's live view of a managed buffer's accessed-by advice: reads
    ask the driver (cuMemRangeGetAttribute), add / discard advise
    (cuMemAdvise); nothing is kept here. A Host with a NUMA node reads back
    as Host()."""

    __slots__ = ("_buf",)

    def __init__(self, buf):
        self._buf = buf

    @classmethod
    def _from_iterable(cls, it):
        return set(it)              # &, |, ^ make a plain set, as cuda.core's

    def __contains__(self, location) -> bool:
        if not isinstance(location, (Device, Host)):
            return False
        return location in _accessed_by_list(self._buf)

    def __iter__(self):
        return iter(_accessed_by_list(self._buf))

    def __len__(self) -> int:
        return len(_accessed_by_list(self._buf))

    def add(self, location) -> None:
        """Advise that `location` (a Device or Host()) accesses the buffer."""
        if not isinstance(location, (Device, Host)):
            raise TypeError(f"expected Device or Host, got {type(location).__name__}")
        t, i = _location(location, "accessed_by")
        lib.cuabi_managed_advise(self._buf, 0, self._buf.size,
                                 _capi.CUABI_MANAGED_SET_ACCESSED_BY, t, i)

    def discard(self, location) -> None:
        """Undo add(location); nothing for a location that is no Device or
        plain Host (those never enter the set), as cuda.core's."""
        if not isinstance(location, (Device, Host)):
            return
        if isinstance(location, Host) and (getattr(location, "numa_id", None) is not None or
                                           getattr(location, "is_numa_current", False)):
            return
        t, i = _location(location, "accessed_by")
        lib.cuabi_managed_advise(self._buf, 0, self._buf.size,
                                 _capi.CUABI_MANAGED_UNSET_ACCESSED_BY, t, i)

    def __repr__(self):
        return f"AccessedBySetProxy({set(_accessed_by_list(self._buf))!r})"


class ManagedBuffer(Buffer):
    """A managed-memory buffer with cuda.core's property-style advice:
    read_mostly, preferred_location (a Device, a Host or None), accessed_by
    (a set of Devices / Hosts; assign to replace it), prefetch(location,
    stream=), discard(stream=), discard_prefetch(location, stream=).
    ManagedBuffer(size, resource=None, stream=None): resource defaults to a
    ManagedMemoryResource of device 0."""

    def __init__(self, size: int, resource: MemoryResource | None = None, stream=None,
                 alignment: int = 0):
        if resource is None:
            resource = ManagedMemoryResource()
        if resource.kind != "managed":
            raise ValueError(f"ManagedBuffer needs a managed resource, not a {resource.kind} one")
        Buffer.__init__(self, size, resource, stream, alignment)

    def _advise(self, advice, loc=None):
        t, i = _location(loc, "location")
        lib.cuabi_managed_advise(self, 0, self.size, advice, t, i)

    def range_info(self, offset: int = 0, size: int | None = None) -> SimpleNamespace:
        """read_mostly, preferred / last-prefetch location (cuabi's extra)."""
        offset = index_arg(offset, "offset")
        size = self.size - offset if size is None else index_arg(size, "size")
        return struct_to_namespace(call("cuabi_managed_range_info", self, offset, size))

    @property
    def read_mostly(self) -> bool:
        return bool(self.range_info().read_mostly)

    @read_mostly.setter
    def read_mostly(self, value: bool) -> None:
        self._advise(_capi.CUABI_MANAGED_SET_READ_MOSTLY if value
                     else _capi.CUABI_MANAGED_UNSET_READ_MOSTLY)

    @property
    def preferred_location(self):
        r = self.range_info()
        return _from_location(r.preferred_location_type, r.preferred_location_id)

    @preferred_location.setter
    def preferred_location(self, loc) -> None:
        if loc is None:
            self._advise(_capi.CUABI_MANAGED_UNSET_PREFERRED_LOCATION)
        else:
            self._advise(_capi.CUABI_MANAGED_SET_PREFERRED_LOCATION, loc)

    @property
    def last_prefetch_location(self):
        r = self.range_info()
        return _from_location(r.last_prefetch_location_type, r.last_prefetch_location_id)

    @classmethod
    def from_handle(cls, ptr, size: int, mr: MemoryResource | None = None, owner=None, *,
                    stream=None) -> "ManagedBuffer":
        """cuda.core's ManagedBuffer.from_handle: a ManagedBuffer over a
        managed address made elsewhere (Buffer.from_handle's mr / owner
        rules: with mr, closing it calls mr.deallocate)."""
        if mr is not None:
            b = Buffer.from_handle(ptr, size, mr, owner, stream=stream)
            b.__class__ = cls
            return b
        from ._core import _current   # lazy: import time
        cur = getattr(_current, "device", None)
        dev = 0 if cur is None or cur.closed else cur.ordinal
        b = cls.wrap(int(ptr), size, kind="managed", device=dev, owner=owner)
        b._owner = owner
        return b

    @property
    def accessed_by(self) -> AccessedBySetProxy:
        """cuda.core's live set of the locations advised to access the
        buffer (add / discard advise; assign an iterable to replace it)."""
        if self.closed:
            raise ClosedHandleError("ManagedBuffer is closed")
        return AccessedBySetProxy(self)

    @accessed_by.setter
    def accessed_by(self, locations) -> None:
        want = set()
        for loc in locations:
            if not isinstance(loc, (Device, Host)):
                raise TypeError(f"accessed_by entries must be Device or Host, got "
                                f"{type(loc).__name__}")
            want.add(_location(loc, "accessed_by"))
        have = {_location(loc, "accessed_by") for loc in _accessed_by_list(self)}
        for t, i in have - want:
            lib.cuabi_managed_advise(self, 0, self.size, _capi.CUABI_MANAGED_UNSET_ACCESSED_BY, t, i)
        for t, i in want - have:
            lib.cuabi_managed_advise(self, 0, self.size, _capi.CUABI_MANAGED_SET_ACCESSED_BY, t, i)

    def prefetch(self, location, *, stream, offset: int = 0, size: int | None = None) -> None:
        t, i = _location(location, "prefetch: location")
        offset = index_arg(offset, "offset")
        size = self.size - offset if size is None else index_arg(size, "size")
        lib.cuabi_managed_prefetch(self, offset, size, t, i, _stream_arg(stream))

    def discard(self, *, stream, offset: int = 0, size: int | None = None) -> None:
        offset = index_arg(offset, "offset")
        size = self.size - offset if size is None else index_arg(size, "size")
        lib.cuabi_managed_discard(self, offset, size, _stream_arg(stream))

    def discard_prefetch(self, location, *, stream, offset: int = 0,
                         size: int | None = None) -> None:
        t, i = _location(location, "discard_prefetch: location")
        offset = index_arg(offset, "offset")
        size = self.size - offset if size is None else index_arg(size, "size")
        lib.cuabi_managed_discard_prefetch(self, offset, size, t, i, _stream_arg(stream))


# --------------------------------------------- batches of managed buffers

def _managed_batch(buffers, what: str):
    """The buffers of a batch as a ctypes array (and the list keeping them)."""
    if isinstance(buffers, Buffer):
        raise TypeError(f"{what}: buffers must be a sequence of Buffers (for one buffer, use "
                        f"the ManagedBuffer method)")
    try:
        bufs = list(buffers)
    except TypeError:
        raise TypeError(f"{what}: buffers must be a sequence of Buffers, not "
                        f"{type(buffers).__name__}") from None
    if not bufs:
        raise ValueError(f"{what}: buffers is empty")
    for i, b in enumerate(bufs):
        if not isinstance(b, Buffer):
            raise TypeError(f"{what}: buffers[{i}] is a {type(b).__name__}, not a Buffer")
    return bufs


def _batch_locations(locations, n: int, what: str):
    """(types, ids, count) of a Device / Host or a sequence of n of them."""
    if isinstance(locations, (Device, Host)) or locations is None or (
            isinstance(locations, int) and not isinstance(locations, bool)):
        locs = [locations]
    else:
        try:
            locs = list(locations)
        except TypeError:
            raise TypeError(f"{what}: locations must be a Device, a Host or a sequence of them, "
                            f"not {type(locations).__name__}") from None
        if len(locs) != n:
            raise ValueError(f"{what}: {len(locs)} locations for {n} buffers (one for all, or "
                             "one each)")
    if any(loc is None for loc in locs):
        raise TypeError(f"{what}: a location is a Device or a Host, not None")
    pairs = [_location(loc, f"{what}: location") for loc in locs]
    types = (C.c_int32 * len(pairs))(*(t for t, _ in pairs))
    ids = (C.c_int32 * len(pairs))(*(i for _, i in pairs))
    return types, ids, len(pairs)


def prefetch_batch(stream, buffers, locations) -> None:
    """Prefetch whole managed buffers to locations in one driver call on
    `stream` (cuda.core's prefetch_batch; cuMemPrefetchBatchAsync, one
    cuMemPrefetchAsync per buffer before CUDA 13). locations: one Device or
    Host for all, or a sequence of one per buffer. For one buffer,
    ManagedBuffer.prefetch."""
    bufs = _managed_batch(buffers, "prefetch_batch")
    types, ids, nloc = _batch_locations(locations, len(bufs), "prefetch_batch")
    s = _stream_arg(stream)
    with holding(*bufs) as hs:
        arr = (C.c_void_p * len(hs))(*hs)
        lib.cuabi_managed_prefetch_batch(arr, len(hs), types, ids, nloc, s)


def discard_batch(stream, buffers) -> None:
    """Discard whole managed buffers in one driver call on `stream`
    (cuda.core's discard_batch; cuMemDiscardBatchAsync, CUDA 13 drivers:
    NotSupportedError naming it before). For one buffer, ManagedBuffer.discard."""
    bufs = _managed_batch(buffers, "discard_batch")
    s = _stream_arg(stream)
    with holding(*bufs) as hs:
        arr = (C.c_void_p * len(hs))(*hs)
        lib.cuabi_managed_discard_batch(arr, len(hs), s)


def discard_prefetch_batch(stream, buffers, locations) -> None:
    """Discard whole managed buffers and prefetch them to locations in one
    driver call on `stream` (cuda.core's discard_prefetch_batch;
    cuMemDiscardAndPrefetchBatchAsync, CUDA 13 drivers). locations as for
    prefetch_batch. For one buffer, ManagedBuffer.discard_prefetch."""
    bufs = _managed_batch(buffers, "discard_prefetch_batch")
    types, ids, nloc = _batch_locations(locations, len(bufs), "discard_prefetch_batch")
    s = _stream_arg(stream)
    with holding(*bufs) as hs:
        arr = (C.c_void_p * len(hs))(*hs)
        lib.cuabi_managed_discard_prefetch_batch(arr, len(hs), types, ids, nloc, s)


# ------------------------------------------------------------ batched copies

class MemcpySrcAccessOrder(str, enum.Enum):
    """cuda.core's source access orders (CUmemcpySrcAccessOrder)."""
    STREAM = "stream"
    DURING_API_CALL = "during_api_call"
    ANY = "any"


class MemcpyOverlapMode(str, enum.Enum):
    """cuda.core's overlap hints (CUmemcpyFlags)."""
    DEFAULT = "default"
    PREFER_OVERLAP_WITH_COMPUTE = "prefer_overlap_with_compute"


_ORDERS = {"stream": _capi.CUABI_COPY_SRC_STREAM,
           "during_api_call": _capi.CUABI_COPY_SRC_DURING_API_CALL,
           "any": _capi.CUABI_COPY_SRC_ANY}
_OVERLAP = {"default": _capi.CUABI_COPY_DEFAULT,
            "prefer_overlap_with_compute": _capi.CUABI_COPY_PREFER_OVERLAP_WITH_COMPUTE}


@dataclasses.dataclass(frozen=True)
class CopyOptions:
    """One copy's hints (cuda.core's CopyOptions): src_access_order,
    src_location_hint / dst_location_hint (a Device, a Host or None; honoured
    for managed and pageable memory only), overlap_mode."""
    src_access_order: str = "stream"
    src_location_hint: object = None
    dst_location_hint: object = None
    overlap_mode: str = "default"


CopyBatchResult = namedtuple("CopyBatchResult",
                             "path copies bytes driver_calls attribute_sets synchronized reason")
CopyBatchResult.__doc__ = """What copy_batch did (cuabi's extra): path "batched"
(one cuMemcpyBatchAsync) or "single" (one copy per item: the driver has no
batched entry point, `reason` says so) or "none"."""
_PATHS = {_capi.CUABI_COPY_PATH_NONE: "none", _capi.CUABI_COPY_PATH_BATCHED: "batched",
          _capi.CUABI_COPY_PATH_SINGLE: "single"}


def _end(obj, what: str, keep: list):
    """(buffer handle, view handle, address, size or None) of a copy end:
    a Buffer, a View (contiguous), a host object with the buffer protocol,
    or an (address, size) pair."""
    if isinstance(obj, Buffer):
        return obj.cuabi_handle, None, 0, obj.size
    if getattr(obj, "_ctype", None) == "cuabi_view":
        return None, obj.cuabi_handle, 0, obj.nbytes
    if isinstance(obj, tuple) and len(obj) == 2:
        return None, None, index_arg(obj[0], what + " address"), index_arg(obj[1], what + " size")
    try:
        addr, n, k = _host_bytes(obj)
    except TypeError:
        raise TypeError(f"{what}: a Buffer, a View, a host object with the buffer protocol or "
                        f"an (address, size) pair, not {type(obj).__name__}") from None
    keep.append(k)
    return None, None, addr or 0, n


def copy_batch(stream, srcs, dsts, *, options=None) -> CopyBatchResult:
    """Copy srcs[i] into dsts[i] for every i in one cuMemcpyBatchAsync call on
    `stream` (cuda.core's copy_batch; one copy per item on drivers without it,
    which the result says). Each end: a Buffer, a View, a host object with the
    buffer protocol (sources may be read-only), or an (address, size) pair;
    sizes must match. options: one CopyOptions for all, a sequence of them,
    or None. The copies of one batch run in any order. When an end is a host
    object, copy_batch waits for the batch before returning (the object may
    be a temporary); (address, size) pairs stay asynchronous."""
    if isinstance(srcs, Buffer) or isinstance(dsts, Buffer):
        raise TypeError("copy_batch takes sequences of buffers (use Buffer.copy_to for one)")
    srcs, dsts = list(srcs), list(dsts)
    if len(srcs) != len(dsts):
        raise ValueError(f"copy_batch: {len(srcs)} sources but {len(dsts)} destinations")
    n = len(srcs)
    if options is None or isinstance(options, CopyOptions):
        opts = [options or CopyOptions()] * n
    else:
        opts = list(options)
        if len(opts) != n:
            raise ValueError(f"copy_batch: {len(opts)} options for {n} copies")
    items = (_capi.cuabi_copy_item * max(n, 1))()
    keep: list = []
    for i, (s, d, o) in enumerate(zip(srcs, dsts, opts)):
        it = items[i]
        lib.cuabi_copy_item_init(C.byref(it), _capi.cuabi_copy_item._cuabi_version_)
        it.src_buffer, it.src_view, it.src_address, ns = _end(s, f"copy {i}: source", keep)
        it.dst_buffer, it.dst_view, it.dst_address, nd = _end(d, f"copy {i}: destination", keep)
        if isinstance(d, (bytes, str)) or (not isinstance(d, (Buffer, tuple)) and
                                           getattr(d, "_ctype", None) != "cuabi_view" and
                                           memoryview(d).readonly):
            raise ValueError(f"copy {i}: the destination is read-only")
        if ns != nd:
            raise ValueError(f"copy {i}: the source has {ns} bytes, the destination {nd}")
        it.size = ns
        if not isinstance(o, CopyOptions):
            raise TypeError(f"copy {i}: options must be CopyOptions")
        it.src_access_order = _pick(_ORDERS, o.src_access_order, "src_access_order")
        it.flags = _pick(_OVERLAP, o.overlap_mode, "overlap_mode")
        it.src_hint_type, it.src_hint_id = _location(o.src_location_hint, "src_location_hint")
        it.dst_hint_type, it.dst_hint_id = _location(o.dst_location_hint, "dst_location_hint")
    st = _stream_arg(stream)
    r = call("cuabi_copy_batch", items, n, st)
    if keep:
        # Host objects are read or written by the time copy_batch returns:
        # their owners (often temporaries) may go right after. An H100
        # (2026-11-28, driver 580) read a temporary numpy source after it was
        # freed even with DURING_API_CALL; pass (address, size) pairs for host
        # memory you keep alive yourself to stay asynchronous.
        st.synchronize()
    del keep
    reason = r.reason.decode() if isinstance(r.reason, bytes) else (r.reason or "")
    return CopyBatchResult(_PATHS.get(r.path, "?"), r.copies, r.bytes, r.driver_calls,
                           r.attribute_sets, bool(r.synchronized), reason)
