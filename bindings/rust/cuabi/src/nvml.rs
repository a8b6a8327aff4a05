//! NVML (issue 26): the GPUs as the management library sees them --
//! name, UUID, memory, utilisation, temperature, power, clocks, ECC errors,
//! throttle reasons, PCIe and NVLink links, the topology between two GPUs,
//! the processes on each -- without the CUDA driver and without a CUDA
//! context (see cuabi/nvml.h and docs/nvml.md). GPUs are NVML's indices
//! ([`NvmlDevice`]), which need not be CUDA ordinals:
//! [`NvmlDevice::cuda_ordinal`] and [`NvmlDevice::from_cuda_ordinal`] map
//! them by UUID (they initialise the driver; still no context). A value NVML
//! does not report for a GPU is `None`. Without NVML every call fails with
//! `CUABI_ERROR_NOT_SUPPORTED` ("NVML not available: ...").
use crate::error::{c_string, check, Error, Result};
use crate::sys;

/// How far apart two GPUs sit (`cuabi_nvml_topology_level`).
pub type TopologyLevel = sys::cuabi_nvml_topology_level;
/// Whether one kind of peer access works (`cuabi_nvml_p2p_status`).
pub type P2pStatus = sys::cuabi_nvml_p2p_status;

fn text(chars: &[core::ffi::c_char]) -> String {
    // The library terminates every string; stop at the array's end regardless.
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `Some(v)` unless `bit` is set in `unavailable`.
fn reported<T>(unavailable: u64, bit: sys::cuabi_nvml_field, v: T) -> Option<T> {
    if unavailable & bit.0 as u64 != 0 {
        None
    } else {
        Some(v)
    }
}

/// The machine as NVML sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemInfo {
    /// The NVIDIA (kernel-mode) driver's version, "580.65.06".
    pub driver_version: String,
    /// NVML's own version.
    pub nvml_version: String,
    /// The CUDA version the driver supports (13000 = 13.0), if NVML says.
    pub cuda_driver_version: Option<i32>,
    pub device_count: usize,
    /// The libnvidia-ml file loaded.
    pub library_path: String,
}

/// Load and initialise NVML (once) and describe the machine.
pub fn system_info() -> Result<SystemInfo> {
    let mut raw = sys::cuabi_nvml_system_info::default();
    // SAFETY: `raw` is a local the calls fill; nvml.h: `library_path` is
    // "Owned by the library" (NULL or NUL-terminated, never freed: NVML is
    // "never shut down"), and `cstr` copies it inside this block.
    unsafe {
        check(sys::cuabi_nvml_system_info_init(
            &mut raw,
            sys::CUABI_NVML_SYSTEM_INFO_VERSION,
        ))?;
        check(sys::cuabi_nvml_system_info_get(&mut raw))?;
        Ok(SystemInfo {
            driver_version: text(&raw.driver_version),
            nvml_version: text(&raw.nvml_version),
            cuda_driver_version: (raw.cuda_driver_version > 0).then_some(raw.cuda_driver_version),
            device_count: raw.device_count.max(0) as usize,
            library_path: crate::error::cstr(raw.library_path),
        })
    }
}

/// How many GPUs NVML lists (whatever CUDA_VISIBLE_DEVICES says).
pub fn device_count() -> Result<usize> {
    let mut n = 0;
    // SAFETY: `n` is a local written during the call (nvml.h: any thread).
    check(unsafe { sys::cuabi_nvml_device_count(&mut n) })?;
    Ok(n.max(0) as usize)
}

/// Every GPU NVML lists.
pub fn devices() -> Result<Vec<NvmlDevice>> {
    Ok((0..device_count()?)
        .map(|i| NvmlDevice { index: i as i32 })
        .collect())
}

/// What a GPU is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    /// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
    pub uuid: String,
    /// The UUID's bytes: those of `DeviceProperties::uuid` of the same GPU.
    pub uuid_bytes: Option<[u8; 16]>,
    /// NVML's form, "00000000:17:00.0".
    pub pci_bus_id: String,
    /// (domain, bus, device).
    pub pci_location: (u32, u32, u32),
    /// PCI device id << 16 | vendor id.
    pub pci_device_id: u32,
    pub compute_capability: Option<(i32, i32)>,
    pub memory_total: Option<u64>,
    /// The widest PCIe link this GPU and this system allow: (generation, lanes).
    pub pcie_max_link: Option<(u32, u32)>,
    /// (graphics, SM, memory) in MHz.
    pub max_clocks_mhz: Option<(u32, u32, u32)>,
    pub ecc_enabled: Option<bool>,
    pub minor_number: Option<u32>,
    pub nvlink_count: usize,
}

