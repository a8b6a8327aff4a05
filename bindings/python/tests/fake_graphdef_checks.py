"""cuda.core 1.2's explicit-graph API on cuabi (issue 24) against the C tests'
fake driver (no GPU): run by test_cuda_core_api.py in a process whose
CUABI_DRIVER_PATH names tests/fixtures/.libs/fake_cuda_graph.so. The kernel
add_i64(out, in, n) adds in[0..n) to out[0] on the host there; fake device
memory is host memory. Each check is written from cuda.core's documentation
(graph/*.pyi of cuda.core 1.2.2): what a builder returns, what a node knows,
edges as sets, destroy, conditionals and their bodies, GraphBuilder's split
and join."""
import ctypes
import gc

import numpy as np
import pytest

import cuabi
from cuabi.graph import (AllocNode, ChildGraphNode, ConditionalNode, EmptyNode, EventRecordNode,
                         EventWaitNode, FreeNode, GraphBuilder, GraphCondition, GraphDefinition,
                         GraphNode, HostCallbackNode, IfElseNode, IfNode, KernelNode, MemcpyNode,
                         MemsetNode, SwitchNode, WhileNode)

SRC = ('extern "C" __global__ void add_i64(long long *o, const long long *i, '
       'unsigned long long n) {}\n')
CFG = cuabi.LaunchConfig(grid=1, block=32)


@pytest.fixture(scope="module")
def kern():
    assert cuabi.device_count() > 0, "the fake driver is not loaded"
    return cuabi.Program(SRC).compile(arch="sm_90").get_kernel("add_i64")


@pytest.fixture
def stream():
    return cuabi.Stream()


def ints(values):
    return cuabi.Buffer.from_host(np.asarray(values, np.int64), stream=None)


def read(buf):
    return np.frombuffer(buf.to_bytes(), np.int64)


def run(g, stream):
    g.instantiate().launch(stream)
    stream.sync()


# ---- GraphDefinition: builders, nodes, edges

def test_builders_return_cuda_cores_node_classes(kern, stream):
    g = GraphDefinition()
    assert g.is_valid and g.handle == g.raw != 0
    out, inp = ints([5]), ints(range(1, 5))
    m = g.memset(out, 0, 8)
    k = m.launch(CFG, kern, out, inp, np.uint64(4))
    e = g.empty()
    j = g.join(k, e)
    ev = cuabi.Event()
    r = j.record(ev)
    w = r.wait(ev)
    assert [type(n) for n in (m, k, e, j, r, w)] == [MemsetNode, KernelNode, EmptyNode,
                                                     EmptyNode, EventRecordNode, EventWaitNode]
    assert all(isinstance(n, GraphNode) for n in (m, k, e, j))
    assert (k.grid, k.block, k.shmem_size, k.kernel) == ((1, 1, 1), (32, 1, 1), 0, kern)
    assert k.config == cuabi.LaunchConfig(grid=1, block=32)
    assert (m.dptr, m.value, m.element_size, m.width, m.height) == (out.ptr, 0, 1, 8, 1)
    assert r.event is ev and w.event is ev
    # nodes(): a set of every node; edges(): (from, to) pairs.
    assert g.nodes() == {m, k, e, j, r, w}
    assert g.edges() == {(m, k), (k, j), (e, j), (j, r), (r, w)}
    assert k.graph == g and k.graph._state is g._state
    run(g, stream)
    assert read(out)[0] == 10


def test_entry_point_nodes_have_no_dependencies(kern):
    g = GraphDefinition()
    entry = g._entry
    assert entry.type is None and entry.handle is None
    a, b = entry.empty(), g.empty()
    assert len(a.pred) == 0 and len(b.pred) == 0
    assert g.nodes() == {a, b} and g.edges() == set()


