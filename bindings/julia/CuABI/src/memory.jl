# Memory resources, buffers, views and DLPack exchange (included by CuABI.jl).

"""
    MemoryResource(:host) / MemoryResource(:device, dev) / MemoryResource(:pool, dev; release_threshold)
    MemoryResource(:pinned, dev) / MemoryResource(:managed, dev)

An allocator of one kind of memory; keeps its device alive.
"""
mutable struct MemoryResource <: Handle
    ptr::Ptr{Cvoid}
end
_release(::MemoryResource, p) = L.cuabi_memory_resource_release(p)

function MemoryResource(kind::Symbol, dev::Union{Device,Nothing} = nothing; release_threshold = nothing)
    kind === :host && return _own(MemoryResource, _create(out -> L.cuabi_memory_resource_host(out)))
    dev === nothing && throw(ArgumentError("MemoryResource(:$kind) needs a Device"))
    p = if kind === :device
        _create(out -> L.cuabi_memory_resource_device_default(out, dev))
    elseif kind === :pool
        o = _init(L.cuabi_memory_pool_options, L.cuabi_memory_pool_options_init, L.CUABI_MEMORY_POOL_OPTIONS_VERSION)
        release_threshold === nothing || (o = _with(o; release_threshold = UInt64(release_threshold)))
        _create(out -> L.cuabi_memory_resource_pool_create(out, dev, Ref(o)))
    elseif kind === :pinned
        _create(out -> L.cuabi_memory_resource_pinned(out, dev))
    elseif kind === :managed
        _create(out -> L.cuabi_memory_resource_managed(out, dev))
    else
        throw(ArgumentError("MemoryResource: unknown kind :$kind (:host, :device, :pool, :pinned, :managed)"))
    end
    _own(MemoryResource, p)
end

"""
    Buffer(resource, nbytes; alignment = 0, stream = nothing)

A range of memory from a resource. `close(b)` (or the finalizer) destroys
the handle; the memory goes back once no view uses it.
"""
mutable struct Buffer <: Handle
    ptr::Ptr{Cvoid}
    root::Any          # what a wrapped buffer keeps alive (a Julia array), or nothing
end
_release(::Buffer, p) = L.cuabi_buffer_destroy(p)

# A stream (or event, device) for a struct field: its handle value (the
# caller holds it in use, _inuse); for a call's argument, _so: the object
# itself, which the wrapper holds in use (and ccall roots) for the call.
_sp(s) = s === nothing ? Ptr{Cvoid}(C_NULL) : Base.unsafe_convert(Ptr{Cvoid}, s)
_so(s) = s === nothing ? Ptr{Cvoid}(C_NULL) : s

function Buffer(r::MemoryResource, nbytes::Integer; alignment::Integer = 0, stream = nothing)
    _own(Buffer, _create(out -> L.cuabi_buffer_allocate(out, r, nbytes, alignment, _so(stream))), nothing)
end

# ------------------------------------------------------------------ roots

# Julia objects the C library points into, kept alive until it lets go of
# them: an array a buffer wraps (until the release callback, when the buffer
# and every view of it are gone), an array exported through DLPack (until the
# consumer's deleter). Those callbacks run wherever the last reference goes:
# in a finalizer (a View collected by the GC), on a foreign thread (Julia 1.9
# adopts it). So the table is guarded by a spin lock that never yields, held
# with finalizers disabled on this thread (a finalizer cannot interrupt a
# holder and wait for it) -- never by a ReentrantLock, whose wait would be a
# task switch inside a finalizer.
const _ROOTS = Dict{UInt,Any}()
const _ROOTS_LOCK = Threads.SpinLock()
const _ROOT_NEXT = Threads.Atomic{UInt}(1)

function _with_roots(f)
    GC.enable_finalizers(false)
    lock(_ROOTS_LOCK)
    try
        return f()
    finally
        unlock(_ROOTS_LOCK)
        GC.enable_finalizers(true)
    end
end
"Root `x` under a new key (what the C side's payload carries)."
function _root!(x)
    k = Threads.atomic_add!(_ROOT_NEXT, UInt(1))
    _with_roots(() -> (_ROOTS[k] = x; nothing))
    k
end
_unroot!(k::UInt) = _with_roots(() -> (delete!(_ROOTS, k); nothing))
_rooted(k::UInt) = _with_roots(() -> haskey(_ROOTS, k))

# A wrapped array's release: the buffer and every view of it are gone.
function _wrap_release(ptr::Cuintptr_t, size::Csize_t, payload::Ptr{Cvoid})::Cvoid
    _unroot!(UInt(payload))
    nothing
end

