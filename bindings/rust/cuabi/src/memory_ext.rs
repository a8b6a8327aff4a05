//! Virtual memory, pool statistics, managed memory and batched copies
//! (issue 25; include/cuabi/vmm.h, pool.h, managed.h, copy_batch.h). Safe
//! wrappers: the option and result structs are the C ones (plain data), with
//! their defaults filled by the library.
use crate::device::Device;
use crate::error::{check, Error, Result};
use crate::memory::{Buffer, MemoryResource};
use crate::multigpu::PeerAccess;
use crate::stream::Stream;
use crate::sys;

/// How a VMM resource allocates (`cuabi_vmm_options`).
pub type VmmOptions = sys::cuabi_vmm_options;
/// What a VMM buffer is now (`cuabi_vmm_info`).
pub type VmmInfo = sys::cuabi_vmm_info;
/// One pool's statistics and attributes (`cuabi_pool_stats`).
pub type PoolStats = sys::cuabi_pool_stats;
/// A pool attribute (`cuabi_pool_attribute`).
pub type PoolAttribute = sys::cuabi_pool_attribute;
/// A managed resource's options (`cuabi_managed_options`).
pub type ManagedOptions = sys::cuabi_managed_options;
/// Advice about a managed range (`cuabi_managed_advice`).
pub type ManagedAdvice = sys::cuabi_managed_advice;
/// A managed range's attributes (`cuabi_managed_range`).
pub type ManagedRange = sys::cuabi_managed_range;
/// A memory location kind (`cuabi_location_type`).
pub type LocationType = sys::cuabi_location_type;
/// One copy of a batch (`cuabi_copy_item`).
pub type CopyItem = sys::cuabi_copy_item;
/// What a batch did (`cuabi_copy_result`).
pub type CopyResult = sys::cuabi_copy_result;

fn opt_stream(s: Option<&Stream>) -> *mut sys::cuabi_stream {
    s.map_or(core::ptr::null_mut(), |s| s.as_raw())
}

