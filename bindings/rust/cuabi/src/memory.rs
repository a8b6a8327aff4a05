//! Memory resources and buffers (include/cuabi/memory.h, buffer.h).
//!
//! A [`Buffer`] is untyped memory of any kind; writes take `&mut self` and
//! queued work is waited for before the memory goes (see [`Buffer`]). For
//! typed device memory used by kernels, see [`DeviceSlice`](crate::DeviceSlice).
use std::sync::Arc;

use crate::argpack::BufferArg;
use crate::device::Device;
use crate::enums::MemoryKind;
use crate::error::{check, infallible, Error, Result};
use crate::stream::Stream;
use crate::sys;
use crate::track::Pending;
use core::ffi::c_void;

shared_handle!(
    /// An allocator of one kind of memory; keeps its device alive.
    MemoryResource, sys::cuabi_memory_resource, sys::cuabi_memory_resource_retain,
    sys::cuabi_memory_resource_release
);
// SAFETY: memory.h: "Resources may be used from several threads at once."
unsafe impl Send for MemoryResource {}
// SAFETY: as for Send: every method is a C call the header allows concurrently.
unsafe impl Sync for MemoryResource {}

handle_core!(
    /// The handle of a [`Buffer`].
    BufferRaw, sys::cuabi_buffer, sys::cuabi_buffer_destroy
);

/// A range of memory and who frees it (single owner: dropping it destroys
/// the handle; the memory goes back when the last view over it is gone).
///
/// * Writes take `&mut self`: no method taking `&self` writes memory another
///   thread may read. Views made from a buffer ([`View::new`](crate::View::new))
///   read its memory too, so a write to host-accessible memory (host,
///   pinned, managed) is refused while any view made from this buffer lives.
/// * Stream-ordered lifetime: work queued on a stream other than the one the
///   memory is freed on (the allocation stream of a stream-ordered pool)
///   records an event; dropping the buffer (or `free_async`) waits for it, so
///   the memory is never freed under a queued copy or memset (buffer.h: "The
///   free is ordered on that one stream only").
pub struct Buffer {
    // Dropped first: waits for queued work before the handle goes.
    pending: Pending,
    raw: BufferRaw,
    addr: usize,
    size: usize,
    kind: MemoryKind,
    /// The stream a stream-ordered free runs on; None when the memory is not
    /// stream-ordered (or on the legacy default stream).
    home: Option<Stream>,
    /// One clone per view made from this buffer.
    views: Arc<()>,
}
// SAFETY: buffer.h: "A buffer may be used from several threads at once";
// destroying it needs ownership (drop / free_async take `self`), and every
// write takes `&mut self`, so a `&Buffer` shared between threads only reads.
unsafe impl Send for Buffer {}
// SAFETY: as for Send; `pending` is a Mutex and atomics.
unsafe impl Sync for Buffer {}

impl core::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Buffer({:?}, {} bytes of {:?} at {:#x})", self.raw.as_raw(), self.size, self.kind, self.addr)
    }
}

impl PartialEq for Buffer {
    fn eq(&self, o: &Self) -> bool {
        self.raw == o.raw
    }
}
impl Eq for Buffer {}

/// Plain old data: every bit pattern is a valid value, so bytes copied
/// from device or foreign memory may be read as `Self`.
///
/// # Safety
/// Implement only for types without padding, invalid bit patterns or pointers.
pub unsafe trait Pod: Copy + 'static {}
macro_rules! pod {
    ($($t:ty),*) => {$(
        // SAFETY: a primitive integer or float: every bit pattern is valid, no padding.
        unsafe impl Pod for $t {}
    )*};
}
pod!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, isize, usize);

pub(crate) fn opt_stream(s: Option<&Stream>) -> *mut sys::cuabi_stream {
    s.map_or(core::ptr::null_mut(), |s| s.as_raw())
}

pub(crate) fn byte_len<T>(n: usize) -> Result<usize> {
    n.checked_mul(core::mem::size_of::<T>()).ok_or_else(|| Error::invalid_argument("byte count overflows usize"))
}

