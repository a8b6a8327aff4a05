"""
    CuABI

Idiomatic Julia API over libcuabi: handles are Julia objects whose finalizers
release the C reference (call `close` to release early), failures throw a
[`CuABIError`](@ref) carrying the status, the library's message and any
compiler/linker log. The raw generated `ccall` layer is `CuABI.LibCuABI`.

The library is located at run time, in `__init__`: `ENV["CUABI_LIBRARY"]`
(a path), else the `libcuabi` preference of this package (`LocalPreferences.toml`:
`[CuABI] libcuabi = "/path/to/libcuabi.so.1"`), else the dynamic loader's
search path (`LD_LIBRARY_PATH`, ld.so.cache). Nothing is frozen when the
package is precompiled; [`CuABI.library_path`](@ref) tells which file is in use.

Names: only `CuABIError` is exported. `Device`, `Stream`, `Graph`, `launch`,
`compile`, `synchronize`, ... are CUDA.jl's names too, so they are used as
`CuABI.Device` (or imported by name: `using CuABI: Device, Stream`); the two
packages load side by side in one process.

Indexing follows Julia: `pack[i]` is the i-th parameter (1-based), a view's
`size` is the column-major size of the memory (the reverse of its DLPack,
row-major shape), `CuABI.slice(v, 2:3, :)` takes 1-based inclusive ranges.
C numbering (0-based slots, DLPack order) appears only in functions named
for it: `set_c_slot!`, `get_c_slot`, `CuABI.info` (the C description).
"""
module CuABI

include("LibCuABI.jl")
using .LibCuABI
const L = LibCuABI

export CuABIError

# ------------------------------------------------------------ the library

const _library = Ref{String}("")

"""
    library_path() -> String

The file of the libcuabi in use (loaded by `__init__` from
`ENV["CUABI_LIBRARY"]` or the `libcuabi` preference, or found by the loader).
"""
function library_path()
    isempty(_library[]) || return _library[]
    h = Base.Libc.Libdl.dlopen(L.libcuabi; throw_error = false)
    h === nothing ? "" : Base.Libc.Libdl.dlpath(h)
end

# The preference, read without the Preferences package (no dependencies):
# Base's reader of [CuABI] in LocalPreferences.toml / JuliaLocalPreferences.toml.
function _preference()
    try
        p = Base.get_preferences(Base.UUID("5b0f3f3e-8d4e-4c1a-9a57-3f2c6e1d7a41"))
        v = get(p, "libcuabi", nothing)
        return v isa AbstractString && !isempty(v) ? String(v) : nothing
    catch
        return nothing
    end
end

function __init__()
    path = get(ENV, "CUABI_LIBRARY", "")
    isempty(path) && (path = something(_preference(), ""))
    isempty(path) && return
    # Loaded now under its soname: every ccall's (:name, "libcuabi.so.N")
    # then binds to this file (the loader matches loaded objects by soname).
    h = try
        Base.Libc.Libdl.dlopen(path, Base.Libc.Libdl.RTLD_NOW | Base.Libc.Libdl.RTLD_GLOBAL)
    catch e
        error("CuABI: cannot load $(repr(path)) (from ENV[\"CUABI_LIBRARY\"] or the libcuabi " *
              "preference): $(sprint(showerror, e))")
    end
    same = Base.Libc.Libdl.dlopen(L.libcuabi, Base.Libc.Libdl.RTLD_NOLOAD; throw_error = false)
    same == h || error("CuABI: $(repr(path)) is not $(L.libcuabi) (its soname differs): " *
                       "the bindings were generated for ABI version $(L.CUABI_API_TABLE_VERSION)")
    _library[] = Base.Libc.Libdl.dlpath(h)
    nothing
end

# ------------------------------------------------------------------ errors

"""
    CuABIError <: Exception

A failed cuabi call: `status` (a `cuabi_status` value), its enumerator
`name`, the library's `message` (naming the C function), the compiler or
linker `log` ("" when none), and the underlying CUDA/NVRTC/nvJitLink codes.
"""
struct CuABIError <: Exception
    status::Cint
    name::String
    message::String
    log::String
    cu_result::Cint
    nvrtc_result::Cint
    nvjitlink_result::Cint
