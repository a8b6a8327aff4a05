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

"""
    Buffer(a::Array)

A host buffer over a Julia array's memory (no copy). The array is kept
alive by the Buffer object; keep the Buffer (or views of it) alive while
the library may use the memory.
"""
function Buffer(a::Array{T}) where {T}
    isbitstype(T) || throw(ArgumentError("Buffer: $(T) is not a plain-data element type"))
    p = _create(out -> L.cuabi_buffer_wrap(out, C_NULL, L.CUABI_MEMORY_HOST, UInt(pointer(a)), sizeof(a), C_NULL, C_NULL))
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

A typed, strided view of a buffer (dims and strides in C / row-major
order, strides in elements, as in DLPack). Views are immutable.
"""
mutable struct View <: Handle
    ptr::Ptr{Cvoid}
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

function View(b::Buffer, ::Type{T}, dims; offset::Integer = 0, strides = nothing, readonly::Bool = false) where {T}
    code, bits = _dtype(T)
    shape = Int64[d for d in dims]
    st = strides === nothing ? C_NULL : Int64[s for s in strides]
    strides === nothing || length(st) == length(shape) || throw(ArgumentError("View: strides and dims differ in length"))
    flags = readonly ? L.CUABI_VIEW_READ_ONLY : 0
    _own(View, _create(out -> L.cuabi_view_create(out, b, offset, code, bits, length(shape), shape, st, flags)))
end

"Everything about a view, shape and strides copied (row-major order, strides in elements)."
function info(v::View)
    r = Ref(_init(L.cuabi_view_info, L.cuabi_view_info_init, L.CUABI_VIEW_INFO_VERSION))
    check(L.cuabi_view_get_info(r, v))
    i = r[]
    nd = Int(i.ndim)
    shape = nd == 0 ? Int64[] : copy(unsafe_wrap(Array, i.shape, nd))
    strides = nd == 0 ? Int64[] : copy(unsafe_wrap(Array, i.strides, nd))
    (data = UInt(i.data), byte_offset = Int(i.byte_offset), device_type = Int(i.device_type),
     device_id = Int(i.device_id), dtype = (Int(i.dtype_code), Int(i.dtype_bits)), shape = shape,
     strides = strides, flags = Int(i.flags), itemsize = Int(i.itemsize), length = Int(i.size),
     eltype = get(_JULIA_TYPES, (Int(i.dtype_code), Int(i.dtype_bits)), Nothing))
end
Base.size(v::View) = Tuple(info(v).shape)
Base.ndims(v::View) = length(info(v).shape)
Base.eltype(v::View) = info(v).eltype
data_pointer(v::View) = _bq(L.cuabi_view_data_pointer, v, Cuintptr_t)
nbytes(v::View) = Int(_bq(L.cuabi_view_nbytes, v, UInt64))
is_c_contiguous(v::View) = _bq(L.cuabi_view_is_c_contiguous, v, Cint) != 0
is_f_contiguous(v::View) = _bq(L.cuabi_view_is_f_contiguous, v, Cint) != 0

"""
    slice(v, ranges...)

