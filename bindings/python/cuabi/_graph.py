"""CUDA graphs: capture (`with stream.capture() as graph:`), explicit nodes,
executables (launch, upload, update). See docs/graphs.md.

The C library keeps alive what a graph's nodes name through cuabi handles
(kernels, Buffers, Views, Events, child graphs). What it cannot see --
host memory a copy node reads or writes, arrays passed to a kernel node as
raw addresses (torch, CuPy, numpy), host callbacks -- the Python Graph
keeps, and every executable keeps its Graph objects: a graph outlives the
Python objects that built it.

cuda.core's spellings are here too: Stream.create_graph_builder() gives a
GraphBuilder with begin_building(), end_building(), complete() and
debug_dot_print(); complete() returns the executable (GraphExec), whose
launch(stream), upload(stream) and update(builder) match cuda.core's Graph.
"""
from __future__ import annotations

import ctypes as C
import os
import threading
import weakref

from . import _callbacks, _capi
from ._core import Device, Event, Stream, _as_device
from ._handle import Handle, _ReleaseOnDeath
from ._lib import call, done, fast, holding, hooks, hot, lib, new_struct, raise_last, raw, use
from .errors import ClosedHandleError, CuabiError, U32_MAX, index_arg

_KIND_NAMES = {
    _capi.CUABI_GRAPH_NODE_KERNEL: "kernel", _capi.CUABI_GRAPH_NODE_MEMCPY: "memcpy",
    _capi.CUABI_GRAPH_NODE_MEMSET: "memset", _capi.CUABI_GRAPH_NODE_HOST: "host",
    _capi.CUABI_GRAPH_NODE_GRAPH: "graph", _capi.CUABI_GRAPH_NODE_EMPTY: "empty",
    _capi.CUABI_GRAPH_NODE_WAIT_EVENT: "event_wait",
    _capi.CUABI_GRAPH_NODE_EVENT_RECORD: "event_record",
    _capi.CUABI_GRAPH_NODE_EXT_SEMAS_SIGNAL: "semaphore_signal",
    _capi.CUABI_GRAPH_NODE_EXT_SEMAS_WAIT: "semaphore_wait",
    _capi.CUABI_GRAPH_NODE_MEM_ALLOC: "mem_alloc", _capi.CUABI_GRAPH_NODE_MEM_FREE: "mem_free",
    _capi.CUABI_GRAPH_NODE_BATCH_MEM_OP: "batch_mem_op",
    _capi.CUABI_GRAPH_NODE_CONDITIONAL: "conditional",
}
_MODES = {"global": _capi.CUABI_CAPTURE_MODE_GLOBAL,
          "thread_local": _capi.CUABI_CAPTURE_MODE_THREAD_LOCAL,
          "relaxed": _capi.CUABI_CAPTURE_MODE_RELAXED}
_UPDATE_RESULTS: dict = {}      # filled by _update_result (only a failed update needs it)


def _update_result(code: int):
    """"topology_changed", ... for a cuabi_graph_update_result (its name)."""
    if not _UPDATE_RESULTS:     # lazy: walking _capi's names cost the first capture ~70 us
        _UPDATE_RESULTS.update({getattr(_capi, n): n.removeprefix("CUABI_GRAPH_UPDATE_").lower()
                                for n in dir(_capi) if n.startswith("CUABI_GRAPH_UPDATE_")
                                and n != "CUABI_GRAPH_UPDATE_INFO_VERSION"})
    return _UPDATE_RESULTS.get(code, code)


def _mode(mode) -> int:
    if isinstance(mode, int):
        return mode
    try:
        return _MODES[mode]
    except KeyError:
        raise ValueError(f"capture mode must be one of {sorted(_MODES)}, not {mode!r}") from None


def _stream(stream) -> Stream:
    if isinstance(stream, Stream):
        return stream
    if isinstance(stream, GraphBuilder):
        return stream.stream
    return Stream.wrap(stream)


# ------------------------------------------------------------------ making graphs, fast
#
# Capture begin and end and instantiate are called for every graph a program
# makes: straight through unchecked function pointers (bound on first use),
# not through `call`/`lib`, whose generic argument handling cost a graph
# about 10 us of host time (docs/PERFORMANCE.md). Same errors: a closed
# handle raises ClosedHandleError naming the function, a failure the
# exception of its status.

_direct: dict = {}
# Resolved with the module rather than at a process's first capture: the
# first `with stream.capture()` then costs what the later ones do (issue 24).
for _name in ("cuabi_graph_capture_begin", "cuabi_graph_capture_end", "cuabi_graph_instantiate",
              "cuabi_graph_create", "cuabi_graph_capture_begin_to_graph"):
    if _name in _capi.FUNCTIONS:     # an older library lacks the newest: bound on use
        _direct[_name] = raw(_name)
del _name


def _direct_call(name: str, obj, *args) -> int:
    """name(obj, *args) with obj (a Handle) in use during the call; raises on failure."""
    fn = _direct.get(name)
    if fn is None:
        fn = _direct[name] = raw(name)
    try:
        h = use(obj)
    except ClosedHandleError:
        raise ClosedHandleError(f"{name}: {type(obj).__name__} is closed") from None
    try:
        st = fn(C.c_void_p(h), *args)
    finally:
        done(obj)
    if st:
        raise_last(st, name)
    return st


def _direct_out(name: str, obj, *args) -> int:
    """The handle name(&out, obj, *args) makes, with obj in use during the call."""
    fn = _direct.get(name)
    if fn is None:
        fn = _direct[name] = raw(name)
    out = C.c_void_p()
    try:
        h = use(obj)
    except ClosedHandleError:
        raise ClosedHandleError(f"{name}: {type(obj).__name__} is closed") from None
    try:
        st = fn(C.byref(out), C.c_void_p(h), *args)
    finally:
        done(obj)
    if st:
        raise_last(st, name)
    return out.value


# The compiled backend makes these calls without ctypes (cuabi._fast's
# fast_graph.c): a few microseconds less per graph, tens less on a process's
# first capture (issue 24). Same results and errors as the ctypes path.
if fast is not None and hasattr(fast, "graph_capture_begin"):
    # (Their errors name the C function, as the ctypes path's.)
    _capture_begin = fast.graph_capture_begin
    _capture_begin_to_graph = fast.graph_capture_begin_to_graph
    _capture_end = fast.graph_capture_end
    _instantiate = fast.graph_instantiate
    _new_graph = fast.graph_create      # a new empty graph: every begin_building makes one
else:
    def _new_graph() -> int:
        fn = _direct.get("cuabi_graph_create") or raw("cuabi_graph_create")
        out = C.c_void_p()
        st = fn(C.byref(out))
        if st:
            raise_last(st, "cuabi_graph_create")
        return out.value

    def _capture_begin(stream, mode: int) -> None:
        _direct_call("cuabi_graph_capture_begin", stream, C.c_int(mode))

    def _capture_begin_to_graph(stream, graph, mode: int) -> None:
        with holding(graph) as (gh,):
            _direct_call("cuabi_graph_capture_begin_to_graph", stream, C.c_void_p(gh),
                         C.c_int(mode))

    def _capture_end(stream) -> int:
        return _direct_out("cuabi_graph_capture_end", stream)

    def _instantiate(graph) -> int:
        return _direct_out("cuabi_graph_instantiate", graph, None)


# ------------------------------------------------------------------ host nodes

def _run_host(payload):
    # On a driver thread. An exception cannot reach the launcher: ctypes
    # reports it through sys.unraisablehook and returns to the driver.
    entry = _callbacks.get(payload or 0)
    if entry is not None:
        fn, args = entry
        fn(*args)


_HOST_FN = None     # the ctypes callback of host nodes: made by the first add_host


