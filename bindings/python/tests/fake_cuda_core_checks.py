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


def test_stream_waits_for_a_stream_without_an_event_per_call(dev, monkeypatch):
    """cuda.core's Stream.wait(stream): ordered in C through the GPU's one
    ordering event (cuabi_stream_wait_stream; test_device_cpu checks the
    driver calls), no Event made; a closed stream on either side is refused."""
    from cuabi import _core, _lib
    if cuabi.backend == "compiled":       # the library's table, not ctypes
        assert _core._wait_stream is _lib.fast.stream_wait_stream
    a, b = dev.create_stream(), dev.create_stream()

    def no_event(*args, **kw):
        raise AssertionError("Stream.wait(stream) made an event")
    monkeypatch.setattr(cuabi.Stream, "record", no_event)
    monkeypatch.setattr(cuabi, "Event", no_event)
    a.wait(b)
    b.wait(a)
    a.wait(a)
    a.wait(dev.default_stream)

    class Foreign:                  # cuda.core waits for any __cuda_stream__ object
        def __cuda_stream__(self):
            return (0, b.raw)
    a.wait(Foreign())
    a.wait(b.create_graph_builder())
    for bad in (5, object(), "stream"):
        with pytest.raises(ValueError, match="only an Event, a Stream or an object"):
            a.wait(bad)
    monkeypatch.undo()
    a.wait(b.record())              # an Event still works
    b.close()
    with pytest.raises(cuabi.ClosedHandleError):
        a.wait(b)
    with pytest.raises(cuabi.ClosedHandleError):
        b.wait(a)
    a.close()


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
    # a pool since issue 24 (fake_pinned_pool_checks.py has the rest)
    ipc = cuabi.PinnedMemoryResource(cuabi.PinnedMemoryResourceOptions(ipc_enabled=True))
    assert ipc.is_ipc_enabled and ipc.numa_id == dev.properties.host_numa_id
    ipc.close()


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


# ---- Device.create_* (cuda.core's texture factories)

def test_device_creates_arrays_textures_and_surfaces(dev):
    import ctypes as C
    from cuabi import _capi
    from cuabi._lib import lib, new_struct
    from cuabi.texture import (MipmappedArray, MipmappedArrayOptions, OpaqueArray,
                               OpaqueArrayOptions, ResourceDescriptor, SurfaceObject,
                               TextureObject, TextureObjectOptions)
    from cuabi.typing import AddressModeType, FilterModeType
    a = dev.create_opaque_array(OpaqueArrayOptions(shape=(8, 4), format="float32",
                                                   num_channels=2, is_surface_load_store=True))
    assert isinstance(a, OpaqueArray) and a.shape == (8, 4) and a.num_channels == 2
    assert a.is_surface_load_store and a.element_bytes == 8 and a.device == dev
    a.copy_from(np.arange(64, dtype=np.float32).reshape(4, 8, 2))
    assert np.asarray(a.copy_to()).view(np.float32).ravel().tolist() == list(range(64))
    b = dev.create_opaque_array({"shape": (5,), "format": np.uint8, "num_channels": 1})
    assert b.shape == (5,) and not b.is_surface_load_store
    m = dev.create_mipmapped_array(MipmappedArrayOptions(shape=(16, 16), format="uint8",
                                                         num_channels=4, num_levels=3))
    assert isinstance(m, MipmappedArray) and m.num_levels == 3 and m.shape == (16, 16)
    assert m.get_level(1).shape == (8, 8)
    with pytest.raises(TypeError):
        dev.create_opaque_array((8, 4))
    r = ResourceDescriptor.from_opaque_array(a)
    opts = TextureObjectOptions(address_mode=("wrap", "border"), filter_mode="linear",
                                normalized_coords=True, border_color=(1, 2, 3, 4))
    t = dev.create_texture_object(resource=r, options=opts)
    assert isinstance(t, TextureObject) and t.options is opts and t.resource is r
    desc = new_struct(_capi.cuabi_texture_desc)
    lib.cuabi_texture_get_desc(C.byref(desc), t)       # what the library was given
    assert desc.address_mode[:] == [_capi.CUABI_TEXTURE_ADDRESS_WRAP,
                                    _capi.CUABI_TEXTURE_ADDRESS_BORDER,
                                    _capi.CUABI_TEXTURE_ADDRESS_CLAMP]
    assert desc.filter_mode == _capi.CUABI_TEXTURE_FILTER_LINEAR and desc.normalized_coords
    assert desc.border_color[:] == [1.0, 2.0, 3.0, 4.0]
    d = dev.create_texture_object(resource=r)          # options=None: the defaults
    assert d.options == TextureObjectOptions() and d.options.address_mode is AddressModeType.CLAMP
    tm = dev.create_texture_object(resource=ResourceDescriptor.from_mipmapped_array(m),
                                   options={"mipmap_filter_mode": "linear", "read_mode": "normalized_float",
                                            "normalized_coords": True})
    assert tm.options.mipmap_filter_mode is FilterModeType.LINEAR
    with pytest.raises(TypeError):
        dev.create_texture_object(resource=a)
    with pytest.raises(TypeError):
        dev.create_texture_object(r)                   # keywords only, as cuda.core
    s = dev.create_surface_object(resource=r)
    assert isinstance(s, SurfaceObject) and s.resource is r and s.handle
    with pytest.raises(cuabi.CuabiError):              # no is_surface_load_store
        dev.create_surface_object(resource=ResourceDescriptor.from_opaque_array(b))
    for o in (s, t, d, tm, m, a, b):
        o.close()


