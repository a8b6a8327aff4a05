//! Host functions in stream order: [`Stream::launch_host_func`] and
//! [`Stream::launch_host_func_repeated`] over `cuabi_stream_launch_host_func`
//! (graph.h, cuLaunchHostFunc), and what they share with graph host nodes
//! ([`Graph::add_host`](crate::Graph::add_host)): the panic record and the
//! deferred drops.
//!
//! # The contract (graph.h)
//!
//! * *Where it runs*: "it runs on a driver thread once the work queued before
//!   it has finished, and later work waits for it" -- so the closure is
//!   `Send + 'static` (it leaves the calling thread and outlives the call).
//! * *What it may do*: "fn must not call CUDA (or cuabi functions that do)".
//!   Nothing in Rust's type system can forbid that; a closure that does gets
//!   errors or a hang, not undefined behaviour.
//! * *How often*: once on an ordinary stream; on a stream captured by cuabi
//!   it "becomes a host node of the graph and may run at every launch of
//!   every executable made from it (launches of different executables may
//!   run it at the same time, on different driver threads)". So the closure
//!   is `FnMut` called under a lock (never twice at once).
//! * *When it goes*: "release(payload) ... runs exactly once, when no
//!   execution can call fn any more: on an ordinary stream right after fn,
//!   on the driver's thread (it must not call CUDA either: a binding whose
//!   release may run finalizers hands it to a thread of its own)". Dropping
//!   a closure drops what it captured, and a captured [`Buffer`](crate::Buffer)
//!   or [`DeviceSlice`](crate::DeviceSlice) calls CUDA when it goes. So a
//!   release on the driver's thread only hands the closure over; it is
//!   dropped by the next [`Stream::launch_host_func`],
//!   [`Stream::launch_host_func_repeated`] or [`Stream::synchronize`] on any
//!   thread of the program, or by [`drop_finished_host_funcs`]. A captured
//!   one's release runs "on the thread that releases the last of the graph,
//!   its executables and the graphs that hold it as a child ... or that ends
//!   the capture when it failed": a thread of the program, where the closure
//!   is dropped at once. That is also why the one-shot form is `FnMut`, not
//!   `FnOnce`: calling an `FnOnce` consumes it, dropping its captures at the
//!   end of the call -- on the driver's thread.
//! * *Panics*: a panic must not unwind into the driver. Each call runs under
//!   `catch_unwind`; a panic is recorded (see [`take_host_panics`]) and the
//!   driver goes on. Panics while dropping a closure are recorded the same way.
use std::any::Any;
use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::enums::CaptureStatus;
use crate::error::{Error, Result};
use crate::stream::Stream;
use crate::sys;

// ------------------------------------------------------------ panics

/// A panic caught in a host function (or in dropping one): it did not
/// unwind into the driver; this is its report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPanic {
    /// What queued the function: "Stream::launch_host_func",
    /// "Stream::launch_host_func_repeated", "Graph::add_host"; with
    /// " (drop)" when the panic came from dropping the closure.
    pub source: &'static str,
    /// The panic's message (`panic!`'s text), or a placeholder for a
    /// payload that is not a string.
    pub message: String,
}

/// Most panic reports kept until [`take_host_panics`]; later ones are counted.
const KEEP_PANICS: usize = 64;

struct PanicLog {
    kept: Vec<HostPanic>,
    lost: usize,
}

static PANICS: Mutex<PanicLog> = Mutex::new(PanicLog { kept: Vec::new(), lost: 0 });

fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic payload that is not a string)".to_string()
    }
}

/// Record a report (never panics out: called on driver threads).
fn record(source: &'static str, message: String) {
    let mut log = PANICS.lock().unwrap_or_else(PoisonError::into_inner);
    if log.kept.len() < KEEP_PANICS {
        log.kept.push(HostPanic { source, message });
    } else {
        log.lost += 1;
    }
}

