# NVML (issue 26): the GPUs as the management library sees them -- name,
# UUID, memory, utilisation, temperature, power, clocks, ECC errors, throttle
# reasons, PCIe and NVLink links, the topology between two GPUs, the
# processes on each -- without the CUDA driver and without a CUDA context
# (docs/nvml.md; included by CuABI.jl). GPUs are NVML's 0-based indices,
# which need not be CUDA ordinals: `nvml_cuda_ordinal` and
# `nvml_from_cuda_ordinal` map them by UUID (they initialise the driver;
# still no context). A value NVML does not report for a GPU is `nothing`.
# Without NVML every call throws a CuABIError with CUABI_ERROR_NOT_SUPPORTED
# ("NVML not available: ...").

# Up to the first NUL, whatever follows it.
function _ctext(t::NTuple{N,Cchar}) where {N}
    bytes = UInt8[]
    for c in t
        c == 0 && break
        push!(bytes, reinterpret(UInt8, c))
    end
    String(bytes)
end

# `v`, or `nothing` when NVML did not report it (`bit` set in `unavailable`).
_reported(unavailable, bit, v) = (unavailable & UInt64(bit)) != 0 ? nothing : v

"""
    nvml_system_info() -> NamedTuple

Loads and initialises NVML (once): the driver's version, NVML's, the CUDA
version the driver supports (`nothing` when NVML does not say), the GPU
count and the file loaded.
"""
function nvml_system_info()
    r = Ref(_init(L.cuabi_nvml_system_info, L.cuabi_nvml_system_info_init,
                  L.CUABI_NVML_SYSTEM_INFO_VERSION))
    check(L.cuabi_nvml_system_info_get(r))
    s = r[]
    (driver_version = _ctext(s.driver_version), nvml_version = _ctext(s.nvml_version),
     cuda_driver_version = s.cuda_driver_version > 0 ? Int(s.cuda_driver_version) : nothing,
     device_count = Int(s.device_count), library_path = _str(s.library_path))
end

"How many GPUs NVML lists (whatever CUDA_VISIBLE_DEVICES says)."
function nvml_device_count()
    n = Ref{Cint}(0)
    check(L.cuabi_nvml_device_count(n))
    Int(n[])
end

"""
    nvml_device_info(index) -> NamedTuple

What NVML GPU `index` (0-based) is: name, uuid ("GPU-..."), uuid_bytes (the
CUDA device's UUID bytes), pci_bus_id, compute_capability, memory_total,
PCIe and clock maxima, ecc_enabled, nvlink_count.
"""
function nvml_device_info(index::Integer)
    r = Ref(_init(L.cuabi_nvml_device_info, L.cuabi_nvml_device_info_init,
                  L.CUABI_NVML_DEVICE_INFO_VERSION))
    check(L.cuabi_nvml_device_info_get(r, index))
    d = r[]
    u = d.unavailable
    (index = Int(d.index), name = _ctext(d.name), uuid = _ctext(d.uuid),
     uuid_bytes = _reported(u, L.CUABI_NVML_FIELD_UUID, collect(d.uuid_bytes)),
     pci_bus_id = _ctext(d.pci_bus_id), pci_location = (Int(d.pci_domain), Int(d.pci_bus), Int(d.pci_device)),
     compute_capability = _reported(u, L.CUABI_NVML_FIELD_COMPUTE_CAPABILITY,
                                    (Int(d.compute_capability_major), Int(d.compute_capability_minor))),
     memory_total = _reported(u, L.CUABI_NVML_FIELD_MEMORY_TOTAL, Int(d.memory_total)),
     pcie_max_link = _reported(u, L.CUABI_NVML_FIELD_PCIE_MAX_LINK,
                               (Int(d.pcie_max_generation), Int(d.pcie_max_width))),
     max_clocks_mhz = _reported(u, L.CUABI_NVML_FIELD_MAX_CLOCKS,
                                (Int(d.max_clock_graphics_mhz), Int(d.max_clock_sm_mhz),
                                 Int(d.max_clock_memory_mhz))),
     ecc_enabled = _reported(u, L.CUABI_NVML_FIELD_ECC_MODE, d.ecc_enabled != 0),
     nvlink_count = Int(d.nvlink_count))
