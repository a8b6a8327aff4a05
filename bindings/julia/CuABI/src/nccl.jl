# NCCL collectives (issue 23; docs/distributed.md), included by CuABI.jl.
# Names and argument orders follow NCCL.jl (and MPI.jl): Allreduce!,
# Broadcast!, Reduce!, Allgather!, ReduceScatter!, Send, Recv!, group;
# cuabi's extras (the timeout, init_all, synchronize) keep cuabi's names.
# Operands are Views (element type and count from the view; dense only) or
# Buffers with an element type `T` and a `count` (byte offsets as keywords).
#
#     id = nccl_unique_id()                         # 128 bytes: send to every rank
#     comm = Communicator(Device(rank), nranks, id, rank; timeout = 60)
#     Allreduce!(v, v, :sum, comm; stream = s)      # in place over a View
#     synchronize(comm, s)                          # a dead peer: an error, never a hang

"The NCCL version cuabi loads (loading it now)."
function nccl_version()
    v = Ref{Cint}(0)
    check(L.cuabi_nccl_version(v))
    VersionNumber(v[] ÷ 10000, v[] ÷ 100 % 100, v[] % 100)
end

"A new NCCL unique id: 128 bytes naming a group of ranks, to send to every rank."
function nccl_unique_id()
    r = Ref{L.cuabi_nccl_unique_id}()
    check(L.cuabi_nccl_get_unique_id(r))
    collect(r[].internal)
end

function _nccl_id(id::AbstractVector{UInt8})
    length(id) == L.CUABI_NCCL_UNIQUE_ID_BYTES ||
        throw(ArgumentError("an NCCL unique id is $(L.CUABI_NCCL_UNIQUE_ID_BYTES) bytes, not $(length(id))"))
    Ref(L.cuabi_nccl_unique_id(NTuple{Int(L.CUABI_NCCL_UNIQUE_ID_BYTES),UInt8}(id)))
end

"""
    Communicator

One rank of an NCCL communicator (`close` releases it; the finalizer does
otherwise). Used by one task at a time, except `abort`, which any task or
thread may call.
"""
mutable struct Communicator <: Handle
    ptr::Ptr{Cvoid}
end
_release(::Communicator, p) = L.cuabi_nccl_comm_release(p)

"A buffer registered with a communicator (ncclCommRegister); `close` deregisters."
mutable struct NCCLRegistration <: Handle
    ptr::Ptr{Cvoid}
    buffer::Buffer
end
_release(::NCCLRegistration, p) = L.cuabi_nccl_registration_destroy(p)

# timeout in seconds: nothing = the default (10 min or CUABI_NCCL_TIMEOUT_MS), Inf = for ever.
_timeout_ms(t) = t === nothing ? Int64(0) : isinf(t) ? Int64(-1) : max(Int64(1), round(Int64, 1000 * t))

# Options and the strings they point to (kept alive by the caller with GC.@preserve).
function _nccl_options(; timeout = nothing, nonblocking::Bool = false, cga_cluster_size::Integer = -1,
                       min_ctas::Integer = -1, max_ctas::Integer = -1, split_share::Integer = -1,
                       net_name = nothing, comm_name = nothing)
    o = _init(L.cuabi_nccl_comm_options, L.cuabi_nccl_comm_options_init, L.CUABI_NCCL_COMM_OPTIONS_VERSION)
    strs = (net_name === nothing ? nothing : Base.cconvert(Cstring, String(net_name)),
            comm_name === nothing ? nothing : Base.cconvert(Cstring, String(comm_name)))
    ptr(s) = s === nothing ? Ptr{Cchar}(C_NULL) : Ptr{Cchar}(pointer(s))
    o = _with(o; timeout_ms = _timeout_ms(timeout), nonblocking = Cint(nonblocking),
              cga_cluster_size = cga_cluster_size, min_ctas = min_ctas, max_ctas = max_ctas,
              split_share = split_share, net_name = ptr(strs[1]), comm_name = ptr(strs[2]))
    Ref(o), strs
end

