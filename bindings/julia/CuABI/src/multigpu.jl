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
    check(L.cuabi_peer_copy(dst, dst_offset, src, src_offset, nbytes, _sp(stream)))
    dst
end

"Copy every element of the view `src` (device memory, any device) into `dst` (cuMemcpy3DPeer)."
function copy_peer!(dst::View, src::View; stream = nothing)
    check(L.cuabi_peer_copy_view(dst, src, _sp(stream)))
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

"What an IPC descriptor describes (`:memory` or `:event`), checking its framing without the driver."
function ipc_descriptor_kind(d::Vector{UInt8})
    k = Ref{L.cuabi_ipc_kind}(L.CUABI_IPC_MEMORY)
    check(L.cuabi_ipc_descriptor_kind(k, d, length(d)))
    k[] == L.CUABI_IPC_EVENT ? :event : :memory
end
