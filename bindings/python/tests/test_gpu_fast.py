"""The compiled fast path on a GPU (skipped without one; both backends run
these under tests/bindings/check_python.sh): every argument kind reaches the kernel
as packed, also with threads launching one kernel at once; torch through
its exchange table; cuabi.View's table used by torch and its allocator on
the device."""
import threading

import numpy as np
import pytest

import cuabi
from cuabi import _lib
from cuabi import _view as V

ECHO = r'''
extern "C" __global__ void echo(long long *out, int slot, int a, float b, double c,
                                unsigned long long d, short e) {
    long long *o = out + 5 * slot;
    o[0] = a; o[1] = (long long)(b * 1000.0f); o[2] = (long long)(c * 1000.0);
    o[3] = (long long)d; o[4] = e;
}
'''


@pytest.fixture(scope="module")
def echo(gpu):
    return cuabi.Program(ECHO).compile(arch=gpu.arch).get_kernel("echo")


def run_echo(gpu, echo, rows):
    """Launch echo once per row of arguments; the values the kernel saw."""
    with gpu.create_stream(non_blocking=False) as s:
        out = cuabi.Buffer(8 * 5 * len(rows), stream=s)
        out.fill(0, stream=s)
        cfg = cuabi.LaunchConfig(grid=1, block=1)
        for i, args in enumerate(rows):
            cuabi.launch(s, cfg, echo, out, i, *args)
        host = np.zeros((len(rows), 5), np.int64)
        out.copy_to(host, stream=s)
        s.synchronize()
    return host.tolist()


def test_arguments_reach_the_kernel(gpu, echo):
    rows = [(np.int32(-7), np.float32(1.5), np.float64(2.25), np.uint64(2**63 + 5), np.int16(-3)),
            (41, np.float32(-0.5), np.float64(1e3), np.uint64(7), np.int16(32767)),
            (np.int32(2**31 - 1), np.float32(3.0), np.float64(-4.5), np.uint64(0), np.int16(0))]
    got = run_echo(gpu, echo, rows)
    want = [[int(a), int(float(b) * 1000), int(float(c) * 1000),
             int(d) - (1 << 64) if int(d) >= 1 << 63 else int(d), int(e)]
            for a, b, c, d, e in rows]
    assert got == want


def test_threads_launching_one_kernel_keep_their_arguments(gpu, echo):
    # Each thread launches the same kernel many times with its own values;
    # a launch whose arguments another thread overwrote would show here.
    n_threads, per_thread = 8, 200
    with gpu.create_stream(non_blocking=False) as s:
        out = cuabi.Buffer(8 * 5 * n_threads * per_thread, stream=s)
        cfg = cuabi.LaunchConfig(grid=1, block=1)
        errors = []

        def work(t):
            try:
                for j in range(per_thread):
                    slot = t * per_thread + j
                    cuabi.launch(s, cfg, echo, out, slot, np.int32(slot), np.float32(t),
                                 np.float64(j), np.uint64(slot * 3), np.int16(t))
            except Exception as e:       # pragma: no cover - reported below
                errors.append(e)
        threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, errors
        host = np.zeros((n_threads * per_thread, 5), np.int64)
        out.copy_to(host, stream=s)
        s.synchronize()
    for t in range(n_threads):
        for j in range(per_thread):
            slot = t * per_thread + j
            assert host[slot].tolist() == [slot, t * 1000, j * 1000, slot * 3, t], (t, j)


def test_torch_through_its_exchange_table(gpu):
    torch = pytest.importorskip("torch")
    t = torch.arange(12, device="cuda", dtype=torch.float32).reshape(3, 4)[:, 1:]
    v = cuabi.from_dlpack(t)
    assert v.lazy and v._owner is t and v.ptr == t.data_ptr()
    assert (v.shape, v.strides, v.__dlpack_device__()) == ((3, 3), (4, 1), (2, t.device.index))
    api = getattr(type(t), "__dlpack_c_exchange_api__", None)
    if _lib.fast is not None and api is not None:
        kind = _lib.fast.handler_kind(type(t))
        table = V._exchange_api_of(type(t))
        if table is not None and table.dltensor_from_py_object_no_sync:
            assert kind == _lib.fast.H_DLTENSOR      # one C call, no attribute read


def test_torch_takes_views_and_their_table(gpu):
    torch = pytest.importorskip("torch")
    buf = cuabi.Buffer(4 * 24)
    v = buf.view("float32", (4, 6))[:, ::2]
    before = _lib.fast.exchange_calls() if _lib.fast is not None else {}
    t = torch.from_dlpack(v)
    after = _lib.fast.exchange_calls() if _lib.fast is not None else {}
    used = [k for k in after if after[k] != before.get(k)]
    print("torch.from_dlpack(View) called:", used or "no exchange function (used __dlpack__)")
    assert t.shape == (4, 3) and t.stride() == (6, 2) and t.data_ptr() == v.ptr
    t.fill_(2.0)
    host = np.zeros(24, np.float32)
    buf.copy_to(host)
    assert host.reshape(4, 6)[:, ::2].sum() == 24.0 and host.reshape(4, 6)[:, 1::2].sum() == 0


def test_exchange_allocator_on_the_device(gpu):
    if _lib.fast is None:
        pytest.skip("cuabi._fast not in use")
    import ctypes as C
    from fake_arrays import DLTensorView, _Table
    t = _Table.from_address(cuabi.View.__c_dlpack_exchange_api__)
    set_error = C.CFUNCTYPE(None, C.c_void_p, C.c_char_p, C.c_char_p)(lambda *a: None)
    alloc = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_void_p), C.c_void_p,
                         type(set_error))(t.managed_tensor_allocator)
    to_object = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.py_object))(
        t.managed_tensor_to_py_object_no_sync)
    proto = DLTensorView()
    proto.device_type, proto.device_id = 2, gpu.ordinal
    proto.ndim, proto.code, proto.bits, proto.lanes = 2, 2, 32, 1
    dims = (C.c_int64 * 2)(8, 16)
    proto.shape = C.addressof(dims)
    out = C.c_void_p()
    assert alloc(C.addressof(proto), C.byref(out), None, set_error) == 0
    back = C.py_object()
    assert to_object(out, C.byref(back)) == 0
    v = back.value
    assert v.shape == (8, 16) and v.__dlpack_device__() == (2, gpu.ordinal)
    torch = pytest.importorskip("torch")
    torch.from_dlpack(v).fill_(1.0)
    assert torch.from_dlpack(v).sum().item() == 128.0
