"""cuda.core 1.2's explicit-graph API over cuabi's graphs: the node builders
shared by GraphDefinition and GraphNode (_BuilderOps: cuabi._graph's _Builder
delegates to it), the node classes of each kind (KernelNode, MemsetNode, ...),
GraphCondition and AdjacencySetProxy. Imported at first use (cuabi.graph
imports it): the process's first stream capture imports cuabi._graph, and
this half stays out of it."""
from __future__ import annotations

import collections.abc as _abc
import ctypes as C

from . import _capi
from ._core import Device, _as_device
from ._graph import _STATES, Graph, GraphNode, _Builder
from ._lib import call, holding, lib
from .errors import U32_MAX, index_arg


def _node_of(value, state=None) -> "GraphNode":
    """The node object of an owned node handle: the class of its kind
    (cuda.core's KernelNode, MemsetNode, ...), holding its hierarchy's state."""
    obj = GraphNode._wrap(value)
    try:
        kind = call("cuabi_graph_node_type", obj)
        if state is None:
            state = _STATES.get(call("cuabi_graph_node_graph", obj))
        obj._state = state
        obj._key = call("cuabi_graph_node_raw", obj)
    except BaseException:
        obj.close()
        raise
    cls = _KIND_CLASS.get(kind, GraphNode)
    if cls is ConditionalNode and state is not None:
        cls = state.meta.get(obj._key, {}).get("class", ConditionalNode)
    obj.__class__ = cls
    return obj


