//! Memory resources and buffers (include/cuabi/memory.h, buffer.h).
use crate::argpack::BufferArg;
use crate::device::Device;
use crate::error::{check, Error, Result};
use crate::stream::Stream;
use crate::sys;
use core::ffi::c_void;

shared_handle!(
    /// An allocator of one kind of memory; keeps its device alive.
    MemoryResource, sys::cuabi_memory_resource, sys::cuabi_memory_resource_retain,
    sys::cuabi_memory_resource_release
);
// SAFETY: memory.h: "Resources may be used from several threads at once."
unsafe impl Send for MemoryResource {}
unsafe impl Sync for MemoryResource {}

handle_core!(
    /// A range of memory and who frees it (single owner: dropping it
    /// destroys the handle; the memory goes back when the last view over it
    /// is gone).
    Buffer, sys::cuabi_buffer, sys::cuabi_buffer_destroy
);
// SAFETY: buffer.h: "A buffer may be used from several threads at once";
// destroying it needs ownership (drop / free_async take `self`).
unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

/// Where memory lives (`cuabi_memory_kind`).
pub type MemoryKind = sys::cuabi_memory_kind;

/// Plain old data: every bit pattern is a valid value, so bytes copied
/// from device or foreign memory may be read as `Self`.
///
/// # Safety
/// Implement only for types without padding, invalid bit patterns or pointers.
pub unsafe trait Pod: Copy + 'static {}
macro_rules! pod { ($($t:ty),*) => {$(unsafe impl Pod for $t {})*}; }
pod!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, isize, usize);

fn opt_stream(s: Option<&Stream>) -> *mut sys::cuabi_stream {
    s.map_or(core::ptr::null_mut(), |s| s.as_raw())
}

fn byte_len<T>(n: usize) -> Result<usize> {
    n.checked_mul(core::mem::size_of::<T>()).ok_or_else(|| Error::invalid_argument("byte count overflows usize"))
}

impl MemoryResource {
    /// Plain host memory; needs no driver or GPU.
    pub fn host() -> Result<MemoryResource> {
        MemoryResource::create(|o| unsafe { sys::cuabi_memory_resource_host(o) })
    }
    /// The device's default stream-ordered pool.
    pub fn device_default(device: &Device) -> Result<MemoryResource> {
        MemoryResource::create(|o| unsafe { sys::cuabi_memory_resource_device_default(o, device.as_raw()) })
    }
    /// A new stream-ordered pool; `release_threshold` None keeps everything (UINT64_MAX).
    pub fn pool(device: &Device, release_threshold: Option<u64>) -> Result<MemoryResource> {
        let mut o = sys::cuabi_memory_pool_options::default();
        check(unsafe { sys::cuabi_memory_pool_options_init(&mut o, sys::CUABI_MEMORY_POOL_OPTIONS_VERSION) })?;
        if let Some(t) = release_threshold {
            o.release_threshold = t;
        }
        MemoryResource::create(|out| unsafe { sys::cuabi_memory_resource_pool_create(out, device.as_raw(), &o) })
    }
    /// Page-locked host memory.
    pub fn pinned(device: &Device) -> Result<MemoryResource> {
        MemoryResource::create(|o| unsafe { sys::cuabi_memory_resource_pinned(o, device.as_raw()) })
    }
    /// Managed (unified) memory.
    pub fn managed(device: &Device) -> Result<MemoryResource> {
        MemoryResource::create(|o| unsafe { sys::cuabi_memory_resource_managed(o, device.as_raw()) })
    }
    pub fn kind(&self) -> Result<MemoryKind> {
        let mut k = MemoryKind::default();
        check(unsafe { sys::cuabi_memory_resource_kind(&mut k, self.as_raw()) })?;
        Ok(k)
    }
    /// The CUmemoryPool of a pool resource (NOT_SUPPORTED for other kinds).
    pub fn raw_pool(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_memory_resource_pool(&mut v, self.as_raw()) })?;
        Ok(v)
    }
    /// Return unused pool memory, keeping at least `keep_bytes`.
    pub fn trim(&self, keep_bytes: usize) -> Result<()> {
        check(unsafe { sys::cuabi_memory_resource_trim(self.as_raw(), keep_bytes) })
    }
    /// Allocate a buffer of `size` bytes (alignment 0 = the resource's default).
    pub fn allocate(&self, size: usize, alignment: usize, stream: Option<&Stream>) -> Result<Buffer> {
        Buffer::allocate(self, size, alignment, stream)
    }
}

/// What a wrapped buffer's release callback receives: a closure run once.
type ReleaseFn = Box<dyn FnOnce(usize, usize) + Send>;

unsafe extern "C" fn release_trampoline(ptr: usize, size: usize, payload: *mut c_void) {
    // SAFETY: payload is the Box<ReleaseFn> leaked by Buffer::wrap; called once.
    let f: Box<ReleaseFn> = unsafe { Box::from_raw(payload.cast()) };
    // A panic must not cross into C: it is caught and dropped here.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || f(ptr, size)));
}

impl Buffer {
    /// Allocate `size` bytes from `resource`, on `stream` for stream-ordered ones.
    pub fn allocate(resource: &MemoryResource, size: usize, alignment: usize, stream: Option<&Stream>) -> Result<Buffer> {
        Buffer::create(|o| unsafe { sys::cuabi_buffer_allocate(o, resource.as_raw(), size, alignment, opt_stream(stream)) })
    }

