//! Issue 25's Rust wrappers on a GPU, with issue 28's rules shown where a
//! wrong order could be seen: a VMM shrink waits for a copy queued (behind a
//! spinning kernel) on another stream before the library unmaps; prefetch,
//! discard and batched copies record their work on the buffers; a batch with
//! host slices has landed when `copy_batch` returns. Each test prints SKIP and
//! returns without a driver or GPU.
mod common;
use std::time::{Duration, Instant};

use cuabi::{sys, CopyBatch, LaunchConfig, MemoryResource, Program, ProgramOptions, Stream, View};

const SRC: &str = r#"
__global__ void spin(long long cycles) { long long t0 = clock64(); while (clock64() - t0 < cycles) {} }
"#;

fn spin_kernel() -> (cuabi::ObjectCode, &'static str) {
    let mut p = Program::new(SRC, Some("gpu_memory_ext.cu")).unwrap();
    (p.compile(&ProgramOptions::new().name_expression("spin")).unwrap(), "spin")
}

/// Cycles for about `ms` milliseconds on this GPU (clock rate in kHz).
fn cycles(dev: &cuabi::Device, ms: i64) -> i64 {
    dev.attribute(cuabi::DeviceAttribute::ClockRate).unwrap() as i64 * ms
}

fn nonblocking(dev: &cuabi::Device) -> Stream {
    Stream::with_options(dev, sys::CUABI_STREAM_NON_BLOCKING, 0).unwrap()
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32).map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed) >> 13) as u8).collect()
}

#[test]
fn vmm_grows_and_a_shrink_waits_for_queued_work() {
    let Some(dev) = common::gpu() else { return };
    if !cuabi::vmm_supported(&dev).unwrap() {
        eprintln!("SKIP: no VMM on this device");
        return;
    }
    let mut o = cuabi::vmm_options().unwrap();
    let g = cuabi::vmm_granularity(&dev, Some(&o)).unwrap();
    o.reserve_size = (8 * g) as u64;
    let r = MemoryResource::vmm(&dev, Some(&o)).unwrap();
    let mut b = r.vmm_allocate(2 * g, 0).unwrap();
    let p = b.pointer();
    let first = pattern(2 * g, 1);
    b.copy_from_host(0, &first).unwrap();
    b.vmm_resize(4 * g, None).unwrap();
    assert_eq!((b.pointer(), b.size()), (p, 4 * g), "grown in place");
    let second = pattern(2 * g, 2);
    b.copy_from_host(2 * g, &second).unwrap();
    let all = b.to_vec::<u8>().unwrap();
    assert!(all[..2 * g] == first[..] && all[2 * g..] == second[..], "both chunks hold their data");

    // a view refuses the shrink (the Rust side says so before the library)
    {
        let _v = View::new(&b, 0, cuabi::DType::U8, &[16], None, 0).unwrap();
        assert!(b.vmm_resize(g, None).is_err());
        assert_eq!(b.size(), 4 * g);
    }

    // a copy out of the buffer queued behind a 300 ms kernel on another stream
    let (code, name) = spin_kernel();
    let spin = code.kernel(name).unwrap();
    let home = nonblocking(&dev);
    let other = nonblocking(&dev);
    let pool = MemoryResource::device_default(&dev).unwrap();
    let mut out = pool.allocate(2 * g, 0, Some(&home)).unwrap();
    home.synchronize().unwrap();
    other.launch_builder(&spin).arg(&cycles(&dev, 300)).launch(LaunchConfig::new(1, 1)).unwrap();
    out.copy_from(0, &b, 0, 2 * g, Some(&other)).unwrap();
    assert_eq!(b.pending_uses(), 1);
    // the shrink synchronises only `home` (idle): the wait is the Rust side's
    let t0 = Instant::now();
    b.vmm_resize(g, Some(&home)).unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(150), "the shrink did not wait ({:?})", t0.elapsed());
    assert_eq!((b.size(), b.pending_uses()), (g, 0));
    assert_eq!(out.to_vec::<u8>().unwrap(), first, "the queued copy read the memory before the unmap");
    let i = b.vmm_info().unwrap();
    assert!(i.mapped >= g as u64 && i.chunks >= 1, "{} mapped, {} chunks", i.mapped, i.chunks);
}

