# Virtual memory, pool statistics, managed memory and batched copies (issue 25;
# docs/memory.md), included by CuABI.jl.

const _VMM_HANDLES = Dict(:posix_fd => L.CUABI_VMM_HANDLE_POSIX_FD, :fabric => L.CUABI_VMM_HANDLE_FABRIC,
                          :none => L.CUABI_VMM_HANDLE_NONE)

"""
    vmm_resource(d; reserve_size = 0, handle_type = :posix_fd) -> MemoryResource

Device memory through virtual memory management: each buffer reserves
`reserve_size` bytes of address space (at least its size) and grows in place
up to it (`vmm_resize!`). Sizes round up to `vmm_granularity(d)`.
"""
function vmm_resource(d::Device; reserve_size::Integer = 0, handle_type::Symbol = :posix_fd)
    o = _init(L.cuabi_vmm_options, L.cuabi_vmm_options_init, L.CUABI_VMM_OPTIONS_VERSION)
    o = _with(o; reserve_size = UInt64(reserve_size), handle_type = _VMM_HANDLES[handle_type])
    _own(MemoryResource, _create(out -> L.cuabi_vmm_resource_create(out, d, Ref(o))))
end

"The allocation granularity of `d`'s VMM memory (the default options)."
function vmm_granularity(d::Device)
    v = Ref{Csize_t}(0)
    check(L.cuabi_vmm_granularity(v, d, C_NULL))
    Int(v[])
end

"A VMM buffer of `nbytes` that can grow in place up to `reserve` (0: the resource's reserve_size)."
vmm_buffer(r::MemoryResource, nbytes::Integer; reserve::Integer = 0) =
    _own(Buffer, _create(out -> L.cuabi_vmm_buffer_allocate(out, r, nbytes, reserve)), nothing)

"Grow or shrink a VMM buffer in place (its address stays); a shrink synchronises `stream` (nothing: the device)."
vmm_resize!(b::Buffer, nbytes::Integer; stream = nothing) =
    (check(L.cuabi_vmm_buffer_resize(b, nbytes, _so(stream))); b)

"What a VMM buffer is now: address, requested, size, mapped, reserved, granularity, chunks, ..."
function vmm_info(b::Buffer)
    r = Ref(_init(L.cuabi_vmm_info, L.cuabi_vmm_info_init, L.CUABI_VMM_INFO_VERSION))
    check(L.cuabi_vmm_buffer_info(r, b))
    i = r[]
    (address = UInt(i.address), requested = Int(i.requested), size = Int(i.size), mapped = Int(i.mapped),
     reserved = Int(i.reserved), granularity = Int(i.granularity), chunks = Int(i.chunks),
     imported = i.imported != 0)
end

"Give device `d` this access (`:rw`, `:r`, `:none`) to a VMM buffer (and the chunks it grows by)."
vmm_set_access!(b::Buffer, d::Device, access::Symbol = :rw) =
    (check(L.cuabi_vmm_set_access(b, d, _PEER_ACCESS[access])); b)

const _POOL_ATTRIBUTES = Dict(
    :reuse_follow_event_dependencies => L.CUABI_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES,
    :reuse_allow_opportunistic => L.CUABI_POOL_REUSE_ALLOW_OPPORTUNISTIC,
    :reuse_allow_internal_dependencies => L.CUABI_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
    :release_threshold => L.CUABI_POOL_RELEASE_THRESHOLD,
    :reserved_mem_current => L.CUABI_POOL_RESERVED_MEM_CURRENT,
    :reserved_mem_high => L.CUABI_POOL_RESERVED_MEM_HIGH,
    :used_mem_current => L.CUABI_POOL_USED_MEM_CURRENT,
    :used_mem_high => L.CUABI_POOL_USED_MEM_HIGH)

"One pool statistic or attribute (`:used_mem_current`, `:reserved_mem_high`, `:release_threshold`, ...)."
function pool_attribute(r::MemoryResource, a::Symbol)
    v = Ref{UInt64}(0)
    check(L.cuabi_pool_get_attribute(v, r, _POOL_ATTRIBUTES[a]))
    v[]
end

