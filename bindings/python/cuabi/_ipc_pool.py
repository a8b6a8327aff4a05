"""IPC-enabled memory pools: sharing buffers between processes of one host
through a pool's file descriptor (sent once) and 136-byte buffer descriptors
(cuMemPoolExportPointer data, a few microseconds to import).

The names follow cuda.core: MemoryResource.ipc_pool() (cuda.core's
DeviceMemoryResource(dev, DeviceMemoryResourceOptions(ipc_enabled=True))),
mr.get_allocation_handle(), MemoryResource.from_allocation_handle(dev, h),
buffer.get_ipc_descriptor(), Buffer.from_ipc_descriptor(mr, descriptor).

Pickling (multiprocessing): a buffer of a pool pickles as (resource,
descriptor), so a list of buffers carries its resource once. The resource
pickles as its descriptor and the address of a small fd server in the
exporting process (a multiprocessing Listener, authenticated with the
process's authkey like multiprocessing's own resource sharer). The
receiving process maps each pool once and keeps it in a registry keyed by
the pool id; only the first message that names a pool makes it ask the
server for the fd (SCM_RIGHTS). multiprocessing's DupFd would send the fd
with every message and cost a connection each time (about 300 us, 10 us a
buffer in a message of 32) even where the pool is mapped already."""
from __future__ import annotations

import ctypes as C
import os
import threading
import weakref

from . import _capi
from ._lib import call, holding, hooks, new_struct, raise_last, raw
from .errors import IPCError, error_class, index_arg

DESCRIPTOR_SIZE = _capi.CUABI_IPC_DESCRIPTOR_SIZE
_KIND_AT, _ID_AT = 10, 56          # src/runtime/ipc.h: CUABI__IPC_KIND, CUABI__IPC_POOL_ID
_POOL_MEMORY = _capi.CUABI_IPC_POOL_MEMORY

# pool id (8 descriptor bytes) -> resource. Exporters: weak (the program owns
# them; a buffer's pickle finds its resource's Python object here, so that a
# list pickles it once). Mapped pools: strong (mapped once per process and
# reused by every later message; close() the resource to unmap it).
_exported: "weakref.WeakValueDictionary[bytes, object]" = weakref.WeakValueDictionary()
_mapped: dict = {}


def _forget_after_fork():
    # A forked child is another process: the parent's pools are not its own
    # (it must map them), the parent's mappings are not valid there, and
    # the parent's fd server thread does not run there.
    global _server
    _exported.clear()
    _mapped.clear()
    _server = None


os.register_at_fork(after_in_child=_forget_after_fork)

# The per-buffer calls, unconverted (the benchmark's path).
_export = raw("cuabi_ipc_buffer_export")
_import = raw("cuabi_ipc_pool_buffer_import")
_SIZE = C.c_size_t(DESCRIPTOR_SIZE)


class IPCAllocationHandle:
    """A pool's shareable handle: an owned file descriptor and the pool's
    descriptor (bytes). close() closes the fd; pickling sends a duplicate
    through multiprocessing (DupFd), so it works with multiprocessing's
    queues and pipes, not with plain pickle files."""

    __slots__ = ("_fd", "descriptor", "__weakref__")

    def __init__(self, fd: int, descriptor: bytes):
        self._fd = int(fd)
        self.descriptor = bytes(descriptor)

    @property
    def handle(self) -> int:
        """The file descriptor (cuda.core's name); ValueError after close()."""
        if self._fd < 0:
            raise ValueError("IPCAllocationHandle is closed")
        return self._fd

    def fileno(self) -> int:
        return self.handle

    def detach(self) -> int:
        """The fd, which the caller now owns (this object forgets it)."""
        fd, self._fd = self.handle, -1
        return fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __reduce__(self):
        from multiprocessing.reduction import DupFd     # lazy: import time (multiprocessing)
        return _rebuild_handle, (DupFd(self.handle), self.descriptor)

    def __repr__(self):
        state = "closed" if self._fd < 0 else f"fd {self._fd}"
        return f"<cuabi.IPCAllocationHandle {state}, pool {self.descriptor[_ID_AT:_ID_AT + 8].hex()}>"


def _rebuild_handle(dup, descriptor):
    return IPCAllocationHandle(dup.detach(), descriptor)


# --------------------------------------------------------------- exporter