# ---- cuda.core.utils's managed-memory batches

def test_prefetch_and_discard_batches(dev):
    from cuabi.utils import discard_batch, discard_prefetch_batch, prefetch_batch
    mr = cuabi.ManagedMemoryResource()
    bufs = [cuabi.ManagedBuffer(n, mr) for n in (4096, 8192, 65536)]
    s = dev.create_stream()
    prefetch_batch(s, bufs, cuabi.Device(1))                     # one location for all
    assert [b.last_prefetch_location for b in bufs] == [cuabi.Device(1)] * 3
    prefetch_batch(s, bufs, [cuabi.Host(), cuabi.Device(0), cuabi.Host()])   # one each
    assert [b.last_prefetch_location for b in bufs] == [cuabi.Host(), cuabi.Device(0),
                                                        cuabi.Host()]
    for b in bufs:
        b.fill(7, stream=s)
    s.sync()
    discard_batch(s, bufs[:2])                   # the fake writes 0xdd over discarded pages
    s.sync()
    assert set(bufs[0].to_bytes()) == {0xdd} and set(bufs[1].to_bytes()) == {0xdd}
    assert set(bufs[2].to_bytes()) == {7}
    discard_prefetch_batch(s, bufs[1:], [dev, cuabi.Host()])
    assert bufs[1].last_prefetch_location == dev and bufs[2].last_prefetch_location == cuabi.Host()
    assert set(bufs[2].to_bytes()) == {0xdd}
    gb = dev.create_graph_builder()              # cuda.core: a Stream or a GraphBuilder
    prefetch_batch(gb, bufs, dev)
    gb.close()
    # refusals, as cuda.core's
    with pytest.raises(TypeError, match="ManagedBuffer"):
        prefetch_batch(s, bufs[0], dev)                          # one buffer, not a sequence
    with pytest.raises(ValueError):
        prefetch_batch(s, [], dev)
    with pytest.raises(ValueError, match="2 locations for 3 buffers"):
        prefetch_batch(s, bufs, [dev, dev])
    with pytest.raises(TypeError):
        discard_prefetch_batch(s, bufs, None)
    with pytest.raises(TypeError):
        discard_batch(s, [bufs[0], "not a buffer"])
    plain = cuabi.Buffer(4096, cuabi.MemoryResource.host())
    with pytest.raises(NotImplementedError, match=r"buffers\[1\] is not managed"):
        prefetch_batch(s, [bufs[0], plain], dev)
    plain.close()
    for b in bufs:
        b.close()


# ---- Kernel.from_handle

def test_kernel_from_handle(dev, add):
    code = add.objcode
    k = cuabi.Kernel.from_handle(add.raw, code)              # the CUkernel, with its code
    assert isinstance(k, cuabi.Kernel) and k.name == "add_i64" and k.raw == add.raw
    assert cuabi.Kernel.from_handle(add.raw).name == "add_i64"    # without: the process's code
    assert cuabi.Kernel.from_handle(add.cuabi_handle, code).raw == add.raw   # cuabi's handle too
    # cuda.core's meanings: Kernel.handle is the CUkernel, ObjectCode.handle the CUlibrary
    assert add.handle == add.raw and add.handle != add.cuabi_handle
    lib = code.handle
    assert isinstance(lib, int) and lib not in (0, code.cuabi_handle, add.raw)
    assert code.handle == lib                                 # loaded once
    a = np.zeros(1, np.int64)
    b = cuabi.Buffer(8, dev.memory_resource)
    b.copy_from(a)
    src = np.arange(4, dtype=np.int64)
    s = dev.create_stream()
    dsrc = cuabi.Buffer(32, dev.memory_resource)
    dsrc.copy_from(src)
    cuabi.launch(s, cuabi.LaunchConfig(grid=1, block=1), k, b, dsrc, np.uint64(4))
    s.sync()
    assert np.frombuffer(b.to_bytes(), np.int64)[0] == 6      # the kernel from_handle gave ran
    other = cuabi.Program(SRC.replace("add_i64", "other"), "c++",
                          {"arch": f"sm_{dev.arch}"}).compile("cubin")
    with pytest.raises(ValueError, match="no kernel"):
        cuabi.Kernel.from_handle(add.raw, other)             # not in that code
    with pytest.raises(ValueError):
        cuabi.Kernel.from_handle(12345)
    with pytest.raises(TypeError):
        cuabi.Kernel.from_handle("k")
    with pytest.raises(TypeError):
        cuabi.Kernel.from_handle(add.raw, mod="code")
    for x in (b, dsrc):
        x.close()


