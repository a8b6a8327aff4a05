"""NCCL collectives (issue 23): unique ids, communicators, groups, and the
rendezvous that hands rank 0's id to the others (docs/distributed.md).

    uid = cuabi.get_unique_id()                 # 128 bytes, picklable
    comm = cuabi.Communicator(nranks, rank, uid, device=rank)
    comm.all_reduce(x, op="sum", stream=s)      # in place; x: Buffer, View,
                                                # torch/CuPy/any DLPack or CAI array
    comm = cuabi.Communicator.from_env()        # torchrun / mpirun / Slurm variables

Names follow NCCL and nccl4py where they exist (all_reduce with allreduce
as an alias, reduce_scatter, all_gather, send, recv, split, finalize,
abort); the timeout and from_env are cuabi's. Only the standard library is
used: the TCP store is a few dozen lines of socketserver, not a dependency.
"""
from __future__ import annotations

import ctypes as C
import importlib.util
import os
import socket
import socketserver
import struct
import threading
import time

from . import _capi
from ._core import Device, Stream, _as_device
from ._handle import Handle
from ._lib import call, lib, new_struct
from ._memory import Buffer
from ._view import View, from_dlpack
from .errors import INT_MAX, INT_MIN, index_arg

__all__ = ["Communicator", "get_unique_id", "nccl_version", "nccl_group", "TCPStore",
           "FileStore", "UNIQUE_ID_BYTES"]

UNIQUE_ID_BYTES = _capi.CUABI_NCCL_UNIQUE_ID_BYTES


def _wheel_dir():
    """The nvidia-nccl-cu13 (or -cu12) wheel's library folder of this
    interpreter, found without importing it."""
    try:
        spec = importlib.util.find_spec("nvidia.nccl")
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        d = os.path.join(base, "lib")
        if os.path.isfile(os.path.join(d, "libnccl.so.2")):
            return d
    return None


# The C loader reads CUABI_NCCL_WHEEL_DIR when it first loads NCCL (after
# CUABI_NCCL_PATH, before the system's libnccl.so.2): tell it where this
# Python's wheel is, once, before any collective.
if not os.environ.get("CUABI_NCCL_WHEEL_DIR"):
    _d = _wheel_dir()
    if _d:
        os.environ["CUABI_NCCL_WHEEL_DIR"] = _d
    del _d


def nccl_version() -> tuple:
    """(major, minor, patch) of the NCCL cuabi loads (loading it now)."""
    v = call("cuabi_nccl_version")
    return (v // 10000, v // 100 % 100, v % 100)


def get_unique_id() -> bytes:
    """A new NCCL unique id: 128 bytes to send to every rank (pickle, a
    file, a socket, MPI, a TCPStore...)."""
    uid = call("cuabi_nccl_get_unique_id")
    return bytes(bytearray(uid.internal))


def _id_struct(uid):
    b = bytes(uid)
    if len(b) != UNIQUE_ID_BYTES:
        raise ValueError(f"an NCCL unique id is {UNIQUE_ID_BYTES} bytes, not {len(b)}")
    s = _capi.cuabi_nccl_unique_id()
    C.memmove(s.internal, b, UNIQUE_ID_BYTES)
    return s


_OPS = {"sum": _capi.CUABI_NCCL_SUM, "prod": _capi.CUABI_NCCL_PROD,
        "max": _capi.CUABI_NCCL_MAX, "min": _capi.CUABI_NCCL_MIN, "avg": _capi.CUABI_NCCL_AVG}
_DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
           "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9, "float8_e4m3fn": 10,
           "float8_e5m2": 11, "half": 6, "float": 7, "double": 8}
_SIZES = (1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1)


def _op(op) -> int:
    if isinstance(op, str):
        try:
            return _OPS[op.lower()]
        except KeyError:
            raise ValueError(f"unknown reduction {op!r}; one of {sorted(_OPS)}") from None
    return index_arg(op, "op", 0, 4)


