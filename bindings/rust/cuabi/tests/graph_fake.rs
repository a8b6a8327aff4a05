//! The graph layer against the C tests' fake driver (tests/fixtures/fake_cuda_graph.c,
//! CUABI_TEST_FAKE_CUDA, set by tests/bindings/check_rust.sh): no GPU needed. Kernel
//! nodes named add_i64 run on the host there: add_i64(out, in, n) adds
//! in[0..n) to out[0]; count_loop(handle, counter, limit) counts and sets
//! the handle while counter < limit. Each test prints SKIP and returns
//! without the fake.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};

use cuabi::{sys, ArgPack, Device, Graph, GraphNode, LaunchConfig, MemoryResource, Program, ProgramOptions, Stream};

const SRC: &str = r#"
extern "C" __global__ void add_i64(long long *o, const long long *i, unsigned long long n) {}
extern "C" __global__ void count_loop(unsigned long long h, long long *c, unsigned long long n) {}
"#;

static INIT: Once = Once::new();

/// One test at a time: a capture in global mode makes another thread's
/// synchronising call fail (the driver's rule, which the fake keeps), so the
/// tests of this file must not overlap (they did once a fifth test came).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The fake driver's first device, or None (skip) when it was not built.
fn fake() -> Option<Device> {
    let Ok(path) = std::env::var("CUABI_TEST_FAKE_CUDA") else {
        eprintln!("SKIP: CUABI_TEST_FAKE_CUDA not set (tests/bindings/check_rust.sh sets it)");
        return None;
    };
    // SAFETY: every test calls this before any other cuabi call, and the
    // variable is set once, before the library first loads the driver.
    INIT.call_once(|| unsafe { std::env::set_var("CUABI_DRIVER_PATH", path) });
    Some(Device::get(0).expect("fake device 0"))
}

fn kernel(name: &str) -> cuabi::Kernel {
    let mut p = Program::new(SRC, Some("fake.cu")).unwrap();
    p.compile(&ProgramOptions::new().arch("sm_90")).unwrap().kernel(name).unwrap()
}

fn ints(res: &MemoryResource, values: &[i64]) -> cuabi::Buffer {
    let mut b = res.allocate(8 * values.len(), 0, None).unwrap();
    b.copy_from_host(0, values).unwrap();
    b
}

#[test]
fn capture_keeps_what_it_runs_and_replays() {
    let _serial = serial();
    let Some(dev) = fake() else { return };
    let res = MemoryResource::device_default(&dev).unwrap();
    let s = Stream::new(&dev).unwrap();
    let out = ints(&res, &[0]);
    let graph = {
        // Kernel, input and pack go out of scope: the graph keeps them.
        let k = kernel("add_i64");
        let input = ints(&res, &[1, 2, 3, 4]);
        let pack = ArgPack::builder().arg(out.arg()).arg(input.arg()).arg(4u64).build().unwrap();
        let cfg = LaunchConfig::new(1, 32).on_stream(&s);
        // SAFETY: the kernels touch only the buffers their packs name, which outlive every run (the graph keeps them; the test synchronizes before they go).
        unsafe {
            s.capture(sys::CUABI_CAPTURE_MODE_GLOBAL, |s| {
                assert_eq!(s.capture_status()?, sys::CUABI_CAPTURE_STATUS_ACTIVE);
                cuabi::launch(&k, &pack, &cfg)?;
                cuabi::launch(&k, &pack, &cfg)
            })
        }
        .unwrap()
    };
    assert_eq!(graph.node_count(), 2);
    assert_eq!(graph.node(1).unwrap().kind(), sys::CUABI_GRAPH_NODE_KERNEL);
    let exe = graph.instantiate().unwrap();
    drop(graph);
    exe.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(out.to_vec::<i64>().unwrap(), vec![20]);
}

#[test]
fn capture_error_ends_the_capture() {
    let _serial = serial();
    let Some(dev) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    // SAFETY: nothing is captured (the synchronize is refused).
    let r = unsafe { s.capture(sys::CUABI_CAPTURE_MODE_GLOBAL, |s| s.synchronize()) };
    let e = r.unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_STREAM_CAPTURE);
    assert!(e.message.contains("cuabi_stream_synchronize"), "{}", e.message);
    assert_eq!(s.capture_status().unwrap(), sys::CUABI_CAPTURE_STATUS_NONE);
    let legacy = Stream::legacy_default(&dev).unwrap();
    // SAFETY: refused: nothing is captured.
    let e = unsafe { legacy.begin_capture(sys::CUABI_CAPTURE_MODE_GLOBAL) }.unwrap_err();
    assert!(e.message.contains("legacy default stream"));
}

