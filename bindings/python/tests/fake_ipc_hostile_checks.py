"""Hostile pickles, fd servers and clients for pool IPC (issue 29), against
the C tests' fake driver: run by test_ipc_pool.py in a process whose
CUABI_DRIVER_PATH names tests/fixtures/.libs/fake_cuda_graph.so. Every
case must raise cuabi.IPCError (or TypeError for arguments of another type),
within FD_TIMEOUT where a peer stalls, and leave no fd open."""
import contextlib
import gc
import os
import pickle
import socket
import struct
import threading
import time

import pytest

import cuabi
from cuabi import _ipc_pool
from multiprocessing import current_process
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

D = cuabi._capi.CUABI_IPC_DESCRIPTOR_SIZE
PID_AT, ID_AT, KIND_AT, HOST_AT, SUM_AT = 16, 56, 10, 24, 128


@pytest.fixture(autouse=True)
def short_timeouts(monkeypatch):
    monkeypatch.setattr(_ipc_pool, "FD_TIMEOUT", 0.5, raising=False)


@pytest.fixture
def dev():
    assert cuabi.device_count() > 0, "the fake driver is not loaded"
    return cuabi.Device(0)


def open_fds():
    srv = _ipc_pool._server
    if srv is not None:     # its start-up imports open files for a moment
        assert srv.warm.wait(10), "the fd server's start-up imports never finished"
    gc.collect()            # pools of earlier tests close their fds when collected
    return len(os.listdir("/proc/self/fd"))


def settle(expected, seconds=3.0):
    """Open fds back at `expected` (server threads close theirs a little later)."""
    end = time.monotonic() + seconds
    while open_fds() != expected and time.monotonic() < end:
        time.sleep(0.01)
    assert open_fds() == expected, os.listdir("/proc/self/fd")


def reseal(d: bytearray) -> bytes:
    h = 0xcbf29ce484222325
    for b in d[:SUM_AT]:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    d[SUM_AT:SUM_AT + 8] = h.to_bytes(8, "little")
    return bytes(d)


def forge(d, **fields) -> bytes:
    """A copy of descriptor `d` with fields changed, checksum recomputed."""
    out = bytearray(d)
    at = {"pid": (PID_AT, 4), "pool_id": (ID_AT, 8), "kind": (KIND_AT, 2), "host": (HOST_AT, 8)}
    for name, value in fields.items():
        off, n = at[name]
        out[off:off + n] = value.to_bytes(n, "little")
    return reseal(out)


@pytest.fixture
def pool(dev):
    """An IPC pool of this process, its descriptor, and a descriptor of an
    unknown pool 'from another process' (our parent) that passes every
    check a descriptor alone allows."""
    mr = cuabi.MemoryResource.ipc_pool(dev)
    with mr.get_allocation_handle() as h:
        d = h.descriptor
    stranger = forge(d, pid=os.getppid(), pool_id=0x5EED5EED5EED5EED)
    yield mr, d, stranger
    mr.close()


@contextlib.contextmanager
def fake_server(behaviour, authkey=None):
    """A unix socket whose every connection `behaviour(conn)` answers on a
    thread (conn: a multiprocessing Connection, authenticated first unless
    authkey is False). Yields (address, connection count)."""
    path = os.path.join(_tmpdir(), f"hostile-{os.getpid()}-{os.urandom(4).hex()}")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    count = [0]
    stop = threading.Event()
    key = bytes(current_process().authkey) if authkey is None else authkey

    def one(s):
        conn = Connection(s.detach())
        try:
            if key is not False:
                deliver_challenge(conn, key)
                answer_challenge(conn, key)
            behaviour(conn)
        except Exception:       # noqa: BLE001 (the client gave up: fine)
            pass
        finally:
            conn.close()

    def serve():
        srv.settimeout(0.05)
        while not stop.is_set():
            try:
                s, _ = srv.accept()
            except OSError:
                continue
            s.settimeout(None)
            count[0] += 1
            threading.Thread(target=one, args=(s,), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield path, count
    finally:
        stop.set()
        t.join()
        srv.close()
        os.unlink(path)


def _tmpdir():
    from multiprocessing import util
    return util.get_temp_dir()


def send_fds(conn, data, fds):
    with socket.socket(fileno=os.dup(conn.fileno())) as s:
        s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
                  if fds else [])


def read_request(conn):
    return conn.recv_bytes(64)


