"""cuda.core's meanings on cuabi's classes (issue 24 item 1) against the C
tests' fake driver (no GPU): run by test_cuda_core_api.py in a process whose
CUABI_DRIVER_PATH names tests/fixtures/.libs/fake_cuda_graph.so. The fake is
an sm_90 GPU whose "device" memory is host memory; its kernel add_i64(out,
in, n) runs on the host (adds in[0..n) to out[0])."""
import ctypes as C
import os
import subprocess
import sys

import numpy as np
import pytest

import cuabi

SRC = ('extern "C" __global__ void add_i64(long long *o, const long long *i, '
       'unsigned long long n) {}\n')


@pytest.fixture(scope="module")
def dev():
    assert cuabi.device_count() > 0, "the fake driver is not loaded"
    d = cuabi.Device()
    d.set_current()
    return d


@pytest.fixture(scope="module")
def add(dev):
    return cuabi.Program(SRC, "c++", {"arch": f"sm_{dev.arch}"}).compile("cubin") \
        .get_kernel("add_i64")


# ---- Device

def test_arch_is_digits_and_sm_arch_keeps_cuabis_spelling(dev):
    assert dev.arch == "90" and f"sm_{dev.arch}" == "sm_90"
    assert dev.sm_arch == "sm_90"
    cc = dev.compute_capability
    assert cc == (9, 0) and (cc.major, cc.minor) == (9, 0) and isinstance(cc, tuple)


def test_device_ids_and_identity(dev):
    assert dev.device_id == 0 == int(dev) == dev.ordinal
    assert cuabi.Device(0) == dev and cuabi.Device() == dev
    assert cuabi.Device(dev) == dev
    assert cuabi.Device.get_all_devices()[0] == dev
    u = dev.uuid
    assert [len(p) for p in u.split("-")] == [8, 4, 4, 4, 12]
    assert isinstance(dev.pci_bus_id, str)


def test_properties_use_cuda_cores_names(dev):
    p = dev.properties
    assert p.multiprocessor_count == dev.attribute(16)          # CU_DEVICE_ATTRIBUTE_*
    assert p.max_threads_per_block == dev.attribute(1)
    assert isinstance(p.integrated, bool) and isinstance(p.cooperative_launch, bool)
    assert isinstance(p.compute_capability_major, int)          # cuabi's own fields too
    assert p.name == dev.name
    names = dir(p)
    assert "max_shared_memory_per_block_optin" in names and "host_numa_id" in names
    assert len([n for n in names if not n.startswith("_")]) >= 143
    with pytest.raises(AttributeError):
        p.no_such_property


def test_default_stream_is_a_property(dev, monkeypatch):
    s = dev.default_stream
    assert isinstance(s, cuabi.Stream) and not callable(s)
    assert s.handle == dev.legacy_default_stream().handle
    monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "1")
    assert dev.default_stream.handle == dev.per_thread_default_stream().handle
    monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0")
    assert dev.default_stream.handle == dev.legacy_default_stream().handle


def test_context_is_a_context(dev):
    c = dev.context
    assert isinstance(c, cuabi.Context) and c.handle == dev.context_handle != 0
    assert c == dev.context and not c.is_green


def test_sync_and_memory_resource(dev):
    dev.sync()
    mr = dev.memory_resource
    assert isinstance(mr, cuabi.DeviceMemoryResource) and mr is dev.memory_resource
    assert mr.is_device_accessible and not mr.is_host_accessible and mr.device_id == 0
    s = dev.create_stream()
    b = dev.allocate(256, stream=s)
    assert isinstance(b, cuabi.Buffer) and b.size == 256
    assert b.memory_resource == mr and b.device_id == 0
    b.close(s)
    other = cuabi.LegacyPinnedMemoryResource()
    dev.memory_resource = other
    try:
        assert dev.allocate(64).is_host_accessible
    finally:
        dev.memory_resource = mr
    with pytest.raises(TypeError):
        dev.memory_resource = 3


# ---- Stream and Event

