# Object code, kernels, the linker, programs, the compile cache, launches
# and occupancy (included by CuABI.jl).

_nonul(s::AbstractString) = ('\0' in s) ? throw(ArgumentError("string contains a NUL byte")) : String(s)
_cptr(s::Union{Nothing,String}) = s === nothing ? Ptr{Cchar}(C_NULL) : Ptr{Cchar}(pointer(s))
# Strings must be `String`s kept alive (GC.@preserve) by the caller.
_cptrs(v::Vector{String}) = isempty(v) ? Ptr{Cchar}[] : Ptr{Cchar}[Ptr{Cchar}(pointer(s)) for s in v]
_arr(v::Vector{Ptr{Cchar}}) = isempty(v) ? Ptr{Ptr{Cchar}}(C_NULL) : pointer(v)

"An immutable code image (CUBIN, PTX, fatbin, LTO-IR); kernels keep it alive."
mutable struct ObjectCode <: Handle
    ptr::Ptr{Cvoid}
end
_release(::ObjectCode, p) = L.cuabi_objcode_release(p)

"One kernel of an objcode."
mutable struct Kernel <: Handle
    ptr::Ptr{Cvoid}
end
_release(::Kernel, p) = L.cuabi_kernel_release(p)

ObjectCode(data::Vector{UInt8}; type = L.CUABI_CODE_NONE, name::AbstractString = "<memory>") =
    _own(ObjectCode, _create(out -> L.cuabi_objcode_from_memory(out, type, data, length(data), _nonul(name))))
load_objcode(path::AbstractString; type = L.CUABI_CODE_NONE) =
    _own(ObjectCode, _create(out -> L.cuabi_objcode_from_file(out, type, _nonul(path))))

code_type(o::ObjectCode) = _bq(L.cuabi_objcode_code_type, o, Cint)
arch(o::ObjectCode) = Int(_bq(L.cuabi_objcode_arch, o, Cint))
"A copy of the image bytes."
function (::Type{Vector{UInt8}})(o::ObjectCode)
    p, n = Ref{Ptr{Cvoid}}(C_NULL), Ref{Csize_t}(0)
    check(L.cuabi_objcode_bytes(p, n, o))
    GC.@preserve o copy(unsafe_wrap(Array, Ptr{UInt8}(p[]), Int(n[])))
end
"A kernel by entry name or registered name expression."
Base.getindex(o::ObjectCode, name::AbstractString) =
    _own(Kernel, _create(out -> L.cuabi_objcode_get_kernel(out, o, _nonul(name))))
function kernel_names(o::ObjectCode)
    n = Int(_bq(L.cuabi_objcode_kernel_count, o, Csize_t))
    map(0:n-1) do i
        p = Ref{Ptr{Cchar}}(C_NULL)
        check(L.cuabi_objcode_kernel_name(p, o, i))
        _str(p[])
    end
end
function lowered_name(o::ObjectCode, expr::AbstractString)
    p = Ref{Ptr{Cchar}}(C_NULL)
    check(L.cuabi_objcode_lowered_name(p, o, _nonul(expr)))
    _str(p[])
end
load!(o::ObjectCode) = (check(L.cuabi_objcode_load(o)); o)

_resources() = _init(L.cuabi_kernel_resources, L.cuabi_kernel_resources_init, L.CUABI_KERNEL_RESOURCES_VERSION)
"A kernel's resources read from the CUBIN, no GPU needed."
function resources(k::Kernel)
    r = Ref(_resources())
    check(L.cuabi_kernel_get_resources(r, k))
    r[]
end
function resources(o::ObjectCode, name::AbstractString; arch = nothing)
    r = Ref(_resources())
    check(L.cuabi_objcode_kernel_resources(r, o, _nonul(name), arch === nothing ? Ptr{Cchar}(C_NULL) : _nonul(arch)))
    r[]
end
# ------------------------------------------------------------------ fatbins

"Pack CUBIN and PTX objcodes into one fatbin (nvFatbin, else the fatbinary tool)."
function pack_fatbin(images::Vector{ObjectCode})
    _inuse(images...) do
        ptrs = Ptr{L.cuabi_objcode}[Ptr{L.cuabi_objcode}(Base.unsafe_convert(Ptr{Cvoid}, i)) for i in images]
        GC.@preserve images ptrs _own(ObjectCode, _create(out -> L.cuabi_fatbin_create(out, ptrs, length(ptrs))))
    end
end
"The SM architectures of a fatbin's CUBINs, ascending (90 for sm_90)."
function fatbin_archs(o::ObjectCode)
    n = Ref{Csize_t}(0)
    check(L.cuabi_fatbin_archs(Ptr{Cint}(C_NULL), 0, n, o))
    v = zeros(Cint, max(Int(n[]), 1))
    check(L.cuabi_fatbin_archs(v, length(v), n, o))
    Int.(v[1:Int(n[])])
end
"A fatbin's images as (code type, architecture) pairs."
function fatbin_images(o::ObjectCode)
    n = Int(_bq(L.cuabi_fatbin_image_count, o, Csize_t))
    map(0:n-1) do i
        t, a = Ref{Cint}(0), Ref{Cint}(0)
        check(L.cuabi_fatbin_image_info(t, a, o, i))
        (t[], Int(a[]))
    end
end
"\"nvfatbin\" or \"fatbinary\" for a fatbin cuabi made, else \"\"."
function fatbin_packer(o::ObjectCode)
    p = Ref{Ptr{Cchar}}(C_NULL)
    check(L.cuabi_fatbin_packer(p, o))
    _str(p[])