# ----------------------------------------------------- forged descriptors

def test_forged_pool_descriptors_never_reach_a_server(pool):
    mr, d, stranger = pool
    before = open_fds()
    with fake_server(lambda c: None) as (address, count):
        bad = [b"", b"x" * D, d[:-1], d + b"\0", bytes([d[0] ^ 1]) + d[1:],
               d[:40] + bytes([d[40] ^ 1]) + d[41:],                 # corrupt
               forge(stranger, kind=4),                              # a buffer's kind
               forge(stranger, kind=9),
               forge(stranger, host=0x1234)]                         # another host
        for b in bad:
            with pytest.raises(cuabi.IPCError):
                _ipc_pool._rebuild_resource(b, address)
        for b in (5, 10**12, "a str", None, [1, 2]):
            with pytest.raises(cuabi.IPCError, match="must be bytes"):
                _ipc_pool._rebuild_resource(b, address)
        assert count[0] == 0
    settle(before)


class _Crafted:
    """Pickles as whatever (function, args) it is given: a hostile message."""

    def __init__(self, fn, *args):
        self.reduced = (fn, args)

    def __reduce__(self):
        return self.reduced


def test_hostile_pickles_raise_ipc_error(pool, dev):
    mr, d, stranger = pool
    b = cuabi.Buffer(256, mr)
    bd = b.get_ipc_descriptor()
    pickle.dumps(mr)        # the pool's fd and the fd server, open while the pool lives
    before = open_fds()
    messages = [
        (_Crafted(_ipc_pool._rebuild_resource, stranger, ("127.0.0.1", 9)), "unix socket path"),
        (_Crafted(_ipc_pool._rebuild_resource, stranger, "no/such/socket"), "failed"),
        (_Crafted(_ipc_pool._rebuild_resource, bd, "x"), "not a pool's"),
        (_Crafted(_ipc_pool._rebuild_buffer, "not a resource", bd), "not a MemoryResource"),
        (_Crafted(_ipc_pool._rebuild_buffer, mr, bd), "this process exported the pool"),
        (_Crafted(_ipc_pool._rebuild_buffer, mr, 10**12), "must be bytes"),
        (_Crafted(_ipc_pool._rebuild_legacy, b"junk"), "not a cuabi IPC descriptor"),
        (_Crafted(_ipc_pool._rebuild_legacy, bd), "cuabi_ipc_pool_buffer_import"),
    ]
    for crafted, needle in messages:
        with pytest.raises(cuabi.IPCError, match=needle):
            pickle.loads(pickle.dumps(crafted))
    # Legacy buffers and events pickle through their public constructors.
    with pytest.raises(cuabi.IPCError, match="cuabi_ipc_pool_buffer_import"):
        pickle.loads(pickle.dumps(_Crafted(cuabi.Buffer.from_ipc_descriptor, bd)))
    with pytest.raises(cuabi.IPCError, match="not a cuabi IPC descriptor"):
        pickle.loads(pickle.dumps(_Crafted(cuabi.Event.from_ipc_descriptor, b"junk")))
    with pytest.raises(TypeError, match="must be bytes"):
        cuabi.Buffer.from_ipc_descriptor(10**12)        # not a terabyte of zeros
    with pytest.raises(TypeError, match="must be bytes"):
        cuabi.Event.from_ipc_descriptor(136)
    b.close()
    settle(before)


# --------------------------------------------------------- fd server addresses

def test_server_addresses_are_checked(pool):
    mr, d, stranger = pool
    before = open_fds()
    for address in (("127.0.0.1", 9), 5, b"/tmp/x", "", "\0"):
        with pytest.raises(cuabi.IPCError, match="unix socket path"):
            _ipc_pool._rebuild_resource(stranger, address)
    with pytest.raises(cuabi.IPCError, match="failed"):
        _ipc_pool._rebuild_resource(stranger, os.path.join(_tmpdir(), "nobody-listens-here"))
    settle(before)


def test_a_server_of_another_program_is_refused(pool):
    mr, d, stranger = pool
    before = open_fds()
    with fake_server(lambda c: None, authkey=os.urandom(32)) as (address, count):
        with pytest.raises(cuabi.IPCError, match="could not be authenticated"):
            _ipc_pool._rebuild_resource(stranger, address)
        assert count[0] == 1
    settle(before)