def test_object_code_get_module(dev, add):
    code = add.objcode
    m = code.get_module()
    assert isinstance(m, int) and m != 0
    assert code.get_module() == m == code.get_module(dev)       # per context, the same
    other = cuabi.Program(SRC, "c++", {"arch": f"sm_{dev.arch}"}).compile("cubin")
    assert other.get_module() != m                                # per library
    obj = cuabi.ObjectCode.from_object(bytes(code), name="dev.o")
    with pytest.raises(NotImplementedError, match="linked"):
        obj.get_module()


# ---- cuda.core.graph.GraphDebugPrintOptions

def test_graph_debug_print_options(dev, add, tmp_path):
    from cuabi.graph import GraphDebugPrintOptions
    o = GraphDebugPrintOptions()
    assert o._to_flags() == 0 and not o.verbose
    assert GraphDebugPrintOptions(verbose=True)._to_flags() == 1
    assert GraphDebugPrintOptions(kernel_node_params=True, handles=True,
                                  conditional_node_params=True)._to_flags() == (1 << 2) | (1 << 10) | (1 << 15)
    s = dev.create_stream()
    a = cuabi.Buffer(8, dev.memory_resource)
    a.copy_from(np.zeros(1, np.int64))
    gb = s.create_graph_builder()
    gb.begin_building()
    cuabi.launch(gb, cuabi.LaunchConfig(grid=1, block=1), add, a, a, np.uint64(1))
    gb.end_building()
    for opts, flags in ((None, 0), (GraphDebugPrintOptions(), 0),
                        (GraphDebugPrintOptions(verbose=True), 1),
                        (GraphDebugPrintOptions(memcpy_node_params=True, extra_topo_info=True),
                         (1 << 3) | (1 << 14))):
        path = tmp_path / f"g{flags}.dot"
        gb.debug_dot_print(str(path), opts)                  # the fake writes the flags it got
        text = path.read_text()
        assert text.startswith("digraph") and f"// flags {flags:#x}" in text.replace(
            "// flags 0\n", "// flags 0x0\n"), text
    gb.graph.debug_dot_print(tmp_path / "pathlike.dot", GraphDebugPrintOptions(handles=True))
    assert f"// flags {1 << 10:#x}" in (tmp_path / "pathlike.dot").read_text()
    with pytest.raises(TypeError):
        gb.debug_dot_print(str(tmp_path / "x.dot"), {"verbose": True})
    gb.close()
    a.close()


# ---- StridedMemoryView.view / copy_from / copy_to

class _Layout:
    """What cuda.core's _StridedLayout offers view() (duck-typed)."""

    def __init__(self, shape, strides=None, itemsize=None, slice_offset_in_bytes=0):
        self.shape, self.strides, self.itemsize = shape, strides, itemsize
        self.slice_offset_in_bytes = slice_offset_in_bytes


