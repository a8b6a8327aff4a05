# Several GPUs and processes (issue 15): peer access and attributes, peer
# copies of buffers and strided views, pool access from other devices, and
# IPC descriptors of buffers and events (included by CuABI.jl).

"Let kernels on `d` reach memory allocated on `peer` (one direction; twice is fine)."
enable_peer_access(d::Device, peer::Device) = check(L.cuabi_peer_enable(d, peer))
disable_peer_access(d::Device, peer::Device) = check(L.cuabi_peer_disable(d, peer))

const _PEER_ATTRIBUTES = Dict(:performance_rank => L.CUABI_PEER_PERFORMANCE_RANK,
                              :access_supported => L.CUABI_PEER_ACCESS_SUPPORTED,
                              :native_atomic_supported => L.CUABI_PEER_NATIVE_ATOMIC_SUPPORTED,
                              :cuda_array_access_supported => L.CUABI_PEER_CUDA_ARRAY_ACCESS_SUPPORTED)

"One attribute (`:access_supported`, `:native_atomic_supported`, ...) of the direction `d` -> `peer`."
function peer_attribute(d::Device, peer::Device, attribute::Symbol = :access_supported)
    v = Ref{Cint}(0)
    check(L.cuabi_peer_get_attribute(v, d, peer, _PEER_ATTRIBUTES[attribute]))
    Int(v[])
end

const _PEER_ACCESS = Dict(:none => L.CUABI_PEER_ACCESS_NONE, :r => L.CUABI_PEER_ACCESS_READ,
                          :rw => L.CUABI_PEER_ACCESS_READ_WRITE)

"Set the access (`:rw`, `:r`, `:none`) device `d` has to a pool resource's memory."
set_peer_access!(r::MemoryResource, d::Device, access::Symbol = :rw) =
    check(L.cuabi_peer_set_pool_access(r, d, _PEER_ACCESS[access]))

function peer_access(r::MemoryResource, d::Device)
    v = Ref{L.cuabi_peer_access}(L.CUABI_PEER_ACCESS_NONE)
    check(L.cuabi_peer_get_pool_access(v, r, d))
    only(k for (k, x) in _PEER_ACCESS if x == v[])
end

"Device memory other processes can import (cuMemAlloc; not stream-ordered)."
ipc_resource(d::Device) = _own(MemoryResource, _create(out -> L.cuabi_ipc_memory_resource(out, d)))

"Copy `nbytes` of device memory from `src` (any device) into `dst` (cuMemcpyPeer)."
function copy_peer!(dst::Buffer, src::Buffer; nbytes::Integer = sizeof(src), dst_offset::Integer = 0,
                    src_offset::Integer = 0, stream = nothing)
    check(L.cuabi_peer_copy(dst, dst_offset, src, src_offset, nbytes, _so(stream)))
    dst
end

"Copy every element of the view `src` (device memory, any device) into `dst` (cuMemcpy3DPeer)."
function copy_peer!(dst::View, src::View; stream = nothing)
    check(L.cuabi_peer_copy_view(dst, src, _so(stream)))
    dst
end

"The IPC descriptor (bytes) of a buffer of `ipc_resource` memory, or of an IPC event."
function ipc_export(b::Buffer)
    out = zeros(UInt8, L.CUABI_IPC_DESCRIPTOR_SIZE)
    check(L.cuabi_ipc_buffer_export(out, length(out), b))
    out
end

function ipc_export(e::Event)
    out = zeros(UInt8, L.CUABI_IPC_DESCRIPTOR_SIZE)
    check(L.cuabi_ipc_event_export(out, length(out), e))
    out
end

"Map memory another process exported, as a Buffer (the mapping lasts until it and its views are gone)."
ipc_import_buffer(d::Vector{UInt8}) =
    _own(Buffer, _create(out -> L.cuabi_ipc_buffer_import(out, d, length(d))), nothing)

"An event other processes can import and wait on (interprocess, no timing)."
ipc_event(d::Device) = _own(Event, _create(out -> L.cuabi_ipc_event_create(out, d)))

"Open an event another process exported."
ipc_import_event(d::Vector{UInt8}) = _own(Event, _create(out -> L.cuabi_ipc_event_import(out, d, length(d))))

const _IPC_KINDS = Dict(L.CUABI_IPC_MEMORY => :memory, L.CUABI_IPC_EVENT => :event,
                        L.CUABI_IPC_POOL => :pool, L.CUABI_IPC_POOL_MEMORY => :pool_memory)

"What an IPC descriptor describes (`:memory`, `:event`, `:pool`, `:pool_memory`), checking its framing without the driver."
function ipc_descriptor_kind(d::Vector{UInt8})
    k = Ref{L.cuabi_ipc_kind}(L.CUABI_IPC_MEMORY)
    check(L.cuabi_ipc_descriptor_kind(k, d, length(d)))
    _IPC_KINDS[k[]]
