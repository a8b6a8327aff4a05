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

// SAFETY: green.h, Threads: "Every function may be called from any thread."
// An SM resource is immutable once made (no function changes it).
unsafe impl Send for SmResource {}
// SAFETY: as for Send: every method is a C call the header allows from any
// thread, concurrently; none writes memory Rust reads.
unsafe impl Sync for SmResource {}
// SAFETY: green.h, Threads: "Every function may be called from any thread."
unsafe impl Send for GreenContext {}
// SAFETY: green.h, Threads: the calls that need the green context current
// "take a lock of the green context around the push and pop", so
// concurrent calls on one green context are serialised by the library.
unsafe impl Sync for GreenContext {}

/// What the driver says of an SM resource (`cuabi_sm_resource_info`).
pub type SmResourceInfo = sys::cuabi_sm_resource_info;

/// A workqueue configuration (CUDA 13.1 drivers): `concurrency_limit`,
/// `sharing_scope` (a `sys::CUABI_WORKQUEUE_SCOPE_*`), `ordinal`.
pub type WorkqueueConfig = sys::cuabi_workqueue_config;

/// A workqueue configuration to give [`GreenContext::with_workqueue`]: the
/// expected most concurrent stream-ordered workloads (1 or more) and, with
/// `balanced`, workqueues kept apart from other balanced green contexts
/// where the driver can.
pub fn workqueue_config(concurrency_limit: u32, balanced: bool) -> Result<WorkqueueConfig> {
    let mut c = WorkqueueConfig::default();
    // SAFETY: `c` is a local the init function fills during the call.
    check(unsafe { sys::cuabi_workqueue_config_init(&mut c, sys::CUABI_WORKQUEUE_CONFIG_VERSION) })?;
    c.concurrency_limit = concurrency_limit;
    c.sharing_scope = if balanced {
        sys::CUABI_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED
    } else {
        sys::CUABI_WORKQUEUE_SCOPE_DEVICE_CTX
    };
    Ok(c)
}

/// The device's workqueue configuration (its limit is the driver's cap;
/// CUDA 13.1 drivers, `NotSupported` before).
pub fn device_workqueue_config(device: &Device) -> Result<WorkqueueConfig> {
    let mut c = workqueue_config(1, false)?;
    // SAFETY: `device` is live; `c` an initialised local written during the call.
    check(unsafe { sys::cuabi_device_workqueue_config(&mut c, device.as_raw()) })?;
    Ok(c)
}
/// Split flags (`cuabi_sm_split_flags`).
pub type SmSplitFlags = sys::cuabi_sm_split_flags;
/// How a grid runs on a number of SMs (`cuabi_grid_waves`).
pub type GridWaves = sys::cuabi_grid_waves;

fn split_options(min_count: u32, flags: SmSplitFlags) -> Result<sys::cuabi_sm_split_options> {
    let mut o = sys::cuabi_sm_split_options::default();
    // SAFETY: `o` is a local the init function fills during the call (common.h).
    check(unsafe { sys::cuabi_sm_split_options_init(&mut o, sys::CUABI_SM_SPLIT_OPTIONS_VERSION) })?;
    o.min_count = min_count;
    o.flags = flags.0 as u32;
    Ok(o)
}

fn new_waves() -> Result<GridWaves> {
    let mut w = GridWaves::default();
    // SAFETY: `w` is a local the init function fills during the call (common.h).
    check(unsafe { sys::cuabi_grid_waves_init(&mut w, sys::CUABI_GRID_WAVES_VERSION) })?;
    Ok(w)
}

impl SmResource {
    /// All of a device's SMs.
    pub fn of_device(device: &Device) -> Result<SmResource> {
        // SAFETY: `device` is live for the call; `out` is the out-pointer `create` hands us.
        SmResource::create(|out| unsafe { sys::cuabi_device_sm_resource(out, device.as_raw()) })
    }

