"""The Python graph layer against the C tests' fake driver (no GPU): run by
test_graph.py in a process whose CUABI_DRIVER_PATH names
tests/fixtures/.libs/fake_cuda_graph.so. Kernel nodes named add_i64 and count_loop
run on the host there: add_i64(out, in, n) adds in[0..n) to out[0];
count_loop(handle, counter, limit) counts and sets the handle while
counter < limit. Fake "device" memory is host memory."""
import contextlib
import gc
import sys

import numpy as np
import pytest

import cuabi

SRC = ('extern "C" __global__ void add_i64(long long *o, const long long *i, '
       'unsigned long long n) {}\n'
       'extern "C" __global__ void count_loop(unsigned long long h, long long *c, '
       'unsigned long long n) {}\n')


@pytest.fixture(scope="module")
def code():
    assert cuabi.device_count() > 0, "the fake driver is not loaded"
    return cuabi.Program(SRC).compile(arch="sm_90")


@pytest.fixture
def stream():
    return cuabi.Stream()


def ints(values, stream):
    return cuabi.Buffer.from_host(np.asarray(values, np.int64), stream=None)


def read(buf):
    return np.frombuffer(buf.to_bytes(), np.int64)


CFG = cuabi.LaunchConfig(grid=1, block=32)
N = np.uint64