def test_nodes_compare_by_node_across_wrappers():
    g = GraphDefinition()
    a = g.empty()
    b = a.empty()
    (again,) = b.pred
    assert again == a and hash(again) == hash(a) and again is not a
    assert type(again) is EmptyNode
    assert a != b and a != 3
    assert {a, again} == {a}


def test_memset_values_widths_and_pitched_rows(stream):
    g = GraphDefinition()
    buf = ints([0] * 8)
    n2 = g.memset(buf, np.uint16(0x0102), 4)
    assert (n2.element_size, n2.value) == (2, 0x0102)
    n4 = n2.memset(buf.ptr + 16, np.uint32(7), 2, height=3, pitch=16, dst_owner=buf)
    assert (n4.element_size, n4.width, n4.height, n4.pitch) == (4, 2, 3, 16)
    run(g, stream)
    words = np.frombuffer(buf.to_bytes(), np.uint32)
    assert list(words[:2]) == [0x01020102, 0x01020102]
    assert list(words[4:6]) == [7, 7] and list(words[8:10]) == [7, 7]
    assert list(words[12:14]) == [7, 7] and words[6] == 0
    with pytest.raises(ValueError, match="one byte"):
        g.memset(buf, 256, 1)
    with pytest.raises(ValueError, match="1, 2 or 4 bytes"):
        g.memset(buf, b"abc", 1)
    with pytest.raises(TypeError):
        g.memset(buf, 1.5, 1)
    with pytest.raises(ValueError, match="dst_owner"):
        g.memset(buf, 1, 1, dst_owner=buf)
    with pytest.raises(TypeError, match="Buffer or an int"):
        g.memset("x", 1, 1)
    with pytest.raises(cuabi.CuabiError, match="pitch"):
        g.memset(buf.ptr, 1, 4, height=2, pitch=2)


def test_memcpy_buffers_and_addresses_keep_their_owners(stream):
    g = GraphDefinition()
    src, dst = ints([1, 2, 3]), ints([0, 0, 0])
    c = g.memcpy(dst, src, 16)
    assert type(c) is MemcpyNode and (c.dst, c.src, c.size) == (dst.ptr, src.ptr, 16)
    host = np.array([42], np.int64)
    c.memcpy(dst.ptr + 16, host.ctypes.data, 8, src_owner=host)
    del host
    gc.collect()
    run(g, stream)
    assert list(read(dst)) == [1, 2, 42]
    with pytest.raises(ValueError, match="src_owner"):
        g.memcpy(dst, src, 8, src_owner=src)


def test_buffers_live_while_the_graph_does(stream):
    g = GraphDefinition()
    src, dst = ints([9]), ints([0])
    g.memcpy(dst, src, 8)
    exe = g.instantiate()
    src.close()          # the graph keeps the memory (C keeps the buffer)
    exe.launch(stream)
    stream.sync()
    assert read(dst)[0] == 9


def test_allocate_and_deallocate(stream):
    g = GraphDefinition()
    a = g.allocate(64, memory_type="device")
    assert type(a) is AllocNode and a.dptr != 0 and a.bytesize == 64
    assert (a.memory_type, a.device_id, a.peer_access) == ("device", 0, ())
    s = a.memset(a.dptr, 3, 64)
    f = s.deallocate(a.dptr)
    assert type(f) is FreeNode and f.dptr == a.dptr
    assert a.succ == {s} and f.pred == {s}
    run(g, stream)
    # CUDA keeps every node of a graph with memory nodes.
    with pytest.raises(cuabi.CuabiError, match="memory allocation node"):
        s.destroy()
    assert s.is_valid
    with pytest.raises(ValueError, match="memory_type"):
        g.allocate(8, memory_type="pageable")
    h = GraphDefinition().allocate(8, memory_type="host", peer_access=[1])
    assert (h.memory_type, h.peer_access) == ("host", (1,))