macro_rules! defaults {
    ($(#[$m:meta])* $name:ident, $ty:ty, $init:path, $ver:path) => {
        $(#[$m])*
        pub fn $name() -> Result<$ty> {
            let mut o = <$ty>::default();
            check(unsafe { $init(&mut o, $ver) })?;
            Ok(o)
        }
    };
}
defaults!(/// The VMM options' defaults (POSIX fd handles, recommended granularity, read-write).
    vmm_options, VmmOptions, sys::cuabi_vmm_options_init, sys::CUABI_VMM_OPTIONS_VERSION);
defaults!(/// The managed options' defaults (attach global, no preferred location).
    managed_options, ManagedOptions, sys::cuabi_managed_options_init,
    sys::CUABI_MANAGED_OPTIONS_VERSION);
defaults!(/// A copy item with the defaults (stream order, no hints, nothing to copy).
    copy_item, CopyItem, sys::cuabi_copy_item_init, sys::CUABI_COPY_ITEM_VERSION);

/// 1 when `device` supports virtual memory management.
pub fn vmm_supported(device: &Device) -> Result<bool> {
    let mut v = 0;
    check(unsafe { sys::cuabi_vmm_supported(&mut v, device.as_raw()) })?;
    Ok(v != 0)
}

/// The allocation granularity for memory made as `options` say (None: the defaults).
pub fn vmm_granularity(device: &Device, options: Option<&VmmOptions>) -> Result<usize> {
    let mut v = 0usize;
    let o = options.map_or(core::ptr::null(), |o| o as *const _);
    check(unsafe { sys::cuabi_vmm_granularity(&mut v, device.as_raw(), o) })?;
    Ok(v)
}

impl MemoryResource {
    /// Virtual memory on `device` (cuda.core's VirtualMemoryResource).
    pub fn vmm(device: &Device, options: Option<&VmmOptions>) -> Result<MemoryResource> {
        let o = options.map_or(core::ptr::null(), |o| o as *const _);
        MemoryResource::create(|out| unsafe { sys::cuabi_vmm_resource_create(out, device.as_raw(), o) })
    }
    /// Managed memory with options (attach flag, preferred location).
    pub fn managed_with(device: &Device, options: &ManagedOptions) -> Result<MemoryResource> {
        MemoryResource::create(|out| unsafe {
            sys::cuabi_managed_resource_create(out, device.as_raw(), options)
        })
    }
    /// The access `device` gets to this VMM resource's future buffers.
    pub fn vmm_set_peer_access(&self, device: &Device, access: PeerAccess) -> Result<()> {
        check(unsafe { sys::cuabi_vmm_resource_set_peer_access(self.as_raw(), device.as_raw(), access.to_raw()) })
    }
    /// A VMM buffer of `size` bytes that can grow in place up to `reserve` (0: the options').
    pub fn vmm_allocate(&self, size: usize, reserve: usize) -> Result<Buffer> {
        Buffer::create(|o| unsafe { sys::cuabi_vmm_buffer_allocate(o, self.as_raw(), size, reserve) })
    }
    /// Map another process's VMM buffer from its chunk descriptors (136 bytes
    /// each, in order) and their file descriptors (None for fabric handles).
    pub fn vmm_import(&self, fds: Option<&[i32]>, descriptors: &[u8]) -> Result<Buffer> {
        let d = sys::CUABI_IPC_DESCRIPTOR_SIZE as usize;
        if descriptors.is_empty() || descriptors.len() % d != 0 {
            return Err(Error::invalid_argument("descriptors: a whole number of 136-byte descriptors"));
        }
        let count = descriptors.len() / d;
        if fds.is_some_and(|f| f.len() != count) {
            return Err(Error::invalid_argument("one fd per chunk descriptor"));
        }
        let fp = fds.map_or(core::ptr::null(), |f| f.as_ptr());
        Buffer::create(|o| unsafe {
            sys::cuabi_vmm_import(o, self.as_raw(), fp, count, descriptors.as_ptr(), descriptors.len())
        })
    }
    /// One pool attribute (cuda.core's mr.attributes.*).
    pub fn pool_attribute(&self, attribute: PoolAttribute) -> Result<u64> {
        let mut v = 0u64;
        check(unsafe { sys::cuabi_pool_get_attribute(&mut v, self.as_raw(), attribute) })?;
        Ok(v)
    }
    /// Set a reuse policy (0/1), the release threshold, or a high-water mark to 0.
    pub fn set_pool_attribute(&self, attribute: PoolAttribute, value: u64) -> Result<()> {
        check(unsafe { sys::cuabi_pool_set_attribute(self.as_raw(), attribute, value) })
    }
    /// Both high-water marks back to the current figures.
    pub fn reset_high_water(&self) -> Result<()> {
        check(unsafe { sys::cuabi_pool_reset_high_water(self.as_raw()) })
    }
    /// Every statistic in one call.
    pub fn pool_stats(&self) -> Result<PoolStats> {
        let mut s = PoolStats::default();
        check(unsafe { sys::cuabi_pool_stats_init(&mut s, sys::CUABI_POOL_STATS_VERSION) })?;
        check(unsafe { sys::cuabi_pool_stats_get(&mut s, self.as_raw()) })?;
        Ok(s)
    }
    /// The statistics as one line for logs.
    pub fn pool_summary(&self) -> Result<String> {
        let s = self.pool_stats()?;
        let mut n = 0usize;
        let st = unsafe { sys::cuabi_pool_stats_format(core::ptr::null_mut(), &mut n, &s) };
        if st != sys::CUABI_ERROR_BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut out = vec![0u8; n];
        check(unsafe { sys::cuabi_pool_stats_format(out.as_mut_ptr().cast(), &mut n, &s) })?;
        out.truncate(n.saturating_sub(1));
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

impl Buffer {
    /// Grow or shrink a VMM buffer in place (its address stays).
    pub fn vmm_resize(&self, size: usize, stream: Option<&Stream>) -> Result<()> {
        check(unsafe { sys::cuabi_vmm_buffer_resize(self.as_raw(), size, opt_stream(stream)) })
    }
    /// What a VMM buffer is now.
    pub fn vmm_info(&self) -> Result<VmmInfo> {
        let mut i = VmmInfo::default();
        check(unsafe { sys::cuabi_vmm_info_init(&mut i, sys::CUABI_VMM_INFO_VERSION) })?;
        check(unsafe { sys::cuabi_vmm_buffer_info(&mut i, self.as_raw()) })?;
        Ok(i)
    }
    /// Give `device` this access to the VMM buffer (and the chunks it grows by).
    pub fn vmm_set_access(&self, device: &Device, access: PeerAccess) -> Result<()> {
        check(unsafe { sys::cuabi_vmm_set_access(self.as_raw(), device.as_raw(), access.to_raw()) })
    }
    /// The access `device` has to the VMM buffer.
    pub fn vmm_access(&self, device: &Device) -> Result<PeerAccess> {
        let mut a = sys::CUABI_PEER_ACCESS_NONE;
        check(unsafe { sys::cuabi_vmm_get_access(&mut a, self.as_raw(), device.as_raw()) })?;
        Ok(a.into())
    }
    /// Export chunk `index`: (a new fd, yours to close; -1 for fabric handles) and its descriptor.
    pub fn vmm_export_chunk(&self, index: usize) -> Result<(i32, [u8; 136])> {
        let mut fd = -1;
        let mut d = [0u8; 136];
        check(unsafe { sys::cuabi_vmm_export_chunk(&mut fd, d.as_mut_ptr(), d.len(), self.as_raw(), index) })?;
        Ok((fd, d))
    }
    /// Advice about `size` bytes at `offset` of a managed buffer.
    pub fn managed_advise(&self, offset: usize, size: usize, advice: ManagedAdvice,
                          location: LocationType, id: i32) -> Result<()> {
        check(unsafe { sys::cuabi_managed_advise(self.as_raw(), offset, size, advice, location, id) })
    }
    /// Prefetch part of a managed buffer to a device or the host, on `stream`.
    pub fn managed_prefetch(&self, offset: usize, size: usize, location: LocationType, id: i32,
                            stream: Option<&Stream>) -> Result<()> {
        check(unsafe {
            sys::cuabi_managed_prefetch(self.as_raw(), offset, size, location, id, opt_stream(stream))
        })
    }
    /// Discard part of a managed buffer (CUDA 13 drivers).
    pub fn managed_discard(&self, offset: usize, size: usize, stream: Option<&Stream>) -> Result<()> {
        check(unsafe { sys::cuabi_managed_discard(self.as_raw(), offset, size, opt_stream(stream)) })
    }
    /// A managed range's attributes.
    pub fn managed_range(&self, offset: usize, size: usize) -> Result<ManagedRange> {
        let mut r = ManagedRange::default();
        check(unsafe { sys::cuabi_managed_range_init(&mut r, sys::CUABI_MANAGED_RANGE_VERSION) })?;
        check(unsafe { sys::cuabi_managed_range_info(&mut r, self.as_raw(), offset, size) })?;
        Ok(r)
    }
}

/// A copy item from `src` (at `src_offset`) to `dst` (at `dst_offset`), `size` bytes.
pub fn copy_between(dst: &Buffer, dst_offset: usize, src: &Buffer, src_offset: usize,
                    size: usize) -> Result<CopyItem> {
    let mut it = copy_item()?;
    it.dst_buffer = dst.as_raw();
    it.dst_offset = dst_offset as u64;
    it.src_buffer = src.as_raw();
    it.src_offset = src_offset as u64;
    it.size = size;
    Ok(it)
}

/// Queue every copy of `items` on `stream` in one cuMemcpyBatchAsync (one
/// copy each on drivers without it: the result says so). Items name buffers
/// and views by handle (checked by the library) or raw addresses.
///
/// # Safety
/// Raw addresses in `items` must be valid for their ranges until the stream
/// reaches the copies.
pub unsafe fn copy_batch(items: &[CopyItem], stream: &Stream) -> Result<CopyResult> {
    let mut r = CopyResult::default();
    check(unsafe { sys::cuabi_copy_result_init(&mut r, sys::CUABI_COPY_RESULT_VERSION) })?;
    check(unsafe { sys::cuabi_copy_batch(&mut r, items.as_ptr(), items.len(), stream.as_raw()) })?;
    Ok(r)
}

/// The reason of a result that went copy by copy ("" when batched).
pub fn copy_reason(r: &CopyResult) -> String {
    if r.reason.is_null() {
        return String::new();
    }
    // SAFETY: the library sets `reason` to a static NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(r.reason) }.to_string_lossy().into_owned()
}