def _host_fn():
    # Lazy: making a ctypes callback took ~200 us of the import of this
    # module, which the process's first capture pays.
    global _HOST_FN
    if _HOST_FN is None:
        _HOST_FN = _capi.cuabi_graph_host_fn(_run_host)
    return _HOST_FN


def _drop_keys(keys):
    for k in keys:
        _callbacks.drop(k)


# ------------------------------------------------------------------ shared state

class _GraphState:
    """What the Python wrappers of one graph hierarchy (a root graph and its
    conditional bodies) share: the objects its nodes use, its host-node
    callbacks, its kernel nodes' arguments, and what each node was made from
    (meta: raw CUgraphNode -> dict). Held by every wrapper of a graph or
    node of the hierarchy; its host callbacks go when the last one does."""
    __slots__ = ("keep", "keys", "kernels", "meta", "_fin", "__weakref__")

    def __init__(self):
        self.keep, self.keys, self.kernels, self.meta = [], [], {}, {}
        self._fin = None    # made with the first host callback: most graphs have none

    def add_keys(self, keys) -> None:
        """Own these host-node callback keys: dropped when the last wrapper goes."""
        self.keys.extend(keys)
        if self._fin is None and self.keys:
            self._fin = weakref.finalize(self, _drop_keys, self.keys)


class _StateTable:
    """cuabi graph handle value (root or body) -> its hierarchy's state, held
    weakly. A dict of weakref.ref: a WeakValueDictionary's insert runs Python
    code (its KeyedRef), ~10 us of a process's first capture and ~3 of every
    later one (issue 24). Dead entries are swept when the table has doubled
    since the last sweep; writes take a lock (a sweep must not drop an entry
    another thread has just made live), reads are one dict lookup."""
    __slots__ = ("_d", "_lock", "_sweep_at")

    def __init__(self):
        self._d = {}
        self._lock = threading.Lock()
        self._sweep_at = 64

    def get(self, h) -> "_GraphState | None":
        r = self._d.get(h)
        return None if r is None else r()

    def __setitem__(self, h, state: "_GraphState") -> None:
        if _fast_state_set is not None:     # the compiled capture writes it too
            _fast_state_set(h, state)
            return
        r = weakref.ref(state)
        with self._lock:
            d = self._d
            d[h] = r
            if len(d) >= self._sweep_at:
                for k in [k for k, v in d.items() if v() is None]:
                    del d[k]
                self._sweep_at = max(64, 2 * len(d))

    def __len__(self) -> int:
        """Live entries (tests)."""
        return sum(1 for r in list(self._d.values()) if r() is not None)


_STATES = _StateTable()
_fast_state_set = getattr(fast, "graph_state_set", None)   # atomic under the GIL, sweep included


# ------------------------------------------------------------------ nodes

def _state_of_graph_value(value) -> "_GraphState | None":
    return _STATES.get(value)


def _node_of(value, state=None) -> "GraphNode":
    """The node object of an owned node handle, of its kind's class (cuabi._graph_def)."""
    return _def()._node_of(value, state)


def _def():
    """cuabi._graph_def (a layer above this one): the explicit-graph API
    (node classes, builders), imported at its first use, through the
    package's hook (a capture does not need it)."""
    return hooks.graph_def_module()



class _Builder:
    """cuda.core's node builders, shared by GraphDefinition (entry-point nodes:
    no dependencies) and GraphNode (nodes depending on it). Each returns the
    new node as its cuda.core class; the graph keeps what the node uses. The
    bodies are in cuabi._graph_def, imported at the first use: a capture, which
    imports this module, does not pay for the explicit-graph API."""
    __slots__ = ()

    def _meta(self, node, **kw):
        return _def()._BuilderOps._meta(self, node, **kw)

    def launch(self, config, kernel, *args) -> "KernelNode":
        """A kernel launch node: kernel(*args) with config (a LaunchConfig)."""
        return _def()._BuilderOps.launch(self, config, kernel, *args)

    def join(self, *nodes) -> "EmptyNode":
        """An empty node depending on this node (if any) and on every node given."""
        return _def()._BuilderOps.join(self, *nodes)

    def empty(self) -> "EmptyNode":
        return _def()._BuilderOps.empty(self)

    def allocate(self, size: int, *, device=None, memory_type="device",
                 peer_access=None) -> "AllocNode":
        """A memory allocation node: `size` bytes of memory_type "device"
        (default), "host" (pinned) or "managed" on `device` (default: the
        current device), with read-write access for the devices of
        `peer_access`. The address is fixed now: AllocNode.dptr."""
        return _def()._BuilderOps.allocate(self, size, device=device, memory_type=memory_type,
                                           peer_access=peer_access)

    def deallocate(self, dptr: int) -> "FreeNode":
        """A memory free node for dptr (an AllocNode's dptr)."""
        return _def()._BuilderOps.deallocate(self, dptr)

    def memset(self, dst, value, width: int, height: int = 1, pitch: int = 0, *,
               dst_owner=None) -> "MemsetNode":
        """A memset node: `height` rows of `width` elements set to `value` (an
        int: one byte; or a bytes-like object of 1, 2 or 4 bytes: its element),
        rows `pitch` bytes apart. dst: a Buffer (its memory is kept for the
        graph) or an address (keep it valid, or pass dst_owner to have the
        graph keep that object)."""
        return _def()._BuilderOps.memset(self, dst, value, width, height, pitch,
                                         dst_owner=dst_owner)

    def memcpy(self, dst, src, size: int, *, dst_owner=None, src_owner=None) -> "MemcpyNode":
        """A copy node of `size` bytes from src to dst (Buffers, kept for the
        graph, or addresses of device, pinned or managed memory: the driver
        tells the kinds)."""
        return _def()._BuilderOps.memcpy(self, dst, src, size, dst_owner=dst_owner,
                                         src_owner=src_owner)

    def embed(self, child: "Graph") -> "ChildGraphNode":
        """A child graph node running a copy of `child` (taken now)."""
        return _def()._BuilderOps.embed(self, child)

    def record(self, event) -> "EventRecordNode":
        return _def()._BuilderOps.record(self, event)

    def wait(self, event) -> "EventWaitNode":
        return _def()._BuilderOps.wait(self, event)

    def callback(self, fn, *, user_data=None) -> "HostCallbackNode":
        """A host callback node: a Python callable (no arguments; user_data
        refused) or a ctypes function pointer of CUhostFn's prototype
        (CFUNCTYPE(None, c_void_p)) called with user_data (an int: a raw
        pointer; bytes-like: copied, kept with the graph). Callbacks must not
        call CUDA."""
        return _def()._BuilderOps.callback(self, fn, user_data=user_data)

    def create_condition(self, default_value: int | None = None) -> "GraphCondition":
        """A condition for conditional nodes of this graph hierarchy; device
        code sets it with cudaGraphSetConditional. default_value: set at
        the start of every launch (None: no default)."""
        return _def()._BuilderOps.create_condition(self, default_value)

    def _add_cond(self, condition, ctype, count, cls):
        return _def()._BuilderOps._add_cond(self, condition, ctype, count, cls)

    def if_then(self, condition) -> "IfNode":
        """An if node: its body (.then) runs when the condition is non-zero."""
        return _def()._BuilderOps.if_then(self, condition)

    def if_else(self, condition) -> "IfElseNode":
        """An if-else node: .then runs when the condition is non-zero, .else_
        when it is zero (CUDA 12.8)."""
        return _def()._BuilderOps.if_else(self, condition)

    def while_loop(self, condition) -> "WhileNode":
        """A while node: its body (.body) runs again while the condition is non-zero."""
        return _def()._BuilderOps.while_loop(self, condition)

    def switch(self, condition, count: int) -> "SwitchNode":
        """A switch node of `count` branches (.branches): the one the condition
        selects runs; none when it is out of range (CUDA 12.8)."""
        return _def()._BuilderOps.switch(self, condition, count)