def test_capture_records_and_replays(code, stream):
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints(range(1, 11), stream)
    with stream.capture() as g:
        assert stream.capture_status == "active"
        with pytest.raises(RuntimeError, match="capture ends"):
            len(g)
        out.fill(0, width=8 // 8, stream=stream)
        cuabi.launch(stream, CFG, k, out, inp, N(10))
        cuabi.launch(stream, CFG, k, out, inp, N(10))
    assert stream.capture_status == "none"
    assert [n.kind for n in g.node_list] == ["memset", "kernel", "kernel"]
    assert read(out)[0] == 0          # recorded, not run
    exe = g.instantiate()
    for _ in range(3):
        exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 110
    assert exe.device == cuabi.Device(0)
    assert "digraph" in g.to_dot(verbose=True)


def test_capture_keeps_python_arguments(code, stream):
    """Python packs pass Buffers by address, which C cannot keep: the graph
    keeps the objects, so a buffer dropped after the capture stays valid."""
    import weakref
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([4, 5], stream)
    ref = weakref.ref(inp)
    with stream.capture() as g:
        cuabi.launch(stream, CFG, k, out, inp, N(2))
    del inp
    gc.collect()
    assert ref() is not None
    exe = g.instantiate()
    del g
    gc.collect()
    assert ref() is not None
    exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 9
    from cuabi import _launch
    assert _launch._captures == []


@contextlib.contextmanager
def recording(stream, how):
    """A capture of `stream` begun with stream.capture() or as cuda.core's
    GraphBuilder: yields (what to launch on, a list that gets the graph)."""
    graph = []
    if how == "capture":
        with stream.capture() as g:
            yield stream, graph
        graph.append(g)
    else:
        gb = stream.create_graph_builder().begin_building()
        yield gb, graph
        graph.append(gb.end_building().graph)


CAPTURES = pytest.mark.parametrize("how", ["capture", "builder"])


def _packs(kernel):
    """(the compiled launch's packs, launch_py's free packs) of a kernel."""
    cache = kernel._launch_cache
    return cache.get("lanes", []), cache.get("free", [])


@CAPTURES
def test_captured_launch_takes_the_plain_launch_path(code, stream, how):
    """A launch inside a capture packs where a launch outside does: with the
    compiled backend, one of the compiled launch's packs (not launch_py's),
    and the graph still keeps the arguments passed by address."""
    import weakref
    from cuabi import _lib
    k = code.get_kernel("add_i64")
    out = ints([0], stream)
    for _ in range(2):
        cuabi.launch(stream, CFG, k, out, ints([1], stream), N(1))
    lanes, free = _packs(k)
    for pl in lanes + free:
        pl.blob[:] = b"\xee" * len(pl.blob)
    inp = ints([4, 5], stream)
    ref = weakref.ref(inp)
    with recording(stream, how) as (on, graph):
        cuabi.launch(on, CFG, k, out, inp, N(2))
    g = graph[0]
    lanes, free = _packs(k)
    packed = [pl for pl in lanes + free if pl.blob.raw != b"\xee" * len(pl.blob)]
    assert len(packed) == 1
    assert (packed[0] in lanes) == (_lib.fast is not None), cuabi.backend
    assert packed[0].blob.raw[:8] == out.ptr.to_bytes(8, "little")
    del inp
    gc.collect()
    assert ref() is not None                  # the graph keeps it
    g.instantiate().launch(stream)
    stream.sync()
    assert read(out)[0] == 2 + 9
    del g, graph, on                          # a GraphBuilder keeps its graph
    gc.collect()
    assert ref() is None


@pytest.fixture
def builds(monkeypatch):
    """Counts what a launch builds: packers generated per tuple of argument
    types (Packer._build), kernel descriptions read from the library
    (ArgPack.for_kernel) and packs (_PlainLaunch)."""
    from cuabi import _argpack, _launch
    n = {"packer": 0, "description": 0, "pack": 0}

    def counting(owner, name, key):
        real = getattr(owner, name)
        real = getattr(real, "__func__", real)

        def f(*a, **kw):
            n[key] += 1
            return real(*a, **kw)
        monkeypatch.setattr(owner, name, classmethod(f) if key == "description" else f)
    counting(_argpack.Packer, "_build", "packer")
    counting(_argpack.ArgPack, "for_kernel", "description")
    counting(_launch._PlainLaunch, "__init__", "pack")
    return n


@CAPTURES
def test_a_captured_launch_builds_nothing_for_a_launched_kernel(code, stream, builds, how):
    """A kernel launched once, then in a capture: the capture reuses its
    pack and packer (it used to take launch_py, whose own pack and Python
    packer the compiled backend's plain launch had not made)."""
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([1, 2], stream)
    cuabi.launch(stream, CFG, k, out, inp, N(2))
    before = dict(builds)
    assert before["description"] == 1
    with recording(stream, how) as (on, graph):
        for _ in range(3):
            cuabi.launch(on, CFG, k, out, inp, N(2))
    assert builds == before
    assert len(graph[0]) == 3


@CAPTURES
def test_first_launch_of_a_kernel_in_a_capture(code, stream, builds, how):
    """The kernel's description is read once; with the compiled backend no
    Python packer is generated for arguments the compiled packer packs."""
    from cuabi import _lib
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([1, 2], stream)
    with recording(stream, how) as (on, graph):
        cuabi.launch(on, CFG, k, out, inp, N(2))
    assert builds["description"] == 1
    assert builds["packer"] == (0 if _lib.fast is not None else 1), cuabi.backend
    graph[0].instantiate().launch(stream)
    stream.sync()
    assert read(out)[0] == 3


@CAPTURES
def test_kernel_first_launched_inside_a_capture_then_outside(code, stream, how):
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([1, 2, 3], stream)
    with recording(stream, how) as (on, graph):
        cuabi.launch(on, CFG, k, out, inp, N(3))
    g = graph[0]
    assert read(out)[0] == 0                  # recorded, not run
    cuabi.launch(stream, CFG, k, out, inp, N(3))
    cuabi.launch(stream, CFG, k, out, inp.ptr + 8, 2)     # other argument types
    stream.sync()
    assert read(out)[0] == 6 + 5
    exe = g.instantiate()
    exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 11 + 6
    with recording(stream, how) as (on, graph):     # and in a capture again
        cuabi.launch(on, CFG, k, out, inp, N(1))
    graph[0].instantiate().launch(stream)
    stream.sync()
    assert read(out)[0] == 17 + 1
    with pytest.raises(TypeError, match="takes 3 arguments"):
        with stream.capture():
            cuabi.launch(stream, CFG, k, out, inp)
    assert stream.capture_status == "none"


def test_capture_keeps_host_memory_of_copies(stream):
    buf = cuabi.Buffer(16, stream=stream)
    src = np.array([7, 8], np.int64)
    dst = np.zeros(2, np.int64)
    with stream.capture() as g:
        buf.copy_from(src, stream=stream)
        buf.copy_to(dst, stream=stream)
    assert [n.kind for n in g.node_list] == ["memcpy", "memcpy"]
    del src
    gc.collect()
    g.instantiate().launch(stream)
    stream.sync()
    assert list(dst) == [7, 8]


def test_capture_and_explicit_agree(code, stream):
    k = code.get_kernel("add_i64")
    inp = ints(range(64), stream)
    results = []
    for way in ("capture", "explicit"):
        out = ints([0], stream)
        if way == "capture":
            with stream.capture("thread_local") as g:
                for b in range(8):
                    cuabi.launch(stream, CFG, k, out, inp.ptr + 64 * b, N(8))
        else:
            g, prev = cuabi.Graph(), None
            for b in range(8):
                prev = g.add_kernel(k, CFG, out, inp.ptr + 64 * b, N(8), depends_on=prev)
        g.instantiate().launch(stream)
        stream.sync()
        results.append(read(out)[0])
    assert results == [sum(range(64))] * 2


def test_add_kernel_beside_launches_on_another_thread(code, stream):
    """Regression: add_kernel packed into the kernel's first pack, which
    launch_py on another thread takes too; the C calls let that thread run,
    and nodes were made with its arguments."""
    import threading
    from cuabi._launch import launch_py
    k = code.get_kernel("add_i64")
    other_out, other_in = ints([0], stream), ints([1000] * 4, stream)
    out, inp = ints([0], stream), ints([1, 2, 3], stream)
    stop = threading.Event()

    def launches():
        s = cuabi.Stream()
        while not stop.is_set():
            launch_py(s, CFG, k, other_out, other_in, N(4))
        s.sync()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)     # switch threads as often as possible
    t = threading.Thread(target=launches)
    t.start()
    try:
        g = cuabi.Graph()
        for _ in range(300):
            g.add_kernel(k, CFG, out, inp, N(3))
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(interval)
    g.instantiate().launch(stream)
    stream.sync()
    assert read(out)[0] == 300 * 6


