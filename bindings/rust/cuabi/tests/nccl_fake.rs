//! NCCL collectives from Rust against the C tests' fake driver and fake
//! NCCL (tests/fixtures/fake_nccl.c; CUABI_TEST_FAKE_CUDA and
//! CUABI_TEST_FAKE_NCCL, set by tests/bindings/check_rust.sh): no GPU
//! needed. The fake's ranks live in one process (threads, or init_all) and
//! its "device" memory is host memory, so values are checked after each
//! call. Each test prints SKIP and returns without the fakes.
use std::sync::{Arc, Barrier, Once};
use std::time::Duration;

use cuabi::nccl::{self, AbortHandle, CommOptions, Communicator, NcclElement, UniqueId};
use cuabi::{sys, Buffer, DType, Device, MemoryResource, Stream, View};

static INIT: Once = Once::new();

fn fakes() -> bool {
    let (Ok(cuda), Ok(nccl)) = (std::env::var("CUABI_TEST_FAKE_CUDA"), std::env::var("CUABI_TEST_FAKE_NCCL")) else {
        eprintln!("SKIP: CUABI_TEST_FAKE_CUDA / CUABI_TEST_FAKE_NCCL not set (tests/bindings/check_rust.sh sets them)");
        return false;
    };
    // SAFETY: every test calls this before any other cuabi call, and the
    // variables are set once, before the library loads the driver or NCCL.
    INIT.call_once(|| unsafe {
        std::env::set_var("CUABI_DRIVER_PATH", cuda);
        std::env::set_var("CUABI_NCCL_PATH", nccl);
    });
    true
}

fn buf<T: NcclElement>(dev: &Device, values: &[T]) -> Buffer {
    let b = MemoryResource::device_default(dev).unwrap().allocate(std::mem::size_of_val(values).max(1), 0, None).unwrap();
    b.copy_from_host(0, values).unwrap();
    b
}

fn get<T: NcclElement + Default>(b: &Buffer, n: usize) -> Vec<T> {
    let mut v = vec![T::default(); n];
    b.copy_to_host(&mut v, 0).unwrap();
    v
}

fn f32_view(b: &Buffer, n: i64) -> View {
    View::new(b, 0, DType::of::<f32>(), &[n], None, 0).unwrap()
}

/// `n` ranks in threads of this process, each running `f(rank, comm,
/// barrier)`. The fake runs a collective when its last rank posts it: a
/// rank waits at the barrier (every rank has posted) before it reads
/// results or drops what it posted.
fn ranks<R: Send + 'static>(n: usize, opts: CommOptions,
                            f: impl Fn(usize, Communicator, &Barrier) -> R + Send + Sync + 'static) -> Vec<R> {
    let id = UniqueId::new().unwrap();
    let f = Arc::new(f);
    let barrier = Arc::new(Barrier::new(n));
    let ts: Vec<_> = (0..n)
        .map(|r| {
            let (f, opts, barrier) = (f.clone(), opts.clone(), barrier.clone());
            std::thread::spawn(move || {
                let dev = Device::get(r % 2).unwrap();
                let c = Communicator::init_rank(&dev, n, &id, r, &opts).unwrap();
                f(r, c, &barrier)
            })
        })
        .collect();
    ts.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn version_and_ids() {
    if !fakes() { return; }
    assert_eq!(nccl::version().unwrap(), (2, 28, 9));
    let (a, b) = (UniqueId::new().unwrap(), UniqueId::new().unwrap());
    assert_ne!(a, b);
    assert_eq!(UniqueId::from_bytes(a.as_bytes()).unwrap(), a);
    let e = UniqueId::from_bytes(&[0u8; 12]).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT);
    assert!(e.message.contains("128 bytes"), "{}", e.message);
    assert!(format!("{a:?}").starts_with("UniqueId("));
}

