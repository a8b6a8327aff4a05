# Green contexts, waves and checkpoints (issue 26; included by CuABI.jl):
# a device's SMs split into partitions (SMResource, split), green contexts
# of them (GreenContext) whose streams run on their SMs only, occupancy in a
# green context, the waves of a grid (a device, a partition, or offline for
# a number of SMs), and checkpoint and restore of a process by pid.

"""
    SMResource

A set of a device's SMs: the whole device's (`sm_resource(device)`), a group
or the remainder of a split, or a green context's. Keeps its device alive.
"""
mutable struct SMResource <: Handle
    ptr::Ptr{Cvoid}
end
_release(::SMResource, p) = L.cuabi_sm_resource_release(p)

"""
    GreenContext(device, resources::Vector{SMResource})

A green context of the SMs of `resources` (groups of one split, or one
resource). Its streams (`Stream(g)`) run there and keep it alive.
"""
mutable struct GreenContext <: Handle
    ptr::Ptr{Cvoid}
    device::Device
end
_release(::GreenContext, p) = L.cuabi_green_ctx_release(p)

"Another object owning a reference to the same SM resource (closed independently)."
function Base.copy(r::SMResource)
    check(L.cuabi_sm_resource_retain(r))
    _own(SMResource, r.ptr)
end

"All of a device's SMs, to split."
sm_resource(d::Device) = _own(SMResource, _create(out -> L.cuabi_device_sm_resource(out, d)))
"The green context's SMs (its partition), to split again."
sm_resource(g::GreenContext) = _own(SMResource, _create(out -> L.cuabi_green_ctx_sm_resource(out, g)))

"What the driver says of `r`: sm_count, min_partition_size, coscheduled_alignment, kind, ordinal, split_id, index."
function info(r::SMResource)
    i = Ref(_init(L.cuabi_sm_resource_info, L.cuabi_sm_resource_info_init, L.CUABI_SM_RESOURCE_INFO_VERSION))
    check(L.cuabi_sm_resource_get_info(i, r))
    i[]
end

"The device of an SM resource."
function device(r::SMResource)
    p = Ref{Ptr{Cvoid}}(C_NULL)
    check(L.cuabi_sm_resource_device(p, r))
    check(L.cuabi_device_retain(p[]))          # the getter borrows
    _own(Device, p[])
end

function _split_options(min_count::Integer, fine::Bool)
    o = _init(L.cuabi_sm_split_options, L.cuabi_sm_split_options_init, L.CUABI_SM_SPLIT_OPTIONS_VERSION)
    Ref(_with(o; min_count = min_count,
              flags = fine ? L.CUABI_SM_SPLIT_IGNORE_SM_COSCHEDULING : L.CUABI_SM_SPLIT_DEFAULT))
end

"How many groups of at least `min_count` SMs a split of `r` would make."
function group_count(r::SMResource, min_count::Integer = 0; fine::Bool = false)
    n = Ref{Csize_t}(0)
    check(L.cuabi_sm_resource_split(Ptr{Ptr{L.cuabi_sm_resource}}(C_NULL), n,
                                    Ptr{Ptr{L.cuabi_sm_resource}}(C_NULL), r, _split_options(min_count, fine)))
    Int(n[])
end

"""
    split(r::SMResource, groups, min_count; fine = false) -> (Vector{SMResource}, remainder)

Up to `groups` groups of at least `min_count` SMs (rounded up by the driver;
`fine`: co-scheduling relaxed, finer groups) and the SMs left over (`nothing`
when none).
"""
function Base.split(r::SMResource, groups::Integer, min_count::Integer = 0; fine::Bool = false)
    out = fill(Ptr{L.cuabi_sm_resource}(C_NULL), max(groups, 1))
    n = Ref{Csize_t}(groups)
    rem = Ref{Ptr{L.cuabi_sm_resource}}(C_NULL)
    check(L.cuabi_sm_resource_split(out, n, rem, r, _split_options(min_count, fine)))
    made = SMResource[_own(SMResource, Ptr{Cvoid}(out[i])) for i in 1:Int(n[])]
    made, rem[] == C_NULL ? nothing : _own(SMResource, Ptr{Cvoid}(rem[]))
end

function GreenContext(d::Device, resources::Vector{SMResource})
    _inuse(resources...) do
        ptrs = Ptr{L.cuabi_sm_resource}[Ptr{L.cuabi_sm_resource}(Base.unsafe_convert(Ptr{Cvoid}, r))
                                       for r in resources]
        GC.@preserve resources ptrs _own(GreenContext,
                                         _create(out -> L.cuabi_green_ctx_create(out, d, ptrs, length(ptrs))), d)
    end