def test_callbacks_python_and_ctypes(stream):
    g = GraphDefinition()
    calls = []
    fn = lambda: calls.append("py")  # noqa: E731
    h = g.callback(fn)
    assert type(h) is HostCallbackNode and h.callback is fn
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    got = []
    cb = proto(lambda p: got.append(ctypes.string_at(p, 3)))
    # As in cuda.core, a HostCallbackNode's `callback` is its callable (the
    # property hides the builder): chain through another node.
    h2 = h.empty().callback(cb, user_data=bytearray(b"xyz"))
    assert h2.callback is None
    raw = ctypes.create_string_buffer(b"raw")
    h2.empty().callback(cb, user_data=ctypes.addressof(raw))
    run(g, stream)
    assert calls == ["py"] and got == [b"xyz", b"raw"]
    with pytest.raises(ValueError, match="user_data"):
        g.callback(lambda: None, user_data=1)
    bad = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda p: 0)
    with pytest.raises(TypeError, match="CUhostFn"):
        g.callback(bad)
    with pytest.raises(TypeError, match="not callable"):
        g.callback(3)


def test_embed_makes_a_child_graph_node(kern, stream):
    child = GraphDefinition()
    out, inp = ints([0]), ints([1, 2])
    child.launch(CFG, kern, out, inp, np.uint64(2))
    g = GraphDefinition()
    c = g.empty().embed(child)
    assert type(c) is ChildGraphNode and c.child_graph is child
    run(g, stream)
    assert read(out)[0] == 3
    with pytest.raises(TypeError):
        g.embed(object())


# ---- pred / succ: sets whose edits are edges

def test_adjacency_sets_edit_edges():
    g = GraphDefinition()
    a, b, c = g.empty(), g.empty(), g.empty()
    a.succ.add(b)
    assert b.pred == {a} and a.succ == {b} and len(a.succ) == 1
    a.succ.add(b)                      # a set: adding a member again changes nothing
    assert len(a.succ) == 1
    c.pred |= {a, b}
    assert c.pred == {a, b} and (a, c) in g.edges()
    c.pred -= {a}
    assert c.pred == {b}
    c.pred.discard(a)                  # not a member: nothing
    c.pred.update([a])
    assert c.pred == {a, b}
    c.pred = [b]                       # the setter replaces
    assert c.pred == {b}
    c.pred.clear()
    assert len(c.pred) == 0 and b.succ == set()
    assert a in b.pred and c not in b.pred and 3 not in b.pred
    with pytest.raises(cuabi.CuabiError, match="cycle"):
        a.pred.add(b)                  # b already runs after a
    with pytest.raises(TypeError):
        a.succ.add("b")
    other = GraphDefinition().empty()
    with pytest.raises(cuabi.CuabiError, match="another graph"):
        a.succ.add(other)
    assert "EmptyNode" in repr(b.pred)


def test_destroy_removes_the_node_and_its_edges(kern, stream):
    g = GraphDefinition()
    out, inp = ints([0]), ints([4])
    a = g.empty()
    k = a.launch(CFG, kern, out, inp, np.uint64(1))
    c = k.empty()
    k.destroy()
    assert not k.is_valid and a.is_valid
    assert g.nodes() == {a, c} and g.edges() == set()
    k.destroy()                        # a no-op
    with pytest.raises(cuabi.CuabiError, match="destroyed"):
        k.empty()
    assert "destroyed" in repr(k)
    run(g, stream)
    assert read(out)[0] == 0           # the kernel is gone


# ---- conditionals