def test_create_stream_options_and_handles(dev):
    s = dev.create_stream()
    assert s.handle == s.raw and s.handle != s.cuabi_handle
    assert int(s.handle) == s.__cuda_stream__()[1]
    assert s.context == dev.context and not s.is_closed
    s2 = dev.create_stream(options=cuabi.StreamOptions(nonblocking=False, priority=0))
    s3 = dev.create_stream(options={"nonblocking": True})
    assert s.is_nonblocking and not s2.is_nonblocking and s3.is_nonblocking
    assert not dev.create_stream(non_blocking=False).is_nonblocking
    for x in (s, s2, s3):
        x.close()
    assert s.is_closed


def test_create_stream_wraps_a_cuda_stream_object(dev):
    base = dev.create_stream()

    class Foreign:
        def __cuda_stream__(self):
            return (0, base.raw)

    f = Foreign()
    w = dev.create_stream(f)
    assert w.handle == base.handle and w._owner is f
    assert cuabi.Stream.from_handle(base.handle).handle == base.handle
    with pytest.raises(TypeError, match="non_blocking= as a keyword"):
        dev.create_stream(True)
    with pytest.raises(TypeError, match="has no __cuda_stream__"):
        dev.create_stream(object())


def test_create_event_options(dev):
    s = dev.create_stream()
    e = dev.create_event()                    # cuda.core: no timing by default
    assert e.handle == e.raw != e.cuabi_handle
    s.record(e)
    e.sync()
    assert e.is_done and not e.is_closed
    assert e.is_timing_enabled is False and e.is_blocking_sync is False
    assert e.device == dev and e.context == dev.context and not e.is_ipc_enabled
    t = dev.create_event(cuabi.EventOptions(timing_enabled=True))
    t2 = dev.create_event({"timing_enabled": True})
    assert t.is_timing_enabled and dev.create_event(timing=True).is_timing_enabled
    t.record(s)
    t2.record(s)
    s.sync()
    assert (t2 - t) >= 0.0


def test_legacy_and_per_thread_constants(dev):
    assert cuabi.LEGACY_DEFAULT_STREAM.handle == dev.legacy_default_stream().handle
    assert cuabi.PER_THREAD_DEFAULT_STREAM.handle == dev.per_thread_default_stream().handle


# ---- memory resources and buffers

def test_allocate_returns_a_buffer_and_allocate_ptr_an_address(dev):
    mr = cuabi.DeviceMemoryResource(dev)
    s = dev.create_stream()
    b = mr.allocate(128, stream=s)
    assert isinstance(b, cuabi.Buffer) and b.handle == b.ptr and int(b.handle) != 0
    assert b.is_device_accessible and not b.is_host_accessible and not b.is_managed
    p = mr.allocate_ptr(64, 0, s)
    assert isinstance(p, int) and p
    mr.deallocate_ptr(p, 64, 0, s)
    p2 = mr.allocate_ptr(64)
    mr.deallocate(p2, 64, s)                  # cuda.core's form
    b.close(s)
    assert b.handle == 0 and b.is_closed
    b.close(s)                                # twice: fine
    with pytest.raises(cuabi.ClosedHandleError):
        b.ptr


def test_buffer_close_uses_the_allocation_or_deallocation_stream(dev):
    s, t = dev.create_stream(), dev.create_stream()
    b = cuabi.DeviceMemoryResource(dev).allocate(64, stream=s)
    assert b._dealloc_stream == s
    b.set_deallocation_stream(t)
    assert b._dealloc_stream == t
    with pytest.raises(TypeError):
        b.set_deallocation_stream(None)
    b.close()
    assert b.handle == 0
    with pytest.raises(RuntimeError):
        b.set_deallocation_stream(t)


def test_device_memory_resource_options(dev):
    own = cuabi.DeviceMemoryResource(dev, cuabi.DeviceMemoryResourceOptions())
    assert own != cuabi.DeviceMemoryResource(dev) and own.allocate(64).size == 64
    own.close()
    ipc = cuabi.DeviceMemoryResource(0, {"ipc_enabled": True})
    assert isinstance(ipc, cuabi.DeviceMemoryResource) and ipc.is_ipc_enabled
    ipc.close()


