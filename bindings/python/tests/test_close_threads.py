"""close() while other threads use the object (issue 29 item 7; the rules:
docs/RELIABILITY.md, "Threat model: threads, finalizers and captures").

Every cuabi object counts the C calls in flight on its handle; close() marks
it closed at once (new calls raise ClosedHandleError), never blocks, and
leaves the release to the last call in flight. Before, close() released the
handle under calls that other threads had in flight: heap-use-after-free in
the library (SIGSEGV / SIGABRT in 3 processes of 36; under ASan 9 of 12),
and InvalidHandleError ("already released") where ClosedHandleError was
meant.

The stress runs go in processes of their own, two at once (the report's
crashes needed contention); CUABI_STRESS=N multiplies their objects (the
report: 200 buffers x 4 threads x 50 rounds, four processes -- the default
here is that, two processes). Under the ASan build (tests/bindings/check_python.sh
preloads libasan) a use-after-free fails them."""
import ctypes as C
import gc
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import cuabi
from cuabi import _lib

HERE = os.path.dirname(os.path.abspath(__file__))
SCALE = max(1, int(os.environ.get("CUABI_STRESS", "1")))
DRIVER = os.environ.get("CUABI_FAKE_DRIVER", "")


def _probe(what, objects, rounds, processes=2, env=None):
    env = dict(os.environ, **(env or {}),
               PYTHONPATH=os.path.dirname(os.path.dirname(cuabi.__file__)))
    cmd = [sys.executable, os.path.join(HERE, "close_stress_probe.py"), what,
           str(objects * SCALE), str(rounds)]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(processes)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, f"{what}: exit status {p.returncode}\n{err[-4000:]}"
        results.append(json.loads(out))
    for r in results:
        assert set(r["errors"]) <= {"ClosedHandleError"}, r["errors"]
        assert r["calls"] > 0
    return results


def test_buffers_closed_while_threads_use_them():
    # The report: view / from_dlpack / write / slice / ptr on host Buffers.
    _probe("buffers", 200, 50)


def test_views_closed_while_threads_use_them():
    _probe("views", 100, 30)


def test_launches_while_their_objects_are_closed():
    if not os.path.exists(DRIVER):
        pytest.skip("no fake driver (CUABI_FAKE_DRIVER: bench/.libs/fake_libcuda.so)")
    _probe("launches", 60, 20, env={"CUABI_DRIVER_PATH": DRIVER})


# ---- deterministic: a C call that runs Python code (a resource's callback)

def _released(getter, h) -> bool:
    """Whether the raw handle h no longer names a live object."""
    try:
        _lib.call(getter, C.c_void_p(h))
        return False
    except cuabi.InvalidHandleError:
        return True


class _HostResource(cuabi.MemoryResource):
    """Host memory through Python callbacks; `during` runs inside allocate."""

    def __init__(self, during=None):
        self.during, self.blocks = during, {}
        super().__init__(None, kind="host", stream_ordered=False)

    def allocate_ptr(self, size, alignment, stream):
        if self.during is not None:
            self.during(self)
        b = (C.c_char * max(size, 1))()
        self.blocks[C.addressof(b)] = b
        return C.addressof(b)

    def deallocate_ptr(self, ptr, size, alignment, stream):
        self.blocks.pop(ptr, None)


def test_resource_closed_by_another_thread_during_its_allocation():
    inside, go, closed = threading.Event(), threading.Event(), []

    def during(res):
        inside.set()
        assert go.wait(30)

    res = _HostResource(during)
    h = res.cuabi_handle
    out = []
    t = threading.Thread(target=lambda: out.append(cuabi.Buffer(64, res)))
    t.start()
    assert inside.wait(30)
    res.close()                     # returns at once: the allocation is in flight
    closed.append(res.closed)
    assert not _released("cuabi_memory_resource_kind", h), "released under a call in flight"
    with pytest.raises(cuabi.ClosedHandleError):
        res.kind
    go.set()
    t.join(30)
    assert closed == [True]
    buf = out[0]
    with buf.resource as r:         # the buffer's resource is the one closed above
        assert r.kind == "host"
    buf.close()
    assert _released("cuabi_memory_resource_kind", h)


def test_resource_closed_inside_its_own_allocate_callback():
    res = _HostResource(lambda r: r.close())
    h = res.cuabi_handle
    buf = cuabi.Buffer(64, res)
    assert res.closed
    with buf.resource as r:
        assert r.kind == "host"
    buf.close()
    gc.collect()
    assert _released("cuabi_memory_resource_kind", h)


# ---- the counting itself (cuabi._lib: use, done, close_handle, holding)

def test_close_during_a_call_in_flight_leaves_the_release_to_it():
    buf = cuabi.Buffer(64, cuabi.MemoryResource.host())
    with _lib.holding(buf) as (h,):
        buf.close()
        assert buf.closed
        with pytest.raises(cuabi.ClosedHandleError):
            buf.size
        assert not _released("cuabi_buffer_size", h)
        buf.close()                 # idempotent
    assert _released("cuabi_buffer_size", h)


def test_every_call_in_flight_counts():
    buf = cuabi.Buffer(64, cuabi.MemoryResource.host())
    h = buf.cuabi_handle
    _lib.use(buf)
    _lib.use(buf)
    buf.close()
    _lib.done(buf)
    assert not _released("cuabi_buffer_size", h)
    _lib.done(buf)
    assert _released("cuabi_buffer_size", h)


def test_holding_a_closed_object_raises_and_holds_nothing():
    a = cuabi.Buffer(8, cuabi.MemoryResource.host())
    b = cuabi.Buffer(8, cuabi.MemoryResource.host())
    hb = b.cuabi_handle
    b.close()
    with pytest.raises(cuabi.ClosedHandleError):
        with _lib.holding(a, b):
            pass
    ha = a.cuabi_handle
    a.close()                       # nothing left counted on a: released now
    assert _released("cuabi_buffer_size", ha) and _released("cuabi_buffer_size", hb)


def test_a_view_closed_during_a_call_keeps_its_c_view_until_the_call_ends():
    arr = np.arange(16, dtype=np.float32)
    v = cuabi.View(arr)
    h = v.handle                    # the C view borrows arr's memory (no copy)
    with _lib.holding(v):
        v.close()
        assert v.closed and v._owner is None
        del arr
        gc.collect()
        assert _lib.call("cuabi_view_nbytes", C.c_void_p(h)) == 64
    assert _released("cuabi_view_nbytes", h)


def test_closed_buffer_raises_closed_handle_error():
    buf = cuabi.Buffer(64, cuabi.MemoryResource.host())
    buf.ptr                         # cached
    buf.close()
    for get in (lambda: buf.ptr, lambda: buf.size, lambda: buf.view("uint8"),
                lambda: buf.cuabi_handle, lambda: buf.to_bytes()):
        with pytest.raises(cuabi.ClosedHandleError):
            get()


def test_prepared_launch_packs_hold_their_buffers():
    pack = cuabi.ArgPack("buffer, i32")
    buf = cuabi.Buffer(64, cuabi.MemoryResource.host())
    other = cuabi.Buffer(64, cuabi.MemoryResource.host())
    pack.set(buf, 3)
    assert pack._held == (buf,)
    pack[0] = other
    assert pack._held == (other,)
    pack.set(buf, 4)
    assert pack._held == (buf,)