end
"One image of a fatbin: \"sm_90\" its CUBIN, \"compute_90\" its PTX."
extract(o::ObjectCode, arch::AbstractString) =
    _own(ObjectCode, _create(out -> L.cuabi_fatbin_extract(out, o, _nonul(arch))))

function name(k::Kernel)
    p = Ref{Ptr{Cchar}}(C_NULL)
    check(L.cuabi_kernel_name(p, k))
    _str(p[])
end
param_count(k::Kernel) = Int(_bq(L.cuabi_kernel_param_count, k, Csize_t))
"(offset, size) of the `i`-th parameter (1-based)."
function param_info(k::Kernel, i::Integer)
    i >= 1 || throw(BoundsError(k, i))
    o, s = Ref{Csize_t}(0), Ref{Csize_t}(0)
    check(L.cuabi_kernel_param_info(o, s, k, i - 1))
    (Int(o[]), Int(s[]))
end
"""
    param_types(k) -> Vector

What is known of each parameter's type (`cuabi_kernel_param_type`): named
tuples `(kind, size, offset, source, type_name)`, `kind` a `cuabi_arg_kind`
(`CUABI_ARG_RAW` when unknown), `source` a `cuabi_param_source` (mangled
name, PTX, or unknown), `type_name` as the source spells it.
"""
function param_types(k::Kernel)
    map(0:param_count(k)-1) do i
        t = Ref(_init(L.cuabi_param_type, L.cuabi_param_type_init, L.CUABI_PARAM_TYPE_VERSION))
        check(L.cuabi_kernel_param_type(t, k, i))
        r = t[]
        (kind = r.kind, size = Int(r.size), offset = Int(r.offset), source = r.source,
         type_name = GC.@preserve(k, _str(r.type_name)))
    end
end
"The parameter types joined with \", \" (\"?\" where unknown)."
function signature(k::Kernel)
    p = Ref{Ptr{Cchar}}(C_NULL)
    check(L.cuabi_kernel_signature(p, k))
    GC.@preserve k _str(p[])
end
function attribute(k::Kernel, d::Device, attr::Integer)
    v = Ref{Cint}(0)
    check(L.cuabi_kernel_attribute(v, k, d, attr))
    Int(v[])
end
set_attribute!(k::Kernel, d::Device, attr::Integer, value::Integer) = check(L.cuabi_kernel_set_attribute(k, d, attr, value))

# ------------------------------------------------------------------ linker

"One nvJitLink session (used by one task at a time)."
mutable struct Linker <: Handle
    ptr::Ptr{Cvoid}
end
_release(::Linker, p) = L.cuabi_linker_destroy(p)

function Linker(; arch = nothing, lto::Bool = false, optimization::Integer = -1, verbose::Bool = false,
                extra_options::Vector{String} = String[], cache::Bool = true)
    a = arch === nothing ? nothing : _nonul(arch)
    extra = map(_nonul, extra_options)
    ps = _cptrs(extra)
    GC.@preserve a extra ps begin
        o = _init(L.cuabi_linker_options, L.cuabi_linker_options_init, L.CUABI_LINKER_OPTIONS_VERSION)
        o = _with(o; arch = _cptr(a), lto = Cint(lto), optimization = optimization, verbose = Cint(verbose),
                  extra_options = _arr(ps), extra_option_count = length(ps), cache = Cint(cache))
        _own(Linker, _create(out -> L.cuabi_linker_create(out, Ref(o))))
    end
end
Base.push!(l::Linker, o::ObjectCode) = (check(L.cuabi_linker_add_objcode(l, o)); l)
add_data!(l::Linker, data::Vector{UInt8}; type = L.CUABI_CODE_NONE, name::AbstractString = "<memory>") =
    (check(L.cuabi_linker_add_data(l, type, data, length(data), _nonul(name))); l)
add_file!(l::Linker, path::AbstractString; type = L.CUABI_CODE_NONE) = (check(L.cuabi_linker_add_file(l, type, _nonul(path))); l)
complete(l::Linker; output = L.CUABI_CODE_CUBIN) = _own(ObjectCode, _create(out -> L.cuabi_linker_complete(out, l, output)))
"0 linked by nvJitLink (or not completed), 1 in-memory cache, 2 on-disk cache."
cache_hit(l::Linker) = Int(_bq(L.cuabi_linker_cache_hit, l, Cint))
function error_log(l::Linker)
    p = Ref{Ptr{Cchar}}(C_NULL)
    check(L.cuabi_linker_error_log(p, l))
    _str(p[])
end

# ---------------------------------------------------------------- programs

"CUDA C++ (or PTX, `type = CUABI_CODE_PTX`; NVVM IR, `type = CUABI_CODE_NVVM`) source and its last compile."
mutable struct Program <: Handle
    ptr::Ptr{Cvoid}
end
_release(::Program, p) = L.cuabi_program_release(p)

Program(source::AbstractString; type = L.CUABI_CODE_CUDA_CXX, name::AbstractString = "program.cu") =
    _own(Program, _create(out -> L.cuabi_program_create(out, type, _nonul(source), 0, _nonul(name))))
"""
    Program(ir::Vector{UInt8}; name = nothing)

NVVM IR for libNVVM, text or bitcode (which holds NUL bytes); compile it with
`output = CUABI_CODE_PTX` or `CUABI_CODE_LTOIR`, `libdevice = true` to link
libdevice's math functions. `name` nothing: "program.ll" or "program.bc".
"""
function Program(ir::Vector{UInt8}; name::Union{Nothing,AbstractString} = nothing)
    nm = name === nothing ? nothing : _nonul(name)
    GC.@preserve ir nm begin
        _own(Program, _create(out -> L.cuabi_program_create(out, L.CUABI_CODE_NVVM, Ptr{Cchar}(pointer(ir)),
                                                            length(ir), _cptr(nm))))
    end
