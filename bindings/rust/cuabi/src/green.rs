//! Green contexts (include/cuabi/green.h): a device's SMs split into
//! partitions, each a context whose streams run on its SMs only; and the
//! waves of a grid on a device, a partition, or offline on a number of SMs
//! (include/cuabi/occupancy.h).
use crate::device::Device;
use crate::error::{c_string, check, Result};
use crate::event::Event;
use crate::objcode::{Kernel, KernelResources};
use crate::occupancy::OccupancyOptions;
use crate::stream::Stream;
use crate::sys;

shared_handle!(
    /// A set of a device's SMs: the whole device's, a group or the
    /// remainder of a split, or a green context's. Keeps its device alive.
    SmResource, sys::cuabi_sm_resource, sys::cuabi_sm_resource_retain, sys::cuabi_sm_resource_release
);

shared_handle!(
    /// A green context: a context limited to a partition of a device's SMs.
    /// Its streams keep it alive.
    GreenContext, sys::cuabi_green_ctx, sys::cuabi_green_ctx_retain, sys::cuabi_green_ctx_release
);

// SAFETY: api/green.toml: every function may be called from any thread (the
// green context is pushed current only under its own lock).
unsafe impl Send for SmResource {}
unsafe impl Sync for SmResource {}
unsafe impl Send for GreenContext {}
unsafe impl Sync for GreenContext {}

/// What the driver says of an SM resource (`cuabi_sm_resource_info`).
pub type SmResourceInfo = sys::cuabi_sm_resource_info;
/// Split flags (`cuabi_sm_split_flags`).
pub type SmSplitFlags = sys::cuabi_sm_split_flags;
/// How a grid runs on a number of SMs (`cuabi_grid_waves`).
pub type GridWaves = sys::cuabi_grid_waves;

fn split_options(min_count: u32, flags: SmSplitFlags) -> Result<sys::cuabi_sm_split_options> {
    let mut o = sys::cuabi_sm_split_options::default();
    check(unsafe { sys::cuabi_sm_split_options_init(&mut o, sys::CUABI_SM_SPLIT_OPTIONS_VERSION) })?;
    o.min_count = min_count;
    o.flags = flags.0 as u32;
    Ok(o)
}

fn new_waves() -> Result<GridWaves> {
    let mut w = GridWaves::default();
    check(unsafe { sys::cuabi_grid_waves_init(&mut w, sys::CUABI_GRID_WAVES_VERSION) })?;
    Ok(w)
}

impl SmResource {
    /// All of a device's SMs.
    pub fn of_device(device: &Device) -> Result<SmResource> {
        SmResource::create(|out| unsafe { sys::cuabi_device_sm_resource(out, device.as_raw()) })
    }

    /// The SM count and the partition rules the driver reports.
    pub fn info(&self) -> Result<SmResourceInfo> {
        let mut i = SmResourceInfo::default();
        check(unsafe { sys::cuabi_sm_resource_info_init(&mut i, sys::CUABI_SM_RESOURCE_INFO_VERSION) })?;
        check(unsafe { sys::cuabi_sm_resource_get_info(&mut i, self.as_raw()) })?;
        Ok(i)
    }

    /// How many groups of at least `min_count` SMs a split would make.
    pub fn group_count(&self, min_count: u32, flags: SmSplitFlags) -> Result<usize> {
        let o = split_options(min_count, flags)?;
        let mut n = 0usize;
        check(unsafe {
            sys::cuabi_sm_resource_split(core::ptr::null_mut(), &mut n, core::ptr::null_mut(), self.as_raw(), &o)
        })?;
        Ok(n)
    }

    /// Up to `max_groups` groups of at least `min_count` SMs (the driver
    /// rounds the count up), and the SMs left over.
    pub fn split(&self, max_groups: usize, min_count: u32, flags: SmSplitFlags)
                 -> Result<(Vec<SmResource>, Option<SmResource>)> {
        let o = split_options(min_count, flags)?;
        let mut raw = vec![core::ptr::null_mut(); max_groups.max(1)];
        let mut n = max_groups;
        let mut rem = core::ptr::null_mut();
        check(unsafe { sys::cuabi_sm_resource_split(raw.as_mut_ptr(), &mut n, &mut rem, self.as_raw(), &o) })?;
        // SAFETY: the split handed over one reference to each handle it made.
        let groups = raw[..n].iter().filter_map(|&p| unsafe { SmResource::from_raw(p) }).collect();
        Ok((groups, unsafe { SmResource::from_raw(rem) }))
    }
}

impl GreenContext {
    /// A green context of `resources` (groups of one split, or one resource).
    pub fn new(device: &Device, resources: &[&SmResource]) -> Result<GreenContext> {
        let mut raw: Vec<*mut sys::cuabi_sm_resource> = resources.iter().map(|r| r.as_raw()).collect();
        GreenContext::create(|out| unsafe {
            sys::cuabi_green_ctx_create(out, device.as_raw(), raw.as_mut_ptr(), raw.len())
        })
    }

