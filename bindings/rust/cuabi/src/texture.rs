//! CUDA arrays, texture and surface objects (include/cuabi/array.h,
//! texture.h) and stream memory operations (memop.h); docs/textures.md.
//!
//! An [`Array`] is GPU memory laid out for textures; a [`Texture`] reads an
//! array, a [`MipmappedArray`] or a [`View`] of GPU memory; a [`Surface`]
//! reads and writes an array. Each keeps what it reads alive, and a texture
//! or surface is a kernel argument ([`KernelArg`]: a `handle` slot) that the
//! pack keeps alive while a slot names it. Host copies here are synchronous
//! (the borrowed slice is done with when the call returns).
use crate::argpack::{ArgPack, KernelArg};
use crate::device::Device;
use crate::error::{check, Error, Result};
use crate::memory::{Buffer, Pod};
use crate::stream::Stream;
use crate::sys;
use crate::view::View;

/// Shape, format and flags of an array (`cuabi_array_desc`).
pub type ArrayDesc = sys::cuabi_array_desc;
/// What an array is (`cuabi_array_info`).
pub type ArrayInfo = sys::cuabi_array_info;
/// A box of an array (`cuabi_array_region`).
pub type ArrayRegion = sys::cuabi_array_region;
/// How a texture samples (`cuabi_texture_desc`).
pub type TextureDesc = sys::cuabi_texture_desc;
/// What a texture reads (`cuabi_texture_info`).
pub type TextureInfo = sys::cuabi_texture_info;
/// One operation of [`Stream::batch_mem_op`] (`cuabi_stream_mem_op`).
pub type StreamMemOp = sys::cuabi_stream_mem_op;

/// The defaults of a versioned struct, through its `*_init` function.
macro_rules! inited {
    ($t:ty, $init:path, $version:path) => {{
        let mut v = <$t>::default();
        // SAFETY: `v` is a local of the struct `$init` fills.
        check(unsafe { $init(&mut v, $version) }).map(|_| v)
    }};
}

/// An array description with its defaults (1 channel, no flags): set
/// width, height, depth, format, num_channels, flags.
pub fn array_desc() -> Result<ArrayDesc> {
    inited!(ArrayDesc, sys::cuabi_array_desc_init, sys::CUABI_ARRAY_DESC_VERSION)
}

/// A texture description with its defaults (clamp, point, element type).
pub fn texture_desc() -> Result<TextureDesc> {
    inited!(TextureDesc, sys::cuabi_texture_desc_init, sys::CUABI_TEXTURE_DESC_VERSION)
}

/// A region at (x, y, z) of (width, height, depth) elements (0: to the end).
pub fn region(offset: [usize; 3], extent: [usize; 3]) -> Result<ArrayRegion> {
    let mut r = inited!(ArrayRegion, sys::cuabi_array_region_init, sys::CUABI_ARRAY_REGION_VERSION)?;
    (r.x, r.y, r.z, r.width, r.height, r.depth) =
        (offset[0], offset[1], offset[2], extent[0], extent[1], extent[2]);
    Ok(r)
}

fn opt<T>(r: Option<&T>) -> *const T {
    r.map_or(core::ptr::null(), |r| r as *const T)
}

fn opt_stream(s: Option<&Stream>) -> *mut sys::cuabi_stream {
    s.map_or(core::ptr::null_mut(), |s| s.as_raw())
}

shared_handle!(
    /// A CUDA array (CUarray), or a level of a mipmapped array (which it keeps alive).
    Array, sys::cuabi_array, sys::cuabi_array_retain, sys::cuabi_array_release
);
// SAFETY: array.h: "Arrays may be used from several threads at once".
unsafe impl Send for Array {}
// SAFETY: as for Send.
unsafe impl Sync for Array {}

impl Array {
    /// A new array on `device` (cuArray3DCreate).
    pub fn new(device: &Device, desc: &ArrayDesc) -> Result<Array> {
        // SAFETY: live handles and a local description, read during the call.
        Array::create(|out| unsafe { sys::cuabi_array_create(out, device.as_raw(), desc) })
    }

    /// A new array shaped as `view` and holding its contents (channels last
    /// when `num_channels` is 2 or 4), synchronously.
    pub fn from_view(view: &View, num_channels: u32, flags: u32, device: Option<&Device>) -> Result<Array> {
        let dev = device.map_or(core::ptr::null_mut(), |d| d.as_raw());
        // SAFETY: live handles; no stream: the copy is done when the call returns.
        Array::create(|out| unsafe {
            sys::cuabi_array_create_from_view(out, view.as_raw(), num_channels, flags, dev,
                                              core::ptr::null_mut())
        })
    }