end

# Build cuabi_program_options from keywords and run f(Ref(options)) while its strings live.
function _with_program_options(f; arch = nothing, output = L.CUABI_CODE_CUBIN, std = nothing, opt_level::Integer = -1,
                               relocatable::Bool = false, lto::Bool = false, fast_math::Bool = false,
                               defines::Vector{String} = String[], headers::Vector{Pair{String,String}} = Pair{String,String}[],
                               name_expressions::Vector{String} = String[], extra_options::Vector{String} = String[],
                               cache::Bool = true, libdevice::Bool = false)
    # A fatbin's architectures may come as a vector: ["sm_80", "sm_90", "compute_90"].
    a = arch === nothing ? nothing : _nonul(arch isa AbstractVector ? join(arch, ",") : arch)
    s = std === nothing ? nothing : _nonul(std)
    strs = [map(_nonul, defines), map(_nonul ∘ first, headers), map(_nonul ∘ last, headers),
            map(_nonul, name_expressions), map(_nonul, extra_options)]
    ps = map(_cptrs, strs)
    GC.@preserve a s strs ps begin
        o = _init(L.cuabi_program_options, L.cuabi_program_options_init, L.CUABI_PROGRAM_OPTIONS_VERSION)
        o = _with(o; arch = _cptr(a), std = _cptr(s), output = output, opt_level = opt_level,
                  relocatable = Cint(relocatable), lto = Cint(lto), fast_math = Cint(fast_math),
                  defines = _arr(ps[1]), num_defines = length(ps[1]),
                  header_names = _arr(ps[2]), header_contents = _arr(ps[3]), num_headers = length(ps[2]),
                  name_expressions = _arr(ps[4]), num_name_expressions = length(ps[4]),
                  extra_options = _arr(ps[5]), num_extra_options = length(ps[5]), cache = Cint(cache),
                  libdevice = Cint(libdevice))
        f(Ref(o))
    end
end

"""
    compile(program; arch, output, name_expressions = ["segred<float, 256>"], ...) -> ObjectCode

Compile (or fetch from the compile cache). A compile error throws a
`CuABIError` whose `log` has the compiler's messages.
"""
compile(p::Program; kw...) =
    _with_program_options(o -> _own(ObjectCode, _create(out -> L.cuabi_program_compile(out, p, o))); kw...)
function log(p::Program)
    s = Ref{Ptr{Cchar}}(C_NULL)
    check(L.cuabi_program_log(s, p))
    _str(s[])
end
function lowered_name(p::Program, expr::AbstractString)
    s = Ref{Ptr{Cchar}}(C_NULL)
    check(L.cuabi_program_lowered_name(s, p, _nonul(expr)))
    _str(s[])
end
"0 compiled, 1 in-memory cache, 2 on-disk cache."
cache_hit(p::Program) = Int(_bq(L.cuabi_program_cache_hit, p, Cint))

# ------------------------------------------------------------------- cache

"The process-wide compile cache."
module Cache
import ..CuABI
import ..CuABI: check, _nonul, _str, _init, _with_program_options
const L = CuABI.LibCuABI
set_directory(path::Union{Nothing,AbstractString}) =
    check(L.cuabi_cache_set_directory(path === nothing ? Ptr{Cchar}(C_NULL) : _nonul(path)))
function directory()
    n = Ref{Csize_t}(0)
    L.cuabi_cache_get_directory(Ptr{Cchar}(C_NULL), n)   # size query: BUFFER_TOO_SMALL expected
    buf = zeros(UInt8, max(Int(n[]), 1))
    n[] = length(buf)
    check(L.cuabi_cache_get_directory(buf, n))
    String(buf[1:something(findfirst(==(0x00), buf), length(buf) + 1) - 1])
end
set_enabled(on::Bool) = check(L.cuabi_cache_set_enabled(Cint(on)))
set_size_limit(bytes::Integer) = check(L.cuabi_cache_set_size_limit(UInt64(bytes)))
function stats()
    r = Ref(_init(L.cuabi_cache_stats, L.cuabi_cache_stats_init, L.CUABI_CACHE_STATS_VERSION))
    check(L.cuabi_cache_get_stats(r))
    r[]
end
clear(flags = L.CUABI_CACHE_CLEAR_ALL) = check(L.cuabi_cache_clear(flags))

mutable struct _Progress
    f::Any
    err::Any
end
function _progress_tramp(done::Csize_t, total::Csize_t, name::Ptr{Cchar}, arch::Ptr{Cchar},
                         status::Cint, hit::Cint, payload::Ptr{Cvoid})::Cint
    ctx = unsafe_pointer_to_objref(payload)::_Progress
    ctx.err === nothing || return Cint(1)
    try
        return ctx.f((done = Int(done), total = Int(total), name = _str(name), arch = _str(arch),
                      status = Int(status), cache_hit = Int(hit))) === false ? Cint(1) : Cint(0)
    catch e
        ctx.err = e     # never unwind into C: rethrown after the call
        return Cint(1)
    end
end