#[test]
fn two_ranks_in_threads_every_collective() {
    if !fakes() { return; }
    let out = ranks(2, CommOptions::with_timeout(Duration::from_secs(30)), |r, c, barrier| {
        assert_eq!((c.rank().unwrap(), c.size().unwrap()), (r, 2));
        assert_eq!(c.device().unwrap().ordinal().unwrap(), r % 2);
        let dev = c.device().unwrap();
        let s = Stream::new(&dev).unwrap();
        let vals: Vec<f32> = (0..8).map(|i| (i + 10 * r) as f32).collect();
        // in place over a view: the sum of both ranks
        let b = buf(&dev, &vals);
        c.all_reduce_view(None, &f32_view(&b, 8), nccl::Op::CUABI_NCCL_SUM, Some(&s)).unwrap();
        // over buffers: max of i64 at a byte offset, out of place
        let src = buf(&dev, &[-1i64, 5 + r as i64, 7 * r as i64]);
        let dst = buf(&dev, &[0i64; 3]);
        c.all_reduce(Some((&src, 8)), (&dst, 8), 2, i64::DATATYPE, nccl::Op::CUABI_NCCL_MAX, Some(&s)).unwrap();
        // broadcast from rank 1, all-gather, reduce-scatter, send/recv around
        let bc = buf(&dev, &[r as u32 + 100; 4]);
        c.broadcast(None, (&bc, 0), 4, u32::DATATYPE, 1, Some(&s)).unwrap();
        let gathered = buf(&dev, &[0f32; 16]);
        let mine_f = buf(&dev, &vals);
        c.all_gather_view(&f32_view(&mine_f, 8), &f32_view(&gathered, 16), Some(&s)).unwrap();
        let halves = buf(&dev, &[0f32; 4]);
        c.reduce_scatter_view(&f32_view(&mine_f, 8), &f32_view(&halves, 4), nccl::Op::CUABI_NCCL_SUM, Some(&s))
            .unwrap();
        let got = buf(&dev, &[0f64; 5]);
        let mine = buf(&dev, &[r as f64; 5]);
        nccl::group(|| {
            c.send((&mine, 0), 5, f64::DATATYPE, 1 - r, Some(&s))?;
            c.recv((&got, 0), 5, f64::DATATYPE, 1 - r, Some(&s))
        })
        .unwrap();
        // reduce to rank 0 (recv on the root only)
        let red = buf(&dev, &[0i32; 2]);
        let one = buf(&dev, &[r as i32 + 1, 3]);
        c.reduce((&one, 0), if r == 0 { Some((&red, 0)) } else { None }, 2, i32::DATATYPE,
                 nccl::Op::CUABI_NCCL_PROD, 0, Some(&s))
            .unwrap();
        c.synchronize(Some(&s), None).unwrap();
        barrier.wait(); // every rank has posted: every collective has run
        assert_eq!(c.async_error().unwrap(), 0);
        (get::<f32>(&b, 8), get::<i64>(&dst, 3), get::<u32>(&bc, 4), get::<f32>(&gathered, 16), get::<f32>(&halves, 4), get::<f64>(&got, 5),
         get::<i32>(&red, 2))
    });
    let v = |r: usize| -> Vec<f32> { (0..8).map(|i| (i + 10 * r) as f32).collect() };
    for (r, (sum, max, bc, gathered, halves, got, red)) in out.into_iter().enumerate() {
        assert_eq!(sum, (0..8).map(|i| (2 * i + 10) as f32).collect::<Vec<_>>());
        assert_eq!(max, vec![0, 6, 7]);
        assert_eq!(bc, vec![101; 4]);
        assert_eq!(gathered, [v(0), v(1)].concat());
        let block: Vec<f32> = (0..4).map(|i| v(0)[4 * r + i] + v(1)[4 * r + i]).collect();
        assert_eq!(halves, block);
        assert_eq!(got, vec![(1 - r) as f64; 5]);
        if r == 0 {
            assert_eq!(red, vec![2, 9]);
        }
    }
}