def _dtype(dtype) -> int:
    if isinstance(dtype, int):
        return index_arg(dtype, "dtype", 0, 11)
    if isinstance(dtype, type):          # numpy.float32 and the like
        name = dtype.__name__
    else:                                 # numpy.dtype, torch.float32, "float32"
        name = getattr(dtype, "name", None) or str(dtype)
    name = str(name).removeprefix("torch.")
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"NCCL has no element type {dtype!r}; one of {sorted(_DTYPES)}") \
            from None


def _options(timeout, nonblocking, **config):
    o = new_struct(_capi.cuabi_nccl_comm_options)
    if timeout is not None:
        # seconds; None: the default (10 minutes or CUABI_NCCL_TIMEOUT_MS); < 0: none
        o.timeout_ms = -1 if timeout < 0 else max(1, int(timeout * 1000))
    o.nonblocking = 1 if nonblocking else 0
    keep = []
    for key, value in config.items():
        if value is None:
            continue
        if key in ("net_name", "comm_name"):
            b = C.c_char_p(str(value).encode())
            keep.append(b)
            setattr(o, key, b)
        else:
            setattr(o, key, index_arg(value, key, -1, INT_MAX))
    return o, keep


class nccl_group:
    """`with cuabi.nccl_group():` -- NCCL's ncclGroupStart / ncclGroupEnd: the
    collectives inside run together (several devices of one process, or
    sends and receives that must pair up)."""

    def __enter__(self):
        lib.cuabi_nccl_group_start()
        return self

    def __exit__(self, *exc):
        lib.cuabi_nccl_group_end()
        return False


