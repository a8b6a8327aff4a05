"""The Python Communicator against the C tests' fake driver and fake NCCL
(run by test_nccl.py in a process of its own, with CUABI_DRIVER_PATH and
CUABI_NCCL_PATH set): every rank lives in this process (threads, or
init_all), "device" memory is host memory, so values are checked directly."""
import ctypes
import os
import pickle
import threading

import numpy as np
import pytest

import cuabi

FAKE = ctypes.CDLL(os.environ["CUABI_NCCL_PATH"])
FAKE.fake_nccl_fail.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]


def host(buf, dtype, n):
    """The buffer's memory as a NumPy array (the fake's device memory is host memory)."""
    return np.ctypeslib.as_array((ctypes.c_byte * (n * np.dtype(dtype).itemsize))
                                 .from_address(buf.ptr)).view(dtype)


def fill(buf, values):
    a = np.ascontiguousarray(values)
    ctypes.memmove(buf.ptr, a.ctypes.data, a.nbytes)


@pytest.fixture(autouse=True)
def nothing_left():
    FAKE.fake_nccl_set_async_error(0)
    yield
    import gc
    gc.collect()
    assert FAKE.fake_nccl_live_comms() == 0
    assert FAKE.fake_nccl_live_registrations() == 0


def ranks_in_threads(n, **kw):
    uid = cuabi.get_unique_id()
    out, errs = {}, []

    def run(r):
        try:
            out[r] = cuabi.Communicator(n, r, uid, device=r % 2, **kw)
        except Exception as e:        # noqa: BLE001
            errs.append(e)
    ts = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errs, errs
    return [out[r] for r in range(n)]


def test_version_and_ids():
    assert cuabi.nccl_version() == (2, 28, 9)
    a, b = cuabi.get_unique_id(), cuabi.get_unique_id()
    assert isinstance(a, bytes) and len(a) == 128 and a != b
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(ValueError, match="128 bytes"):
        cuabi.Communicator(1, 0, b"short")


def test_single_rank_buffer_view_and_array():
    c = cuabi.Communicator(1, 0, cuabi.get_unique_id(), device=0)
    assert (c.rank, c.nranks, c.size, c.device.ordinal) == (0, 1, 1, 0)
    assert c.get_async_error() == 0
    assert "rank 0 of 1" in repr(c)
    b = cuabi.Buffer(32)
    fill(b, np.arange(8, dtype=np.float32))
    # a Buffer needs its dtype
    with pytest.raises(TypeError, match="dtype="):
        c.all_reduce(b)
    c.all_reduce(b, dtype="float32")
    c.all_reduce(b, dtype=np.float32, count=4, op="max")
    # a View: type and count from it
    v = b.view("float32", (2, 4))
    c.all_reduce(v, op="sum")
    # any __cuda_array_interface__ object (here: the buffer's memory, typed)
    class CAI:
        __cuda_array_interface__ = {"shape": (8,), "typestr": "<f4", "data": (b.ptr, False),
                                    "version": 3, "strides": None}
    c.all_reduce(CAI())
    assert host(b, np.float32, 8).tolist() == list(range(8))
    with pytest.raises(cuabi.InvalidArgumentError, match="not contiguous"):
        c.all_reduce(v[:, ::2])
    with pytest.raises(ValueError, match="unknown reduction"):
        c.all_reduce(v, op="mean")
    with pytest.raises(TypeError, match="does not pickle"):
        pickle.dumps(c)
    c.synchronize()
    c.close()


def test_cuda_array_interface_v3_with_the_stream():
    """Buffers and Views export __cuda_array_interface__ version 3 with the
    stream their work is ordered on (mpi4py, Numba, nccl4py take them)."""
    s = cuabi.Stream(0)
    b = cuabi.Buffer(64, stream=s)
    cai = b.__cuda_array_interface__
    assert cai["version"] == 3 and cai["stream"] == s.raw and cai["shape"] == (64,)
    assert cuabi.Buffer(8).__cuda_array_interface__["stream"] == 1     # legacy default
    w = cuabi.Buffer.wrap(b.ptr, 8, device=0, owner=b)
    assert w.__cuda_array_interface__["stream"] is None                # none known
    v = cuabi.from_dlpack(b.view("float32", (4, 4)), stream=s)
    vc = v.__cuda_array_interface__
    assert vc["version"] == 3 and vc["typestr"] == "<f4" and vc["shape"] == (4, 4)


