# CUDA graphs (included by CuABI.jl): capture, explicit nodes, executables.
#
# The C library keeps alive what a graph's nodes name through cuabi handles
# (kernels, buffers, views, events, child graphs). What it cannot see -- host
# arrays a copy node reads or writes, host-node functions -- a Graph keeps in
# `keep`, and every GraphExec keeps its graphs: a graph outlives the Julia
# objects that built it. A launch returns before the graph runs, so an
# executable records an event per stream after each launch, and its release
# (close or the finalizer) waits for those runs first: the arrays and
# functions it keeps are not collected under a run in flight.

"""
    Graph(; device = nothing)
    capture(f, stream; mode = :global) -> Graph

A CUDA graph: nodes and dependencies, not yet executable. Build one node by
node (`add_kernel!`, `add_memcpy!`, `add_memset!`, `add_host!`, `add_empty!`,
`add_event_record!`, `add_event_wait!`, `add_child!`, `add_while!`, ...) or
record the work `f()` queues on a stream with `capture`. `instantiate`
makes the executable.
"""
mutable struct Graph <: Handle
    ptr::Ptr{Cvoid}
    keep::Vector{Any}
end
_release(::Graph, p) = L.cuabi_graph_release(p)

Graph() = _own(Graph, _create(out -> L.cuabi_graph_create(out)), Any[])

"One node of a graph; keeps the graph alive."
mutable struct GraphNode <: Handle
    ptr::Ptr{Cvoid}
end
_release(::GraphNode, p) = L.cuabi_graph_node_release(p)

"""
An executable graph: `launch(exe, stream)`, `upload(exe, stream)`,
`update!(exe, graph)`, `update_kernel!(exe, node, pack[, config])`.
Releasing it (`close`, or the finalizer) first waits for the runs launched
from it.
"""
mutable struct GraphExec <: Handle
    ptr::Ptr{Cvoid}
    graphs::Vector{Graph}
    # (stream handle, event handle) per stream launched on: the event marks the
    # end of the last run there. Both C references are the executable's own
    # (no Julia objects: finalizers run in no order).
    runs::Vector{Tuple{Ptr{Cvoid},Ptr{Cvoid}}}
    runs_lock::ReentrantLock
end
function _release(e::GraphExec, p)
    # No lock: close() runs this when no call is in flight on `e` (Handle), a
    # finalizer when nothing can reach `e`. Blocks until the runs are done.
    for (s, ev) in e.runs
        L.cuabi_event_synchronize(ev)
        L.cuabi_event_release(ev)
        L.cuabi_stream_release(s)
    end
    empty!(e.runs)
    L.cuabi_graph_exec_release(p)
end

const _CAPTURE_MODES = Dict(:global => L.CUABI_CAPTURE_MODE_GLOBAL,
                            :thread_local => L.CUABI_CAPTURE_MODE_THREAD_LOCAL,
                            :relaxed => L.CUABI_CAPTURE_MODE_RELAXED)

function _capture_mode(mode::Symbol)
    haskey(_CAPTURE_MODES, mode) ||
        throw(ArgumentError("capture mode must be :global, :thread_local or :relaxed, not :$mode"))
    _CAPTURE_MODES[mode]
end

"""
    capture(f, stream; mode = :global) -> Graph

Record the work `f()` queues on `stream` (cuabi launches, copies, memsets,
allocations and frees on a stream-ordered resource, event records) into a
graph instead of running it. When `f` throws, the capture is ended and no
graph is made.
"""
function capture(f, s::Stream; mode::Symbol = :global)
    check(L.cuabi_graph_capture_begin(s, _capture_mode(mode)))
    out = Ref{Ptr{Cvoid}}(C_NULL)
    try
        f()
    catch
        L.cuabi_graph_capture_end(out, s)
        out[] == C_NULL || L.cuabi_graph_release(out[])
        rethrow()
    end
    check(L.cuabi_graph_capture_end(out, s))
    _own(Graph, out[], Any[])