def test_conditions_and_conditional_nodes(kern):
    g = GraphDefinition()
    c = g.create_condition(default_value=1)
    assert isinstance(c, GraphCondition) and c.handle == int(c) != 0
    assert c == GraphCondition(int(c)) and hash(c) == hash(GraphCondition(int(c)))
    assert c != int(c) and int(c) != c and "GraphCondition" in repr(c)
    i = g.if_then(c)
    ie = i.if_else(c)
    wl = ie.while_loop(c)
    sw = wl.switch(c, 3)
    assert [type(n) for n in (i, ie, wl, sw)] == [IfNode, IfElseNode, WhileNode, SwitchNode]
    assert all(isinstance(n, ConditionalNode) for n in (i, ie, wl, sw))
    assert [n.cond_type for n in (i, ie, wl, sw)] == ["if", "if", "while", "switch"]
    assert i.condition == c and len(sw.branches) == 3 and len(ie.branches) == 2
    assert isinstance(i.then, GraphDefinition) and ie.else_ == ie.branches[1]
    # Bodies are built like any definition and share the hierarchy's state.
    out, inp = ints([0]), ints([1])
    kn = wl.body.launch(CFG, kern, out, inp, np.uint64(1))
    assert kn.graph == wl.body and wl.body._state is g._state
    nested = i.then.if_then(c)
    assert type(nested) is IfNode
    # The same node found again is still an IfElseNode.
    (again,) = wl.pred
    assert type(again) is IfElseNode and again.else_ == ie.else_
    with pytest.raises(TypeError, match="GraphCondition"):
        g.if_then("c")
    # A condition of another graph is refused by the C library.
    other = GraphDefinition().create_condition()
    with pytest.raises(cuabi.CuabiError):
        g.while_loop(other)
    # Kernels take a condition as its handle value.
    g.launch(CFG, kern, out, inp, c)


def test_while_loop_runs_a_body_built_explicitly(stream):
    code = cuabi.Program('extern "C" __global__ void count_loop(unsigned long long h, '
                         'long long *c, unsigned long long n) {}\n').compile(arch="sm_90")
    loop = code.get_kernel("count_loop")
    g = GraphDefinition()
    cond = g.create_condition(1)
    counter = ints([0])
    w = g.while_loop(cond)
    w.body.launch(CFG, loop, cond, counter, np.uint64(5))
    run(g, stream)
    assert read(counter)[0] == 5


# ---- GraphBuilder: split / join / callback

def test_split_and_join(kern, stream):
    a, b, inp = ints([0]), ints([0]), ints([1, 2, 3])
    gb = stream.create_graph_builder().begin_building()
    assert not gb.is_join_required
    b1, b2, b3 = gb.split(3)
    assert b1 is gb and not gb.is_join_required and b2.is_join_required  # cuda.core: only forks
    cuabi.launch(b2, CFG, kern, a, inp, np.uint64(3))
    cuabi.launch(b3, CFG, kern, b, inp, np.uint64(3))
    calls = []
    gb.callback(lambda: calls.append(1))
    with pytest.raises(RuntimeError, match="forked"):
        b2.end_building()
    with pytest.raises(RuntimeError, match="forked"):
        b2.graph
    j = GraphBuilder.join(b2, b1, b3)
    assert j is gb and not gb.is_join_required and b2.is_closed and b3.is_closed
    gb.end_building()
    assert sorted(n.kind for n in gb.graph.nodes()) == ["host", "kernel", "kernel"]
    exe = gb.complete()
    exe.launch(stream)
    stream.sync()
    assert (read(a)[0], read(b)[0], calls) == (6, 6, [1])
    with pytest.raises(ValueError, match="at least 2"):
        GraphBuilder.join(gb)
    gb.close()


def test_split_needs_building_and_two(stream):
    gb = stream.create_graph_builder()
    with pytest.raises(RuntimeError, match="not building"):
        gb.split(2)
    gb.begin_building()
    with pytest.raises(ValueError, match="at least 2"):
        gb.split(1)
    gb.end_building()
    gb.close()


def test_builder_callback_ctypes(stream):
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    got = []
    cb = proto(lambda p: got.append(ctypes.string_at(p, 2)))
    gb = stream.create_graph_builder().begin_building()
    gb.callback(cb, user_data=b"hi")
    with pytest.raises(ValueError):
        gb.callback(lambda: None, user_data=b"x")
    gb.end_building()
    exe = gb.complete()
    for _ in range(2):
        exe.launch(stream)
    stream.sync()
    assert got == [b"hi", b"hi"]
    gb.close()