class _BuilderOps:
    """cuda.core's node builders, shared by GraphDefinition (entry-point nodes:
    no dependencies) and GraphNode (nodes depending on it). Each returns the
    new node as its cuda.core class; the graph keeps what the node uses."""

    def _target(self) -> "tuple[Graph, list]":
        raise NotImplementedError

    def _meta(self, node, **kw):
        node._state.meta.setdefault(node._key, {}).update(kw)
        return node

    def launch(self, config, kernel, *args) -> "KernelNode":
        """A kernel launch node: kernel(*args) with config (a LaunchConfig)."""
        g, deps = self._target()
        node = g.add_kernel(kernel, config, *args, depends_on=deps)
        return self._meta(node, kernel=kernel, config=config, args=args)

    def join(self, *nodes) -> "EmptyNode":
        """An empty node depending on this node (if any) and on every node given."""
        g, deps = self._target()
        for n in nodes:
            if not isinstance(n, GraphNode):
                raise TypeError(f"join: {type(n).__name__} is not a GraphNode")
        return g.add_empty(depends_on=deps + [n for n in nodes if n not in deps])

    def empty(self) -> "EmptyNode":
        g, deps = self._target()
        return g.add_empty(depends_on=deps)

    def allocate(self, size: int, *, device=None, memory_type="device",
                 peer_access=None) -> "AllocNode":
        """A memory allocation node: `size` bytes of memory_type "device"
        (default), "host" (pinned) or "managed" on `device` (default: the
        current device), with read-write access for the devices of
        `peer_access`. The address is fixed now: AllocNode.dptr."""
        g, deps = self._target()
        size = index_arg(size, "allocate: size")
        mt = getattr(memory_type, "value", memory_type)
        kinds = {"device": _capi.CUABI_MEMORY_DEVICE, "host": _capi.CUABI_MEMORY_PINNED,
                 "managed": _capi.CUABI_MEMORY_MANAGED}
        if mt not in kinds:
            raise ValueError(f"allocate: memory_type must be one of {sorted(kinds)}, "
                             f"not {memory_type!r}")
        dev = Device() if device is None else _as_device(device)
        peers = [_as_device(p) for p in (peer_access or ())]
        with holding(dev, *peers) as (dh, *ph):
            arr = (C.c_void_p * len(ph))(*ph) if ph else None
            node = g._node("cuabi_graph_add_mem_alloc", deps, C.c_void_p(dh), kinds[mt], size,
                           arr, len(ph))
        return self._meta(node, device_id=dev.device_id, memory_type=mt,
                          peer_access=tuple(p.device_id for p in peers))

    def deallocate(self, dptr: int) -> "FreeNode":
        """A memory free node for dptr (an AllocNode's dptr)."""
        g, deps = self._target()
        dptr = index_arg(int(dptr), "deallocate: dptr")
        return g._node("cuabi_graph_add_mem_free", deps, dptr)

    def memset(self, dst, value, width: int, height: int = 1, pitch: int = 0, *,
               dst_owner=None) -> "MemsetNode":
        """A memset node: `height` rows of `width` elements set to `value` (an
        int: one byte; or a bytes-like object of 1, 2 or 4 bytes: its element),
        rows `pitch` bytes apart. dst: a Buffer (its memory is kept for the
        graph) or an address (keep it valid, or pass dst_owner to have the
        graph keep that object)."""
        g, deps = self._target()
        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value < 256:
                raise ValueError(f"memset: an int value is one byte, in [0, 256): {value}")
            elem, v = 1, value
        else:
            try:
                raw_bytes = memoryview(value).tobytes()
            except TypeError:
                raise TypeError(f"memset: value must be an int or a buffer of 1, 2 or 4 bytes, "
                                f"not {type(value).__name__}") from None
            if len(raw_bytes) not in (1, 2, 4):
                raise ValueError(f"memset: a buffer value must be 1, 2 or 4 bytes, not "
                                 f"{len(raw_bytes)}")
            elem, v = len(raw_bytes), int.from_bytes(raw_bytes, "little")
        width = index_arg(width, "memset: width")
        height = index_arg(height, "memset: height")
        pitch = index_arg(pitch, "memset: pitch")
        ptr, keep, dev = _operand(dst, dst_owner, "dst", g)
        with holding(dev, keep) as (dh, kh):
            node = g._node("cuabi_graph_add_memset_ptr", deps, C.c_void_p(dh), ptr,
                           C.c_void_p(kh), v, elem, width, height,
                           pitch if height > 1 else width * elem)
        _retain(g, dst, dst_owner)
        return self._meta(node, dptr=ptr, value=v, element_size=elem, width=width,
                          height=height, pitch=pitch)

    def memcpy(self, dst, src, size: int, *, dst_owner=None, src_owner=None) -> "MemcpyNode":
        """A copy node of `size` bytes from src to dst (Buffers, kept for the
        graph, or addresses of device, pinned or managed memory: the driver
        tells the kinds)."""
        g, deps = self._target()
        size = index_arg(size, "memcpy: size")
        dptr, dkeep, ddev = _operand(dst, dst_owner, "dst", g)
        sptr, skeep, sdev = _operand(src, src_owner, "src", g)
        dev = ddev if isinstance(dst, _buffer_class()) else sdev
        with holding(dev, dkeep, skeep) as (dh, dk, sk):
            node = g._node("cuabi_graph_add_memcpy_ptr", deps, C.c_void_p(dh), dptr,
                           C.c_void_p(dk), sptr, C.c_void_p(sk), size)
        _retain(g, dst, dst_owner)
        _retain(g, src, src_owner)
        return self._meta(node, dst=dptr, src=sptr, size=size)

    def embed(self, child: "Graph") -> "ChildGraphNode":
        """A child graph node running a copy of `child` (taken now)."""
        g, deps = self._target()
        if not isinstance(child, Graph):
            raise TypeError(f"embed: {type(child).__name__} is not a GraphDefinition")
        return self._meta(g.add_child(child, depends_on=deps), child=child)

    def record(self, event) -> "EventRecordNode":
        g, deps = self._target()
        return self._meta(g.add_event_record(event, depends_on=deps), event=event)

    def wait(self, event) -> "EventWaitNode":
        g, deps = self._target()
        return self._meta(g.add_event_wait(event, depends_on=deps), event=event)

    def callback(self, fn, *, user_data=None) -> "HostCallbackNode":
        """A host callback node: a Python callable (no arguments; user_data
        refused) or a ctypes function pointer of CUhostFn's prototype
        (CFUNCTYPE(None, c_void_p)) called with user_data (an int: a raw
        pointer; bytes-like: copied, kept with the graph). Callbacks must not
        call CUDA."""
        g, deps = self._target()
        if isinstance(fn, C._CFuncPtr):
            cfn, payload, keep = _ctypes_host_fn(fn, user_data)
            node = g._node("cuabi_graph_add_host", deps, cfn, payload)
            g._keep.append((fn, cfn, keep))
            return self._meta(node, callback=None)
        if not callable(fn):
            raise TypeError(f"callback: {type(fn).__name__} is not callable")
        if user_data is not None:
            raise ValueError("callback: user_data is only for ctypes function pointers (bind "
                             "state to a Python callable with a closure or functools.partial)")
        return self._meta(g.add_host(fn, depends_on=deps), callback=fn)

    def create_condition(self, default_value: int | None = None) -> "GraphCondition":
        """A condition for conditional nodes of this graph hierarchy; device
        code sets it with cudaGraphSetConditional. default_value: set at
        the start of every launch (None: no default)."""
        g, _ = self._target()
        if default_value is not None:
            default_value = index_arg(default_value, "create_condition: default_value", 0,
                                      U32_MAX)
        return GraphCondition(g.conditional_handle(default_value))

    def _add_cond(self, condition, ctype, count, cls):
        g, deps = self._target()
        if not isinstance(condition, int):
            raise TypeError(f"{cls.__name__}: the condition must be a GraphCondition (from "
                            f"create_condition), not {type(condition).__name__}")
        node = g._conditional(int(condition), ctype, count, deps)
        bodies = tuple(g._share_with(b) for b in node.bodies)
        node._state.meta.setdefault(node._key, {}).update(
            {"class": cls, "condition": GraphCondition(condition),
             "cond_type": _COND_NAMES[ctype], "branches": bodies})
        node.__class__ = cls
        return node

    def if_then(self, condition) -> "IfNode":
        """An if node: its body (.then) runs when the condition is non-zero."""
        return _BuilderOps._add_cond(self, condition, _capi.CUABI_GRAPH_CONDITIONAL_IF, 1, IfNode)

    def if_else(self, condition) -> "IfElseNode":
        """An if-else node: .then runs when the condition is non-zero, .else_
        when it is zero (CUDA 12.8)."""
        return _BuilderOps._add_cond(self, condition, _capi.CUABI_GRAPH_CONDITIONAL_IF, 2, IfElseNode)

    def while_loop(self, condition) -> "WhileNode":
        """A while node: its body (.body) runs again while the condition is non-zero."""
        return _BuilderOps._add_cond(self, condition, _capi.CUABI_GRAPH_CONDITIONAL_WHILE, 1, WhileNode)

    def switch(self, condition, count: int) -> "SwitchNode":
        """A switch node of `count` branches (.branches): the one the condition
        selects runs; none when it is out of range (CUDA 12.8)."""
        count = index_arg(count, "switch: count", 1, U32_MAX)
        return _BuilderOps._add_cond(self, condition, _capi.CUABI_GRAPH_CONDITIONAL_SWITCH, count,
                                 SwitchNode)