#[test]
fn init_all_in_a_group_and_split() {
    if !fakes() { return; }
    let devs = [Device::get(0).unwrap(), Device::get(1).unwrap()];
    let cs = Communicator::init_all(&devs, &CommOptions::default()).unwrap();
    assert_eq!(cs.len(), 2);
    let bs: Vec<Buffer> = (0..2).map(|r| buf(&devs[r], &[r as f32 + 1.0; 4])).collect();
    nccl::group(|| {
        for r in 0..2 {
            cs[r].all_reduce_view(None, &f32_view(&bs[r], 4), nccl::Op::CUABI_NCCL_AVG, None)?;
        }
        Ok(())
    })
    .unwrap();
    for b in &bs {
        assert_eq!(get::<f32>(b, 4), vec![1.5; 4]);
    }
    let reg = cs[0].register(&bs[0]).unwrap();
    drop(reg);
    drop(cs);
    // Split across two threads: alone by color, or no part at all.
    let out = ranks(2, CommOptions::default(), |r, c, _| {
        let alone = c.split(Some(r as u32), 0, None).unwrap().expect("a color gives a communicator");
        let none = c.split(None, 0, None).unwrap();
        (alone.size().unwrap(), alone.rank().unwrap(), none.is_none())
    });
    assert_eq!(out, vec![(1, 0, true), (1, 0, true)]);
}

#[test]
fn refusals_say_why() {
    if !fakes() { return; }
    let dev = Device::get(0).unwrap();
    let c = Communicator::init_rank(&dev, 1, &UniqueId::new().unwrap(), 0, &CommOptions::default()).unwrap();
    let b = buf(&dev, &[0f32; 8]);
    let strided = View::new(&b, 0, DType::of::<f32>(), &[4], Some(&[2]), 0).unwrap();
    let e = c.all_reduce_view(None, &strided, nccl::Op::CUABI_NCCL_SUM, None).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT);
    assert!(e.message.contains("not contiguous"), "{}", e.message);
    let small = buf(&dev, &[0f32; 4]);
    let e = c.all_reduce_view(Some(&f32_view(&b, 8)), &f32_view(&small, 4), nccl::Op::CUABI_NCCL_SUM, None).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT, "{}", e.message);
    // a buffer range past the end
    let e = c.all_reduce(None, (&b, 16), 8, f32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, None).unwrap_err();
    assert_ne!(e.status, sys::CUABI_SUCCESS);
    let e = c.broadcast(None, (&b, 0), 8, f32::DATATYPE, 5, None).unwrap_err();
    assert_ne!(e.status, sys::CUABI_SUCCESS, "root 5 of 1 rank");
    let bad = CommOptions { comm_name: Some("a\0b".into()), ..CommOptions::default() };
    assert_eq!(Communicator::init_rank(&dev, 1, &UniqueId::new().unwrap(), 0, &bad).unwrap_err().status,
               sys::CUABI_ERROR_INVALID_ARGUMENT);
}

#[test]
fn a_rank_that_never_arrives_times_out() {
    if !fakes() { return; }
    let dev = Device::get(0).unwrap();
    let t0 = std::time::Instant::now();
    let e = Communicator::init_rank(&dev, 2, &UniqueId::new().unwrap(), 0,
                                    &CommOptions::with_timeout(Duration::from_millis(200))).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_TIMEOUT, "{}", e.message);
    assert!(t0.elapsed() < Duration::from_secs(20));
}

#[test]
fn abort_from_another_thread() {
    if !fakes() { return; }
    let dev = Device::get(0).unwrap();
    let c = Communicator::init_rank(&dev, 1, &UniqueId::new().unwrap(), 0, &CommOptions::default()).unwrap();
    let h: AbortHandle = c.abort_handle();
    let h2 = h.clone();
    std::thread::spawn(move || h2.abort().unwrap()).join().unwrap();
    h.abort().unwrap(); // twice: no error
    let b = buf(&dev, &[0i32; 4]);
    let e = c.all_reduce(None, (&b, 0), 4, i32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, None).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_NCCL);
    assert!(e.message.contains("abort"), "{}", e.message);
    drop(c);
    drop(h); // the last reference
}