class GraphNode(Handle, _Builder):
    """One node of a Graph (keeps the graph alive). cuda.core's GraphNode:
    builders adding nodes that depend on it (launch, memset, join, if_then,
    ...), pred / succ (its edges as sets), destroy(); the subclass of its
    kind (KernelNode, MemsetNode, ...) tells what it was made from."""

    _ctype = "cuabi_graph_node"
    _state = None
    _key = None

    def _target(self):
        return self.graph, [self]

    @property
    def kind(self) -> str:
        """"kernel", "memcpy", "memset", "host", "graph", "empty", "event_record",
        "event_wait", "mem_alloc", "mem_free", "conditional", ..."""
        return _KIND_NAMES.get(call("cuabi_graph_node_type", self), "unknown")

    type = kind

    @property
    def index(self) -> int:
        return call("cuabi_graph_node_index", self)

    @property
    def graph(self) -> "Graph":
        with holding(self):     # the node keeps its graph until it is retained
            g = Graph._from_borrowed(call("cuabi_graph_node_graph", self))
        if self._state is not None and g._state is not self._state:
            g._use_state(self._state)
            _STATES[g._h] = self._state
        return g

    @property
    def is_valid(self) -> bool:
        """Whether the node is still in its graph (False after destroy())."""
        if self._h is None:
            return False
        return bool(call("cuabi_graph_node_is_valid", self))

    def destroy(self) -> None:
        """Remove the node and its edges from the graph (a no-op once
        destroyed). CUDA refuses it in a graph holding memory nodes."""
        if self._h is None:
            return
        call("cuabi_graph_node_destroy", self)
        if self._state is not None:
            self._state.meta.pop(self._key, None)

    @property
    def pred(self) -> "AdjacencySetProxy":
        """The nodes this one depends on, as a mutable set (edits change edges)."""
        return _def().AdjacencySetProxy(self, False)

    @pred.setter
    def pred(self, value) -> None:
        d = _def()
        d._replace(d.AdjacencySetProxy(self, False), value)

    @property
    def succ(self) -> "AdjacencySetProxy":
        """The nodes that depend on this one, as a mutable set."""
        return _def().AdjacencySetProxy(self, True)

    @succ.setter
    def succ(self, value) -> None:
        d = _def()
        d._replace(d.AdjacencySetProxy(self, True), value)

    @property
    def dependencies(self) -> list["GraphNode"]:
        n = call("cuabi_graph_node_dependency_count", self)
        return [_node_of(call("cuabi_graph_node_dependency", self, i), self._state)
                for i in range(n)]

    @property
    def dependents(self) -> list["GraphNode"]:
        n = call("cuabi_graph_node_dependent_count", self)
        return [_node_of(call("cuabi_graph_node_dependent", self, i), self._state)
                for i in range(n)]

    @property
    def raw(self) -> int:
        """The CUgraphNode."""
        return call("cuabi_graph_node_raw", self)

    @property
    def handle(self) -> int:
        """cuda.core's GraphNode.handle: the CUgraphNode (an int; cuabi_handle
        is the cuabi handle). A destroyed node keeps the value it had."""
        return self._key if self._key is not None else self.raw

    @property
    def bodies(self) -> tuple["Graph", ...]:
        """The body graphs of a conditional node, to add nodes to."""
        out, i = [], 0
        while True:
            try:
                b = Graph._adopt_new(call("cuabi_graph_node_body", self, i))
            except CuabiError:
                if not out:
                    raise
                return tuple(out)
            if self._state is not None:
                b._use_state(self._state)
                _STATES[b._h] = self._state
            out.append(b)
            i += 1

    def _info(self, name, default=None):
        st = self._state
        return st.meta.get(self._key, {}).get(name, default) if st is not None else default

    def __eq__(self, other):
        if not isinstance(other, GraphNode):
            return NotImplemented
        return other is self or (self._key is not None and other._key == self._key
                                 and other._h == self._h)

    def __hash__(self):
        return hash(("GraphNode", self._key))

    def __repr__(self):
        if self._h is None:
            return f"<cuabi.{type(self).__name__} closed>"
        if not self.is_valid:
            return f"<cuabi.{type(self).__name__} destroyed>"
        return f"<cuabi.{type(self).__name__} {self.index} {self.kind}>"


# ------------------------------------------------------------------ graphs