    /// SMs of its partition.
    pub fn sm_count(&self) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::cuabi_green_ctx_sm_count(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// Its SMs as a resource (to split again).
    pub fn sm_resource(&self) -> Result<SmResource> {
        SmResource::create(|out| unsafe { sys::cuabi_green_ctx_sm_resource(out, self.as_raw()) })
    }

    /// A stream of the green context (non-blocking), with a priority.
    pub fn create_stream(&self, priority: i32) -> Result<Stream> {
        let mut o = sys::cuabi_stream_options::default();
        check(unsafe { sys::cuabi_stream_options_init(&mut o, sys::CUABI_STREAM_OPTIONS_VERSION) })?;
        o.priority = priority;
        let mut out = core::ptr::null_mut();
        check(unsafe { sys::cuabi_green_ctx_stream_create(&mut out, self.as_raw(), &o) })?;
        // SAFETY: the call handed over a new reference.
        unsafe { Stream::from_raw(out) }.ok_or_else(|| crate::Error::internal("green stream: NULL"))
    }

    /// Wait for all of its work.
    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { sys::cuabi_green_ctx_synchronize(self.as_raw()) })
    }

    /// Record all of its work queued so far in `event` (of its device).
    pub fn record_event(&self, event: &Event) -> Result<()> {
        check(unsafe { sys::cuabi_green_ctx_record_event(self.as_raw(), event.as_raw()) })
    }

    /// Make all of its later work wait for `event`.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        check(unsafe { sys::cuabi_green_ctx_wait_event(self.as_raw(), event.as_raw()) })
    }

    /// The CUgreenCtx.
    pub fn raw(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_green_ctx_raw(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// The CUcontext the driver makes of it (cuCtxFromGreenCtx).
    pub fn context(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_green_ctx_context(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// The waves a grid of `grid_blocks` blocks takes on its partition
    /// (blocks per SM asked in it).
    pub fn waves(&self, kernel: &Kernel, block_size: i32, dynamic_shared_bytes: usize, grid_blocks: u64)
                 -> Result<GridWaves> {
        let mut w = new_waves()?;
        check(unsafe {
            sys::cuabi_occupancy_green_waves(&mut w, kernel.as_raw(), self.as_raw(), block_size,
                                             dynamic_shared_bytes, grid_blocks)
        })?;
        Ok(w)
    }

    /// The block size of the highest occupancy and the smallest grid that
    /// fills the partition (the driver counts its SMs): (block, min grid).
    pub fn max_potential_block_size(&self, kernel: &Kernel, dynamic_shared_bytes: usize) -> Result<(i32, i32)> {
        let (mut b, mut g) = (0, 0);
        check(unsafe {
            sys::cuabi_occupancy_green_max_potential_block_size(&mut b, &mut g, kernel.as_raw(), self.as_raw(),
                                                               None, core::ptr::null_mut(), dynamic_shared_bytes, 0)
        })?;
        Ok((b, g))
    }
}

/// The green context a stream was created on (a new reference), or None.
pub fn stream_green_context(stream: &Stream) -> Result<Option<GreenContext>> {
    let mut g = core::ptr::null_mut();
    check(unsafe { sys::cuabi_stream_green_ctx(&mut g, stream.as_raw()) })?;
    if g.is_null() {
        return Ok(None);
    }
    // The getter borrows; take our own reference.
    check(unsafe { sys::cuabi_green_ctx_retain(g) })?;
    Ok(unsafe { GreenContext::from_raw(g) })
}

/// The waves a grid takes on the whole device.
pub fn waves(kernel: &Kernel, device: &Device, block_size: i32, dynamic_shared_bytes: usize, grid_blocks: u64)
             -> Result<GridWaves> {
    let mut w = new_waves()?;
    check(unsafe {
        sys::cuabi_occupancy_waves(&mut w, kernel.as_raw(), device.as_raw(), block_size, dynamic_shared_bytes,
                                   grid_blocks)
    })?;
    Ok(w)
}

/// The waves a grid takes offline, for an architecture and a partition of
/// `sm_count` SMs (0: options.sm_count, else the architecture's example GPU).
pub fn offline_waves(arch: &str, res: &KernelResources, sm_count: i32, block_size: i32,
                     dynamic_shared_bytes: usize, grid_blocks: u64, options: Option<&OccupancyOptions>)
                     -> Result<GridWaves> {
    let a = c_string("arch", arch)?;
    let o = match options {
        Some(o) => {
            let mut c = sys::cuabi_occupancy_options::default();
            check(unsafe { sys::cuabi_occupancy_options_init(&mut c, sys::CUABI_OCCUPANCY_OPTIONS_VERSION) })?;
            c.max_dynamic_shared_bytes = o.max_dynamic_shared_bytes;
            c.carveout = o.carveout;
            c.sm_count = o.sm_count;
            Some(c)
        }
        None => None,
    };
    let op = o.as_ref().map_or(core::ptr::null(), |o| o as *const _);
    let mut w = new_waves()?;
    check(unsafe {
        sys::cuabi_occupancy_offline_waves(&mut w, a.as_ptr(), res, sm_count, block_size, dynamic_shared_bytes,
                                           grid_blocks, op)
    })?;
    Ok(w)
}