    pub fn info(&self) -> Result<ArrayInfo> {
        let mut i = inited!(ArrayInfo, sys::cuabi_array_info_init, sys::CUABI_ARRAY_INFO_VERSION)?;
        // SAFETY: a live handle and a local struct.
        check(unsafe { sys::cuabi_array_get_info(&mut i, self.as_raw()) })?;
        Ok(i)
    }

    /// Copy `src` into `region` (None: the whole array), rows `pitch` bytes
    /// apart and `rows` rows a slice (0: packed). Synchronous.
    pub fn copy_from_host<T: Pod>(&self, region: Option<&ArrayRegion>, src: &[T], pitch: usize,
                                  rows: usize) -> Result<()> {
        // SAFETY: the slice is read within its size during the call (no stream).
        check(unsafe {
            sys::cuabi_array_copy_from_host(self.as_raw(), opt(region), src.as_ptr().cast(),
                                            core::mem::size_of_val(src), pitch, rows,
                                            core::ptr::null_mut())
        })
    }

    /// Copy `region` into `dst`, laid out as for [`Array::copy_from_host`]. Synchronous.
    pub fn copy_to_host<T: Pod>(&self, dst: &mut [T], pitch: usize, rows: usize,
                                region: Option<&ArrayRegion>) -> Result<()> {
        // SAFETY: the slice is written within its size during the call; T is Pod.
        check(unsafe {
            sys::cuabi_array_copy_to_host(dst.as_mut_ptr().cast(), core::mem::size_of_val(dst), pitch,
                                          rows, self.as_raw(), opt(region), core::ptr::null_mut())
        })
    }

    /// Copy a buffer's bytes from `offset` into `region`, on `stream` (the
    /// graph of a capture keeps both) or synchronously. The buffer waits for
    /// a queued copy before it lets go of its memory (crate::track).
    pub fn copy_from_buffer(&self, region: Option<&ArrayRegion>, src: &Buffer, offset: usize,
                            pitch: usize, rows: usize, stream: Option<&Stream>) -> Result<()> {
        if stream.is_none() {
            src.wait_pending()?;
        }
        // SAFETY: live handles; the library checks the range against the
        // buffer; a queued copy is tracked below.
        check(unsafe {
            sys::cuabi_array_copy_from_buffer(self.as_raw(), opt(region), src.as_raw(), offset, pitch,
                                              rows, opt_stream(stream))
        })?;
        src.after_queued(stream)
    }

    /// Copy `region` into a buffer from `offset` (`&mut`: it writes the
    /// buffer's memory, as [`Buffer::copy_from_host`] does).
    pub fn copy_to_buffer(&self, dst: &mut Buffer, offset: usize, pitch: usize, rows: usize,
                          region: Option<&ArrayRegion>, stream: Option<&Stream>) -> Result<()> {
        dst.check_writable("Array::copy_to_buffer")?;
        if stream.is_none() {
            dst.wait_pending()?;
        }
        // SAFETY: as for copy_from_buffer.
        check(unsafe {
            sys::cuabi_array_copy_to_buffer(dst.as_raw(), offset, pitch, rows, self.as_raw(),
                                            opt(region), opt_stream(stream))
        })?;
        dst.after_queued(stream)
    }

    /// Copy `src_region` of `src` to `dst_region`'s offset of this array.
    pub fn copy_from_array(&self, dst_region: Option<&ArrayRegion>, src: &Array,
                           src_region: Option<&ArrayRegion>, stream: Option<&Stream>) -> Result<()> {
        // SAFETY: live handles and local regions.
        check(unsafe {
            sys::cuabi_array_copy(self.as_raw(), opt(dst_region), src.as_raw(), opt(src_region),
                                  opt_stream(stream))
        })
    }

    /// The CUarray (valid while the array lives; never destroy it).
    pub fn native_handle(&self) -> Result<usize> {
        let mut h = 0usize;
        // SAFETY: a live handle and a local.
        check(unsafe { sys::cuabi_array_native_handle(&mut h, self.as_raw()) })?;
        Ok(h)
    }
}

shared_handle!(
    /// A mipmapped CUDA array (CUmipmappedArray).
    MipmappedArray, sys::cuabi_mipmapped_array, sys::cuabi_mipmapped_array_retain,
    sys::cuabi_mipmapped_array_release
);
// SAFETY: array.h, as for Array.
unsafe impl Send for MipmappedArray {}
// SAFETY: as for Send.
unsafe impl Sync for MipmappedArray {}

