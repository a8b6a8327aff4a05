//! Streams.
//!
//! What ties streams to events (Event::record, Stream::wait_event) lives in
//! event.rs, which uses this module; this one does not use events.
use crate::device::Device;
use crate::error::{check, infallible, Result};
use crate::sys;

shared_handle!(
    /// A CUDA stream; it keeps its device alive.
    Stream, sys::cuabi_stream, sys::cuabi_stream_retain, sys::cuabi_stream_release
);

// SAFETY: stream.h: "All stream functions may be called from any thread; a
// stream may be used from several threads at once."
unsafe impl Send for Stream {}
// SAFETY: as for Send.
unsafe impl Sync for Stream {}

/// Stream creation flags (`cuabi_stream_flags`).
pub type StreamFlags = sys::cuabi_stream_flags;

impl Stream {
    /// A new stream with default flags and priority.
    pub fn new(device: &Device) -> Result<Stream> {
        Stream::with_options(device, sys::CUABI_STREAM_DEFAULT, 0)
    }

    /// A new stream with these flags and priority (lower is higher).
    pub fn with_options(device: &Device, flags: StreamFlags, priority: i32) -> Result<Stream> {
        let mut o = sys::cuabi_stream_options::default();
        // SAFETY: `o` is a local the init function fills.
        check(unsafe { sys::cuabi_stream_options_init(&mut o, sys::CUABI_STREAM_OPTIONS_VERSION) })?;
        o.flags = flags.0 as u32;
        o.priority = priority;
        // SAFETY: `device` is live; `o` is read during the call.
        Stream::create(|out| unsafe { sys::cuabi_stream_create(out, device.as_raw(), &o) })
    }

    /// Wrap a CUstream created elsewhere; cuabi never destroys it.
    ///
    /// # Safety
    /// `raw` must be a CUstream of `device` (or 0/1/2) that outlives the handle.
    pub unsafe fn wrap(device: &Device, raw: usize) -> Result<Stream> {
        // SAFETY: the caller's contract.
        Stream::create(|out| unsafe { sys::cuabi_stream_wrap(out, device.as_raw(), raw) })
    }

    /// The device's legacy default stream.
    pub fn legacy_default(device: &Device) -> Result<Stream> {
        // SAFETY: `device` is live for the call.
        Stream::create(|out| unsafe { sys::cuabi_stream_legacy_default(out, device.as_raw()) })
    }

    /// The per-thread default stream.
    pub fn per_thread_default(device: &Device) -> Result<Stream> {
        // SAFETY: `device` is live for the call.
        Stream::create(|out| unsafe { sys::cuabi_stream_per_thread_default(out, device.as_raw()) })
    }

    /// Block until all work queued on the stream is done.
    /// Then host functions that have run are dropped, on this thread
    /// ([`drop_finished_host_funcs`](crate::drop_finished_host_funcs)).
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the stream is live (stream.h: usable from several threads at once).
        let st = unsafe { sys::cuabi_stream_synchronize(self.as_raw()) };
        let r = check(st); // before a drop's own calls overwrite the error record
        crate::host::drop_finished_host_funcs();
        r
    }

    /// Future work on `self` waits for the work queued on `other` so far
    /// (through `other`'s GPU's one ordering event: no event per call).
    pub fn join(&self, other: &Stream) -> Result<()> {
        // SAFETY: both handles are live for the borrows; the call keeps
        // neither (stream.h: cuabi_stream_wait_stream).
        check(unsafe { sys::cuabi_stream_wait_stream(self.as_raw(), other.as_raw()) })
    }

    /// True when all work on the stream has finished.
    pub fn query(&self) -> Result<bool> {
        let mut v = 0;
        // SAFETY: the stream is live; `v` a local.
        check(unsafe { sys::cuabi_stream_query(&mut v, self.as_raw()) })?;
        Ok(v != 0)
    }

    /// The CUstream behind the handle.
    pub fn raw(&self) -> usize {
        let mut v = 0usize;
        // SAFETY: the stream is live; `v` a local.
        infallible(unsafe { sys::cuabi_stream_raw(&mut v, self.as_raw()) }, "cuabi_stream_raw");
        v
    }

    /// The stream's device (a new reference).
    pub fn device(&self) -> Result<Device> {
        let mut d = core::ptr::null_mut();
        // SAFETY: the stream is live; `d` a local (a borrowed device).
        check(unsafe { sys::cuabi_stream_device(&mut d, self.as_raw()) })?;
        // SAFETY: `d` is the live device the stream keeps; retain takes our own reference.
        check(unsafe { sys::cuabi_device_retain(d) })?;
        // SAFETY: the reference just taken is ours.
        unsafe { Device::from_raw(d) }.ok_or_else(|| crate::Error::internal("cuabi_stream_device returned NULL"))
    }

    /// The stream's priority (lower is higher).
    pub fn priority(&self) -> Result<i32> {
        let mut v = 0;
        // SAFETY: the stream is live; `v` a local.
        check(unsafe { sys::cuabi_stream_priority(&mut v, self.as_raw()) })?;
        Ok(v)
    }
}
