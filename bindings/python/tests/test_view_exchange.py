"""from_dlpack through the DLPack C exchange API (DLPack 1.3,
`type(x).__dlpack_c_exchange_api__`): torch's borrowed-DLTensor path and the
owning path any other producer gets, checked against the DLPack capsule
path with Python-callback tables (the GPU tests use torch's real one)."""
import gc
import sys
import weakref

import numpy as np
import pytest

import cuabi
from cuabi import _view as V
from fake_arrays import ExchangeTable, make_fake_torch, numpy_export, torch_fill
from test_view_fast import arrays, facts


@pytest.fixture
def xtorch(monkeypatch):
    """The fake torch with an exchange table; .table counts the calls."""
    table = ExchangeTable(fill=torch_fill)
    t = make_fake_torch(exchange=table)
    t.table = table
    monkeypatch.setitem(sys.modules, "torch", t)
    return t


@pytest.mark.parametrize("a", [a for a in arrays() if a.flags.writeable],
                         ids=lambda a: f"{a.dtype}{a.shape}{a.strides}")
def test_torch_exchange_path_matches_dlpack(xtorch, a):
    t = xtorch.Tensor(a)
    before = xtorch.table.calls["fill"]
    v = cuabi.from_dlpack(t)
    assert xtorch.table.calls["fill"] == before + 1      # the table was used
    assert v.lazy and v._owner is t
    assert facts(v) == facts(V._dlpack_handler(t))
    if a.size:
        assert np.array_equal(np.from_dlpack(v), a)
        v.handle                                        # the C view agrees too
        assert facts(v) == facts(V._dlpack_handler(t))


def test_torch_exchange_device_and_grad(xtorch):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = cuabi.from_dlpack(xtorch.Tensor(a, device=("cuda", 3)))
    assert v.__dlpack_device__() == (V.CUDA, 3) and v.shape == (2, 3)
    # Shared as its data, as through the exchange API everywhere; torch's
    # __dlpack__ refuses these.
    g = cuabi.from_dlpack(xtorch.Tensor(a, requires_grad=True))
    assert g.ptr == a.ctypes.data and not g.readonly


def test_torch_exchange_falls_back_where_dlpack_differs(xtorch):
    c = np.zeros(3, np.complex64)
    with pytest.raises(RuntimeError, match="conjugate"):      # torch's own refusal
        cuabi.from_dlpack(xtorch.Tensor(c, conj=True))
    # A negative bit goes to torch's __dlpack__ too (here: numpy's capsule).
    f = np.arange(3, dtype=np.float32)
    v = cuabi.from_dlpack(xtorch.Tensor(f, neg=True))
    assert not v.lazy and v.ptr == f.ctypes.data
    # A dtype outside the map: torch decides, through the DLPack path.
    t = xtorch.Tensor(np.zeros(2, np.float32), dtype=xtorch.complex32)
    assert not cuabi.from_dlpack(t).lazy


def test_torch_exchange_failure_takes_dlpack(monkeypatch):
    table = ExchangeTable(fill=lambda o, out: -1)
    torch = make_fake_torch(exchange=table)
    monkeypatch.setitem(sys.modules, "torch", torch)
    a = np.arange(4, dtype=np.int32)
    v = cuabi.from_dlpack(torch.Tensor(a))
    assert table.calls["fill"] == 1 and not v.lazy
    assert np.array_equal(np.from_dlpack(v), a)


def test_torch_exchange_owner_lives_as_long_as_the_view(xtorch):
    t = xtorch.Tensor(np.ones(8, np.float32))
    ref = weakref.ref(t)
    v = cuabi.from_dlpack(t)
    del t
    gc.collect()
    assert ref() is not None
    assert np.from_dlpack(v).sum() == 8
    del v
    gc.collect()
    assert ref() is None


# ---- any other producer: the owning export

def make_producer(table, attr="__dlpack_c_exchange_api__", value=None):
    """A numpy-backed array type carrying `table`; __dlpack__ counts calls."""
    class Array:
        dlpack_calls = 0

        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None, max_version=None, **kw):
            type(self).dlpack_calls += 1
            return self.a.__dlpack__(max_version=max_version)

        def __dlpack_device__(self):
            return (1, 0)
    setattr(Array, attr, table.capsule if value is None else value)
    return Array


def export_of_array(obj):
    return numpy_export(obj.a)


def test_owning_export_is_used_and_keeps_flags():
    table = ExchangeTable(export=export_of_array)
    Array = make_producer(table)
    a = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]
    v = cuabi.from_dlpack(Array(a))
    assert table.calls["export"] == 1 and Array.dlpack_calls == 0
    assert facts(v) == facts(V._dlpack_handler(a))
    ro = a.copy()
    ro.flags.writeable = False
    assert cuabi.from_dlpack(Array(ro)).readonly


def test_owning_export_deleter_runs_once_when_the_view_goes():
    table = ExchangeTable(export=export_of_array)
    Array = make_producer(table)
    base = np.ones(16, np.int8)
    ref = weakref.ref(base)
    v = cuabi.from_dlpack(Array(base))
    del base
    gc.collect()
    assert ref() is not None           # numpy's tensor holds the array
    v.close()
    gc.collect()
    assert ref() is None               # the deleter ran (a second run would crash)


def test_owning_export_failure_takes_dlpack():
    table = ExchangeTable(export=lambda obj: -1)
    Array = make_producer(table)
    v = cuabi.from_dlpack(Array(np.zeros(3, np.float32)))
    assert table.calls["export"] == 1 and Array.dlpack_calls == 1
    assert v.shape == (3,)


def test_refused_tensor_from_the_table_is_an_error_and_freed():
    # The C import owns the tensor even when it refuses it: the deleter runs.
    from cuabi import _capi

    def export_two_lanes(obj):
        p = numpy_export(obj.a)
        _capi.DLManagedTensorVersioned.from_address(p).dl_tensor.dtype.lanes = 2
        return p
    Array = make_producer(ExchangeTable(export=export_two_lanes))
    base = np.zeros(4, np.float32)
    ref = weakref.ref(base)
    with pytest.raises(cuabi.CuabiError, match="lanes"):
        cuabi.from_dlpack(Array(base))
    del base
    gc.collect()
    assert ref() is None


def test_tables_that_are_not_used():
    a = np.zeros(2, np.float32)
    # Major version 2 without an older table in the chain; a capsule of
    # another name; an attribute that is neither capsule nor int.
    for Array in (make_producer(ExchangeTable(export=export_of_array, major=2)),
                  make_producer(ExchangeTable(export=export_of_array, name=b"other")),
                  make_producer(ExchangeTable(export=export_of_array), value="nope")):
        cuabi.from_dlpack(Array(a))
        assert Array.dlpack_calls == 1


def test_chained_table_and_old_int_attribute():
    old = ExchangeTable(export=export_of_array)
    newer = ExchangeTable(major=2, prev=old)
    Array = make_producer(newer)
    cuabi.from_dlpack(Array(np.zeros(2, np.float32)))
    assert old.calls["export"] == 1 and Array.dlpack_calls == 0
    table = ExchangeTable(export=export_of_array)
    Old = make_producer(table, attr="__c_dlpack_exchange_api__", value=table.address)
    cuabi.from_dlpack(Old(np.zeros(2, np.float32)))
    assert table.calls["export"] == 1 and Old.dlpack_calls == 0
