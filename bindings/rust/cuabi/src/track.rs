//! Stream-ordered lifetimes of the untyped objects ([`Buffer`](crate::Buffer),
//! [`View`](crate::View)): each keeps an event for every piece of work it
//! queued on a stream other than the one its memory is freed on, and waits
//! for them before it lets go of the memory.
//!
//! buffer.h: "The free is ordered on that one stream only: work queued on
//! other streams that still uses the memory is not waited for ..., and memory
//! of a resource that is not stream-ordered is freed when the last reference
//! goes, whatever is queued." So a copy queued on stream B into a buffer
//! allocated on stream A must be done before the buffer goes; these are the
//! events that say when. The typed [`DeviceSlice`](crate::DeviceSlice) does
//! the same without blocking (crate::slice).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::error::Result;
use crate::event::Event;
use crate::stream::Stream;
use crate::sys;

/// Events of queued work that uses an object's memory.
#[derive(Default)]
pub(crate) struct Pending {
    /// Whether `events` may hold anything (checked without the lock).
    any: AtomicBool,
    events: Mutex<Vec<Event>>,
}

impl Pending {
    /// Work that uses the memory was just queued on `stream`: unless that is
    /// `home`, the stream-ordered free's own stream, record an event after it.
    pub(crate) fn queued(&self, stream: &Stream, home: Option<&Stream>) -> Result<()> {
        if home.is_some_and(|h| h.as_raw() == stream.as_raw()) {
            return Ok(()); // the free comes after it on the same stream
        }
        let ev = Event::with_flags(&stream.device()?, sys::CUABI_EVENT_DISABLE_TIMING)
            .and_then(|e| e.record(stream).map(|()| e));
        let ev = match ev {
            Ok(e) => e,
            Err(err) => {
                // No event to be had: wait for the work now rather than let
                // the memory go under it.
                let _ = stream.synchronize();
                return Err(err);
            }
        };
        let mut v = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if v.len() >= 16 {
            v.retain(|e| !e.query().unwrap_or(false));
        }
        v.push(ev);
        self.any.store(true, Ordering::Release);
        Ok(())
    }

    /// Block until all recorded work is done; forget it.
    pub(crate) fn wait_host(&self) -> Result<()> {
        if !self.any.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut v = self.events.lock().unwrap_or_else(|p| p.into_inner());
        for e in v.iter() {
            e.synchronize()?;
        }
        v.clear();
        self.any.store(false, Ordering::Release);
        Ok(())
    }

    /// Make `stream` wait for all recorded work (no blocking); forget it.
    pub(crate) fn wait_on(&self, stream: &Stream) -> Result<()> {
        if !self.any.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut v = self.events.lock().unwrap_or_else(|p| p.into_inner());
        for e in v.iter() {
            stream.wait_event(e)?;
        }
        v.clear();
        self.any.store(false, Ordering::Release);
        Ok(())
    }

    /// How many events are kept (for tests).
    pub(crate) fn count(&self) -> usize {
        self.events.lock().map_or(0, |v| v.len())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // The memory may go once this is gone: wait for the work that uses it.
        // An error here (a broken context) leaves nothing better to do.
        let _ = self.wait_host();
    }
}