A sub-view from one 0-based `start:step:stop` range per dimension
(half-open at `stop`, as Python's slice.indices gives them).
"""
function slice(v::View, start::AbstractVector, stop::AbstractVector, step = nothing)
    nd = length(start)
    st = step === nothing ? C_NULL : Int64[s for s in step]
    _own(View, _create(out -> L.cuabi_view_slice(out, v, nd, Int64[s for s in start], Int64[s for s in stop], st)))
end

"""
    unsafe_array(v::View) -> Array

A Julia array sharing a host view's memory (no copy). DLPack shapes are
row-major, Julia arrays column-major, so a C-contiguous view of dims
(d1, ..., dn) comes back with dims (dn, ..., d1) (a free transpose);
an F-contiguous view keeps its dims. Unsafe: keep `v` alive (GC.@preserve)
while the array is used.
"""
function unsafe_array(v::View)
    i = info(v)
    i.device_type in (L.CUABI_DLPACK_CPU, L.CUABI_DLPACK_CUDA_HOST, L.CUABI_DLPACK_CUDA_MANAGED) ||
        throw(ArgumentError("unsafe_array: the view is not in host-accessible memory"))
    T = i.eltype
    T === Nothing && throw(ArgumentError("unsafe_array: no Julia type for dtype $(i.dtype)"))
    p = Ptr{T}(data_pointer(v))
    if is_f_contiguous(v)
        return unsafe_wrap(Array, p, Tuple(Int.(i.shape)))
    elseif is_c_contiguous(v)
        return unsafe_wrap(Array, p, Tuple(Int.(reverse(i.shape))))
    end
    throw(ArgumentError("unsafe_array: the view is not contiguous; copy it with collect(v)"))
end

"Copy a host view into a new Julia array with the view's (row-major) dims, any strides."
function Base.collect(v::View)
    i = info(v)
    T = i.eltype
    T === Nothing && throw(ArgumentError("collect: no Julia type for dtype $(i.dtype)"))
    i.device_type in (L.CUABI_DLPACK_CPU, L.CUABI_DLPACK_CUDA_HOST, L.CUABI_DLPACK_CUDA_MANAGED) ||
        throw(ArgumentError("collect: the view is not in host-accessible memory"))
    out = Array{T}(undef, Tuple(Int.(i.shape)))
    p = Ptr{T}(data_pointer(v))
    GC.@preserve v for I in CartesianIndices(out)
        off = sum((I[d] - 1) * i.strides[d] for d in 1:length(i.shape); init = 0)
        out[I] = unsafe_load(p, off + 1)
    end
    out
end

# ------------------------------------------------------------------ DLPack

# Julia arrays exported through DLPack stay rooted here until the consumer
# calls the deleter. The deleter runs Julia code: call it from a Julia thread
# (or Julia >= 1.9, which adopts foreign threads).
const _DLPACK_ROOTS = Dict{Ptr{Cvoid},Any}()
const _DLPACK_LOCK = ReentrantLock()

function _dlpack_deleter(p::Ptr{L.DLManagedTensorVersioned})
    lock(_DLPACK_LOCK) do
        delete!(_DLPACK_ROOTS, Ptr{Cvoid}(p))
    end
    Libc.free(p)
    nothing
end

"""
    to_dlpack(a::Array) -> Ptr{DLManagedTensorVersioned}

Export a Julia array as a DLPack 1.1 host tensor sharing its memory. A
Julia array is column-major: the tensor has the array's dims with strides
(1, size(a,1), ...) in elements. The consumer owns the result and calls its
deleter once; until then the array is kept alive.
"""
function to_dlpack(a::Array{T}; readonly::Bool = false) where {T}
    code, bits = _dtype(T)
    nd = ndims(a)
    shape = Int64[size(a)...]
    strides = Int64[Base.strides(a)...]
    t = Ptr{L.DLManagedTensorVersioned}(Libc.malloc(sizeof(L.DLManagedTensorVersioned)))
    t == C_NULL && throw(OutOfMemoryError())
    deleter = @cfunction(_dlpack_deleter, Cvoid, (Ptr{L.DLManagedTensorVersioned},))
    tensor = L.DLTensor(Ptr{Cvoid}(pointer(a)), L.DLDevice(L.CUABI_DLPACK_CPU, 0), Int32(nd),
                        L.DLDataType(UInt8(code), UInt8(bits), UInt16(1)),
                        nd == 0 ? Ptr{Int64}(C_NULL) : pointer(shape),
                        nd == 0 ? Ptr{Int64}(C_NULL) : pointer(strides), UInt64(0))
    flags = readonly ? UInt64(L.CUABI_VIEW_READ_ONLY) : UInt64(0)
    unsafe_store!(t, L.DLManagedTensorVersioned(L.DLPackVersion(1, 1), C_NULL, deleter, flags, tensor))
    lock(_DLPACK_LOCK) do
        _DLPACK_ROOTS[Ptr{Cvoid}(t)] = (a, shape, strides)
    end
    t
end

"""
    View(a::Array; readonly = false)

A view of a Julia array, through a DLPack export of it (the view owns the
export; the array stays alive while the view does).
"""
View(a::Array; readonly::Bool = false) = from_dlpack(to_dlpack(a; readonly = readonly))

"Import a DLPack 1.x tensor, taking ownership (its deleter runs once: when the view goes, or now if refused)."
from_dlpack(t::Ptr{L.DLManagedTensorVersioned}) =
    _own(View, _create(out -> L.cuabi_view_from_dlpack_versioned(out, t)))
"Import a legacy DLManagedTensor, taking ownership likewise."
from_dlpack(t::Ptr{L.DLManagedTensor}) = _own(View, _create(out -> L.cuabi_view_from_dlpack(out, t)))

"""
    from_exchange(api::Ptr{DLPackExchangeAPI}, obj::Ptr{Cvoid}) -> View

View a Python object (a `PyObject*`, e.g. a torch tensor reached through
PythonCall) through its type's DLPack C exchange table (DLPack 1.3,
`type(obj).__dlpack_c_exchange_api__`): the table's owning export, imported
with ownership. Hold the GIL. A table of an unknown version, the producer's
failure (`CUABI_ERROR_CALLBACK`) and a refused tensor raise `CuABIError`.
"""
from_exchange(api::Ptr{L.DLPackExchangeAPI}, obj::Ptr{Cvoid}) =
    _own(View, _create(out -> L.cuabi_view_from_exchange(out, api, obj)))

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