def test_explicit_nodes_edges_and_kinds(code, stream):
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([5, 6], stream)
    host_src = np.array([7, 7], np.int64)
    host_dst = np.zeros(1, np.int64)
    calls = []
    g = cuabi.Graph()
    up = g.add_memcpy(inp, host_src)
    z = g.add_memset(out, 0)
    kn = g.add_kernel(k, CFG, out, inp, N(2), depends_on=[up, z])
    down = g.add_memcpy(host_dst, out, depends_on=kn)
    h = g.add_host(calls.append, "ran", depends_on=down)
    child = cuabi.Graph()
    child.add_host(calls.append, "child")
    ch = g.add_child(child, depends_on=h)
    e = g.add_empty(depends_on=[ch])
    assert len(g) == 7
    assert [n.kind for n in (up, z, kn, down, h, ch, e)] == [
        "memcpy", "memset", "kernel", "memcpy", "host", "graph", "empty"]
    assert {n.index for n in kn.dependencies} == {up.index, z.index}
    assert [n.index for n in kn.dependents] == [down.index]
    assert g.node(2) == kn
    with pytest.raises(cuabi.InvalidArgumentError, match="cycle"):
        g.add_dependency(e, up)
    with pytest.raises(ValueError, match="already exists"):
        g.add_dependency(up, kn)
    g.add_dependency(up, e)
    g.remove_dependency(up, e)
    g.instantiate().launch(stream)
    stream.sync()
    assert host_dst[0] == 14
    assert calls == ["ran", "child"]


def test_host_copy_nodes_stay_inside_the_host_object(stream):
    """Issue 29: a copy node reads or writes its host object at every replay;
    an offset or size past its end was passed on (a read or write past a
    bytes object), and negative ones wrapped."""
    out = ints([0] * 8, stream)                         # room for every case below
    src, dst = np.array([1, 2], np.int64), np.zeros(2, np.int64)
    g = cuabi.Graph()
    with pytest.raises(ValueError, match="add_memcpy: size"):
        g.add_memcpy(out, src, 24)                      # 16 bytes there
    with pytest.raises(ValueError, match="add_memcpy: size"):
        g.add_memcpy(out, src, 16, src_offset=8)
    with pytest.raises(ValueError, match="src_offset"):
        g.add_memcpy(out, src, src_offset=24)
    with pytest.raises(ValueError, match="add_memcpy: size"):
        g.add_memcpy(dst, out, 32)
    with pytest.raises(ValueError, match="dst_offset is -8"):
        g.add_memcpy(dst, out, 8, dst_offset=-8)
    with pytest.raises(TypeError, match="size must be an integer"):
        g.add_memcpy(out, src, 8.0)
    with pytest.raises(ValueError, match="add_memset: count is -1"):
        g.add_memset(out, 0, count=-1)
    assert len(g) == 0
    up = g.add_memcpy(out, src, 8, src_offset=8)        # the last element: fine
    g.add_memcpy(dst, out, 8, dst_offset=8, depends_on=up)
    g.instantiate().launch(stream)
    stream.sync()
    assert list(dst) == [0, 2]


