//! NCCL collectives from Rust on a host of two GPUs (issue 23): one
//! process, init_all over GPUs 0 and 1, every collective in a group over
//! views and buffers, values checked; a split; a rank that never arrives.
//! Each test skips with fewer than two GPUs or without NCCL.
mod common;

use std::time::Duration;

use cuabi::nccl::{self, CommOptions, Communicator, NcclElement, UniqueId};
use cuabi::{sys, Buffer, DType, Device, MemoryResource, Stream, View};

/// One test at a time: cargo runs a binary's tests on threads, and two
/// cliques of communicators over the same GPUs launching at once can wait on
/// each other for ever (NCCL's rule: one order of collectives per device;
/// two H200s hung here after the first test).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn two() -> Option<[Device; 2]> {
    common::gpu()?;
    if cuabi::device_count().unwrap() < 2 {
        eprintln!("SKIP: needs two GPUs");
        return None;
    }
    if let Err(e) = nccl::version() {
        eprintln!("SKIP: no NCCL ({e})");
        return None;
    }
    Some([Device::get(0).unwrap(), Device::get(1).unwrap()])
}

fn up<T: NcclElement>(dev: &Device, s: &Stream, v: &[T]) -> Buffer {
    let mut b = MemoryResource::device_default(dev).unwrap().allocate(std::mem::size_of_val(v), 0, Some(s)).unwrap();
    s.synchronize().unwrap();
    b.copy_from_host(0, v).unwrap();
    b
}

fn down<T: NcclElement + Default>(s: &Stream, b: &Buffer, n: usize) -> Vec<T> {
    s.synchronize().unwrap();
    let mut v = vec![T::default(); n];
    b.copy_to_host(&mut v, 0).unwrap();
    v
}

fn fview(b: &Buffer, n: i64) -> View {
    View::new(b, 0, DType::of::<f32>(), &[n], None, 0).unwrap()
}

fn views(bs: &[Buffer], n: usize) -> Vec<View> {
    bs.iter().map(|b| fview(b, n as i64)).collect()
}

#[test]
fn init_all_every_collective() {
    let _serial = serial();
    let Some(devs) = two() else { return };
    let cs = Communicator::init_all(&devs, &CommOptions::with_timeout(Duration::from_secs(120))).unwrap();
    let ss = [Stream::new(&devs[0]).unwrap(), Stream::new(&devs[1]).unwrap()];
    for n in [1usize, 1000, (1 << 20) + 3] {
        let val = |r: usize| -> Vec<f32> { (0..n).map(|i| (i % 13 + 1 + r) as f32).collect() };
        // Each value vector made once: indexing val(r) per element made this
        // quadratic -- at n = 2^20 + 3 it ran for hours (the "hang" of the
        // last three sessions; 2 x H200, 2026-11-28).
        let (v0, v1) = (val(0), val(1));
        let sum: Vec<f32> = v0.iter().zip(&v1).map(|(a, b)| a + b).collect();
        let b: Vec<Buffer> = (0..2).map(|r| up(&devs[r], &ss[r], &val(r))).collect();
        let src: Vec<Buffer> = (0..2).map(|r| up(&devs[r], &ss[r], &val(r))).collect();
        let o: Vec<Buffer> = (0..2).map(|r| up(&devs[r], &ss[r], &vec![0f32; n])).collect();
        let g: Vec<Buffer> = (0..2).map(|r| up(&devs[r], &ss[r], &vec![0f32; 2 * n])).collect();
        let mut ints: Vec<Buffer> = (0..2).map(|r| up(&devs[r], &ss[r], &vec![r as i64 + 1; n])).collect();
        let (bv, sv) = (views(&b, n), views(&src, n));
        let gv = views(&g, 2 * n);
        let mut grp = nccl::Group::new();
        for (r, ints_r) in ints.iter_mut().enumerate() {
            grp.all_reduce_view(&cs[r], None, &bv[r], nccl::Op::CUABI_NCCL_SUM, Some(&ss[r])).unwrap()
               .all_gather_view(&cs[r], &sv[r], &gv[r], Some(&ss[r])).unwrap()
               .all_reduce(&cs[r], None, (ints_r, 0), n, i64::DATATYPE, nccl::Op::CUABI_NCCL_PROD, Some(&ss[r])).unwrap();
        }
        grp.launch().unwrap();
        drop((bv, gv));
        for r in 0..2 {
            assert_eq!(down::<f32>(&ss[r], &b[r], n), sum, "all_reduce n={n}");
            assert_eq!(down::<f32>(&ss[r], &g[r], 2 * n), [val(0), val(1)].concat(), "all_gather n={n}");
            assert!(down::<i64>(&ss[r], &ints[r], n).iter().all(|&x| x == 2), "prod n={n}");
        }
        let ov = views(&o, n);
        let mut grp = nccl::Group::new();
        for r in 0..2 {
            grp.broadcast_view(&cs[r], Some(&sv[r]), &ov[r], 1, Some(&ss[r])).unwrap();
        }
        grp.launch().unwrap();
        for r in 0..2 {
            assert_eq!(down::<f32>(&ss[r], &o[r], n), val(1), "broadcast n={n}");
        }
        let (gv, bv) = (views(&g, 2 * n), views(&b, n));
        let mut grp = nccl::Group::new();
        for r in 0..2 {
            grp.reduce_scatter_view(&cs[r], &gv[r], &ov[r], nccl::Op::CUABI_NCCL_MAX, Some(&ss[r])).unwrap()
               .send_view(&cs[r], &sv[r], 1 - r, Some(&ss[r])).unwrap()
               .recv_view(&cs[r], &bv[r], 1 - r, Some(&ss[r])).unwrap();
        }
        grp.launch().unwrap();
        drop((gv, bv, ov, sv));
        for r in 0..2 {
            assert_eq!(down::<f32>(&ss[r], &o[r], n), val(r), "reduce_scatter n={n}");
            assert_eq!(down::<f32>(&ss[r], &b[r], n), val(1 - r), "send/recv n={n}");
            cs[r].synchronize(Some(&ss[r]), None).unwrap();
            assert_eq!(cs[r].async_error().unwrap(), 0);
        }
    }
}