/// Record a caught panic; its payload is dropped here, and a panic in that
/// drop is swallowed (forgotten) rather than let out.
pub(crate) fn record_panic(source: &'static str, payload: Box<dyn Any + Send>) {
    let message = panic_message(&*payload);
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
    record(source, message);
}

/// The panics caught in host functions (and in dropping them) since the
/// last call, oldest first; the record is emptied. At most 64 are kept
/// between calls: when more happened, a last entry with source
/// `"take_host_panics"` says how many were not kept.
pub fn take_host_panics() -> Vec<HostPanic> {
    let mut log = PANICS.lock().unwrap_or_else(PoisonError::into_inner);
    let mut v = std::mem::take(&mut log.kept);
    if log.lost > 0 {
        v.push(HostPanic { source: "take_host_panics", message: format!("{} more panics were not kept", log.lost) });
        log.lost = 0;
    }
    v
}

// ------------------------------------------------------- deferred drops

/// Closures released on a driver thread, waiting to be dropped on one of
/// the program's threads.
static RELEASED: Mutex<Vec<Box<dyn Send>>> = Mutex::new(Vec::new());
/// How many closures were released on a driver thread and not yet dropped
/// (a cheap test for the common case: none).
static OUTSTANDING: AtomicUsize = AtomicUsize::new(0);
/// Held while dropping: a thread that finds the queue empty after taking it
/// knows the closures another thread took are dropped too.
static REAPING: Mutex<()> = Mutex::new(());

thread_local! {
    /// The payload whose function last ran on this thread (0: none): a
    /// release that follows its own run on the same thread is the driver's
    /// "right after fn, on the driver's thread".
    static JUST_RAN: Cell<usize> = const { Cell::new(0) };
    /// No released closures are dropped on this thread now: it is dropping
    /// them already (one of them may queue or synchronize again: it must not
    /// wait for itself), or it is running a host function (a driver thread:
    /// one that calls cuabi despite graph.h must not drop closures there).
    static NO_DROPS_HERE: Cell<bool> = const { Cell::new(false) };
}

/// Drop the closures of host functions that have run and were released on
/// the driver's thread (where dropping them could call CUDA). The crate
/// does this at the start of [`Stream::launch_host_func`] and
/// [`Stream::launch_host_func_repeated`] and at the end of
/// [`Stream::synchronize`] (so a synchronize drops the closures of the host
/// functions it waited for); call it to drop them at another time. When it
/// returns, every closure released before the call is dropped (unless this
/// thread is inside such a drop, or running a host function: then it does
/// nothing).
/// A panic in a drop is recorded ([`take_host_panics`]), not propagated.
pub fn drop_finished_host_funcs() {
    if OUTSTANDING.load(Ordering::Acquire) == 0 || NO_DROPS_HERE.with(Cell::get) {
        return;
    }
    let _g = REAPING.lock().unwrap_or_else(PoisonError::into_inner);
    NO_DROPS_HERE.with(|r| r.set(true));
    loop {
        let batch = std::mem::take(&mut *RELEASED.lock().unwrap_or_else(PoisonError::into_inner));
        if batch.is_empty() {
            break;
        }
        let n = batch.len();
        for item in batch {
            drop_caught(item, "host function (drop)");
        }
        OUTSTANDING.fetch_sub(n, Ordering::AcqRel);
    }
    NO_DROPS_HERE.with(|r| r.set(false));
}

fn drop_caught(item: Box<dyn Send>, source: &'static str) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(item))) {
        record_panic(source, p);
    }
}

/// Run a host function's body: caught (a panic is recorded under `source`,
/// never unwound into the driver), and with no closure drops on this thread
/// meanwhile. Returns whether it finished without a panic.
pub(crate) fn run_guarded(source: &'static str, f: impl FnOnce()) -> bool {
    let before = NO_DROPS_HERE.try_with(|c| c.replace(true)).unwrap_or(true);
    let r = catch_unwind(AssertUnwindSafe(f));
    let _ = NO_DROPS_HERE.try_with(|c| c.set(before));
    match r {
        Ok(()) => true,
        Err(p) => {
            // Reporting must not unwind into the driver either.
            let _ = catch_unwind(AssertUnwindSafe(|| record_panic(source, p)));
            false
        }
    }
}

