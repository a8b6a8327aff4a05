"""from_dlpack's fast paths against the real torch and CuPy on a GPU: the
same view their DLPack export / CUDA array interface gives (skipped without
a GPU; each needs its library)."""
import numpy as np
import pytest

import cuabi
from cuabi import _view as V


def facts(v):
    return (v.ptr, v.shape, v.strides, v.__dlpack_device__(), v.dtype, v.readonly,
            v.itemsize, v.size, v.is_c_contiguous, v.is_f_contiguous)


def torch_tensors(torch):
    base = torch.arange(2 * 3 * 4, device="cuda", dtype=torch.float32).reshape(2, 3, 4)
    yield base
    yield base[:, 1:, ::2]
    yield base.transpose(0, 2)
    yield base[1]
    yield base[0, 0, 0]                               # 0-d
    yield base[:, :0]                                 # empty
    yield base.expand(5, 2, 3, 4)                     # zero strides
    for dt in (torch.int8, torch.int64, torch.bool, torch.float16, torch.bfloat16,
               torch.complex64, torch.uint8):
        yield base.to(dt)
    yield torch.arange(6, dtype=torch.float64).reshape(2, 3)             # host
    yield torch.arange(6, dtype=torch.int32).pin_memory()[1:]           # pinned host


def test_torch_attribute_path_equals_its_dlpack(gpu):
    torch = pytest.importorskip("torch")
    n = 0
    for t in torch_tensors(torch):
        v = cuabi.from_dlpack(t)
        assert V._HANDLERS[type(t)].__qualname__ == "_torch_handler_for.<locals>.torch_handler"
        assert v.lazy and v._owner is t
        assert facts(v) == facts(V._dlpack_handler(t)), t
        assert facts(cuabi.View._borrowed(v.handle)) == facts(v)
        n += 1
    assert n == 16


def test_torch_shares_memory_and_refuses_like_torch(gpu):
    torch = pytest.importorskip("torch")
    x = torch.zeros(8, device="cuda")
    back = torch.from_dlpack(cuabi.from_dlpack(x))
    back[3] = 5
    assert x[3].item() == 5
    g = torch.ones(4, device="cuda", requires_grad=True)
    assert cuabi.from_dlpack(g).ptr == g.data_ptr()     # its data, as g.detach()
    assert facts(cuabi.from_dlpack(g)) == facts(V._dlpack_handler(g.detach()))
    c = torch.tensor([1 + 2j, 3 - 4j], device="cuda")
    with pytest.raises(Exception) as fast:
        cuabi.from_dlpack(c.conj())
    with pytest.raises(Exception) as dl:
        V._dlpack_handler(c.conj())
    assert type(fast.value) is type(dl.value)
    neg = c.conj().imag                                  # the negative bit
    if neg.is_neg():
        try:
            want = facts(V._dlpack_handler(neg))
        except Exception as e:
            with pytest.raises(type(e)):
                cuabi.from_dlpack(neg)
        else:
            assert facts(cuabi.from_dlpack(neg)) == want
    sparse = torch.eye(3, device="cuda").to_sparse()
    with pytest.raises(Exception) as e:
        cuabi.from_dlpack(sparse)
    assert "layout" in str(e.value) or "sparse" in str(e.value).lower()


def test_cupy_handler_equals_its_interface(gpu):
    cp = pytest.importorskip("cupy")
    base = cp.arange(2 * 3 * 4, dtype=cp.float32).reshape(2, 3, 4)
    with cp.cuda.Stream(non_blocking=True) as s:
        arrays = [base, base[:, 1:, ::2], base.transpose(2, 1, 0), base[:, :0], base[1, 1, 1],
                  base.astype(cp.int16), base.astype(cp.complex128)]
        for x in arrays:
            fast = cuabi.from_dlpack(x)
            cai = V._cai_or_dlpack_handler(x)
            assert fast.lazy and fast._d == cai._d and facts(fast) == facts(cai)
            assert fast._stream == cai._stream == s.ptr      # the current stream
    fast = cuabi.from_dlpack(base)
    assert fast._stream == V._cai_or_dlpack_handler(base)._stream
    assert np.array_equal(cp.asnumpy(cp.from_dlpack(fast)), cp.asnumpy(base))


def test_torch_with_a_stream_goes_through_the_exchange_table_and_orders(gpu, monkeypatch):
    """from_dlpack(t, stream=s) for a torch tensor: the exchange table's export
    (the compiled backend: its borrowed DLTensor) and current_work_stream
    (cuabi_view_from_exchange_on; compiled: cuabi_stream_wait_raw), not torch's
    __dlpack__(stream=); torch's pending work on its current stream comes
    before what `s` does with the view (a copy queued on `s` behind a GPU
    sleep on torch's stream would read the old zeros otherwise)."""
    torch = pytest.importorskip("torch")
    if not V._exchange_on_table(torch.Tensor):
        pytest.skip("this torch's exchange table has no current_work_stream")
    dev = cuabi.Device(0)
    s = dev.create_stream()
    n = 1 << 20
    t = torch.zeros(n, device="cuda:0", dtype=torch.float32)
    torch.cuda.synchronize()
    dst = cuabi.Buffer(4 * n, cuabi.MemoryResource.device_default(dev), stream=s)
    s.sync()
    ts = torch.cuda.Stream(device=0)
    if cuabi.backend == "compiled":                    # its own C route, not Python's
        def python_route(*a):
            raise AssertionError("the compiled from_dlpack took the Python route")
        monkeypatch.setattr(V, "_from_exchange_on", python_route)
    dlpack = type(t).__dlpack__
    try:
        type(t).__dlpack__ = None                      # not to be called
        with torch.cuda.stream(ts):
            torch.cuda._sleep(100_000_000)             # tens of ms on torch's stream
            t.fill_(7.0)
            v = cuabi.from_dlpack(t, stream=s)
    finally:
        type(t).__dlpack__ = dlpack
    if cuabi.backend == "compiled":                    # torch's DLTensor, as without a stream
        assert v.lazy and v._owner is t
    else:                                              # the C view of the owning export
        assert v._h is not None and v._d is None
    assert v.shape == (n,) and v.ptr == t.data_ptr() and v.device_id == 0
    cuabi.View.of_buffer(dst, "float32", (n,)).copy_peer(v, stream=s)
    s.sync()
    assert (np.frombuffer(dst.to_bytes(), np.float32) == 7.0).all()
    # A conjugate tensor: torch's __dlpack__(stream=) decides, which refuses
    # the conjugate bit (its C export would not).
    monkeypatch.undo()
    c = torch.ones(4, dtype=torch.complex64, device="cuda:0").conj()
    with pytest.raises(Exception, match="(?i)conj"):
        cuabi.from_dlpack(c, stream=s)
    s.close()