def test_host_node_exception_is_reported_not_raised(stream):
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        g = cuabi.Graph()
        g.add_host(lambda: 1 / 0)
        g.instantiate().launch(stream)
        stream.sync()
    finally:
        sys.unraisablehook = old
    assert len(seen) == 1 and seen[0].exc_type is ZeroDivisionError


def test_graph_outlives_the_objects_that_built_it(stream):
    def build():
        prog = cuabi.Program(SRC)
        k = prog.compile(arch="sm_90").get_kernel("add_i64")
        out, inp = ints([0], stream), ints([1, 2, 3], stream)
        g = cuabi.Graph()
        g.add_kernel(k, CFG, out, inp, N(3))
        return g.instantiate(), out.ptr

    exe, ptr = build()
    gc.collect()
    exe.launch(stream)
    exe.launch(stream)
    stream.sync()
    assert np.frombuffer(cuabi.Buffer.wrap(ptr, 8).to_bytes(), np.int64)[0] == 12


def test_update_whole_and_per_kernel(code, stream):
    k = code.get_kernel("add_i64")
    out, a, b = ints([0], stream), ints([1, 1], stream), ints([10, 10], stream)

    def graph(src, extra=False):
        g = cuabi.Graph()
        z = g.add_memset(out, 0)
        kn = g.add_kernel(k, CFG, out, src, N(2), depends_on=z)
        if extra:
            g.add_empty(depends_on=kn)
        return g, kn

    g1, k1 = graph(a)
    exe = g1.instantiate()
    exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 2
    exe.update(graph(b)[0])
    exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 20
    with pytest.raises(cuabi.GraphUpdateError, match="topology") as e:
        exe.update(graph(a, extra=True)[0])
    assert e.value.update_result == "topology_changed"
    assert e.value.node_index == 2 and e.value.node_kind == "empty"
    exe.update_kernel(k1, out, a, N(1))
    exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 1
    exe.update_kernel(k1, grid=4)          # same arguments, another grid
    exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 1
    with pytest.raises(TypeError, match="not a kernel node"):
        exe.update_kernel(g1.node(0), out)


def test_conditional_while_loop(code, stream):
    k = code.get_kernel("count_loop")
    counter = ints([0], stream)
    g = cuabi.Graph()
    h = g.conditional_handle(default=1)
    z = g.add_memset(counter, 0)
    loop, body = g.add_while(h, depends_on=z)
    assert loop.kind == "conditional"
    body.add_kernel(k, CFG, h, counter, N(9))
    del body
    gc.collect()
    exe = g.instantiate()
    for _ in range(2):
        exe.launch(stream)
        stream.sync()
        assert read(counter)[0] == 9
    with pytest.raises(cuabi.InvalidArgumentError, match="body of conditional node"):
        loop.bodies[0].add_host(print)


def test_graph_builder_spellings(code, stream):
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([2, 3], stream)
    gb = stream.create_graph_builder().begin_building("relaxed")
    assert gb.is_building
    assert cuabi.Stream.wrap(gb) is stream    # its own stream, not a new wrapper
    cuabi.launch(gb, CFG, k, out, inp, N(2))
    gb.end_building()
    graph = gb.complete(cuabi.CompleteOptions(upload_stream=stream))
    graph.upload(stream)
    graph.launch(stream)
    stream.sync()
    assert read(out)[0] == 5
    graph.update(gb)
    gb.close()


def test_capture_failures(code, stream):
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([1], stream)
    with pytest.raises(ZeroDivisionError):
        with stream.capture() as g:
            cuabi.launch(stream, CFG, k, out, inp, N(1))
            1 / 0
    assert stream.capture_status == "none"
    assert g.closed
    with pytest.raises(cuabi.StreamCaptureError, match="captured"):
        with stream.capture():
            stream.sync()
    assert stream.capture_status == "none"
    with pytest.raises(cuabi.InvalidArgumentError, match="legacy default stream"):
        with cuabi.Device(0).default_stream.capture():
            pass
    with pytest.raises(ValueError, match="capture mode"):
        stream.capture("sometimes")
    cuabi.launch(stream, CFG, k, out, inp, N(1))
    stream.sync()
    assert read(out)[0] == 1


