"""from_dlpack through a producer's non-owning exchange export
(dltensor_from_py_object_no_sync, torch >= 2.10): the compiled backend reads
a torch tensor with one C call into a lazy view that equals the attribute
path's, and takes the attribute path for what that call cannot say (a
failing call, the conjugate bit, other devices, unusual dtypes). The ctypes
backend reads the attributes; the views are the same."""
import sys

import numpy as np
import pytest

import cuabi
from cuabi import _lib
from cuabi import _view as V
from fake_arrays import ExchangeTable, make_fake_torch, numpy_dltensor
from test_view_fast import arrays, facts

compiled = _lib.fast is not None
ids = lambda a: f"{a.dtype}{a.shape}{a.strides}"  # noqa: E731


@pytest.fixture
def torch(monkeypatch, request):
    """The fake torch, its Tensor type carrying an exchange table whose
    dltensor export fills the tensor's description (tests may swap it)."""
    t = make_fake_torch()
    monkeypatch.setitem(sys.modules, "torch", t)
    keep = []

    def fill(obj, out):
        dev = (2, obj.device.index or 0) if obj.is_cuda else (1, 0)
        return numpy_dltensor(obj._a, out, dev, keep)
    table = ExchangeTable(dltensor=fill)
    t.Tensor.__dlpack_c_exchange_api__ = table.capsule
    t.table = table
    V._reset_handlers()
    request.addfinalizer(V._reset_handlers)
    return t


def attribute_view(t):
    return V._torch_handler_for(sys.modules["torch"])(t)


@pytest.mark.parametrize("a", [a for a in arrays() if a.flags.writeable and a.dtype.kind != "c"],
                         ids=ids)
def test_exchange_view_equals_attribute_view(torch, a):
    t = torch.Tensor(a)
    v = cuabi.from_dlpack(t)
    ref = attribute_view(t)
    assert v.lazy and v._owner is t
    assert v._d[:5] == ref._d[:5] and tuple(v._d[5]) == tuple(ref._d[5])
    assert tuple(v._d[6]) == tuple(ref._d[6]) and v._d[7:] == ref._d[7:]
    assert facts(v) == facts(V._dlpack_handler(t))
    assert torch.table.calls["dltensor"] == (1 if compiled else 0)


def test_cuda_tensor_device(torch):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1:]
    v = cuabi.from_dlpack(torch.Tensor(a, device=("cuda", 3)))
    assert v.__dlpack_device__() == (V.CUDA, 3) and v.shape == (3, 3) and v.strides == (4, 1)
    assert v.ptr == a.__array_interface__["data"][0]


def test_what_the_call_cannot_say_takes_the_attribute_path(torch):
    table = torch.table
    # The conjugate bit is not in a DLTensor: complex tensors ask the
    # attributes (which refuse conjugated ones, as torch's __dlpack__ does).
    c = np.zeros(3, np.complex64)
    with pytest.raises(RuntimeError, match="conjugate"):
        cuabi.from_dlpack(torch.Tensor(c, conj=True))
    assert cuabi.from_dlpack(torch.Tensor(c)).dtype == "complex64"
    # A failing call, two lanes, an unknown device: the attribute path.
    for bad in (lambda o, out: -1,
                lambda o, out: numpy_dltensor(o._a, out) or _lanes(out, 2),
                lambda o, out: numpy_dltensor(o._a, out, (7, 0))):
        t = make_table_tensor(torch, bad)
        v = cuabi.from_dlpack(t)
        assert v.shape == (5,) and v._owner is t
    assert table.calls["dltensor"] == (2 if compiled else 0)


def _lanes(out, n):
    from fake_arrays import DLTensorView
    DLTensorView.from_address(out).lanes = n
    return 0


def make_table_tensor(torch, fill):
    table = ExchangeTable(dltensor=fill)
    torch.Tensor.__dlpack_c_exchange_api__ = table.capsule
    torch.keep = table
    V._reset_handlers()
    return torch.Tensor(np.arange(5, dtype=np.float32))


def test_a_table_without_the_call_keeps_the_attribute_path(torch):
    # The capsule points into the table object: keep it alive (a temporary
    # one was freed at once and the read went into freed memory: a crash on
    # the GPU machine's Python 3.12).
    torch.keep = ExchangeTable()
    torch.Tensor.__dlpack_c_exchange_api__ = torch.keep.capsule
    V._reset_handlers()
    t = torch.Tensor(np.ones(4, np.int16))
    v = cuabi.from_dlpack(t)
    assert v._owner is t and v.shape == (4,)


def test_compiled_from_dlpack_arguments_match_python():
    # Keywords and arity: the compiled function hands anything unusual to
    # the Python one, so both say the same.
    a = np.zeros(3)
    for call in (lambda f: f(), lambda f: f(a, a), lambda f: f(a, stream=None, other=1),
                 lambda f: f(obj=a), lambda f: f(None), lambda f: f(5), lambda f: f("x")):
        results = []
        for f in (cuabi.from_dlpack, V.from_dlpack_py):
            try:
                results.append(("ok", facts(call(f))))
            except Exception as e:
                results.append((type(e).__name__, str(e)))
        assert results[0] == results[1]
    assert cuabi.from_dlpack(a, stream=None).shape == (3,)