#[test]
fn managed_prefetch_and_discard() {
    let Some(dev) = common::gpu() else { return };
    if dev.attribute(cuabi::DeviceAttribute::Raw(89 /* CONCURRENT_MANAGED_ACCESS */)).unwrap_or(0) == 0 {
        eprintln!("SKIP: no concurrent managed access (prefetch needs it)");
        return;
    }
    let s = nonblocking(&dev);
    let m = MemoryResource::managed_with(&dev, &cuabi::managed_options().unwrap()).unwrap();
    let n = 4 << 20;
    let mut b = m.allocate(n, 0, None).unwrap();
    let data = pattern(n, 3);
    b.copy_from_host(0, &data).unwrap();
    b.managed_advise(0, n, sys::CUABI_MANAGED_SET_READ_MOSTLY, sys::CUABI_LOCATION_NONE, 0).unwrap();
    assert_eq!(b.managed_range(0, n).unwrap().read_mostly, 1);
    b.managed_prefetch(0, n, sys::CUABI_LOCATION_DEVICE, dev.ordinal() as i32, &s).unwrap();
    assert_eq!(b.pending_uses(), 1, "the prefetch is recorded");
    s.synchronize().unwrap();
    let r = b.managed_range(0, n).unwrap();
    assert_eq!(r.last_prefetch_location_type, sys::CUABI_LOCATION_DEVICE);
    assert_eq!(b.to_vec::<u8>().unwrap(), data, "a prefetch keeps the contents");
    {
        let _v = View::new(&b, 0, cuabi::DType::U8, &[16], None, 0).unwrap();
        assert!(b.managed_discard(0, n, &s).is_err(), "a discard is a write: refused under a view");
    }
    match b.managed_discard(0, n / 2, &s) {
        Ok(()) => {
            assert_eq!(b.pending_uses(), 1);
            b.copy_from_host(0, &data[..n / 2]).unwrap(); // usable after the discard
            assert_eq!(b.to_vec::<u8>().unwrap(), data);
        }
        Err(e) if e.status == sys::CUABI_ERROR_NOT_SUPPORTED => eprintln!("note: no discard ({e})"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn batched_copies_land_and_record() {
    let Some(dev) = common::gpu() else { return };
    let s = nonblocking(&dev);
    let pool = MemoryResource::device_default(&dev).unwrap();
    let n = 1 << 20;
    let mut a = pool.allocate(n, 0, None).unwrap();
    let mut c = pool.allocate(n, 0, None).unwrap();
    let mut seed = pool.allocate(n, 0, None).unwrap();
    let (ha, hc) = (pattern(n, 4), pattern(n, 5));
    seed.copy_from_host(0, &hc).unwrap();

    let mut batch = CopyBatch::new();
    batch.from_host(&mut a, 0, &ha).unwrap().copy(&mut c, 0, &seed, 0, n).unwrap();
    let r = cuabi::copy_batch(&s, batch).unwrap();
    eprintln!("path {:?}, {} driver call(s), reason {:?}", r.path, r.driver_calls, cuabi::copy_reason(&r));
    assert_eq!((r.copies, r.bytes), (2, 2 * n as u64));
    assert!(r.path == sys::CUABI_COPY_PATH_BATCHED || r.path == sys::CUABI_COPY_PATH_SINGLE);

    let mut back_a = vec![0u32; n / 4];
    let mut back_c = vec![0u8; n];
    let mut batch = CopyBatch::new();
    batch.to_host(&mut back_a, &a, 0).unwrap().to_host(&mut back_c, &c, 0).unwrap();
    cuabi::copy_batch(&s, batch).unwrap();
    assert!(s.query().unwrap(), "host slices took part: the stream was waited for");
    let back_a: Vec<u8> = back_a.iter().flat_map(|w| w.to_ne_bytes()).collect();
    assert_eq!(back_a, ha);
    assert_eq!(back_c, hc);

    // a buffer-only batch behind a 300 ms kernel: the destination's drop waits
    let (code, name) = spin_kernel();
    let spin = code.kernel(name).unwrap();
    s.launch_builder(&spin).arg(&cycles(&dev, 300)).launch(LaunchConfig::new(1, 1)).unwrap();
    let mut batch = CopyBatch::new();
    batch.copy(&mut a, 0, &c, 0, n).unwrap();
    cuabi::copy_batch(&s, batch).unwrap();
    // (earlier uses may still be listed: the lists are pruned lazily)
    assert!(a.pending_uses() >= 1 && c.pending_uses() >= 1,
            "the batch is recorded on both buffers ({:?})", (a.pending_uses(), c.pending_uses()));
    let t0 = Instant::now();
    assert_eq!(a.to_vec::<u8>().unwrap(), hc, "the read waited for the batch");
    assert!(t0.elapsed() >= Duration::from_millis(150), "the read did not wait ({:?})", t0.elapsed());
}
