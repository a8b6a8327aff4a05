//! Issue 25's safe wrappers against the C tests' fake driver
//! (tests/fixtures/fake_cuda_graph.c, CUABI_TEST_FAKE_CUDA, set by
//! tests/bindings/check_rust.sh): virtual memory growing in place, pool
//! statistics, managed advice and prefetch, batched copies, and the
//! soundness rules of issue 28 applied to them (a shrink refused under live
//! views, queued work recorded on every buffer it touches, host slices
//! waited for). Each test prints SKIP and returns without the fake.
use std::os::fd::AsFd;
use std::sync::{Mutex, MutexGuard, Once};

use cuabi::{sys, CopyBatch, Device, MemoryResource, PeerAccess, Stream, View};

static INIT: Once = Once::new();
/// The fake driver's tables are not thread-safe: one test at a time.
static LOCK: Mutex<()> = Mutex::new(());

fn fake() -> Option<(Device, MutexGuard<'static, ()>)> {
    let Ok(path) = std::env::var("CUABI_TEST_FAKE_CUDA") else {
        eprintln!("SKIP: CUABI_TEST_FAKE_CUDA not set (tests/bindings/check_rust.sh sets it)");
        return None;
    };
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: set once, before the library first loads the driver.
    INIT.call_once(|| unsafe { std::env::set_var("CUABI_DRIVER_PATH", path) });
    Some((Device::get(0).expect("fake device 0"), guard))
}

#[test]
fn vmm_buffer_grows_in_place() {
    let Some((dev, _one_at_a_time)) = fake() else { return };
    assert!(cuabi::vmm_supported(&dev).unwrap());
    let mut o = cuabi::vmm_options().unwrap();
    o.reserve_size = 8 << 20;
    let g = cuabi::vmm_granularity(&dev, Some(&o)).unwrap();
    assert!(g > 0);
    let r = MemoryResource::vmm(&dev, Some(&o)).unwrap();
    let mut b = r.vmm_allocate(g + 1, 0).unwrap();
    assert_eq!(b.size(), 2 * g);
    let p = b.pointer();
    b.copy_from_host(0, &[7u8; 64]).unwrap();
    b.vmm_resize(5 * g, None).unwrap();
    assert_eq!(b.pointer(), p);
    assert_eq!(b.size(), 5 * g, "the Rust value reads the new size");
    let i = b.vmm_info().unwrap();
    assert_eq!((i.requested, i.size, i.chunks), ((5 * g) as u64, (5 * g) as u64, 2));
    let mut back = [0u8; 64];
    b.copy_to_host(&mut back, 0).unwrap();
    assert_eq!(back, [7u8; 64]);
    let e = b.vmm_resize(9 << 20, None).unwrap_err();
    assert!(e.to_string().contains("reserved range"), "{e}");
    assert_eq!(b.size(), 5 * g, "a refused resize leaves the buffer as it was");
    assert_eq!(b.vmm_access(&dev).unwrap(), PeerAccess::ReadWrite);
    let (fd, d) = b.vmm_export_chunk(0).unwrap();
    assert!(fd.is_some() && d[10] == sys::CUABI_IPC_VMM_CHUNK.0 as u8);
    // this process's own chunks are refused (no two buffers alias)
    let fds: Vec<_> = fd.iter().map(|f| f.as_fd()).collect();
    let e = r.vmm_import(Some(&fds), &d).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_IPC, "{e}");
    assert!(r.vmm_import(Some(&[]), &d).is_err(), "one fd per descriptor");
    assert!(r.vmm_import(None, &d[..100]).is_err(), "whole descriptors only");
    drop(fd); // an OwnedFd: closed here
    // a pool buffer is not a VMM buffer
    let pool = MemoryResource::device_default(&dev).unwrap();
    let pb = pool.allocate(4096, 0, None).unwrap();
    assert_eq!(pb.vmm_info().unwrap_err().status, sys::CUABI_ERROR_NOT_SUPPORTED);
}

