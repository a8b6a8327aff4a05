//! Launches and prepared launches (include/cuabi/launch.h).
use crate::argpack::{ArgPack, KernelArg};
use crate::device::Device;
use crate::error::{check, Result};
use crate::event::Event;
use crate::objcode::Kernel;
use crate::stream::Stream;
use crate::sys;

/// How the blocks of a cluster are placed (`cuabi_cluster_scheduling_policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClusterSchedulingPolicy {
    /// The kernel's own preference.
    #[default]
    Default,
    Spread,
    LoadBalancing,
}

/// L2 treatment of an access-policy window's lines (`cuabi_access_property`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessProperty {
    Normal,
    Streaming,
    Persisting,
}

impl AccessProperty {
    fn to_c(self) -> sys::cuabi_access_property {
        match self {
            AccessProperty::Normal => sys::CUABI_ACCESS_PROPERTY_NORMAL,
            AccessProperty::Streaming => sys::CUABI_ACCESS_PROPERTY_STREAMING,
            AccessProperty::Persisting => sys::CUABI_ACCESS_PROPERTY_PERSISTING,
        }
    }
}

/// An L2 access-policy window: `num_bytes` from device address `base`;
/// `hit_ratio` of the lines get `hit_property`, the others `miss_property`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccessPolicyWindow {
    pub base: usize,
    pub num_bytes: usize,
    pub hit_ratio: f32,
    pub hit_property: AccessProperty,
    /// Normal or Streaming (misses may not persist).
    pub miss_property: AccessProperty,
}

impl AccessPolicyWindow {
    /// Every line persisting, the usual window.
    pub fn new(base: usize, num_bytes: usize) -> Self {
        AccessPolicyWindow {
            base,
            num_bytes,
            hit_ratio: 1.0,
            hit_property: AccessProperty::Persisting,
            miss_property: AccessProperty::Streaming,
        }
    }
}

/// Memory synchronization domain of a launch (`cuabi_mem_sync_domain`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemSyncDomain {
    Default,
    Remote,
}

/// The cuLaunchKernelEx attributes beyond clusters and cooperative launches
/// (`cuabi_launch_attributes`); every default leaves its attribute out.
/// Borrows its events.
#[derive(Clone, Copy, Debug, Default)]
pub struct LaunchAttributes<'a> {
    /// Preferred substitute cluster size; all 0 for none (needs `cluster`).
    pub preferred_cluster: [u32; 3],
    pub cluster_scheduling_policy: ClusterSchedulingPolicy,
    /// Programmatic dependent launch.
    pub programmatic_stream_serialization: bool,
    /// An event created with `CUABI_EVENT_DISABLE_TIMING`.
    pub programmatic_event: Option<&'a Event>,
    pub programmatic_event_trigger_at_block_start: bool,
    /// An event created with `CUABI_EVENT_DISABLE_TIMING`.
    pub launch_completion_event: Option<&'a Event>,
    /// None: the stream's priority.
    pub priority: Option<i32>,
    pub access_policy_window: Option<AccessPolicyWindow>,
    /// None: the stream's domain.
    pub mem_sync_domain: Option<MemSyncDomain>,
    /// Domain ids of the default and the remote domain; None: the stream's map.
    pub mem_sync_domain_map: Option<[u8; 2]>,
    /// Percent; None: the kernel's.
    pub preferred_shared_memory_carveout: Option<u8>,
    pub nvlink_util_centric_scheduling: bool,
}

impl<'a> LaunchAttributes<'a> {
    /// The C struct; it points at the borrowed events.
    pub fn to_c(&self) -> Result<sys::cuabi_launch_attributes> {
        let mut a = sys::cuabi_launch_attributes::default();
        // SAFETY: `a` is a local the init function fills.
        check(unsafe { sys::cuabi_launch_attributes_init(&mut a, sys::CUABI_LAUNCH_ATTRIBUTES_VERSION) })?;
        a.preferred_cluster = self.preferred_cluster;
        a.cluster_scheduling_policy = match self.cluster_scheduling_policy {
            ClusterSchedulingPolicy::Default => sys::CUABI_CLUSTER_SCHEDULING_DEFAULT,
            ClusterSchedulingPolicy::Spread => sys::CUABI_CLUSTER_SCHEDULING_SPREAD,
            ClusterSchedulingPolicy::LoadBalancing => sys::CUABI_CLUSTER_SCHEDULING_LOAD_BALANCING,
        };
        a.programmatic_stream_serialization = i32::from(self.programmatic_stream_serialization);
        a.programmatic_event = self.programmatic_event.map_or(core::ptr::null_mut(), |e| e.as_raw());
        a.programmatic_event_trigger_at_block_start =
            i32::from(self.programmatic_event_trigger_at_block_start);
        a.launch_completion_event =
            self.launch_completion_event.map_or(core::ptr::null_mut(), |e| e.as_raw());
        if let Some(p) = self.priority {
            a.priority = p;
        }
        if let Some(w) = self.access_policy_window {
            a.access_policy_base = w.base;
            a.access_policy_bytes = w.num_bytes;
            a.access_policy_hit_ratio = w.hit_ratio;
            a.access_policy_hit_property = w.hit_property.to_c();
            a.access_policy_miss_property = w.miss_property.to_c();
        }
        if let Some(d) = self.mem_sync_domain {
            a.mem_sync_domain = match d {
                MemSyncDomain::Default => sys::CUABI_MEM_SYNC_DOMAIN_DEFAULT.0,
                MemSyncDomain::Remote => sys::CUABI_MEM_SYNC_DOMAIN_REMOTE.0,
            };
        }
        if let Some(m) = self.mem_sync_domain_map {
            a.mem_sync_domain_map = [i32::from(m[0]), i32::from(m[1])];
        }
        if let Some(c) = self.preferred_shared_memory_carveout {
            a.preferred_shared_memory_carveout = i32::from(c);
        }
        a.nvlink_util_centric_scheduling = i32::from(self.nvlink_util_centric_scheduling);
        Ok(a)
    }
}