def test_debug_dot_file(tmp_path):
    g = cuabi.Graph()
    g.add_empty()
    path = tmp_path / "g.dot"
    g.debug_dot(path)
    assert path.read_text().startswith("digraph")


# ---- closing objects under calls in flight (issue 29 item 7)

def _live(getter, h) -> bool:
    """Whether the raw handle h still names a live object."""
    import ctypes as C
    from cuabi import _lib
    try:
        _lib.call(getter, C.c_void_p(h))
        return True
    except cuabi.InvalidHandleError:
        return False


def test_objects_closed_by_a_host_node_of_their_own_launch():
    # The fake driver runs a host node inside cuGraphLaunch: closing the
    # executable and the stream there must leave their release to the
    # launch in flight (before: both were destroyed under it).
    s = cuabi.Stream()
    g = cuabi.Graph()
    seen = []

    def close_them():
        exe.close()
        s.close()
        seen.append((exe.closed, s.closed, _live("cuabi_graph_exec_raw", he),
                     _live("cuabi_stream_raw", hs)))
    g.add_host(close_them)
    exe = g.instantiate()
    he, hs = exe.cuabi_handle, s.cuabi_handle
    exe.launch(s)
    assert seen == [(True, True, True, True)]
    assert not _live("cuabi_graph_exec_raw", he) and not _live("cuabi_stream_raw", hs)
    with pytest.raises(cuabi.ClosedHandleError):
        exe.launch(cuabi.Stream())


def test_free_async_with_a_closed_stream_still_frees_the_buffer():
    s = cuabi.Stream()
    s.close()
    buf = cuabi.Buffer(64, stream=None)
    h = buf.cuabi_handle
    with pytest.raises(cuabi.ClosedHandleError):
        buf.free_async(s)
    assert buf.closed and not _live("cuabi_buffer_size", h)
    with pytest.raises(cuabi.ClosedHandleError):
        buf.free_async(cuabi.Stream())


# ---- the garbage collector inside a capture (issue 29 item 9)
#
# The fake driver refuses the "potentially unsafe" release calls while a
# GLOBAL capture is in progress (and invalidates it) unless the thread is in
# RELAXED mode, and a pool free on the legacy stream while a blocking stream
# is captured: objects of every kind in reference cycles, collected by
# gc.collect() inside a capture, must leave it valid.

class _Cycle:
    """Holds objects in a reference cycle: only the cyclic collector frees them."""

    def __init__(self, things):
        self.me, self.things = self, things


def _garbage_of_every_kind(code):
    dev1 = cuabi.Device(1)                  # its last reference: the primary context
    s = dev1.create_stream(non_blocking=False)
    host = cuabi.MemoryResource.host()
    obj = cuabi.ObjectCode.from_bytes(bytes(code), "cubin")
    k = obj.get_kernel("add_i64")
    g = cuabi.Graph()
    g.add_empty()
    things = [dev1, s, dev1.create_event(), k, obj, g, g.instantiate(),
              cuabi.MemoryResource.pool(dev1),
              cuabi.Buffer(64, cuabi.MemoryResource.pinned(dev1)),
              cuabi.Buffer(64, cuabi.MemoryResource.managed(dev1)),
              cuabi.Buffer(64),             # the default pool, no stream: the legacy stream
              cuabi.Buffer(64).view("int64"),
              cuabi.from_dlpack(np.zeros(4)), host, cuabi.Buffer(16, host),
              cuabi.prepare(k, CFG, s, 0, 0, N(1)), cuabi.ArgPack("ptr, i32")]
    _Cycle(things)