/// How a GPU is doing now; `None` where NVML does not report a value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Health {
    /// (total, free, used) bytes.
    pub memory: Option<(u64, u64, u64)>,
    /// Bytes the driver and firmware keep.
    pub memory_reserved: Option<u64>,
    /// (gpu, memory) percent of the last sample period.
    pub utilization: Option<(u32, u32)>,
    pub temperature_c: Option<i32>,
    pub power_usage_mw: Option<u32>,
    pub power_limit_mw: Option<u32>,
    pub power_management_limit_mw: Option<u32>,
    pub clock_graphics_mhz: Option<u32>,
    pub clock_sm_mhz: Option<u32>,
    pub clock_memory_mhz: Option<u32>,
    /// (corrected, uncorrected) ECC errors since the driver loaded.
    pub ecc_volatile: Option<(u64, u64)>,
    /// (corrected, uncorrected) over the GPU's life.
    pub ecc_aggregate: Option<(u64, u64)>,
    /// `CUABI_NVML_THROTTLE_*` bits; 0: nothing holds the clocks back.
    pub throttle_reasons: Option<u64>,
    /// (generation, lanes) of the link now.
    pub pcie_link: Option<(u32, u32)>,
    pub performance_state: Option<i32>,
    pub fan_speed_percent: Option<u32>,
}

/// One NVLink link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvLink {
    pub link: i32,
    pub active: Option<bool>,
    /// (major, minor): (4, 0) for NVLink 4.
    pub version: Option<(i32, i32)>,
    pub remote_pci_bus_id: Option<String>,
    /// The GPU at the other end, when it is one NVML lists.
    pub remote: Option<NvmlDevice>,
    pub p2p_supported: Option<bool>,
}

/// How two GPUs are connected.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub common_ancestor: Option<TopologyLevel>,
    pub p2p_read: P2pStatus,
    pub p2p_write: P2pStatus,
    pub p2p_nvlink: P2pStatus,
    pub p2p_atomics: P2pStatus,
    pub p2p_pci: P2pStatus,
}

/// A process with a context on a GPU.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Process {
    /// As the host sees it.
    pub pid: u32,
    /// Bytes it uses, if NVML can tell.
    pub used_memory: Option<u64>,
    pub compute: bool,
    pub graphics: bool,
    /// MIG instances, or 0xFFFFFFFF outside MIG.
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
}

/// A GPU as NVML lists it, by NVML's index. A plain value: NVML's GPUs
/// live as long as the process.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct NvmlDevice {
    index: i32,
}

impl NvmlDevice {
    /// GPU `index` (0 .. device_count()-1).
    pub fn get(index: usize) -> Result<NvmlDevice> {
        let count = device_count()?;
        if index >= count {
            return Err(Error::invalid_argument(format!(
                "NvmlDevice::get: index {index}: NVML lists {count} GPU(s)"
            )));
        }
        Ok(NvmlDevice {
            index: index as i32,
        })
    }

    /// The GPU with this UUID ("GPU-...", or without the prefix) or PCI bus id.
    pub fn find(id: &str) -> Result<NvmlDevice> {
        let c = c_string("id", id)?;
        let mut index = -1;
        // SAFETY: `c` is NUL-terminated and read during the call; `index` a local.
        check(unsafe { sys::cuabi_nvml_device_find(&mut index, c.as_ptr()) })?;
        Ok(NvmlDevice { index })
    }

    /// The GPU that is CUDA device `ordinal` (by UUID; initialises the driver).
    pub fn from_cuda_ordinal(ordinal: usize) -> Result<NvmlDevice> {
        let ordinal = i32::try_from(ordinal)
            .map_err(|_| Error::invalid_argument("from_cuda_ordinal: ordinal too large"))?;
        let mut index = -1;
        // SAFETY: `index` is a local written during the call.
        check(unsafe { sys::cuabi_nvml_device_from_cuda_ordinal(&mut index, ordinal) })?;
        Ok(NvmlDevice { index })
    }

    pub fn index(&self) -> usize {
        self.index as usize
    }

    /// This GPU's CUDA ordinal here, or `None` when CUDA does not show it
    /// (initialises the driver; no context).
    pub fn cuda_ordinal(&self) -> Result<Option<usize>> {
        let mut ordinal = -1;
        // SAFETY: `ordinal` is a local written during the call.
        check(unsafe { sys::cuabi_nvml_device_cuda_ordinal(&mut ordinal, self.index) })?;
        Ok((ordinal >= 0).then_some(ordinal as usize))
    }