def test_pinned_resources_and_dlpack(dev):
    for mr in (cuabi.LegacyPinnedMemoryResource(),
               cuabi.PinnedMemoryResource(options={"ipc_enabled": False}),
               cuabi.PinnedMemoryResource(cuabi.PinnedMemoryResourceOptions(numa_id=0))):
        assert mr.is_host_accessible and mr.is_device_accessible and mr.device_id == -1
        b = mr.allocate(8)
        values = np.from_dlpack(b).view(np.int32)        # as cuda.core's examples do
        assert values.shape == (2,)
        values[:] = (5, 7)
        assert bytes(b.to_bytes()) == np.array([5, 7], np.int32).tobytes()
        assert b.__dlpack_device__()[0] == 3             # kDLCUDAHost
        b.close()
    assert cuabi.PinnedMemoryResource().numa_id == -1
    with pytest.raises(NotImplementedError, match="issue 25"):
        cuabi.PinnedMemoryResource(cuabi.PinnedMemoryResourceOptions(ipc_enabled=True))


def test_graph_memory_resource_needs_a_capture(dev):
    gmr = cuabi.GraphMemoryResource(dev)
    with pytest.raises(RuntimeError, match="capturing"):
        gmr.allocate(64, stream=dev.create_stream())
    gb = dev.create_graph_builder().begin_building()
    b = gmr.allocate(64, stream=gb)
    assert b.size == 64
    b.close()
    gb.end_building()
    gb.close()


def test_buffer_copy_to_without_dst_makes_a_buffer(dev):
    b = cuabi.Buffer.from_host(np.arange(4, dtype=np.int64))
    c = b.copy_to()
    assert isinstance(c, cuabi.Buffer) and c.size == b.size
    assert np.frombuffer(c.to_bytes(), np.int64).tolist() == [0, 1, 2, 3]
    with pytest.raises(TypeError, match="to_bytes"):
        b.copy_to(offset=8)


def test_buffer_fill_with_a_pattern(dev):
    b = cuabi.Buffer(16)
    b.fill(np.uint32(0x01020304).tobytes())
    assert np.frombuffer(b.to_bytes(), np.uint32).tolist() == [0x01020304] * 4
    b.fill(np.uint16(7))
    assert np.frombuffer(b.to_bytes(), np.uint16).tolist() == [7] * 8
    with pytest.raises(ValueError, match="1, 2 or 4"):
        b.fill(b"abc")


def test_buffer_from_handle(dev):
    mr = cuabi.DeviceMemoryResource(dev)
    freed = []

    class Recording(cuabi.DeviceMemoryResource):
        def deallocate(self, ptr, size, stream=None):
            freed.append((ptr, size))
            super().deallocate(ptr, size, stream)

    rec = Recording(dev)
    p = mr.allocate_ptr(64)
    b = cuabi.Buffer.from_handle(p, 64, mr=rec)
    assert b.handle == p and b.size == 64 and b.device_id == 0
    b.close()
    assert freed == [(p, 64)]
    arr = np.zeros(4, np.int64)
    h = cuabi.Buffer.from_handle(arr.ctypes.data, arr.nbytes, owner=arr)
    assert h.owner is arr and h.handle == arr.ctypes.data
    with pytest.raises(ValueError):
        cuabi.Buffer.from_handle(p, 64, mr=rec, owner=arr)


# ---- launches, clusters, graphs

def test_launch_on_the_default_stream_property(dev, add):
    out = cuabi.Buffer.from_host(np.zeros(1, np.int64))
    inp = cuabi.Buffer.from_host(np.arange(5, dtype=np.int64))
    cuabi.launch(dev.default_stream, cuabi.LaunchConfig(grid=1, block=1), add, out, inp,
                 np.uint64(5))
    dev.sync()
    assert np.frombuffer(out.to_bytes(), np.int64)[0] == 10