@pytest.mark.parametrize("how", ["capture", "graph_builder"])
def test_gc_inside_a_capture_keeps_it_valid(code, stream, how):
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([1], stream)
    gc.collect()
    frozen = gc.isenabled()
    gc.disable()                            # collections happen where this test says
    try:
        for i in range(1000 if how == "capture" else 200):
            _garbage_of_every_kind(code)
            # The young generation (where the collector runs most), and
            # every generation now and then.
            gen = 2 if i % 100 == 0 else 0
            if how == "capture":
                with stream.capture() as g:
                    cuabi.launch(stream, CFG, k, out, inp, N(1))
                    assert gc.collect(gen) > 0
                    cuabi.launch(stream, CFG, k, out, inp, N(1))
            else:
                b = stream.create_graph_builder().begin_building()
                cuabi.launch(b, CFG, k, out, inp, N(1))
                assert gc.collect(gen) > 0
                cuabi.launch(b, CFG, k, out, inp, N(1))
                g = b.end_building().graph
            assert len(g) == 2
            g.close()
    finally:
        if frozen:
            gc.enable()
    with stream.capture() as g:
        cuabi.launch(stream, CFG, k, out, inp, N(1))
    exe = g.instantiate()
    exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 1


def test_finalizers_of_another_thread_inside_a_capture(code, stream):
    # The capture is GLOBAL on this thread; another thread (GLOBAL mode too)
    # drops the last references: its releases must not invalidate it.
    import threading
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([1], stream)
    for _ in range(100):
        box = []
        t = threading.Thread(target=lambda: box.append(_garbage_of_every_kind(code)))
        with stream.capture() as g:
            cuabi.launch(stream, CFG, k, out, inp, N(1))
            t.start()
            t.join()
            c = threading.Thread(target=gc.collect, args=(0,))
            c.start()
            gc.collect(0)
            c.join()
        assert len(g) == 1
        g.close()


# ---- issue 24: what making a graph no longer does up front (each made lazy
# or moved), and that the results are the same.

def test_making_graphs_builds_no_host_callback_and_no_update_names():
    """Importing cuabi._graph and capturing, instantiating and launching a
    graph make neither the host nodes' ctypes callback nor the table of
    update-result names (both cost the first capture ~270 us); a host node
    and a failed update make them when needed, and work."""
    import subprocess
    import textwrap
    prog = textwrap.dedent(f"""
        import numpy as np
        import cuabi
        from cuabi import _graph
        SRC = {SRC!r}
        k = cuabi.Program(SRC).compile(arch="sm_90").get_kernel("add_i64")
        s = cuabi.Stream()
        out = cuabi.Buffer.from_host(np.zeros(1, np.int64), stream=None)
        inp = cuabi.Buffer.from_host(np.arange(1, 4, dtype=np.int64), stream=None)
        cfg = cuabi.LaunchConfig(grid=1, block=32)
        with s.capture() as g:
            cuabi.launch(s, cfg, k, out, inp, np.uint64(3))
        e = g.instantiate()
        e.launch(s)
        s.sync()
        assert np.frombuffer(out.to_bytes(), np.int64)[0] == 6
        assert _graph._HOST_FN is None and not _graph._UPDATE_RESULTS
        calls = []
        h = cuabi.Graph()
        h.add_host(calls.append, "ran")
        h.instantiate().launch(s)
        s.sync()
        assert calls == ["ran"] and _graph._HOST_FN is not None
        try:
            e.update(h)
        except cuabi.GraphUpdateError as err:
            assert isinstance(err.update_result, str), err.update_result
        else:
            raise AssertionError("an update across topologies succeeded")
        assert _graph._UPDATE_RESULTS
        print("ok")
    """)
    import os
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cuabi.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pkg] + sys.path))
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


@CAPTURES
def test_captured_graph_kernel_nodes_go_to_the_capture_streams_device(code, stream, how):
    """The device of a captured graph's explicit kernel nodes is read when a
    node is added (it was read at the capture's start): still the capture
    stream's, also once that stream is closed."""
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([2, 3], stream)
    s = cuabi.Stream()
    with recording(s, how) as (on, graph):
        cuabi.launch(on, CFG, k, out, inp, N(2))
    g = graph[0]
    assert g._kernel_device() == s.device == cuabi.Device(0)
    s.close()
    assert g._kernel_device() == cuabi.Device(0)
    g.add_kernel(k, CFG, out, inp, N(1), depends_on=g.node(0))
    exe = g.instantiate()
    exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 7


def test_captured_plain_numbers_are_not_kept(code, stream):
    """A captured launch keeps its arguments for the graph (arrays passed by
    address); one whose arguments are all Python numbers keeps nothing in
    the compiled backend (its values are in the graph), and both backends
    run the same graph."""
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([4, 5], stream)
    with stream.capture() as g:
        cuabi.launch(stream, CFG, k, out.ptr, inp.ptr, 2)
        cuabi.launch(stream, CFG, k, out, inp, N(2))
    kept = [t for t in g._keep if isinstance(t, tuple)]
    if cuabi.backend == "compiled":
        assert kept == [(out, inp, N(2))]
    else:
        assert (out, inp, N(2)) in kept
    exe = g.instantiate()
    exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 18