#[test]
fn a_rank_that_never_arrives_times_out() {
    let _serial = serial();
    let Some(devs) = two() else { return };
    let t0 = std::time::Instant::now();
    let e = Communicator::init_rank(&devs[0], 2, &UniqueId::new().unwrap(), 0,
                                    &CommOptions::with_timeout(Duration::from_secs(3)))
        .unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_TIMEOUT, "{}", e.message);
    assert!(t0.elapsed() < Duration::from_secs(60));
}

/// A collective on a stream other than the one a buffer was allocated on:
/// the buffer records the work and its drop waits for it (issue 28), so
/// dropping it right after the call frees nothing the GPUs still use.
#[test]
fn buffers_wait_for_collectives_on_other_streams() {
    let _serial = serial();
    let Some(devs) = two() else { return };
    let cs = Communicator::init_all(&devs, &CommOptions::with_timeout(Duration::from_secs(120))).unwrap();
    let ss = [Stream::new(&devs[0]).unwrap(), Stream::new(&devs[1]).unwrap()];
    let other = [Stream::new(&devs[0]).unwrap(), Stream::new(&devs[1]).unwrap()];
    let n = 1 << 24;
    for _ in 0..3 {
        let mut bs: Vec<Buffer> = (0..2).map(|r| up(&devs[r], &ss[r], &vec![r as f32 + 1.0; n])).collect();
        let mut grp = nccl::Group::new();
        for (r, b) in bs.iter_mut().enumerate() {
            grp.all_reduce(&cs[r], None, (b, 0), n, f32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, Some(&other[r])).unwrap();
        }
        grp.launch().unwrap();
        for b in &bs {
            assert_eq!(b.pending_uses(), 1);
        }
        drop(bs); // waits for the all-reduce on `other`
    }
    let mut b = up(&devs[0], &ss[0], &[0f32; 4]);
    let mut b1 = up(&devs[1], &ss[1], &[1f32; 4]);
    let mut grp = nccl::Group::new();
    grp.all_reduce(&cs[0], None, (&mut b, 0), 4, f32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, Some(&other[0])).unwrap()
       .all_reduce(&cs[1], None, (&mut b1, 0), 4, f32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, Some(&other[1])).unwrap();
    grp.launch().unwrap();
    // copy_to_host waits for the recorded work first
    let mut v = vec![0f32; 4];
    b.copy_to_host(&mut v, 0).unwrap();
    assert_eq!(v, vec![1.0; 4]);
    for r in 0..2 {
        cs[r].synchronize(Some(&other[r]), None).unwrap();
    }
}