def test_a_kernel_from_the_program_cache_runs(dev, tmp_path):
    """cuda.core.utils.FileStreamProgramCache: the second Program.compile is
    a hit (nothing compiled), its ObjectCode loads and its kernel runs."""
    from cuabi import _compile
    from cuabi.utils import FileStreamProgramCache, make_program_cache_key
    compiles = []
    real = _compile.Program._compile

    def counted(*a):
        compiles.append(1)
        return real(*a)
    _compile.Program._compile = counted
    try:
        with FileStreamProgramCache(tmp_path / "pc") as cache:
            first = cuabi.Program(SRC, "c++").compile("cubin", cache=cache)
            hit = cuabi.Program(SRC, "c++").compile("cubin", cache=cache)
            # arch None is the current device's (the fake's sm_90), in the key too
            key = make_program_cache_key(code=SRC, code_type="c++",
                                         options=cuabi.ProgramOptions(arch="sm_90"),
                                         target_type="cubin")
            assert cache[key] == bytes(first)
    finally:
        _compile.Program._compile = real
    assert len(compiles) == 1 and bytes(hit) == bytes(first) and hit.arch == 90
    k = hit.get_kernel("add_i64")
    out = cuabi.Buffer.from_host(np.zeros(1, np.int64))
    inp = cuabi.Buffer.from_host(np.arange(6, dtype=np.int64))
    cuabi.launch(dev.default_stream, cuabi.LaunchConfig(grid=1, block=1), k, out, inp,
                 np.uint64(6))
    dev.sync()
    assert np.frombuffer(out.to_bytes(), np.int64)[0] == 15


def test_cluster_grid_counts_clusters():
    c = cuabi.LaunchConfig(grid=4, cluster=2, block=32)
    assert c.grid == (4, 1, 1) and c.grid_blocks == (8, 1, 1)
    assert tuple(c._c.grid) == (8, 1, 1) and tuple(c._c.cluster) == (2, 1, 1)
    b = cuabi.LaunchConfig(grid_blocks=8, cluster=2, block=32)
    assert b.grid == (4, 1, 1) and tuple(b._c.grid) == (8, 1, 1)
    plain = cuabi.LaunchConfig(grid=4, block=32)
    assert plain.grid == plain.grid_blocks == (4, 1, 1)
    with pytest.raises(ValueError, match="multiple"):
        cuabi.LaunchConfig(grid_blocks=7, cluster=2)
    with pytest.raises(ValueError, match="not both"):
        cuabi.LaunchConfig(grid=1, grid_blocks=2)
    assert cuabi.LaunchConfig(is_cooperative=True).cooperative


def test_graph_builder_from_the_device(dev, add):
    out = cuabi.Buffer.from_host(np.zeros(1, np.int64))
    inp = cuabi.Buffer.from_host(np.arange(3, dtype=np.int64))
    gb = dev.create_graph_builder()
    stream = gb.stream
    gb.begin_building()                      # relaxed, as cuda.core 1.2
    cuabi.launch(gb, cuabi.LaunchConfig(grid=1, block=1), add, out, inp, np.uint64(3))
    g = gb.end_building().complete()
    assert g.handle == g.raw and not g.is_closed
    s = dev.create_stream()
    g.upload(s)
    g.launch(s)
    g.launch(s)
    s.sync()
    assert np.frombuffer(out.to_bytes(), np.int64)[0] == 6
    from cuabi.graph import Graph, GraphBuilder, GraphCompleteOptions, GraphDefinition
    assert isinstance(g, Graph) and isinstance(gb, GraphBuilder)
    assert GraphDefinition is cuabi.Graph and GraphCompleteOptions is cuabi.CompleteOptions
    g.close()
    gb.close()
    assert gb.is_closed and stream.closed     # the builder's own stream goes with it