/// Where and how to launch. Borrows its stream or device.
#[derive(Clone, Copy, Debug, Default)]
pub struct LaunchConfig<'a> {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// All 0 for no clusters.
    pub cluster: [u32; 3],
    pub dynamic_shared_bytes: usize,
    pub cooperative: bool,
    /// None: the legacy default stream of `device`.
    pub stream: Option<&'a Stream>,
    /// For a launch without a stream.
    pub device: Option<&'a Device>,
    /// PDL, events, priority, access policy, ... (None: none of them).
    pub attributes: Option<&'a LaunchAttributes<'a>>,
}

impl<'a> LaunchConfig<'a> {
    /// A 1-D grid of `grid` blocks of `block` threads.
    pub fn new(grid: u32, block: u32) -> Self {
        LaunchConfig { grid: [grid, 1, 1], block: [block, 1, 1], ..Default::default() }
    }
    /// Blocks of 1024 threads covering `n` elements (cudarc's `for_num_elems`).
    pub fn for_num_elems(n: u32) -> Self {
        LaunchConfig::new(n.div_ceil(1024).max(1), 1024)
    }
    pub fn on_stream(mut self, s: &'a Stream) -> Self { self.stream = Some(s); self }
    pub fn on_device(mut self, d: &'a Device) -> Self { self.device = Some(d); self }
    pub fn shared_bytes(mut self, n: usize) -> Self { self.dynamic_shared_bytes = n; self }
    pub fn cluster(mut self, c: [u32; 3]) -> Self { self.cluster = c; self }
    pub fn cooperative(mut self, on: bool) -> Self { self.cooperative = on; self }
    pub fn attributes(mut self, a: &'a LaunchAttributes<'a>) -> Self { self.attributes = Some(a); self }

    /// Call `f` with the C struct and, when set, its attributes, built on
    /// the stack for the call.
    pub(crate) fn with_c<R>(&self, f: impl FnOnce(&sys::cuabi_launch_config) -> R) -> Result<R> {
        let mut c = self.to_c()?;
        let a = self.attributes.map(|a| a.to_c()).transpose()?;
        if let Some(a) = &a {
            c.attributes = a;
        }
        Ok(f(&c))
    }

    /// The C struct; it points at the borrowed stream and device. Its
    /// `attributes` stay NULL (they need storage of their own: set them
    /// from [`LaunchAttributes::to_c`]).
    pub fn to_c(&self) -> Result<sys::cuabi_launch_config> {
        let mut c = config_template()?;
        c.grid = self.grid;
        c.block = self.block;
        c.cluster = self.cluster;
        c.dynamic_shared_bytes = self.dynamic_shared_bytes;
        c.cooperative = i32::from(self.cooperative);
        c.stream = self.stream.map_or(core::ptr::null_mut(), |s| s.as_raw());
        c.device = self.device.map_or(core::ptr::null_mut(), |d| d.as_raw());
        Ok(c)
    }
}

/// The defaults of `cuabi_launch_config`, filled by the library once.
fn config_template() -> Result<sys::cuabi_launch_config> {
    struct Template(sys::cuabi_launch_config);
    // SAFETY: the template's pointers are all NULL (the init function's
    // defaults); it is only ever copied.
    unsafe impl Sync for Template {}
    // SAFETY: as for Sync.
    unsafe impl Send for Template {}
    static T: std::sync::OnceLock<Template> = std::sync::OnceLock::new();
    if let Some(t) = T.get() {
        return Ok(t.0);
    }
    let mut c = sys::cuabi_launch_config::default();
    // SAFETY: `c` is a local the init function fills.
    check(unsafe { sys::cuabi_launch_config_init(&mut c, sys::CUABI_LAUNCH_CONFIG_VERSION) })?;
    Ok(T.get_or_init(|| Template(c)).0)
}

/// Check and launch `kernel` with the values in `pack`.
///
/// The library checks the pack against the kernel's parameter *layout*
/// (count, sizes, offsets) and the configuration, not what the values mean;
/// for a launch whose arguments are checked by kind and whose memory stays
/// alive as long as the kernel uses it, use [`Stream::launch_builder`].
///
/// # Safety
/// * Every value in `pack` must be what the kernel expects at its place: a
///   `ptr` slot (a [`DevicePtr`](crate::DevicePtr), or a buffer or view in a
///   raw or pointer slot) an address of memory the kernel may read and write
///   as it does, no float where it reads an integer, and so on.
/// * The memory the kernel uses must stay allocated, and unused by anything
///   that conflicts, until the kernel is done: the pack keeps the memory of
///   its `buffer` and `view` slots alive only while it lives, and a buffer
///   dropped frees on its own stream without waiting for this one (buffer.h).
/// * Host memory the kernel reaches (pinned, managed) must not be accessed
///   by host code while the kernel may write it.
pub unsafe fn launch(kernel: &Kernel, pack: &ArgPack, config: &LaunchConfig) -> Result<()> {
    // SAFETY: handles live for the call; the caller vouches for the values
    // and the memory they name (this function's contract).
    check(config.with_c(|c| unsafe { sys::cuabi_launch(kernel.as_raw(), pack.as_raw(), c) })?)
}

/// Every check `launch` makes, without launching.
pub fn launch_check(kernel: &Kernel, pack: &ArgPack, config: &LaunchConfig) -> Result<()> {
    // SAFETY: handles live for the call; nothing is launched, no value is followed.
    check(config.with_c(|c| unsafe { sys::cuabi_launch_check(kernel.as_raw(), pack.as_raw(), c) })?)
}

impl Kernel {
    /// `launch(self, pack, config)`.
    ///
    /// # Safety
    /// As [`launch`].
    pub unsafe fn launch(&self, pack: &ArgPack, config: &LaunchConfig) -> Result<()> {
        // SAFETY: the caller's contract (this function's, which is launch's).
        unsafe { launch(self, pack, config) }
    }
}

handle_core!(
    /// Kernel, pack and configuration bound and checked once, for repeated
    /// launches. Owns the pack, so only it can change argument values (`&mut
    /// self`) while launches (`&self`, from any thread) read them.
    PreparedRaw, sys::cuabi_prepared, sys::cuabi_prepared_release
);

/// A prepared launch: kernel, pack and configuration bound and checked once
/// (`cuabi_prepared`); the pack it binds is moved in.
pub struct PreparedLaunch {
    raw: PreparedRaw,
    pack: ArgPack,
}
// SAFETY: launch.h: "Launches may come from any thread"; the pack is only
// written through &mut self, so no set can race a launch (argpack.h: "setting
// values while another thread launches with the same pack is a race").
unsafe impl Send for PreparedLaunch {}
// SAFETY: as for Send.
unsafe impl Sync for PreparedLaunch {}

impl PreparedLaunch {
    /// Bind and check (needs a GPU). The stream/device of `config` are retained by the C side.
    /// The attributes are copied and their events retained.
    pub fn new(kernel: &Kernel, pack: ArgPack, config: &LaunchConfig) -> Result<PreparedLaunch> {
        let raw = config.with_c(|c| {
            // SAFETY: handles live for the call; the prepared launch retains
            // what it keeps (launch.h); nothing is launched yet.
            PreparedRaw::create(|o| unsafe { sys::cuabi_prepared_create(o, kernel.as_raw(), pack.as_raw(), c) })
        })??;
        Ok(PreparedLaunch { raw, pack })
    }
    /// Launch with the pack's current values.
    ///
    /// # Safety
    /// As [`launch`]: the pack's values must be right for the kernel and the
    /// memory they name alive and free of conflicting use until it is done.
    pub unsafe fn launch(&self) -> Result<()> {
        // SAFETY: the caller's contract; the handle is live.
        check(unsafe { sys::cuabi_prepared_launch(self.raw.as_raw()) })
    }
    /// The bound pack, to read.
    pub fn pack(&self) -> &ArgPack {
        &self.pack
    }
    /// Set argument `slot` for later launches.
    pub fn set<T: KernelArg + ?Sized>(&mut self, slot: usize, value: &T) -> Result<()> {
        self.pack.set(slot, value)
    }
    /// Change the grid of later launches.
    pub fn set_grid(&mut self, x: u32, y: u32, z: u32) -> Result<()> {
        // SAFETY: the handle is live and exclusively borrowed (no launch races it).
        check(unsafe { sys::cuabi_prepared_set_grid(self.raw.as_raw(), x, y, z) })
    }
}