end

"`:none`, `:active` or `:invalidated`."
function capture_status(s::Stream)
    v = Ref{L.cuabi_capture_status}(0)
    check(L.cuabi_graph_capture_status(v, s))
    v[] == L.CUABI_CAPTURE_STATUS_ACTIVE ? :active :
        v[] == L.CUABI_CAPTURE_STATUS_INVALIDATED ? :invalidated : :none
end

# ------------------------------------------------------------------ nodes

_node(p::Ptr{Cvoid}) = _own(GraphNode, p)

function _add(f, g::Graph, deps)
    _inuse(deps...) do
        ds = Ptr{Cvoid}[Base.unsafe_convert(Ptr{Cvoid}, d) for d in deps]
        GC.@preserve deps ds _node(_create(out -> f(out, isempty(ds) ? Ptr{Ptr{Cvoid}}(C_NULL) : pointer(ds),
                                                    length(ds))))
    end
end

"Number of nodes."
function Base.length(g::Graph)
    n = Ref{Csize_t}(0)
    check(L.cuabi_graph_node_count(n, g))
    Int(n[])
end

"The `i`-th node (1-based, in the order added, or captured); `g[i]` is the same."
function node(g::Graph, i::Integer)
    1 <= i <= length(g) || throw(BoundsError(g, i))
    _node(_create(out -> L.cuabi_graph_node_at(out, g, i - 1)))
end
Base.getindex(g::Graph, i::Integer) = node(g, i)
Base.firstindex(::Graph) = 1
Base.lastindex(g::Graph) = length(g)
nodes(g::Graph) = [node(g, i) for i in 1:length(g)]

const _NODE_KINDS = Dict(0 => :kernel, 1 => :memcpy, 2 => :memset, 3 => :host, 4 => :graph,
                         5 => :empty, 6 => :event_wait, 7 => :event_record, 8 => :semaphore_signal,
                         9 => :semaphore_wait, 10 => :mem_alloc, 11 => :mem_free,
                         12 => :batch_mem_op, 13 => :conditional)

"The node's kind (`:kernel`, `:memcpy`, `:memset`, `:host`, ...)."
function kind(n::GraphNode)
    v = Ref{L.cuabi_graph_node_kind}(0)
    check(L.cuabi_graph_node_type(v, n))
    get(_NODE_KINDS, Int(v[]), :unknown)
end

"The nodes `n` depends on."
function dependencies(n::GraphNode)
    c = Ref{Csize_t}(0)
    check(L.cuabi_graph_node_dependency_count(c, n))
    [_node(_create(out -> L.cuabi_graph_node_dependency(out, n, i))) for i in 0:Int(c[])-1]
end

"The nodes that depend on `n`."
function dependents(n::GraphNode)
    c = Ref{Csize_t}(0)
    check(L.cuabi_graph_node_dependent_count(c, n))
    [_node(_create(out -> L.cuabi_graph_node_dependent(out, n, i))) for i in 0:Int(c[])-1]
end

"""
    add_kernel!(g, kernel, pack, config; deps = ())

A kernel node: `kernel` with `pack`'s current values (copied now) and the
configuration's grid, block, shared memory and attributes; its stream or
device names the device.
"""
add_kernel!(g::Graph, k::Kernel, pack::ArgPack, c::LaunchConfig; deps = ()) =
    _inuse(_config_handles(c)...) do
        GC.@preserve c _add((o, d, n) -> L.cuabi_graph_add_kernel(o, g, d, n, k, pack, Ref(_config(c))), g, deps)
    end

