"""from_dlpack through the DLPack C exchange API (DLPack 1.3,
`type(x).__dlpack_c_exchange_api__`): the owning export a producer without
a handler of its own gets, checked against the DLPack capsule path with
Python-callback tables. (torch has one but takes its attribute path, which
is cheaper than a ctypes call: see _torch_handler_for.)"""
import gc
import weakref

import numpy as np
import pytest

import cuabi
from cuabi import _view as V
from fake_arrays import ExchangeTable, numpy_export
from test_view_fast import facts


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
    Array.table = table   # the capsule points into it: keep it alive
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