end

function Base.showerror(io::IO, e::CuABIError)
    print(io, "CuABIError: ", e.name, ": ", e.message)
    isempty(e.log) || print(io, "\n", e.log)
end

_str(p::Ptr) = p == C_NULL ? "" : unsafe_string(Ptr{UInt8}(p))

status_name(st::Integer) = unsafe_string(ccall((:cuabi_status_name, L.libcuabi), Cstring, (Cint,), st))

"Build the error for `st` from the calling thread's last-error record."
function last_error(st::Integer)
    rec = unsafe_load(ccall((:cuabi_last_error, L.libcuabi), Ptr{L.cuabi_error_info}, ()))
    if rec.status == st
        CuABIError(st, status_name(st), _str(rec.message), _str(rec.log),
                   rec.cu_result, rec.nvrtc_result, rec.nvjitlink_result)
    else
        msg = unsafe_string(ccall((:cuabi_status_message, L.libcuabi), Cstring, (Cint,), st))
        CuABIError(st, status_name(st), msg, "", 0, 0, 0)
    end
end

"Throw a `CuABIError` unless `st` is `CUABI_SUCCESS`."
@inline function check(st::Integer)
    st == L.CUABI_SUCCESS || throw(last_error(st))
    nothing
end

# A versioned struct with its library defaults (the C `*_init`).
function _init(::Type{T}, initfn, version) where {T}
    r = Ref{T}()
    check(initfn(r, version))
    r[]
end

# A copy of an immutable struct with some fields replaced.
function _with(s::T; kw...) where {T}
    T((haskey(kw, f) ? convert(fieldtype(T, f), kw[f]) : getfield(s, f) for f in fieldnames(T))...)
end

# ------------------------------------------------------------ library info

"cuabi's version as a `VersionNumber`."
version() = VersionNumber(unsafe_string(ccall((:cuabi_version_string, L.libcuabi), Cstring, ())))

"The library's ABI version (the soname major)."
abi_version() = Int(ccall((:cuabi_abi_version, L.libcuabi), Cuint, ()))

"""
    runtime_info() -> NamedTuple

Loads (once) the CUDA driver, NVRTC, nvJitLink, libNVVM and nvFatbin and reports
what was found: for each, `status` (`nothing` when usable, else a `CuABIError`),
version and path.
"""
function runtime_info()
    r = Ref(_init(L.cuabi_runtime_info, L.cuabi_runtime_info_init, L.CUABI_RUNTIME_INFO_VERSION))
    check(L.cuabi_runtime_info_get(r))
    i = r[]
    part(st, ver, path, err) = (status = st == L.CUABI_SUCCESS ? nothing :
                                    CuABIError(st, status_name(st), _str(err), "", 0, 0, 0),
                                version = Int(ver), path = _str(path))
    (library_version = _str(i.library_version), abi_version = Int(i.abi_version),
     driver = part(i.driver_status, i.driver_version, i.driver_path, i.driver_error),
     nvrtc = part(i.nvrtc_status, i.nvrtc_version, i.nvrtc_path, i.nvrtc_error),
     nvjitlink = part(i.nvjitlink_status, i.nvjitlink_version, i.nvjitlink_path, i.nvjitlink_error),
     nvvm = part(i.nvvm_status, i.nvvm_version, i.nvvm_path, i.nvvm_error),
     nvfatbin = part(i.nvfatbin_status, i.nvfatbin_version, i.nvfatbin_path, i.nvfatbin_error))
end

"The library's sizeof() of a public struct."
function struct_size(name::AbstractString)
    out = Ref{Csize_t}(0)
    check(ccall((:cuabi_struct_size, L.libcuabi), L.cuabi_status, (Ref{Csize_t}, Cstring), out, name))
    Int(out[])
end

"The library's offsetof() of a field of a public struct."
function struct_field_offset(name::AbstractString, field::AbstractString)
    out = Ref{Csize_t}(0)
    check(L.cuabi_struct_field_offset(out, name, field))
    Int(out[])