    /// The SM count and the partition rules the driver reports.
    pub fn info(&self) -> Result<SmResourceInfo> {
        let mut i = SmResourceInfo::default();
        // SAFETY: `i` is a local the init function fills during the call.
        check(unsafe { sys::cuabi_sm_resource_info_init(&mut i, sys::CUABI_SM_RESOURCE_INFO_VERSION) })?;
        // SAFETY: `self` is live; `i` an initialised local written during the call.
        check(unsafe { sys::cuabi_sm_resource_get_info(&mut i, self.as_raw()) })?;
        Ok(i)
    }

    /// How many groups of at least `min_count` SMs a split would make.
    pub fn group_count(&self, min_count: u32, flags: SmSplitFlags) -> Result<usize> {
        let o = split_options(min_count, flags)?;
        let mut n = 0usize;
        // SAFETY: `self` is live; a NULL group array asks only for the count,
        // written to the local `n`; `o` is read during the call.
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
        // SAFETY: `raw` holds `n` (<= its length) writable slots, `rem` and
        // `n` are locals, `self` and `o` live for the call.
        check(unsafe { sys::cuabi_sm_resource_split(raw.as_mut_ptr(), &mut n, &mut rem, self.as_raw(), &o) })?;
        let n = n.min(raw.len());
        // SAFETY: the split handed over one reference to each handle it made.
        let groups = raw[..n].iter().filter_map(|&p| unsafe { SmResource::from_raw(p) }).collect();
        // SAFETY: as for the groups: the remainder (or NULL) is ours.
        let rem = unsafe { SmResource::from_raw(rem) };
        Ok((groups, rem))
    }
}

impl GreenContext {
    /// A green context of `resources` (groups of one split, or one resource).
    pub fn new(device: &Device, resources: &[&SmResource]) -> Result<GreenContext> {
        let mut raw: Vec<*mut sys::cuabi_sm_resource> = resources.iter().map(|r| r.as_raw()).collect();
        // SAFETY: `device` and every resource are live (borrowed) for the
        // call; `raw` holds `raw.len()` handles; `out` is `create`'s out-pointer.
        GreenContext::create(|out| unsafe {
            sys::cuabi_green_ctx_create(out, device.as_raw(), raw.as_mut_ptr(), raw.len())
        })
    }

    /// A green context of `resources` with a workqueue configuration
    /// ([`workqueue_config`]; CUDA 13.1 drivers).
    pub fn with_workqueue(device: &Device, resources: &[&SmResource], workqueue: &WorkqueueConfig)
                          -> Result<GreenContext> {
        let mut raw: Vec<*mut sys::cuabi_sm_resource> = resources.iter().map(|r| r.as_raw()).collect();
        // SAFETY: as for `new`; `workqueue` is read during the call.
        GreenContext::create(|out| unsafe {
            sys::cuabi_green_ctx_create_with_workqueue(out, device.as_raw(), raw.as_mut_ptr(),
                                                       raw.len(), workqueue)
        })
    }

    /// The workqueue configuration it was made with (CUDA 13.1 drivers).
    pub fn workqueue_config(&self) -> Result<WorkqueueConfig> {
        let mut c = workqueue_config(1, false)?;
        // SAFETY: `self` is live; `c` an initialised local written during the call.
        check(unsafe { sys::cuabi_green_ctx_workqueue_config(&mut c, self.as_raw()) })?;
        Ok(c)
    }

