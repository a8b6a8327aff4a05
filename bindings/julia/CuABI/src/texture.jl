# ------------------------------------------ CUDA arrays, textures, surfaces
# (include/cuabi/array.h, texture.h, memop.h; docs/textures.md). Names are
# cuda.core's (OpaqueArray, MipmappedArray, TextureObject, SurfaceObject),
# not CUDA.jl's. Extents are in Julia order: (width, height, depth), the
# first dimension fastest, as a Julia array's memory is laid out.

const _ARRAY_FORMATS = Dict{DataType,Any}(
    UInt8 => L.CUABI_ARRAY_FORMAT_UINT8, Int8 => L.CUABI_ARRAY_FORMAT_INT8,
    UInt16 => L.CUABI_ARRAY_FORMAT_UINT16, Int16 => L.CUABI_ARRAY_FORMAT_INT16,
    UInt32 => L.CUABI_ARRAY_FORMAT_UINT32, Int32 => L.CUABI_ARRAY_FORMAT_INT32,
    Float16 => L.CUABI_ARRAY_FORMAT_FLOAT16, Float32 => L.CUABI_ARRAY_FORMAT_FLOAT32)

function _array_format(::Type{T}) where {T}
    haskey(_ARRAY_FORMATS, T) ||
        throw(ArgumentError("arrays hold 8-, 16- and 32-bit integers, Float16 and Float32, not $T"))
    _ARRAY_FORMATS[T]
end

"""
    OpaqueArray(dev, T, dims; channels = 1, layered = false, cubemap = false, surface = false)
    OpaqueArray(dev, a::Array; channels = 1, kw...)

A CUDA array of element type `T` with extents `dims` = (width[, height[,
depth]]) (depth: layers with `layered`, faces of a `cubemap`); with
`channels` 2 or 4 an element is that many values. `surface = true` lets a
`SurfaceObject` write it. The second form makes one of `a`'s size (with
channels, its first dimension is the channels) and copies `a` in.
"""
mutable struct OpaqueArray <: Handle
    ptr::Ptr{Cvoid}
end
_release(::OpaqueArray, p) = L.cuabi_array_release(p)

function _array_desc(::Type{T}, dims, channels, layered, cubemap, surface) where {T}
    d = _init(L.cuabi_array_desc, L.cuabi_array_desc_init, L.CUABI_ARRAY_DESC_VERSION)
    n = length(dims)
    1 <= n <= 3 || throw(ArgumentError("OpaqueArray: 1 to 3 extents, not $n"))
    w = dims[1]
    h = n >= 2 && !(layered && !cubemap && n == 2) ? dims[2] : 0
    dp = n == 3 ? dims[3] : (layered && !cubemap && n == 2) ? dims[2] : cubemap ? 6 : 0
    flags = (layered ? UInt32(L.CUABI_ARRAY_LAYERED) : UInt32(0)) |
            (cubemap ? UInt32(L.CUABI_ARRAY_CUBEMAP) : UInt32(0)) |
            (surface ? UInt32(L.CUABI_ARRAY_SURFACE_LDST) : UInt32(0))
    _with(d; width = w, height = h, depth = dp, format = _array_format(T), num_channels = channels,
          flags = flags)
end

function OpaqueArray(dev::Device, ::Type{T}, dims; channels::Integer = 1, layered::Bool = false,
                     cubemap::Bool = false, surface::Bool = false) where {T}
    d = Ref(_array_desc(T, Tuple(dims), channels, layered, cubemap, surface))
    _own(OpaqueArray, _create(out -> L.cuabi_array_create(out, dev, d)))
end

function OpaqueArray(dev::Device, a::Array{T}; channels::Integer = 1, kw...) where {T}
    dims = channels > 1 ? size(a)[2:end] : size(a)
    channels > 1 && size(a, 1) != channels &&
        throw(ArgumentError("OpaqueArray: with $channels channels the first dimension is the channels"))
    arr = OpaqueArray(dev, T, dims; channels = channels, kw...)
    copyto!(arr, a)
end