class Graph(Handle, _Builder):
    """A CUDA graph: nodes and dependencies, not yet executable.

    Graph(device=None) starts an empty one (device: for kernel nodes; the
    first GPU by default); `with stream.capture() as g:` records one. Add
    nodes with add_kernel(kernel, config, *args, depends_on=...) and the
    other add_* methods; instantiate() makes the executable."""

    _ctype = "cuabi_graph"
    _release_on_death = True    # one per capture: no weakref.finalize (cuabi._handle)

    def __init__(self, device=None):
        self._setup(device)
        Handle.__init__(self, _new_graph())
        self._attach()

    def _setup(self, device):
        self._device_arg = device
        self._use_state(_GraphState())
        self._pending = False

    def _use_state(self, st: "_GraphState") -> None:
        self._state = st
        self._keep = st.keep      # Python objects the nodes use (see the module doc)
        self._keys = st.keys      # host-node callbacks in the _callbacks registry
        self._kernels = st.kernels  # node handle -> [kernel, args, (grid, block, shared)]

    def _attach(self) -> None:
        """Share the state of the other wrappers of this graph (cuda.core:
        definitions viewing one graph hierarchy share its state)."""
        h = self._h
        st = _STATES.get(h)
        if st is None:
            _STATES[h] = self._state
        elif st is not self._state:
            st.keep.extend(self._keep)
            st.add_keys(self._keys)
            del self._keys[:]            # moved: not dropped with this wrapper's state
            st.kernels.update(self._kernels)
            self._use_state(st)

    def _share_with(self, body: "Graph") -> "Graph":
        """A body graph's nodes are kept by (and updated through) this graph."""
        body._device_arg = self._device_arg
        body._use_state(self._state)
        _STATES[body._h] = self._state
        return body

    @classmethod
    def _adopt_new(cls, value) -> "Graph":
        obj = cls.__new__(cls)
        obj._setup(None)
        Handle.__init__(obj, value)
        obj._attach()
        return obj

    @classmethod
    def _from_borrowed(cls, value) -> "Graph":
        lib.cuabi_graph_retain(C.c_void_p(value))
        return cls._adopt_new(value)

    @classmethod
    def _placeholder(cls, device) -> "Graph":
        """A graph filled when a capture ends (Stream.capture)."""
        obj = cls.__new__(cls)
        obj._setup(device)
        obj._h = None
        obj._fin = None
        obj._pending = True
        return obj

    def _fill(self, value) -> None:
        Handle.__init__(self, value)
        self._pending = False
        self._attach()

    @property
    def cuabi_handle(self) -> int:
        h = self._h
        if h is None:
            if self._pending:
                raise RuntimeError("the graph is made when its capture ends (at the end of the "
                                   "`with stream.capture()` block)")
            raise ClosedHandleError("Graph is closed")
        return h

    # -- queries

    @property
    def device(self) -> Device | None:
        return Device._borrowed_of("cuabi_graph_device", self)

    def _kernel_device(self) -> Device:
        arg = self._device_arg
        if isinstance(arg, Stream):
            # A captured graph: the capture's stream stands for its device,
            # read now rather than when the capture began (the first
            # Stream.device cost that capture ~45 us); the graph's own device
            # is that device unless its nodes name several.
            return self.device or arg.device
        if arg is not None:
            return _as_device(arg)
        return self.device or Device(0)

    def __len__(self) -> int:
        return call("cuabi_graph_node_count", self)

    @property
    def node_list(self) -> list[GraphNode]:
        """The nodes in index order (cuabi_graph_node_at); nodes() is cuda.core's set."""
        st = self._state
        return [_node_of(call("cuabi_graph_node_at", self, i), st) for i in range(len(self))]

    def node(self, index: int) -> GraphNode:
        return _node_of(call("cuabi_graph_node_at", self, index_arg(index, "node: index")),
                        self._state)

    @property
    def raw(self) -> int:
        """The CUgraph (owned by cuabi)."""
        return call("cuabi_graph_raw", self)

    # -- cuda.core's GraphDefinition (the builders: _Builder)

    def _target(self):
        return self, []

    @property
    def handle(self) -> int:
        """cuda.core's GraphDefinition.handle: the CUgraph (an int)."""
        return self.raw

    @property
    def is_valid(self) -> bool:
        """Whether the definition can still be used (not closed)."""
        return self._h is not None

    @property
    def _entry(self) -> "_EntryNode":
        """cuda.core's entry point: a node-like object whose builders add
        nodes without dependencies (type and handle None)."""
        return _def()._EntryNode(self)

    def nodes(self) -> set:
        """Every node of the graph (not those inside child or body graphs)."""
        return set(self.node_list)

    def edges(self) -> set:
        """Every edge as a (from_node, to_node) pair: to_node runs after from_node."""
        out = set()
        for n in self.node_list:
            for d in n.dependents:
                out.add((n, d))
        return out

    def __repr__(self):
        if self._h is None:
            return "<cuabi.Graph %s>" % ("capturing" if self._pending else "closed")
        return f"<cuabi.Graph {len(self)} nodes>"

    # -- nodes

    @staticmethod
    def _deps(depends_on) -> list:
        if depends_on is None:
            return []
        if isinstance(depends_on, GraphNode):
            return [depends_on]
        return list(depends_on)

    def _node(self, fn: str, depends_on, *args, holds=()) -> GraphNode:
        """A node made by `fn`; the dependencies (and `holds`: handles the
        arguments name by value) are in use during the call."""
        deps = self._deps(depends_on)
        with holding(*deps, *holds) as hs:
            n = len(deps)
            arr = (C.c_void_p * n)(*hs[:n]) if n else None
            return _node_of(call(fn, self, arr, n, *args), self._state)

    def add_kernel(self, kernel, config, *args, depends_on=None) -> GraphNode:
        """A kernel node: kernel(*args) with config's grid, block, shared
        memory and attributes, on this graph's device. Arguments are packed
        as cuabi.launch() packs them, and copied now."""
        from ._launch import _py_lane            # lazy: import time (a capture needs none)
        # A pack of its own, as launch_py takes one: the C call below lets
        # other threads run, and one packing a launch of this kernel into
        # the same pack would change this node's arguments.
        pl = _py_lane(kernel)
        try:
            pl.pack(*args)
            c = _capi.cuabi_launch_config.from_buffer_copy(config._c)
            c.stream = None
            dev = self._kernel_device()
            c.device = dev.cuabi_handle
            node = self._node("cuabi_graph_add_kernel", depends_on, kernel, pl.argpack,
                              C.byref(c), holds=(dev, *config._held))
        finally:
            kernel._launch_cache["free"].append(pl)
        self._keep.append((kernel, args))
        info = [kernel, args, (tuple(c.grid), tuple(c.block), c.dynamic_shared_bytes)]
        self._kernels[node.cuabi_handle] = info
        self._state.meta.setdefault(node._key, {})["kinfo"] = info
        return node

    def add_memcpy(self, dst, src, size: int | None = None, *, dst_offset: int = 0,
                   src_offset: int = 0, depends_on=None) -> GraphNode:
        """A copy node between Buffers, from host memory (bytes-like: read when
        the node runs) into a Buffer, from a Buffer into writable host memory,
        or between two contiguous arrays/Views (anything from_dlpack takes)."""
        from ._memory import Buffer, _host_bytes     # lazy: import time
        dst_offset = index_arg(dst_offset, "add_memcpy: dst_offset")
        src_offset = index_arg(src_offset, "add_memcpy: src_offset")
        if size is not None:
            size = index_arg(size, "add_memcpy: size")
        if isinstance(dst, Buffer) and isinstance(src, Buffer):
            n = max(src.size - src_offset, 0) if size is None else size
            return self._node("cuabi_graph_add_memcpy", depends_on, dst, dst_offset, src,
                              src_offset, n)
        if isinstance(dst, Buffer) and _is_host_bytes(src):
            addr, nbytes, keep = _host_bytes(src) if not _is_writable(src) else _host_addr(src)
            n = _host_range(nbytes, src_offset, size, "src")
            self._keep.append((src, keep))
            return self._node("cuabi_graph_add_memcpy_from_host", depends_on, dst, dst_offset,
                              C.c_void_p((addr or 0) + src_offset), n)
        if isinstance(src, Buffer) and _is_host_bytes(dst):
            addr, nbytes, keep = _host_addr(dst)
            n = _host_range(nbytes, dst_offset, size, "dst")
            self._keep.append((dst, keep))
            return self._node("cuabi_graph_add_memcpy_to_host", depends_on,
                              C.c_void_p((addr or 0) + dst_offset), src, src_offset, n)
        from ._view import View, from_dlpack        # lazy: import time
        vd = dst if isinstance(dst, View) else from_dlpack(dst)
        vs = src if isinstance(src, View) else from_dlpack(src)
        self._keep.append((dst, src))
        return self._node("cuabi_graph_add_memcpy_view", depends_on, vd, vs)

    def add_memset(self, buffer, value: int, *, width: int = 1, count: int | None = None,
                   offset: int = 0, depends_on=None) -> GraphNode:
        """A memset node: `count` elements of `width` bytes (1, 2, 4) set to value."""
        value = index_arg(value, "add_memset: value", 0, U32_MAX)
        width = index_arg(width, "add_memset: width", 0, U32_MAX)
        offset = index_arg(offset, "add_memset: offset")
        if count is None:
            count = max(buffer.size - offset, 0) // width if width else 0
        count = index_arg(count, "add_memset: count")
        return self._node("cuabi_graph_add_memset", depends_on, buffer, offset, value, width,
                          count)

    def add_host(self, fn, *args, depends_on=None) -> GraphNode:
        """A host node calling fn(*args) on a driver thread when the graph gets
        there. fn must not call CUDA (or cuabi functions that do); an exception
        goes to sys.unraisablehook."""
        key = _callbacks.keep((fn, args))
        try:
            node = self._node("cuabi_graph_add_host", depends_on, _host_fn(), C.c_void_p(key))
        except BaseException:
            _callbacks.drop(key)
            raise
        self._state.add_keys((key,))
        return node

    def add_empty(self, depends_on=None) -> GraphNode:
        return self._node("cuabi_graph_add_empty", depends_on)

    def add_event_record(self, event: Event, depends_on=None) -> GraphNode:
        return self._node("cuabi_graph_add_event_record", depends_on, event)

    def add_event_wait(self, event: Event, depends_on=None) -> GraphNode:
        return self._node("cuabi_graph_add_event_wait", depends_on, event)

    def add_child(self, graph: "Graph", depends_on=None) -> GraphNode:
        """A node running a copy of `graph` (taken now)."""
        node = self._node("cuabi_graph_add_child", depends_on, graph)
        self._keep.append(graph)
        return node

    add_child_graph = add_child

    # -- conditionals

    def conditional_handle(self, default: int | None = None, device=None) -> int:
        """A conditional handle for this graph (pass it to the kernel that sets
        it with cudaGraphSetConditional; see docs/graphs.md). With `default`,
        every launch starts with that value."""
        flags = _capi.CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT if default is not None else 0
        dev = _as_device(device) if device is not None else self._kernel_device()
        return call("cuabi_graph_conditional_handle_create", self, dev, default or 0, flags)

    create_conditional_handle = conditional_handle

    def _conditional(self, handle, kind, count, depends_on) -> GraphNode:
        return self._node("cuabi_graph_add_conditional", depends_on,
                          index_arg(handle, "conditional handle"), kind,
                          index_arg(count, "conditional: count", 0, U32_MAX))

    def add_if(self, handle: int, *, with_else: bool = False, depends_on=None):
        """An if node: returns (node, body) or, with_else, (node, then_body, else_body)."""
        node = self._conditional(handle, _capi.CUABI_GRAPH_CONDITIONAL_IF, 2 if with_else else 1,
                                 depends_on)
        return (node,) + tuple(self._share_with(b) for b in node.bodies)

    def add_while(self, handle: int, depends_on=None):
        """A while node: returns (node, body); the body runs while the handle is non-zero."""
        node = self._conditional(handle, _capi.CUABI_GRAPH_CONDITIONAL_WHILE, 1, depends_on)
        return (node,) + tuple(self._share_with(b) for b in node.bodies)

    def add_switch(self, handle: int, count: int, depends_on=None):
        """A switch node: returns (node, body_0, ..., body_count-1)."""
        node = self._conditional(handle, _capi.CUABI_GRAPH_CONDITIONAL_SWITCH, count, depends_on)
        return (node,) + tuple(self._share_with(b) for b in node.bodies)

    # -- edges

    def add_dependency(self, before: GraphNode, after: GraphNode) -> None:
        """`after` runs after `before` (a cycle or an existing edge is refused)."""
        self.add_dependencies([(before, after)])

    def add_dependencies(self, edges) -> None:
        edges = list(edges)
        n = len(edges)
        with holding(*[a for a, _ in edges], *[b for _, b in edges]) as hs:
            frm = (C.c_void_p * max(n, 1))(*hs[:n])
            to = (C.c_void_p * max(n, 1))(*hs[n:])
            lib.cuabi_graph_add_dependencies(self, frm, to, n)

    def remove_dependency(self, before: GraphNode, after: GraphNode) -> None:
        self.remove_dependencies([(before, after)])

    def remove_dependencies(self, edges) -> None:
        """Remove the edges (before, after), all or none (one that does not
        exist is refused)."""
        edges = list(edges)
        n = len(edges)
        with holding(*[a for a, _ in edges], *[b for _, b in edges]) as hs:
            frm = (C.c_void_p * max(n, 1))(*hs[:n])
            to = (C.c_void_p * max(n, 1))(*hs[n:])
            lib.cuabi_graph_remove_dependencies(self, frm, to, n)

    # -- executables and output

    def instantiate(self, options: "CompleteOptions | None" = None, *,
                    auto_free_on_launch: bool = False, upload_stream=None,
                    device_launch: bool = False, use_node_priority: bool = False) -> "GraphExec":
        """The executable (GraphExec). Options as keywords or as a cuda.core-style
        CompleteOptions."""
        if options is not None:
            auto_free_on_launch = options.auto_free_on_launch
            upload_stream = options.upload_stream
            device_launch = options.device_launch
            use_node_priority = options.use_node_priority
        if not (auto_free_on_launch or device_launch or use_node_priority) \
                and upload_stream is None:
            # The defaults: no options struct to make (NULL means them).
            if _exec_new is not None:
                return _exec_new(self)
            exe = GraphExec._wrap(_instantiate(self))
            exe._graphs = [self]
            return exe
        o = new_struct(_capi.cuabi_graph_instantiate_options)
        o.flags = ((_capi.CUABI_GRAPH_INSTANTIATE_AUTO_FREE_ON_LAUNCH if auto_free_on_launch else 0)
                   | (_capi.CUABI_GRAPH_INSTANTIATE_UPLOAD if upload_stream is not None else 0)
                   | (_capi.CUABI_GRAPH_INSTANTIATE_DEVICE_LAUNCH if device_launch else 0)
                   | (_capi.CUABI_GRAPH_INSTANTIATE_USE_NODE_PRIORITY if use_node_priority
                      else 0))
        us = None if upload_stream is None else _stream(upload_stream)
        with holding(us) as (ush,):
            o.upload_stream = ush
            exe = GraphExec._wrap(call("cuabi_graph_instantiate", self, C.byref(o)))
        exe._graphs = [self]
        return exe

    complete = instantiate

    def to_dot(self, verbose: bool = False) -> str:
        """The graph as Graphviz text."""
        flags = _capi.CUABI_GRAPH_DOT_VERBOSE if verbose else 0
        size = C.c_size_t(0)
        try:
            lib.cuabi_graph_debug_dot_text(None, C.byref(size), self, flags)
        except CuabiError as e:
            if e.status != _capi.CUABI_ERROR_BUFFER_TOO_SMALL:
                raise
        buf = C.create_string_buffer(size.value)
        lib.cuabi_graph_debug_dot_text(buf, C.byref(size), self, flags)
        return buf.value.decode("utf-8", "replace")

    def debug_dot(self, path, verbose: bool = False) -> None:
        """Write the Graphviz text to a file."""
        flags = _capi.CUABI_GRAPH_DOT_VERBOSE if verbose else 0
        lib.cuabi_graph_debug_dot(self, str(path).encode(), flags)

    def debug_dot_print(self, path, options: "GraphDebugPrintOptions | None" = None) -> None:
        """cuda.core's debug_dot_print: the Graphviz text in a file, with what
        a GraphDebugPrintOptions asks for (None: the node kinds and edges)."""
        if options is None:
            flags = 0
        elif isinstance(options, GraphDebugPrintOptions):
            flags = options._to_flags()
        else:
            raise TypeError(f"debug_dot_print: options must be a GraphDebugPrintOptions, not "
                            f"{type(options).__name__}")
        lib.cuabi_graph_debug_dot(self, os.fsencode(path), flags)