def test_two_ranks_in_threads_every_collective():
    c = ranks_in_threads(2, timeout=10)
    st = [cuabi.Stream(0), cuabi.Stream(1)]
    b = [cuabi.Buffer(8 * 8, cuabi.default_resource(r), stream=st[r]) for r in range(2)]
    for r in range(2):
        fill(b[r], np.arange(8, dtype=np.int64) * (r + 1))
    for r in range(2):   # posted in turn: the fake runs it when the last rank arrives
        c[r].all_reduce(b[r], dtype="int64", stream=st[r])
    for r in range(2):
        assert host(b[r], np.int64, 8).tolist() == [3 * i for i in range(8)]
    v = [b[r].view("int64", (8,)) for r in range(2)]
    half = [b[r].view("int64", (4,)) for r in range(2)]
    for r in range(2):
        c[r].broadcast(v[r], root=1, stream=st[r])
    for r in range(2):
        c[r].all_gather(half[r], v[r])
    for r in range(2):
        c[r].reduce_scatter(v[r], half[r], op="min")
    for r in range(2):
        c[r].reduce(v[r], v[r] if r == 0 else None, root=0)
    c[0].send(half[0], peer=1)
    c[1].recv(half[1], peer=0)
    assert host(b[1], np.int64, 4).tolist() == host(b[0], np.int64, 4).tolist()
    # torch/CuPy-style streams through __cuda_stream__
    class Foreign:
        def __init__(self, s):
            self.s = s

        def __cuda_stream__(self):
            return (0, self.s.raw)
    for r in range(2):
        c[r].all_reduce(v[r], stream=Foreign(st[r]))
    # split: ranks alone by color
    kids = [None, None]

    def split(r):
        kids[r] = c[r].split(color=r)
    ts = [threading.Thread(target=split, args=(r,)) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert [k.nranks for k in kids] == [1, 1]
    for k in kids:
        k.close()
    for r in range(2):
        c[r].finalize()
        c[r].close()


def test_init_all_and_group():
    c = cuabi.Communicator.init_all([0, 1])
    assert [x.rank for x in c] == [0, 1]
    b = [cuabi.Buffer(16, cuabi.default_resource(r), stream=cuabi.Stream(r)) for r in range(2)]
    for r in range(2):
        fill(b[r], np.full(4, r + 1, dtype=np.float32))
    with cuabi.nccl_group():
        for r in range(2):
            c[r].all_reduce(b[r].view("float32", (4,)), op="avg")
    for r in range(2):
        assert host(b[r], np.float32, 4).tolist() == [1.5] * 4
    reg = c[0].register(b[0])
    assert FAKE.fake_nccl_live_registrations() == 1
    reg.close()
    for x in c:
        x.close()


def test_rank_that_never_arrives_times_out():
    with pytest.raises(cuabi.TimeoutError, match="did not finish within 200 ms") as e:
        cuabi.Communicator(2, 0, cuabi.get_unique_id(), timeout=0.2)
    assert isinstance(e.value, TimeoutError)          # the builtin, too
    assert isinstance(e.value, cuabi.CuabiError)


def test_abort_and_async_error():
    c = cuabi.Communicator(1, 0, cuabi.get_unique_id())
    FAKE.fake_nccl_set_async_error(6)
    assert c.get_async_error() == 6
    with pytest.raises(cuabi.NCCLError, match="ncclRemoteError"):
        c.synchronize()
    FAKE.fake_nccl_set_async_error(0)
    c.abort()
    with pytest.raises(cuabi.NCCLError, match="aborted"):
        c.all_reduce(cuabi.Buffer(4), dtype="int32")
    c.close()
    d = cuabi.Communicator(1, 0, cuabi.get_unique_id())
    FAKE.fake_nccl_fail(b"ncclBroadcast", 5, 1)
    with pytest.raises(cuabi.NCCLError, match="ncclInvalidUsage"):
        d.broadcast(cuabi.Buffer(4), dtype="uint8")
    d.close()


def test_from_env_single_rank(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    c = cuabi.Communicator.from_env()
    assert (c.rank, c.nranks) == (0, 1)
    c.close()


def test_from_env_two_ranks_through_a_tcp_store(monkeypatch):
    """Two ranks of one process, as torchrun would describe two processes:
    rank 0 serves the store, rank 1 reads the id from it."""
    from cuabi import _nccl
    store0 = cuabi.TCPStore("127.0.0.1", 0, is_server=True, timeout=10)
    store1 = cuabi.TCPStore("127.0.0.1", store0.port, timeout=10)
    out, errs = {}, []

    def run(r, store):
        try:
            uid = _nccl.exchange_id(store, r)
            out[r] = cuabi.Communicator(2, r, uid, device=r, timeout=10)
        except Exception as e:        # noqa: BLE001
            errs.append(e)
    ts = [threading.Thread(target=run, args=(1, store1)),
          threading.Thread(target=run, args=(0, store0))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errs, errs
    assert out[0].nranks == 2 and out[1].rank == 1
    for x in out.values():
        x.close()
    store1.close()
    store0.close()
