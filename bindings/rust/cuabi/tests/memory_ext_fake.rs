//! Issue 25's safe wrappers against the C tests' fake driver
//! (tests/fixtures/fake_cuda_graph.c, CUABI_TEST_FAKE_CUDA, set by
//! tests/bindings/check_rust.sh): virtual memory growing in place, pool
//! statistics, managed advice and prefetch, a batched copy. Each test prints
//! SKIP and returns without the fake.
use std::sync::Once;

use cuabi::{sys, Device, MemoryResource, Stream};

static INIT: Once = Once::new();

fn fake() -> Option<Device> {
    let Ok(path) = std::env::var("CUABI_TEST_FAKE_CUDA") else {
        eprintln!("SKIP: CUABI_TEST_FAKE_CUDA not set (tests/bindings/check_rust.sh sets it)");
        return None;
    };
    // SAFETY: set once, before the library first loads the driver.
    INIT.call_once(|| unsafe { std::env::set_var("CUABI_DRIVER_PATH", path) });
    Some(Device::get(0).expect("fake device 0"))
}

#[test]
fn vmm_buffer_grows_in_place() {
    let Some(dev) = fake() else { return };
    assert!(cuabi::vmm_supported(&dev).unwrap());
    let mut o = cuabi::vmm_options().unwrap();
    o.reserve_size = 8 << 20;
    let g = cuabi::vmm_granularity(&dev, Some(&o)).unwrap();
    assert!(g > 0);
    let r = MemoryResource::vmm(&dev, Some(&o)).unwrap();
    let b = r.vmm_allocate(g + 1, 0).unwrap();
    assert_eq!(b.size().unwrap(), 2 * g);
    let p = b.pointer().unwrap();
    b.copy_from_host(0, &[7u8; 64]).unwrap();
    b.vmm_resize(5 * g, None).unwrap();
    assert_eq!(b.pointer().unwrap(), p);
    let i = b.vmm_info().unwrap();
    assert_eq!((i.requested, i.size, i.chunks), ((5 * g) as u64, (5 * g) as u64, 2));
    let mut back = [0u8; 64];
    b.copy_to_host(&mut back, 0).unwrap();
    assert_eq!(back, [7u8; 64]);
    let e = b.vmm_resize(9 << 20, None).unwrap_err();
    assert!(e.to_string().contains("reserved range"), "{e}");
    assert_eq!(b.vmm_access(&dev).unwrap(), sys::CUABI_PEER_ACCESS_READ_WRITE);
    let (fd, d) = b.vmm_export_chunk(0).unwrap();
    assert!(fd >= 0 && d[10] == sys::CUABI_IPC_VMM_CHUNK.0 as u8);
    unsafe { libc_close(fd) };
    // a pool buffer is not a VMM buffer
    let pool = MemoryResource::device_default(&dev).unwrap();
    let pb = pool.allocate(4096, 0, None).unwrap();
    assert_eq!(pb.vmm_info().unwrap_err().status, sys::CUABI_ERROR_NOT_SUPPORTED);
}

unsafe extern "C" {
    #[link_name = "close"]
    fn libc_close(fd: i32) -> i32;
}

#[test]
fn pool_statistics_move() {
    let Some(dev) = fake() else { return };
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
fn managed_advice_and_batched_copy() {
    let Some(dev) = fake() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut o = cuabi::managed_options().unwrap();
    o.preferred_location_type = sys::CUABI_LOCATION_DEVICE;
    let m = MemoryResource::managed_with(&dev, &o).unwrap();
    let b = m.allocate(8192, 0, None).unwrap();
    assert_eq!(b.managed_range(0, 8192).unwrap().preferred_location_type, sys::CUABI_LOCATION_DEVICE);
    b.managed_advise(0, 8192, sys::CUABI_MANAGED_SET_READ_MOSTLY, sys::CUABI_LOCATION_NONE, 0).unwrap();
    assert_eq!(b.managed_range(0, 8192).unwrap().read_mostly, 1);
    b.managed_prefetch(0, 8192, sys::CUABI_LOCATION_HOST, 0, Some(&s)).unwrap();
    let pool = MemoryResource::device_default(&dev).unwrap();
    let src = pool.allocate(8192, 0, Some(&s)).unwrap();
    src.copy_from_host(0, &[3u8; 8192]).unwrap();
    let items = [
        cuabi::copy_between(&b, 0, &src, 0, 4096).unwrap(),
        cuabi::copy_between(&b, 4096, &src, 100, 4096).unwrap(),
    ];
    let r = unsafe { cuabi::copy_batch(&items, &s) }.unwrap();
    s.synchronize().unwrap();
    assert_eq!((r.copies, r.bytes, r.path), (2, 8192, sys::CUABI_COPY_PATH_BATCHED));
    assert_eq!(cuabi::copy_reason(&r), "");
    assert_eq!(b.to_vec::<u8>().unwrap(), vec![3u8; 8192]);
    let bad = [cuabi::copy_between(&b, 8000, &src, 0, 4096).unwrap()];
    assert!(unsafe { cuabi::copy_batch(&bad, &s) }.is_err());
}