"""
    precompile(sources; archs = ["sm_90"], progress = nothing, options...)

Compile each CUDA C++ source (a `String` or `name => source`) for each
architecture into the cache, several at once. `progress(p)` gets a
NamedTuple after each compile, on this thread and in order; returning
`false` cancels.
"""
function precompile(sources::Vector; archs::Vector{String} = String[], progress = nothing, kw...)
    pairs = [s isa Pair ? (_nonul(first(s)), _nonul(last(s))) : ("", _nonul(s)) for s in sources]
    as = map(_nonul, archs)
    aps = Ptr{Cchar}[Ptr{Cchar}(pointer(a)) for a in as]
    ctx = _Progress(progress, nothing)
    cb = @cfunction(_progress_tramp, Cint, (Csize_t, Csize_t, Ptr{Cchar}, Ptr{Cchar}, Cint, Cint, Ptr{Cvoid}))
    st = _with_program_options(; kw...) do o
        GC.@preserve pairs as aps ctx o begin
            base = _init(L.cuabi_precompile_item, L.cuabi_precompile_item_init, L.CUABI_PRECOMPILE_ITEM_VERSION)
            items = [L.cuabi_precompile_item(base.version, L.CUABI_CODE_CUDA_CXX, Ptr{Cchar}(pointer(src)), 0,
                                             Ptr{Cchar}(pointer(nm)), Base.unsafe_convert(Ptr{L.cuabi_program_options}, o))
                     for (nm, src) in pairs]
            L.cuabi_cache_precompile(items, length(items), isempty(aps) ? Ptr{Ptr{Cchar}}(C_NULL) : pointer(aps), length(aps),
                                     progress === nothing ? C_NULL : cb,
                                     progress === nothing ? C_NULL : pointer_from_objref(ctx))
        end
    end
    ctx.err === nothing || throw(ctx.err)
    check(st)
end

function _warm_tramp(ev::Ptr{L.cuabi_warm_event}, payload::Ptr{Cvoid})::Cint
    ctx = unsafe_pointer_to_objref(payload)::_Progress
    ctx.err === nothing || return Cint(1)
    try
        e = unsafe_load(ev)
        return ctx.f((done = Int(e.done), total = Int(e.total), name = _str(e.name),
                      arch = _str(e.arch), line = Int(e.line), status = Int(e.status),
                      cache_hit = Int(e.cache_hit), message = _str(e.message),
                      log = _str(e.log))) === false ? Cint(1) : Cint(0)
    catch err
        ctx.err = err   # never unwind into C: rethrown after the call
        return Cint(1)
    end
end

"""
    warm(manifest; archs = String[], jobs = 0, progress = nothing, allow_outside = false)

Precompile a project from its TOML manifest (docs/compile-cache.md), as
`cuabi cache warm` does: `CuABI.Cache.warm("cuabi.toml")`. `archs` replaces
the manifest's; `jobs` compiles at once (0: one per CPU); `allow_outside = true`
lets the manifest name files, include paths and `#include`s outside its own
directory tree (refused by default). `progress(e)` gets a
NamedTuple per outcome (`name, arch, line, status, cache_hit, message, log`;
`cache_hit == -1` for a problem with the manifest), on this thread, in the
manifest's order; returning `false` cancels. Returns the counts (`total,
compiled, cached, failed, problems`); throws the first failure's CuABIError.
"""
function warm(manifest::AbstractString; archs::Vector{String} = String[], jobs::Integer = 0,
              progress = nothing, allow_outside::Bool = false)
    path = _nonul(manifest)
    as = map(_nonul, archs)
    aps = Ptr{Cchar}[Ptr{Cchar}(pointer(a)) for a in as]
    ctx = _Progress(progress, nothing)
    cb = @cfunction(_warm_tramp, Cint, (Ptr{L.cuabi_warm_event}, Ptr{Cvoid}))
    base = _init(L.cuabi_warm_options, L.cuabi_warm_options_init, L.CUABI_WARM_OPTIONS_VERSION)
    summary = Ref(_init(L.cuabi_warm_summary, L.cuabi_warm_summary_init, L.CUABI_WARM_SUMMARY_VERSION))
    st = GC.@preserve path as aps ctx begin
        o = Ref(L.cuabi_warm_options(base.version, Cint(jobs),
                                     isempty(aps) ? Ptr{Ptr{Cchar}}(C_NULL) : pointer(aps), length(aps),
                                     Cint(allow_outside)))
        L.cuabi_cache_warm_manifest(summary, path, o, progress === nothing ? C_NULL : cb,
                                    progress === nothing ? C_NULL : pointer_from_objref(ctx))
    end
    ctx.err === nothing || throw(ctx.err)
    check(st)
    s = summary[]
    (total = Int(s.total), compiled = Int(s.compiled), cached = Int(s.cached),
     failed = Int(s.failed), problems = Int(s.problems))
end

function _verify_tramp(path::Ptr{Cchar}, problem::Ptr{Cchar}, payload::Ptr{Cvoid})::Cint
    found = unsafe_pointer_to_objref(payload)::Vector{Tuple{String,String}}
    push!(found, (_str(path), _str(problem)))
    return Cint(0)
end

"""
    verify()

Re-check every entry of the cache directory and remove the damaged ones, as
`cuabi cache verify` does. Returns `(checked, removed, bytes_removed, kept,
problems)`, `problems` a vector of `(path, problem)`.
"""
function verify()
    found = Tuple{String,String}[]
    r = Ref(_init(L.cuabi_cache_verify_report, L.cuabi_cache_verify_report_init,
                  L.CUABI_CACHE_VERIFY_REPORT_VERSION))
    cb = @cfunction(_verify_tramp, Cint, (Ptr{Cchar}, Ptr{Cchar}, Ptr{Cvoid}))
    GC.@preserve found check(L.cuabi_cache_verify(r, cb, pointer_from_objref(found)))
    v = r[]
    (checked = Int(v.checked), removed = Int(v.removed), bytes_removed = Int(v.bytes_removed),
     kept = Int(v.kept), problems = found)