class Communicator(Handle):
    """One rank of an NCCL communicator.

    Communicator(nranks, rank, unique_id, device=None, timeout=None, ...):
    this process's rank of `nranks`, on `device` (a Device or ordinal;
    default: the rank modulo the number of devices). Waits until every rank
    has joined; `timeout` seconds (default 600, or CUABI_NCCL_TIMEOUT_MS; a
    negative one waits for ever) turns a rank that never arrives into
    cuabi.TimeoutError. Collectives take cuabi Buffers (with dtype=),
    Views, and any DLPack or __cuda_array_interface__ array (torch, CuPy,
    Numba), on cuabi streams or any __cuda_stream__ stream."""

    _ctype = "cuabi_nccl_comm"

    def __init__(self, nranks: int, rank: int, unique_id, device=None, timeout=None,
                 nonblocking: bool = False, **config):
        nranks = index_arg(nranks, "nranks", 1, INT_MAX)
        rank = index_arg(rank, "rank", 0, nranks - 1)
        if device is None:
            from ._core import device_count          # lazy: import time
            device = rank % max(device_count(), 1)
        o, keep = _options(timeout, nonblocking, **config)
        Handle.__init__(self, call("cuabi_nccl_comm_init_rank", _as_device(device), nranks,
                                   C.byref(_id_struct(unique_id)), rank, C.byref(o)))
        del keep

    @classmethod
    def init_all(cls, devices=None, timeout=None, **config) -> list:
        """One communicator per device of this process (rank i on devices[i];
        default: every device)."""
        if devices is None:
            from ._core import device_count          # lazy: import time
            devices = range(device_count())
        devs = [_as_device(d) for d in devices]
        n = len(devs)
        if n < 1:
            raise ValueError("init_all: no devices")
        arr = (C.c_void_p * n)(*[d.cuabi_handle for d in devs])
        out = (C.c_void_p * n)()
        o, keep = _options(timeout, False, **config)
        lib.cuabi_nccl_comm_init_all(out, arr, n, C.byref(o))
        del keep
        return [cls._wrap(v) for v in out]

    @classmethod
    def from_env(cls, device=None, store=None, timeout=None, **config) -> "Communicator":
        """The rank torchrun, mpirun (Open MPI, MPICH/PMI), Slurm or
        `cuabi.Communicator`'s own launchers describe in the environment:
        RANK / WORLD_SIZE / LOCAL_RANK (or OMPI_COMM_WORLD_*, PMI_*,
        SLURM_*). Rank 0's unique id reaches the others through `store`
        (default: a TCPStore at MASTER_ADDR:MASTER_PORT as torchrun sets
        them, else a FileStore at CUABI_NCCL_ID_FILE); the device is
        LOCAL_RANK's."""
        rank, world, local = env_ranks()
        if device is None:
            from ._core import device_count          # lazy: import time
            device = local % max(device_count(), 1)
        if world == 1:
            uid = get_unique_id()
        else:
            store = store if store is not None else store_from_env(rank, world, timeout)
            uid = exchange_id(store, rank, timeout)
        return cls(world, rank, uid, device=device, timeout=timeout, **config)

    @classmethod
    def from_mpi(cls, mpi_comm=None, device=None, timeout=None, **config) -> "Communicator":
        """Rank and size from an mpi4py communicator (default COMM_WORLD);
        rank 0's id is broadcast through it."""
        if mpi_comm is None:
            from mpi4py import MPI                    # lazy: import time (optional, only when asked)
            mpi_comm = MPI.COMM_WORLD
        rank, world = mpi_comm.Get_rank(), mpi_comm.Get_size()
        uid = mpi_comm.bcast(get_unique_id() if rank == 0 else None, root=0)
        if device is None:
            from ._core import device_count          # lazy: import time
            device = rank % max(device_count(), 1)
        return cls(world, rank, uid, device=device, timeout=timeout, **config)

    def __reduce__(self):
        raise TypeError("a Communicator does not pickle: send the unique id (bytes) and make "
                        "one Communicator per rank in its own process")

    # ---- queries
    @property
    def rank(self) -> int:
        return call("cuabi_nccl_comm_rank", self)

    @property
    def nranks(self) -> int:
        return call("cuabi_nccl_comm_size", self)

    size = nranks

    @property
    def device(self) -> Device:
        return Device._borrowed_of("cuabi_nccl_comm_device", self)

    def get_async_error(self) -> int:
        """NCCL's ncclResult_t of asynchronous errors: 0 none, 7 in progress."""
        return call("cuabi_nccl_comm_get_async_error", self)

    def synchronize(self, stream=None, timeout=None) -> None:
        """Wait for `stream`'s work, watching the communicator: an NCCL error
        or `timeout` seconds (default: the communicator's) abort it and raise."""
        ms = 0 if timeout is None else (-1 if timeout < 0 else max(1, int(timeout * 1000)))
        lib.cuabi_nccl_comm_synchronize(self, self._stream(stream), ms)

    # ---- life
    def split(self, color: int, key: int | None = None, timeout=None, **config):
        """ncclCommSplit: ranks of the same color form a new communicator,
        ordered by key (default: this rank); color None (or -1) takes no
        part and gets None."""
        color = _capi.CUABI_NCCL_SPLIT_NOCOLOR if color is None else \
            index_arg(color, "color", -1, INT_MAX)
        key = self.rank if key is None else index_arg(key, "key", INT_MIN, INT_MAX)
        if timeout is None and not config:
            v = call("cuabi_nccl_comm_split", self, color, key, None)
        else:
            o, keep = _options(timeout, False, **config)
            v = call("cuabi_nccl_comm_split", self, color, key, C.byref(o))
            del keep
        return type(self)._wrap(v) if v else None

    def finalize(self) -> None:
        lib.cuabi_nccl_comm_finalize(self)

    def abort(self) -> None:
        """Stop the communicator now (any thread may call it)."""
        lib.cuabi_nccl_comm_abort(self)

    def destroy(self) -> None:
        self.close()

    def register(self, buffer: Buffer):
        """ncclCommRegister: a registration that deregisters when closed."""
        return _Registration(call("cuabi_nccl_register", self, buffer))

    # ---- operands
    def _stream(self, stream):
        if stream is None or isinstance(stream, Stream):
            return stream
        return Stream.wrap(stream, device=self.device)

    def _view(self, x, stream):
        if x is None or isinstance(x, View):
            return x
        return from_dlpack(x, stream=stream)

    @staticmethod
    def _buf_args(x, offset, count, dtype, what):
        """(buffer, byte offset, count, datatype) of a Buffer operand."""
        if dtype is None:
            raise TypeError(f"a Buffer {what} needs dtype= (a Buffer has no element type; "
                            "a View or an array does)")
        t = _dtype(dtype)
        offset = index_arg(offset, "offset")
        if count is None:
            count = max(x.size - offset, 0) // _SIZES[t]
        return x, offset, index_arg(count, "count"), t

    def _pair(self, send, recv, stream):
        """Both operands as views, or None when they are Buffers."""
        if isinstance(recv, Buffer) or isinstance(send, Buffer):
            return None
        return self._view(send, stream), self._view(recv, stream)

    # ---- collectives
    def all_reduce(self, send, recv=None, op="sum", stream=None, *, dtype=None, count=None,
                   offset: int = 0):
        """recv = op over every rank's send (in place when recv is None)."""
        s = self._stream(stream)
        if recv is None:
            send, recv = None, send
        v = self._pair(send, recv, s)
        if v is not None:
            lib.cuabi_nccl_all_reduce_view(self, v[0], v[1], _op(op), s)
            return recv
        b, o, n, t = self._buf_args(recv, offset, count, dtype, "operand")
        lib.cuabi_nccl_all_reduce(self, send, o if send is not None else 0, b, o, n, t, _op(op), s)
        return recv

    allreduce = all_reduce

    def broadcast(self, send, recv=None, root: int = 0, stream=None, *, dtype=None, count=None,
                  offset: int = 0):
        """recv of every rank = send of `root` (in place when recv is None)."""
        s = self._stream(stream)
        if recv is None:
            send, recv = None, send
        root = index_arg(root, "root", 0, INT_MAX)
        v = self._pair(send, recv, s)
        if v is not None:
            lib.cuabi_nccl_broadcast_view(self, v[0], v[1], root, s)
            return recv
        b, o, n, t = self._buf_args(recv, offset, count, dtype, "operand")
        lib.cuabi_nccl_broadcast(self, send, o if send is not None else 0, b, o, n, t, root, s)
        return recv

    def reduce(self, send, recv=None, op="sum", root: int = 0, stream=None, *, dtype=None,
               count=None, offset: int = 0):
        """recv of `root` = op over every rank's send (recv needed on the root only)."""
        s = self._stream(stream)
        root = index_arg(root, "root", 0, INT_MAX)
        v = self._pair(send, recv, s)
        if v is not None:
            lib.cuabi_nccl_reduce_view(self, v[0], v[1], _op(op), root, s)
            return recv
        b, o, n, t = self._buf_args(send, offset, count, dtype, "operand")
        lib.cuabi_nccl_reduce(self, b, o, recv, o if recv is not None else 0, n, t, _op(op),
                              root, s)
        return recv

    def all_gather(self, send, recv, stream=None, *, dtype=None, count=None):
        """recv (nranks times send's size) = every rank's send, in rank order."""
        s = self._stream(stream)
        v = self._pair(send, recv, s)
        if v is not None:
            lib.cuabi_nccl_all_gather_view(self, v[0], v[1], s)
            return recv
        b, o, n, t = self._buf_args(send, 0, count, dtype, "send buffer")
        lib.cuabi_nccl_all_gather(self, b, 0, recv, 0, n, t, s)
        return recv

    allgather = all_gather

    def reduce_scatter(self, send, recv, op="sum", stream=None, *, dtype=None, count=None):
        """recv = block `rank` of op over every rank's send (nranks blocks)."""
        s = self._stream(stream)
        v = self._pair(send, recv, s)
        if v is not None:
            lib.cuabi_nccl_reduce_scatter_view(self, v[0], v[1], _op(op), s)
            return recv
        b, o, n, t = self._buf_args(recv, 0, count, dtype, "receive buffer")
        lib.cuabi_nccl_reduce_scatter(self, send, 0, b, 0, n, t, _op(op), s)
        return recv

    reducescatter = reduce_scatter

    def send(self, x, peer: int, stream=None, *, dtype=None, count=None, offset: int = 0):
        s = self._stream(stream)
        peer = index_arg(peer, "peer", 0, INT_MAX)
        if not isinstance(x, Buffer):
            lib.cuabi_nccl_send_view(self, self._view(x, s), peer, s)
            return
        b, o, n, t = self._buf_args(x, offset, count, dtype, "send buffer")
        lib.cuabi_nccl_send(self, b, o, n, t, peer, s)

    def recv(self, x, peer: int, stream=None, *, dtype=None, count=None, offset: int = 0):
        s = self._stream(stream)
        peer = index_arg(peer, "peer", 0, INT_MAX)
        if not isinstance(x, Buffer):
            lib.cuabi_nccl_recv_view(self, self._view(x, s), peer, s)
            return x
        b, o, n, t = self._buf_args(x, offset, count, dtype, "receive buffer")
        lib.cuabi_nccl_recv(self, b, o, n, t, peer, s)
        return x

    def __repr__(self):
        try:
            return f"<cuabi.Communicator rank {self.rank} of {self.nranks}>"
        except Exception:
            return "<cuabi.Communicator (closed)>"