    pub fn info(&self) -> Result<DeviceInfo> {
        let mut r = sys::cuabi_nvml_device_info::default();
        // SAFETY: `r` is a local the calls fill; its strings are inline arrays,
        // copied by `text` (bounded by the array).
        unsafe {
            check(sys::cuabi_nvml_device_info_init(
                &mut r,
                sys::CUABI_NVML_DEVICE_INFO_VERSION,
            ))?;
            check(sys::cuabi_nvml_device_info_get(&mut r, self.index))?;
        }
        let u = r.unavailable;
        Ok(DeviceInfo {
            name: text(&r.name),
            uuid: text(&r.uuid),
            uuid_bytes: reported(u, sys::CUABI_NVML_FIELD_UUID, r.uuid_bytes),
            pci_bus_id: text(&r.pci_bus_id),
            pci_location: (r.pci_domain, r.pci_bus, r.pci_device),
            pci_device_id: r.pci_device_id,
            compute_capability: reported(
                u,
                sys::CUABI_NVML_FIELD_COMPUTE_CAPABILITY,
                (r.compute_capability_major, r.compute_capability_minor),
            ),
            memory_total: reported(u, sys::CUABI_NVML_FIELD_MEMORY_TOTAL, r.memory_total),
            pcie_max_link: reported(
                u,
                sys::CUABI_NVML_FIELD_PCIE_MAX_LINK,
                (r.pcie_max_generation, r.pcie_max_width),
            ),
            max_clocks_mhz: reported(
                u,
                sys::CUABI_NVML_FIELD_MAX_CLOCKS,
                (
                    r.max_clock_graphics_mhz,
                    r.max_clock_sm_mhz,
                    r.max_clock_memory_mhz,
                ),
            ),
            ecc_enabled: reported(u, sys::CUABI_NVML_FIELD_ECC_MODE, r.ecc_enabled != 0),
            minor_number: reported(u, sys::CUABI_NVML_FIELD_MINOR_NUMBER, r.minor_number),
            nvlink_count: r.nvlink_count.max(0) as usize,
        })
    }

    pub fn health(&self) -> Result<Health> {
        let mut r = sys::cuabi_nvml_health::default();
        // SAFETY: `r` is a local the calls fill during them.
        unsafe {
            check(sys::cuabi_nvml_health_init(
                &mut r,
                sys::CUABI_NVML_HEALTH_VERSION,
            ))?;
            check(sys::cuabi_nvml_device_health_get(&mut r, self.index))?;
        }
        let u = r.unavailable;
        Ok(Health {
            memory: reported(
                u,
                sys::CUABI_NVML_FIELD_MEMORY,
                (r.memory_total, r.memory_free, r.memory_used),
            ),
            memory_reserved: reported(u, sys::CUABI_NVML_FIELD_MEMORY_RESERVED, r.memory_reserved),
            utilization: reported(
                u,
                sys::CUABI_NVML_FIELD_UTILIZATION,
                (r.utilization_gpu, r.utilization_memory),
            ),
            temperature_c: reported(u, sys::CUABI_NVML_FIELD_TEMPERATURE, r.temperature_gpu),
            power_usage_mw: reported(u, sys::CUABI_NVML_FIELD_POWER_USAGE, r.power_usage_mw),
            power_limit_mw: reported(u, sys::CUABI_NVML_FIELD_POWER_LIMIT, r.power_limit_mw),
            power_management_limit_mw: reported(
                u,
                sys::CUABI_NVML_FIELD_POWER_MANAGEMENT_LIMIT,
                r.power_management_limit_mw,
            ),
            clock_graphics_mhz: reported(
                u,
                sys::CUABI_NVML_FIELD_CLOCK_GRAPHICS,
                r.clock_graphics_mhz,
            ),
            clock_sm_mhz: reported(u, sys::CUABI_NVML_FIELD_CLOCK_SM, r.clock_sm_mhz),
            clock_memory_mhz: reported(u, sys::CUABI_NVML_FIELD_CLOCK_MEMORY, r.clock_memory_mhz),
            ecc_volatile: reported(
                u,
                sys::CUABI_NVML_FIELD_ECC_VOLATILE,
                (r.ecc_corrected_volatile, r.ecc_uncorrected_volatile),
            ),
            ecc_aggregate: reported(
                u,
                sys::CUABI_NVML_FIELD_ECC_AGGREGATE,
                (r.ecc_corrected_aggregate, r.ecc_uncorrected_aggregate),
            ),
            throttle_reasons: reported(
                u,
                sys::CUABI_NVML_FIELD_THROTTLE_REASONS,
                r.throttle_reasons,
            ),
            pcie_link: reported(
                u,
                sys::CUABI_NVML_FIELD_PCIE_LINK,
                (r.pcie_generation, r.pcie_width),
            ),
            performance_state: reported(
                u,
                sys::CUABI_NVML_FIELD_PERFORMANCE_STATE,
                r.performance_state,
            ),
            fan_speed_percent: reported(u, sys::CUABI_NVML_FIELD_FAN_SPEED, r.fan_speed_percent),
        })
    }