end
end # module Cache

# ------------------------------------------------------------------ launch

"""
    AccessPolicyWindow(base, num_bytes; hit_ratio = 1.0, hit_prop = :persisting, miss_prop = :streaming)

An L2 access-policy window of a launch: `num_bytes` from `base` (an address,
a `Buffer` or a `View`); `hit_ratio` of its lines get `hit_prop`, the others
`miss_prop` (`:normal`, `:streaming` or `:persisting`; misses may not persist).
"""
struct AccessPolicyWindow
    base::UInt
    num_bytes::Int
    hit_ratio::Float32
    hit_prop::Symbol
    miss_prop::Symbol
end
_address(x::Integer) = UInt(x)
_address(b::Buffer) = UInt(pointer_address(b))
_address(v::View) = UInt(data_pointer(v))
AccessPolicyWindow(base, num_bytes::Integer; hit_ratio::Real = 1.0, hit_prop::Symbol = :persisting,
                   miss_prop::Symbol = :streaming) =
    AccessPolicyWindow(_address(base), Int(num_bytes), Float32(hit_ratio), hit_prop, miss_prop)

const _ACCESS = Dict(:normal => L.CUABI_ACCESS_PROPERTY_NORMAL, :streaming => L.CUABI_ACCESS_PROPERTY_STREAMING,
                     :persisting => L.CUABI_ACCESS_PROPERTY_PERSISTING)
const _SCHEDULING = Dict(:default => L.CUABI_CLUSTER_SCHEDULING_DEFAULT, :spread => L.CUABI_CLUSTER_SCHEDULING_SPREAD,
                         :load_balancing => L.CUABI_CLUSTER_SCHEDULING_LOAD_BALANCING)
const _DOMAIN = Dict(:default => L.CUABI_MEM_SYNC_DOMAIN_DEFAULT, :remote => L.CUABI_MEM_SYNC_DOMAIN_REMOTE)
_lookup(table, what, s::Symbol) = haskey(table, s) ? table[s] :
    throw(ArgumentError("$(what) must be one of $(join(sort(collect(keys(table))), ", ")), not :$(s)"))

"The cuLaunchKernelEx attributes of a `LaunchConfig` (see its keywords); keeps its events alive."
struct LaunchAttributes
    preferred_cluster::NTuple{3,Int}
    cluster_scheduling_policy::Symbol
    programmatic_stream_serialization::Bool
    programmatic_event::Union{Nothing,Event}
    programmatic_event_trigger_at_block_start::Bool
    launch_completion_event::Union{Nothing,Event}
    priority::Union{Nothing,Int}
    access_policy_window::Union{Nothing,AccessPolicyWindow}
    mem_sync_domain::Union{Nothing,Symbol}
    mem_sync_domain_map::Union{Nothing,NTuple{2,Int}}
    preferred_shared_memory_carveout::Union{Nothing,Int}
    nvlink_util_centric_scheduling::Bool
end

"""
    LaunchConfig(grid, block; shared = 0, stream = nothing, device = nothing, cluster = (0, 0, 0), cooperative = false,
                 programmatic_stream_serialization = false, programmatic_event = nothing,
                 programmatic_event_trigger_at_block_start = false, launch_completion_event = nothing,
                 priority = nothing, access_policy_window = nothing, preferred_cluster = nothing,
                 cluster_scheduling_policy = :default, mem_sync_domain = nothing, mem_sync_domain_map = nothing,
                 preferred_shared_memory_carveout = nothing, nvlink_util_centric_scheduling = false)

Where and how to launch; `grid`, `block`, `cluster` and `preferred_cluster` are
integers or 3-tuples. The keywords after `cooperative` are the other
cuLaunchKernelEx attributes (docs/launch.md): programmatic dependent launch,
events (made with `timing = false`), priority, an `AccessPolicyWindow`,
`:spread` / `:load_balancing` cluster scheduling, `:default` / `:remote`
memory sync domain and its `(default_id, remote_id)` map, a carveout percentage.
"""
struct LaunchConfig
    grid::NTuple{3,Int}
    block::NTuple{3,Int}
    cluster::NTuple{3,Int}
    shared::Int
    cooperative::Bool
    stream::Union{Nothing,Stream}
    device::Union{Nothing,Device}
    attributes::Union{Nothing,LaunchAttributes}