# CUgraphDebugDot_flags, in GraphDebugPrintOptions's field order (1 << i).
_DOT_FIELDS = ("verbose", "runtime_types", "kernel_node_params", "memcpy_node_params",
               "memset_node_params", "host_node_params", "event_node_params",
               "ext_semas_signal_node_params", "ext_semas_wait_node_params",
               "kernel_node_attributes", "handles", "mem_alloc_node_params",
               "mem_free_node_params", "batch_mem_op_node_params", "extra_topo_info",
               "conditional_node_params")


class GraphDebugPrintOptions:
    """cuda.core's GraphDebugPrintOptions: what debug_dot_print writes
    beside the node kinds and edges (each field a CUgraphDebugDot_flags
    bit; verbose: everything). Fields in cuda.core's order, positional or
    keywords, all False by default. A plain class: making a dataclass costs
    about a millisecond at import (its methods are made by exec), and this
    module is imported by the process's first capture."""
    __slots__ = _DOT_FIELDS
    __match_args__ = _DOT_FIELDS
    __hash__ = None     # mutable, as cuda.core's

    def __init__(self, *args, **kwargs):
        if len(args) > len(_DOT_FIELDS):
            raise TypeError(f"GraphDebugPrintOptions takes at most {len(_DOT_FIELDS)} "
                            f"positional arguments ({len(args)} given)")
        values = dict(zip(_DOT_FIELDS, args))
        for k, v in kwargs.items():
            if k not in _DOT_FIELDS:
                raise TypeError(f"GraphDebugPrintOptions got an unexpected keyword argument {k!r}")
            if k in values:
                raise TypeError(f"GraphDebugPrintOptions got multiple values for argument {k!r}")
            values[k] = v
        for f in _DOT_FIELDS:
            setattr(self, f, values.get(f, False))

    def _fields(self) -> tuple:
        return tuple(getattr(self, f) for f in _DOT_FIELDS)

    def __eq__(self, other):
        if type(other) is not GraphDebugPrintOptions:
            return NotImplemented
        return self._fields() == other._fields()

    def __repr__(self):
        return "GraphDebugPrintOptions(" + ", ".join(
            f"{f}={getattr(self, f)!r}" for f in _DOT_FIELDS) + ")"

    def _to_flags(self) -> int:
        """The CUgraphDebugDot_flags these options ask for."""
        return sum(1 << i for i, f in enumerate(_DOT_FIELDS) if getattr(self, f))