"""
    Buffer(a::Array)

A host buffer over a Julia array's memory (no copy). The array stays
rooted until the library releases the memory -- when the buffer and every
view, pack or graph using it are gone, whichever goes last -- so a view of
the buffer may outlive the Buffer object.
"""
function Buffer(a::Array{T}) where {T}
    isbitstype(T) || throw(ArgumentError("Buffer: $(T) is not a plain-data element type"))
    key = _root!(a)
    cb = @cfunction(_wrap_release, Cvoid, (Cuintptr_t, Csize_t, Ptr{Cvoid}))
    p = try
        GC.@preserve a _create(out -> L.cuabi_buffer_wrap(out, C_NULL, L.CUABI_MEMORY_HOST, UInt(pointer(a)),
                                                          sizeof(a), cb, Ptr{Cvoid}(key)))
    catch
        _unroot!(key)          # buffer.h: on failure nothing is called
        rethrow()
    end
    _own(Buffer, p, a)
end

function _bq(f, b, T)
    out = Ref{T}(0)
    check(f(out, b))
    out[]
end
pointer_address(b::Buffer) = _bq(L.cuabi_buffer_pointer, b, Cuintptr_t)
Base.sizeof(b::Buffer) = Int(_bq(L.cuabi_buffer_size, b, Csize_t))
kind(b::Buffer) = _bq(L.cuabi_buffer_kind, b, Cint)

"Copy a host array into the buffer at byte `offset` (synchronously, or queued on `stream`: keep `src` alive until then)."
function copyto_buffer!(b::Buffer, src::Array; offset::Integer = 0, stream = nothing)
    GC.@preserve src check(L.cuabi_buffer_copy_from_host(b, offset, pointer(src), sizeof(src), _so(stream)))
    b
end
"Copy from byte `offset` of the buffer into a host array."
function copyfrom_buffer!(dst::Array, b::Buffer; offset::Integer = 0, stream = nothing)
    GC.@preserve dst check(L.cuabi_buffer_copy_to_host(pointer(dst), b, offset, sizeof(dst), _so(stream)))
    dst
end
"The whole buffer as a `Vector{T}`."
function (::Type{Vector{T}})(b::Buffer) where {T}
    n, r = divrem(sizeof(b), sizeof(T))
    r == 0 || throw(ArgumentError("buffer of $(sizeof(b)) bytes is not a whole number of $(T)"))
    copyfrom_buffer!(Vector{T}(undef, n), b)
end
Base.copyto!(dst::Buffer, doff::Integer, src::Buffer, soff::Integer, n::Integer; stream = nothing) =
    (check(L.cuabi_buffer_copy(dst, doff, src, soff, n, _so(stream))); dst)
memset!(b::Buffer, value::Integer; width::Integer = 1, offset::Integer = 0,
        count::Integer = sizeof(b) ÷ width, stream = nothing) =
    (check(L.cuabi_buffer_memset(b, offset, UInt32(value), width, count, _so(stream))); b)
"""
Destroy the handle; the memory is freed in order on `stream`. With calls
on `b` in flight on other threads, the last of them destroys it instead
(see Handle); a refused call destroys it too (no leak) and throws.
"""
function free_async(b::Buffer, s::Stream)
    p = C_NULL
    lock(_uses_lock)
    try
        p = b.ptr
        p == C_NULL && throw(ArgumentError("Buffer is closed"))
        b.ptr = C_NULL
        if haskey(_uses, b)
            _pending[b] = p         # in flight: the last call destroys it
            p = C_NULL
        end
    finally
        unlock(_uses_lock)
    end
    p == C_NULL && return nothing
    st = try
        L.cuabi_buffer_free_async(p, s)
    catch
        L.cuabi_buffer_destroy(p)   # a closed stream: nothing was freed
        rethrow()
    end
    if st != L.CUABI_SUCCESS
        e = last_error(st)          # before the destroy below replaces it
        L.cuabi_buffer_destroy(p)   # refused before the handle went (INVALID_HANDLE if it did)
        throw(e)
    end
    nothing
end

# ------------------------------------------------------------------- views

"""
    View(buffer, T, dims; offset = 0, strides = nothing, readonly = false)

A typed, strided view of a buffer's memory. `dims` and `strides` (in
elements) are Julia's: column-major, the first dimension the fastest, the
default strides those of a dense `Array{T}` of size `dims`. The view keeps
the buffer (and so its memory) alive. Views are immutable.

Julia order is the reverse of DLPack's row-major order: a view of `size`
(3, 4) is a DLPack tensor of shape (4, 3), and `CuABI.info(v)` reports the
C/DLPack description (shape, strides, 0-based byte offset) as the library
keeps it.
"""
mutable struct View <: Handle
    ptr::Ptr{Cvoid}
    parent::Any        # the Buffer, View or export it reads (kept alive), or nothing