impl MemoryResource {
    /// Plain host memory; needs no driver or GPU.
    pub fn host() -> Result<MemoryResource> {
        // SAFETY: `o` is the out-pointer `create` hands us, written during the call.
        MemoryResource::create(|o| unsafe { sys::cuabi_memory_resource_host(o) })
    }
    /// The device's default stream-ordered pool.
    pub fn device_default(device: &Device) -> Result<MemoryResource> {
        // SAFETY: `device` is live for the call; `o` as in `host`.
        MemoryResource::create(|o| unsafe { sys::cuabi_memory_resource_device_default(o, device.as_raw()) })
    }
    /// A new stream-ordered pool; `release_threshold` None keeps everything (UINT64_MAX).
    pub fn pool(device: &Device, release_threshold: Option<u64>) -> Result<MemoryResource> {
        let mut o = sys::cuabi_memory_pool_options::default();
        // SAFETY: `o` is a local the init function fills (common.h: pointers are used during the call).
        check(unsafe { sys::cuabi_memory_pool_options_init(&mut o, sys::CUABI_MEMORY_POOL_OPTIONS_VERSION) })?;
        if let Some(t) = release_threshold {
            o.release_threshold = t;
        }
        // SAFETY: `device` is live, `o` a local read during the call.
        MemoryResource::create(|out| unsafe { sys::cuabi_memory_resource_pool_create(out, device.as_raw(), &o) })
    }
    /// Page-locked host memory.
    pub fn pinned(device: &Device) -> Result<MemoryResource> {
        // SAFETY: as `device_default`.
        MemoryResource::create(|o| unsafe { sys::cuabi_memory_resource_pinned(o, device.as_raw()) })
    }
    /// Managed (unified) memory.
    pub fn managed(device: &Device) -> Result<MemoryResource> {
        // SAFETY: as `device_default`.
        MemoryResource::create(|o| unsafe { sys::cuabi_memory_resource_managed(o, device.as_raw()) })
    }
    /// What memory it hands out.
    pub fn kind(&self) -> MemoryKind {
        let mut k = sys::cuabi_memory_kind::default();
        // SAFETY: `self` is live; `k` a local written during the call.
        infallible(unsafe { sys::cuabi_memory_resource_kind(&mut k, self.as_raw()) }, "cuabi_memory_resource_kind");
        k.into()
    }
    /// The CUmemoryPool of a pool resource (NOT_SUPPORTED for other kinds).
    pub fn raw_pool(&self) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: `self` is live; `v` a local written during the call.
        check(unsafe { sys::cuabi_memory_resource_pool(&mut v, self.as_raw()) })?;
        Ok(v)
    }
    /// Whether it is a stream-ordered pool (its frees are ordered on a stream).
    pub fn is_stream_ordered(&self) -> bool {
        self.raw_pool().is_ok()
    }
    /// Return unused pool memory, keeping at least `keep_bytes`.
    pub fn trim(&self, keep_bytes: usize) -> Result<()> {
        // SAFETY: `self` is live for the call.
        check(unsafe { sys::cuabi_memory_resource_trim(self.as_raw(), keep_bytes) })
    }
    /// Allocate a buffer of `size` bytes (alignment 0 = the resource's default).
    pub fn allocate(&self, size: usize, alignment: usize, stream: Option<&Stream>) -> Result<Buffer> {
        Buffer::allocate(self, size, alignment, stream)
    }
}

/// What a wrapped buffer's release callback receives: a closure run once.
pub type ReleaseFn = Box<dyn FnOnce(usize, usize) + Send>;

unsafe extern "C" fn release_trampoline(ptr: usize, size: usize, payload: *mut c_void) {
    // SAFETY: payload is the Box<ReleaseFn> leaked by Buffer::wrap, and
    // buffer.h says the release "is called exactly once".
    let f: Box<ReleaseFn> = unsafe { Box::from_raw(payload.cast()) };
    // A panic must not cross into C: it is caught and dropped here.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || f(ptr, size)));
}

impl Buffer {
    /// A new owner of a fresh handle: its address, size and kind read once.
    fn adopt(raw: BufferRaw, home: Option<Stream>) -> Buffer {
        let (mut addr, mut size, mut kind) = (0usize, 0usize, sys::cuabi_memory_kind::default());
        // SAFETY: `raw` is a live handle we own; the outs are locals.
        infallible(unsafe { sys::cuabi_buffer_pointer(&mut addr, raw.as_raw()) }, "cuabi_buffer_pointer");
        // SAFETY: as above.
        infallible(unsafe { sys::cuabi_buffer_size(&mut size, raw.as_raw()) }, "cuabi_buffer_size");
        // SAFETY: as above.
        infallible(unsafe { sys::cuabi_buffer_kind(&mut kind, raw.as_raw()) }, "cuabi_buffer_kind");
        Buffer { pending: Pending::default(), raw, addr, size, kind: kind.into(), home, views: Arc::new(()) }
    }