def create(cls, device, max_size, release_threshold):
    from ._core import _as_device    # lazy: import time (cuabi.IPCAllocationHandle alone)
    opts = new_struct(_capi.cuabi_ipc_pool_options)
    if max_size:
        opts.max_size = index_arg(max_size, "ipc_pool: max_size")
    if release_threshold is not None:
        opts.release_threshold = index_arg(release_threshold, "ipc_pool: release_threshold")
    mr = cls._wrap(call("cuabi_ipc_pool_create", _as_device(device), C.byref(opts)))
    _exported[pool_key(mr)] = mr
    return mr


def pool_key(mr) -> bytes:
    """The pool id as descriptors carry it (little-endian)."""
    _role, pid = call("cuabi_ipc_pool_info", mr)
    return pid.to_bytes(8, "little")


def allocation_handle(mr) -> IPCAllocationHandle:
    d = (C.c_uint8 * DESCRIPTOR_SIZE)()
    fd = call("cuabi_ipc_pool_export", d, DESCRIPTOR_SIZE, mr)
    return IPCAllocationHandle(fd, bytes(d))


class _FdServer:
    """Hands this process's pool fds to processes that ask for them (a
    daemon thread on a multiprocessing Listener; clients authenticate with
    the authkey multiprocessing gives every process of one program)."""

    def __init__(self):
        # lazy: import time (multiprocessing, only once a pool is pickled)
        from multiprocessing import current_process
        from multiprocessing.connection import Listener
        self._fds: dict = {}            # pool key -> fd (the resource's, not a dup)
        self._lock = threading.Lock()
        self._listener = Listener(family="AF_UNIX", authkey=current_process().authkey)
        self.address = self._listener.address
        threading.Thread(target=self._serve, name="cuabi-ipc-pool-fds", daemon=True).start()

    def share(self, key, fd):
        with self._lock:
            self._fds[key] = fd

    def unshare(self, key, fd):
        """Forget `fd` before it is closed (never send a closed number)."""
        with self._lock:
            if self._fds.get(key) == fd:
                del self._fds[key]

    def _serve(self):
        from multiprocessing.reduction import send_handle    # lazy: import time
        while True:
            try:
                conn = self._listener.accept()     # authenticates
            except Exception:                   # noqa: BLE001 (a bad client; keep serving)
                continue
            try:
                key, pid = conn.recv()
                with self._lock:                # sent under the lock: unshare() waits
                    fd = self._fds.get(key)
                    conn.send(fd is not None)
                    if fd is not None:
                        send_handle(conn, fd, pid)
            except Exception:                   # noqa: BLE001
                pass
            finally:
                conn.close()


_server = None
_server_lock = threading.Lock()


def _fd_server() -> _FdServer:
    global _server
    with _server_lock:
        if _server is None:
            _server = _FdServer()
        return _server


def _fetch_fd(address, key) -> int:
    # lazy: import time (multiprocessing, only once a pool is unpickled)
    from multiprocessing import current_process
    from multiprocessing.connection import Client
    from multiprocessing.reduction import recv_handle
    with Client(address, authkey=current_process().authkey) as c:
        c.send((key, os.getpid()))
        if not c.recv():
            raise IPCError(f"the exporting process no longer shares pool {key.hex()} "
                           "(its resource was closed)", status=_capi.CUABI_ERROR_IPC)
        return recv_handle(c)


def _unshare(key, h):
    if _server is not None:
        _server.unshare(key, h._fd)
    h.close()


def reduce_resource(mr):
    """An exporting pool pickles as its descriptor and its fd server's
    address; its fd is exported once and closed with the resource."""
    h = mr.__dict__.get("_ipc_handle")
    if h is None or h.closed:
        h = mr._ipc_handle = allocation_handle(mr)
        key = h.descriptor[_ID_AT:_ID_AT + 8]
        _fd_server().share(key, h.handle)
        weakref.finalize(mr, _unshare, key, h)
        _exported.setdefault(key, mr)
    return _rebuild_resource, (h.descriptor, _fd_server().address)


def _rebuild_resource(descriptor, address):
    key = bytes(descriptor)[_ID_AT:_ID_AT + 8]
    for registry in (_exported, _mapped):
        mr = registry.get(key)
        if mr is not None and not mr.closed:
            return mr                   # no fd needed: mapped (or exported) here already
    fd = _fetch_fd(address, key)
    try:
        return from_descriptor(fd, descriptor)
    finally:
        os.close(fd)