#[test]
fn explicit_nodes_edges_host_closures_and_updates() {
    let _serial = serial();
    let Some(dev) = fake() else { return };
    let res = MemoryResource::device_default(&dev).unwrap();
    let s = Stream::new(&dev).unwrap();
    let k = kernel("add_i64");
    let out = ints(&res, &[0]);
    let input = ints(&res, &[0, 0]);
    let host_in = [5i64, 6];
    let mut host_out = [0i64];
    let calls = Arc::new(AtomicUsize::new(0));
    let cfg = LaunchConfig::new(1, 32).on_device(&dev);
    let pack = ArgPack::builder().arg(out.arg()).arg(input.arg()).arg(2u64).build().unwrap();
    {
        let g = Graph::new().unwrap();
        let up = g.add_memcpy_from_host(&[], &input, 0, &host_in).unwrap();
        let zero = g.add_memset(&[], &out, 0, 0, 4, 2).unwrap();
        // SAFETY: the kernels touch only the buffers their packs name, which outlive every run (the graph keeps them; the test synchronizes before they go).
        let kn = unsafe { g.add_kernel(&[&up, &zero], &k, &pack, &cfg) }.unwrap();
        let down = g.add_memcpy_to_host(&[&kn], &mut host_out, &out, 0).unwrap();
        let c = calls.clone();
        let h = g.add_host(&[&down], move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        assert_eq!(g.node_count(), 5);
        assert_eq!(kn.dependencies().unwrap().len(), 2);
        assert_eq!(down.dependents().unwrap(), vec![h.clone()]);
        let e = g.add_dependencies(&[(&h, &up)]).unwrap_err();
        assert!(e.message.contains("cycle"), "{}", e.message);
        let mut exe = g.instantiate().unwrap();
        exe.launch(&s).unwrap();
        s.synchronize().unwrap();
        // New arguments for the kernel node, no re-instantiation: n = 1.
        let one = ArgPack::builder().arg(out.arg()).arg(input.arg()).arg(1u64).build().unwrap();
        // SAFETY: the kernels touch only the buffers their packs name, which outlive every run (the graph keeps them; the test synchronizes before they go).
        unsafe { exe.update_kernel(&kn, &one, None) }.unwrap();
        exe.launch(&s).unwrap();
        s.synchronize().unwrap();
        // Another topology: refused, naming the node.
        let g2 = Graph::new().unwrap();
        g2.add_empty(&[]).unwrap();
        let (err, info) = exe.update(&g2).unwrap_err();
        assert_eq!(err.status, sys::CUABI_ERROR_GRAPH_UPDATE);
        assert_ne!(info.result, sys::CUABI_GRAPH_UPDATE_SUCCESS.0);
        assert!(g.to_dot(true).unwrap().starts_with("digraph"));
    }
    assert_eq!(host_out, [5]);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn conditional_while_loop() {
    let _serial = serial();
    let Some(dev) = fake() else { return };
    let res = MemoryResource::device_default(&dev).unwrap();
    let s = Stream::new(&dev).unwrap();
    let counter = ints(&res, &[0]);
    let g = Graph::new().unwrap();
    let h = g.conditional_handle(&dev, Some(1)).unwrap();
    let reset: GraphNode = g.add_memset(&[], &counter, 0, 0, 4, 2).unwrap();
    let (_node, body) = g.add_while(&[&reset], h).unwrap();
    let pack = ArgPack::builder().arg(h).arg(counter.arg()).arg(6u64).build().unwrap();
    // SAFETY: the kernels touch only the buffers their packs name, which outlive every run (the graph keeps them; the test synchronizes before they go).
    unsafe { body.add_kernel(&[], &kernel("count_loop"), &pack, &LaunchConfig::new(1, 32).on_device(&dev)) }
        .unwrap();
    drop(body);
    let exe = g.instantiate().unwrap();
    exe.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(counter.to_vec::<i64>().unwrap(), vec![6]);
}

#[test]
fn memory_nodes_allocate_and_free() {
    let _serial = serial();
    let Some(dev) = fake() else { return };
    let dev1 = Device::get(1).unwrap();
    let s = Stream::new(&dev).unwrap();
    let g = Graph::new().unwrap();
    let a = g.add_mem_alloc(&[], &dev, cuabi::MemoryKind::Device, 64, &[&dev1]).unwrap();
    let (ptr, size) = a.mem_info().unwrap();
    assert!(ptr != 0);
    assert_eq!(size, 64);
    // SAFETY: nothing uses the memory after the free (it is the last node).
    let f = unsafe { g.add_mem_free(&[&a], ptr) }.unwrap();
    assert_eq!(f.mem_info().unwrap(), (ptr, 0));
    // A second free of it, plain host memory, and another node's info are refused.
    // SAFETY: refused before anything runs.
    assert!(unsafe { g.add_mem_free(&[], ptr) }.is_err());
    assert!(g.add_mem_alloc(&[], &dev, cuabi::MemoryKind::Host, 64, &[]).is_err());
    let e = g.add_empty(&[&f]).unwrap();
    assert!(e.mem_info().is_err());
    let exe = g.instantiate().unwrap();
    exe.launch(&s).unwrap();
    s.synchronize().unwrap();
}