end
_release(::View, p) = L.cuabi_view_release(p)

_dtype(::Type{Int8}) = (0, 8); _dtype(::Type{Int16}) = (0, 16); _dtype(::Type{Int32}) = (0, 32); _dtype(::Type{Int64}) = (0, 64)
_dtype(::Type{UInt8}) = (1, 8); _dtype(::Type{UInt16}) = (1, 16); _dtype(::Type{UInt32}) = (1, 32); _dtype(::Type{UInt64}) = (1, 64)
_dtype(::Type{Float16}) = (2, 16); _dtype(::Type{Float32}) = (2, 32); _dtype(::Type{Float64}) = (2, 64)
_dtype(::Type{ComplexF32}) = (5, 64); _dtype(::Type{ComplexF64}) = (5, 128); _dtype(::Type{Bool}) = (6, 8)
_dtype(T) = throw(ArgumentError("View: no DLPack dtype for $(T)"))

const _JULIA_TYPES = Dict((0, 8) => Int8, (0, 16) => Int16, (0, 32) => Int32, (0, 64) => Int64,
                          (1, 8) => UInt8, (1, 16) => UInt16, (1, 32) => UInt32, (1, 64) => UInt64,
                          (2, 16) => Float16, (2, 32) => Float32, (2, 64) => Float64,
                          (5, 64) => ComplexF32, (5, 128) => ComplexF64, (6, 8) => Bool)

# Column-major strides of dense dims.
function _dense_strides(dims)
    st = Int64[]
    acc = Int64(1)
    for d in dims
        push!(st, acc)
        acc *= Int64(d)
    end
    st
end

function View(b::Buffer, ::Type{T}, dims; offset::Integer = 0, strides = nothing, readonly::Bool = false) where {T}
    code, bits = _dtype(T)
    jdims = Int64[d for d in dims]
    jst = strides === nothing ? _dense_strides(jdims) : Int64[s for s in strides]
    length(jst) == length(jdims) || throw(ArgumentError("View: strides and dims differ in length"))
    shape, st = reverse(jdims), reverse(jst)          # DLPack's order
    flags = readonly ? L.CUABI_VIEW_READ_ONLY : 0
    p = GC.@preserve shape st _create(out -> L.cuabi_view_create(out, b, offset, code, bits, length(shape),
                                                                 shape, st, flags))
    _own(View, p, b)
end

"""
    CuABI.info(v) -> NamedTuple

The view as the library describes it, in C/DLPack terms: `shape` and
`strides` (elements) in row-major order (the reverse of `size(v)` and
`strides(v)`), `byte_offset`, the DLPack `device_type` and `device_id`,
`dtype` as (code, bits), `eltype`, `flags`, `itemsize`, `length`.
"""
function info(v::View)
    r = Ref(_init(L.cuabi_view_info, L.cuabi_view_info_init, L.CUABI_VIEW_INFO_VERSION))
    GC.@preserve v begin
        check(L.cuabi_view_get_info(r, v))
        i = r[]
        nd = Int(i.ndim)
        # shape and strides are borrowed from the view: copied while it is preserved
        shape = nd == 0 ? Int64[] : copy(unsafe_wrap(Array, i.shape, nd))
        strides = nd == 0 ? Int64[] : copy(unsafe_wrap(Array, i.strides, nd))
    end
    (data = UInt(i.data), byte_offset = Int(i.byte_offset), device_type = Int(i.device_type),
     device_id = Int(i.device_id), dtype = (Int(i.dtype_code), Int(i.dtype_bits)), shape = shape,
     strides = strides, flags = Int(i.flags), itemsize = Int(i.itemsize), length = Int(i.size),
     eltype = get(_JULIA_TYPES, (Int(i.dtype_code), Int(i.dtype_bits)), Nothing))
end
"The view's size: column-major, the reverse of its DLPack shape."
Base.size(v::View) = Tuple(Int.(reverse(info(v).shape)))
Base.size(v::View, d::Integer) = d <= ndims(v) ? size(v)[d] : 1
"The view's strides in elements, in the order of `size(v)`."
Base.strides(v::View) = Tuple(Int.(reverse(info(v).strides)))
Base.ndims(v::View) = length(info(v).shape)
Base.length(v::View) = info(v).length
Base.eltype(v::View) = info(v).eltype
"The address of the first element (what a kernel receives)."
data_pointer(v::View) = _bq(L.cuabi_view_data_pointer, v, Cuintptr_t)
nbytes(v::View) = Int(_bq(L.cuabi_view_nbytes, v, UInt64))
"Whether the view is dense in DLPack's row-major order (in Julia order: column-major, like an Array)."
is_c_contiguous(v::View) = _bq(L.cuabi_view_is_c_contiguous, v, Cint) != 0
"Whether the view is dense in DLPack's column-major order (in Julia order: row-major)."
is_f_contiguous(v::View) = _bq(L.cuabi_view_is_f_contiguous, v, Cint) != 0