"""
    Communicator(device, nranks, id, rank; timeout = nothing, nonblocking = false, net_name, comm_name, ...)

This process's rank `rank` (0-based) of `nranks` named by `id`, on `device`.
Returns when every rank has joined; `timeout` seconds (default ten minutes,
`Inf` for ever) turn a rank that never arrives into a `CuABIError` with
status `CUABI_ERROR_TIMEOUT`.
"""
function Communicator(device::Device, nranks::Integer, id::AbstractVector{UInt8}, rank::Integer; kw...)
    o, strs = _nccl_options(; kw...)
    idr = _nccl_id(id)
    GC.@preserve strs begin
        _own(Communicator, _create(out -> L.cuabi_nccl_comm_init_rank(out, device, nranks, idr, rank, o)))
    end
end

"One communicator per device of this process, rank i on `devices[i]`."
function nccl_init_all(devices::AbstractVector{Device}; kw...)
    o, strs = _nccl_options(; kw...)
    n = length(devices)
    out = fill(C_NULL, n)
    _inuse(devices...) do
        ptrs = Ptr{Cvoid}[Base.unsafe_convert(Ptr{Cvoid}, d) for d in devices]
        GC.@preserve strs ptrs out begin
            check(L.cuabi_nccl_comm_init_all(out, ptrs, n, o))
        end
    end
    [_own(Communicator, p) for p in out]
end

"""
    comm_split(comm, color; key = rank(comm), kw...) -> Communicator or nothing

ncclCommSplit (collective): ranks giving the same `color` form a new
communicator ordered by `key`; `color = nothing` takes no part and gets
`nothing`. Options as for `Communicator` (none given: `comm`'s).
"""
function comm_split(comm::Communicator, color::Union{Integer,Nothing}; key::Integer = rank(comm), kw...)
    c = color === nothing ? L.CUABI_NCCL_SPLIT_NOCOLOR : color
    out = Ref{Ptr{Cvoid}}(C_NULL)
    if isempty(kw)
        check(L.cuabi_nccl_comm_split(out, comm, c, key, C_NULL))
    else
        o, strs = _nccl_options(; kw...)
        GC.@preserve strs check(L.cuabi_nccl_comm_split(out, comm, c, key, o))
    end
    out[] == C_NULL ? nothing : _own(Communicator, out[])
end

"""
    copy(comm::Communicator)

Another reference to the same communicator, released on its own (e.g. held
by a watchdog task that may `abort` it while this one waits).
"""
function Base.copy(comm::Communicator)
    check(L.cuabi_nccl_comm_retain(comm))
    _own(Communicator, Base.unsafe_convert(Ptr{Cvoid}, comm))
end

"ncclCommFinalize (collective): afterwards only `close` may follow."
comm_finalize(comm::Communicator) = check(L.cuabi_nccl_comm_finalize(comm))

"ncclCommAbort: work in flight stops, later calls fail; any task or thread, any time."
abort(comm::Communicator) = check(L.cuabi_nccl_comm_abort(comm))

function rank(comm::Communicator)
    v = Ref{Cint}(0)
    check(L.cuabi_nccl_comm_rank(v, comm))
    Int(v[])
end

function Base.size(comm::Communicator)
    v = Ref{Cint}(0)
    check(L.cuabi_nccl_comm_size(v, comm))
    Int(v[])
end

"The communicator's device."
function device(comm::Communicator)
    d = Ref{Ptr{Cvoid}}(C_NULL)
    check(L.cuabi_nccl_comm_device(d, comm))
    check(L.cuabi_device_retain(d[]))      # the getter borrows: take our own reference
    _own(Device, d[])
end

"NCCL's ncclResult_t of asynchronous errors: 0 none, 7 in progress."
function get_async_error(comm::Communicator)
    v = Ref{Cint}(0)
    check(L.cuabi_nccl_comm_get_async_error(v, comm))
    Int(v[])
end