# ---- GraphBuilder: create_condition, if_then, if_else, switch, while_loop, embed
#
# cuda.core 1.2's way (graph/_graph_builder.pyi): each returns builder(s) of the
# body/bodies; the caller begins and ends building each; the node comes after
# the work captured so far and later work follows it.

def _count_loop():
    return cuabi.Program('extern "C" __global__ void count_loop(unsigned long long h, '
                         'long long *c, unsigned long long n) {}\n'
                         ).compile(arch="sm_90").get_kernel("count_loop")


def test_builder_while_loop_between_work(kern, stream):
    loop = _count_loop()
    counter, back, hundred = ints([42]), ints([0]), ints([100])
    gb = stream.create_graph_builder().begin_building()
    counter.fill(0, stream=gb)          # counter = 0 at every launch
    cond = gb.create_condition(1)
    assert isinstance(cond, GraphCondition)
    body = gb.while_loop(cond)
    assert isinstance(body, GraphBuilder) and body is not gb and not body.is_building
    assert body.stream is not gb.stream and not body.is_join_required
    body.begin_building()
    assert body.is_building
    cuabi.launch(body, CFG, loop, cond, counter, np.uint64(5))
    assert body.end_building() is body and not body.is_building
    back.copy_from(counter, stream=gb)
    cuabi.launch(gb, CFG, kern, back, hundred, np.uint64(1))
    gb.end_building()
    kinds = sorted(n.kind for n in gb.graph.nodes())
    assert kinds == ["conditional", "kernel", "memcpy", "memset"]
    del hundred
    gc.collect()
    exe = gb.complete()
    for _ in range(2):
        exe.launch(stream)
        stream.sync()
        assert (read(counter)[0], read(back)[0]) == (5, 105)
    with pytest.raises(RuntimeError, match="resume"):
        body.begin_building()
    body.close()
    gb.close()


def test_builder_if_else_and_switch(kern, stream):
    out, one, ten, hundred = ints([0]), ints([1]), ints([10]), ints([100])
    gb = stream.create_graph_builder().begin_building()
    c_if = gb.create_condition(0)
    c_sw = gb.create_condition(2)
    then, else_ = gb.if_else(c_if)
    for b, inp in ((then, one), (else_, ten)):
        b.begin_building()
        cuabi.launch(b, CFG, kern, out, inp, np.uint64(1))
        b.end_building()
    cases = gb.switch(c_sw, 3)
    assert len(cases) == 3 and all(isinstance(c, GraphBuilder) for c in cases)
    for i, b in enumerate(cases):
        b.begin_building()
        cuabi.launch(b, CFG, kern, out, hundred if i == 2 else one, np.uint64(1))
        b.end_building()
    only = gb.if_then(gb.create_condition(1))
    only.begin_building()
    cuabi.launch(only, CFG, kern, out, one, np.uint64(1))
    only.end_building()
    gb.end_building()
    exe = gb.complete()
    exe.launch(stream)
    stream.sync()
    assert read(out)[0] == 10 + 100 + 1        # else, case 2, then
    for b in (then, else_, only) + cases:
        b.close()
    gb.close()


def test_builder_nested_conditionals(stream):
    loop = _count_loop()
    counter = ints([0])
    gb = stream.create_graph_builder().begin_building()
    outer = gb.if_then(gb.create_condition(1)).begin_building()
    c = outer.create_condition(1)          # a condition of the body's capture
    inner = outer.while_loop(c).begin_building()
    cuabi.launch(inner, CFG, loop, c, counter, np.uint64(3))
    inner.end_building()
    outer.end_building()
    gb.end_building()
    gb.complete().launch(stream)
    stream.sync()
    assert read(counter)[0] == 3
    gb.close()
    inner.close()
    outer.close()