_COND_NAMES = {_capi.CUABI_GRAPH_CONDITIONAL_IF: "if",
               _capi.CUABI_GRAPH_CONDITIONAL_WHILE: "while",
               _capi.CUABI_GRAPH_CONDITIONAL_SWITCH: "switch"}


def _buffer_class():
    from ._memory import Buffer     # lazy: import time
    return Buffer


def _operand(obj, owner, side, g) -> tuple:
    """(address, buffer to keep or None, device running the node) of a
    memcpy / memset operand: a Buffer, or an address with an optional owner."""
    Buffer = _buffer_class()
    if isinstance(obj, Buffer):
        if owner is not None:
            raise ValueError(f"{side}_owner is for a raw-address {side}; a Buffer {side} is "
                             "kept by the graph itself")
        dev = obj.device
        return obj.ptr, obj, dev if dev is not None else g._kernel_device()
    if isinstance(obj, bool) or not isinstance(obj, int):
        raise TypeError(f"{side} must be a Buffer or an int address, not {type(obj).__name__}")
    keep = owner if isinstance(owner, Buffer) else None
    return index_arg(obj, f"{side}"), keep, g._kernel_device()


def _retain(g, obj, owner) -> None:
    if owner is not None:
        g._keep.append(owner)     # a Buffer owner is kept in C too (its memory)