"What the array is: extents, format, channels, flags, element size, bytes, level, device."
function info(a::OpaqueArray)
    r = Ref(_init(L.cuabi_array_info, L.cuabi_array_info_init, L.CUABI_ARRAY_INFO_VERSION))
    check(L.cuabi_array_get_info(r, a))
    r[]
end

"Copy a Julia array (its bytes, packed) into the whole array; synchronous."
function Base.copyto!(a::OpaqueArray, src::Array{T}) where {T}
    isbitstype(T) || throw(ArgumentError("copyto!: $(T) is not a plain-data element type"))
    GC.@preserve src check(L.cuabi_array_copy_from_host(a, C_NULL, pointer(src), sizeof(src), 0, 0, C_NULL))
    a
end

"Copy the whole array into a Julia array of its size in bytes; synchronous."
function Base.copyto!(dst::Array{T}, a::OpaqueArray) where {T}
    isbitstype(T) || throw(ArgumentError("copyto!: $(T) is not a plain-data element type"))
    GC.@preserve dst check(L.cuabi_array_copy_to_host(pointer(dst), sizeof(dst), 0, 0, a, C_NULL, C_NULL))
    dst
end

"Copy a buffer's packed bytes into the array, on `stream` (or synchronously)."
Base.copyto!(a::OpaqueArray, b::Buffer; stream = nothing) =
    (check(L.cuabi_array_copy_from_buffer(a, C_NULL, b, 0, 0, 0, _so(stream))); a)

"""
    MipmappedArray(dev, T, dims, levels; channels = 1, surface = false)

A mipmapped CUDA array; `level(m, i)` (0-based, 0 the largest) is a level
as an `OpaqueArray` that keeps `m` alive.
"""
mutable struct MipmappedArray <: Handle
    ptr::Ptr{Cvoid}
end
_release(::MipmappedArray, p) = L.cuabi_mipmapped_array_release(p)

function MipmappedArray(dev::Device, ::Type{T}, dims, levels::Integer; channels::Integer = 1,
                        surface::Bool = false) where {T}
    d = Ref(_array_desc(T, Tuple(dims), channels, false, false, surface))
    _own(MipmappedArray, _create(out -> L.cuabi_mipmapped_array_create(out, dev, d, levels)))
end

level(m::MipmappedArray, i::Integer) =
    _own(OpaqueArray, _create(out -> L.cuabi_mipmapped_array_get_level(out, m, i)))

function info(m::MipmappedArray)
    r = Ref(_init(L.cuabi_array_info, L.cuabi_array_info_init, L.CUABI_ARRAY_INFO_VERSION))
    check(L.cuabi_mipmapped_array_get_info(r, m))
    r[]
end

"""
    TextureObject(a::OpaqueArray; address = :clamp, filter = :point, read = :element,
                  normalized = false, border = nothing, srgb = false, max_anisotropy = 0,
                  mipmap_filter = :point, mipmap_bias = 0, min_mipmap_level = 0,
                  max_mipmap_level = 0)
    TextureObject(m::MipmappedArray; kw...)
    TextureObject(v::View; channels = 1, kw...)

A texture object reading an array, a mipmapped array, or a view of GPU
memory in place (1-D linear, 2-D pitched). `address`: `:wrap`, `:clamp`,
`:mirror`, `:border` (one, or a tuple per dimension); `filter`: `:point` or
`:linear`; `read`: `:element` or `:normalized` (8/16-bit integers as
floats). It keeps what it reads alive; store it in an `ArgPack` `handle`
slot (`pack[slot] = tex`), which keeps it too.
"""
mutable struct TextureObject <: Handle
    ptr::Ptr{Cvoid}
end
_release(::TextureObject, p) = L.cuabi_texture_release(p)

const _ADDRESS = Dict(:wrap => L.CUABI_TEXTURE_ADDRESS_WRAP, :clamp => L.CUABI_TEXTURE_ADDRESS_CLAMP,
                      :mirror => L.CUABI_TEXTURE_ADDRESS_MIRROR, :border => L.CUABI_TEXTURE_ADDRESS_BORDER)