end

"""
    workqueue_config(; concurrency_limit, balanced = false)

A workqueue configuration (CUDA 13.1 drivers) to give
`GreenContext(device, resources, config)`: the expected most concurrent
stream-ordered workloads (1 or more) and, with `balanced`, workqueues kept
apart from other balanced green contexts where the driver can.
"""
function workqueue_config(; concurrency_limit::Integer, balanced::Bool = false)
    o = _init(L.cuabi_workqueue_config, L.cuabi_workqueue_config_init, L.CUABI_WORKQUEUE_CONFIG_VERSION)
    _with(o; concurrency_limit = concurrency_limit,
          sharing_scope = balanced ? L.CUABI_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED :
                                     L.CUABI_WORKQUEUE_SCOPE_DEVICE_CTX)
end

"The device's workqueue configuration (its concurrency_limit is the driver's cap; CUDA 13.1 drivers)."
function workqueue_config(d::Device)
    c = Ref(_init(L.cuabi_workqueue_config, L.cuabi_workqueue_config_init, L.CUABI_WORKQUEUE_CONFIG_VERSION))
    check(L.cuabi_device_workqueue_config(c, d))
    c[]
end

"The workqueue configuration the green context was made with (CUDA 13.1 drivers)."
function workqueue_config(g::GreenContext)
    c = Ref(_init(L.cuabi_workqueue_config, L.cuabi_workqueue_config_init, L.CUABI_WORKQUEUE_CONFIG_VERSION))
    check(L.cuabi_green_ctx_workqueue_config(c, g))
    c[]
end

"A green context of `resources` with a workqueue configuration (`workqueue_config(...)`)."
function GreenContext(d::Device, resources::Vector{SMResource}, workqueue::L.cuabi_workqueue_config)
    _inuse(resources...) do
        ptrs = Ptr{L.cuabi_sm_resource}[Ptr{L.cuabi_sm_resource}(Base.unsafe_convert(Ptr{Cvoid}, r))
                                       for r in resources]
        GC.@preserve resources ptrs _own(GreenContext,
                                         _create(out -> L.cuabi_green_ctx_create_with_workqueue(
                                             out, d, ptrs, length(ptrs), Ref(workqueue))), d)
    end
end

"SMs of the green context's partition."
sm_count(g::GreenContext) = _bq(L.cuabi_green_ctx_sm_count, g, Cint)

"A stream of the green context (non-blocking, as the driver wants); keeps it alive."
function Stream(g::GreenContext; priority::Integer = 0)
    o = _init(L.cuabi_stream_options, L.cuabi_stream_options_init, L.CUABI_STREAM_OPTIONS_VERSION)
    o = _with(o; flags = L.CUABI_STREAM_NON_BLOCKING, priority = priority)
    _own(Stream, _create(out -> L.cuabi_green_ctx_stream_create(out, g, Ref(o))), g.device)
end

"The green context a stream was created on, or `nothing`."
function green_context(s::Stream)
    p = Ref{Ptr{Cvoid}}(C_NULL)
    check(L.cuabi_stream_green_ctx(p, s))
    p[] == C_NULL && return nothing
    check(L.cuabi_green_ctx_retain(p[]))       # the getter borrows
    _own(GreenContext, p[], s.device)
end

synchronize(g::GreenContext) = check(L.cuabi_green_ctx_synchronize(g))
"Record all of the green context's work queued so far in `e`."
record(g::GreenContext, e::Event) = check(L.cuabi_green_ctx_record_event(g, e))
"Make all later work of the green context wait for `e`."
wait_event(g::GreenContext, e::Event) = check(L.cuabi_green_ctx_wait_event(g, e))
"The CUgreenCtx."
raw(g::GreenContext) = UInt(_bq(L.cuabi_green_ctx_raw, g, UInt))
"The CUcontext the driver makes of the green context (cuCtxFromGreenCtx)."
context(g::GreenContext) = UInt(_bq(L.cuabi_green_ctx_context, g, UInt))
function device(g::GreenContext)
    p = Ref{Ptr{Cvoid}}(C_NULL)
    check(L.cuabi_green_ctx_device(p, g))
    check(L.cuabi_device_retain(p[]))
    _own(Device, p[])
end

# ---- occupancy in a green context, and waves