# One dimension's 1-based inclusive range -> DLPack's 0-based (start, stop, step)
# as Python's slice.indices gives them (stop exclusive; -1 is "before 0").
function _c_range(r, n::Integer, d::Integer)
    r isa Colon && return (0, n, 1)
    r isa Integer && (r = r:r)
    r isa AbstractRange{<:Integer} || throw(ArgumentError("slice: dimension $d takes a range, an integer or `:`, not $(typeof(r))"))
    s = step(r)
    if isempty(r)
        a = clamp(first(r), 1, n + 1) - 1
        return (a, a, s == 0 ? 1 : s)
    end
    (1 <= first(r) <= n && 1 <= last(r) <= n) || throw(BoundsError(1:n, r))
    (first(r) - 1, s > 0 ? last(r) : last(r) - 2, s)
end

"""
    CuABI.slice(v, ranges...)

A sub-view: one 1-based inclusive range (`2:3`, `1:2:7`, `5:-1:1`), an
integer (a dimension of length 1) or `:` per dimension, in the order of
`size(v)`. The sub-view keeps `v`'s memory alive.
"""
function slice(v::View, ranges...)
    sz = size(v)
    nd = length(sz)
    length(ranges) == nd || throw(ArgumentError("slice: $(length(ranges)) ranges for $nd dimensions"))
    c = [_c_range(ranges[d], sz[d], d) for d in 1:nd]
    # DLPack order: the last Julia dimension first.
    start = Int64[c[d][1] for d in nd:-1:1]
    stop = Int64[c[d][2] for d in nd:-1:1]
    st = Int64[c[d][3] for d in nd:-1:1]
    p = GC.@preserve start stop st _create(out -> L.cuabi_view_slice(out, v, nd, start, stop, st))
    _own(View, p, v)
end

function _host_view(v::View, what)
    i = info(v)
    T = i.eltype
    T === Nothing && throw(ArgumentError("$what: no Julia type for dtype $(i.dtype)"))
    i.device_type in (L.CUABI_DLPACK_CPU, L.CUABI_DLPACK_CUDA_HOST, L.CUABI_DLPACK_CUDA_MANAGED) ||
        throw(ArgumentError("$what: the view is not in host-accessible memory"))
    i, T
end

"""
    unsafe_array(v::View) -> AbstractArray

An array sharing a host view's memory (no copy), of `size(v)`: an `Array`
when the view is dense in Julia's column-major order (`is_c_contiguous`), a
`PermutedDimsArray` of one when it is dense the other way round. Unsafe:
keep `v` alive (`GC.@preserve v`) while the array is used.
"""
function unsafe_array(v::View)
    i, T = _host_view(v, "unsafe_array")
    p = Ptr{T}(data_pointer(v))
    if is_c_contiguous(v)
        return unsafe_wrap(Array, p, Tuple(Int.(reverse(i.shape))))
    elseif is_f_contiguous(v)
        nd = length(i.shape)
        return PermutedDimsArray(unsafe_wrap(Array, p, Tuple(Int.(i.shape))), ntuple(d -> nd - d + 1, nd))
    end
    throw(ArgumentError("unsafe_array: the view is not contiguous; copy it with collect(v)"))
end

"A copy of a host view as an `Array` of `size(v)`, any strides."
function Base.collect(v::View)
    i, T = _host_view(v, "collect")
    nd = length(i.shape)
    jst = reverse(i.strides)
    out = Array{T}(undef, Tuple(Int.(reverse(i.shape))))
    p = Ptr{T}(data_pointer(v))
    GC.@preserve v for I in CartesianIndices(out)
        off = sum((I[d] - 1) * jst[d] for d in 1:nd; init = 0)
        out[I] = unsafe_load(p, off + 1)
    end
    out
end

# ------------------------------------------------------------------ DLPack

# Julia arrays exported through DLPack stay rooted (under the tensor's
# address) until the consumer calls the deleter, which may run in a
# finalizer or on a foreign thread (Julia >= 1.9 adopts it): see _with_roots.
const _DLPACK_ROOTS = Dict{UInt,Any}()