def _ctypes_host_fn(fn, user_data):
    """A ctypes callback of CUhostFn's prototype as cuabi_graph_host_fn, and
    its payload (kept with the graph when copied)."""
    restype = getattr(fn, "restype", None)
    argtypes = tuple(getattr(fn, "argtypes", None) or ())
    if restype is not None or argtypes != (C.c_void_p,):
        raise TypeError("callback: a ctypes function pointer must be declared as CUhostFn, "
                        "ctypes.CFUNCTYPE(None, ctypes.c_void_p) (restype None, argtypes "
                        f"[c_void_p]); this one has restype {restype!r} and argtypes "
                        f"{list(argtypes)!r}")
    addr = C.cast(fn, C.c_void_p).value
    cfn = _capi.cuabi_graph_host_fn(addr)
    if user_data is None:
        return cfn, None, None
    if isinstance(user_data, int) and not isinstance(user_data, bool):
        return cfn, C.c_void_p(index_arg(user_data, "callback: user_data")), None
    try:
        data = memoryview(user_data).tobytes()
    except TypeError:
        raise TypeError("callback: user_data must be an int (a pointer) or bytes-like, not "
                        f"{type(user_data).__name__}") from None
    copy = (C.c_char * max(len(data), 1)).from_buffer_copy(data or b"\0")
    return cfn, C.c_void_p(C.addressof(copy)), copy


