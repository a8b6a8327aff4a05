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
    let mut b = MemoryResource::device_default(dev).unwrap().allocate(std::mem::size_of_val(values).max(1), 0, None).unwrap();
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
        assert_eq!(c.device().unwrap().ordinal(), r % 2);
        let dev = c.device().unwrap();
        let s = Stream::new(&dev).unwrap();
        let vals: Vec<f32> = (0..8).map(|i| (i + 10 * r) as f32).collect();
        // in place over a view: the sum of both ranks
        let b = buf(&dev, &vals);
        c.all_reduce_view(None, &f32_view(&b, 8), nccl::Op::CUABI_NCCL_SUM, Some(&s)).unwrap();
        // over buffers: max of i64 at a byte offset, out of place
        let src = buf(&dev, &[-1i64, 5 + r as i64, 7 * r as i64]);
        let mut dst = buf(&dev, &[0i64; 3]);
        c.all_reduce(Some((&src, 8)), (&mut dst, 8), 2, i64::DATATYPE, nccl::Op::CUABI_NCCL_MAX, Some(&s)).unwrap();
        // broadcast from rank 1, all-gather, reduce-scatter, send/recv around
        let mut bc = buf(&dev, &[r as u32 + 100; 4]);
        c.broadcast(None, (&mut bc, 0), 4, u32::DATATYPE, 1, Some(&s)).unwrap();
        let gathered = buf(&dev, &[0f32; 16]);
        let mine_f = buf(&dev, &vals);
        c.all_gather_view(&f32_view(&mine_f, 8), &f32_view(&gathered, 16), Some(&s)).unwrap();
        let halves = buf(&dev, &[0f32; 4]);
        c.reduce_scatter_view(&f32_view(&mine_f, 8), &f32_view(&halves, 4), nccl::Op::CUABI_NCCL_SUM, Some(&s))
            .unwrap();
        let mut got = buf(&dev, &[0f64; 5]);
        let mine = buf(&dev, &[r as f64; 5]);
        let mut g = nccl::Group::new();
        g.send(&c, (&mine, 0), 5, f64::DATATYPE, 1 - r, Some(&s)).unwrap()
         .recv(&c, (&mut got, 0), 5, f64::DATATYPE, 1 - r, Some(&s)).unwrap();
        assert_eq!(g.len(), 2);
        g.launch().unwrap();
        // the group recorded its work on both buffers after its end
        assert_eq!((mine.pending_uses(), got.pending_uses()), (1, 1));
        // reduce to rank 0 (recv on the root only)
        let mut red = buf(&dev, &[0i32; 2]);
        let one = buf(&dev, &[r as i32 + 1, 3]);
        c.reduce((&one, 0), if r == 0 { Some((&mut red, 0)) } else { None }, 2, i32::DATATYPE,
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
    let vs: Vec<View> = bs.iter().map(|b| f32_view(b, 4)).collect();
    let mut g = nccl::Group::new();
    for r in 0..2 {
        g.all_reduce_view(&cs[r], None, &vs[r], nccl::Op::CUABI_NCCL_AVG, None).unwrap();
    }
    g.launch().unwrap();
    // recorded on each view after the end (on the legacy default stream: no stream given)
    assert!(vs.iter().all(|v| v.pending_uses() == 1));
    drop(vs);
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
    let mut b2 = buf(&dev, &[0f32; 8]);
    let e = c.all_reduce(None, (&mut b2, 16), 8, f32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, None).unwrap_err();
    assert_ne!(e.status, sys::CUABI_SUCCESS);
    let e = c.broadcast(None, (&mut b2, 0), 8, f32::DATATYPE, 5, None).unwrap_err();
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
    let mut b = buf(&dev, &[0i32; 4]);
    let e = c.all_reduce(None, (&mut b, 0), 4, i32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, None).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_NCCL);
    assert!(e.message.contains("abort"), "{}", e.message);
    drop(c);
    drop(h); // the last reference
}