function _dlpack_deleter(p::Ptr{L.DLManagedTensorVersioned})
    _with_roots(() -> (delete!(_DLPACK_ROOTS, UInt(p)); nothing))
    Libc.free(p)
    nothing
end

"""
    to_dlpack(a::Array) -> Ptr{DLManagedTensorVersioned}

Export a Julia array as a DLPack 1.1 host tensor sharing its memory. DLPack
is row-major: the tensor's shape is the reverse of `size(a)`, dense
(C-contiguous), so `View(a)` has `size(a)` and a row-major consumer sees the
transpose (as DLPack.jl does). The consumer owns the result and calls its
deleter once; until then the array is kept alive.
"""
function to_dlpack(a::Array{T}; readonly::Bool = false) where {T}
    code, bits = _dtype(T)
    nd = ndims(a)
    shape = Int64[reverse(size(a))...]
    strides = Int64[reverse(Base.strides(a))...]
    t = Ptr{L.DLManagedTensorVersioned}(Libc.malloc(sizeof(L.DLManagedTensorVersioned)))
    t == C_NULL && throw(OutOfMemoryError())
    deleter = @cfunction(_dlpack_deleter, Cvoid, (Ptr{L.DLManagedTensorVersioned},))
    # Rooted before the tensor can reach anyone: the deleter may run as soon as it does.
    _with_roots(() -> (_DLPACK_ROOTS[UInt(t)] = (a, shape, strides); nothing))
    GC.@preserve a shape strides begin
        tensor = L.DLTensor(Ptr{Cvoid}(pointer(a)), L.DLDevice(L.CUABI_DLPACK_CPU, 0), Int32(nd),
                            L.DLDataType(UInt8(code), UInt8(bits), UInt16(1)),
                            nd == 0 ? Ptr{Int64}(C_NULL) : pointer(shape),
                            nd == 0 ? Ptr{Int64}(C_NULL) : pointer(strides), UInt64(0))
        flags = readonly ? UInt64(L.CUABI_VIEW_READ_ONLY) : UInt64(0)
        unsafe_store!(t, L.DLManagedTensorVersioned(L.DLPackVersion(1, 1), C_NULL, deleter, flags, tensor))
    end
    t
end

"""
    View(a::Array; readonly = false)

A view of a Julia array, of `size(a)`, through a DLPack export of it (the
view owns the export; the array stays rooted while the view or anything
made from it lives).
"""
View(a::Array; readonly::Bool = false) = from_dlpack(to_dlpack(a; readonly = readonly))

"Import a DLPack 1.x tensor, taking ownership (its deleter runs once: when the view goes, or now if refused)."
from_dlpack(t::Ptr{L.DLManagedTensorVersioned}) =
    _own(View, _create(out -> L.cuabi_view_from_dlpack_versioned(out, t)), nothing)
"Import a legacy DLManagedTensor, taking ownership likewise."
from_dlpack(t::Ptr{L.DLManagedTensor}) = _own(View, _create(out -> L.cuabi_view_from_dlpack(out, t)), nothing)

"""
    from_exchange(api::Ptr{DLPackExchangeAPI}, obj::Ptr{Cvoid}) -> View

View a Python object (a `PyObject*`, e.g. a torch tensor reached through
PythonCall) through its type's DLPack C exchange table (DLPack 1.3,
`type(obj).__dlpack_c_exchange_api__`): the table's owning export, imported
with ownership. Hold the GIL. A table of an unknown version, the producer's
failure (`CUABI_ERROR_CALLBACK`) and a refused tensor raise `CuABIError`.
"""
from_exchange(api::Ptr{L.DLPackExchangeAPI}, obj::Ptr{Cvoid}) =
    _own(View, _create(out -> L.cuabi_view_from_exchange(out, api, obj)), nothing)

"Export a view as DLPack 1.1; the caller owns the result (call its deleter once)."
function to_dlpack(v::View)
    out = Ref{Ptr{L.DLManagedTensorVersioned}}(C_NULL)
    check(L.cuabi_view_to_dlpack_versioned(out, v))
    out[]
end
"Export a view as a legacy DLManagedTensor (refused for read-only views)."
function to_dlpack_legacy(v::View)
    out = Ref{Ptr{L.DLManagedTensor}}(C_NULL)
    check(L.cuabi_view_to_dlpack(out, v))
    out[]
end
"""
    dlpack_delete(t)

Dispose of a managed tensor not handed to a consumer: it is imported and
the view closed at once, so the library calls its deleter exactly once.
"""
dlpack_delete(t::Union{Ptr{L.DLManagedTensorVersioned},Ptr{L.DLManagedTensor}}) = close(from_dlpack(t))
