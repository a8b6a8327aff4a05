# ------------------------------------------------------------- tensor maps

"""
    TensorMap(view, box; element_strides = nothing, data_type = L.CUABI_TENSORMAP_DATA_TYPE_AUTO,
              interleave = L.CUABI_TENSORMAP_INTERLEAVE_NONE, swizzle = L.CUABI_TENSORMAP_SWIZZLE_NONE,
              l2_promotion = L.CUABI_TENSORMAP_L2_PROMOTION_NONE, oob_fill = L.CUABI_TENSORMAP_OOB_FILL_NONE,
              device = nothing)

A tiled TMA descriptor (CUtensorMap) of a `View` in GPU memory (compute
capability 9.0): each copy moves a box of `box` elements per dimension, in
the order of `size(view)` (Julia's; `element_strides` likewise).
`CuABI.info(map)` describes it in the library's (DLPack, row-major) order. A broken TMA rule throws a `CuABIError` with status
`CUABI_ERROR_TENSOR_MAP` naming it. The map keeps the view alive; store it in
an `ArgPack` `tensormap` slot (`pack[slot] = map`) to pass it by value.
"""
mutable struct TensorMap <: Handle
    ptr::Ptr{Cvoid}
    view::View
end
_release(::TensorMap, p) = L.cuabi_tensormap_release(p)

function _tensormap_options(rank; element_strides = nothing, data_type = L.CUABI_TENSORMAP_DATA_TYPE_AUTO,
                            interleave = L.CUABI_TENSORMAP_INTERLEAVE_NONE, swizzle = L.CUABI_TENSORMAP_SWIZZLE_NONE,
                            l2_promotion = L.CUABI_TENSORMAP_L2_PROMOTION_NONE,
                            oob_fill = L.CUABI_TENSORMAP_OOB_FILL_NONE, device = nothing)
    o = _init(L.cuabi_tensormap_options, L.cuabi_tensormap_options_init, L.CUABI_TENSORMAP_OPTIONS_VERSION)
    es = zeros(UInt32, 5)
    if element_strides !== nothing
        length(element_strides) == rank || throw(ArgumentError("TensorMap: element_strides must have $(rank) entries"))
        es[1:rank] .= reverse(collect(element_strides))     # Julia order -> the view's C order
    end
    _with(o; data_type = data_type, element_strides = Tuple(es), interleave = interleave, swizzle = swizzle,
          l2_promotion = l2_promotion, oob_fill = oob_fill, device = device === nothing ? Cint(-1) : Cint(device))
end

function TensorMap(v::View, box; kw...)
    b = UInt32[x for x in Iterators.reverse(box)]          # Julia order -> the view's C order
    o = Ref(_tensormap_options(ndims(v); kw...))
    _own(TensorMap, GC.@preserve(b, _create(out -> L.cuabi_tensormap_encode_tiled(out, v, b, length(b), o))), v)
end

"""
    im2col_tensormap(view, lower_corner, upper_corner, channels_per_pixel, pixels_per_column; kw...)

An im2col TMA descriptor of a view whose DLPack shape is N, spatial..., C
(`size(view)` = (C, spatial..., N) in Julia order; rank 3 to 5); the corners
offset the bounding box per spatial dimension, in Julia order. Keywords as
for `TensorMap`.
"""
function im2col_tensormap(v::View, lower, upper, channels_per_pixel::Integer, pixels_per_column::Integer; kw...)
    length(lower) == length(upper) || throw(ArgumentError("im2col_tensormap: the corners differ in length"))
    lo, up = Cint[x for x in Iterators.reverse(lower)], Cint[x for x in Iterators.reverse(upper)]
    o = Ref(_tensormap_options(ndims(v); kw...))
    _own(TensorMap, GC.@preserve(lo, up, _create(out -> L.cuabi_tensormap_encode_im2col(out, v, lo, up, length(lo),
                                                                    channels_per_pixel, pixels_per_column, o))), v)
end

"Point the map at `v` (same element size, shape, strides and device); set it again in packs."
function replace_address!(m::TensorMap, v::View)
    check(L.cuabi_tensormap_replace_address(m, v))
    m.view = v
    m
end

"The 128-byte CUtensorMap a kernel receives."
function tensormap_bytes(m::TensorMap)
    b = zeros(UInt8, L.CUABI_TENSORMAP_BYTES)
    check(L.cuabi_tensormap_bytes(b, length(b), m))
    b
end

"What the map describes: kind, data type, rank, address, shape, byte strides, box, ... (the library's DLPack order)."
function info(m::TensorMap)
    r = Ref(_init(L.cuabi_tensormap_info, L.cuabi_tensormap_info_init, L.CUABI_TENSORMAP_INFO_VERSION))
    check(L.cuabi_tensormap_get_info(r, m))
    i = r[]
    n = Int(i.rank)
    (kind = i.kind, data_type = i.data_type, rank = n, address = UInt(i.address),
     shape = Int[i.shape[k] for k in 1:n], byte_strides = Int[i.byte_strides[k] for k in 1:n],
     box = Int[i.box[k] for k in 1:n], element_strides = Int[i.element_strides[k] for k in 1:n],
     interleave = i.interleave, swizzle = i.swizzle, l2_promotion = i.l2_promotion, oob_fill = i.oob_fill,
     device = Int(i.device))
end

_sig(::TensorMap) = "tensormap"
# The pack keeps the map (and so its view and memory): its bytes hold the address.
_set_c!(p::ArgPack, m::TensorMap, slot::Integer) = _ref!(p, slot, m, L.cuabi_argpack_set_tensormap(p, slot, m))