def test_strided_memory_view_view(dev):
    from cuabi.utils import StridedMemoryView
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    v = StridedMemoryView(a, -1)
    same = v.view()
    assert isinstance(same, StridedMemoryView) and same.ptr == v.ptr
    assert same.shape == (4, 6) and same.dtype == np.int32 and same.exporting_obj is a
    f = v.view(dtype=np.float32)                             # same itemsize: reinterpreted
    assert f.dtype == np.float32 and np.from_dlpack(f).view(np.int32).tolist() == a.tolist()
    t = v.view(_Layout((6, 4), (1, 6)))                      # transposed
    assert t.shape == (6, 4) and t.strides == (1, 6)
    assert np.from_dlpack(t).tolist() == a.T.tolist()
    col = v.view(_Layout((4,), (6,), slice_offset_in_bytes=8))   # column 2
    assert np.from_dlpack(col).tolist() == a[:, 2].tolist()
    b16 = v.view(_Layout((48,), None, itemsize=2))           # uint16 by the itemsize
    assert b16.dtype == np.uint16 and b16.shape == (48,)
    with pytest.raises(ValueError):
        v.view(dtype=np.int64)                               # another itemsize needs a layout
    with pytest.raises(ValueError, match="spans"):
        v.view(_Layout((25,), None))                         # past the end
    with pytest.raises(ValueError, match="spans"):
        col.view(_Layout((4,), (6,), slice_offset_in_bytes=4))   # outside the column's span
    with pytest.raises(TypeError):
        v.view((4, 6))
    ro = a.copy()
    ro.flags.writeable = False
    assert StridedMemoryView(ro, -1).view().readonly
    # device memory: the view keeps the buffer's memory
    buf = cuabi.Buffer(96, dev.memory_resource)
    buf.copy_from(a)
    dv = StridedMemoryView.from_buffer(buf, (4, 6), dtype=np.int32)
    dt = dv.view(_Layout((6, 4), (1, 6)))
    assert dt.__dlpack_device__() == dv.__dlpack_device__() and dt.ptr == buf.ptr


def test_strided_memory_view_copies(dev):
    from cuabi.utils import StridedMemoryView
    s = dev.create_stream()
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    buf = cuabi.Buffer(96, dev.memory_resource)
    dv = StridedMemoryView.from_buffer(buf, (4, 6), dtype=np.float32)
    dv.copy_from(StridedMemoryView(a, -1), s)                # host to device, contiguous
    assert np.frombuffer(buf.to_bytes(), np.float32).tolist() == a.ravel().tolist()
    out = np.zeros((4, 6), np.float32)
    dv.copy_to(StridedMemoryView(out, -1), s)                # device to host
    assert out.tolist() == a.tolist()
    # strided host ends (through a contiguous temporary)
    at = np.ascontiguousarray(a.T)                           # (6, 4)
    host_t = StridedMemoryView(at, -1).view(_Layout((4, 6), (1, 4)))   # a again, strided
    buf.fill(0, stream=s)
    s.sync()
    dv.copy_from(host_t, s)
    assert np.frombuffer(buf.to_bytes(), np.float32).reshape(4, 6).tolist() == a.tolist()
    out_t = np.zeros((6, 4), np.float32)
    dv.copy_to(StridedMemoryView(out_t, -1).view(_Layout((4, 6), (1, 4))), s)
    assert out_t.T.tolist() == a.tolist()
    # strided device ends (a device temporary, cuMemcpy3DPeer)
    dview_t = dv.view(_Layout((6, 4), (1, 6)))               # a.T on the device
    out6 = np.zeros((6, 4), np.float32)
    dview_t.copy_to(StridedMemoryView(out6, -1), s)
    assert out6.tolist() == a.T.tolist()
    dview_t.copy_from(StridedMemoryView(np.ascontiguousarray(a.T) + 100, -1), s)
    assert np.frombuffer(buf.to_bytes(), np.float32).reshape(4, 6).tolist() == (a + 100).tolist()
    dv.copy_from(StridedMemoryView(a, -1), s)
    bt = cuabi.Buffer(96, dev.memory_resource)              # device to device, transposing
    StridedMemoryView.from_buffer(bt, (6, 4), dtype=np.float32).copy_from(dview_t, s)
    assert np.frombuffer(bt.to_bytes(), np.float32).reshape(6, 4).tolist() == a.T.tolist()
    bt.close()
    # device to device, and host to host
    buf2 = cuabi.Buffer(96, dev.memory_resource)
    dv2 = StridedMemoryView.from_buffer(buf2, (4, 6), dtype=np.float32)
    dv2.copy_from(dv, s, blocking=True)
    assert buf2.to_bytes() == buf.to_bytes()
    h = np.zeros((4, 6), np.float32)
    StridedMemoryView(h, -1).copy_from(StridedMemoryView(a, -1), None)
    assert h.tolist() == a.tolist()
    # refusals
    with pytest.raises(ValueError, match="shapes"):
        dv.copy_from(StridedMemoryView(np.zeros(24, np.float32), -1), s)
    with pytest.raises(ValueError, match="dtypes"):
        dv.copy_from(StridedMemoryView(np.zeros((4, 6), np.int32), -1), s)
    ro = a.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dv.copy_to(StridedMemoryView(ro, -1), s)
    with pytest.raises(TypeError):
        dv.copy_from(a, s)
    with pytest.raises(TypeError):
        dv.copy_from(StridedMemoryView(a, -1), s, allocator="pool")
    for b in (buf, buf2):
        b.close()