end

"""
    nvml_health(index) -> NamedTuple

How NVML GPU `index` is doing now: memory (total, free, used, reserved),
utilization (gpu, memory percent), temperature_c, power_usage_mw,
power_limit_mw, clocks_mhz (graphics, sm, memory), ecc_volatile and
ecc_aggregate (corrected, uncorrected), throttle_reasons (CUABI_NVML_THROTTLE_*
bits), pcie_link (generation, lanes), performance_state, fan_speed_percent;
`nothing` where NVML does not report a value.
"""
function nvml_health(index::Integer)
    r = Ref(_init(L.cuabi_nvml_health, L.cuabi_nvml_health_init, L.CUABI_NVML_HEALTH_VERSION))
    check(L.cuabi_nvml_device_health_get(r, index))
    h = r[]
    u = h.unavailable
    clock(bit, v) = _reported(u, bit, Int(v))
    (memory_total = _reported(u, L.CUABI_NVML_FIELD_MEMORY, Int(h.memory_total)),
     memory_free = _reported(u, L.CUABI_NVML_FIELD_MEMORY, Int(h.memory_free)),
     memory_used = _reported(u, L.CUABI_NVML_FIELD_MEMORY, Int(h.memory_used)),
     memory_reserved = _reported(u, L.CUABI_NVML_FIELD_MEMORY_RESERVED, Int(h.memory_reserved)),
     utilization = _reported(u, L.CUABI_NVML_FIELD_UTILIZATION,
                             (gpu = Int(h.utilization_gpu), memory = Int(h.utilization_memory))),
     temperature_c = _reported(u, L.CUABI_NVML_FIELD_TEMPERATURE, Int(h.temperature_gpu)),
     power_usage_mw = _reported(u, L.CUABI_NVML_FIELD_POWER_USAGE, Int(h.power_usage_mw)),
     power_limit_mw = _reported(u, L.CUABI_NVML_FIELD_POWER_LIMIT, Int(h.power_limit_mw)),
     power_management_limit_mw = _reported(u, L.CUABI_NVML_FIELD_POWER_MANAGEMENT_LIMIT,
                                           Int(h.power_management_limit_mw)),
     clocks_mhz = (graphics = clock(L.CUABI_NVML_FIELD_CLOCK_GRAPHICS, h.clock_graphics_mhz),
                   sm = clock(L.CUABI_NVML_FIELD_CLOCK_SM, h.clock_sm_mhz),
                   memory = clock(L.CUABI_NVML_FIELD_CLOCK_MEMORY, h.clock_memory_mhz)),
     ecc_volatile = _reported(u, L.CUABI_NVML_FIELD_ECC_VOLATILE,
                              (Int(h.ecc_corrected_volatile), Int(h.ecc_uncorrected_volatile))),
     ecc_aggregate = _reported(u, L.CUABI_NVML_FIELD_ECC_AGGREGATE,
                               (Int(h.ecc_corrected_aggregate), Int(h.ecc_uncorrected_aggregate))),
     throttle_reasons = _reported(u, L.CUABI_NVML_FIELD_THROTTLE_REASONS, h.throttle_reasons),
     pcie_link = _reported(u, L.CUABI_NVML_FIELD_PCIE_LINK, (Int(h.pcie_generation), Int(h.pcie_width))),
     performance_state = _reported(u, L.CUABI_NVML_FIELD_PERFORMANCE_STATE, Int(h.performance_state)),
     fan_speed_percent = _reported(u, L.CUABI_NVML_FIELD_FAN_SPEED, Int(h.fan_speed_percent)))
end

"KiB/s (sent, received) over NVML GPU `index`'s PCIe link, each counted over 20 ms."
function nvml_pcie_throughput(index::Integer)
    tx, rx = Ref{Cuint}(0), Ref{Cuint}(0)
    check(L.cuabi_nvml_device_pcie_throughput(tx, rx, index))
    (Int(tx[]), Int(rx[]))