class GraphCondition(int):
    """cuda.core's GraphCondition: a conditional handle of one graph
    hierarchy (GraphDefinition.create_condition). An int, so it goes to a
    kernel launch as the CUgraphConditionalHandle value device code sets
    with cudaGraphSetConditional."""

    __slots__ = ()

    @property
    def handle(self) -> int:
        """The CUgraphConditionalHandle value."""
        return int(self)

    def __eq__(self, other):
        # Equal to conditions only, as cuda.core's (not to the bare number).
        return isinstance(other, GraphCondition) and int(self) == int(other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = int.__hash__

    def __repr__(self):
        return f"<GraphCondition handle=0x{int(self):x}>"


class AdjacencySetProxy(_abc.MutableSet):
    """cuda.core's view of a node's predecessors (pred) or successors (succ):
    a mutable set of GraphNodes whose changes add and remove the graph's
    edges."""

    __slots__ = ("_node", "_fwd")

    def __init__(self, node: "GraphNode", is_fwd: bool) -> None:
        self._node = node
        self._fwd = is_fwd

    @classmethod
    def _from_iterable(cls, it) -> set:
        return set(it)

    def _members(self) -> list:
        return self._node.dependents if self._fwd else self._node.dependencies

    def __contains__(self, x) -> bool:
        return isinstance(x, GraphNode) and x in self._members()

    def __iter__(self):
        return iter(self._members())

    def __len__(self) -> int:
        fn = "cuabi_graph_node_dependent_count" if self._fwd else \
            "cuabi_graph_node_dependency_count"
        return call(fn, self._node)

    def _edges(self, others) -> list:
        nodes = []
        for o in others:
            if not isinstance(o, GraphNode):
                raise TypeError(f"{type(o).__name__} is not a GraphNode")
            nodes.append(o)
        return [(self._node, o) if self._fwd else (o, self._node) for o in nodes]

    def _change(self, others, add: bool) -> None:
        have = set(self._members())
        want = [o for o in dict.fromkeys(others)]
        edges = self._edges([o for o in want if (o in have) != add])
        if not edges:
            return
        g = self._node.graph
        if add:
            g.add_dependencies(edges)
        else:
            g.remove_dependencies(edges)

    def add(self, value) -> None:
        self._change([value], True)

    def discard(self, value) -> None:
        if isinstance(value, GraphNode):
            self._change([value], False)

    def clear(self) -> None:
        """Remove all edges in a single driver call."""
        self._change(list(self._members()), False)

    def update(self, *others) -> None:
        """Add edges to all the nodes given at once."""
        self._change([o for it in others for o in it], True)

    def __ior__(self, it):
        self._change(list(it), True)
        return self

    def __isub__(self, it):
        self._change(list(it), False)
        return self

    def __repr__(self) -> str:
        return "{" + ", ".join(repr(n) for n in self._members()) + "}"


def _replace(proxy: AdjacencySetProxy, value) -> None:
    want = list(value)
    have = list(proxy)
    proxy._change([n for n in have if n not in want], False)
    proxy._change(want, True)


class EmptyNode(GraphNode):
    """An empty (synchronization) node."""


class KernelNode(GraphNode):
    """A kernel launch node: grid, block, shmem_size, kernel, config."""

    def _dims(self):
        info = self._info("kinfo")
        if info is None:
            raise RuntimeError("this kernel node was not made by cuabi (a captured node): its "
                               "launch parameters are the driver's")
        return info

    @property
    def grid(self) -> tuple:
        return tuple(self._dims()[2][0])

    @property
    def block(self) -> tuple:
        return tuple(self._dims()[2][1])

    @property
    def shmem_size(self) -> int:
        return self._dims()[2][2]

    @property
    def kernel(self):
        return self._dims()[0]

    @property
    def config(self):
        """A LaunchConfig of the node's grid, block and shared memory."""
        from ._launch import LaunchConfig     # lazy: import time
        g, b, sh = self._dims()[2]
        return LaunchConfig(grid=tuple(g), block=tuple(b), shmem_size=sh)

    def update(self, *, config=None, kernel=None, args=None) -> None:
        """Replace the node's arguments and/or configuration (same kernel:
        another kernel raises NotImplementedError). Executables made earlier
        take it with Graph.update(definition)."""
        info = self._dims()
        if kernel is not None and kernel is not info[0]:
            raise NotImplementedError("KernelNode.update: cuabi changes a kernel node's "
                                      "arguments and configuration, not its kernel")
        from ._launch import _py_lane          # lazy: import time
        k = info[0]
        args = info[1] if args is None else tuple(args)
        pl = _py_lane(k)
        try:
            pl.pack(*args)
            if config is not None:
                c = _capi.cuabi_launch_config.from_buffer_copy(config._c)
                c.stream = None
                dev = self.graph._kernel_device()
                with holding(dev, *config._held) as (dh, *_):
                    c.device = dh
                    lib.cuabi_graph_kernel_node_set(self, pl.argpack, C.byref(c))
                info[2] = (tuple(c.grid), tuple(c.block), c.dynamic_shared_bytes)
            else:
                lib.cuabi_graph_kernel_node_set(self, pl.argpack, None)
        finally:
            k._launch_cache["free"].append(pl)
        info[1] = args
        self._state.keep.append((k, args))


class AllocNode(GraphNode):
    """A memory allocation node: dptr, bytesize, device_id, memory_type, peer_access."""

    @property
    def dptr(self) -> int:
        return call("cuabi_graph_node_mem_info", self)[0]

    @property
    def bytesize(self) -> int:
        return call("cuabi_graph_node_mem_info", self)[1]

    @property
    def device_id(self) -> int:
        d = self._info("device_id")
        if d is None:
            dev = self.graph.device
            d = dev.device_id if dev is not None else 0
        return d

    @property
    def memory_type(self) -> str:
        """"device", "host" or "managed"."""
        return self._info("memory_type", "device")

    @property
    def peer_access(self) -> tuple:
        return self._info("peer_access", ())


class FreeNode(GraphNode):
    """A memory free node: dptr."""

    @property
    def dptr(self) -> int:
        return call("cuabi_graph_node_mem_info", self)[0]


class MemsetNode(GraphNode):
    """A memset node: dptr, value, element_size, width, height, pitch."""

    def _m(self, name):
        v = self._info(name)
        if v is None:
            raise RuntimeError("this memset node was not made by GraphDefinition.memset: "
                               "its parameters are the driver's")
        return v

    dptr = property(lambda self: self._m("dptr"))
    value = property(lambda self: self._m("value"))
    element_size = property(lambda self: self._m("element_size"))
    width = property(lambda self: self._m("width"))
    height = property(lambda self: self._m("height"))
    pitch = property(lambda self: self._m("pitch"))


class MemcpyNode(GraphNode):
    """A memcpy node: dst, src, size."""

    def _m(self, name):
        v = self._info(name)
        if v is None:
            raise RuntimeError("this memcpy node was not made by GraphDefinition.memcpy: "
                               "its parameters are the driver's")
        return v

    dst = property(lambda self: self._m("dst"))
    src = property(lambda self: self._m("src"))
    size = property(lambda self: self._m("size"))


class ChildGraphNode(GraphNode):
    """A child graph node: child_graph (the GraphDefinition embedded; the
    node runs the copy taken when it was added)."""

    @property
    def child_graph(self) -> "Graph":
        return self._info("child")


class EventRecordNode(GraphNode):
    """An event record node: event."""

    @property
    def event(self):
        return self._info("event")


class EventWaitNode(GraphNode):
    """An event wait node: event."""

    @property
    def event(self):
        return self._info("event")


class HostCallbackNode(GraphNode):
    """A host callback node: callback (the Python callable; None for a ctypes one)."""

    @property
    def callback(self):
        return self._info("callback")


class ConditionalNode(GraphNode):
    """A conditional node: condition, cond_type ("if", "while", "switch"),
    branches (its body graphs)."""

    @property
    def condition(self) -> "GraphCondition | None":
        return self._info("condition")

    @property
    def cond_type(self) -> "str | None":
        return self._info("cond_type")

    @property
    def branches(self) -> tuple:
        b = self._info("branches")
        return b if b is not None else self.bodies


class IfNode(ConditionalNode):
    """An if node: then."""

    @property
    def then(self) -> "Graph":
        return self.branches[0]


class IfElseNode(ConditionalNode):
    """An if-else node: then (condition non-zero), else_ (zero)."""

    @property
    def then(self) -> "Graph":
        return self.branches[0]

    @property
    def else_(self) -> "Graph":
        return self.branches[1]


class WhileNode(ConditionalNode):
    """A while node: body."""

    @property
    def body(self) -> "Graph":
        return self.branches[0]


class SwitchNode(ConditionalNode):
    """A switch node: branches."""


_KIND_CLASS = {
    _capi.CUABI_GRAPH_NODE_EMPTY: EmptyNode, _capi.CUABI_GRAPH_NODE_KERNEL: KernelNode,
    _capi.CUABI_GRAPH_NODE_MEM_ALLOC: AllocNode, _capi.CUABI_GRAPH_NODE_MEM_FREE: FreeNode,
    _capi.CUABI_GRAPH_NODE_MEMSET: MemsetNode, _capi.CUABI_GRAPH_NODE_MEMCPY: MemcpyNode,
    _capi.CUABI_GRAPH_NODE_GRAPH: ChildGraphNode,
    _capi.CUABI_GRAPH_NODE_EVENT_RECORD: EventRecordNode,
    _capi.CUABI_GRAPH_NODE_WAIT_EVENT: EventWaitNode,
    _capi.CUABI_GRAPH_NODE_HOST: HostCallbackNode,
    _capi.CUABI_GRAPH_NODE_CONDITIONAL: ConditionalNode,
}


class _EntryNode(_Builder):
    """GraphDefinition._entry: builds nodes with no dependencies."""
    __slots__ = ("_graph",)
    type = None
    handle = None

    def __init__(self, graph):
        self._graph = graph

    def _target(self):
        return self._graph, []

    @property
    def graph(self):
        return self._graph

    @property
    def is_valid(self) -> bool:
        return self._graph.is_valid

    @property
    def pred(self) -> frozenset:
        return frozenset()

    @property
    def succ(self) -> frozenset:
        return frozenset()

    def __repr__(self):
        return "<cuabi GraphDefinition entry>"
