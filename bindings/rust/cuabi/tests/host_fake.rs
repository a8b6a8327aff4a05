//! Host functions in stream order (Stream::launch_host_func and
//! launch_host_func_repeated) against the C tests' fake driver
//! (CUABI_TEST_FAKE_CUDA, set by tests/bindings/check_rust.sh): no GPU
//! needed. The fake runs a host function at once, on the calling thread,
//! and the library then releases it as on the driver's thread ("right after
//! fn"), so what the tests see is what a driver thread would cause. Each
//! test prints SKIP and returns without the fake.
//!
//! The panic record and the deferred drops are process-wide, so the tests
//! here take turns (LOCK): no other test reaps a closure between a launch
//! and the test's own look at its drop count.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};

use cuabi::{sys, Device, Graph, Stream};

static INIT: Once = Once::new();
static LOCK: Mutex<()> = Mutex::new(());

/// The fake driver's first device and this file's turn, or None (skip).
fn fake() -> Option<(Device, MutexGuard<'static, ()>)> {
    let Ok(path) = std::env::var("CUABI_TEST_FAKE_CUDA") else {
        eprintln!("SKIP: CUABI_TEST_FAKE_CUDA not set (tests/bindings/check_rust.sh sets it)");
        return None;
    };
    // SAFETY: every test calls this before any other cuabi call, and the
    // variable is set once, before the library first loads the driver.
    INIT.call_once(|| unsafe { std::env::set_var("CUABI_DRIVER_PATH", path) });
    let turn = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    cuabi::drop_finished_host_funcs();
    let _ = cuabi::take_host_panics();
    Some((Device::get(0).expect("fake device 0"), turn))
}

/// Counts its drops and where they happened.
struct Guard {
    drops: Arc<AtomicUsize>,
}
impl Drop for Guard {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn counters() -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
    (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)))
}

#[test]
fn runs_once_and_drops_once_on_a_program_thread() {
    let Some((dev, _turn)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let (runs, drops) = counters();
    let g = Guard { drops: drops.clone() };
    let r = runs.clone();
    s.launch_host_func(move || {
        let _ = &g;
        r.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    // Run (the fake runs it in the call) and released "right after fn, on
    // the driver's thread": not dropped there, but handed over.
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 0, "dropped on the driver's thread");
    s.synchronize().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped by the next synchronize");
    s.synchronize().unwrap();
    cuabi::drop_finished_host_funcs();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped exactly once");
    assert!(cuabi::take_host_panics().is_empty());
}

#[test]
fn the_next_launch_drops_the_last_one_and_drop_finished_does_too() {
    let Some((dev, _turn)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let (runs, drops) = counters();
    for _ in 0..3 {
        let g = Guard { drops: drops.clone() };
        let r = runs.clone();
        s.launch_host_func(move || {
            let _ = &g;
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    // Each launch dropped the ones before it; the last one waits.
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    cuabi::drop_finished_host_funcs();
    assert_eq!(drops.load(Ordering::SeqCst), 3);
}

#[test]
fn a_panic_is_recorded_not_propagated() {
    let Some((dev, _turn)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let (runs, drops) = counters();
    let g = Guard { drops: drops.clone() };
    s.launch_host_func(move || {
        let _ = &g;
        panic!("host function failed on purpose");
    })
    .unwrap();
    let r = runs.clone();
    // The stream goes on: later work runs.
    s.launch_host_func(move || {
        r.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the panicked closure is dropped once too");
    let p = cuabi::take_host_panics();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].source, "Stream::launch_host_func");
    assert_eq!(p[0].message, "host function failed on purpose");
    assert!(cuabi::take_host_panics().is_empty(), "taking empties the record");
}

#[test]
fn a_panicking_drop_is_recorded_too() {
    let Some((dev, _turn)) = fake() else { return };
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("drop failed on purpose");
        }
    }
    let s = Stream::new(&dev).unwrap();
    let b = Bomb;
    s.launch_host_func(move || {
        let _ = &b;
    })
    .unwrap();
    s.synchronize().unwrap(); // drops it here: no panic out of synchronize
    let p = cuabi::take_host_panics();
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].source.ends_with("(drop)"), "{p:?}");
    assert_eq!(p[0].message, "drop failed on purpose");
}

#[test]
fn a_capture_replayed_n_times_runs_n_times_and_drops_once_at_graph_release() {
    let Some((dev, _turn)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let (runs, drops) = counters();
    let g = Guard { drops: drops.clone() };
    let r = runs.clone();
    let mut state = 0u64; // FnMut: its own state across replays
    // SAFETY: the captured work is the host function alone, which owns all it uses.
    let graph: Graph<'static> = unsafe {
        s.capture(sys::CUABI_CAPTURE_MODE_GLOBAL, |s| {
            s.launch_host_func_repeated(move || {
                let _ = &g;
                state += 1;
                r.store(state as usize, Ordering::SeqCst);
            })
        })
    }
    .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 0, "captured, not run");
    assert_eq!(graph.node_count(), 1);
    assert_eq!(graph.node(0).unwrap().kind(), sys::CUABI_GRAPH_NODE_HOST);
    let exe = graph.instantiate().unwrap();
    let exe2 = graph.instantiate().unwrap();
    const N: usize = 5;
    for _ in 0..N {
        exe.launch(&s).unwrap();
    }
    exe2.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), N + 1, "one run per launch, of either executable");
    drop(graph);
    drop(exe);
    cuabi::drop_finished_host_funcs();
    assert_eq!(drops.load(Ordering::SeqCst), 0, "exe2 still holds it");
    drop(exe2);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once, at the last release, on its thread");
    cuabi::drop_finished_host_funcs();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(cuabi::take_host_panics().is_empty());
}