    /// Take ownership of a raw buffer handle (not stream-ordered as far as
    /// this value knows: queued work on any stream is waited for at drop).
    ///
    /// # Safety
    /// `ptr` must be a live buffer handle whose reference the caller owns and gives up.
    pub unsafe fn from_raw(ptr: *mut sys::cuabi_buffer) -> Option<Buffer> {
        // SAFETY: the caller's contract.
        unsafe { BufferRaw::from_raw(ptr) }.map(|raw| Buffer::adopt(raw, None))
    }

    /// The raw handle, still owned by `self`.
    #[inline]
    pub fn as_raw(&self) -> *mut sys::cuabi_buffer {
        self.raw.as_raw()
    }

    /// Give up ownership (queued work is waited for first): the caller must destroy the handle.
    pub fn into_raw(self) -> *mut sys::cuabi_buffer {
        let _ = self.pending.wait_host();
        let Buffer { raw, .. } = self;
        raw.into_raw()
    }

    pub(crate) fn create(f: impl FnOnce(*mut *mut sys::cuabi_buffer) -> sys::cuabi_status) -> Result<Buffer> {
        Ok(Buffer::adopt(BufferRaw::create(f)?, None))
    }

    /// Allocate `size` bytes from `resource`, on `stream` for stream-ordered ones.
    pub fn allocate(resource: &MemoryResource, size: usize, alignment: usize, stream: Option<&Stream>) -> Result<Buffer> {
        // SAFETY: `resource` and `stream` are live for the call; `o` is the out-pointer.
        let raw = BufferRaw::create(|o| unsafe {
            sys::cuabi_buffer_allocate(o, resource.as_raw(), size, alignment, opt_stream(stream))
        })?;
        let home = if resource.is_stream_ordered() { stream.cloned() } else { None };
        Ok(Buffer::adopt(raw, home))
    }

    /// Wrap memory allocated elsewhere; `release` runs exactly once (on any
    /// thread) when the buffer and every view over it are gone. On error
    /// nothing is called and `release` is dropped unrun.
    ///
    /// # Safety
    /// `ptr..ptr+size` must be memory of `kind` (on `device`) that stays
    /// valid until `release` runs (or forever without one), and that nothing
    /// but this buffer and views over it writes while they may read it.
    pub unsafe fn wrap(device: Option<&Device>, kind: impl Into<MemoryKind>, ptr: usize, size: usize,
                       release: Option<ReleaseFn>) -> Result<Buffer> {
        let kind: MemoryKind = kind.into();
        let dev = device.map_or(core::ptr::null_mut(), |d| d.as_raw());
        let payload = release.map(|f| Box::into_raw(Box::new(f)));
        let cb: sys::cuabi_buffer_release_fn = payload.map(|_| release_trampoline as _);
        let p = payload.map_or(core::ptr::null_mut(), |p| p.cast::<c_void>());
        // SAFETY: the caller vouches for the memory; `dev` is live or NULL;
        // the payload is ours until the library calls the release once.
        let r = Buffer::create(|o| unsafe { sys::cuabi_buffer_wrap(o, dev, kind.to_raw(), ptr, size, cb, p) });
        if r.is_err() {
            if let Some(p) = payload {
                // SAFETY: buffer.h: "on failure nothing is called": the box is still ours.
                drop(unsafe { Box::from_raw(p) });
            }
        }
        r
    }

