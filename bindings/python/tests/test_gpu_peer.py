"""Peers from Python on a multi-GPU host (issue 15; skipped with fewer than
two GPUs): attributes, enable/disable, buffer and strided view copies
between GPUs, pool access from the other GPU."""
import pytest

import cuabi


@pytest.fixture(scope="module")
def two(gpu):
    if cuabi.device_count() < 2:
        pytest.skip("needs two GPUs")
    return cuabi.Device(0), cuabi.Device(1)


def test_attributes_and_access(two):
    d0, d1 = two
    ok = d1.peer_attribute(d0, "access_supported")
    assert ok == int(d1.can_access_peer(d0))
    assert isinstance(d1.peer_attribute(d0, "performance_rank"), int)
    with pytest.raises(cuabi.PeerAccessError):
        d0.enable_peer_access(d0)
    if ok:
        d1.enable_peer_access(d0)
        d1.enable_peer_access(d0)
        d1.disable_peer_access(d0)
        with pytest.raises(cuabi.PeerAccessError):
            d1.disable_peer_access(d0)


def test_copies_between_gpus(two):
    d0, d1 = two
    n = 1 << 20
    src = cuabi.Buffer.from_host(bytes(range(256)) * (n // 256),
                                 cuabi.MemoryResource.device_default(d0))
    dst = cuabi.Buffer(n, cuabi.MemoryResource.device_default(d1))
    dst.fill(0)
    dst.copy_peer(src, offset=16, size=n - 16)
    assert dst.to_bytes()[16:] == src.to_bytes()[:n - 16]
    s = d1.create_stream(non_blocking=False)
    dst.copy_peer(src, stream=s)
    s.synchronize()
    assert dst.to_bytes() == src.to_bytes()
    # A 2-D block of every other row of GPU 0's (256, 4096) bytes into a packed one.
    v = src.view("uint8", (128, 100), (8192, 1), offset=3)
    out = cuabi.Buffer(128 * 100, cuabi.MemoryResource.device_default(d1))
    cuabi.View.of_buffer(out, "uint8", (128, 100)).copy_peer(v)
    host, got = src.to_bytes(), out.to_bytes()
    for r in (0, 1, 77, 127):
        assert got[r * 100:(r + 1) * 100] == host[3 + r * 8192:3 + r * 8192 + 100]


def test_pool_access(two):
    d0, d1 = two
    pool = cuabi.MemoryResource.pool(d0)
    if not d1.peer_attribute(d0, "access_supported"):
        with pytest.raises(cuabi.PeerAccessError):
            pool.set_peer_access(d1, "rw")
        return
    pool.peer_accessible_by = [d1]
    assert pool.peer_accessible_by == (1,)
    assert pool.get_peer_access(d1) == "rw"
    pool.set_peer_access(d1, "none")
    assert pool.peer_accessible_by == ()
    with pytest.raises(NotImplementedError):
        cuabi.MemoryResource.pinned(d0).set_peer_access(d1, "r")