#[test]
fn pool_statistics_move() {
    let Some((dev, _one_at_a_time)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let r = MemoryResource::pool(&dev, None).unwrap();
    let b = r.allocate(1 << 20, 0, Some(&s)).unwrap();
    assert_eq!(r.pool_attribute(sys::CUABI_POOL_USED_MEM_CURRENT).unwrap(), 1 << 20);
    b.free_async(&s).unwrap();
    assert_eq!(r.pool_attribute(sys::CUABI_POOL_USED_MEM_CURRENT).unwrap(), 0);
    assert_eq!(r.pool_attribute(sys::CUABI_POOL_USED_MEM_HIGH).unwrap(), 1 << 20);
    r.reset_high_water().unwrap();
    assert_eq!(r.pool_stats().unwrap().used_high, 0);
    r.set_pool_attribute(sys::CUABI_POOL_RELEASE_THRESHOLD, 4096).unwrap();
    assert!(r.set_pool_attribute(sys::CUABI_POOL_USED_MEM_CURRENT, 0).is_err());
    let text = r.pool_summary().unwrap();
    assert!(text.starts_with("pool device 0 (owned): reserved"), "{text}");
}

#[test]
fn vmm_shrink_refused_under_views_and_waits_for_queued_work() {
    let Some((dev, _one_at_a_time)) = fake() else { return };
    let mut o = cuabi::vmm_options().unwrap();
    o.reserve_size = 8 << 20;
    let g = cuabi::vmm_granularity(&dev, Some(&o)).unwrap();
    let r = MemoryResource::vmm(&dev, Some(&o)).unwrap();
    let mut b = r.vmm_allocate(3 * g, 0).unwrap();
    b.copy_from_host(0, &[5u8; 256]).unwrap();
    {
        let v = View::new(&b, 0, cuabi::DType::U8, &[256], None, 0).unwrap();
        let e = b.vmm_resize(g, None).unwrap_err();
        assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT);
        assert!(e.to_string().contains("view(s) made from this buffer"), "{e}");
        assert_eq!(b.size(), 3 * g, "a refused shrink changes nothing");
        // growing keeps the address, so it is fine under a view
        b.vmm_resize(4 * g, None).unwrap();
        assert_eq!(b.size(), 4 * g);
        drop(v);
    }
    // a copy queued on another stream is recorded, and a shrink waits for it
    let s = Stream::new(&dev).unwrap();
    let pool = MemoryResource::device_default(&dev).unwrap();
    let mut other = pool.allocate(256, 0, None).unwrap();
    {
        // a graph's copy node keeps the memory too: the library refuses the shrink
        let graph = cuabi::Graph::new().unwrap();
        graph.add_memcpy(&[], &other, 0, &b, 0, 256).unwrap();
        let e = b.vmm_resize(g, None).unwrap_err();
        assert!(e.to_string().contains("views or DLPack exports hold"), "{e}");
        assert_eq!(b.size(), 4 * g);
    }
    other.copy_from(0, &b, 0, 256, Some(&s)).unwrap();
    assert_eq!(b.pending_uses(), 1);
    b.vmm_resize(g, Some(&s)).unwrap();
    assert_eq!(b.pending_uses(), 0, "the shrink waited for the queued copy");
    assert_eq!(b.size(), g);
    assert_eq!(b.vmm_info().unwrap().size, g as u64);
    assert_eq!(other.to_vec::<u8>().unwrap(), vec![5u8; 256]);
    let mut back = [0u8; 256];
    b.copy_to_host(&mut back, 0).unwrap();
    assert_eq!(back, [5u8; 256], "the first chunk stays mapped");
}