/// Issue 28: outside a group every collective records its work on each
/// buffer and view it uses (unless it is the buffer's own free stream), so
/// they wait for it before their memory goes; a host read waits and forgets.
#[test]
fn collectives_are_tracked_on_their_operands() {
    if !fakes() { return; }
    let dev = Device::get(0).unwrap();
    let c = Communicator::init_rank(&dev, 1, &UniqueId::new().unwrap(), 0, &CommOptions::default()).unwrap();
    let s = Stream::new(&dev).unwrap();
    let src = buf(&dev, &[1f32, 2.0, 3.0, 4.0]);
    let mut dst = buf(&dev, &[0f32; 4]);
    assert_eq!((src.pending_uses(), dst.pending_uses()), (0, 0));
    c.all_reduce(Some((&src, 0)), (&mut dst, 0), 4, f32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, Some(&s)).unwrap();
    assert_eq!((src.pending_uses(), dst.pending_uses()), (1, 1));
    // in place, no send operand: only the receiver records it
    c.broadcast(None, (&mut dst, 0), 4, f32::DATATYPE, 0, Some(&s)).unwrap();
    assert_eq!((src.pending_uses(), dst.pending_uses()), (1, 2));
    // no stream: the legacy default stream nccl.h's NULL means, tracked too
    c.reduce((&src, 0), Some((&mut dst, 0)), 4, f32::DATATYPE, nccl::Op::CUABI_NCCL_MAX, 0, None).unwrap();
    assert_eq!((src.pending_uses(), dst.pending_uses()), (2, 3));
    assert_eq!(get::<f32>(&dst, 4), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(dst.pending_uses(), 0, "a host read waits for the recorded work and forgets it");
    // a refused call records nothing
    let before = src.pending_uses();
    c.all_gather((&src, 0), (&mut dst, 0), 8, f32::DATATYPE, Some(&s)).unwrap_err();
    assert_eq!(src.pending_uses(), before);
    // views
    let (vs, vr) = (f32_view(&src, 4), View::new(&dst, 0, DType::of::<f32>(), &[4], None, 0).unwrap());
    c.all_reduce_view(Some(&vs), &vr, nccl::Op::CUABI_NCCL_SUM, Some(&s)).unwrap();
    assert_eq!((vs.pending_uses(), vr.pending_uses()), (1, 1));
    c.reduce_scatter_view(&vs, &vr, nccl::Op::CUABI_NCCL_SUM, Some(&s)).unwrap();
    assert_eq!((vs.pending_uses(), vr.pending_uses()), (2, 2));
    drop((vs, vr)); // waits for the work
    // a buffer allocated stream-ordered on `s` needs no event for work on `s`
    let mut home = MemoryResource::device_default(&dev).unwrap().allocate(16, 0, Some(&s)).unwrap();
    c.all_reduce(None, (&mut home, 0), 4, f32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, Some(&s)).unwrap();
    assert_eq!(home.pending_uses(), 0);
    let other = Stream::new(&dev).unwrap();
    c.all_reduce(None, (&mut home, 0), 4, f32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, Some(&other)).unwrap();
    assert_eq!(home.pending_uses(), 1);
    home.free_async(&s).unwrap();
    c.synchronize(Some(&s), None).unwrap();
}

/// The group builder: operations are issued between group start and end,
/// and recorded on their operands only after the end; an operation refused
/// while building is not added, one refused at launch stops the issuing
/// (what was issued before it still runs, and is tracked).
#[test]
fn group_builder_issues_and_tracks_after_the_end() {
    if !fakes() { return; }
    let devs = [Device::get(0).unwrap(), Device::get(1).unwrap()];
    let cs = Communicator::init_all(&devs, &CommOptions::default()).unwrap();
    let ss: Vec<Stream> = devs.iter().map(|d| Stream::new(d).unwrap()).collect();
    let mut bs: Vec<Buffer> = (0..2).map(|r| buf(&devs[r], &[r as i32 + 2; 3])).collect();
    let outs: Vec<Buffer> = (0..2).map(|r| buf(&devs[r], &[10 * r as i32; 3])).collect();
    let mut recvs: Vec<Buffer> = (0..2).map(|r| buf(&devs[r], &[0i32; 3])).collect();
    let mut g = nccl::Group::new();
    assert!(g.is_empty());
    for (r, b) in bs.iter_mut().enumerate() {
        g.all_reduce(&cs[r], None, (b, 0), 3, i32::DATATYPE, nccl::Op::CUABI_NCCL_PROD, Some(&ss[r])).unwrap();
    }
    // refused while building (a root that is no int): not added
    let mut spare = buf(&devs[0], &[0i32; 3]);
    let e = g.broadcast(&cs[0], None, (&mut spare, 0), 3, i32::DATATYPE, usize::MAX, Some(&ss[0])).err().unwrap();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT);
    assert!(e.message.contains("root"), "{}", e.message);
    for (r, rb) in recvs.iter_mut().enumerate() {
        g.broadcast(&cs[r], Some((&outs[r], 0)), (rb, 0), 3, i32::DATATYPE, 1, Some(&ss[r])).unwrap();
    }
    assert_eq!(g.len(), 4);
    g.launch().unwrap();
    for (r, b) in bs.iter().enumerate() {
        assert_eq!(b.pending_uses(), 1, "rank {r}: recorded after the group's end");
        assert_eq!(outs[r].pending_uses(), 1);
    }
    for (b, rb) in bs.iter().zip(&recvs) {
        assert_eq!(get::<i32>(b, 3), vec![6; 3]);
        assert_eq!(get::<i32>(rb, 3), vec![10; 3]);
    }
    // An empty group launches nothing and is no error.
    nccl::Group::new().launch().unwrap();
    // A refusal at launch (a range past the end): the group still ends, the
    // error comes back, and the operation issued before it was tracked.
    let mut small = buf(&devs[0], &[0i32; 2]);
    let mut ok0 = buf(&devs[0], &[5i32; 3]);
    let mut ok1 = buf(&devs[1], &[7i32; 3]);
    let mut g = nccl::Group::new();
    g.all_reduce(&cs[0], None, (&mut ok0, 0), 3, i32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, Some(&ss[0])).unwrap()
     .all_reduce(&cs[1], None, (&mut small, 0), 3, i32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, Some(&ss[1])).unwrap()
     .all_reduce(&cs[1], None, (&mut ok1, 0), 3, i32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, Some(&ss[1])).unwrap();
    let e = g.launch().unwrap_err();
    assert_ne!(e.status, sys::CUABI_SUCCESS);
    assert_eq!((ok0.pending_uses(), small.pending_uses(), ok1.pending_uses()), (1, 0, 0));
    // The group ended: init is refused inside a group, and works now.
    let lone = Communicator::init_rank(&devs[0], 1, &UniqueId::new().unwrap(), 0, &CommOptions::default()).unwrap();
    assert_eq!(lone.size().unwrap(), 1);
}