class _Registration(Handle):
    """A buffer registered with a communicator; close() deregisters."""
    _ctype = "cuabi_nccl_registration"


# ---------------------------------------------------------------- rendezvous

def env_ranks() -> tuple:
    """(rank, world size, local rank) from the launcher's variables."""
    env = os.environ
    for r, w, lr in (("RANK", "WORLD_SIZE", "LOCAL_RANK"),
                     ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                      "OMPI_COMM_WORLD_LOCAL_RANK"),
                     ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
                     ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")):
        if r in env and w in env:
            rank, world = int(env[r]), int(env[w])
            local = int(env.get(lr, env.get("LOCAL_RANK", rank)))
            if not 0 <= rank < world:
                raise ValueError(f"{r}={rank} is not a rank of {w}={world}")
            return rank, world, local
    raise RuntimeError("no rank in the environment: set RANK and WORLD_SIZE (torchrun does), "
                       "or run under mpirun or srun")


def store_from_env(rank, world, timeout=None):
    env = os.environ
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        # torchrun's own store may listen on MASTER_PORT: cuabi's takes the next.
        port = int(env.get("CUABI_NCCL_STORE_PORT", int(env["MASTER_PORT"]) + 1))
        return TCPStore(env["MASTER_ADDR"], port, is_server=rank == 0,
                        timeout=600 if timeout is None else timeout)
    path = env.get("CUABI_NCCL_ID_FILE")
    if path:
        return FileStore(path, timeout=600 if timeout is None else timeout)
    raise RuntimeError("no rendezvous for the unique id: set MASTER_ADDR and MASTER_PORT "
                       "(torchrun does), CUABI_NCCL_ID_FILE (a path every rank sees), or "
                       "pass store=")