/// A graph launch returned on this thread: a host node the fake driver ran
/// here during it is not "the function that just ran" for a later release.
pub(crate) fn forget_last_run() {
    JUST_RAN.with(|c| c.set(0));
}

// ------------------------------------------------------------ payloads

struct Slot<F> {
    f: F,
    runs: u64,
}

/// What the C side holds as the payload (a leaked `Box`).
struct HostCall<F> {
    source: &'static str,
    /// At most one run (launch_host_func): later runs are skipped and reported.
    once: bool,
    slot: Mutex<Slot<F>>,
}

/// `cuabi_graph_host_fn` for a `HostCall<F>`.
unsafe extern "C" fn run_host_call<F: FnMut() + Send + 'static>(payload: *mut c_void) {
    let _ = JUST_RAN.try_with(|c| c.set(payload as usize));
    // SAFETY: `payload` is the `HostCall<F>` queue_host leaked; graph.h:
    // "release(payload) ... runs exactly once, when no execution can call fn
    // any more", and only release frees it, so it is alive during this call.
    // Shared access only (`&`): graph.h: "launches of different executables
    // may run it at the same time, on different driver threads"; the closure
    // itself is reached through the mutex.
    let call = unsafe { &*payload.cast::<HostCall<F>>() };
    let mut again = false;
    run_guarded(call.source, || {
        let mut slot = call.slot.lock().unwrap_or_else(PoisonError::into_inner);
        slot.runs += 1;
        if call.once && slot.runs > 1 {
            again = true;
            return;
        }
        (slot.f)();
    });
    if again {
        let _ = catch_unwind(AssertUnwindSafe(|| record(call.source, "queued to run once, it ran again and was skipped: its \
            stream was being captured, so it became a graph node (use launch_host_func_repeated)".to_string())));
    }
}

/// `cuabi_graph_host_release_fn` for a `HostCall<F>`.
unsafe extern "C" fn release_host_call<F: FnMut() + Send + 'static>(payload: *mut c_void) {
    // SAFETY: graph.h: release "runs exactly once, when no execution can
    // call fn any more": the box queue_host leaked is ours again.
    let call: Box<HostCall<F>> = unsafe { Box::from_raw(payload.cast::<HostCall<F>>()) };
    // graph.h: "on an ordinary stream right after fn, on the driver's thread";
    // otherwise on the thread releasing the graph (or ending the capture) --
    // unless that thread is itself in a host function (one that dropped a
    // graph), or dropping closures (then the reaper's next round takes it).
    let on_driver = JUST_RAN.try_with(|c| c.replace(0) == payload as usize).unwrap_or(true)
        || NO_DROPS_HERE.try_with(Cell::get).unwrap_or(true);
    let _ = catch_unwind(AssertUnwindSafe(move || {
        if on_driver {
            // Counted before it is visible, so that a reaper never subtracts
            // more than was added.
            OUTSTANDING.fetch_add(1, Ordering::AcqRel);
            RELEASED.lock().unwrap_or_else(PoisonError::into_inner).push(call);
        } else {
            let source = if call.once { "Stream::launch_host_func (drop)" } else { "Stream::launch_host_func_repeated (drop)" };
            drop_caught(call, source);
        }
    }));
}