"Set a reuse policy (0/1), the release threshold, or a high-water mark to 0 (a reset)."
set_pool_attribute!(r::MemoryResource, a::Symbol, value::Integer) =
    (check(L.cuabi_pool_set_attribute(r, _POOL_ATTRIBUTES[a], UInt64(value))); r)

"Both high-water marks back to the current figures."
reset_high_water!(r::MemoryResource) = (check(L.cuabi_pool_reset_high_water(r)); r)

"The pool's statistics as one line for logs."
function pool_summary(r::MemoryResource)
    st = Ref(_init(L.cuabi_pool_stats, L.cuabi_pool_stats_init, L.CUABI_POOL_STATS_VERSION))
    check(L.cuabi_pool_stats_get(st, r))
    n = Ref{Csize_t}(512)
    out = zeros(UInt8, 512)
    check(L.cuabi_pool_stats_format(out, n, st))
    String(out[1:n[]-1])
end

const _LOCATIONS = Dict(:device => L.CUABI_LOCATION_DEVICE, :host => L.CUABI_LOCATION_HOST,
                        :host_numa => L.CUABI_LOCATION_HOST_NUMA, :none => L.CUABI_LOCATION_NONE)

"Prefetch `nbytes` at `offset` of a managed buffer to `location` (`:device` with an ordinal, `:host`)."
managed_prefetch!(b::Buffer, location::Symbol = :device, id::Integer = 0; offset::Integer = 0,
                  nbytes::Integer = sizeof(b) - offset, stream = nothing) =
    (check(L.cuabi_managed_prefetch(b, offset, nbytes, _LOCATIONS[location], id, _so(stream))); b)

const _ADVICE = Dict(:read_mostly => L.CUABI_MANAGED_SET_READ_MOSTLY,
                     :unset_read_mostly => L.CUABI_MANAGED_UNSET_READ_MOSTLY,
                     :preferred_location => L.CUABI_MANAGED_SET_PREFERRED_LOCATION,
                     :unset_preferred_location => L.CUABI_MANAGED_UNSET_PREFERRED_LOCATION,
                     :accessed_by => L.CUABI_MANAGED_SET_ACCESSED_BY,
                     :unset_accessed_by => L.CUABI_MANAGED_UNSET_ACCESSED_BY)

"Advice about a whole managed buffer (`:read_mostly`, `:preferred_location`, `:accessed_by`, their `:unset_*`)."
managed_advise!(b::Buffer, advice::Symbol, location::Symbol = :none, id::Integer = 0) =
    (check(L.cuabi_managed_advise(b, 0, sizeof(b), _ADVICE[advice], _LOCATIONS[location], id)); b)

"""
    copy_batch!(pairs, stream) -> NamedTuple

Copy each `(dst::Buffer, src::Buffer)` pair (whole buffers, equal sizes) in
one cuMemcpyBatchAsync on `stream` (one copy each on older drivers: `path`
says which).
"""
function copy_batch!(pairs, stream::Stream)
    items = L.cuabi_copy_item[]
    for (dst, src) in pairs
        sizeof(dst) == sizeof(src) || throw(ArgumentError("copy_batch!: $(sizeof(src)) bytes into $(sizeof(dst))"))
        it = _init(L.cuabi_copy_item, L.cuabi_copy_item_init, L.CUABI_COPY_ITEM_VERSION)
        push!(items, _with(it; dst_buffer = Base.unsafe_convert(Ptr{Cvoid}, dst),
                           src_buffer = Base.unsafe_convert(Ptr{Cvoid}, src), size = Csize_t(sizeof(src))))
    end
    r = Ref(_init(L.cuabi_copy_result, L.cuabi_copy_result_init, L.CUABI_COPY_RESULT_VERSION))
    GC.@preserve pairs check(L.cuabi_copy_batch(r, items, length(items), stream))
    x = r[]
    (path = x.path == L.CUABI_COPY_PATH_BATCHED ? :batched : x.path == L.CUABI_COPY_PATH_SINGLE ? :single : :none,
     copies = Int(x.copies), bytes = Int(x.bytes), driver_calls = Int(x.driver_calls),
     reason = x.reason == C_NULL ? "" : unsafe_string(x.reason))
end
