//! Occupancy, live (driver) and offline (named architecture, no GPU)
//! (include/cuabi/occupancy.h). Block-size searches take the dynamic shared
//! memory per block size as a Rust closure.
use crate::device::Device;
use crate::error::{c_string, check, cstr, Result};
use crate::launch::LaunchConfig;
use crate::objcode::{Kernel, KernelResources};
use crate::sys;
use core::ffi::{c_int, c_void};
use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// One configuration's occupancy (`cuabi_occupancy_result`).
pub type OccupancyResult = sys::cuabi_occupancy_result;
/// An architecture's limits (`cuabi_arch_limits`).
pub type ArchLimits = sys::cuabi_arch_limits;

/// Kernel settings offline answers depend on.
#[derive(Clone, Copy, Debug)]
pub struct OccupancyOptions {
    /// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; -1 for the driver's default.
    pub max_dynamic_shared_bytes: i64,
    /// Preferred carveout in percent; -1 for none.
    pub carveout: i32,
    /// SMs of the GPU; 0 for the architecture's example GPU.
    pub sm_count: i32,
}
impl Default for OccupancyOptions {
    fn default() -> Self {
        OccupancyOptions { max_dynamic_shared_bytes: -1, carveout: -1, sm_count: 0 }
    }
}
impl OccupancyOptions {
    fn to_c(self) -> Result<sys::cuabi_occupancy_options> {
        let mut o = sys::cuabi_occupancy_options::default();
        // SAFETY: a local the init function fills.
        check(unsafe { sys::cuabi_occupancy_options_init(&mut o, sys::CUABI_OCCUPANCY_OPTIONS_VERSION) })?;
        o.max_dynamic_shared_bytes = self.max_dynamic_shared_bytes;
        o.carveout = self.carveout;
        o.sm_count = self.sm_count;
        Ok(o)
    }
}

fn new_result() -> Result<OccupancyResult> {
    let mut r = OccupancyResult::default();
    // SAFETY: a local the init function fills.
    check(unsafe { sys::cuabi_occupancy_result_init(&mut r, sys::CUABI_OCCUPANCY_RESULT_VERSION) })?;
    Ok(r)
}

/// The limiter's name: "warps", "registers", ...
pub fn limiter_name(l: sys::cuabi_occupancy_limiter) -> String {
    // SAFETY: common.h: limiter names "live as long as the process".
    unsafe { cstr(sys::cuabi_occupancy_limiter_name(l)) }
}

/// The limits of "sm_90", "90", "9.0"...
pub fn arch_limits(arch: &str) -> Result<ArchLimits> {
    let a = c_string("arch", arch)?;
    let mut l = ArchLimits::default();
    // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
    // are read during the call only (common.h: "reads or writes the memory its pointer
    // parameters name only during the call").
    unsafe {
        check(sys::cuabi_arch_limits_init(&mut l, sys::CUABI_ARCH_LIMITS_VERSION))?;
        check(sys::cuabi_arch_limits_get(&mut l, a.as_ptr()))?;
    }
    Ok(l)
}

/// Every architecture in the table, ascending.
pub fn all_arch_limits() -> Result<Vec<ArchLimits>> {
    let mut v = Vec::new();
    loop {
        let mut l = ArchLimits::default();
        // SAFETY: a local the init function fills.
        check(unsafe { sys::cuabi_arch_limits_init(&mut l, sys::CUABI_ARCH_LIMITS_VERSION) })?;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        if unsafe { sys::cuabi_arch_limits_at(&mut l, v.len()) } != sys::CUABI_SUCCESS {
            return Ok(v);
        }
        v.push(l);
    }
}

/// The shared-memory closure behind the C callback's payload.
struct SmemCtx<'a> {
    f: &'a mut dyn FnMut(i32) -> usize,
    panic: Option<Box<dyn Any + Send>>,
}

unsafe extern "C" fn smem_trampoline(block_size: c_int, payload: *mut c_void) -> usize {
    // SAFETY: the payload is the SmemCtx `with_smem` passed, alive (on its
    // stack) for the whole C call; the callback "runs on the calling thread,
    // during the call only" (occupancy.h), so this is the only reference.
    let ctx = unsafe { &mut *payload.cast::<SmemCtx>() };
    if ctx.panic.is_some() {
        return 0;
    }
    // Unwinding into C is undefined: keep the panic, resume it in Rust.
    match catch_unwind(AssertUnwindSafe(|| (ctx.f)(block_size))) {
        Ok(v) => v,
        Err(p) => { ctx.panic = Some(p); 0 }
    }
}

/// Run a C call given (callback, payload) for an optional closure; resume its panic after.
fn with_smem<R>(f: Option<&mut dyn FnMut(i32) -> usize>,
                call: impl FnOnce(sys::cuabi_block_smem_fn, *mut c_void) -> R) -> R {
    match f {
        None => call(None, core::ptr::null_mut()),
        Some(f) => {
            let mut ctx = SmemCtx { f, panic: None };
            let r = call(Some(smem_trampoline), (&mut ctx as *mut SmemCtx).cast());
            if let Some(p) = ctx.panic { resume_unwind(p) }
            r
        }
    }
}

/// Best block size and the smallest grid filling the GPU with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSize {
    pub block_size: i32,
    pub min_grid_size: i32,
}