impl Stream {
    /// Run `f` on a driver thread once the work queued on this stream
    /// before it has finished; later work on the stream waits for it
    /// (cuLaunchHostFunc; the Python binding's `host_launch`).
    ///
    /// `f` runs once and must not call CUDA or cuabi functions that do
    /// (graph.h); it is dropped later on one of the program's threads, never
    /// on the driver's (see the [module docs](crate::host)). A panic in it is
    /// caught and recorded ([`take_host_panics`]). A stream being captured
    /// is refused (`Status::StreamCapture`): in a graph the function would
    /// run at every launch; use [`Stream::launch_host_func_repeated`] there.
    ///
    /// The closure must be `Send` and `'static` (it runs on another thread,
    /// after this call):
    ///
    /// ```compile_fail,E0277
    /// fn f(s: &cuabi::Stream) {
    ///     let rc = std::rc::Rc::new(1);
    ///     s.launch_host_func(move || { let _ = &rc; }); // error: `Rc<i32>` cannot be sent between threads
    /// }
    /// ```
    ///
    /// ```compile_fail,E0597
    /// fn f(s: &cuabi::Stream) {
    ///     let local = vec![1, 2, 3];
    ///     let r = &local;
    ///     s.launch_host_func(move || { let _ = r.len(); }); // error: `local` does not live long enough
    /// }
    /// ```
    ///
    /// and `FnMut`: a closure that gives away what it captured (only
    /// `FnOnce`) would drop it on the driver's thread; move it out of an
    /// `Option` instead (`v.take()`):
    ///
    /// ```compile_fail,E0525
    /// fn f(s: &cuabi::Stream, tx: std::sync::mpsc::Sender<Vec<u8>>) {
    ///     let v = vec![0u8; 4];
    ///     s.launch_host_func(move || { let _ = tx.send(v); }); // error: closure is `FnOnce`
    /// }
    /// ```
    pub fn launch_host_func<F: FnMut() + Send + 'static>(&self, f: F) -> Result<()> {
        drop_finished_host_funcs();
        if self.capture_status()? != CaptureStatus::None {
            return Err(Error::bare(sys::CUABI_ERROR_STREAM_CAPTURE,
                "Stream::launch_host_func: the stream is being captured, where the function would become a \
                 graph node run at every launch of the graph; use launch_host_func_repeated for that".into()));
        }
        self.queue_host(f, true, "Stream::launch_host_func")
    }

    /// As [`Stream::launch_host_func`], also on a stream captured by cuabi
    /// ([`Stream::begin_capture`]): there `f` becomes a host node of the
    /// graph, run at every launch of every executable made from it (never
    /// two runs at once: they take turns on a lock), and the graph keeps it
    /// until the graph, its executables and the graphs holding it as a child
    /// are all released -- then it is dropped on the releasing thread.
    /// A stream captured by another library is refused (graph.h:
    /// `Status::StreamCapture`). On an ordinary stream it runs once.
    pub fn launch_host_func_repeated<F: FnMut() + Send + 'static>(&self, f: F) -> Result<()> {
        drop_finished_host_funcs();
        self.queue_host(f, false, "Stream::launch_host_func_repeated")
    }

    fn queue_host<F: FnMut() + Send + 'static>(&self, f: F, once: bool, source: &'static str) -> Result<()> {
        let payload = Box::into_raw(Box::new(HostCall { source, once, slot: Mutex::new(Slot { f, runs: 0 }) }));
        // SAFETY: the stream is live; run_host_call and release_host_call
        // are the pair for this payload type: graph.h: fn runs "on a driver
        // thread" (the closure is Send + 'static and reached through a
        // mutex), and release "runs exactly once, when no execution can call
        // fn any more" (the payload lives until then).
        let st = unsafe {
            sys::cuabi_stream_launch_host_func(self.as_raw(), Some(run_host_call::<F>), payload.cast(),
                                               Some(release_host_call::<F>))
        };
        if st != sys::CUABI_SUCCESS {
            // The error first: dropping the closure may make cuabi calls.
            let e = Error::from_last(st);
            // SAFETY: graph.h: "On any error release is not called and the
            // payload stays the caller's."
            drop_caught(unsafe { Box::from_raw(payload) }, source);
            return Err(e);
        }
        Ok(())
    }
}
