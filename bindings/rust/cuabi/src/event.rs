//! Events, and what ties them to streams: Event::record and
//! Stream::wait_event both live here (stream.rs does not use events), so
//! the two modules do not use each other.
use crate::device::Device;
use crate::error::{check, Result};
use crate::stream::Stream;
use crate::sys;

shared_handle!(
    /// A CUDA event on one device.
    Event, sys::cuabi_event, sys::cuabi_event_retain, sys::cuabi_event_release
);

// SAFETY: cuabi handles are usable from any thread; the event functions map
// to cuEventRecord/Query/Synchronize, which the driver allows concurrently.
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

/// Event creation flags (`cuabi_event_flags`).
pub type EventFlags = sys::cuabi_event_flags;

impl Event {
    /// A new event with timing enabled.
    pub fn new(device: &Device) -> Result<Event> {
        Event::with_flags(device, sys::CUABI_EVENT_DEFAULT)
    }

    pub fn with_flags(device: &Device, flags: EventFlags) -> Result<Event> {
        let mut o = sys::cuabi_event_options::default();
        check(unsafe { sys::cuabi_event_options_init(&mut o, sys::CUABI_EVENT_OPTIONS_VERSION) })?;
        o.flags = flags.0 as u32;
        Event::create(|out| unsafe { sys::cuabi_event_create(out, device.as_raw(), &o) })
    }

    pub fn record(&self, stream: &Stream) -> Result<()> {
        check(unsafe { sys::cuabi_event_record(self.as_raw(), stream.as_raw()) })
    }

    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { sys::cuabi_event_synchronize(self.as_raw()) })
    }

    /// True when the recorded work has finished.
    pub fn query(&self) -> Result<bool> {
        let mut v = 0;
        check(unsafe { sys::cuabi_event_query(&mut v, self.as_raw()) })?;
        Ok(v != 0)
    }

    /// Milliseconds from `self` to `end`.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        let mut v = 0f32;
        check(unsafe { sys::cuabi_event_elapsed_ms(&mut v, self.as_raw(), end.as_raw()) })?;
        Ok(v)
    }

    /// The CUevent behind the handle.
    pub fn raw(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_event_raw(&mut v, self.as_raw()) })?;
        Ok(v)
    }
}

impl Stream {
    /// Future work waits for the event's last record.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        check(unsafe { sys::cuabi_stream_wait_event(self.as_raw(), event.as_raw()) })
    }
}