impl MipmappedArray {
    pub fn new(device: &Device, desc: &ArrayDesc, num_levels: u32) -> Result<MipmappedArray> {
        // SAFETY: live handles and a local description.
        MipmappedArray::create(|out| unsafe {
            sys::cuabi_mipmapped_array_create(out, device.as_raw(), desc, num_levels)
        })
    }

    /// Level `level` as an array (which keeps this one alive).
    pub fn level(&self, level: u32) -> Result<Array> {
        // SAFETY: a live handle.
        Array::create(|out| unsafe { sys::cuabi_mipmapped_array_get_level(out, self.as_raw(), level) })
    }

    pub fn info(&self) -> Result<ArrayInfo> {
        let mut i = inited!(ArrayInfo, sys::cuabi_array_info_init, sys::CUABI_ARRAY_INFO_VERSION)?;
        // SAFETY: a live handle and a local struct.
        check(unsafe { sys::cuabi_mipmapped_array_get_info(&mut i, self.as_raw()) })?;
        Ok(i)
    }
}

shared_handle!(
    /// A texture object (CUtexObject) and what it reads, which it keeps alive.
    Texture, sys::cuabi_texture, sys::cuabi_texture_retain, sys::cuabi_texture_release
);
// SAFETY: texture.h: "Textures and surfaces are immutable and may be used
// from several threads at once."
unsafe impl Send for Texture {}
// SAFETY: as for Send.
unsafe impl Sync for Texture {}

impl Texture {
    pub fn from_array(array: &Array, desc: Option<&TextureDesc>) -> Result<Texture> {
        // SAFETY: live handles and a local description.
        Texture::create(|out| unsafe { sys::cuabi_texture_create_from_array(out, array.as_raw(), opt(desc)) })
    }

    pub fn from_mipmapped_array(array: &MipmappedArray, desc: Option<&TextureDesc>) -> Result<Texture> {
        // SAFETY: as above.
        Texture::create(|out| unsafe {
            sys::cuabi_texture_create_from_mipmapped_array(out, array.as_raw(), opt(desc))
        })
    }

    /// GPU memory in place: a 1-D view as linear memory, a 2-D one pitched.
    pub fn from_view(view: &View, num_channels: u32, desc: Option<&TextureDesc>) -> Result<Texture> {
        // SAFETY: as above; the texture keeps the view.
        Texture::create(|out| unsafe {
            sys::cuabi_texture_create_from_view(out, view.as_raw(), num_channels, opt(desc))
        })
    }

    /// A texture over a new array holding a copy of `view` (host or GPU
    /// memory), in one call.
    pub fn from_image(view: &View, num_channels: u32, flags: u32, desc: Option<&TextureDesc>,
                      device: Option<&Device>) -> Result<Texture> {
        let dev = device.map_or(core::ptr::null_mut(), |d| d.as_raw());
        // SAFETY: as above; the copy is synchronous.
        Texture::create(|out| unsafe {
            sys::cuabi_texture_create_from_image(out, view.as_raw(), num_channels, flags, opt(desc), dev)
        })
    }