end
_dim3(x::Integer) = (Int(x), 1, 1)
_dim3(x::Tuple) = ntuple(i -> i <= length(x) ? Int(x[i]) : 1, 3)
function LaunchConfig(grid, block; shared::Integer = 0, stream = nothing, device = nothing, cluster = (0, 0, 0),
                      cooperative::Bool = false, programmatic_stream_serialization::Bool = false,
                      programmatic_event::Union{Nothing,Event} = nothing,
                      programmatic_event_trigger_at_block_start::Bool = false,
                      launch_completion_event::Union{Nothing,Event} = nothing,
                      priority::Union{Nothing,Integer} = nothing,
                      access_policy_window::Union{Nothing,AccessPolicyWindow} = nothing,
                      preferred_cluster = nothing, cluster_scheduling_policy::Symbol = :default,
                      mem_sync_domain::Union{Nothing,Symbol} = nothing, mem_sync_domain_map = nothing,
                      preferred_shared_memory_carveout::Union{Nothing,Integer} = nothing,
                      nvlink_util_centric_scheduling::Bool = false)
    a = LaunchAttributes(preferred_cluster === nothing ? (0, 0, 0) : _dim3(preferred_cluster),
                         cluster_scheduling_policy, programmatic_stream_serialization, programmatic_event,
                         programmatic_event_trigger_at_block_start, launch_completion_event,
                         priority === nothing ? nothing : Int(priority), access_policy_window, mem_sync_domain,
                         mem_sync_domain_map === nothing ? nothing : (Int(mem_sync_domain_map[1]), Int(mem_sync_domain_map[2])),
                         preferred_shared_memory_carveout === nothing ? nothing : Int(preferred_shared_memory_carveout),
                         nvlink_util_centric_scheduling)
    used = a.preferred_cluster != (0, 0, 0) || cluster_scheduling_policy != :default ||
           programmatic_stream_serialization || programmatic_event !== nothing ||
           launch_completion_event !== nothing || priority !== nothing || access_policy_window !== nothing ||
           mem_sync_domain !== nothing || mem_sync_domain_map !== nothing ||
           preferred_shared_memory_carveout !== nothing || nvlink_util_centric_scheduling
    used && _attributes(a)      # bad names fail here, not at launch
    LaunchConfig(_dim3(grid), _dim3(block), Tuple(Int.(cluster)), shared, cooperative, stream, device,
                 used ? a : nothing)
end

# The C attributes; the caller keeps `a` (its events) alive.
function _attributes(a::LaunchAttributes)
    o = _init(L.cuabi_launch_attributes, L.cuabi_launch_attributes_init, L.CUABI_LAUNCH_ATTRIBUTES_VERSION)
    w = a.access_policy_window
    _with(o; preferred_cluster = Cuint.(a.preferred_cluster),
          cluster_scheduling_policy = _lookup(_SCHEDULING, "cluster_scheduling_policy", a.cluster_scheduling_policy),
          programmatic_stream_serialization = Cint(a.programmatic_stream_serialization),
          programmatic_event = _sp(a.programmatic_event),
          programmatic_event_trigger_at_block_start = Cint(a.programmatic_event_trigger_at_block_start),
          launch_completion_event = _sp(a.launch_completion_event),
          priority = a.priority === nothing ? o.priority : Cint(a.priority),
          access_policy_base = w === nothing ? o.access_policy_base : w.base,
          access_policy_bytes = w === nothing ? o.access_policy_bytes : w.num_bytes,
          access_policy_hit_ratio = w === nothing ? o.access_policy_hit_ratio : w.hit_ratio,
          access_policy_hit_property = w === nothing ? o.access_policy_hit_property : _lookup(_ACCESS, "hit_prop", w.hit_prop),
          access_policy_miss_property = w === nothing ? o.access_policy_miss_property : _lookup(_ACCESS, "miss_prop", w.miss_prop),
          mem_sync_domain = a.mem_sync_domain === nothing ? o.mem_sync_domain :
                            Cint(_lookup(_DOMAIN, "mem_sync_domain", a.mem_sync_domain)),
          mem_sync_domain_map = a.mem_sync_domain_map === nothing ? o.mem_sync_domain_map : Cint.(a.mem_sync_domain_map),
          preferred_shared_memory_carveout = a.preferred_shared_memory_carveout === nothing ?
                                             o.preferred_shared_memory_carveout : Cint(a.preferred_shared_memory_carveout),
          nvlink_util_centric_scheduling = Cint(a.nvlink_util_centric_scheduling))
end

# The C struct; the caller keeps `c` (its stream and device) alive.
function _config(c::LaunchConfig)
    o = _init(L.cuabi_launch_config, L.cuabi_launch_config_init, L.CUABI_LAUNCH_CONFIG_VERSION)
    _with(o; grid = Cuint.(c.grid), block = Cuint.(c.block), cluster = Cuint.(c.cluster),
          dynamic_shared_bytes = c.shared, cooperative = Cint(c.cooperative),
          stream = _sp(c.stream), device = _sp(c.device))
end

# The handle objects a config names (its C struct holds their values).
_config_handles(c::LaunchConfig) =
    (c.stream, c.device, (c.attributes === nothing ? () :
                          (c.attributes.programmatic_event, c.attributes.launch_completion_event))...)

# Call f(Ref(config)) with the C struct and, when set, its attributes alive,
# and the handles it names in use.
function _with_config(f, c::LaunchConfig)
    _inuse(_config_handles(c)...) do
        o = _config(c)
        c.attributes === nothing && return GC.@preserve c f(Ref(o))
        a = Ref(_attributes(c.attributes))
        GC.@preserve c a f(Ref(_with(o; attributes = Base.unsafe_convert(Ptr{L.cuabi_launch_attributes}, a))))
    end
end

# Buffers and views as kernel arguments (the pack keeps the handle; looked up at launch).
_sig(::Buffer) = "buffer"
_sig(::View) = "view"
_set_c!(p::ArgPack, b::Buffer, slot::Integer) = _ref!(p, slot, b, L.cuabi_argpack_set_buffer(p, slot, b))
# `slot` names h now: kept, and in use during the pack's calls (ArgPack.refs).
function _ref!(p::ArgPack, slot::Integer, h::Handle, st)
    check(st)
    p.refs[Int(slot)] = h
    nothing
end
_set_c!(p::ArgPack, v::View, slot::Integer) = _ref!(p, slot, v, L.cuabi_argpack_set_view(p, slot, v))