def test_host_launch_runs_in_stream_order(dev, add):
    seen = []
    s = dev.create_stream()
    out = cuabi.Buffer.from_host(np.zeros(1, np.int64))
    inp = cuabi.Buffer.from_host(np.arange(4, dtype=np.int64))
    cuabi.launch(s, cuabi.LaunchConfig(grid=1, block=1), add, out, inp, np.uint64(4))
    cuabi.host_launch(s, lambda tag: seen.append((tag, np.frombuffer(out.to_bytes(),
                                                                     np.int64)[0])), "after")
    s.sync()
    assert seen == [("after", 6)]
    with pytest.raises(TypeError):
        cuabi.host_launch(s, 3)
    # the callable and its arguments go at the next host_launch (never on the
    # driver's thread, where a finalizer could call CUDA)
    import gc
    import weakref
    from cuabi import _callbacks, _graph

    class Arg:
        pass
    arg = Arg()
    gone = weakref.ref(arg)
    cuabi.host_launch(s, lambda a: seen.append(a), arg)
    s.sync()
    del arg
    gc.collect()
    assert seen[-1] is gone() and gone() is not None
    seen.clear()
    cuabi.host_launch(s, lambda: None)
    gc.collect()
    assert gone() is None


def test_host_launch_on_a_capturing_stream_records_a_host_node(dev):
    import gc
    import weakref
    calls = []

    class Arg:
        pass
    arg = Arg()
    gone = weakref.ref(arg)
    for builder in (True, False):
        if builder:     # cuda.core's way: the builder is the stream
            gb = dev.create_graph_builder().begin_building()
            cuabi.host_launch(gb, lambda a, tag: calls.append((a, tag)), arg, "node")
            graph = gb.end_building().graph
        else:
            s = dev.create_stream()
            with s.capture() as graph:
                cuabi.host_launch(s, lambda a, tag: calls.append((a, tag)), arg, "node")
        assert calls == []                       # recorded, not run
        assert [n.kind for n in graph.node_list] == ["host"]
        e1, e2 = graph.instantiate(), graph.instantiate()
        run_on = dev.create_stream()
        e1.launch(run_on)
        e1.launch(run_on)
        e2.launch(run_on)
        run_on.sync()
        assert calls == [(arg, "node")] * 3
        calls.clear()
        # the graph, then each executable: the callable lives until the last
        graph.close()
        if builder:
            gb.close()
        e1.close()
        e2.launch(run_on)
        run_on.sync()
        assert len(calls) == 1
        calls.clear()
        e2.close()
        if not builder:
            s.close()
        run_on.close()
    del arg
    cuabi.host_launch(dev.create_stream(), lambda: None)     # reaps what waited
    gc.collect()
    assert gone() is None


def test_host_launch_refuses_a_foreign_capture(dev):
    from cuabi import _callbacks
    from cuabi.errors import error_class
    s = dev.create_stream()
    drv = C.CDLL(os.environ["CUABI_DRIVER_PATH"])

    def entry(name, *types):        # the fake's table, which the library uses too
        p = C.c_void_p()
        assert drv.cuGetProcAddress_v2(name.encode(), C.byref(p), 12030, C.c_uint64(0),
                                       None) == 0
        return C.CFUNCTYPE(C.c_int, *types)(p.value)
    begin = entry("cuStreamBeginCapture", C.c_void_p, C.c_int)
    end = entry("cuStreamEndCapture", C.c_void_p, C.POINTER(C.c_void_p))
    destroy = entry("cuGraphDestroy", C.c_void_p)
    assert begin(s.raw, 2) == 0     # relaxed, behind cuabi's back (as torch would)
    cuabi._graph._reap_host_launches()      # what earlier tests left for the next call
    before = len(_callbacks._registry)
    with pytest.raises(error_class(cuabi._capi.CUABI_ERROR_STREAM_CAPTURE),
                       match="not by cuabi_graph_capture_begin"):
        cuabi.host_launch(s, lambda: None)
    assert len(_callbacks._registry) == before          # nothing left behind
    g = C.c_void_p()
    assert end(s.raw, C.byref(g)) == 0 and g.value
    assert destroy(g) == 0
    s.close()


def test_per_thread_env_in_a_fresh_process():
    pkg = os.path.dirname(os.path.dirname(cuabi.__file__))
    env = dict(os.environ, CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM="1",
               PYTHONPATH=pkg + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c",
                        "import cuabi; print(cuabi.Device().default_stream.handle)"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "2", r.stderr