def test_instantiate_with_defaults_and_with_options_agree(code, stream):
    """instantiate() with no options passes none to C (its defaults); with
    options, the struct; both make working executables, and a closed or
    still capturing graph is refused the same way."""
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([1, 2], stream)
    with stream.capture() as g:
        cuabi.launch(stream, CFG, k, out, inp, N(2))
    for exe in (g.instantiate(), g.instantiate(cuabi.CompleteOptions()),
                g.instantiate(auto_free_on_launch=True), g.complete()):
        exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 12
    with stream.capture() as pending:
        with pytest.raises(RuntimeError, match="capture ends"):
            pending.instantiate()
    g.close()
    with pytest.raises(cuabi.ClosedHandleError, match="cuabi_graph_instantiate: Graph is closed"):
        g.instantiate()
    s2 = cuabi.Stream()
    s2.close()
    with pytest.raises(cuabi.ClosedHandleError,
                       match="cuabi_graph_capture_begin: Stream is closed"):
        with s2.capture():
            pass
    gb = cuabi.GraphBuilder(s2)
    with pytest.raises(cuabi.ClosedHandleError,
                       match="cuabi_graph_capture_begin_to_graph: Stream is closed"):
        gb.begin_building()


def test_the_compiled_graph_calls_check_their_arguments():
    """cuabi._fast's graph calls (the compiled backend's capture, end, new
    graph and instantiate) refuse what is not a handle object and a bad mode,
    and report a failure as the ctypes path does."""
    from cuabi._lib import fast
    if fast is None or not hasattr(fast, "graph_capture_begin"):
        pytest.skip("the ctypes backend")
    with pytest.raises(TypeError, match="stream must be a cuabi handle object"):
        fast.graph_capture_begin(object(), 0)
    with pytest.raises(TypeError, match="graph must be a cuabi handle object"):
        fast.graph_instantiate(5)
    s = cuabi.Stream()
    with pytest.raises(ValueError, match="7 is not a capture mode"):
        fast.graph_capture_begin(s, 7)
    with pytest.raises(cuabi.CuabiError, match="not being captured"):
        fast.graph_capture_end(s)
    assert s.capture_status == "none"
    h = fast.graph_create()
    g = cuabi.Graph._adopt_new(h)
    fast.graph_capture_begin_to_graph(s, g, 2)
    assert s.capture_status == "active"
    with pytest.raises(cuabi.CuabiError, match="already being captured"):
        fast.graph_capture_begin(s, 0)
    end = fast.graph_capture_end(s)
    cuabi.Graph._adopt_new(end).close()      # the reference capture_end handed out
    exe = cuabi.GraphExec._wrap(fast.graph_instantiate(g))
    exe.close()
    g.close()
    s.close()