const _FILTER = Dict(:point => L.CUABI_TEXTURE_FILTER_POINT, :linear => L.CUABI_TEXTURE_FILTER_LINEAR)
const _READ = Dict(:element => L.CUABI_TEXTURE_READ_ELEMENT_TYPE,
                   :normalized => L.CUABI_TEXTURE_READ_NORMALIZED_FLOAT)

function _pick(d, k, what)
    haskey(d, k) || throw(ArgumentError("$what: $(repr(k)) is not one of $(join(repr.(keys(d)), ", "))"))
    d[k]
end

function _texture_desc(; address = :clamp, filter = :point, read = :element, normalized::Bool = false,
                       border = nothing, srgb::Bool = false, max_anisotropy::Integer = 0,
                       mipmap_filter = :point, mipmap_bias = 0, min_mipmap_level = 0,
                       max_mipmap_level = 0)
    d = _init(L.cuabi_texture_desc, L.cuabi_texture_desc_init, L.CUABI_TEXTURE_DESC_VERSION)
    modes = address isa Symbol ? (address, address, address) : Tuple(address)
    1 <= length(modes) <= 3 || throw(ArgumentError("address: 1 to 3 modes"))
    modes = (modes..., ntuple(_ -> :clamp, 3 - length(modes))...)
    bc = border === nothing ? (0f0, 0f0, 0f0, 0f0) : Float32.(Tuple(border))
    length(bc) == 4 || throw(ArgumentError("border: 4 values (r, g, b, a)"))
    _with(d; address_mode = Tuple(_pick(_ADDRESS, m, "address") for m in modes),
          filter_mode = _pick(_FILTER, filter, "filter"), read_mode = _pick(_READ, read, "read"),
          normalized_coords = Cint(normalized), srgb = Cint(srgb), max_anisotropy = max_anisotropy,
          mipmap_filter_mode = _pick(_FILTER, mipmap_filter, "mipmap_filter"),
          mipmap_level_bias = mipmap_bias, min_mipmap_level_clamp = min_mipmap_level,
          max_mipmap_level_clamp = max_mipmap_level, border_color = bc)
end

TextureObject(a::OpaqueArray; kw...) =
    _own(TextureObject, _create(out -> L.cuabi_texture_create_from_array(out, a, Ref(_texture_desc(; kw...)))))
TextureObject(m::MipmappedArray; kw...) =
    _own(TextureObject, _create(out -> L.cuabi_texture_create_from_mipmapped_array(out, m, Ref(_texture_desc(; kw...)))))
TextureObject(v::View; channels::Integer = 1, kw...) =
    _own(TextureObject, _create(out -> L.cuabi_texture_create_from_view(out, v, channels, Ref(_texture_desc(; kw...)))))

"""
    texture_image(v::View; channels = 1, layered = false, dev = nothing, kw...)

A texture over a new array holding a copy of the view's image (host or GPU
memory; the view's row-major shape, channels last), in one call.
"""
function texture_image(v::View; channels::Integer = 1, layered::Bool = false, dev = nothing, kw...)
    flags = layered ? UInt32(L.CUABI_ARRAY_LAYERED) : UInt32(0)
    _own(TextureObject, _create(out -> L.cuabi_texture_create_from_image(out, v, channels, flags,
                                                                         Ref(_texture_desc(; kw...)), _so(dev))))
end

"The 64-bit value a kernel's cudaTextureObject_t / cudaSurfaceObject_t parameter takes."
function object(t::TextureObject)
    v = Ref{UInt64}(0)
    check(L.cuabi_texture_object(v, t))
    v[]
end

function info(t::TextureObject)
    r = Ref(_init(L.cuabi_texture_info, L.cuabi_texture_info_init, L.CUABI_TEXTURE_INFO_VERSION))
    check(L.cuabi_texture_get_info(r, t))
    r[]
end

"""
    SurfaceObject(a::OpaqueArray)

A surface object reading and writing an array made with `surface = true`
(surf2Dread / surf2Dwrite); it keeps the array alive.
"""
mutable struct SurfaceObject <: Handle
    ptr::Ptr{Cvoid}