def exchange_id(store, rank, timeout=None) -> bytes:
    """Rank 0 makes the id and sets it; the others wait for it."""
    if rank == 0:
        uid = get_unique_id()
        store.set("cuabi/nccl/unique_id", uid)
        return uid
    uid = store.get("cuabi/nccl/unique_id")
    if len(uid) != UNIQUE_ID_BYTES:
        raise ValueError(f"the store's unique id has {len(uid)} bytes, not {UNIQUE_ID_BYTES}")
    return uid


class FileStore:
    """Keys as files in a directory every rank sees (a shared file system
    across machines). set() writes atomically; get() waits for the file."""

    def __init__(self, path, timeout: float = 600):
        self.path = os.fspath(path)
        self.timeout = timeout
        os.makedirs(self.path, exist_ok=True)

    def _file(self, key):
        return os.path.join(self.path, key.replace("/", "_"))

    def set(self, key: str, value: bytes) -> None:
        f = self._file(key)
        tmp = f"{f}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(bytes(value))
        os.replace(tmp, f)

    def get(self, key: str, timeout: float | None = None) -> bytes:
        f = self._file(key)
        end = time.monotonic() + (self.timeout if timeout is None else timeout)
        delay = 0.001
        while True:
            try:
                with open(f, "rb") as fh:
                    return fh.read(1 << 16)
            except FileNotFoundError:
                if time.monotonic() > end:
                    raise TimeoutError(f"FileStore: {f} did not appear in time") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)