def _host_range(nbytes, offset, size, side) -> int:
    """Bytes of a host object a copy node reads or writes from `offset`: all
    the rest, or `size`; the node touches that memory at every replay, so
    the range must lie inside the object."""
    if offset > nbytes:
        index_arg(offset, f"add_memcpy: {side}_offset", 0, nbytes)
    n = nbytes - offset if size is None else size
    return index_arg(n, f"add_memcpy: size (of the {side} object's {nbytes - offset} bytes "
                     f"from {side}_offset)", 0, nbytes - offset)


def _is_host_bytes(obj) -> bool:
    try:
        memoryview(obj)
        return True
    except TypeError:
        return False


def _is_writable(obj) -> bool:
    try:
        return not memoryview(obj).readonly
    except TypeError:
        return False


def _host_addr(obj):
    """(address, nbytes, keepalive) of writable host memory, without a copy:
    a node reads or writes it when the graph runs."""
    mv = memoryview(obj)
    if mv.readonly:
        raise ValueError("host memory a graph writes (or reads later) must be writable "
                         "(bytearray, numpy array, ...)")
    if not mv.c_contiguous:
        raise ValueError("host memory must be C-contiguous")
    buf = (C.c_char * mv.nbytes).from_buffer(mv.cast("B")) if mv.nbytes else None
    return (C.addressof(buf) if buf is not None else None), mv.nbytes, buf


# ------------------------------------------------------------------ executables

_exec_launch, _ptr = hot("cuabi_graph_exec_launch")


class GraphExec(Handle):
    """An executable graph: launch(stream), upload(stream), update(graph),
    update_kernel(node, *args, grid=...). Keeps the graphs it was made or
    updated from (and what they keep)."""

    _ctype = "cuabi_graph_exec"
    _release_on_death = True    # one per instantiate: no weakref.finalize (cuabi._handle)
    # Made on first use: an executable that is only launched on cuabi Streams
    # needs none (the compiled Graph.instantiate sets only _graphs).
    _node_args = None           # node handle -> (args, dims) of update_kernel
    _streams = None             # id -> (foreign stream, its wrapped Stream)
    _p = None                   # the handle as a c_void_p, for launch

    @classmethod
    def _wrap(cls, value):
        obj = super()._wrap(value)
        obj._graphs = []
        return obj

    def launch(self, stream) -> None:
        """Run the graph on `stream` (a cuabi Stream, a GraphBuilder, or any
        stream cuabi.Stream.wrap takes)."""
        if type(stream) is not Stream:
            stream = self._stream_of(stream)
        # Both in use until the launch returns (a close() elsewhere waits for it).
        h = use(stream)
        try:
            p = self._p
            if p is None:
                p = self._p = _ptr(use(self))
            else:
                use(self)
            try:
                st = _exec_launch(p, _ptr(h))
            finally:
                done(self)
        finally:
            done(stream)
        if st:
            raise_last(st, "cuabi_graph_exec_launch")

    __call__ = launch

    def _stream_of(self, obj) -> Stream:
        if isinstance(obj, Stream):
            return obj
        if isinstance(obj, GraphBuilder):
            return obj.stream
        key = id(obj)
        if self._streams is None:
            self._streams = {}
        cached = self._streams.get(key)
        if cached is not None and cached[0] is obj:
            return cached[1]
        s = Stream.wrap(obj)
        self._streams[key] = (obj, s)
        return s

    def upload(self, stream) -> None:
        lib.cuabi_graph_exec_upload(self, _stream(stream))

    def update(self, graph) -> None:
        """Update in place from a graph (or a GraphBuilder) of the same topology.
        On failure GraphUpdateError tells why and which node (its attributes
        update_result, node_index, from_node_index, node_kind)."""
        if isinstance(graph, GraphBuilder):
            graph = graph.graph
        info = new_struct(_capi.cuabi_graph_update_info)
        try:
            lib.cuabi_graph_exec_update(self, graph, C.byref(info))
        except CuabiError as e:
            e.update_result = _update_result(info.result)
            e.node_index = None if info.node_index < 0 else info.node_index
            e.from_node_index = None if info.from_node_index < 0 else info.from_node_index
            e.node_kind = _KIND_NAMES.get(info.node_type) if info.node_type >= 0 else None
            raise
        self._graphs.append(graph)
        self._node_args = None

    def update_kernel(self, node: GraphNode, *args, config=None, grid=None, block=None,
                      shared_mem=None) -> None:
        """New arguments for one kernel node (added with Graph.add_kernel) and,
        optionally, a new grid / block / dynamic shared memory or a whole
        LaunchConfig (same attributes), without re-instantiating. With no
        args the node keeps its arguments."""
        from ._launch import _dim3, _plain       # lazy: import time
        info = self.graph._kernels.get(node.cuabi_handle)
        if info is None:
            raise TypeError(f"update_kernel: node {node.index} is not a kernel node added with "
                            "Graph.add_kernel (update captured graphs with update(graph))")
        kernel = info[0]
        if self._node_args is None:
            self._node_args = {}
        old_args, (g, b, sh) = self._node_args.get(node.cuabi_handle, (info[1], info[2]))
        if not args:
            args = old_args
        pl = kernel._launch_cache.get("plain") or _plain(kernel)
        pl.pack(*args)
        c = None
        if config is not None or grid is not None or block is not None or shared_mem is not None:
            c = _capi.cuabi_launch_config.from_buffer_copy(config._c) if config is not None \
                else new_struct(_capi.cuabi_launch_config)
            if config is None:
                c.grid[:], c.block[:], c.dynamic_shared_bytes = g, b, sh
            if grid is not None:
                c.grid[:] = _dim3(grid)
            if block is not None:
                c.block[:] = _dim3(block)
            if shared_mem is not None:
                c.dynamic_shared_bytes = shared_mem
            c.stream = None
        dev = self.graph._kernel_device() if c is not None else None
        with holding(dev, *(config._held if config is not None else ())) as (dh, *_):
            if c is not None:
                c.device = dh
            lib.cuabi_graph_exec_update_kernel(self, node, pl.argpack,
                                               C.byref(c) if c is not None else None)
        # Kept while this executable runs them.
        dims = (tuple(c.grid), tuple(c.block), c.dynamic_shared_bytes) if c is not None \
            else (g, b, sh)
        self._node_args[node.cuabi_handle] = (args, dims)

    @property
    def graph(self) -> Graph:
        """The graph it was instantiated from (its nodes address this executable's)."""
        if self._graphs:
            return self._graphs[0]
        with holding(self):     # the executable keeps its graph until it is retained
            return Graph._from_borrowed(call("cuabi_graph_exec_graph", self))

    @property
    def device(self) -> Device | None:
        return Device._borrowed_of("cuabi_graph_exec_device", self)

    @property
    def raw(self) -> int:
        """The CUgraphExec (owned by cuabi)."""
        return call("cuabi_graph_exec_raw", self)

    @property
    def handle(self) -> int:
        """cuda.core's Graph.handle: the CUgraphExec (an int; cuabi_handle is
        the cuabi handle)."""
        return self.raw

    @property
    def is_closed(self) -> bool:
        return self._h is None



# ------------------------------------------------------------------ capture

def _launch_captures() -> list:
    return _callbacks.captures


def _forget_capture(keep) -> None:
    caps = _launch_captures()
    for i, k in enumerate(caps):
        if k is keep:
            del caps[i]
            return


