//! Virtual memory, pool statistics, managed memory and batched copies
//! (issue 25; include/cuabi/vmm.h, pool.h, managed.h, copy_batch.h). The
//! option and result structs are the C ones (plain data), with their
//! defaults filled by the library.
//!
//! Issue 28's rules apply as in [`memory`](crate::Buffer):
//!
//! * What writes a buffer's memory takes it `&mut`: the destinations of a
//!   [`CopyBatch`], [`Buffer::managed_discard`], and [`Buffer::vmm_resize`]
//!   (a shrink unmaps memory). A shrink is refused while views made from the
//!   buffer live and waits for the work the buffer queued on other streams
//!   before the library unmaps anything.
//! * Work queued on a stream (prefetch, discard, batched copies) is recorded
//!   on every buffer it touches, whose drop waits for it.
//! * Safe code names memory only through borrows: [`CopyBatch`] borrows the
//!   buffers and host slices it copies between until it is run, and
//!   [`copy_batch`] waits for the stream before returning when a host slice
//!   takes part. Raw [`CopyItem`]s (raw addresses, handles) go only through
//!   `unsafe` [`copy_batch_raw`].
//!
//! A batch destination must be borrowed `&mut`:
//!
//! ```compile_fail,E0308
//! fn f(dst: &cuabi::Buffer, src: &cuabi::Buffer, s: &cuabi::Stream) -> cuabi::Result<()> {
//!     let mut b = cuabi::CopyBatch::new();
//!     b.copy(dst, 0, src, 0, 16)?; // error: expected `&mut Buffer`, found `&Buffer`
//!     cuabi::copy_batch(s, b).map(|_| ())
//! }
//! ```
//!
//! and a host slice a batch copies from cannot go before the batch has run:
//!
//! ```compile_fail,E0505
//! fn f(dst: &mut cuabi::Buffer, s: &cuabi::Stream) -> cuabi::Result<()> {
//!     let host = vec![1u8; 16];
//!     let mut b = cuabi::CopyBatch::new();
//!     b.from_host(dst, 0, &host)?;
//!     drop(host); // error: cannot move out of `host` because it is borrowed
//!     cuabi::copy_batch(s, b).map(|_| ())
//! }
//! ```
//!
//! nor one it copies into be read meanwhile:
//!
//! ```compile_fail,E0502
//! fn f(src: &cuabi::Buffer, s: &cuabi::Stream) -> cuabi::Result<()> {
//!     let mut host = vec![0u8; 16];
//!     let mut b = cuabi::CopyBatch::new();
//!     b.to_host(&mut host, src, 0)?;
//!     let first = host[0]; // error: cannot borrow `host` as immutable
//!     cuabi::copy_batch(s, b).map(|_| ())?;
//!     let _ = first;
//!     Ok(())
//! }
//! ```
//!
//! A discard or a resize cannot run on a shared `&Buffer`:
//!
//! ```compile_fail,E0596
//! fn f(b: &cuabi::Buffer, s: &cuabi::Stream) {
//!     b.managed_discard(0, 4096, s).unwrap(); // error: `b` is a `&` reference
//! }
//! ```
//!
//! ```compile_fail,E0596
//! fn f(b: &cuabi::Buffer) {
//!     b.vmm_resize(0, None).unwrap(); // error: `b` is a `&` reference
//! }
//! ```
use core::marker::PhantomData;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};

use crate::device::Device;
use crate::error::{check, Error, Result};
use crate::memory::{byte_len, Buffer, MemoryResource, Pod};
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
/// One copy of a raw batch (`cuabi_copy_item`; see [`copy_batch_raw`]).
pub type CopyItem = sys::cuabi_copy_item;
/// What a batch did (`cuabi_copy_result`).
pub type CopyResult = sys::cuabi_copy_result;