end

"""
    check_layouts()

Compare every struct of `LibCuABI` with the loaded library's layout; throws
an `ErrorException` naming the first mismatch.
"""
function check_layouts()
    for (name, T, fields) in L.STRUCT_LAYOUTS
        struct_size(name) == sizeof(T) ||
            error("CuABI: sizeof($name) is $(struct_size(name)) in libcuabi but $(sizeof(T)) in Julia; regenerate LibCuABI.jl for this library")
        for (i, f) in enumerate(fields)
            off = struct_field_offset(name, f)
            off == fieldoffset(T, i) ||
                error("CuABI: offsetof($name, $f) is $off in libcuabi but $(fieldoffset(T, i)) in Julia")
        end
    end
    nothing
end

# ----------------------------------------------------------------- handles

"""
Common behaviour of handle objects: `h.ptr` is the C handle (C_NULL after
`close`), the finalizer releases it, `close(h)` releases it now -- or, while
other tasks or threads have calls on it in flight, when the last of them
returns (later calls throw at once).
"""
abstract type Handle end

Base.unsafe_convert(::Type{Ptr{Cvoid}}, h::Handle) =
    h.ptr == C_NULL ? throw(ArgumentError("$(typeof(h)) is closed")) : h.ptr
Base.isopen(h::Handle) = h.ptr != C_NULL

# ---- handles in use (docs/RELIABILITY.md, "Threat model: threads,
# finalizers and captures")
#
# close(h) on one thread while a ccall on another uses h used to release the
# C handle under the call. Every LibCuABI wrapper now holds its handle
# arguments in use for the call (LibCuABI._enter / _leave, methods below):
# a Handle is counted in `_uses`; close(h) marks h closed at once (h.ptr =
# C_NULL: later calls throw) and, while calls are in flight on it, leaves
# the release to the last of them (`_pending`). One table under one lock: a
# ReentrantLock, which also keeps finalizers from running while it is held.
# The finalizer (_finalize) takes no lock: an object being finalized is
# unreachable -- ccall roots its arguments, and `_uses` / `_pending` hold
# theirs -- so no call has it in flight. Code putting handle values into
# structs or arrays holds their objects with `_inuse`.
const _uses_lock = ReentrantLock()
const _uses = IdDict{Handle,Int}()
const _pending = IdDict{Handle,Ptr{Cvoid}}()

function L._enter(h::Handle)
    lock(_uses_lock)
    try
        h.ptr == C_NULL && throw(ArgumentError("$(typeof(h)) is closed"))
        _uses[h] = get(_uses, h, 0) + 1
    finally
        unlock(_uses_lock)
    end
    nothing
end

function L._leave(h::Handle, ::Nothing)
    p = C_NULL
    lock(_uses_lock)
    try
        n = _uses[h] - 1
        if n == 0
            delete!(_uses, h)
            p = pop!(_pending, h, C_NULL)
        else
            _uses[h] = n
        end
    finally
        unlock(_uses_lock)
    end
    p == C_NULL || _release(h, p)
    nothing
end

function Base.close(h::Handle)
    p = C_NULL
    lock(_uses_lock)
    try
        p = h.ptr
        h.ptr = C_NULL
        if p != C_NULL && haskey(_uses, h)
            _pending[h] = p         # the last call in flight releases it
            p = C_NULL
        end
    finally
        unlock(_uses_lock)
    end
    p == C_NULL || _release(h, p)
    nothing
end

# The finalizer (no lock: see above).
function _finalize(h::Handle)
    p = h.ptr
    h.ptr = C_NULL
    p == C_NULL || _release(h, p)
    nothing
end

# f() with the handle objects among `hs` in use (`nothing` and raw pointers
# are skipped): for handle values put into structs and arrays, which the
# wrappers do not see.
function _inuse(f, hs...)
    entered = Any[]
    tokens = Any[]
    try
        for h in hs
            t = L._enter(h)
            push!(entered, h)
            push!(tokens, t)
        end
        return f()
    finally
        for i in length(entered):-1:1
            L._leave(entered[i], tokens[i])
        end
    end