end

# ---- IPC-enabled pools: the pool's fd goes once, then each buffer is a descriptor

"""
    ipc_pool(d; max_size = 0, release_threshold = nothing)

A stream-ordered pool other processes can map (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR):
allocate with `Buffer(pool, n; stream)`, export it once with `ipc_pool_export`, its buffers
with `ipc_export`.
"""
function ipc_pool(d::Device; max_size::Integer = 0, release_threshold = nothing)
    o = _init(L.cuabi_ipc_pool_options, L.cuabi_ipc_pool_options_init, L.CUABI_IPC_POOL_OPTIONS_VERSION)
    o = _with(o; max_size = UInt64(max_size))
    release_threshold === nothing || (o = _with(o; release_threshold = UInt64(release_threshold)))
    _own(MemoryResource, _create(out -> L.cuabi_ipc_pool_create(out, d, Ref(o))))
end

"Export an IPC pool: `(fd, descriptor)`; the fd is yours to send (`ipc_send_fd`) and close."
function ipc_pool_export(r::MemoryResource)
    fd = Ref{Cint}(-1)
    out = zeros(UInt8, L.CUABI_IPC_DESCRIPTOR_SIZE)
    check(L.cuabi_ipc_pool_export(fd, out, length(out), r))
    (Int(fd[]), out)
end

"Map a pool another process exported from its fd (not closed) and descriptor; it receives buffers only."
ipc_pool_import(fd::Integer, d::Vector{UInt8}) =
    _own(MemoryResource, _create(out -> L.cuabi_ipc_pool_import(out, fd, d, length(d))))

"Import a buffer of the pool `r` maps from its descriptor (freed when it and its views are gone)."
ipc_import_buffer(r::MemoryResource, d::Vector{UInt8}) =
    _own(Buffer, _create(out -> L.cuabi_ipc_pool_buffer_import(out, r, d, length(d))), nothing)

"The IPC descriptors of many buffers in one call, end to end (`ipc_export` of each); 1 to 65536 buffers."
function ipc_export_buffers(bufs::AbstractVector{Buffer})
    out = zeros(UInt8, length(bufs) * L.CUABI_IPC_DESCRIPTOR_SIZE)
    _inuse(bufs...) do
        ptrs = Ptr{L.cuabi_buffer}[Ptr{L.cuabi_buffer}(Base.unsafe_convert(Ptr{Cvoid}, b)) for b in bufs]
        GC.@preserve bufs ptrs out check(L.cuabi_ipc_buffers_export(out, length(out), ptrs, length(ptrs)))
    end
    out
end

"""
Import many buffers of the pool `r` maps from descriptors laid end to end, in
one call, all or nothing (an error names the refused descriptor; then no
buffer stays imported).
"""
function ipc_import_buffers(r::MemoryResource, d::Vector{UInt8})
    n = div(length(d), L.CUABI_IPC_DESCRIPTOR_SIZE)
    out = fill(Ptr{L.cuabi_buffer}(C_NULL), max(n, 1))
    GC.@preserve d out check(L.cuabi_ipc_pool_buffers_import(out, Ptr{UInt64}(C_NULL), r, d, length(d), n))
    [_own(Buffer, Ptr{Cvoid}(p), nothing) for p in out]
end

const _IPC_POOL_ROLES = Dict(L.CUABI_IPC_POOL_NONE => :none, L.CUABI_IPC_POOL_EXPORTER => :exporter,
                             L.CUABI_IPC_POOL_MAPPED => :mapped)

"What `r` is to pool IPC (`:none`, `:exporter`, `:mapped`) and the pool's id."
function ipc_pool_info(r::MemoryResource)
    role = Ref{L.cuabi_ipc_pool_role}(L.CUABI_IPC_POOL_NONE)
    id = Ref{UInt64}(0)
    check(L.cuabi_ipc_pool_info(role, id, r))
    (_IPC_POOL_ROLES[role[]], id[])
end

"Send the file descriptor `fd` and the bytes `d` in one message over the unix socket `sock` (SCM_RIGHTS)."
ipc_send_fd(sock::Integer, fd::Integer, d::Vector{UInt8}) = check(L.cuabi_ipc_fd_send(sock, fd, d, length(d)))

"Receive what `ipc_send_fd` sent: `(fd, bytes)` with exactly `n` bytes; the fd is yours to close."
function ipc_receive_fd(sock::Integer, n::Integer = L.CUABI_IPC_DESCRIPTOR_SIZE)
    fd = Ref{Cint}(-1)
    out = zeros(UInt8, n)
    check(L.cuabi_ipc_fd_receive(fd, out, n, sock))
    (Int(fd[]), out)
end