"""
    synchronize(comm, stream = nothing; timeout = nothing)

Wait for `stream`'s work while watching `comm`: an NCCL error, or `timeout`
seconds (default: the communicator's), aborts it and throws.
"""
synchronize(comm::Communicator, stream = nothing; timeout = nothing) =
    check(L.cuabi_nccl_comm_synchronize(comm, _so(stream), _timeout_ms(timeout)))

"ncclCommRegister: `close` on the result deregisters."
register(comm::Communicator, b::Buffer) =
    _own(NCCLRegistration, _create(out -> L.cuabi_nccl_register(out, comm, b)), b)

"""
    group(f)

`f()` between ncclGroupStart and ncclGroupEnd (several devices of this
process, or sends and receives that must pair up); the group ends even when
`f` throws.
"""
function group(f)
    check(L.cuabi_nccl_group_start())
    ok = false
    try
        r = f()
        ok = true
        return r
    finally
        st = L.cuabi_nccl_group_end()
        ok && check(st)
    end
end

# ---- operands

const _NCCL_TYPES = Dict{DataType,Int}(Int8 => 0, UInt8 => 1, Int32 => 2, UInt32 => 3, Int64 => 4,
                                       UInt64 => 5, Float16 => 6, Float32 => 7, Float64 => 8)
_nccl_type(::Type{T}) where {T} = haskey(_NCCL_TYPES, T) ? L.cuabi_nccl_datatype(_NCCL_TYPES[T]) :
    throw(ArgumentError("NCCL has no element type $T; one of $(sort!(string.(keys(_NCCL_TYPES))))"))

const _NCCL_OPS = Dict{Any,Int}(:sum => 0, :prod => 1, :max => 2, :min => 3, :avg => 4,
                                (+) => 0, (*) => 1, max => 2, min => 3)
_nccl_op(op) = haskey(_NCCL_OPS, op) ? L.cuabi_nccl_op(_NCCL_OPS[op]) :
    throw(ArgumentError("unknown reduction $op; :sum, :prod, :max, :min, :avg or +, *, max, min"))

_vo(v) = v === nothing ? Ptr{Cvoid}(C_NULL) : v
_bo(b) = b === nothing ? Ptr{Cvoid}(C_NULL) : b

# In place when the send operand is the receive one (or nothing).
_inplace(send, recv) = send === nothing || send === recv

# ---- collectives over views (type and count from the views)

"recvbuf = op over every rank's sendbuf (`sendbuf === recvbuf` or `nothing`: in place)."
function Allreduce!(sendbuf::Union{View,Nothing}, recvbuf::View, op, comm::Communicator; stream = nothing)
    check(L.cuabi_nccl_all_reduce_view(comm, _inplace(sendbuf, recvbuf) ? C_NULL : sendbuf, recvbuf,
                                       _nccl_op(op), _so(stream)))
    recvbuf
end

"recvbuf of every rank = sendbuf of `root` (0-based)."
function Broadcast!(sendbuf::Union{View,Nothing}, recvbuf::View, comm::Communicator; root::Integer = 0,
                    stream = nothing)
    check(L.cuabi_nccl_broadcast_view(comm, _inplace(sendbuf, recvbuf) ? C_NULL : sendbuf, recvbuf, root,
                                      _so(stream)))
    recvbuf
end

"recvbuf of `root` = op over every rank's sendbuf (recvbuf may be `nothing` elsewhere)."
function Reduce!(sendbuf::View, recvbuf::Union{View,Nothing}, op, comm::Communicator; root::Integer = 0,
                 stream = nothing)
    check(L.cuabi_nccl_reduce_view(comm, sendbuf, _vo(recvbuf), _nccl_op(op), root, _so(stream)))
    recvbuf
end

"recvbuf (size(comm) times sendbuf's length) = every rank's sendbuf, in rank order."
function Allgather!(sendbuf::View, recvbuf::View, comm::Communicator; stream = nothing)
    check(L.cuabi_nccl_all_gather_view(comm, sendbuf, recvbuf, _so(stream)))
    recvbuf
end