"Check and launch `k` with the values in `pack`."
launch(k::Kernel, pack::ArgPack, c::LaunchConfig) = _with_config(r -> check(L.cuabi_launch(k, pack, r)), c)
launch_check(k::Kernel, pack::ArgPack, c::LaunchConfig) = _with_config(r -> check(L.cuabi_launch_check(k, pack, r)), c)
const _FLOAT_KINDS = (L.CUABI_ARG_F16, L.CUABI_ARG_BF16, L.CUABI_ARG_F32, L.CUABI_ARG_F64)

# One argument into a slot of a kernel's typed pack, by docs/launch.md's
# rules: an integer for a float parameter is converted when exact, a float
# for a parameter of unknown type must have its size, and a refusal names
# the argument and its type.
function _store_checked!(p::ArgPack, slot::Integer, v, t)
    what = isempty(t.type_name) ? "" : " ($(t.type_name))"
    if t.kind in _FLOAT_KINDS && v isa Integer && !(v isa Bool)
        f = Float64(v)
        f == v || throw(ArgumentError("argument $(slot + 1)$what: $v has no exact floating-point value"))
        return check(L.cuabi_argpack_set_float(p, slot, f))
    end
    if t.kind == L.CUABI_ARG_RAW && v isa AbstractFloat && sizeof(v) != t.size
        throw(ArgumentError("argument $(slot + 1)$what: a $(typeof(v)) for a $(t.size)-byte parameter " *
                            "of unknown type; pass a float of $(t.size) bytes"))
    end
    try
        _set_c!(p, v, slot)
    catch e
        e isa CuABIError && e.status == L.CUABI_ERROR_ARGUMENT_MISMATCH || rethrow()
        throw(ArgumentError("argument $(slot + 1)$what: $(typeof(v)) refused: $(e.message)"))
    end
    nothing
end

"""
    ArgPack(k::Kernel, args...)

A pack typed from the kernel's own parameters (`param_types(k)`: its mangled
name or PTX), filled from `args`: a float for an integer parameter is refused,
naming the argument, instead of reinterpreting its bits.
"""
function ArgPack(k::Kernel, args...)
    pack = _own(ArgPack, _create(out -> L.cuabi_argpack_create_for_kernel(out, k)))
    types = param_types(k)
    length(args) == length(types) ||
        throw(ArgumentError("kernel $(name(k)) takes $(length(types)) arguments " *
                            "($(signature(k))), $(length(args)) given"))
    for (i, a) in enumerate(args)
        _store_checked!(pack, i - 1, a, types[i])
    end
    pack
end

"`launch(k, c, args...)`: a pack typed from the kernel, filled from the arguments."
launch(k::Kernel, c::LaunchConfig, args...) = launch(k, ArgPack(k, args...), c)

"A kernel, pack and configuration bound once for repeated launches (`launch(p)`; `p.pack[i] = v` between, 1-based)."
mutable struct PreparedLaunch <: Handle
    ptr::Ptr{Cvoid}
    pack::ArgPack
end
_release(::PreparedLaunch, p) = L.cuabi_prepared_release(p)
# A launch of it holds its pack's Buffers and Views in use too.
function L._enter(p::PreparedLaunch)
    invoke(L._enter, Tuple{Handle}, p)
    try
        return _enter_refs(p.pack)
    catch
        invoke(L._leave, Tuple{Handle,Nothing}, p, nothing)
        rethrow()
    end
end
function L._leave(p::PreparedLaunch, refs::Vector{Handle})
    _leave_refs(refs)
    invoke(L._leave, Tuple{Handle,Nothing}, p, nothing)
end
PreparedLaunch(k::Kernel, pack::ArgPack, c::LaunchConfig) =
    _own(PreparedLaunch, _with_config(r -> _create(out -> L.cuabi_prepared_create(out, k, pack, r)), c), pack)
launch(p::PreparedLaunch) = check(L.cuabi_prepared_launch(p))
set_grid!(p::PreparedLaunch, x::Integer, y::Integer = 1, z::Integer = 1) = check(L.cuabi_prepared_set_grid(p, x, y, z))

# --------------------------------------------------------------- occupancy

_occ_result() = _init(L.cuabi_occupancy_result, L.cuabi_occupancy_result_init, L.CUABI_OCCUPANCY_RESULT_VERSION)
limiter_name(l::Integer) = _str(L.cuabi_occupancy_limiter_name(l))

"Resident blocks per SM of `k` on `d` (driver)."
function occupancy(k::Kernel, d::Device, block_size::Integer; shared::Integer = 0)
    r = Ref(_occ_result())
    check(L.cuabi_occupancy_max_active_blocks(r, k, d, block_size, shared))
    r[]
end
# The offline answers' kernel settings (cuabi_occupancy_options): the GPU's
# SM count (0: the architecture's example GPU), the kernel's maximum dynamic
# shared memory (-1: the driver's default) and carveout (-1: none).
function _occ_options(; sm_count::Integer = 0, max_dynamic_shared::Integer = -1, carveout::Integer = -1)
    o = _init(L.cuabi_occupancy_options, L.cuabi_occupancy_options_init, L.CUABI_OCCUPANCY_OPTIONS_VERSION)
    Ref(_with(o; sm_count = sm_count, max_dynamic_shared_bytes = max_dynamic_shared, carveout = carveout))
end

"""
    occupancy(arch, resources, block_size; shared = 0, sm_count = 0, max_dynamic_shared = -1, carveout = -1)

Resident blocks per SM offline, for an architecture and a kernel's resources.
"""
function occupancy(arch::AbstractString, res::L.cuabi_kernel_resources, block_size::Integer; shared::Integer = 0,
                   options...)
    r = Ref(_occ_result())
    check(L.cuabi_occupancy_offline_max_active_blocks(r, _nonul(arch), Ref(res), block_size, shared,
                                                      _occ_options(; options...)))
    r[]