    /// The CUtexObject a kernel's cudaTextureObject_t parameter takes.
    pub fn object(&self) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: a live handle and a local.
        check(unsafe { sys::cuabi_texture_object(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    pub fn info(&self) -> Result<TextureInfo> {
        let mut i = inited!(TextureInfo, sys::cuabi_texture_info_init, sys::CUABI_TEXTURE_INFO_VERSION)?;
        // SAFETY: a live handle and a local struct.
        check(unsafe { sys::cuabi_texture_get_info(&mut i, self.as_raw()) })?;
        Ok(i)
    }
}

shared_handle!(
    /// A surface object (CUsurfObject) over an array, which it keeps alive.
    Surface, sys::cuabi_surface, sys::cuabi_surface_retain, sys::cuabi_surface_release
);
// SAFETY: texture.h, as for Texture.
unsafe impl Send for Surface {}
// SAFETY: as for Send.
unsafe impl Sync for Surface {}

impl Surface {
    /// A surface over an array made with `CUABI_ARRAY_SURFACE_LDST`.
    pub fn new(array: &Array) -> Result<Surface> {
        // SAFETY: a live handle.
        Surface::create(|out| unsafe { sys::cuabi_surface_create(out, array.as_raw()) })
    }

    /// The CUsurfObject a kernel's cudaSurfaceObject_t parameter takes.
    pub fn object(&self) -> Result<u64> {
        let mut v = 0u64;
        // SAFETY: a live handle and a local.
        check(unsafe { sys::cuabi_surface_object(&mut v, self.as_raw()) })?;
        Ok(v)
    }
}

/// A `handle` parameter (or any 8-byte integer one): the pack keeps the
/// texture alive while the slot names it, and writes its value at launch.
impl KernelArg for Texture {
    fn signature(&self) -> String { "handle".into() }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
        let kept = self.clone();
        // SAFETY: live handles; the pack checks the slot's kind.
        check(unsafe { sys::cuabi_argpack_set_texture(pack.as_raw(), slot, self.as_raw()) })?;
        pack.keep_object(slot, Box::new(kept));
        Ok(())
    }
}

/// A `handle` parameter, as for [`Texture`].
impl KernelArg for Surface {
    fn signature(&self) -> String { "handle".into() }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
        let kept = self.clone();
        // SAFETY: as for Texture.
        check(unsafe { sys::cuabi_argpack_set_surface(pack.as_raw(), slot, self.as_raw()) })?;
        pack.keep_object(slot, Box::new(kept));
        Ok(())
    }
}

/// Stream memory operations (memop.h): the word is a buffer and a byte
/// offset. A write takes the buffer `&mut` (it writes its memory); each
/// queued operation is tracked so the buffer waits for it before it lets go
/// of its memory (crate::track).
impl Stream {
    /// Wait until the 32-bit word meets `flags`' condition with `value`.
    pub fn wait_value32(&self, buffer: &Buffer, offset: usize, value: u32, flags: u32) -> Result<()> {
        // SAFETY: live handles; the library checks the word's range and alignment.
        check(unsafe { sys::cuabi_stream_wait_value32(self.as_raw(), buffer.as_raw(), offset, value, flags) })?;
        buffer.after_queued(Some(self))
    }
    pub fn wait_value64(&self, buffer: &Buffer, offset: usize, value: u64, flags: u32) -> Result<()> {
        // SAFETY: as above.
        check(unsafe { sys::cuabi_stream_wait_value64(self.as_raw(), buffer.as_raw(), offset, value, flags) })?;
        buffer.after_queued(Some(self))
    }
    /// Write `value` when the stream gets there.
    pub fn write_value32(&self, buffer: &mut Buffer, offset: usize, value: u32, flags: u32) -> Result<()> {
        buffer.check_writable("Stream::write_value32")?;
        // SAFETY: as above.
        check(unsafe { sys::cuabi_stream_write_value32(self.as_raw(), buffer.as_raw(), offset, value, flags) })?;
        buffer.after_queued(Some(self))
    }
    pub fn write_value64(&self, buffer: &mut Buffer, offset: usize, value: u64, flags: u32) -> Result<()> {
        buffer.check_writable("Stream::write_value64")?;
        // SAFETY: as above.
        check(unsafe { sys::cuabi_stream_write_value64(self.as_raw(), buffer.as_raw(), offset, value, flags) })?;
        buffer.after_queued(Some(self))
    }

    /// Queue several operations with one call: `(kind, buffer, offset, value, flags)`
    /// each (buffer None for barriers and flushes; `&mut` because writes are
    /// among them).
    pub fn batch_mem_op(&self, ops: &mut [(sys::cuabi_stream_mem_op_kind, Option<&mut Buffer>, usize, u64, u32)])
                        -> Result<()> {
        let mut c = Vec::with_capacity(ops.len());
        for (kind, buffer, offset, value, flags) in ops.iter() {
            let mut o = inited!(StreamMemOp, sys::cuabi_stream_mem_op_init, sys::CUABI_STREAM_MEM_OP_VERSION)?;
            o.kind = *kind;
            o.buffer = buffer.as_ref().map_or(core::ptr::null_mut(), |b| b.as_raw());
            (o.offset, o.value, o.flags) = (*offset, *value, *flags);
            c.push(o);
        }
        if c.is_empty() {
            return Err(Error::invalid_argument("batch_mem_op: no operations"));
        }
        // SAFETY: the buffers are borrowed for the call; the array is local;
        // the queued operations are tracked below.
        check(unsafe { sys::cuabi_stream_batch_mem_op(self.as_raw(), c.as_ptr(), c.len()) })?;
        for (_, buffer, ..) in ops.iter() {
            if let Some(b) = buffer {
                b.after_queued(Some(self))?;
            }
        }
        Ok(())
    }
}