    /// A host buffer that owns `data`: the vector is dropped when the
    /// buffer and every view over it are gone. Needs no GPU.
    pub fn from_vec<T: Pod + Send>(data: Vec<T>) -> Result<Buffer> {
        let mut data = core::mem::ManuallyDrop::new(data);
        let (ptr, len, cap) = (data.as_mut_ptr(), data.len(), data.capacity());
        let size = byte_len::<T>(len)?;
        let addr = ptr as usize;
        // SAFETY: the vector's heap block stays put until the closure rebuilds
        // and drops it, once; nothing else owns it.
        let rel: ReleaseFn = Box::new(move |_, _| drop(unsafe { Vec::from_raw_parts(addr as *mut T, len, cap) }));
        // SAFETY: host memory owned by the release closure, valid until it
        // runs; only this buffer and its views reach it.
        let r = unsafe { Buffer::wrap(None, MemoryKind::Host, addr, size, Some(rel)) };
        if r.is_err() {
            // SAFETY: wrap dropped the closure unrun: the vector is still ours.
            drop(unsafe { Vec::from_raw_parts(ptr, len, cap) });
        }
        r
    }

    /// Destroy the handle; the memory is freed in order on `stream` once
    /// unused. Work this buffer queued on other streams is waited for first
    /// (on `stream`, without blocking, for stream-ordered memory).
    pub fn free_async(self, stream: &Stream) -> Result<()> {
        if self.home.is_some() {
            self.pending.wait_on(stream)?;
        } else {
            self.pending.wait_host()?;
        }
        let raw = self.into_raw();
        // SAFETY: we owned the handle and give it up here (free_async
        // invalidates it "also when an error is returned"); `stream` is live.
        check(unsafe { sys::cuabi_buffer_free_async(raw, stream.as_raw()) })
    }