# TCP store protocol: a request is b"S" or b"G", a 2-byte key length, the
# key, and for S a 4-byte value length and the value; a reply to G is a
# 4-byte length and the value (the server waits until the key is set).
_MAX_KEY, _MAX_VALUE = 1024, 1 << 16


def _recv_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("TCPStore: connection closed mid-message")
        data += chunk
    return bytes(data)


class _StoreHandler(socketserver.BaseRequestHandler):
    def handle(self):
        srv = self.server
        sock = self.request
        sock.settimeout(srv.store_timeout)
        try:
            while True:
                try:
                    head = sock.recv(1)
                except (socket.timeout, OSError):
                    return
                if not head:
                    return
                (klen,) = struct.unpack("!H", _recv_exact(sock, 2))
                if head not in (b"S", b"G") or klen > _MAX_KEY:
                    return          # hostile or confused: drop the connection
                key = _recv_exact(sock, klen)
                if head == b"S":
                    (vlen,) = struct.unpack("!I", _recv_exact(sock, 4))
                    if vlen > _MAX_VALUE:
                        return
                    value = _recv_exact(sock, vlen)
                    with srv.cond:
                        srv.data[key] = value
                        srv.cond.notify_all()
                    sock.sendall(b"K")
                else:
                    with srv.cond:
                        if not srv.cond.wait_for(lambda: key in srv.data, srv.store_timeout):
                            return
                        value = srv.data[key]
                    sock.sendall(struct.pack("!I", len(value)) + value)
        except (ConnectionError, socket.timeout, OSError):
            return


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class TCPStore:
    """A key-value store over TCP, as torch.distributed's: rank 0 serves
    (is_server=True, in a daemon thread of its process), every rank is a
    client. Standard library only; values up to 64 KiB."""

    def __init__(self, host: str, port: int, is_server: bool = False, timeout: float = 600):
        self.host, self.port, self.timeout = host, int(port), timeout
        self._server = None
        if is_server:
            srv = _Server(("" if host not in ("127.0.0.1", "localhost") else host, self.port),
                          _StoreHandler)
            srv.data, srv.cond, srv.store_timeout = {}, threading.Condition(), timeout
            self.port = srv.server_address[1]
            threading.Thread(target=srv.serve_forever, daemon=True,
                             name="cuabi-TCPStore").start()
            self._server = srv
        self._sock = None
        self._lock = threading.Lock()

    def _connect(self):
        if self._sock is not None:
            return self._sock
        end = time.monotonic() + self.timeout
        delay = 0.01
        while True:
            try:
                s = socket.create_connection((self.host, self.port), timeout=self.timeout)
                self._sock = s
                return s
            except OSError:
                if time.monotonic() > end:
                    raise TimeoutError(f"TCPStore: nothing answers at {self.host}:{self.port}")
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def set(self, key: str, value: bytes) -> None:
        k, v = key.encode(), bytes(value)
        if len(k) > _MAX_KEY or len(v) > _MAX_VALUE:
            raise ValueError("TCPStore: key or value too long")
        with self._lock:
            s = self._connect()
            s.sendall(b"S" + struct.pack("!H", len(k)) + k + struct.pack("!I", len(v)) + v)
            if _recv_exact(s, 1) != b"K":
                raise ConnectionError("TCPStore: the server did not acknowledge")

    def get(self, key: str) -> bytes:
        k = key.encode()
        with self._lock:
            s = self._connect()
            s.sendall(b"G" + struct.pack("!H", len(k)) + k)
            try:
                (n,) = struct.unpack("!I", _recv_exact(s, 4))
            except (socket.timeout, ConnectionError):
                raise TimeoutError(f"TCPStore: {key!r} was not set within {self.timeout} s") \
                    from None
            if n > _MAX_VALUE:
                raise ConnectionError("TCPStore: the server sent too much")
            return _recv_exact(s, n)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