/// A receive into a host buffer that views still read is refused before
/// anything is queued (views are immutable; crate::view).
#[test]
fn a_receive_into_memory_views_read_is_refused() {
    if !fakes() { return; }
    let dev = Device::get(0).unwrap();
    let c = Communicator::init_rank(&dev, 1, &UniqueId::new().unwrap(), 0, &CommOptions::default()).unwrap();
    let mut host = Buffer::from_vec(vec![0f32; 4]).unwrap();
    let v = View::new(&host, 0, DType::of::<f32>(), &[4], None, 0).unwrap();
    let e = c.recv((&mut host, 0), 4, f32::DATATYPE, 0, None).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT);
    assert!(e.message.contains("view"), "{}", e.message);
    let mut g = nccl::Group::new();
    let e = g.all_reduce(&c, None, (&mut host, 0), 4, f32::DATATYPE, nccl::Op::CUABI_NCCL_SUM, None).err().unwrap();
    assert!(e.message.contains("view"), "{}", e.message);
    drop(g);
    drop(v);
}

/// The raw group: calls inside it run at its end (the caller keeps the
/// operands alive, the unsafe contract).
#[test]
fn group_unchecked_runs_at_the_end() {
    if !fakes() { return; }
    let devs = [Device::get(0).unwrap(), Device::get(1).unwrap()];
    let cs = Communicator::init_all(&devs, &CommOptions::default()).unwrap();
    let mut bs: Vec<Buffer> = (0..2).map(|r| buf(&devs[r], &[r as f64; 2])).collect();
    // SAFETY: `bs` outlives the group and is read only after synchronize.
    unsafe {
        nccl::group_unchecked(|| {
            // inside a group init is refused (what group_builder_... relies on
            // to show that a failed launch still ended its group)
            let e = Communicator::init_rank(&devs[0], 1, &UniqueId::new().unwrap(), 0, &CommOptions::default())
                .unwrap_err();
            assert_ne!(e.status, sys::CUABI_SUCCESS);
            for (r, b) in bs.iter_mut().enumerate() {
                cs[r].all_reduce(None, (b, 0), 2, f64::DATATYPE, nccl::Op::CUABI_NCCL_SUM, None)?;
            }
            Ok(())
        })
    }
    .unwrap();
    for r in 0..2 {
        cs[r].synchronize(None, None).unwrap();
        assert_eq!(get::<f64>(&bs[r], 2), vec![1.0; 2]);
    }
}