def from_descriptor(fd, descriptor):
    """The resource of a pool for this process: the exporter itself here,
    a mapping made earlier, or a new mapping."""
    d = bytes(descriptor)
    key = d[_ID_AT:_ID_AT + 8]
    mr = _exported.get(key)
    if mr is not None and not mr.closed:
        return mr
    mr = _mapped.get(key)
    if mr is None or mr.closed:
        # MemoryResource: cuabi._memory, the layer above (through cuabi._lib.hooks).
        mr = _mapped[key] = hooks.memory_resource_class()._wrap(
            call("cuabi_ipc_pool_import", int(fd), d or None, len(d)))
    return mr


# ----------------------------------------------------------------- buffers

def descriptor_of(buf) -> bytes:
    out = C.create_string_buffer(DESCRIPTOR_SIZE)
    with holding(buf) as (h,):      # in use during the call
        st = _export(out, _SIZE, C.c_void_p(h))
    if st:
        raise_last(st, "cuabi_ipc_buffer_export")
    return out.raw


def _vmm_chunks(buf):
    """[(fd, descriptor)] of every chunk of a VMM buffer of this process (new
    fds), or None for a buffer that is not one (issue 25)."""
    try:
        n = call("cuabi_vmm_buffer_info", buf).chunks
    except (error_class(_capi.CUABI_ERROR_NOT_SUPPORTED), KeyError):
        return None
    out = []
    try:
        for i in range(n):
            d = (C.c_uint8 * DESCRIPTOR_SIZE)()
            fd = call("cuabi_vmm_export_chunk", d, DESCRIPTOR_SIZE, buf, i)
            out.append((fd, bytes(d)))
    except BaseException:
        for fd, _ in out:
            if fd >= 0:
                os.close(fd)
        raise
    return out


def _close_shared(keys, fds):
    for k, fd in zip(keys, fds):
        if _server is not None and k is not None:
            _server.unshare(k, fd)
        if fd >= 0:
            os.close(fd)


def _reduce_vmm(buf, chunks):
    """A VMM buffer pickles as its chunk descriptors and the fd server's
    address; the chunk fds stay shared (and open) until the buffer is gone."""
    server = _fd_server()
    # fabric chunks carry their handle in the descriptor: no fd, no key
    keys = tuple(None if fd < 0 else b"vmm:" + os.urandom(12) for fd, _ in chunks)
    for k, (fd, _) in zip(keys, chunks):
        if k is not None:
            server.share(k, fd)
    weakref.finalize(buf, _close_shared, keys, [fd for fd, _ in chunks])
    return _rebuild_vmm, (tuple(d for _, d in chunks), keys, server.address)


def _rebuild_vmm(descriptors, keys, address):
    fds = [_fetch_fd(address, k) for k in keys if k is not None]
    try:
        from ._core import _as_device            # lazy: import time
        res = call("cuabi_vmm_resource_create", _as_device(None), None)
        try:
            blob = b"".join(descriptors)
            arr = (C.c_int * len(fds))(*fds) if fds else None
            h = call("cuabi_vmm_import", res, arr, len(descriptors),
                     (C.c_uint8 * len(blob)).from_buffer_copy(blob), len(blob))
        finally:
            raw("cuabi_memory_resource_release")(C.c_void_p(res))   # the buffer keeps its own
    finally:
        for fd in fds:
            os.close(fd)
    return hooks.buffer_class()._wrap(h)


def reduce_buffer(buf):
    chunks = _vmm_chunks(buf)
    if chunks is not None:
        return _reduce_vmm(buf, chunks)
    d = descriptor_of(buf)
    if d[_KIND_AT] != _POOL_MEMORY:
        return buf.from_ipc_descriptor, (d,)
    mr = _exported.get(d[_ID_AT:_ID_AT + 8])
    if mr is None or mr.closed:     # a pool made outside Python: adopt its resource
        mr = buf.resource
        _exported[d[_ID_AT:_ID_AT + 8]] = mr
    return _rebuild_buffer, (mr, d)


def import_buffer(cls, mr, descriptor):
    out = C.c_void_p()
    d = bytes(descriptor)
    with holding(mr) as (h,):       # in use during the call
        st = _import(C.byref(out), C.c_void_p(h), d or None, C.c_size_t(len(d)))
    if st:
        raise_last(st, "cuabi_ipc_pool_buffer_import")
    return cls._wrap(out.value)


def _rebuild_buffer(mr, descriptor):
    # Buffer: cuabi._memory, the layer above (through cuabi._lib.hooks).
    return import_buffer(hooks.buffer_class(), mr, descriptor)