"""
    add_memcpy!(g, dst, src; deps = (), size, dst_offset = 0, src_offset = 0)

A copy node between Buffers, from a host array (read when the node runs)
into a Buffer, from a Buffer into a host array, or between two Views. The
graph keeps the host arrays.
"""
function add_memcpy!(g::Graph, dst::Buffer, src::Buffer; deps = (), size::Integer = sizeof(src),
                     dst_offset::Integer = 0, src_offset::Integer = 0)
    _add((o, d, n) -> L.cuabi_graph_add_memcpy(o, g, d, n, dst, dst_offset, src, src_offset, size), g, deps)
end
function add_memcpy!(g::Graph, dst::Buffer, src::Array; deps = (), dst_offset::Integer = 0)
    isbitstype(eltype(src)) || throw(ArgumentError("add_memcpy!: $(eltype(src)) is not a plain-data type"))
    push!(g.keep, src)          # the node reads it at every run: the graph roots it
    _add((o, d, n) -> GC.@preserve(src, L.cuabi_graph_add_memcpy_from_host(o, g, d, n, dst, dst_offset,
                                                                           pointer(src), sizeof(src))),
         g, deps)
end
function add_memcpy!(g::Graph, dst::Array, src::Buffer; deps = (), src_offset::Integer = 0)
    isbitstype(eltype(dst)) || throw(ArgumentError("add_memcpy!: $(eltype(dst)) is not a plain-data type"))
    push!(g.keep, dst)          # written at every run: the graph roots it
    _add((o, d, n) -> GC.@preserve(dst, L.cuabi_graph_add_memcpy_to_host(o, g, d, n, pointer(dst), src,
                                                                         src_offset, sizeof(dst))),
         g, deps)
end
add_memcpy!(g::Graph, dst::View, src::View; deps = ()) =
    _add((o, d, n) -> L.cuabi_graph_add_memcpy_view(o, g, d, n, dst, src), g, deps)

"A memset node: `count` elements of `width` bytes (1, 2, 4) set to `value`."
add_memset!(g::Graph, b::Buffer, value::Integer; deps = (), width::Integer = 1,
            count::Integer = div(sizeof(b), width), offset::Integer = 0) =
    _add((o, d, n) -> L.cuabi_graph_add_memset(o, g, d, n, b, offset, UInt32(value), width, count), g, deps)

"An empty node (a join point)."
add_empty!(g::Graph; deps = ()) = _add((o, d, n) -> L.cuabi_graph_add_empty(o, g, d, n), g, deps)

"A node recording `e`."
add_event_record!(g::Graph, e::Event; deps = ()) =
    _add((o, d, n) -> L.cuabi_graph_add_event_record(o, g, d, n, e), g, deps)

"A node waiting for `e`."
add_event_wait!(g::Graph, e::Event; deps = ()) =
    _add((o, d, n) -> L.cuabi_graph_add_event_wait(o, g, d, n, e), g, deps)

"A node running a copy of `child` (taken now)."
function add_child!(g::Graph, child::Graph; deps = ())
    push!(g.keep, child)
    _add((o, d, n) -> L.cuabi_graph_add_child(o, g, d, n, child), g, deps)
end

function _host_tramp(payload::Ptr{Cvoid})::Cvoid
    f = unsafe_pointer_to_objref(payload)::Base.RefValue{Any}
    try
        f[]()
    catch e
        @error "cuabi graph host node failed" exception = e
    end
    nothing
end

"""
    add_host!(f, g; deps = ())

A host node calling `f()` on a driver thread (Julia 1.9+ adopts it) when
the graph gets there. `f` must not call CUDA; the graph keeps it.
"""
function add_host!(f, g::Graph; deps = ())
    r = Ref{Any}(f)
    push!(g.keep, r)
    cb = @cfunction(_host_tramp, Cvoid, (Ptr{Cvoid},))
    payload = pointer_from_objref(r)
    _add((o, d, n) -> L.cuabi_graph_add_host(o, g, d, n, cb, payload), g, deps)
end