end

# Wrap a new reference (from a constructor) in a finalized object.
function _own(::Type{T}, p::Ptr{Cvoid}, extra...) where {T<:Handle}
    h = T(p, extra...)
    finalizer(_finalize, h)
end

function _create(f)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(f(out))
    out[]
end

# ----------------------------------------------------------------- devices

"Number of visible CUDA devices; throws `CuABIError` when there is no driver."
function device_count()
    n = Ref{Cint}(0)
    check(L.cuabi_device_count(n))
    Int(n[])
end

"""
    Device(ordinal = 0)

One GPU and its primary context. Usable from any task or thread.
"""
mutable struct Device <: Handle
    ptr::Ptr{Cvoid}
end
_release(::Device, p) = L.cuabi_device_release(p)

Device(ordinal::Integer = 0) = _own(Device, _create(out -> L.cuabi_device_get(out, ordinal)))

function ordinal(d::Device)
    n = Ref{Cint}(0)
    check(L.cuabi_device_ordinal(n, d))
    Int(n[])
end

"The device's `cuabi_device_properties` (`String(collect(...))` helpers: `name`)."
function properties(d::Device)
    r = Ref(_init(L.cuabi_device_properties, L.cuabi_device_properties_init,
                  L.CUABI_DEVICE_PROPERTIES_VERSION))
    check(L.cuabi_device_get_properties(r, d))
    r[]
end

_cstring(t::NTuple{N,Cchar}) where {N} = String(UInt8[reinterpret(UInt8, c) for c in t if c != 0])

"The device's marketing name."
name(d::Device) = _cstring(properties(d).name)

"(free, total) device memory in bytes."
function memory_info(d::Device)
    free, total = Ref{UInt64}(0), Ref{UInt64}(0)
    check(L.cuabi_device_memory_info(free, total, d))
    (Int(free[]), Int(total[]))
end

synchronize(d::Device) = check(L.cuabi_device_synchronize(d))

# ----------------------------------------------------------------- streams

"""
    Stream(device; nonblocking = false, priority = 0)

A CUDA stream; keeps its device alive. May be used from several threads at once.
"""
mutable struct Stream <: Handle
    ptr::Ptr{Cvoid}
    device::Device
end
_release(::Stream, p) = L.cuabi_stream_release(p)

function Stream(d::Device; nonblocking::Bool = false, priority::Integer = 0)
    o = _init(L.cuabi_stream_options, L.cuabi_stream_options_init, L.CUABI_STREAM_OPTIONS_VERSION)
    o = _with(o; flags = nonblocking ? L.CUABI_STREAM_NON_BLOCKING : L.CUABI_STREAM_DEFAULT,
              priority = priority)
    _own(Stream, _create(out -> L.cuabi_stream_create(out, d, Ref(o))), d)
end

synchronize(s::Stream) = check(L.cuabi_stream_synchronize(s))

"True when all work on the stream has finished."
function Base.isready(s::Stream)
    v = Ref{Cint}(0)
    check(L.cuabi_stream_query(v, s))
    v[] != 0
end

"The CUstream behind the handle, as a `UInt`."
function raw(s::Stream)
    v = Ref{Cuintptr_t}(0)
    check(L.cuabi_stream_raw(v, s))
    v[]
end

# ------------------------------------------------------------------ events

"""
    Event(device; timing = true, blocking = false)

A CUDA event, for ordering and timing work on streams.
"""
mutable struct Event <: Handle
    ptr::Ptr{Cvoid}
end
_release(::Event, p) = L.cuabi_event_release(p)

function Event(d::Device; timing::Bool = true, blocking::Bool = false)
    flags = (timing ? 0 : L.CUABI_EVENT_DISABLE_TIMING) | (blocking ? L.CUABI_EVENT_BLOCKING_SYNC : 0)
    o = _with(_init(L.cuabi_event_options, L.cuabi_event_options_init, L.CUABI_EVENT_OPTIONS_VERSION);
              flags = flags)
    _own(Event, _create(out -> L.cuabi_event_create(out, d, Ref(o))))