end
_release(::SurfaceObject, p) = L.cuabi_surface_release(p)

SurfaceObject(a::OpaqueArray) = _own(SurfaceObject, _create(out -> L.cuabi_surface_create(out, a)))

function object(s::SurfaceObject)
    v = Ref{UInt64}(0)
    check(L.cuabi_surface_object(v, s))
    v[]
end

# Textures and surfaces as kernel arguments: a `handle` slot, resolved at
# launch, the object kept by the pack (ArgPack.refs); `pack[i] = tex` is
# 1-based like every parameter, `set_c_slot!` 0-based.
_sig(::TextureObject) = "handle"
_sig(::SurfaceObject) = "handle"
_set_c!(p::ArgPack, t::TextureObject, slot::Integer) = _ref!(p, slot, t, L.cuabi_argpack_set_texture(p, slot, t))
_set_c!(p::ArgPack, s::SurfaceObject, slot::Integer) = _ref!(p, slot, s, L.cuabi_argpack_set_surface(p, slot, s))

# ----------------------------------------- stream memory operations

const _CONDITIONS = Dict(:geq => L.CUABI_STREAM_WAIT_VALUE_GEQ, :eq => L.CUABI_STREAM_WAIT_VALUE_EQ,
                         :and => L.CUABI_STREAM_WAIT_VALUE_AND, :nor => L.CUABI_STREAM_WAIT_VALUE_NOR)

"""
    wait_value!(s::Stream, b::Buffer, value; offset = 0, bits = 32, condition = :geq, flush = false)

Make `s` wait until the 32- or 64-bit word at `offset` of `b` meets
`condition` (`:geq`, `:eq`, `:and`, `:nor`) with `value`.
"""
function wait_value!(s::Stream, b::Buffer, value::Integer; offset::Integer = 0, bits::Integer = 32,
                     condition::Symbol = :geq, flush::Bool = false)
    f = UInt32(_pick(_CONDITIONS, condition, "condition")) |
        (flush ? UInt32(L.CUABI_STREAM_WAIT_VALUE_FLUSH) : UInt32(0))
    bits == 32 ? check(L.cuabi_stream_wait_value32(s, b, offset, UInt32(value), f)) :
    bits == 64 ? check(L.cuabi_stream_wait_value64(s, b, offset, UInt64(value), f)) :
    throw(ArgumentError("wait_value!: bits is 32 or 64"))
end

"""
    write_value!(s::Stream, b::Buffer, value; offset = 0, bits = 32, barrier = true)

Write `value` to the word at `offset` of `b` when `s` gets there.
"""
function write_value!(s::Stream, b::Buffer, value::Integer; offset::Integer = 0, bits::Integer = 32,
                      barrier::Bool = true)
    f = barrier ? UInt32(0) : UInt32(L.CUABI_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
    bits == 32 ? check(L.cuabi_stream_write_value32(s, b, offset, UInt32(value), f)) :
    bits == 64 ? check(L.cuabi_stream_write_value64(s, b, offset, UInt64(value), f)) :
    throw(ArgumentError("write_value!: bits is 32 or 64"))
end

"""
    batch_mem_op!(s::Stream, ops)

Queue several operations with one call: each `(kind, buffer, offset, value,
flags)` with `kind` a `CUABI_STREAM_MEM_OP_*` value and `buffer` `nothing`
for barriers and flushes.
"""
function batch_mem_op!(s::Stream, ops)
    bufs = [op[2] for op in ops if op[2] !== nothing]
    _inuse(bufs...) do
        c = [_with(_init(L.cuabi_stream_mem_op, L.cuabi_stream_mem_op_init, L.CUABI_STREAM_MEM_OP_VERSION);
                   kind = op[1], buffer = op[2] === nothing ? C_NULL : Base.unsafe_convert(Ptr{Cvoid}, op[2]),
                   offset = op[3], value = UInt64(op[4]), flags = op[5]) for op in ops]
        isempty(c) && throw(ArgumentError("batch_mem_op!: no operations"))
        check(L.cuabi_stream_batch_mem_op(s, c, length(c)))
    end
end
