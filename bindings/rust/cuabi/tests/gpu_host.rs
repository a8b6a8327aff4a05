//! Host functions in stream order on a real GPU (Stream::launch_host_func,
//! launch_host_func_repeated): they run on a driver thread in stream order,
//! are dropped once on a program thread (never the driver's, where a
//! captured slice's free would call CUDA), replay in graphs, and a panic is
//! recorded without taking the process down. Each test skips without a GPU.
//!
//! The panic record and the deferred drops are process-wide: the tests here
//! take turns (LOCK).
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::Duration;

use cuabi::{sys, Device, Event, Graph, Stream};

static LOCK: Mutex<()> = Mutex::new(());

fn gpu() -> Option<(Device, MutexGuard<'static, ()>)> {
    let dev = common::gpu()?;
    let turn = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    cuabi::drop_finished_host_funcs();
    let _ = cuabi::take_host_panics();
    Some((dev, turn))
}

/// Records the threads it was dropped on.
struct Guard(Arc<Mutex<Vec<ThreadId>>>);
impl Drop for Guard {
    fn drop(&mut self) {
        self.0.lock().unwrap().push(std::thread::current().id());
    }
}

#[test]
fn runs_on_a_driver_thread_in_stream_order_and_drops_on_ours() {
    let Some((dev, _turn)) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let first_done = Arc::new(AtomicBool::new(false));
    let second_saw = Arc::new(AtomicBool::new(false));
    let ran_on = Arc::new(Mutex::new(None));
    let dropped_on = Arc::new(Mutex::new(Vec::new()));
    let (f, r, g) = (first_done.clone(), ran_on.clone(), Guard(dropped_on.clone()));
    s.launch_host_func(move || {
        let _ = &g;
        *r.lock().unwrap() = Some(std::thread::current().id());
        std::thread::sleep(Duration::from_millis(100));
        f.store(true, Ordering::SeqCst);
    })
    .unwrap();
    let (f, saw) = (first_done.clone(), second_saw.clone());
    s.launch_host_func(move || saw.store(f.load(Ordering::SeqCst), Ordering::SeqCst)).unwrap();
    // Later work on the stream waits for both.
    let e = Event::new(&dev).unwrap();
    e.record(&s).unwrap();
    e.synchronize().unwrap();
    assert!(first_done.load(Ordering::SeqCst));
    assert!(second_saw.load(Ordering::SeqCst), "the second ran after the first returned");
    let me = std::thread::current().id();
    assert_ne!(ran_on.lock().unwrap().unwrap(), me, "ran on the driver's thread");
    s.synchronize().unwrap();
    assert_eq!(*dropped_on.lock().unwrap(), vec![me], "dropped once, on this thread");
    assert!(cuabi::take_host_panics().is_empty());
}

#[test]
fn a_captured_slice_is_freed_on_a_program_thread_without_a_hang() {
    let Some((dev, _turn)) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    for _ in 0..20 {
        // Its drop frees stream-ordered memory: a CUDA call, which a driver
        // thread must not make.
        let x = s.alloc_zeros::<f32>(1 << 16).unwrap();
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = n.clone();
        s.launch_host_func(move || {
            n2.fetch_add(x.len(), Ordering::SeqCst);
        })
        .unwrap();
        s.synchronize().unwrap();
        assert_eq!(n.load(Ordering::SeqCst), 1 << 16);
    }
    s.synchronize().unwrap();
    assert!(cuabi::take_host_panics().is_empty());
}

#[test]
fn a_panic_on_the_driver_thread_is_recorded_and_the_stream_goes_on() {
    let Some((dev, _turn)) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    s.launch_host_func(|| panic!("gpu host function failed on purpose")).unwrap();
    let after = Arc::new(AtomicBool::new(false));
    let a = after.clone();
    s.launch_host_func(move || a.store(true, Ordering::SeqCst)).unwrap();
    let mut x = s.alloc_zeros::<u32>(4).unwrap();
    s.memcpy_htod(&[1u32, 2, 3, 4], &mut x).unwrap();
    assert_eq!(s.clone_dtoh(&x).unwrap(), vec![1, 2, 3, 4]);
    s.synchronize().unwrap();
    assert!(after.load(Ordering::SeqCst));
    let p = cuabi::take_host_panics();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].message, "gpu host function failed on purpose");
}

#[test]
fn a_capture_replays_and_drops_once_at_the_last_release() {
    let Some((dev, _turn)) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let s2 = Stream::with_options(&dev, sys::CUABI_STREAM_NON_BLOCKING, 0).unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let overlap = Arc::new(AtomicBool::new(false));
    let dropped_on = Arc::new(Mutex::new(Vec::new()));
    let (r, i, o, g) = (runs.clone(), inside.clone(), overlap.clone(), Guard(dropped_on.clone()));
    let mut own = 0u64;
    // SAFETY: the captured work is the host function alone, which owns what it uses.
    let graph: Graph<'static> = unsafe {
        s.capture(sys::CUABI_CAPTURE_MODE_THREAD_LOCAL, |s| {
            s.launch_host_func_repeated(move || {
                let _ = &g;
                if i.fetch_add(1, Ordering::SeqCst) != 0 {
                    o.store(true, Ordering::SeqCst);
                }
                own += 1; // the FnMut's own state: one count over every run
                std::thread::sleep(Duration::from_millis(2));
                r.store(own as usize, Ordering::SeqCst);
                i.fetch_sub(1, Ordering::SeqCst);
            })
        })
    }
    .unwrap();
    assert_eq!(graph.node(0).unwrap().kind(), sys::CUABI_GRAPH_NODE_HOST);
    let (e1, e2) = (graph.instantiate().unwrap(), graph.instantiate().unwrap());
    const N: usize = 10;
    for _ in 0..N {
        e1.launch(&s).unwrap();
        e2.launch(&s2).unwrap(); // two executables at once: the calls take turns
    }
    s.synchronize().unwrap();
    s2.synchronize().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2 * N);
    assert!(!overlap.load(Ordering::SeqCst), "two runs of one FnMut at once");
    drop(graph);
    drop(e1);
    assert!(dropped_on.lock().unwrap().is_empty(), "the second executable holds it");
    drop(e2);
    assert_eq!(*dropped_on.lock().unwrap(), vec![std::thread::current().id()]);
    // The one-shot form refuses a capture.
    // SAFETY: nothing is captured (refused).
    let e = unsafe { s.capture(sys::CUABI_CAPTURE_MODE_THREAD_LOCAL, |s| s.launch_host_func(|| {})) }.unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_STREAM_CAPTURE);
    assert!(cuabi::take_host_panics().is_empty());
}

#[test]
fn many_threads_many_functions_each_dropped_once() {
    let Some((dev, _turn)) = gpu() else { return };
    let s = Arc::new(Stream::new(&dev).unwrap());
    let runs = Arc::new(AtomicUsize::new(0));
    let dropped_on = Arc::new(Mutex::new(Vec::new()));
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let (s, runs, d) = (s.clone(), runs.clone(), dropped_on.clone());
            std::thread::spawn(move || {
                for _ in 0..250 {
                    let (r, g) = (runs.clone(), Guard(d.clone()));
                    s.launch_host_func(move || {
                        let _ = &g;
                        r.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1000);
    assert_eq!(dropped_on.lock().unwrap().len(), 1000);
}