end

record(e::Event, s::Stream) = check(L.cuabi_event_record(e, s))
synchronize(e::Event) = check(L.cuabi_event_synchronize(e))
Base.wait(s::Stream, e::Event) = check(L.cuabi_stream_wait_event(s, e))
# Waits for the work queued on `other` so far (its GPU's one ordering event: no event per call).
Base.wait(s::Stream, other::Stream) = check(L.cuabi_stream_wait_stream(s, other))

function Base.isready(e::Event)
    v = Ref{Cint}(0)
    check(L.cuabi_event_query(v, e))
    v[] != 0
end

"Milliseconds between two recorded events."
function elapsed_ms(start::Event, stop::Event)
    v = Ref{Cfloat}(0)
    check(L.cuabi_event_elapsed_ms(v, start, stop))
    Float64(v[])
end

# ------------------------------------------------------------ argument packs

"""
    ArgPack(signature)
    ArgPack(args...)

A kernel's parameter list with storage for its values. From a signature
string (`"ptr, i32, f32"`), or typed from values: `ArgPack(DevicePtr(p), Int32(n),
1.5f0)` derives the signature from the Julia types and stores the values.
`pack[i] = value` sets the i-th parameter (1-based, as Julia indexes),
checking kind and range; `pack[i]` gives its bytes. `set_c_slot!(pack, slot,
value)` and `get_c_slot(pack, slot)` take C's 0-based slot numbers.
"""
mutable struct ArgPack <: Handle
    ptr::Ptr{Cvoid}
    # The Buffers and Views its buffer / view slots name, by slot: the C pack
    # keeps their handles, not references, and reads them at each launch, so
    # the pack keeps them alive and every call using it holds them in use.
    refs::Dict{Int,Handle}
    ArgPack(p::Ptr{Cvoid}) = new(p, Dict{Int,Handle}())
end
_release(::ArgPack, p) = L.cuabi_argpack_release(p)

# The pack's refs in use (a closed one is skipped: the library refuses its
# released handle cleanly, or its release waits for the calls in flight).
const _NOREFS = Handle[]
function _enter_refs(p::ArgPack)
    isempty(p.refs) && return _NOREFS
    entered = Handle[]
    for h in collect(values(p.refs))
        try
            L._enter(h)
            push!(entered, h)
        catch e
            e isa ArgumentError || (foreach(x -> L._leave(x, nothing), entered); rethrow())
        end
    end
    entered
end
_leave_refs(refs::Vector{Handle}) = foreach(h -> L._leave(h, nothing), refs)

function L._enter(p::ArgPack)
    invoke(L._enter, Tuple{Handle}, p)
    try
        return _enter_refs(p)
    catch
        invoke(L._leave, Tuple{Handle,Nothing}, p, nothing)
        rethrow()
    end
end
function L._leave(p::ArgPack, refs::Vector{Handle})
    _leave_refs(refs)
    invoke(L._leave, Tuple{Handle,Nothing}, p, nothing)
end

# A plain value in `slot`: it names no buffer or view any more.
function _plain!(p::ArgPack, slot::Integer, st)
    check(st)
    delete!(p.refs, Int(slot))
    nothing
end

"A raw device address for a `ptr` parameter."
struct DevicePtr
    addr::UInt64
end

_sig(::Int8) = "i8"; _sig(::Int16) = "i16"; _sig(::Int32) = "i32"; _sig(::Int64) = "i64"
_sig(::UInt8) = "u8"; _sig(::UInt16) = "u16"; _sig(::UInt32) = "u32"; _sig(::UInt64) = "u64"
_sig(::Bool) = "bool"; _sig(::Float32) = "f32"; _sig(::Float64) = "f64"; _sig(::DevicePtr) = "ptr"
_sig(x) = throw(ArgumentError("ArgPack: no kernel parameter type for $(typeof(x)); pass a signature string"))