    /// KiB/s (sent, received) over PCIe, each counted by NVML over 20 ms.
    pub fn pcie_throughput(&self) -> Result<(u32, u32)> {
        let (mut tx, mut rx) = (0, 0);
        // SAFETY: `tx` and `rx` are locals written during the call.
        check(unsafe { sys::cuabi_nvml_device_pcie_throughput(&mut tx, &mut rx, self.index) })?;
        Ok((tx, rx))
    }

    /// NVLink link `link` (0 .. info().nvlink_count-1).
    pub fn nvlink(&self, link: usize) -> Result<NvLink> {
        let link =
            i32::try_from(link).map_err(|_| Error::invalid_argument("nvlink: link too large"))?;
        let mut r = sys::cuabi_nvml_nvlink::default();
        // SAFETY: `r` is a local the calls fill; `remote_pci_bus_id` is an
        // inline array copied by `text`.
        unsafe {
            check(sys::cuabi_nvml_nvlink_init(
                &mut r,
                sys::CUABI_NVML_NVLINK_VERSION,
            ))?;
            check(sys::cuabi_nvml_device_nvlink_get(&mut r, self.index, link))?;
        }
        let u = r.unavailable;
        Ok(NvLink {
            link,
            active: reported(u, sys::CUABI_NVML_FIELD_NVLINK_STATE, r.active != 0),
            version: reported(
                u,
                sys::CUABI_NVML_FIELD_NVLINK_VERSION,
                (r.version_major, r.version_minor),
            ),
            remote_pci_bus_id: reported(
                u,
                sys::CUABI_NVML_FIELD_NVLINK_REMOTE,
                text(&r.remote_pci_bus_id),
            ),
            remote: (r.remote_index >= 0).then_some(NvmlDevice {
                index: r.remote_index,
            }),
            p2p_supported: reported(u, sys::CUABI_NVML_FIELD_NVLINK_P2P, r.p2p_supported != 0),
        })
    }

    /// How this GPU and `other` are connected.
    pub fn topology(&self, other: &NvmlDevice) -> Result<Topology> {
        let mut r = sys::cuabi_nvml_topology::default();
        // SAFETY: `r` is a local the calls fill during them.
        unsafe {
            check(sys::cuabi_nvml_topology_init(
                &mut r,
                sys::CUABI_NVML_TOPOLOGY_VERSION,
            ))?;
            check(sys::cuabi_nvml_topology_get(
                &mut r,
                self.index,
                other.index,
            ))?;
        }
        Ok(Topology {
            common_ancestor: reported(
                r.unavailable,
                sys::CUABI_NVML_FIELD_TOPOLOGY,
                r.common_ancestor,
            ),
            p2p_read: r.p2p_read,
            p2p_write: r.p2p_write,
            p2p_nvlink: r.p2p_nvlink,
            p2p_atomics: r.p2p_atomics,
            p2p_pci: r.p2p_pci,
        })
    }

    /// The processes with a compute or graphics context on this GPU, by pid.
    pub fn processes(&self) -> Result<Vec<Process>> {
        let mut capacity = 16usize;
        loop {
            let mut raw = vec![sys::cuabi_nvml_process::default(); capacity];
            let mut count = 0usize;
            // SAFETY: `raw` holds `capacity` initialised structs the call may
            // write; `count` a local.
            unsafe {
                for p in raw.iter_mut() {
                    check(sys::cuabi_nvml_process_init(
                        p,
                        sys::CUABI_NVML_PROCESS_VERSION,
                    ))?;
                }
                check(sys::cuabi_nvml_device_processes(
                    raw.as_mut_ptr(),
                    capacity,
                    &mut count,
                    self.index,
                ))?;
            }
            if count > capacity {
                capacity = count + 8; // more came meanwhile: ask again
                continue;
            }
            let kind = |p: &sys::cuabi_nvml_process, k: sys::cuabi_nvml_process_kind| {
                p.kinds & k.0 as u32 != 0
            };
            return Ok(raw[..count]
                .iter()
                .map(|p| Process {
                    pid: p.pid,
                    used_memory: (p.used_memory != u64::MAX).then_some(p.used_memory),
                    compute: kind(p, sys::CUABI_NVML_PROCESS_COMPUTE),
                    graphics: kind(p, sys::CUABI_NVML_PROCESS_GRAPHICS),
                    gpu_instance_id: p.gpu_instance_id,
                    compute_instance_id: p.compute_instance_id,
                })
                .collect());
        }
    }
}