def test_a_server_that_stalls_times_out(pool):
    mr, d, stranger = pool
    before = open_fds()
    stalls = [
        (lambda c: time.sleep(3), False),                  # no challenge at all
        (lambda c: time.sleep(3), None),                   # authenticated, no answer
        (lambda c: (read_request(c), c.send_bytes(b"\x01"), time.sleep(3)), None),  # no fd
    ]
    for behaviour, key in stalls:
        with fake_server(behaviour, authkey=key) as (address, _):
            t0 = time.monotonic()
            with pytest.raises(cuabi.IPCError):
                _ipc_pool._rebuild_resource(stranger, address)
            assert time.monotonic() - t0 < 2.5
    settle(before, seconds=6)


def test_a_server_that_sends_garbage(pool):
    mr, d, stranger = pool
    r, w = os.pipe()
    try:
        cases = {
            "another answer": lambda c: (read_request(c), c.send_bytes(b"\x07")),
            "a long answer": lambda c: (read_request(c), c.send_bytes(b"\x01\x01")),
            "a huge header": lambda c: (read_request(c),
                                        c._send(struct.pack("!i", 0x7FFFFFFF))),
            "no descriptor": lambda c: (read_request(c), c.send_bytes(b"\x01"),
                                        send_fds(c, b"\x01", [])),
            "three descriptors": lambda c: (read_request(c), c.send_bytes(b"\x01"),
                                            send_fds(c, b"\x01", [r, w, r])),
            "two bytes and a descriptor": lambda c: (read_request(c), c.send_bytes(b"\x01"),
                                                     send_fds(c, b"\x01\x01", [r])),
            "the answer, then the end": lambda c: (read_request(c), c.send_bytes(b"\x01")),
            "the end at once": lambda c: None,
            "a pipe for the pool": lambda c: (read_request(c), c.send_bytes(b"\x01"),
                                              send_fds(c, b"\x01", [r])),
            "no": lambda c: (read_request(c), c.send_bytes(b"\x00")),
        }
        before = open_fds()
        for what, behaviour in cases.items():
            with fake_server(behaviour) as (address, count):
                with pytest.raises(cuabi.IPCError) as e:
                    _ipc_pool._rebuild_resource(stranger, address)
                assert count[0] == 1, what
            settle(before)
            if what == "a pipe for the pool":       # received, then refused by the import
                assert "cuabi_ipc_pool_import" in str(e.value), e.value
            if what == "no":
                assert "no longer shares" in str(e.value)
    finally:
        os.close(r)
        os.close(w)


# ---------------------------------------------------- the real fd server

def test_the_fd_server_survives_hostile_clients(pool, monkeypatch):
    mr, d, stranger = pool
    key = d[ID_AT:ID_AT + 8]
    _fn, (desc, address) = mr.__reduce__()          # starts the server, shares the fd
    before = open_fds()

    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(address)
        return s

    stalled = [connect(), connect()]                # hold connections open, say nothing
    junk = connect()
    junk.sendall(b"\xff" * 64)                      # not a challenge answer
    huge = connect()
    huge.sendall(struct.pack("!i", 0x7FFFFFFF))
    connect().close()
    # A client of another program (another authkey).
    monkeypatch.setattr(current_process(), "authkey", os.urandom(32))
    with pytest.raises(cuabi.IPCError, match="could not be authenticated"):
        _ipc_pool._fetch_fd(address, key)
    monkeypatch.undo()
    monkeypatch.setattr(_ipc_pool, "FD_TIMEOUT", 0.5, raising=False)
    # An authenticated client with a bad request.
    s = connect()
    conn = Connection(s.detach())
    answer_challenge(conn, bytes(current_process().authkey))
    deliver_challenge(conn, bytes(current_process().authkey))
    conn.send_bytes(b"give me everything")
    with pytest.raises(EOFError):
        conn.recv_bytes(16)
    conn.close()
    # Meanwhile a genuine client is served at once.
    t0 = time.monotonic()
    fd = _ipc_pool._fetch_fd(address, key)
    assert time.monotonic() - t0 < 0.4
    assert os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:fake-pool")
    os.close(fd)
    with pytest.raises(cuabi.IPCError, match="no longer shares"):
        _ipc_pool._fetch_fd(address, b"\x01" * 8)
    for s in stalled + [junk, huge]:
        s.close()
    settle(before, seconds=6)                       # every server thread closed its side