#[test]
fn the_one_shot_form_refuses_a_capture() {
    let Some((dev, _turn)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let (runs, drops) = counters();
    let g = Guard { drops: drops.clone() };
    let r = runs.clone();
    // SAFETY: nothing is captured (the one call is refused).
    let res = unsafe {
        s.capture(sys::CUABI_CAPTURE_MODE_GLOBAL, |s| {
            s.launch_host_func(move || {
                let _ = &g;
                r.fetch_add(1, Ordering::SeqCst);
            })
        })
    };
    let e = res.unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_STREAM_CAPTURE);
    assert!(e.message.contains("launch_host_func_repeated"), "{}", e.message);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the refused closure is dropped at once");
    assert_eq!(s.capture_status().unwrap(), sys::CUABI_CAPTURE_STATUS_NONE);
}

#[test]
fn a_refused_launch_drops_the_closure_once_and_never_runs_it() {
    let Some((dev, _turn)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let (runs, drops) = counters();
    // SAFETY: nothing runs: the capture is invalidated and fails.
    unsafe { s.begin_capture(sys::CUABI_CAPTURE_MODE_GLOBAL) }.unwrap();
    assert!(s.synchronize().is_err()); // refused, and it invalidates the capture
    let g = Guard { drops: drops.clone() };
    let r = runs.clone();
    let e = s
        .launch_host_func_repeated(move || {
            let _ = &g;
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap_err();
    assert_ne!(e.status, sys::CUABI_SUCCESS);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "C released nothing; Rust dropped it once");
    assert!(s.end_capture().is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn from_many_threads_each_runs_and_drops_once() {
    let Some((dev, _turn)) = fake() else { return };
    let s = Arc::new(Stream::new(&dev).unwrap());
    let (runs, drops) = counters();
    const T: usize = 4;
    const PER: usize = 50;
    let hs: Vec<_> = (0..T)
        .map(|_| {
            let (s, runs, drops) = (s.clone(), runs.clone(), drops.clone());
            std::thread::spawn(move || {
                for _ in 0..PER {
                    let g = Guard { drops: drops.clone() };
                    let r = runs.clone();
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
    assert_eq!(runs.load(Ordering::SeqCst), T * PER);
    assert_eq!(drops.load(Ordering::SeqCst), T * PER);
}

#[test]
fn a_graph_host_node_panic_is_recorded() {
    let Some((dev, _turn)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let g = Graph::new().unwrap();
    g.add_host(&[], || panic!("node failed on purpose")).unwrap();
    let exe = g.instantiate().unwrap();
    exe.launch(&s).unwrap();
    exe.launch(&s).unwrap();
    s.synchronize().unwrap();
    let p = cuabi::take_host_panics();
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p.iter().all(|p| p.source == "Graph::add_host" && p.message == "node failed on purpose"));
}

#[test]
fn nothing_is_dropped_on_a_thread_running_a_host_function() {
    let Some((dev, _turn)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let (runs, drops) = counters();
    let g = Guard { drops: drops.clone() };
    s.launch_host_func(move || {
        let _ = &g;
    })
    .unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    // A host node that (against graph.h) makes cuabi calls: run by the fake
    // on this thread, as a driver thread would run it, it drops nothing.
    let graph = Graph::new().unwrap();
    let r = runs.clone();
    graph
        .add_host(&[], move || {
            cuabi::drop_finished_host_funcs();
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let exe = graph.instantiate().unwrap();
    exe.launch(&s).unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 0, "dropped inside a host function");
    cuabi::drop_finished_host_funcs();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_graph_released_inside_a_host_function_drops_its_closure_later() {
    let Some((dev, _turn)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let (_runs, drops) = counters();
    let g = Guard { drops: drops.clone() };
    // SAFETY: the captured work is the host function alone.
    let inner: Graph<'static> = unsafe {
        s.capture(sys::CUABI_CAPTURE_MODE_GLOBAL, |s| s.launch_host_func_repeated(move || {
            let _ = &g;
        }))
    }
    .unwrap();
    // A host node that releases the last reference to `inner` (and so its
    // closure) while it runs: on a driver thread, that drop must wait.
    let slot = Arc::new(Mutex::new(Some(inner)));
    let outer = Graph::new().unwrap();
    let sl = slot.clone();
    outer.add_host(&[], move || drop(sl.lock().unwrap().take())).unwrap();
    let exe = outer.instantiate().unwrap();
    exe.launch(&s).unwrap();
    assert!(slot.lock().unwrap().is_none());
    assert_eq!(drops.load(Ordering::SeqCst), 0, "dropped inside a host function");
    s.synchronize().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}
