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
exporting process (a unix socket in multiprocessing's private temporary
directory; both sides prove they hold the program's authkey, as with
multiprocessing's own resource sharer; every step is bounded by
FD_TIMEOUT). The receiving process checks the descriptor, maps each pool
once and keeps it in a registry keyed by the pool id; only the first
message that names a pool makes it ask the server for the fd (SCM_RIGHTS,
received by cuabi_ipc_fd_receive: exactly one fd, any other closed).
Whatever a pickle or a server hands over that is not what it should be
raises IPCError and leaves no fd behind (docs/RELIABILITY.md, "Threat
model: IPC descriptors and file descriptors"). multiprocessing's DupFd would send the fd
with every message and cost a connection each time (about 300 us, 10 us a
buffer in a message of 32) even where the pool is mapped already."""
from __future__ import annotations

import ctypes as C
import os
import re
import socket
import struct
import threading
import time
import weakref

from . import _capi
from ._handle import Handle
from ._lib import call, done, holding, hooks, new_struct, raise_last, raw, use
from .errors import ClosedHandleError, CuabiError, IPCError, bytes_arg, error_class, index_arg

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

# The per-buffer calls, unconverted (the benchmark's path): a message of 32
# buffers runs them 32 times, so each buffer's Python work is kept to these
# calls and the object (issue 24 item 4; docs/PERFORMANCE.md).
_export = raw("cuabi_ipc_buffer_export")
_export_n = raw("cuabi_ipc_buffers_export")
_import = raw("cuabi_ipc_pool_buffer_import")
_import_n = raw("cuabi_ipc_pool_buffers_import")
_vmm_info = raw("cuabi_vmm_buffer_info")
_SIZE = C.c_size_t(DESCRIPTOR_SIZE)
_ONE = C.c_size_t(1)
BATCH_MAX = 65536           # cuabi_ipc_buffers_export / _pool_buffers_import: count


def _use(obj, fn: str):
    """obj's handle, counted in use (done(obj) after the call), as `holding`
    does, without its object per call."""
    try:
        return use(obj)
    except ClosedHandleError:
        raise ClosedHandleError(f"{fn}: {type(obj).__name__} is closed") from None


class IPCAllocationHandle:
    """A pool's shareable handle: an owned file descriptor and the pool's
    descriptor (bytes). close() closes the fd; pickling sends a duplicate
    through multiprocessing (DupFd), so it works with multiprocessing's
    queues and pipes, not with plain pickle files."""

    __slots__ = ("_fd", "descriptor", "__weakref__")

    def __init__(self, fd: int, descriptor: bytes):
        self._fd = int(fd)
        self.descriptor = bytes_arg(descriptor, "IPCAllocationHandle: descriptor")

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

def create(cls, device, max_size, release_threshold, location_type=None, location_id=0):
    """An IPC pool of class `cls` on the device, or (location_type
    CUABI_LOCATION_HOST_NUMA) in host NUMA node location_id's memory."""
    from ._core import _as_device    # lazy: import time (cuabi.IPCAllocationHandle alone)
    opts = new_struct(_capi.cuabi_ipc_pool_options)
    if location_type is not None:
        opts.location_type = location_type
        opts.location_id = location_id
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


# Seconds each step of handing a pool's fd over may take (connecting,
# authenticating, asking, answering, receiving), on both sides: a stalled,
# gone or hostile peer gives IPCError (client) or a dropped connection
# (server), never a wait without end.
FD_TIMEOUT = 30.0

_REQUEST = b"cuabi-ipc-pool-fd/1:"     # + the pool's 8-byte key


def _bound(sock, seconds):
    """Bound every blocking read and write of `sock` (SO_RCVTIMEO /
    SO_SNDTIMEO: multiprocessing's Connection reads the raw fd, where a
    Python socket timeout does not apply)."""
    tv = struct.pack("ll", int(seconds), int(seconds % 1 * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


class _FdServer:
    """Hands this process's pool fds to processes that ask for them: a
    daemon thread accepting on a unix socket in multiprocessing's private
    temporary directory (mode 0700: this user only); each connection is
    answered on a thread of its own, with FD_TIMEOUT on every step, after
    both sides proved they hold the authkey multiprocessing gives every
    process of one program (its challenge: HMAC, both ways). A request is
    a fixed prefix and a pool key; the answer one byte, then the fd
    (cuabi_ipc_fd_send). Nothing is unpickled."""

    def __init__(self):
        # lazy: import time (multiprocessing, only once a pool is pickled)
        from multiprocessing import current_process, util
        self._fds: dict = {}            # pool key -> fd (the resource's, not a dup)
        self._lock = threading.Lock()
        self._authkey = bytes(current_process().authkey)
        self.address = os.path.join(util.get_temp_dir(),
                                    f"cuabi-pool-fds-{os.getpid()}-{os.urandom(6).hex()}")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self.address)
        self._sock.listen(64)
        # Set once _serve's start-up imports are done (they open files for a
        # moment: whoever counts this process's fds waits for it).
        self.warm = threading.Event()
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
        # What answering needs, imported here while the pickling thread goes
        # on: the first child's request would otherwise wait for it (hmac
        # loads OpenSSL: 5 to 25 ms on a loaded machine).
        try:
            import hmac  # noqa: F401 (lazy: import time)
            import multiprocessing.connection  # noqa: F401 (lazy: import time)
        except ImportError:
            pass
        self.warm.set()
        while True:
            try:
                s, _ = self._sock.accept()
            except OSError:                     # EMFILE, ECONNABORTED: keep serving
                time.sleep(0.01)
                continue
            threading.Thread(target=self._answer, args=(s,), name="cuabi-ipc-pool-fd",
                             daemon=True).start()

    def _answer(self, s):
        # lazy: import time (multiprocessing)
        from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
        try:
            _bound(s, FD_TIMEOUT)
            conn = Connection(s.detach())
        except OSError:
            s.close()
            return
        try:
            deliver_challenge(conn, self._authkey)
            answer_challenge(conn, self._authkey)
            req = conn.recv_bytes(len(_REQUEST) + 8)   # longer: OSError, nothing more read
            if len(req) != len(_REQUEST) + 8 or not req.startswith(_REQUEST):
                return
            key = req[len(_REQUEST):]
            with self._lock:                # sent under the lock: unshare() waits
                fd = self._fds.get(key)
                conn.send_bytes(b"\x01" if fd is not None else b"\x00")
                if fd is not None:
                    call("cuabi_ipc_fd_send", conn.fileno(), fd, b"\x01", 1)
        except Exception:                       # noqa: BLE001 (a bad client; keep serving)
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


def _ipc_error(message):
    return IPCError(message, status=_capi.CUABI_ERROR_IPC)


def _fetch_fd(address, key) -> int:
    """The fd of pool `key` from the fd server at `address` (a new fd, the
    caller's to close). IPCError for anything else: a server that is gone,
    another program's (the authentication fails), one that stalls past
    FD_TIMEOUT, says no, or sends something else than one byte and one fd
    (every fd that came is closed)."""
    # lazy: import time (multiprocessing, only once a pool is unpickled)
    from multiprocessing import AuthenticationError, current_process
    from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
    if not isinstance(address, str) or not address.strip("\0"):
        raise _ipc_error(f"unpickling an IPC pool: the fd server's address must be a unix "
                         f"socket path, not {type(address).__name__} {address!r:.80}")
    where = f"the fd server of pool {key.hex()} at {address!r:.200}"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn = None
    try:
        s.settimeout(FD_TIMEOUT)
        s.connect(address)
        s.settimeout(None)
        _bound(s, FD_TIMEOUT)
        conn = Connection(s.detach())
        authkey = bytes(current_process().authkey)
        answer_challenge(conn, authkey)
        deliver_challenge(conn, authkey)
        conn.send_bytes(_REQUEST + key)
        answer = conn.recv_bytes(1)
        if answer == b"\x00":
            raise _ipc_error(f"the exporting process no longer shares pool {key.hex()} "
                             "(its resource was closed)")
        if answer != b"\x01":
            raise _ipc_error(f"{where} answered {answer!r:.40}, not a pool's fd")
        data = (C.c_uint8 * 1)()
        return call("cuabi_ipc_fd_receive", data, 1, conn.fileno())
    except IPCError:
        raise
    except AuthenticationError as e:
        raise _ipc_error(f"{where} could not be authenticated ({e}): the pickle comes from "
                         "another program, whose processes hold another authkey") from e
    except (OSError, EOFError, ValueError) as e:     # cuabi's IOError is an OSError
        what = "did not answer in time" if isinstance(e, (TimeoutError, BlockingIOError)) \
            else "failed"
        raise _ipc_error(f"{where} {what}: {e}") from e
    finally:
        if conn is not None:
            conn.close()
        else:
            s.close()


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


def _pool_descriptor(descriptor, what) -> bytes:
    """A descriptor from a pickle, checked before it is trusted: bytes, its
    frame (cuabi_ipc_descriptor_kind), the kind CUABI_IPC_POOL."""
    try:
        d = bytes_arg(descriptor, f"{what}: the descriptor")
    except TypeError as e:
        raise _ipc_error(str(e)) from None
    kind = call("cuabi_ipc_descriptor_kind", d, len(d))
    if kind != _capi.CUABI_IPC_POOL:
        raise _ipc_error(f"{what}: the descriptor is of kind {kind}, not a pool's "
                         f"({_capi.CUABI_IPC_POOL})")
    return d


def _rebuild_resource(descriptor, address):
    d = _pool_descriptor(descriptor, "unpickling an IPC pool")
    key = d[_ID_AT:_ID_AT + 8]
    for registry in (_exported, _mapped):
        mr = registry.get(key)
        if mr is not None and not mr.closed:
            return mr                   # no fd needed: mapped (or exported) here already
    fd = _fetch_fd(address, key)
    try:
        return from_descriptor(fd, d)
    finally:
        os.close(fd)


def from_descriptor(fd, descriptor):
    """The resource of a pool for this process: the exporter itself here,
    a mapping made earlier, or a new mapping."""
    d = bytes_arg(descriptor, "from_allocation_handle: descriptor")
    key = d[_ID_AT:_ID_AT + 8]
    mr = _exported.get(key)
    if mr is not None and not mr.closed:
        return mr
    mr = _mapped.get(key)
    if mr is None or mr.closed:
        # MemoryResource: cuabi._memory, the layer above (through cuabi._lib.hooks);
        # a pool in host memory is its PinnedMemoryResource.
        mr = _mapped[key] = hooks.memory_resource_class()._of_mapped(
            call("cuabi_ipc_pool_import", int(fd), d or None, len(d)))
    return mr


# ----------------------------------------------------------------- buffers
#
# The per-buffer work of a pickled list (issue 24 item 4). Sending: a
# buffer's descriptor never changes while it lives, so its first pickle
# keeps the whole reduce value on the buffer (cuda.core keeps the
# descriptor too) and every later pickle returns it: no C call, no object.
# Receiving: one C call per buffer (cuabi_ipc_pool_buffers_import with a
# count of 1 gives the handle and its address together) and the Buffer
# object. Buffer.get_ipc_descriptors / from_ipc_descriptors do many buffers
# of a pool in one C call each.

def descriptor_of(buf) -> bytes:
    r = buf.__dict__.get("_ipc_reduce")         # kept by the first pickle
    if r is not None and buf._h is not None:
        return r[1][-1]
    out = C.create_string_buffer(DESCRIPTOR_SIZE)
    h = _use(buf, "cuabi_ipc_buffer_export")      # in use during the call
    try:
        st = _export(out, _SIZE, C.c_void_p(h))
    finally:
        done(buf)
    if st:
        raise_last(st, "cuabi_ipc_buffer_export")
    return out.raw


def _is_vmm(buf) -> bool:
    """Whether buf is a VMM buffer (issue 25), without an exception for the
    common answer (no)."""
    info = new_struct(_capi.cuabi_vmm_info)
    h = _use(buf, "cuabi_vmm_buffer_info")
    try:
        return _vmm_info(C.byref(info), C.c_void_p(h)) == 0
    finally:
        done(buf)


def _vmm_chunks(buf):
    """[(fd, descriptor)] of every chunk of a VMM buffer of this process (new
    fds), or None for a buffer that is not one (issue 25)."""
    if not _is_vmm(buf):
        return None
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
    # fabric chunks carry their handle in the descriptor: no fd, no key. A key
    # is 8 bytes like a pool's id (the fd server reads exactly that many);
    # random, so it names nothing another process could guess.
    keys = tuple(None if fd < 0 else os.urandom(8) for fd, _ in chunks)
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
    buf = hooks.buffer_class()._wrap(h)
    buf._mapped = True                           # Buffer.is_mapped
    return buf


def _reduce_of(buf, d):
    """The reduce value of a buffer whose descriptor is d (kept on the
    buffer by the callers: it is the same for every pickle)."""
    if d[_KIND_AT] != _POOL_MEMORY:
        return _rebuild_legacy, (d,)
    key = d[_ID_AT:_ID_AT + 8]
    mr = _exported.get(key)
    if mr is None or mr.closed:     # a pool made outside Python: adopt its resource
        mr = buf.resource
        _exported[key] = mr
    return _rebuild_buffer, (mr, d)


def reduce_buffer(buf):
    # Buffer.__reduce__ returns the kept value itself; here: the first pickle.
    # A pool buffer's export answers at once (no VMM buffer is one); a
    # legacy export, or a refused one, may be a VMM buffer's (issue 25).
    try:
        d = descriptor_of(buf)
    except CuabiError:
        if not _is_vmm(buf):
            raise
        d = None
    if d is None or (d[_KIND_AT] != _POOL_MEMORY and _is_vmm(buf)):
        chunks = _vmm_chunks(buf)
        if chunks is not None:
            return _reduce_vmm(buf, chunks)
        if d is None:
            d = descriptor_of(buf)      # no VMM buffer after all: the export's error
    r = buf._ipc_reduce = _reduce_of(buf, d)
    return r


def _renumber(e, array, at):
    """The error `e` of a batch that began at element `at` of the caller's
    list: its message names the caller's index."""
    if not at:
        return e
    msg = re.sub(rf"\b{array}\[(\d+)\]", lambda m: f"{array}[{int(m.group(1)) + at}]",
                 e.message, count=1)
    return type(e)(msg, status=e.status, log=e.log, cu_result=e.cu_result,
                   nvrtc_result=e.nvrtc_result, nvjitlink_result=e.nvjitlink_result,
                   nvml_result=e.nvml_result)


def descriptors_of(buffers) -> list:
    """The IPC descriptors of many buffers, in one cuabi_ipc_buffers_export
    call per BATCH_MAX (each kept on its buffer, as a pickle keeps it)."""
    bufs = list(buffers)
    cls = hooks.buffer_class()
    for i, b in enumerate(bufs):
        if not isinstance(b, cls):
            raise TypeError(f"get_ipc_descriptors: buffers[{i}] is a {type(b).__name__}, "
                            "not a Buffer")
    out = []
    for at in range(0, len(bufs), BATCH_MAX):
        part = bufs[at:at + BATCH_MAX]
        n = len(part)
        arr = (C.c_void_p * n)()
        blob = C.create_string_buffer(n * DESCRIPTOR_SIZE)
        held = []
        try:
            for k, b in enumerate(part):
                arr[k] = _use(b, f"get_ipc_descriptors: buffers[{at + k}]")
                held.append(b)
            st = _export_n(blob, C.c_size_t(n * DESCRIPTOR_SIZE), arr, C.c_size_t(n))
        finally:
            for b in held:
                done(b)
        if st:
            try:
                raise_last(st, "cuabi_ipc_buffers_export")
            except CuabiError as e:
                raise _renumber(e, "buffers", at) from None
        raw_blob = blob.raw
        for k, b in enumerate(part):
            d = raw_blob[k * DESCRIPTOR_SIZE:(k + 1) * DESCRIPTOR_SIZE]
            if d[_KIND_AT] == _POOL_MEMORY:     # what a pickle sends (a VMM buffer is none)
                b._ipc_reduce = _reduce_of(b, d)
            out.append(d)
    return out


def import_buffers(cls, mr, descriptors, what="Buffer.from_ipc_descriptors"):
    """Buffers of the mapped pool `mr` from descriptors (one bytes object of
    n descriptors end to end, or a sequence of descriptors): one
    cuabi_ipc_pool_buffers_import call per BATCH_MAX, all or nothing."""
    if isinstance(descriptors, (bytes, bytearray, memoryview)):
        blob = bytes(descriptors)
    else:
        try:
            blob = b"".join(bytes_arg(d, f"{what}: descriptors[{i}]")
                            for i, d in enumerate(descriptors))
        except TypeError as e:
            raise _ipc_error(str(e)) from None
    if not blob or len(blob) % DESCRIPTOR_SIZE:
        raise _ipc_error(f"{what}: {len(blob)} bytes of descriptors are not a whole number "
                         f"of {DESCRIPTOR_SIZE}-byte descriptors")
    count = len(blob) // DESCRIPTOR_SIZE
    bufs = []
    try:
        for at in range(0, count, BATCH_MAX):
            n = min(BATCH_MAX, count - at)
            part = blob[at * DESCRIPTOR_SIZE:(at + n) * DESCRIPTOR_SIZE]
            hs = (C.c_void_p * n)()
            addrs = (C.c_uint64 * n)()
            h = _use(mr, "cuabi_ipc_pool_buffers_import")
            try:
                st = _import_n(hs, addrs, C.c_void_p(h), part, C.c_size_t(len(part)),
                               C.c_size_t(n))
            finally:
                done(mr)
            if st:
                try:
                    raise_last(st, "cuabi_ipc_pool_buffers_import")
                except CuabiError as e:
                    raise _renumber(e, "descriptors", at) from None
            bufs.extend(_imported(cls, hs[k], addrs[k], mr) for k in range(n))
    except BaseException:
        for b in bufs:                  # all or nothing, across parts too
            b.close()
        raise
    return bufs


def import_buffer(cls, mr, descriptor):
    d = bytes_arg(descriptor, "Buffer.from_ipc_descriptor: descriptor")
    return _import_one(cls, mr, d)


def _imported(cls, h, address, mr):
    """The Buffer object of an imported handle: Buffer._wrap's fields, set
    directly (one object and its finalizer per buffer, nothing else)."""
    buf = cls.__new__(cls)
    Handle.__init__(buf, h)
    buf._ptr = address
    buf._stream = False         # no stream known (Buffer._wrap's)
    buf._mapped = True          # Buffer.is_mapped
    buf._mr = mr                # Buffer.memory_resource: the mapped pool's object, as cuda.core
    return buf


def _import_one(cls, mr, d):
    out = C.c_void_p()
    addr = C.c_uint64()
    h = _use(mr, "cuabi_ipc_pool_buffer_import")  # in use during the call
    try:
        if len(d) == DESCRIPTOR_SIZE:
            # The batch call with a count of 1: the handle and its address
            # in one call (Buffer.ptr would be a second).
            st = _import_n(C.byref(out), C.byref(addr), C.c_void_p(h), d, _SIZE, _ONE)
        else:                           # refused: the single import says why
            st = _import(C.byref(out), C.c_void_p(h), d or None, C.c_size_t(len(d)))
    finally:
        done(mr)
    if st:
        raise_last(st, "cuabi_ipc_pool_buffer_import")
    return _imported(cls, out.value, addr.value or None, mr)


_resource_class = _buffer_class = None


def _rebuild_buffer(mr, descriptor):
    # MemoryResource, Buffer: cuabi._memory, the layer above (through
    # cuabi._lib.hooks), looked up once.
    global _resource_class, _buffer_class
    if _buffer_class is None:
        _resource_class, _buffer_class = hooks.memory_resource_class(), hooks.buffer_class()
    if not isinstance(mr, _resource_class):
        raise _ipc_error(f"unpickling a pool buffer: its pool is a {type(mr).__name__}, "
                         "not a MemoryResource")
    if type(descriptor) is not bytes:
        try:
            descriptor = bytes_arg(descriptor, "unpickling a pool buffer: the descriptor")
        except TypeError as e:
            raise _ipc_error(str(e)) from None
    return _import_one(_buffer_class, mr, descriptor)


def _rebuild_legacy(descriptor):
    return hooks.buffer_class().from_ipc_descriptor(descriptor)