class _Capture:
    """`with stream.capture(mode) as graph:` -- the graph is filled when the
    block ends; an exception inside the block ends the capture and makes no
    graph. (The ctypes backend's; the compiled one is below.)"""
    __slots__ = ("_stream", "_mode", "graph")

    def __init__(self, stream: Stream, mode="global"):
        self._stream = stream
        self._mode = _mode(mode)
        self.graph = None

    def __enter__(self) -> Graph:
        _capture_begin(self._stream, self._mode)
        self.graph = Graph._placeholder(self._stream)     # its device: read when needed
        _launch_captures().append(self.graph._keep)
        return self.graph

    def __exit__(self, exc_type, exc, tb):
        _forget_capture(self.graph._keep)
        try:
            value = _capture_end(self._stream)
        except CuabiError:
            if exc_type is None:
                raise
            return False  # the block's own exception explains more
        if exc_type is not None:
            lib.cuabi_graph_release(C.c_void_p(value))
            return False
        self.graph._fill(value)
        return False


if fast is not None and hasattr(fast, "Capture"):
    # The compiled context manager (cuabi._fast's fast_graph.c): the same
    # objects, none of the Python work a process's first capture paid for.
    fast.set_capture_classes(Graph, _GraphState, _ReleaseOnDeath, Graph._releaser(),
                             _callbacks.captures, _STATES._d)
    _Capture = fast.Capture     # noqa: F811


def capture_status(stream) -> str:
    """"none", "active" or "invalidated"."""
    return _stream(stream).capture_status


# ------------------------------------------------------------------ cuda.core's names

class CompleteOptions:
    """cuda.core's options of GraphBuilder.complete() (also Graph.instantiate).
    A plain class, not a dataclass: importing dataclasses (and inspect with
    it) was most of the first s.capture()'s cost, which imports this module."""
    __slots__ = ("auto_free_on_launch", "upload_stream", "device_launch", "use_node_priority")

    def __init__(self, auto_free_on_launch: bool = False, upload_stream: object = None,
                 device_launch: bool = False, use_node_priority: bool = False):
        self.auto_free_on_launch = auto_free_on_launch
        self.upload_stream = upload_stream
        self.device_launch = device_launch
        self.use_node_priority = use_node_priority

    def _fields(self):
        return tuple(getattr(self, f) for f in self.__slots__)

    def __eq__(self, other):
        if type(other) is not CompleteOptions:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None     # mutable, as the dataclass was

    def __repr__(self):
        return "CompleteOptions(" + ", ".join(f"{f}={getattr(self, f)!r}"
                                              for f in self.__slots__) + ")"


class GraphBuilder:
    """cuda.core's GraphBuilder over cuabi's capture: stream.create_graph_builder(),
    begin_building(mode), launches on the builder (it is a stream for
    cuabi.launch), end_building(), complete() -> GraphExec."""

    def __init__(self, stream, owns_stream: bool = False):
        self.stream = _stream(stream)
        self._graph = None
        self._building = False
        self._owns_stream = owns_stream     # Device.create_graph_builder's: closed with it
        self._closed = False
        self._primary = None     # a forked builder (split): the builder it came from
        self._forks = []         # a primary: its forked builders (their streams closed with it)
        self._target = None      # a primary while building: the Graph captured into
        self._body = None        # a conditional's body builder: its body Graph (_graph_cond)

    def __cuda_stream__(self):
        return self.stream.__cuda_stream__()

    @property
    def _cuabi_stream_(self) -> Stream:
        """The Stream work on the builder goes to (Stream.wrap and the
        compiled launch take it instead of wrapping the CUstream again)."""
        return self.stream

    @property
    def is_closed(self) -> bool:
        return self._closed

    def begin_building(self, mode="relaxed") -> "GraphBuilder":
        """Start capturing (mode "relaxed" by default, as cuda.core 1.2;
        "global" or "thread_local")."""
        if self._graph is not None:
            raise RuntimeError("cannot resume building after building has ended")
        if self._closed:
            raise RuntimeError("the graph builder has been closed")
        # Into a graph cuabi made (a body builder: its body), so conditionals
        # and embed can add nodes at the capture's place (_graph_cond).
        target = self._body
        if target is None:
            target = Graph._adopt_new(_new_graph())
        try:
            _capture_begin_to_graph(self.stream, target, _mode(mode))
        except BaseException:
            if target is not self._body:
                target.close()
            raise
        if target is not self._body:
            self._target = target
        self._building = True
        self._keep = []
        _launch_captures().append(self._keep)
        return self

    @property
    def is_building(self) -> bool:
        return capture_status(self.stream) == "active"

    def end_building(self) -> "GraphBuilder":
        if self._primary is not None:
            raise RuntimeError("a forked graph builder (from split) does not end the building: "
                               "join it with the others, then end_building() on the result")
        if not self._building:
            raise RuntimeError("the graph builder is not building")
        self._building = False
        _forget_capture(self._keep)
        target = self._body if self._body is not None else self._target
        self._target = None
        try:
            # The graph captured into, a new reference: the target holds one.
            lib.cuabi_graph_release(C.c_void_p(_capture_end(self.stream)))
        except BaseException:
            if target is not self._body:
                target.close()
            raise
        finally:
            self._close_forks()
        self._graph = target
        self._graph._keep.extend(self._keep)
        return self

    @property
    def is_join_required(self) -> bool:
        """True for a forked builder (split's second and later ones) until it
        is joined, as cuda.core's: the builder that was split is never "required"
        to join (end_building on it still refuses while forks are open)."""
        return self._primary is not None and not self._closed

    def split(self, count: int) -> tuple:
        """`count` builders whose work follows the work already on this one:
        this builder first, then count - 1 forked ones (each on a stream of its
        own joining the capture). Join them (GraphBuilder.join) before
        end_building."""
        count = index_arg(count, "split: count")
        if count < 2:
            raise ValueError(f"split: count must be at least 2, not {count}")
        if not self.is_building:
            raise RuntimeError("split: the graph builder is not building (begin_building())")
        primary = self._primary or self
        ev = self.stream.record()
        out = [self]
        try:
            for _ in range(count - 1):
                s = Stream(self.stream.device)
                fork = GraphBuilder(s, owns_stream=True)
                fork._building = True
                fork._primary = primary
                primary._forks.append(fork)
                s.wait(ev)
                out.append(fork)
        finally:
            ev.close()
        return tuple(out)

    @staticmethod
    def join(*graph_builders) -> "GraphBuilder":
        """One builder whose work follows the work of all the given builders:
        the primary one among them (else the first); the others are closed."""
        if len(graph_builders) < 2:
            raise ValueError(f"join: give at least 2 graph builders, not {len(graph_builders)}")
        for b in graph_builders:
            if not isinstance(b, GraphBuilder):
                raise TypeError(f"join: {type(b).__name__} is not a GraphBuilder")
            if b._closed:
                raise RuntimeError("join: a graph builder is closed")
        root = next((b for b in graph_builders if b._primary is None), graph_builders[0])
        for b in graph_builders:
            if b is root:
                continue
            ev = b.stream.record()
            try:
                root.stream.wait(ev)
            finally:
                ev.close()
        for b in graph_builders:
            if b is not root:
                b.close()
        return root

    def create_condition(self, default_value: int | None = None) -> GraphCondition:
        """cuda.core's: a condition of the graph being built (default_value:
        set at every launch; None: none). Device code sets it."""
        from . import _graph_cond    # lazy: import time (the first capture imports _graph)
        return _graph_cond.create_condition(self, default_value, _def().GraphCondition)

    def if_then(self, condition: GraphCondition) -> "GraphBuilder":
        """cuda.core's: an if node after the work so far; returns the body's builder."""
        from . import _graph_cond    # lazy: import time (the first capture imports _graph)
        return _graph_cond.add_conditional(self, condition, _capi.CUABI_GRAPH_CONDITIONAL_IF, 1,
                                           "if_then", _def().GraphCondition)[0]

    def if_else(self, condition: GraphCondition) -> tuple:
        """cuda.core's: an if-else node; returns the (then, else) builders (CUDA 12.8)."""
        from . import _graph_cond    # lazy: import time (the first capture imports _graph)
        return _graph_cond.add_conditional(self, condition, _capi.CUABI_GRAPH_CONDITIONAL_IF, 2,
                                           "if_else", _def().GraphCondition)

    def switch(self, condition: GraphCondition, count: int) -> tuple:
        """cuda.core's: a switch node; returns a builder per case (CUDA 12.8)."""
        from . import _graph_cond    # lazy: import time (the first capture imports _graph)
        count = index_arg(count, "switch: count", 1, U32_MAX)
        return _graph_cond.add_conditional(self, condition, _capi.CUABI_GRAPH_CONDITIONAL_SWITCH,
                                           count, "switch", _def().GraphCondition)

    def while_loop(self, condition: GraphCondition) -> "GraphBuilder":
        """cuda.core's: a while node; returns the body's builder."""
        from . import _graph_cond    # lazy: import time (the first capture imports _graph)
        return _graph_cond.add_conditional(self, condition, _capi.CUABI_GRAPH_CONDITIONAL_WHILE,
                                           1, "while_loop", _def().GraphCondition)[0]

    def embed(self, child: "GraphBuilder") -> None:
        """cuda.core's: a child graph node of `child` (a builder whose building ended)."""
        from . import _graph_cond    # lazy: import time (the first capture imports _graph)
        _graph_cond.embed(self, child, GraphBuilder)

    def callback(self, fn, *, user_data=None) -> None:
        """cuda.core's GraphBuilder.callback: a host node calling fn, kept
        with the graph (a Python callable, no arguments; or a ctypes function
        pointer of CUhostFn's prototype called with user_data: an int, or
        bytes-like, copied and kept with the graph)."""
        if isinstance(fn, C._CFuncPtr):
            _cfn, payload, copy = _def()._ctypes_host_fn(fn, user_data)
            addr = payload.value if payload is not None else None

            def call_c(fn=fn, addr=addr, copy=copy):
                fn(addr)
            host_launch(self, call_c)
            return
        if not callable(fn):
            raise TypeError(f"callback: {type(fn).__name__} is not callable")
        if user_data is not None:
            raise ValueError("callback: user_data is only for ctypes function pointers")
        host_launch(self, fn)

    @property
    def graph(self) -> Graph:
        if self._primary is not None:
            raise RuntimeError("a forked graph builder (from split) has no graph of its own: "
                               "use the builder it was split from")
        if self._graph is None:
            if self._body is not None and not self._building and not self._closed:
                return self._body   # cuda.core: a body's graph, before its building too
            raise RuntimeError("the graph has not finished building (end_building())")
        return self._graph

    def complete(self, options: CompleteOptions | None = None) -> GraphExec:
        return self.graph.instantiate(options)

    def debug_dot_print(self, path, options=None) -> None:
        self.graph.debug_dot_print(path, options)

    def close(self) -> None:
        if self._primary is not None:
            # A fork: its stream belongs to the capture until the primary ends
            # it (closed then, or with the primary).
            self._building = False
            self._closed = True
            return
        if self._building:
            _forget_capture(self._keep)
            try:
                g = call("cuabi_graph_capture_end", self.stream)
                lib.cuabi_graph_release(C.c_void_p(g))
            except CuabiError:
                pass
            self._building = False
        if self._graph is not None:
            self._graph.close()
            self._graph = None
        for g in (self._target, self._body):
            if g is not None:
                g.close()
        self._target = self._body = None
        self._close_forks()
        if self._owns_stream and not self._closed:
            self.stream.close()
        self._closed = True

    def _close_forks(self) -> None:
        forks, self._forks = self._forks, []
        for f in forks:
            f._closed = True
            f.stream.close()