def test_the_compiled_capture_makes_what_the_python_one_made(code, stream):
    """`with stream.capture()` through cuabi._fast.Capture: a Graph
    placeholder with a state of its own, whose keep list is among the
    captures in progress while the block runs and gets the launches' Python
    arguments; filled at the end with the state in the table of graph
    states; released by close() and when collected; an object that may be
    entered again; the Python one's errors."""
    import ctypes as C
    import weakref
    from cuabi import _callbacks, _graph
    from cuabi._lib import fast, raw
    if fast is None or not hasattr(fast, "Capture"):
        pytest.skip("the ctypes backend")
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([3], stream)
    cm = stream.capture("relaxed")
    assert type(cm) is fast.Capture and cm.graph is None
    before = list(_callbacks.captures)
    with cm as g:
        assert type(g) is cuabi.Graph and cm.graph is g
        # The C code makes what Graph._placeholder and _GraphState() make: the
        # same attributes (a field added in Python must be added there too).
        py = cuabi.Graph._placeholder(stream)
        assert set(vars(g)) == set(vars(py))
        assert all(hasattr(g._state, a) for a in _graph._GraphState.__slots__
                   if a != "__weakref__")
        assert _callbacks.captures == before + [g._keep]
        assert g._keep is g._state.keep and g._keys is g._state.keys
        assert g._kernels is g._state.kernels and g._state.meta == {}
        assert g._device_arg is stream and g._pending and g.closed
        with pytest.raises(RuntimeError, match="capture ends"):
            g.cuabi_handle
        cuabi.launch(stream, CFG, k, out, inp, N(1))
        assert g._keep == [(out, inp, N(1))]       # the launch's arguments, kept
    assert _callbacks.captures == before
    assert not g._pending and not g.closed
    assert _graph._STATES.get(g.cuabi_handle) is g._state
    g.instantiate().launch(stream)
    stream.sync()
    assert read(out)[0] == 3
    retain = raw("cuabi_graph_retain")             # refuses a released handle
    h = g.cuabi_handle
    g.close()                                       # released now
    assert retain(C.c_void_p(h)) != 0
    with cm as g2:                                  # the same object again
        pass
    h2 = g2.cuabi_handle
    assert cm.graph is g2 and len(g2) == 0
    state = weakref.ref(g2._state)
    del g2
    cm = None
    gc.collect()
    assert state() is None and _graph._STATES.get(h2) is None
    assert retain(C.c_void_p(h2)) != 0              # released when collected
    # an exception in the block: the capture ends, no graph, the error stays
    with pytest.raises(KeyError):
        with stream.capture() as g3:
            raise KeyError("mine")
    assert g3.closed and stream.capture_status == "none"
    assert _callbacks.captures == before
    with pytest.raises(ValueError, match="capture mode must be one of"):
        stream.capture("sometimes")
    with pytest.raises(ValueError, match="7 is not a capture mode"):
        stream.capture(7)
    with pytest.raises(RuntimeError, match="not entered"):
        stream.capture().__exit__(None, None, None)
    with pytest.raises(TypeError, match="stream must be a cuabi handle object"):
        with fast.Capture(object()):
            pass
    with stream.capture():
        with pytest.raises(cuabi.CuabiError, match="already being captured"):
            with stream.capture():
                pass
    assert stream.capture_status == "none"


def test_the_table_of_graph_states_forgets_the_dead():
    """cuabi._graph's table of graph states holds them weakly and sweeps the
    dead entries as it grows: making many graphs leaves it small."""
    from cuabi import _graph
    s = cuabi.Stream()
    for _ in range(300):
        with s.capture() as g:
            pass
        g.close()
        del g
    gc.collect()
    with s.capture() as g:
        pass
    assert len(_graph._STATES._d) < 140
    assert _graph._STATES.get(g.cuabi_handle) is g._state
    assert len(_graph._STATES) >= 1


def test_the_compiled_instantiate_makes_what_wrap_made(code, stream):
    """Graph.instantiate() with the default options through
    cuabi._fast.graph_exec_new: a GraphExec with the attributes
    GraphExec._wrap gives and the graph kept, released by close() and when
    collected; launches, updates and foreign streams make what they need."""
    import ctypes as C
    import gc
    from cuabi import _graph
    from cuabi._lib import fast, raw
    if fast is None or not hasattr(fast, "graph_exec_new"):
        pytest.skip("the ctypes backend")
    k = code.get_kernel("add_i64")
    out, inp = ints([0], stream), ints([5], stream)
    with stream.capture() as g:
        cuabi.launch(stream, CFG, k, out, inp, N(1))
    e = g.instantiate()
    py = _graph.GraphExec._wrap(fast.graph_instantiate(g))
    py._graphs = [g]
    # The same attributes (one added to _wrap must be added to the C code too).
    assert set(vars(e)) == set(vars(py)) == {"_graphs"} and e._graphs == [g]
    assert type(e) is _graph.GraphExec and e.graph is g and not e.closed
    py.close()
    e.launch(stream)                      # makes its pointer
    e.launch(stream)
    stream.sync()
    assert read(out)[0] == 10 and e._p is not None     # add_i64, twice
    raw_of = raw("cuabi_graph_exec_raw")            # refuses a released handle
    cu = C.c_size_t()
    h = e.cuabi_handle
    assert raw_of(C.byref(cu), C.c_void_p(h)) == 0
    e.close()
    assert e.closed and raw_of(C.byref(cu), C.c_void_p(h)) != 0
    e2 = g.instantiate()
    h2 = e2.cuabi_handle
    del e2
    gc.collect()
    assert raw_of(C.byref(cu), C.c_void_p(h2)) != 0    # released when collected