end

"NVLink link `link` (0-based) of NVML GPU `index`: active, version, remote end, P2P support."
function nvml_nvlink(index::Integer, link::Integer)
    r = Ref(_init(L.cuabi_nvml_nvlink, L.cuabi_nvml_nvlink_init, L.CUABI_NVML_NVLINK_VERSION))
    check(L.cuabi_nvml_device_nvlink_get(r, index, link))
    l = r[]
    u = l.unavailable
    (link = Int(l.link), active = _reported(u, L.CUABI_NVML_FIELD_NVLINK_STATE, l.active != 0),
     version = _reported(u, L.CUABI_NVML_FIELD_NVLINK_VERSION, (Int(l.version_major), Int(l.version_minor))),
     remote_pci_bus_id = _reported(u, L.CUABI_NVML_FIELD_NVLINK_REMOTE, _ctext(l.remote_pci_bus_id)),
     remote_index = l.remote_index >= 0 ? Int(l.remote_index) : nothing,
     p2p_supported = _reported(u, L.CUABI_NVML_FIELD_NVLINK_P2P, l.p2p_supported != 0))
end

"How NVML GPUs `a` and `b` are connected: common_ancestor and the P2P statuses (C enum values)."
function nvml_topology(a::Integer, b::Integer)
    r = Ref(_init(L.cuabi_nvml_topology, L.cuabi_nvml_topology_init, L.CUABI_NVML_TOPOLOGY_VERSION))
    check(L.cuabi_nvml_topology_get(r, a, b))
    t = r[]
    (common_ancestor = _reported(t.unavailable, L.CUABI_NVML_FIELD_TOPOLOGY, t.common_ancestor),
     p2p_read = t.p2p_read, p2p_write = t.p2p_write, p2p_nvlink = t.p2p_nvlink,
     p2p_atomics = t.p2p_atomics, p2p_pci = t.p2p_pci)
end

"""
    nvml_processes(index) -> Vector{NamedTuple}

The processes with a compute or graphics context on NVML GPU `index`, by
pid: pid, used_memory (`nothing` when NVML cannot tell), compute, graphics.
"""
function nvml_processes(index::Integer)
    capacity = 16
    while true
        one = _init(L.cuabi_nvml_process, L.cuabi_nvml_process_init, L.CUABI_NVML_PROCESS_VERSION)
        arr = fill(one, capacity)
        n = Ref{Csize_t}(0)
        check(L.cuabi_nvml_device_processes(arr, capacity, n, index))
        if n[] > capacity
            capacity = Int(n[]) + 8          # more came meanwhile: ask again
            continue
        end
        return [(pid = Int(p.pid), used_memory = p.used_memory == typemax(UInt64) ? nothing : Int(p.used_memory),
                 compute = (p.kinds & UInt32(L.CUABI_NVML_PROCESS_COMPUTE)) != 0,
                 graphics = (p.kinds & UInt32(L.CUABI_NVML_PROCESS_GRAPHICS)) != 0)
                for p in arr[1:Int(n[])]]
    end
end

"NVML's index of the GPU with this UUID (\"GPU-...\") or PCI bus id (\"0000:17:00.0\")."
function nvml_find(id::AbstractString)
    out = Ref{Cint}(-1)
    check(L.cuabi_nvml_device_find(out, id))
    Int(out[])
end

"The CUDA ordinal of NVML GPU `index`, or `nothing` when CUDA does not show it (initialises the driver)."
function nvml_cuda_ordinal(index::Integer)
    out = Ref{Cint}(-1)
    check(L.cuabi_nvml_device_cuda_ordinal(out, index))
    out[] >= 0 ? Int(out[]) : nothing
end

"NVML's index of CUDA device `ordinal` (by UUID; initialises the driver)."
function nvml_from_cuda_ordinal(ordinal::Integer)
    out = Ref{Cint}(-1)
    check(L.cuabi_nvml_device_from_cuda_ordinal(out, ordinal))
    Int(out[])
end