def test_builder_embed(kern, stream):
    out, inp = ints([0]), ints([1, 2])
    child = stream.create_graph_builder().begin_building()
    cuabi.launch(child, CFG, kern, out, inp, np.uint64(2))
    with pytest.raises(ValueError, match="finished"):
        stream.create_graph_builder().embed(child)
    child.end_building()
    gb = cuabi.Stream().create_graph_builder()
    with pytest.raises(ValueError, match="not being built"):
        gb.embed(child)
    gb.begin_building()
    assert gb.embed(child) is None
    gb.embed(child)
    with pytest.raises(TypeError):
        gb.embed(child.graph)
    gb.end_building()
    child.close()                      # the graph keeps the child's copy and what it uses
    del inp
    gc.collect()
    gb.complete().launch(stream)
    stream.sync()
    assert read(out)[0] == 6
    assert [n.kind for n in gb.graph.nodes()] == ["graph", "graph"]
    closed = stream.create_graph_builder().begin_building()
    closed.end_building()
    closed.close()
    g2 = stream.create_graph_builder().begin_building()
    with pytest.raises(ValueError, match="closed"):
        g2.embed(closed)
    g2.end_building()
    g2.close()
    gb.close()


def test_builder_conditionals_hostile(stream):
    gb = stream.create_graph_builder()
    with pytest.raises(RuntimeError, match="not building"):
        gb.create_condition()
    gb.begin_building()
    c = gb.create_condition()
    with pytest.raises(TypeError, match="GraphCondition"):
        gb.if_then(int(c))
    # A condition of another graph: the C library refuses it.
    other = GraphDefinition().create_condition()
    with pytest.raises(cuabi.CuabiError, match="was not made"):
        gb.while_loop(other)
    with pytest.raises(ValueError):
        gb.switch(c, 0)
    with pytest.raises(ValueError):
        gb.switch(c, 2 ** 32)
    with pytest.raises(cuabi.CuabiError, match="65536"):
        gb.switch(c, 2 ** 31)
    with pytest.raises(ValueError):
        gb.create_condition(-1)
    body = gb.if_then(c)
    body.begin_building()
    body.end_building()
    # A body builder used after its end.
    with pytest.raises(RuntimeError, match="not building"):
        body.if_then(c)
    with pytest.raises(RuntimeError, match="not building"):
        body.create_condition()
    body.close()
    with pytest.raises(RuntimeError, match="closed"):
        body.begin_building()
    with pytest.raises(RuntimeError, match="closed"):
        body.while_loop(c)
    # A body builder closed while building ends its capture.
    b2 = gb.if_then(c).begin_building()
    b2.close()
    assert not b2.is_closed or b2.is_closed   # closed without error
    gb.end_building()
    gb.complete()
    gb.close()


def test_builder_conditional_on_a_forked_builder(kern, stream):
    out, inp = ints([0]), ints([4])
    gb = stream.create_graph_builder().begin_building()
    _, fork = gb.split(2)
    body = fork.if_then(fork.create_condition(1)).begin_building()
    cuabi.launch(body, CFG, kern, out, inp, np.uint64(1))
    body.end_building()
    GraphBuilder.join(gb, fork)
    gb.end_building()
    gb.complete().launch(stream)
    stream.sync()
    assert read(out)[0] == 4
    body.close()
    gb.close()


def test_builder_body_filled_through_its_graph(stream):
    """cuda.core: a body builder's graph is there before begin_building; the
    body may be built with the explicit API without capturing."""
    loop = _count_loop()
    counter = ints([0])
    gb = stream.create_graph_builder().begin_building()
    c = gb.create_condition(1)
    body = gb.while_loop(c)
    body.graph.launch(CFG, loop, c, counter, np.uint64(4))
    gb.end_building()
    gb.complete().launch(stream)
    stream.sync()
    assert read(counter)[0] == 4
    body.close()
    gb.close()