    /// The address (a device pointer for device memory).
    #[inline]
    pub fn pointer(&self) -> usize {
        self.addr
    }
    /// Its size in bytes.
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }
    /// Whether it holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    /// Where the memory lives.
    #[inline]
    pub fn kind(&self) -> MemoryKind {
        self.kind
    }
    /// The buffer as a `buffer` kernel argument of an [`ArgPack`](crate::ArgPack)
    /// (looked up at each launch; for `unsafe` launches).
    pub fn arg(&self) -> BufferArg {
        BufferArg(self.as_raw())
    }

    /// A token views made from this buffer hold (see [`Buffer`]).
    pub(crate) fn view_token(&self) -> Result<Arc<()>> {
        // A view may read host memory at once: queued writes come first.
        if self.kind.host_accessible() {
            self.pending.wait_host()?;
        }
        Ok(self.views.clone())
    }

    /// Refuse a write while views made from this buffer may read it.
    fn writable(&self, what: &str) -> Result<()> {
        if self.kind.host_accessible() && Arc::strong_count(&self.views) > 1 {
            return Err(Error::invalid_argument(format!(
                "Buffer::{what}: {} view(s) made from this buffer still read its {:?} memory; \
                 drop them first (views are immutable)", Arc::strong_count(&self.views) - 1, self.kind)));
        }
        Ok(())
    }

    /// After queuing work on `stream` (None: it ran synchronously).
    fn queued(&self, stream: Option<&Stream>) -> Result<()> {
        match stream {
            Some(s) => self.pending.queued(s, self.home.as_ref()),
            None => Ok(()),
        }
    }

    /// Events of queued work not yet waited for (for tests).
    #[doc(hidden)]
    pub fn pending_uses(&self) -> usize {
        self.pending.count()
    }

    /// Copy `size` bytes from `src` (queued on `stream`, or synchronous).
    pub fn copy_from(&mut self, dst_offset: usize, src: &Buffer, src_offset: usize, size: usize,
                     stream: Option<&Stream>) -> Result<()> {
        self.writable("copy_from")?;
        if stream.is_none() {
            self.pending.wait_host()?;
            src.pending.wait_host()?;
        }
        // SAFETY: both handles are live for the call; the library checks the
        // ranges; a queued copy's memory stays alive until the events the two
        // trackers record below are waited for (buffer.h's free rule).
        check(unsafe {
            sys::cuabi_buffer_copy(self.as_raw(), dst_offset, src.as_raw(), src_offset, size, opt_stream(stream))
        })?;
        self.queued(stream)?;
        src.queued(stream)
    }

    /// Copy a host slice into the buffer at byte `offset`, synchronously.
    pub fn copy_from_host<T: Pod>(&mut self, offset: usize, src: &[T]) -> Result<()> {
        self.writable("copy_from_host")?;
        self.pending.wait_host()?;
        let n = byte_len::<T>(src.len())?;
        // SAFETY: without a stream the copy reads `src` during the call only
        // (buffer.h: "a copy or memset without a stream during the call").
        check(unsafe { sys::cuabi_buffer_copy_from_host(self.as_raw(), offset, src.as_ptr().cast(), n, core::ptr::null_mut()) })
    }

    /// Queue a copy of a host slice on `stream`.
    ///
    /// # Safety
    /// `src` must stay valid and unchanged until the stream reaches the copy.
    pub unsafe fn copy_from_host_async<T: Pod>(&mut self, offset: usize, src: &[T], stream: &Stream) -> Result<()> {
        self.writable("copy_from_host_async")?;
        let n = byte_len::<T>(src.len())?;
        // SAFETY: the caller keeps `src` until the stream reaches the copy.
        check(unsafe { sys::cuabi_buffer_copy_from_host(self.as_raw(), offset, src.as_ptr().cast(), n, stream.as_raw()) })?;
        self.queued(Some(stream))
    }

    /// Copy from byte `offset` of the buffer into a host slice, synchronously
    /// (after the work this buffer queued on other streams).
    pub fn copy_to_host<T: Pod>(&self, dst: &mut [T], offset: usize) -> Result<()> {
        self.pending.wait_host()?;
        let n = byte_len::<T>(dst.len())?;
        // SAFETY: without a stream the copy writes `dst` during the call only;
        // T is Pod, so any bytes are a valid value.
        check(unsafe { sys::cuabi_buffer_copy_to_host(dst.as_mut_ptr().cast(), self.as_raw(), offset, n, core::ptr::null_mut()) })
    }

    /// Queue a copy into a host slice on `stream`.
    ///
    /// # Safety
    /// `dst` must stay valid and unaccessed until the stream reaches the copy.
    pub unsafe fn copy_to_host_async<T: Pod>(&self, dst: &mut [T], offset: usize, stream: &Stream) -> Result<()> {
        let n = byte_len::<T>(dst.len())?;
        // SAFETY: the caller keeps `dst` until the stream reaches the copy.
        check(unsafe { sys::cuabi_buffer_copy_to_host(dst.as_mut_ptr().cast(), self.as_raw(), offset, n, stream.as_raw()) })?;
        self.queued(Some(stream))
    }

    /// The whole buffer as a vector of `T` (its size must be a multiple of `T`'s).
    pub fn to_vec<T: Pod + Default>(&self) -> Result<Vec<T>> {
        let w = core::mem::size_of::<T>();
        if w == 0 || self.size % w != 0 {
            return Err(Error::invalid_argument(format!(
                "Buffer::to_vec: {} bytes is not a whole number of {w}-byte elements", self.size)));
        }
        let mut v = vec![T::default(); self.size / w];
        self.copy_to_host(&mut v, 0)?;
        Ok(v)
    }

    /// Set `count` elements of `width` bytes (1, 2, 4) from byte `offset` to `value`.
    pub fn memset(&mut self, offset: usize, value: u32, width: u32, count: usize, stream: Option<&Stream>) -> Result<()> {
        self.writable("memset")?;
        if stream.is_none() {
            self.pending.wait_host()?;
        }
        // SAFETY: the handle is live; the library checks the range; a queued
        // memset is tracked below.
        check(unsafe { sys::cuabi_buffer_memset(self.as_raw(), offset, value, width, count, opt_stream(stream)) })?;
        self.queued(stream)
    }

    /// Record queued work of another module (peer copies) on this buffer.
    pub(crate) fn after_queued(&self, stream: Option<&Stream>) -> Result<()> {
        self.queued(stream)
    }
    pub(crate) fn check_writable(&self, what: &str) -> Result<()> {
        self.writable(what)
    }
    pub(crate) fn wait_pending(&self) -> Result<()> {
        self.pending.wait_host()
    }
    /// How many views made from this buffer are alive.
    pub(crate) fn live_views(&self) -> usize {
        Arc::strong_count(&self.views) - 1
    }
    /// Read the size again after the library changed it (a VMM resize).
    pub(crate) fn reread_size(&mut self) {
        let mut size = 0usize;
        // SAFETY: `self` owns the live handle; `size` is a local written during the call.
        infallible(unsafe { sys::cuabi_buffer_size(&mut size, self.as_raw()) }, "cuabi_buffer_size");
        self.size = size;
    }
}