"A conditional handle for `g` on `dev`; with `default`, every launch starts with it."
function conditional_handle(g::Graph, dev::Device; default::Union{Nothing,Integer} = nothing)
    h = Ref{UInt64}(0)
    flags = default === nothing ? 0 : L.CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT
    check(L.cuabi_graph_conditional_handle_create(h, g, dev, default === nothing ? 0 : default, flags))
    h[]
end

function _conditional!(g::Graph, handle::UInt64, type, count::Integer, deps)
    n = _add((o, d, k) -> L.cuabi_graph_add_conditional(o, g, d, k, handle, type, count), g, deps)
    # Body graphs share the outer graph's keep list: its executables keep them.
    bodies = [_own(Graph, _create(out -> L.cuabi_graph_node_body(out, n, i)), g.keep) for i in 0:count-1]
    (n, bodies...)
end

"A while node: returns `(node, body)`; the body runs while the handle is non-zero."
add_while!(g::Graph, handle::UInt64; deps = ()) = _conditional!(g, handle, L.CUABI_GRAPH_CONDITIONAL_WHILE, 1, deps)
"An if node: returns `(node, body)`, or `(node, then, else)` with `with_else`."
add_if!(g::Graph, handle::UInt64; deps = (), with_else::Bool = false) =
    _conditional!(g, handle, L.CUABI_GRAPH_CONDITIONAL_IF, with_else ? 2 : 1, deps)
"A switch node: returns `(node, body_0, ..., body_count-1)`."
add_switch!(g::Graph, handle::UInt64, count::Integer; deps = ()) =
    _conditional!(g, handle, L.CUABI_GRAPH_CONDITIONAL_SWITCH, count, deps)

"`after` runs after `before` (a cycle or an existing edge is refused)."
function add_dependency!(g::Graph, before::GraphNode, after::GraphNode)
    _inuse(before, after) do
        from = Ptr{Cvoid}[Base.unsafe_convert(Ptr{Cvoid}, before)]
        to = Ptr{Cvoid}[Base.unsafe_convert(Ptr{Cvoid}, after)]
        GC.@preserve before after check(L.cuabi_graph_add_dependencies(g, from, to, 1))
    end
end

function remove_dependency!(g::Graph, before::GraphNode, after::GraphNode)
    _inuse(before, after) do
        from = Ptr{Cvoid}[Base.unsafe_convert(Ptr{Cvoid}, before)]
        to = Ptr{Cvoid}[Base.unsafe_convert(Ptr{Cvoid}, after)]
        GC.@preserve before after check(L.cuabi_graph_remove_dependencies(g, from, to, 1))
    end
end

"The graph as Graphviz text."
function to_dot(g::Graph; verbose::Bool = false)
    flags = verbose ? L.CUABI_GRAPH_DOT_VERBOSE : L.CUABI_GRAPH_DOT_DEFAULT
    size = Ref{Csize_t}(0)
    st = L.cuabi_graph_debug_dot_text(C_NULL, size, g, flags)
    st == L.CUABI_ERROR_BUFFER_TOO_SMALL || check(st)
    buf = Vector{UInt8}(undef, size[])
    check(L.cuabi_graph_debug_dot_text(buf, size, g, flags))
    String(buf[1:end-1])
end

"Write the Graphviz text to `path`."
debug_dot(g::Graph, path::AbstractString; verbose::Bool = false) =
    check(L.cuabi_graph_debug_dot(g, path, verbose ? L.CUABI_GRAPH_DOT_VERBOSE : L.CUABI_GRAPH_DOT_DEFAULT))

# ------------------------------------------------------------------ executables