end

"Dynamic shared memory per block (bytes) with `num_blocks` blocks of `block_size` threads on one SM (driver)."
function available_dynamic_smem(k::Kernel, d::Device, num_blocks::Integer, block_size::Integer)
    v = Ref{Csize_t}(0)
    check(L.cuabi_occupancy_available_dynamic_smem(v, k, d, num_blocks, block_size))
    Int(v[])
end
"The same offline (keywords: sm_count, max_dynamic_shared, carveout)."
function available_dynamic_smem(arch::AbstractString, res::L.cuabi_kernel_resources, num_blocks::Integer,
                                block_size::Integer; options...)
    v = Ref{Csize_t}(0)
    check(L.cuabi_occupancy_offline_available_dynamic_smem(v, _nonul(arch), Ref(res), num_blocks, block_size,
                                                           _occ_options(; options...)))
    Int(v[])
end

"""
    max_potential_cluster_size(k, config)
    max_potential_cluster_size(arch, resources, config; sm_count = 0, ...)

The largest cluster size (blocks) co-resident for a configuration: the
driver's on the config's stream's (or device's) GPU, or an offline estimate.
"""
function max_potential_cluster_size(k::Kernel, c::LaunchConfig)
    v = Ref{Cint}(0)
    _with_config(r -> check(L.cuabi_occupancy_max_potential_cluster_size(v, k, r)), c)
    Int(v[])
end
function max_potential_cluster_size(arch::AbstractString, res::L.cuabi_kernel_resources, c::LaunchConfig; options...)
    v, a, o = Ref{Cint}(0), _nonul(arch), _occ_options(; options...)
    _with_config(r -> check(L.cuabi_occupancy_offline_max_potential_cluster_size(v, a, Ref(res), r, o)), c)
    Int(v[])
end

"""
    max_active_clusters(k, config)
    max_active_clusters(arch, resources, config; sm_count = 0, ...)

How many clusters of the configuration's cluster size can be resident at
once: the driver's answer, or an offline estimate.
"""
function max_active_clusters(k::Kernel, c::LaunchConfig)
    v = Ref{Cint}(0)
    _with_config(r -> check(L.cuabi_occupancy_max_active_clusters(v, k, r)), c)
    Int(v[])
end
function max_active_clusters(arch::AbstractString, res::L.cuabi_kernel_resources, c::LaunchConfig; options...)
    v, a, o = Ref{Cint}(0), _nonul(arch), _occ_options(; options...)
    _with_config(r -> check(L.cuabi_occupancy_offline_max_active_clusters(v, a, Ref(res), r, o)), c)
    Int(v[])
end

mutable struct _Smem
    f::Any
    err::Any
end
function _smem_tramp(block_size::Cint, payload::Ptr{Cvoid})::Csize_t
    ctx = unsafe_pointer_to_objref(payload)::_Smem
    ctx.err === nothing || return Csize_t(0)
    try
        return Csize_t(ctx.f(Int(block_size)))
    catch e
        ctx.err = e   # rethrown after the C call returns
        return Csize_t(0)
    end
end
function _with_smem(g, smem)
    smem === nothing && return g(C_NULL, C_NULL)
    ctx = _Smem(smem, nothing)
    cb = @cfunction(_smem_tramp, Csize_t, (Cint, Ptr{Cvoid}))
    st = GC.@preserve ctx g(cb, pointer_from_objref(ctx))
    ctx.err === nothing || throw(ctx.err)
    st
end

"""
    max_potential_block_size(k, d; smem = bs -> 0, shared = 0, limit = 0)
    max_potential_block_size(arch, resources; ..., sm_count = 0, max_dynamic_shared = -1, carveout = -1)

The block size with the most resident threads and the smallest grid
filling the GPU; `smem(block_size)` gives dynamic shared memory per block
(an exception it throws is rethrown here).
"""
function max_potential_block_size(k::Kernel, d::Device; smem = nothing, shared::Integer = 0, limit::Integer = 0)
    b, g = Ref{Cint}(0), Ref{Cint}(0)
    check(_with_smem(smem) do cb, p
        L.cuabi_occupancy_max_potential_block_size(b, g, k, d, cb, p, shared, limit)
    end)
    (block_size = Int(b[]), min_grid_size = Int(g[]))
end
function max_potential_block_size(arch::AbstractString, res::L.cuabi_kernel_resources; smem = nothing,
                                  shared::Integer = 0, limit::Integer = 0, options...)
    b, g = Ref{Cint}(0), Ref{Cint}(0)
    a, o = _nonul(arch), _occ_options(; options...)
    check(_with_smem(smem) do cb, p
        L.cuabi_occupancy_offline_max_potential_block_size(b, g, a, Ref(res), cb, p, shared, limit, o)
    end)
    (block_size = Int(b[]), min_grid_size = Int(g[]))
end
function arch_limits(arch::AbstractString)
    r = Ref(_init(L.cuabi_arch_limits, L.cuabi_arch_limits_init, L.CUABI_ARCH_LIMITS_VERSION))
    check(L.cuabi_arch_limits_get(r, _nonul(arch)))
    r[]
end
"The limits of every architecture of the table, ascending."
function all_arch_limits()
    out = L.cuabi_arch_limits[]
    while true
        r = Ref(_init(L.cuabi_arch_limits, L.cuabi_arch_limits_init, L.CUABI_ARCH_LIMITS_VERSION))
        L.cuabi_arch_limits_at(r, length(out)) == L.CUABI_SUCCESS || return out
        push!(out, r[])
    end
end