"Resident blocks per SM of `k` asked in the green context (driver)."
function occupancy(k::Kernel, g::GreenContext, block_size::Integer; shared::Integer = 0)
    r = Ref(_occ_result())
    check(L.cuabi_occupancy_green_max_active_blocks(r, k, g, block_size, shared))
    r[]
end

"The best block size and the smallest grid filling the green context's partition."
function max_potential_block_size(k::Kernel, g::GreenContext; smem = nothing, shared::Integer = 0,
                                  limit::Integer = 0)
    b, gr = Ref{Cint}(0), Ref{Cint}(0)
    check(_with_smem(smem) do cb, p
        L.cuabi_occupancy_green_max_potential_block_size(b, gr, k, g, cb, p, shared, limit)
    end)
    (block_size = Int(b[]), min_grid_size = Int(gr[]))
end

_waves() = Ref(_init(L.cuabi_grid_waves, L.cuabi_grid_waves_init, L.CUABI_GRID_WAVES_VERSION))

"""
    waves(k, d::Device, block_size, grid_blocks; shared = 0)
    waves(k, g::GreenContext, block_size, grid_blocks; shared = 0)
    waves(arch, resources, sm_count, block_size, grid_blocks; shared = 0, options...)

The waves a grid of `grid_blocks` blocks takes: on the whole device, on a
green context's partition, or offline on `sm_count` SMs of an architecture
(0: `options.sm_count`, else the architecture's example GPU). A
`cuabi_grid_waves`: blocks_per_sm, blocks_per_wave, waves, last_wave_blocks,
efficiency.
"""
function waves(k::Kernel, d::Device, block_size::Integer, grid_blocks::Integer; shared::Integer = 0)
    w = _waves()
    check(L.cuabi_occupancy_waves(w, k, d, block_size, shared, grid_blocks))
    w[]
end
function waves(k::Kernel, g::GreenContext, block_size::Integer, grid_blocks::Integer; shared::Integer = 0)
    w = _waves()
    check(L.cuabi_occupancy_green_waves(w, k, g, block_size, shared, grid_blocks))
    w[]
end
function waves(arch::AbstractString, res::L.cuabi_kernel_resources, sm_count::Integer, block_size::Integer,
               grid_blocks::Integer; shared::Integer = 0, options...)
    w = _waves()
    check(L.cuabi_occupancy_offline_waves(w, _nonul(arch), Ref(res), sm_count, block_size, shared, grid_blocks,
                                          _occ_options(; options...)))
    w[]
end

# ---- checkpoint and restore of a process

"""
    CheckpointProcess(pid)

A CUDA process to lock, checkpoint, restore and unlock (cuda.core's
checkpoint.Process): `state`, `restore_thread_id`, `lock`, `checkpoint`,
`restore`, `unlock`.
"""
struct CheckpointProcess
    pid::Int32
end

"The process's state: :running, :locked, :checkpointed, :failed, ..."
function state(p::CheckpointProcess)
    s = Ref{L.cuabi_process_state}(L.CUABI_PROCESS_STATE_RUNNING)
    check(L.cuabi_checkpoint_process_state(s, p.pid))
    Symbol(_str(L.cuabi_process_state_name(s[])))
end
function restore_thread_id(p::CheckpointProcess)
    t = Ref{Cint}(0)
    check(L.cuabi_checkpoint_process_restore_thread_id(t, p.pid))
    Int(t[])
end
"Lock it (its CUDA calls block), waiting at most `timeout_ms` (0: no limit)."
lock!(p::CheckpointProcess; timeout_ms::Integer = 0) = check(L.cuabi_checkpoint_process_lock(p.pid, timeout_ms))
checkpoint!(p::CheckpointProcess) = check(L.cuabi_checkpoint_process_checkpoint(p.pid))
"Restore it (then locked); `pairs`: old GPU UUID => new GPU UUID (16 bytes each)."
function restore!(p::CheckpointProcess, pairs::Pair...)
    c = L.cuabi_checkpoint_gpu_pair[L.cuabi_checkpoint_gpu_pair(NTuple{16,UInt8}(o), NTuple{16,UInt8}(n))
                                    for (o, n) in pairs]
    GC.@preserve c check(L.cuabi_checkpoint_process_restore(p.pid, isempty(c) ? C_NULL : pointer(c), length(c)))
end
unlock!(p::CheckpointProcess) = check(L.cuabi_checkpoint_process_unlock(p.pid))