#[test]
fn managed_prefetch_and_discard_are_recorded_and_discard_is_a_write() {
    let Some((dev, _one_at_a_time)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut o = cuabi::managed_options().unwrap();
    o.preferred_location_type = sys::CUABI_LOCATION_DEVICE;
    let m = MemoryResource::managed_with(&dev, &o).unwrap();
    let mut b = m.allocate(8192, 0, None).unwrap();
    assert_eq!(b.managed_range(0, 8192).unwrap().preferred_location_type, sys::CUABI_LOCATION_DEVICE);
    b.managed_advise(0, 8192, sys::CUABI_MANAGED_SET_READ_MOSTLY, sys::CUABI_LOCATION_NONE, 0).unwrap();
    assert_eq!(b.managed_range(0, 8192).unwrap().read_mostly, 1);
    b.copy_from_host(0, &[9u8; 8192]).unwrap();
    b.managed_prefetch(0, 8192, sys::CUABI_LOCATION_HOST, 0, &s).unwrap();
    assert_eq!(b.pending_uses(), 1, "the queued prefetch is recorded");
    assert_eq!(b.managed_range(0, 8192).unwrap().last_prefetch_location_type, sys::CUABI_LOCATION_HOST);
    assert!(b.managed_prefetch(4096, 8192, sys::CUABI_LOCATION_HOST, 0, &s).is_err(), "past the end");
    {
        let _v = View::new(&b, 0, cuabi::DType::U8, &[8192], None, 0).unwrap();
        let e = b.managed_discard(0, 4096, &s).unwrap_err();
        assert!(e.to_string().contains("managed_discard"), "{e}");
        let e = b.managed_discard_prefetch(0, 4096, sys::CUABI_LOCATION_DEVICE, 0, &s).unwrap_err();
        assert!(e.to_string().contains("managed_discard_prefetch"), "{e}");
    }
    assert_eq!(b.to_vec::<u8>().unwrap(), vec![9u8; 8192], "the refused discards touched nothing");
    b.managed_discard(0, 4096, &s).unwrap();
    assert_eq!(b.pending_uses(), 1);
    b.managed_discard_prefetch(4096, 4096, sys::CUABI_LOCATION_DEVICE, 0, &s).unwrap();
    s.synchronize().unwrap();
    // the fake fills discarded pages with 0xdd ("read back as anything")
    assert_eq!(b.to_vec::<u8>().unwrap(), vec![0xddu8; 8192]);
    assert_eq!(b.pending_uses(), 0, "to_vec waited for the recorded work");
    assert!(b.managed_discard(8000, 4096, &s).is_err(), "past the end");
    // a pool buffer is not managed
    let pool = MemoryResource::device_default(&dev).unwrap();
    let mut pb = pool.allocate(4096, 0, None).unwrap();
    assert_eq!(pb.managed_discard(0, 4096, &s).unwrap_err().status, sys::CUABI_ERROR_NOT_SUPPORTED);
}

#[test]
fn batched_copies_borrow_their_memory_and_record_on_every_buffer() {
    let Some((dev, _one_at_a_time)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let m = MemoryResource::managed(&dev).unwrap();
    let mut dst = m.allocate(8192, 0, None).unwrap();
    let pool = MemoryResource::device_default(&dev).unwrap();
    let mut src = pool.allocate(8192, 0, None).unwrap();
    src.copy_from_host(0, &[3u8; 8192]).unwrap();

    // buffer to buffer, two ranges of one destination in two items
    let (lo, hi) = (4096, 4096);
    let mut dst2 = pool.allocate(hi, 0, None).unwrap();
    let mut batch = CopyBatch::new();
    assert!(batch.is_empty());
    batch.copy(&mut dst, 0, &src, 0, lo).unwrap().copy(&mut dst2, 0, &src, 100, hi).unwrap();
    assert_eq!(batch.len(), 2);
    let r = cuabi::copy_batch(&s, batch).unwrap();
    assert_eq!((r.copies, r.bytes, r.path), (2, 8192, sys::CUABI_COPY_PATH_BATCHED));
    assert_eq!(cuabi::copy_reason(&r), "");
    assert_eq!(r.synchronized, 0);
    assert_eq!((dst.pending_uses(), dst2.pending_uses()), (1, 1), "destinations record the batch");
    assert_eq!(src.pending_uses(), 1, "the source records the batch once, though two copies read it");
    assert_eq!(dst.to_vec::<u8>().unwrap()[..lo], vec![3u8; lo][..]);
    assert_eq!(dst2.to_vec::<u8>().unwrap(), vec![3u8; hi]);

    // host slices: the call waits for the stream, so the data is there on return
    let host = (0..4096u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>();
    let mut back = vec![0u16; 2048];
    let mut batch = CopyBatch::new();
    batch.prefer_overlap(true).from_host(&mut dst, 4096, &host).unwrap().to_host(&mut back, &src, 0).unwrap();
    let r = cuabi::copy_batch(&s, batch).unwrap();
    assert_eq!((r.copies, r.bytes), (2, 8192));
    assert!(s.query().unwrap(), "the stream was waited for: host slices took part");
    assert_eq!(back, vec![0x0303u16; 2048]);
    drop(host); // the borrow ended with copy_batch
    assert_eq!(dst.to_vec::<u8>().unwrap()[4096..], (0..4096u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>()[..]);

    // a range past a buffer's end: refused, nothing copied
    let before = dst2.to_vec::<u8>().unwrap();
    let mut batch = CopyBatch::new();
    batch.copy(&mut dst2, 100, &src, 0, 4096).unwrap();
    let e = cuabi::copy_batch(&s, batch).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT, "{e}");
    assert_eq!(dst2.to_vec::<u8>().unwrap(), before);
    let mut small = [0u8; 16];
    let mut batch = CopyBatch::new();
    batch.to_host(&mut small, &src, 8190).unwrap();
    assert!(cuabi::copy_batch(&s, batch).is_err(), "a host slice reaching past the source");

    // a host-accessible destination with live views is refused when added
    {
        let _v = View::new(&dst, 0, cuabi::DType::U8, &[16], None, 0).unwrap();
        let mut batch = CopyBatch::new();
        let e = batch.copy(&mut dst, 0, &src, 0, 16).unwrap_err();
        assert!(e.to_string().contains("CopyBatch::copy"), "{e}");
        assert!(batch.is_empty());
    }
    // an empty batch copies nothing
    let r = cuabi::copy_batch(&s, CopyBatch::new()).unwrap();
    assert_eq!((r.copies, r.path), (0, sys::CUABI_COPY_PATH_NONE));
}

#[test]
fn raw_batches_stay_unsafe() {
    let Some((dev, _one_at_a_time)) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let pool = MemoryResource::device_default(&dev).unwrap();
    let b = pool.allocate(8192, 0, None).unwrap();
    let mut src = pool.allocate(8192, 0, None).unwrap();
    src.copy_from_host(0, &[4u8; 8192]).unwrap();
    let items = [
        cuabi::copy_between(&b, 0, &src, 0, 4096).unwrap(),
        cuabi::copy_between(&b, 4096, &src, 100, 4096).unwrap(),
    ];
    // SAFETY: both buffers outlive the copies (the stream is synchronised
    // below, before they go) and nothing else touches them meanwhile.
    let r = unsafe { cuabi::copy_batch_raw(&items, &s) }.unwrap();
    s.synchronize().unwrap();
    assert_eq!((r.copies, r.bytes), (2, 8192));
    assert_eq!(b.to_vec::<u8>().unwrap(), vec![4u8; 8192]);
    let bad = [cuabi::copy_between(&b, 8000, &src, 0, 4096).unwrap()];
    // SAFETY: as above (and it is refused before anything is queued).
    assert!(unsafe { cuabi::copy_batch_raw(&bad, &s) }.is_err());
    // the legacy default stream is refused for batches
    let legacy = Stream::legacy_default(&dev).unwrap();
    // SAFETY: as above.
    let e = unsafe { cuabi::copy_batch_raw(&items, &legacy) }.unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT);
}