    /// Wrap memory allocated elsewhere; `release` runs exactly once (on any
    /// thread) when the buffer and every view over it are gone. On error
    /// nothing is called and `release` is dropped unrun.
    ///
    /// # Safety
    /// `ptr..ptr+size` must be memory of `kind` (on `device`) that stays
    /// valid until `release` runs (or forever without one).
    pub unsafe fn wrap(device: Option<&Device>, kind: MemoryKind, ptr: usize, size: usize,
                       release: Option<ReleaseFn>) -> Result<Buffer> {
        let dev = device.map_or(core::ptr::null_mut(), |d| d.as_raw());
        let payload = release.map(|f| Box::into_raw(Box::new(f)));
        let cb: sys::cuabi_buffer_release_fn = payload.map(|_| release_trampoline as _);
        let p = payload.map_or(core::ptr::null_mut(), |p| p.cast::<c_void>());
        let r = Buffer::create(|o| unsafe { sys::cuabi_buffer_wrap(o, dev, kind, ptr, size, cb, p) });
        if r.is_err() {
            if let Some(p) = payload {
                drop(unsafe { Box::from_raw(p) }); // the C side called nothing
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
        // SAFETY: the vector's heap block stays put until the closure rebuilds and drops it.
        let rel: ReleaseFn = Box::new(move |_, _| drop(unsafe { Vec::from_raw_parts(addr as *mut T, len, cap) }));
        let r = unsafe { Buffer::wrap(None, sys::CUABI_MEMORY_HOST, addr, size, Some(rel)) };
        if r.is_err() {
            // wrap dropped the closure unrun: the vector is still ours.
            drop(unsafe { Vec::from_raw_parts(ptr, len, cap) });
        }
        r
    }

    /// Destroy the handle; the memory is freed in order on `stream` once unused.
    pub fn free_async(self, stream: &Stream) -> Result<()> {
        let raw = self.into_raw();
        check(unsafe { sys::cuabi_buffer_free_async(raw, stream.as_raw()) })
    }

    /// The address (a device pointer for device memory).
    pub fn pointer(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_buffer_pointer(&mut v, self.as_raw()) })?;
        Ok(v)
    }
    pub fn size(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_buffer_size(&mut v, self.as_raw()) })?;
        Ok(v)
    }
    pub fn kind(&self) -> Result<MemoryKind> {
        let mut k = MemoryKind::default();
        check(unsafe { sys::cuabi_buffer_kind(&mut k, self.as_raw()) })?;
        Ok(k)
    }
    /// The buffer as a `buffer` kernel argument (looked up at each launch).
    pub fn arg(&self) -> BufferArg {
        BufferArg(self.as_raw())
    }

    /// Copy `size` bytes from `src` (queued on `stream`, or synchronous).
    pub fn copy_from(&self, dst_offset: usize, src: &Buffer, src_offset: usize, size: usize, stream: Option<&Stream>) -> Result<()> {
        check(unsafe { sys::cuabi_buffer_copy(self.as_raw(), dst_offset, src.as_raw(), src_offset, size, opt_stream(stream)) })
    }

    /// Copy a host slice into the buffer at byte `offset`, synchronously.
    pub fn copy_from_host<T: Pod>(&self, offset: usize, src: &[T]) -> Result<()> {
        let n = byte_len::<T>(src.len())?;
        check(unsafe { sys::cuabi_buffer_copy_from_host(self.as_raw(), offset, src.as_ptr().cast(), n, core::ptr::null_mut()) })
    }

    /// Queue a copy of a host slice on `stream`.
    ///
    /// # Safety
    /// `src` must stay valid and unchanged until the stream reaches the copy.
    pub unsafe fn copy_from_host_async<T: Pod>(&self, offset: usize, src: &[T], stream: &Stream) -> Result<()> {
        let n = byte_len::<T>(src.len())?;
        check(unsafe { sys::cuabi_buffer_copy_from_host(self.as_raw(), offset, src.as_ptr().cast(), n, stream.as_raw()) })
    }

    /// Copy from byte `offset` of the buffer into a host slice, synchronously.
    pub fn copy_to_host<T: Pod>(&self, dst: &mut [T], offset: usize) -> Result<()> {
        let n = byte_len::<T>(dst.len())?;
        check(unsafe { sys::cuabi_buffer_copy_to_host(dst.as_mut_ptr().cast(), self.as_raw(), offset, n, core::ptr::null_mut()) })
    }

    /// Queue a copy into a host slice on `stream`.
    ///
    /// # Safety
    /// `dst` must stay valid and unaccessed until the stream reaches the copy.
    pub unsafe fn copy_to_host_async<T: Pod>(&self, dst: &mut [T], offset: usize, stream: &Stream) -> Result<()> {
        let n = byte_len::<T>(dst.len())?;
        check(unsafe { sys::cuabi_buffer_copy_to_host(dst.as_mut_ptr().cast(), self.as_raw(), offset, n, stream.as_raw()) })
    }

    /// The whole buffer as a vector of `T` (its size must be a multiple of `T`'s).
    pub fn to_vec<T: Pod + Default>(&self) -> Result<Vec<T>> {
        let size = self.size()?;
        let w = core::mem::size_of::<T>();
        if w == 0 || size % w != 0 {
            return Err(Error::invalid_argument(format!("Buffer::to_vec: {size} bytes is not a whole number of {w}-byte elements")));
        }
        let mut v = vec![T::default(); size / w];
        self.copy_to_host(&mut v, 0)?;
        Ok(v)
    }

    /// Set `count` elements of `width` bytes (1, 2, 4) from byte `offset` to `value`.
    pub fn memset(&self, offset: usize, value: u32, width: u32, count: usize, stream: Option<&Stream>) -> Result<()> {
        check(unsafe { sys::cuabi_buffer_memset(self.as_raw(), offset, value, width, count, opt_stream(stream)) })
    }
}