impl Kernel {
    /// Resident blocks per SM on `device` (driver), with the limiter.
    pub fn occupancy(&self, device: &Device, block_size: i32, dynamic_shared_bytes: usize) -> Result<OccupancyResult> {
        let mut r = new_result()?;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_occupancy_max_active_blocks(&mut r, self.as_raw(), device.as_raw(), block_size, dynamic_shared_bytes) })?;
        Ok(r)
    }
    /// The block size with the most resident threads (driver); `smem` gives
    /// dynamic shared memory per block size (None: `dynamic_shared_bytes`).
    pub fn max_potential_block_size(&self, device: &Device, smem: Option<&mut dyn FnMut(i32) -> usize>,
                                    dynamic_shared_bytes: usize, block_size_limit: i32) -> Result<BlockSize> {
        let mut b = BlockSize { block_size: 0, min_grid_size: 0 };
        // SAFETY: live handles; `cb`/`p` are the trampoline and the SmemCtx,
        // valid for the call (occupancy.h: the callback runs during the call only).
        let st = with_smem(smem, |cb, p| unsafe {
            sys::cuabi_occupancy_max_potential_block_size(&mut b.block_size, &mut b.min_grid_size, self.as_raw(), device.as_raw(),
                                                          cb, p, dynamic_shared_bytes, block_size_limit)
        });
        check(st)?;
        Ok(b)
    }
    /// Dynamic shared memory per block with `num_blocks` blocks resident (driver).
    pub fn available_dynamic_smem(&self, device: &Device, num_blocks: i32, block_size: i32) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_occupancy_available_dynamic_smem(&mut v, self.as_raw(), device.as_raw(), num_blocks, block_size) })?;
        Ok(v)
    }
    /// Largest co-resident cluster size for a configuration (driver).
    pub fn max_potential_cluster_size(&self, config: &LaunchConfig) -> Result<i32> {
        let c = config.to_c()?;
        let mut v = 0;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_occupancy_max_potential_cluster_size(&mut v, self.as_raw(), &c) })?;
        Ok(v)
    }
    /// Clusters of the configuration resident at once (driver).
    pub fn max_active_clusters(&self, config: &LaunchConfig) -> Result<i32> {
        let c = config.to_c()?;
        let mut v = 0;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_occupancy_max_active_clusters(&mut v, self.as_raw(), &c) })?;
        Ok(v)
    }
}

/// Offline answers for a named architecture, from a kernel's resources.
pub mod offline {
    use super::*;

    fn opts(o: Option<&OccupancyOptions>) -> Result<Option<sys::cuabi_occupancy_options>> {
        o.map(|o| o.to_c()).transpose()
    }
    fn ptr<T>(o: &Option<T>) -> *const T {
        o.as_ref().map_or(core::ptr::null(), |o| o as *const T)
    }

    pub fn max_active_blocks(arch: &str, res: &KernelResources, block_size: i32, dynamic_shared_bytes: usize,
                             options: Option<&OccupancyOptions>) -> Result<OccupancyResult> {
        let a = c_string("arch", arch)?;
        let o = opts(options)?;
        let mut r = new_result()?;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_occupancy_offline_max_active_blocks(&mut r, a.as_ptr(), res, block_size, dynamic_shared_bytes, ptr(&o)) })?;
        Ok(r)
    }
    pub fn max_potential_block_size(arch: &str, res: &KernelResources, smem: Option<&mut dyn FnMut(i32) -> usize>,
                                    dynamic_shared_bytes: usize, block_size_limit: i32,
                                    options: Option<&OccupancyOptions>) -> Result<BlockSize> {
        let a = c_string("arch", arch)?;
        let o = opts(options)?;
        let mut b = BlockSize { block_size: 0, min_grid_size: 0 };
        // SAFETY: live handles; `cb`/`p` are the trampoline and the SmemCtx,
        // valid for the call (occupancy.h: the callback runs during the call only).
        let st = with_smem(smem, |cb, p| unsafe {
            sys::cuabi_occupancy_offline_max_potential_block_size(&mut b.block_size, &mut b.min_grid_size, a.as_ptr(), res, cb, p,
                                                                  dynamic_shared_bytes, block_size_limit, ptr(&o))
        });
        check(st)?;
        Ok(b)
    }
    pub fn available_dynamic_smem(arch: &str, res: &KernelResources, num_blocks: i32, block_size: i32,
                                  options: Option<&OccupancyOptions>) -> Result<usize> {
        let a = c_string("arch", arch)?;
        let o = opts(options)?;
        let mut v = 0usize;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_occupancy_offline_available_dynamic_smem(&mut v, a.as_ptr(), res, num_blocks, block_size, ptr(&o)) })?;
        Ok(v)
    }
    pub fn max_potential_cluster_size(arch: &str, res: &KernelResources, config: &LaunchConfig,
                                      options: Option<&OccupancyOptions>) -> Result<i32> {
        let a = c_string("arch", arch)?;
        let o = opts(options)?;
        let c = config.to_c()?;
        let mut v = 0;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_occupancy_offline_max_potential_cluster_size(&mut v, a.as_ptr(), res, &c, ptr(&o)) })?;
        Ok(v)
    }
    pub fn max_active_clusters(arch: &str, res: &KernelResources, config: &LaunchConfig,
                               options: Option<&OccupancyOptions>) -> Result<i32> {
        let a = c_string("arch", arch)?;
        let o = opts(options)?;
        let c = config.to_c()?;
        let mut v = 0;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_occupancy_offline_max_active_clusters(&mut v, a.as_ptr(), res, &c, ptr(&o)) })?;
        Ok(v)
    }
}