# ---- host_launch (cuda.core's name): a host function in stream order
#
# One C call, cuabi_stream_launch_host_func, on any stream: on an ordinary
# stream one cuLaunchHostFunc (the one-node graph of before took a graph, an
# executable, a launch and their later release); on a stream cuabi captures,
# a host node whose payload the graph keeps until it and its executables are
# gone. The payload is a _callbacks key of (fn, args). C releases it once:
# on the driver's thread right after the call (ordinary stream) -- where
# dropping the last reference to an argument could run a finalizer calling
# CUDA, so the key waits in _released for the next host_launch -- or on the
# thread releasing the graph (capture), where it is dropped at once.

_in_host_call = threading.local()   # set on a driver thread while fn runs
_released = []                      # keys released on a driver thread (append: atomic)
_HOST_LAUNCH_FNS = None


def _run_host_launch(payload):
    # On a driver thread. An exception goes to sys.unraisablehook (ctypes).
    entry = _callbacks.get(payload or 0)
    _in_host_call.key = payload
    if entry is not None:
        fn, args = entry
        fn(*args)


def _release_host_launch(payload):
    if getattr(_in_host_call, "key", None) == payload:
        # Right after fn, on its driver thread. (A captured call run on this
        # thread before -- the fake driver runs graphs on the launching
        # thread -- only defers the drop to the next host_launch.)
        _in_host_call.key = None
        _released.append(payload)
    else:
        _callbacks.drop(payload)        # a graph's release: a thread of the program


def _host_launch_fns():
    global _HOST_LAUNCH_FNS
    if _HOST_LAUNCH_FNS is None:        # lazy: ctypes callbacks cost import time
        _HOST_LAUNCH_FNS = (_capi.cuabi_graph_host_fn(_run_host_launch),
                            _capi.cuabi_graph_host_release_fn(_release_host_launch))
    return _HOST_LAUNCH_FNS


def _reap_host_launches():
    """Drop the callables whose one call has run (never on the driver's
    thread: their arguments' finalizers may call CUDA)."""
    while _released:
        try:
            key = _released.pop()
        except IndexError:              # another thread reaped the last one
            break
        _callbacks.drop(key)


def host_launch(stream, fn, *args) -> None:
    """cuda.core's host_launch: call fn(*args) on a driver thread once the
    work queued on `stream` before it has finished; later work on the
    stream waits for it. fn must not call CUDA. On a stream being captured
    (a GraphBuilder, Stream.capture), the call becomes a host node of the
    graph, run at every launch of its executables; the graph keeps fn and
    args until it and its executables are closed. A stream captured by
    another library is refused (StreamCaptureError). An exception fn raises
    goes to sys.unraisablehook."""
    if not callable(fn):
        raise TypeError(f"host_launch: {type(fn).__name__} is not callable")
    _reap_host_launches()
    s = _stream(stream)
    run, release = _host_launch_fns()
    key = _callbacks.keep((fn, args))
    try:
        call("cuabi_stream_launch_host_func", s, run, C.c_void_p(key), release)
    except BaseException:
        _callbacks.drop(key)            # on an error C released nothing
        raise


GraphCompleteOptions = CompleteOptions     # cuda.core's name


# Bound with the module, not by the process's first captured graph and executable.
Graph._releaser()
GraphExec._releaser()

# Graph.instantiate() with the default options: the executable made in C
# (cuabi._fast's fast_graph.c), none of _wrap's Python run after the driver's
# instantiate has left the caches cold (issue 24).
_exec_new = None
if fast is not None and hasattr(fast, "graph_exec_new"):
    fast.set_exec_class(GraphExec, GraphExec._releaser())
    _exec_new = fast.graph_exec_new


# Stream.capture() and create_graph_builder() ask cuabi._lib.hooks for these
# classes; loaded, the module answers without the hook's import statement
# (3-8 us of a process's first capture).
hooks.capture_class = lambda: _Capture
hooks.graph_builder_class = lambda: GraphBuilder
