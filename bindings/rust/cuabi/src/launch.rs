//! Launches and prepared launches (include/cuabi/launch.h).
use crate::argpack::{ArgPack, KernelArg};
use crate::device::Device;
use crate::error::{check, Result};
use crate::objcode::Kernel;
use crate::stream::Stream;
use crate::sys;

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
}

impl<'a> LaunchConfig<'a> {
    /// A 1-D grid of `grid` blocks of `block` threads.
    pub fn new(grid: u32, block: u32) -> Self {
        LaunchConfig { grid: [grid, 1, 1], block: [block, 1, 1], ..Default::default() }
    }
    pub fn on_stream(mut self, s: &'a Stream) -> Self { self.stream = Some(s); self }
    pub fn on_device(mut self, d: &'a Device) -> Self { self.device = Some(d); self }
    pub fn shared_bytes(mut self, n: usize) -> Self { self.dynamic_shared_bytes = n; self }
    pub fn cluster(mut self, c: [u32; 3]) -> Self { self.cluster = c; self }
    pub fn cooperative(mut self, on: bool) -> Self { self.cooperative = on; self }

    /// The C struct; it points at the borrowed stream and device.
    pub fn to_c(&self) -> Result<sys::cuabi_launch_config> {
        let mut c = sys::cuabi_launch_config::default();
        check(unsafe { sys::cuabi_launch_config_init(&mut c, sys::CUABI_LAUNCH_CONFIG_VERSION) })?;
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

/// Check and launch `kernel` with the values in `pack`.
pub fn launch(kernel: &Kernel, pack: &ArgPack, config: &LaunchConfig) -> Result<()> {
    let c = config.to_c()?;
    check(unsafe { sys::cuabi_launch(kernel.as_raw(), pack.as_raw(), &c) })
}

/// Every check `launch` makes, without launching.
pub fn launch_check(kernel: &Kernel, pack: &ArgPack, config: &LaunchConfig) -> Result<()> {
    let c = config.to_c()?;
    check(unsafe { sys::cuabi_launch_check(kernel.as_raw(), pack.as_raw(), &c) })
}

impl Kernel {
    /// `launch(self, pack, config)`.
    pub fn launch(&self, pack: &ArgPack, config: &LaunchConfig) -> Result<()> {
        launch(self, pack, config)
    }
}

handle_core!(
    /// Kernel, pack and configuration bound and checked once, for repeated
    /// launches. Owns the pack, so only it can change argument values (`&mut
    /// self`) while launches (`&self`, from any thread) read them.
    PreparedRaw, sys::cuabi_prepared, sys::cuabi_prepared_release
);

/// A prepared launch (see [`PreparedRaw`]); the pack it binds is moved in.
pub struct PreparedLaunch {
    raw: PreparedRaw,
    pack: ArgPack,
}
// SAFETY: launch.h: launches may come from any thread; the pack is only
// written through &mut self, so no set can race a launch.
unsafe impl Send for PreparedLaunch {}
unsafe impl Sync for PreparedLaunch {}

impl PreparedLaunch {
    /// Bind and check (needs a GPU). The stream/device of `config` are retained by the C side.
    pub fn new(kernel: &Kernel, pack: ArgPack, config: &LaunchConfig) -> Result<PreparedLaunch> {
        let c = config.to_c()?;
        let raw = PreparedRaw::create(|o| unsafe { sys::cuabi_prepared_create(o, kernel.as_raw(), pack.as_raw(), &c) })?;
        Ok(PreparedLaunch { raw, pack })
    }
    /// Launch with the pack's current values.
    pub fn launch(&self) -> Result<()> {
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
        check(unsafe { sys::cuabi_prepared_set_grid(self.raw.as_raw(), x, y, z) })
    }
}