macro_rules! defaults {
    ($(#[$m:meta])* $name:ident, $ty:ty, $init:path, $ver:path) => {
        $(#[$m])*
        pub fn $name() -> Result<$ty> {
            let mut o = <$ty>::default();
            // SAFETY: `o` is a local the init function fills ("Fill *opts with
            // the defaults of struct version `version`"), during the call only.
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
defaults!(/// A raw copy item with the defaults (stream order, no hints, nothing to copy).
    copy_item, CopyItem, sys::cuabi_copy_item_init, sys::CUABI_COPY_ITEM_VERSION);

/// Whether `device` supports virtual memory management.
pub fn vmm_supported(device: &Device) -> Result<bool> {
    let mut v = 0;
    // SAFETY: `device` is live for the call; `v` a local written during it.
    check(unsafe { sys::cuabi_vmm_supported(&mut v, device.as_raw()) })?;
    Ok(v != 0)
}

/// The allocation granularity for memory made as `options` say (None: the defaults).
pub fn vmm_granularity(device: &Device, options: Option<&VmmOptions>) -> Result<usize> {
    let mut v = 0usize;
    let o = options.map_or(core::ptr::null(), |o| o as *const _);
    // SAFETY: `device` is live; `o` is NULL ("[may be NULL] NULL for the
    // defaults") or a borrowed struct read during the call; `v` a local.
    check(unsafe { sys::cuabi_vmm_granularity(&mut v, device.as_raw(), o) })?;
    Ok(v)
}

impl MemoryResource {
    /// Virtual memory on `device` (cuda.core's VirtualMemoryResource).
    pub fn vmm(device: &Device, options: Option<&VmmOptions>) -> Result<MemoryResource> {
        let o = options.map_or(core::ptr::null(), |o| o as *const _);
        // SAFETY: `device` is live; `o` NULL or read during the call; `out`
        // is `create`'s out-pointer ("[out, ownership transferred]").
        MemoryResource::create(|out| unsafe { sys::cuabi_vmm_resource_create(out, device.as_raw(), o) })
    }
    /// Managed memory with options (attach flag, preferred location).
    pub fn managed_with(device: &Device, options: &ManagedOptions) -> Result<MemoryResource> {
        // SAFETY: as `vmm`: `options` is read during the call only.
        MemoryResource::create(|out| unsafe {
            sys::cuabi_managed_resource_create(out, device.as_raw(), options)
        })
    }
    /// The access `device` gets to this VMM resource's future buffers.
    pub fn vmm_set_peer_access(&self, device: &Device, access: PeerAccess) -> Result<()> {
        // SAFETY: handles live for the call; vmm.h: "Buffers already allocated
        // keep theirs", so no memory in use changes access.
        check(unsafe { sys::cuabi_vmm_resource_set_peer_access(self.as_raw(), device.as_raw(), access.to_raw()) })
    }
    /// A VMM buffer of `size` bytes that can grow in place up to `reserve` (0: the options').
    pub fn vmm_allocate(&self, size: usize, reserve: usize) -> Result<Buffer> {
        // SAFETY: `self` is live; `o` is `create`'s out-pointer (ownership transferred).
        Buffer::create(|o| unsafe { sys::cuabi_vmm_buffer_allocate(o, self.as_raw(), size, reserve) })
    }
    /// Map another process's VMM buffer from its chunk descriptors (136 bytes
    /// each, in order) and the file descriptors received with them (None for
    /// fabric handles; read, "not closed, not kept"). A same-process set is
    /// refused (vmm.h), so no two buffers of this process alias.
    pub fn vmm_import(&self, fds: Option<&[BorrowedFd<'_>]>, descriptors: &[u8]) -> Result<Buffer> {
        let d = sys::CUABI_IPC_DESCRIPTOR_SIZE as usize;
        if descriptors.is_empty() || descriptors.len() % d != 0 {
            return Err(Error::invalid_argument("descriptors: a whole number of 136-byte descriptors"));
        }
        let count = descriptors.len() / d;
        if fds.is_some_and(|f| f.len() != count) {
            return Err(Error::invalid_argument("one fd per chunk descriptor"));
        }
        // BorrowedFd is repr(transparent) over the raw descriptor (std: "can
        // be used in FFI in places where a file descriptor is passed").
        let fp = fds.map_or(core::ptr::null(), |f| f.as_ptr().cast::<core::ffi::c_int>());
        // SAFETY: `self` is live; `fp` is NULL or `count` open descriptors
        // borrowed for the call ("not closed, not kept") and `descriptors`
        // `size` bytes, both read during the call (the descriptors are
        // "checked the same way" as other IPC descriptors); `o` is the
        // out-pointer (ownership transferred).
        Buffer::create(|o| unsafe {
            sys::cuabi_vmm_import(o, self.as_raw(), fp, count, descriptors.as_ptr(), descriptors.len())
        })
    }
    /// One pool attribute (cuda.core's mr.attributes.*).
    pub fn pool_attribute(&self, attribute: PoolAttribute) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: `self` is live; `v` a local written during the call.
        check(unsafe { sys::cuabi_pool_get_attribute(&mut v, self.as_raw(), attribute) })?;
        Ok(v)
    }
    /// Set a reuse policy (0/1), the release threshold, or a high-water mark to 0.
    pub fn set_pool_attribute(&self, attribute: PoolAttribute, value: u64) -> Result<()> {
        // SAFETY: `self` is live; pool.h: other values are
        // CUABI_ERROR_INVALID_ARGUMENT; no memory is touched.
        check(unsafe { sys::cuabi_pool_set_attribute(self.as_raw(), attribute, value) })
    }
    /// Both high-water marks back to the current figures.
    pub fn reset_high_water(&self) -> Result<()> {
        // SAFETY: `self` is live for the call.
        check(unsafe { sys::cuabi_pool_reset_high_water(self.as_raw()) })
    }
    /// Every statistic in one call.
    pub fn pool_stats(&self) -> Result<PoolStats> {
        let mut s = PoolStats::default();
        // SAFETY: `s` is a local the init function fills.
        check(unsafe { sys::cuabi_pool_stats_init(&mut s, sys::CUABI_POOL_STATS_VERSION) })?;
        // SAFETY: `self` is live; `s` a local with its version set
        // ("version must be set"), written during the call.
        check(unsafe { sys::cuabi_pool_stats_get(&mut s, self.as_raw()) })?;
        Ok(s)
    }
    /// The statistics as one line for logs.
    pub fn pool_summary(&self) -> Result<String> {
        let s = self.pool_stats()?;
        let mut n = 0usize;
        // SAFETY: `out` is NULL with capacity 0 ("[out, may be NULL, array of
        // size elements]"); *size receives the bytes needed; `s` is read.
        let st = unsafe { sys::cuabi_pool_stats_format(core::ptr::null_mut(), &mut n, &s) };
        if st != sys::CUABI_ERROR_BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut out = vec![0u8; n];
        // SAFETY: `out` holds `n` bytes, the capacity passed in *size; the
        // library writes at most that many, during the call.
        check(unsafe { sys::cuabi_pool_stats_format(out.as_mut_ptr().cast(), &mut n, &s) })?;
        out.truncate(n.saturating_sub(1));
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

impl Buffer {
    /// Grow or shrink a VMM buffer in place (its address stays); the size is
    /// rounded up to the granularity and [`size`](Buffer::size) says the new one.
    ///
    /// Takes `&mut self`: a shrink unmaps the memory past the new size. A
    /// shrink (any size below the current one) is refused while views made
    /// from this buffer live (and by the library while anything else holds
    /// its memory: a DLPack export, a graph's copy or memset node, a
    /// multicast binding), and first waits for the work this buffer
    /// queued on other streams; the library then synchronises `stream`
    /// (None: the whole device) before unmapping (vmm.h). Work queued through
    /// raw pointers or `unsafe` launches is the caller's to finish first
    /// (their contracts), unless `stream` is None.
    pub fn vmm_resize(&mut self, size: usize, stream: Option<&Stream>) -> Result<()> {
        if size < self.size() {
            let views = self.live_views();
            if views > 0 {
                return Err(Error::invalid_argument(format!(
                    "Buffer::vmm_resize: {views} view(s) made from this buffer still use its memory; \
                     drop them before shrinking it")));
            }
            self.wait_pending()?;
        }
        // SAFETY: `self` is live and borrowed exclusively; vmm.h: "Shrinking
        // synchronises `stream` (NULL: the device), then unmaps" and is
        // "refused while a view or DLPack export holds the buffer's memory";
        // the work it queued on other streams is done (above); growing keeps
        // the address ("kernels, views and DLPack exports of the old range
        // stay valid"); "On failure the buffer is as it was".
        let r = check(unsafe { sys::cuabi_vmm_buffer_resize(self.as_raw(), size, opt_stream(stream)) });
        self.reread_size();
        r
    }
    /// What a VMM buffer is now.
    pub fn vmm_info(&self) -> Result<VmmInfo> {
        let mut i = VmmInfo::default();
        // SAFETY: `i` is a local the init function fills.
        check(unsafe { sys::cuabi_vmm_info_init(&mut i, sys::CUABI_VMM_INFO_VERSION) })?;
        // SAFETY: `self` is live; `i` a local with its version set, written during the call.
        check(unsafe { sys::cuabi_vmm_buffer_info(&mut i, self.as_raw()) })?;
        Ok(i)
    }
    /// Give `device` this access to the VMM buffer (and the chunks it grows by).
    ///
    /// Taking a peer's access away makes that peer's kernels fault on the
    /// memory (a CUDA error, not a host access); it does not unmap it.
    pub fn vmm_set_access(&self, device: &Device, access: PeerAccess) -> Result<()> {
        // SAFETY: handles live for the call; vmm.h: cuMemSetAccess on the
        // mapped range; the owning device's access cannot be taken away ("the
        // driver refuses"), so host-side users of the memory are unaffected.
        check(unsafe { sys::cuabi_vmm_set_access(self.as_raw(), device.as_raw(), access.to_raw()) })
    }
    /// The access `device` has to the VMM buffer.
    pub fn vmm_access(&self, device: &Device) -> Result<PeerAccess> {
        let mut a = sys::CUABI_PEER_ACCESS_NONE;
        // SAFETY: handles live for the call; `a` a local written during it.
        check(unsafe { sys::cuabi_vmm_get_access(&mut a, self.as_raw(), device.as_raw()) })?;
        Ok(a.into())
    }
    /// Export chunk `index`: a new file descriptor to send with the
    /// descriptor (None for fabric handles, which the descriptor carries).
    pub fn vmm_export_chunk(&self, index: usize) -> Result<(Option<OwnedFd>, [u8; 136])> {
        let mut fd = -1;
        let mut d = [0u8; sys::CUABI_IPC_DESCRIPTOR_SIZE as usize];
        // SAFETY: `self` is live; `d` is `out_size` bytes ("[out, array of
        // out_size elements]") and `fd` a local, written during the call.
        check(unsafe { sys::cuabi_vmm_export_chunk(&mut fd, d.as_mut_ptr(), d.len(), self.as_raw(), index) })?;
        // SAFETY: vmm.h: "a new file descriptor in *fd (the caller's to close
        // once sent; -1 for fabric handles)": ours alone, owned from here.
        let fd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
        Ok((fd, d))
    }
    /// Advice about `size` bytes at `offset` of a managed buffer (synchronous;
    /// it changes where pages live, not what they hold).
    pub fn managed_advise(&self, offset: usize, size: usize, advice: ManagedAdvice,
                          location: LocationType, id: i32) -> Result<()> {
        // SAFETY: `self` is live; managed.h: "a range past the buffer's end is
        // CUABI_ERROR_INVALID_ARGUMENT"; cuMemAdvise keeps the contents.
        check(unsafe { sys::cuabi_managed_advise(self.as_raw(), offset, size, advice, location, id) })
    }
    /// Queue a prefetch of part of a managed buffer to a device or the host
    /// on `stream` ([`Stream::legacy_default`] for the C API's NULL). The
    /// buffer's drop waits for it.
    pub fn managed_prefetch(&self, offset: usize, size: usize, location: LocationType, id: i32,
                            stream: &Stream) -> Result<()> {
        // SAFETY: handles live for the call; the range is checked (managed.h);
        // a migration keeps the contents, and the queued work is recorded
        // below so the memory outlives it (buffer.h's free rule).
        check(unsafe {
            sys::cuabi_managed_prefetch(self.as_raw(), offset, size, location, id, stream.as_raw())
        })?;
        self.after_queued(Some(stream))
    }
    /// Queue a discard of part of a managed buffer on `stream` (CUDA 13
    /// drivers): its contents become undefined, so this is a write: `&mut
    /// self`, refused while views made from the buffer live.
    pub fn managed_discard(&mut self, offset: usize, size: usize, stream: &Stream) -> Result<()> {
        self.check_writable("managed_discard")?;
        // SAFETY: `self` is live and borrowed exclusively (no reader on this
        // side; views refused above); the range is checked (managed.h: "a
        // range past the buffer's end is CUABI_ERROR_INVALID_ARGUMENT"); the
        // queued work is recorded below.
        check(unsafe { sys::cuabi_managed_discard(self.as_raw(), offset, size, stream.as_raw()) })?;
        self.after_queued(Some(stream))
    }
    /// Queue a discard of part of a managed buffer and a prefetch of its (now
    /// undefined) pages to a location, on `stream` (CUDA 13 drivers); a write,
    /// as [`managed_discard`](Buffer::managed_discard).
    pub fn managed_discard_prefetch(&mut self, offset: usize, size: usize, location: LocationType,
                                    id: i32, stream: &Stream) -> Result<()> {
        self.check_writable("managed_discard_prefetch")?;
        // SAFETY: as `managed_discard`.
        check(unsafe {
            sys::cuabi_managed_discard_prefetch(self.as_raw(), offset, size, location, id, stream.as_raw())
        })?;
        self.after_queued(Some(stream))
    }
    /// A managed range's attributes.
    pub fn managed_range(&self, offset: usize, size: usize) -> Result<ManagedRange> {
        let mut r = ManagedRange::default();
        // SAFETY: `r` is a local the init function fills.
        check(unsafe { sys::cuabi_managed_range_init(&mut r, sys::CUABI_MANAGED_RANGE_VERSION) })?;
        // SAFETY: `self` is live; `r` a local with its version set, written during the call.
        check(unsafe { sys::cuabi_managed_range_info(&mut r, self.as_raw(), offset, size) })?;
        Ok(r)
    }
}

fn opt_stream(s: Option<&Stream>) -> *mut sys::cuabi_stream {
    s.map_or(core::ptr::null_mut(), |s| s.as_raw())
}

/// A raw copy item from `src` (at `src_offset`) to `dst` (at `dst_offset`),
/// `size` bytes, for [`copy_batch_raw`] (whose contract keeps both alive and
/// `dst` unshared). Safe code batches with [`CopyBatch`].
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

/// A batch of copies between buffers and host slices, borrowed until
/// [`copy_batch`] runs it: destinations `&mut` (nothing else reads or writes
/// them meanwhile), sources shared. The library checks every range against
/// its buffer (copy_batch.h); host slices give their own length.
///
/// ```no_run
/// # fn f(s: &cuabi::Stream, a: &mut cuabi::Buffer, b: &cuabi::Buffer) -> cuabi::Result<()> {
/// let host = vec![7u8; 4096];
/// let mut back = vec![0u8; 4096];
/// let mut batch = cuabi::CopyBatch::new();
/// batch.from_host(a, 0, &host)?.to_host(&mut back, b, 0)?;
/// let r = cuabi::copy_batch(s, batch)?; // waits for `s`: host slices took part
/// assert_eq!(r.copies, 2);
/// # Ok(()) }
/// ```
pub struct CopyBatch<'a> {
    items: Vec<CopyItem>,
    /// Every buffer an item names (destinations reborrowed shared once added).
    buffers: Vec<&'a Buffer>,
    /// Whether a host slice takes part (the stream is waited for).
    host: bool,
    /// Host slices are borrowed for `'a` (as raw addresses in `items`).
    _host: PhantomData<&'a mut [u8]>,
    flags: u32,
}

impl Default for CopyBatch<'_> {
    fn default() -> Self {
        CopyBatch::new()
    }
}

impl core::fmt::Debug for CopyBatch<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "CopyBatch({} copies, host slices: {})", self.items.len(), self.host)
    }
}

impl<'a> CopyBatch<'a> {
    /// An empty batch.
    pub fn new() -> CopyBatch<'a> {
        CopyBatch { items: Vec::new(), buffers: Vec::new(), host: false, _host: PhantomData, flags: 0 }
    }
    /// How many copies it holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// Whether it holds no copies.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// Ask the copies added from now on to overlap with compute work (a hint:
    /// `CUABI_COPY_PREFER_OVERLAP_WITH_COMPUTE`).
    pub fn prefer_overlap(&mut self, on: bool) -> &mut Self {
        self.flags = if on { sys::CUABI_COPY_PREFER_OVERLAP_WITH_COMPUTE.0 as u32 } else { 0 };
        self
    }
    fn item(&self) -> Result<CopyItem> {
        let mut it = copy_item()?;
        it.flags = self.flags;
        Ok(it)
    }
    fn dst(&mut self, dst: &'a mut Buffer, what: &str) -> Result<*mut sys::cuabi_buffer> {
        dst.check_writable(what)?;
        let d: &'a Buffer = dst;
        self.buffers.push(d);
        Ok(d.as_raw())
    }
    /// Copy `size` bytes from `src` at `src_offset` to `dst` at `dst_offset`.
    pub fn copy(&mut self, dst: &'a mut Buffer, dst_offset: usize, src: &'a Buffer, src_offset: usize,
                size: usize) -> Result<&mut Self> {
        let mut it = self.item()?;
        it.dst_buffer = self.dst(dst, "CopyBatch::copy")?;
        it.dst_offset = dst_offset as u64;
        it.src_buffer = src.as_raw();
        it.src_offset = src_offset as u64;
        it.size = size;
        self.buffers.push(src);
        self.items.push(it);
        Ok(self)
    }
    /// Copy a host slice into `dst` at byte `dst_offset`.
    pub fn from_host<T: Pod>(&mut self, dst: &'a mut Buffer, dst_offset: usize, src: &'a [T]) -> Result<&mut Self> {
        let mut it = self.item()?;
        it.size = byte_len::<T>(src.len())?;
        it.dst_buffer = self.dst(dst, "CopyBatch::from_host")?;
        it.dst_offset = dst_offset as u64;
        it.src_address = src.as_ptr() as usize;
        self.host = true;
        self.items.push(it);
        Ok(self)
    }
    /// Copy from `src` at byte `src_offset` into a host slice (its whole length).
    pub fn to_host<T: Pod>(&mut self, dst: &'a mut [T], src: &'a Buffer, src_offset: usize) -> Result<&mut Self> {
        let mut it = self.item()?;
        it.size = byte_len::<T>(dst.len())?;
        it.dst_address = dst.as_mut_ptr() as usize;
        it.src_buffer = src.as_raw();
        it.src_offset = src_offset as u64;
        self.buffers.push(src);
        self.host = true;
        self.items.push(it);
        Ok(self)
    }
}

/// Queue every copy of `batch` on `stream` in one cuMemcpyBatchAsync (one
/// copy each on drivers without it: the result says so). Every buffer the
/// batch names records the work (its drop waits for it); when a host slice
/// takes part the stream is synchronised before this returns, so the slices'
/// borrows may end with it. `stream` must not be the legacy default stream
/// (the driver refuses batches there).
pub fn copy_batch(stream: &Stream, batch: CopyBatch<'_>) -> Result<CopyResult> {
    // SAFETY: every buffer handle in the items is borrowed by `batch` (live
    // for the call); raw addresses are host slices borrowed by it, each with
    // its own length as the size; destinations are borrowed `&mut`. The
    // queued copies outlive this call only when no host slice takes part,
    // and then only buffers, which record the work below.
    let r = unsafe { copy_batch_raw(&batch.items, stream) };
    let mut first = r.as_ref().err().cloned();
    if batch.host {
        // copy_batch.h: "on an error nothing is [queued]"; waiting anyway
        // costs nothing then, and keeps the slices' memory safe if it did.
        if let Err(e) = stream.synchronize() {
            first.get_or_insert(e);
        }
    }
    // One event per buffer, however many copies name it.
    let mut buffers = batch.buffers;
    buffers.sort_by_key(|b| b.as_raw() as usize);
    buffers.dedup_by_key(|b| b.as_raw() as usize);
    for b in &buffers {
        if let Err(e) = b.after_queued(Some(stream)) {
            first.get_or_insert(e);
        }
    }
    match first {
        Some(e) => Err(e),
        None => r,
    }
}

/// Queue raw copy items on `stream` in one cuMemcpyBatchAsync. Nothing is
/// tracked: the items' buffers record no work.
///
/// # Safety
/// Every buffer and view handle in `items` must stay alive, and every raw
/// address be valid for its range, until the stream reaches the copies (for
/// host addresses: until the stream is synchronised); nothing may read or
/// write a destination range, or write a source range, until then.
pub unsafe fn copy_batch_raw(items: &[CopyItem], stream: &Stream) -> Result<CopyResult> {
    let mut r = CopyResult::default();
    // SAFETY: `r` is a local the init function fills.
    check(unsafe { sys::cuabi_copy_result_init(&mut r, sys::CUABI_COPY_RESULT_VERSION) })?;
    // SAFETY: `items` is `count` structs read during the call ("[array of
    // count elements]"); `r` a local with its version set; the memory the
    // items name is the caller's contract; "Every copy is checked before
    // anything is queued".
    check(unsafe { sys::cuabi_copy_batch(&mut r, items.as_ptr(), items.len(), stream.as_raw()) })?;
    Ok(r)
}

/// The reason of a result that went copy by copy ("" when batched).
pub fn copy_reason(r: &CopyResult) -> String {
    if r.reason.is_null() {
        return String::new();
    }
    // SAFETY: copy_batch.h: `reason` is "A static string" (NUL-terminated), never freed.
    unsafe { std::ffi::CStr::from_ptr(r.reason) }.to_string_lossy().into_owned()
}