"""
    instantiate(g; auto_free_on_launch = false, upload_stream = nothing,
                device_launch = false, use_node_priority = false) -> GraphExec
"""
function instantiate(g::Graph; auto_free_on_launch::Bool = false, upload_stream = nothing,
                     device_launch::Bool = false, use_node_priority::Bool = false)
    flags = (auto_free_on_launch ? L.CUABI_GRAPH_INSTANTIATE_AUTO_FREE_ON_LAUNCH : 0) |
            (upload_stream === nothing ? 0 : L.CUABI_GRAPH_INSTANTIATE_UPLOAD) |
            (device_launch ? L.CUABI_GRAPH_INSTANTIATE_DEVICE_LAUNCH : 0) |
            (use_node_priority ? L.CUABI_GRAPH_INSTANTIATE_USE_NODE_PRIORITY : 0)
    o = _init(L.cuabi_graph_instantiate_options, L.cuabi_graph_instantiate_options_init,
              L.CUABI_GRAPH_INSTANTIATE_OPTIONS_VERSION)
    _inuse(upload_stream) do
        o = _with(o; flags = Cuint(flags), upload_stream = _sp(upload_stream))
        GC.@preserve upload_stream _own(GraphExec, _create(out -> L.cuabi_graph_instantiate(out, g, Ref(o))), Graph[g],
                                        Tuple{Ptr{Cvoid},Ptr{Cvoid}}[], ReentrantLock())
    end
end

"Run the executable on `s` (an event after the run lets its release wait for it)."
function launch(e::GraphExec, s::Stream)
    _inuse(e, s) do
        check(L.cuabi_graph_exec_launch(e, s))
        _record_run!(e, Base.unsafe_convert(Ptr{Cvoid}, s))
    end
end

function _record_run!(e::GraphExec, sp::Ptr{Cvoid})
    lock(e.runs_lock) do
        for (rs, ev) in e.runs
            # A later run on the same stream ends after the earlier ones.
            rs == sp && return check(L.cuabi_event_record(ev, sp))
        end
        dev = Ref{Ptr{Cvoid}}(C_NULL)
        check(L.cuabi_stream_device(dev, sp))
        o = _with(_init(L.cuabi_event_options, L.cuabi_event_options_init, L.CUABI_EVENT_OPTIONS_VERSION);
                  flags = Cuint(L.CUABI_EVENT_DISABLE_TIMING))
        ev = _create(out -> L.cuabi_event_create(out, dev[], Ref(o)))
        st = L.cuabi_stream_retain(sp)      # kept while its entry stands (no reuse of the handle)
        st == L.CUABI_SUCCESS || (L.cuabi_event_release(ev); check(st))
        push!(e.runs, (sp, ev))
        check(L.cuabi_event_record(ev, sp))
    end
end

"Block until every run launched from `e` is done."
function synchronize(e::GraphExec)
    _inuse(e) do
        lock(e.runs_lock) do
            foreach(r -> check(L.cuabi_event_synchronize(r[2])), e.runs)
        end
    end
end
"Upload it ahead of its first launch."
upload(e::GraphExec, s::Stream) = check(L.cuabi_graph_exec_upload(e, s))

"""
    update!(exe, graph) -> exe

Update in place from a graph of the same topology; a `CuABIError` with status
`CUABI_ERROR_GRAPH_UPDATE` names the node otherwise (the executable is unchanged).
"""
function update!(e::GraphExec, g::Graph)
    info = Ref(_init(L.cuabi_graph_update_info, L.cuabi_graph_update_info_init, L.CUABI_GRAPH_UPDATE_INFO_VERSION))
    check(L.cuabi_graph_exec_update(e, g, info))
    push!(e.graphs, g)
    e
end

"New arguments (and, with `config`, grid/block/shared memory) for one kernel node, without re-instantiating."
update_kernel!(e::GraphExec, n::GraphNode, pack::ArgPack, c::Union{Nothing,LaunchConfig} = nothing) =
    _inuse((c === nothing ? () : _config_handles(c))...) do
        GC.@preserve c check(L.cuabi_graph_exec_update_kernel(e, n, pack,
                                                              c === nothing ? Ptr{L.cuabi_launch_config}(C_NULL) : Ref(_config(c))))
    end