"recvbuf = block `rank(comm)` of op over every rank's sendbuf (size(comm) blocks)."
function ReduceScatter!(sendbuf::View, recvbuf::View, op, comm::Communicator; stream = nothing)
    check(L.cuabi_nccl_reduce_scatter_view(comm, sendbuf, recvbuf, _nccl_op(op), _so(stream)))
    recvbuf
end

"Send sendbuf to rank `dest`."
Send(sendbuf::View, comm::Communicator; dest::Integer, stream = nothing) =
    check(L.cuabi_nccl_send_view(comm, sendbuf, dest, _so(stream)))

"Receive into recvbuf from rank `source`."
function Recv!(recvbuf::View, comm::Communicator; source::Integer, stream = nothing)
    check(L.cuabi_nccl_recv_view(comm, recvbuf, source, _so(stream)))
    recvbuf
end

# ---- collectives over buffers: element type T, count, byte offsets

function Allreduce!(sendbuf::Union{Buffer,Nothing}, recvbuf::Buffer, op, comm::Communicator; T::Type,
                    count::Integer, send_offset::Integer = 0, recv_offset::Integer = 0, stream = nothing)
    ip = _inplace(sendbuf, recvbuf) && send_offset == recv_offset
    check(L.cuabi_nccl_all_reduce(comm, ip ? C_NULL : sendbuf, send_offset, recvbuf, recv_offset, count,
                                  _nccl_type(T), _nccl_op(op), _so(stream)))
    recvbuf
end

function Broadcast!(sendbuf::Union{Buffer,Nothing}, recvbuf::Buffer, comm::Communicator; T::Type,
                    count::Integer, root::Integer = 0, send_offset::Integer = 0, recv_offset::Integer = 0,
                    stream = nothing)
    ip = _inplace(sendbuf, recvbuf) && send_offset == recv_offset
    check(L.cuabi_nccl_broadcast(comm, ip ? C_NULL : sendbuf, send_offset, recvbuf, recv_offset, count,
                                 _nccl_type(T), root, _so(stream)))
    recvbuf
end

function Reduce!(sendbuf::Buffer, recvbuf::Union{Buffer,Nothing}, op, comm::Communicator; T::Type,
                 count::Integer, root::Integer = 0, send_offset::Integer = 0, recv_offset::Integer = 0,
                 stream = nothing)
    check(L.cuabi_nccl_reduce(comm, sendbuf, send_offset, _bo(recvbuf), recv_offset, count, _nccl_type(T),
                              _nccl_op(op), root, _so(stream)))
    recvbuf
end

"Over buffers: `count` is the send count (recvbuf holds size(comm) × count)."
function Allgather!(sendbuf::Buffer, recvbuf::Buffer, comm::Communicator; T::Type, count::Integer,
                    send_offset::Integer = 0, recv_offset::Integer = 0, stream = nothing)
    check(L.cuabi_nccl_all_gather(comm, sendbuf, send_offset, recvbuf, recv_offset, count, _nccl_type(T),
                                  _so(stream)))
    recvbuf
end

"Over buffers: `count` is the receive count (sendbuf holds size(comm) × count)."
function ReduceScatter!(sendbuf::Buffer, recvbuf::Buffer, op, comm::Communicator; T::Type, count::Integer,
                        send_offset::Integer = 0, recv_offset::Integer = 0, stream = nothing)
    check(L.cuabi_nccl_reduce_scatter(comm, sendbuf, send_offset, recvbuf, recv_offset, count, _nccl_type(T),
                                      _nccl_op(op), _so(stream)))
    recvbuf
end

Send(sendbuf::Buffer, comm::Communicator; dest::Integer, T::Type, count::Integer, offset::Integer = 0,
     stream = nothing) =
    check(L.cuabi_nccl_send(comm, sendbuf, offset, count, _nccl_type(T), dest, _so(stream)))

function Recv!(recvbuf::Buffer, comm::Communicator; source::Integer, T::Type, count::Integer,
               offset::Integer = 0, stream = nothing)
    check(L.cuabi_nccl_recv(comm, recvbuf, offset, count, _nccl_type(T), source, _so(stream)))
    recvbuf
end