    /// SMs of its partition.
    pub fn sm_count(&self) -> Result<i32> {
        let mut v = 0;
        // SAFETY: `self` is live; `v` a local written during the call.
        check(unsafe { sys::cuabi_green_ctx_sm_count(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// Its SMs as a resource (to split again).
    pub fn sm_resource(&self) -> Result<SmResource> {
        // SAFETY: `self` is live; `out` is the out-pointer `create` hands us.
        SmResource::create(|out| unsafe { sys::cuabi_green_ctx_sm_resource(out, self.as_raw()) })
    }

    /// A stream of the green context (non-blocking), with a priority.
    pub fn create_stream(&self, priority: i32) -> Result<Stream> {
        let mut o = sys::cuabi_stream_options::default();
        // SAFETY: `o` is a local the init function fills during the call.
        check(unsafe { sys::cuabi_stream_options_init(&mut o, sys::CUABI_STREAM_OPTIONS_VERSION) })?;
        o.priority = priority;
        let mut out = core::ptr::null_mut();
        // SAFETY: `self` is live; `out` a local written during the call; `o` read during it.
        check(unsafe { sys::cuabi_green_ctx_stream_create(&mut out, self.as_raw(), &o) })?;
        // SAFETY: the call handed over a new reference.
        unsafe { Stream::from_raw(out) }.ok_or_else(|| crate::Error::internal("green stream: NULL"))
    }

    /// Wait for all of its work.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: `self` is live; green.h: the push and pop are under the green context's lock.
        check(unsafe { sys::cuabi_green_ctx_synchronize(self.as_raw()) })
    }

    /// Record all of its work queued so far in `event` (of its device).
    pub fn record_event(&self, event: &Event) -> Result<()> {
        // SAFETY: `self` and `event` are live for the call (green.h: any thread).
        check(unsafe { sys::cuabi_green_ctx_record_event(self.as_raw(), event.as_raw()) })
    }

    /// Make all of its later work wait for `event`.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        // SAFETY: `self` and `event` are live for the call (green.h: any thread).
        check(unsafe { sys::cuabi_green_ctx_wait_event(self.as_raw(), event.as_raw()) })
    }

    /// The CUgreenCtx.
    pub fn raw(&self) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: `self` is live; `v` a local written during the call.
        check(unsafe { sys::cuabi_green_ctx_raw(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// The CUcontext the driver makes of it (cuCtxFromGreenCtx).
    pub fn context(&self) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: `self` is live; `v` a local written during the call.
        check(unsafe { sys::cuabi_green_ctx_context(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// The waves a grid of `grid_blocks` blocks takes on its partition
    /// (blocks per SM asked in it).
    pub fn waves(&self, kernel: &Kernel, block_size: i32, dynamic_shared_bytes: usize, grid_blocks: u64)
                 -> Result<GridWaves> {
        let mut w = new_waves()?;
        // SAFETY: `kernel` and `self` are live; `w` an initialised local written during the call.
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
        // SAFETY: `kernel` and `self` are live; `b`, `g` locals written during
        // the call; no block-size callback (None, NULL user data).
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
    // SAFETY: `stream` is live; `g` a local written during the call.
    check(unsafe { sys::cuabi_stream_green_ctx(&mut g, stream.as_raw()) })?;
    if g.is_null() {
        return Ok(None);
    }
    // SAFETY: the getter borrows a live handle (the stream keeps its green
    // context alive, green.h Lifetimes); take our own reference.
    check(unsafe { sys::cuabi_green_ctx_retain(g) })?;
    // SAFETY: the retain above gave us the reference `from_raw` takes over.
    Ok(unsafe { GreenContext::from_raw(g) })
}

/// The waves a grid takes on the whole device.
pub fn waves(kernel: &Kernel, device: &Device, block_size: i32, dynamic_shared_bytes: usize, grid_blocks: u64)
             -> Result<GridWaves> {
    let mut w = new_waves()?;
    // SAFETY: `kernel` and `device` are live; `w` an initialised local written during the call.
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
            // SAFETY: `c` is a local the init function fills during the call.
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
    // SAFETY: `a` is a NUL-terminated local, `res` a borrowed struct, `op`
    // NULL or a local; all read during the call; `w` written during it.
    check(unsafe {
        sys::cuabi_occupancy_offline_waves(&mut w, a.as_ptr(), res, sm_count, block_size, dynamic_shared_bytes,
                                           grid_blocks, op)
    })?;
    Ok(w)
}