ArgPack(signature::AbstractString) =
    _own(ArgPack, _create(out -> L.cuabi_argpack_create(out, signature)))

function ArgPack(args...)
    pack = ArgPack(join(map(_sig, args), ", "))
    for (i, a) in enumerate(args)
        pack[i] = a
    end
    pack
end

# The setters by value type, on C's 0-based slot numbers (_set_c!); the
# Base methods below take Julia's 1-based index.
_set_c!(p::ArgPack, v::Union{Signed,Bool}, slot::Integer) =
    _plain!(p, slot, L.cuabi_argpack_set_int(p, slot, Int64(v)))
_set_c!(p::ArgPack, v::Unsigned, slot::Integer) =
    _plain!(p, slot, L.cuabi_argpack_set_uint(p, slot, UInt64(v)))
_set_c!(p::ArgPack, v::AbstractFloat, slot::Integer) =
    _plain!(p, slot, L.cuabi_argpack_set_float(p, slot, Float64(v)))
_set_c!(p::ArgPack, v::Complex, slot::Integer) =
    _plain!(p, slot, L.cuabi_argpack_set_complex(p, slot, Float64(real(v)), Float64(imag(v))))
_set_c!(p::ArgPack, v::DevicePtr, slot::Integer) =
    _plain!(p, slot, L.cuabi_argpack_set_pointer(p, slot, v.addr))
# Any isbits value (a struct matching the kernel's) by its bytes.
function _set_c!(p::ArgPack, v::T, slot::Integer) where {T}
    isbitstype(T) || throw(ArgumentError("ArgPack: $(T) is not a plain-data type"))
    r = Ref(v)
    GC.@preserve r _plain!(p, slot, L.cuabi_argpack_set_bytes(p, slot, r, sizeof(T)))
end

function _slot(p::ArgPack, i::Integer)
    1 <= i <= length(p) || throw(BoundsError(p, i))
    Int(i) - 1
end

"""
    set_c_slot!(pack, slot, value)

Set C slot `slot` (0-based, as cuabi_argpack_set_* number them) to `value`;
`pack[slot + 1] = value` is the same.
"""
set_c_slot!(p::ArgPack, slot::Integer, v) = (_set_c!(p, v, slot); p)
"The bytes of C slot `slot` (0-based); `pack[slot + 1]` is the same."
function get_c_slot(p::ArgPack, slot::Integer)
    buf = zeros(UInt8, _size_query(L.cuabi_argpack_slot_size, p, slot))
    check(L.cuabi_argpack_get_bytes(buf, length(buf), p, slot))
    buf
end

"Set the `i`-th parameter (1-based) to `v`, checking its kind and range."
Base.setindex!(p::ArgPack, v, i::Integer) = (_set_c!(p, v, _slot(p, i)); p)
"The `i`-th parameter's current bytes (1-based)."
Base.getindex(p::ArgPack, i::Integer) = get_c_slot(p, _slot(p, i))
Base.firstindex(::ArgPack) = 1
Base.lastindex(p::ArgPack) = length(p)
Base.eachindex(p::ArgPack) = Base.OneTo(length(p))

function _size_query(f, p::ArgPack, extra...)
    out = Ref{Csize_t}(0)
    check(f(out, p, extra...))
    Int(out[])
end
Base.length(p::ArgPack) = _size_query(L.cuabi_argpack_count, p)
blob_size(p::ArgPack) = _size_query(L.cuabi_argpack_blob_size, p)
"Offset of the `i`-th parameter (1-based) in the packed blob."
slot_offset(p::ArgPack, i::Integer) = _size_query(L.cuabi_argpack_slot_offset, p, _slot(p, i))
"Size of the `i`-th parameter (1-based)."
slot_size(p::ArgPack, i::Integer) = _size_query(L.cuabi_argpack_slot_size, p, _slot(p, i))

include("memory.jl")
include("compute.jl")
include("tensormap.jl")
include("graph.jl")
include("multigpu.jl")
include("texture.jl")
include("nccl.jl")
include("green.jl")
include("nvml.jl")
include("memory_ext.jl")

end # module CuABI
