//! Host buffers, views and DLPack round trips: no GPU needed.
use cuabi::{sys, Buffer, DType, ManagedTensorVersioned, MemoryResource, View, READ_ONLY};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn host_buffer_copies_and_memset() {
    let res = MemoryResource::host().unwrap();
    assert_eq!(res.kind(), sys::CUABI_MEMORY_HOST);
    let mut a = res.allocate(64, 0, None).unwrap();
    assert_eq!(a.size(), 64);
    assert_eq!(a.kind(), sys::CUABI_MEMORY_HOST);
    assert_eq!(a.pointer() % 64, 0);
    let src: Vec<f32> = (1..=16).map(|i| i as f32).collect();
    a.copy_from_host(0, &src).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), src);
    let mut b = Buffer::allocate(&res, 64, 0, None).unwrap();
    b.memset(0, 0xAB, 1, 64, None).unwrap();
    assert!(b.to_vec::<u8>().unwrap().iter().all(|&x| x == 0xAB));
    b.copy_from(8, &a, 0, 16, None).unwrap();
    let mut got = [0f32; 4];
    b.copy_to_host(&mut got, 8).unwrap();
    assert_eq!(got, [1.0, 2.0, 3.0, 4.0]);
    b.memset(0, 7, 4, 2, None).unwrap();
    let mut w = [0u32; 2];
    b.copy_to_host(&mut w, 0).unwrap();
    assert_eq!(w, [7, 7]);
    // Out of range: an error naming the function, no panic.
    let e = b.copy_to_host(&mut [0u8; 65], 0).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT, "{e}");
    assert!(e.message.contains("cuabi_buffer_copy_to_host"), "{e}");
    assert!(b.memset(1, 0, 4, 1, None).is_err());
}

#[test]
fn wrapped_buffer_release_runs_once_after_last_view() {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let mut mem = vec![0u8; 32].into_boxed_slice();
    let ptr = mem.as_mut_ptr() as usize;
    let buf = unsafe {
        Buffer::wrap(None, sys::CUABI_MEMORY_HOST, ptr, 32, Some(Box::new(move |p, n| {
            assert_eq!((p, n), (ptr, 32));
            h.fetch_add(1, Ordering::SeqCst);
        })))
    }.unwrap();
    let v = View::new(&buf, 0, DType::U8, &[32], None, 0).unwrap();
    drop(buf);
    assert_eq!(hits.load(Ordering::SeqCst), 0, "a view keeps the memory alive");
    drop(v);
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    drop(mem);
    // Refused wrap (a device kind without a device): the closure is dropped unrun.
    let h2 = hits.clone();
    let r = unsafe { Buffer::wrap(None, sys::CUABI_MEMORY_DEVICE, 0x1000, 4, Some(Box::new(move |_, _| { h2.fetch_add(1, Ordering::SeqCst); }))) };
    assert!(r.is_err());
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(Arc::strong_count(&hits), 1);
}

#[test]
fn views_slicing_contiguity() {
    let buf = Buffer::from_vec((0..12i32).collect::<Vec<_>>()).unwrap();
    let v = View::new(&buf, 0, DType::I32, &[3, 4], None, 0).unwrap();
    let i = v.info();
    assert_eq!((i.shape.clone(), i.strides.clone(), i.itemsize, i.size), (vec![3, 4], vec![4, 1], 4, 12));
    assert_eq!(i.device_type, sys::kDLCPU);
    assert_eq!(i.dtype, DType::of::<i32>());
    assert!(v.is_c_contiguous() && !v.is_f_contiguous());
    assert_eq!(v.nbytes(), 48);
    assert_eq!(v.ndim(), 2);
    assert_eq!(v.to_vec::<i32>().unwrap(), (0..12).collect::<Vec<_>>());
    // Column 1..3 of every other row: rows 0 and 2, columns 1, 2.
    let s = v.slice(&[0, 1], &[3, 3], Some(&[2, 1])).unwrap();
    assert_eq!(s.shape(), vec![2, 2]);
    assert_eq!(s.strides(), vec![8, 1]);
    assert!(!s.is_c_contiguous());
    assert_eq!(s.to_vec::<i32>().unwrap(), vec![1, 2, 9, 10]);
    assert_eq!(s.data_pointer(), v.data_pointer() + 4);
    // Reversed rows.
    let r = v.slice(&[2, 0], &[-1, 4], Some(&[-1, 1])).unwrap();
    assert_eq!(r.to_vec::<i32>().unwrap()[..4], [8, 9, 10, 11]);
    // Transposed through strides: F-contiguous.
    let t = View::new(&buf, 0, DType::I32, &[4, 3], Some(&[1, 4]), 0).unwrap();
    assert!(t.is_f_contiguous());
    assert_eq!(t.to_vec::<i32>().unwrap()[..4], [0, 4, 8, 1]);
    // Errors: past the end, wrong dtype read, bad slice.
    assert_eq!(View::new(&buf, 4, DType::I32, &[3, 4], None, 0).unwrap_err().status, sys::CUABI_ERROR_INVALID_ARGUMENT);
    assert!(v.to_vec::<f32>().is_err());
    assert!(v.slice(&[0], &[1], None).is_err());
    assert!(v.slice(&[0, 0], &[1, 1], Some(&[0, 1])).is_err());
    assert_eq!(unsafe { v.as_slice::<i32>() }.unwrap()[11], 11);
    assert!(unsafe { s.as_slice::<i32>() }.is_err());
}

#[test]
fn dlpack_round_trips() {
    // Rust vector -> DLPack 1.1 -> view -> DLPack export -> view again.
    let t = ManagedTensorVersioned::from_vec(vec![1.5f64, 2.5, 3.5, 4.5, 5.5, 6.5], &[2, 3]).unwrap();
    assert_eq!(t.version(), (1, 1));
    assert_eq!(t.shape(), &[2, 3]);
    let v = View::from_dlpack_versioned(t).unwrap();
    assert_eq!(v.info().dtype, DType::F64);
    let e = v.to_dlpack_versioned().unwrap();
    assert_eq!(e.version(), (1, 1));
    assert_eq!(e.dl_tensor().data as usize + e.dl_tensor().byte_offset as usize, v.data_pointer());
    assert_eq!(e.shape(), &[2, 3]);
    drop(v); // the export keeps the vector alive
    let v2 = View::from_dlpack_versioned(e).unwrap();
    assert_eq!(v2.to_vec::<f64>().unwrap(), vec![1.5, 2.5, 3.5, 4.5, 5.5, 6.5]);
    // Legacy export and import.
    let sl = v2.slice(&[1, 0], &[2, 3], None).unwrap();
    let legacy = sl.to_dlpack().unwrap();
    assert_eq!(legacy.shape(), &[1, 3]);
    let v3 = View::from_dlpack(legacy).unwrap();
    assert_eq!(v3.to_vec::<f64>().unwrap(), vec![4.5, 5.5, 6.5]);
    // A read-only view keeps the flag in DLPack 1.x and is refused by the legacy export.
    let buf = Buffer::from_vec(vec![0u16; 4]).unwrap();
    let ro = View::new(&buf, 0, DType::U16, &[4], None, READ_ONLY).unwrap();
    assert_eq!(ro.to_dlpack_versioned().unwrap().flags() & sys::DLPACK_FLAG_BITMASK_READ_ONLY, 1);
    assert_eq!(ro.to_dlpack().unwrap_err().status, sys::CUABI_ERROR_DLPACK);
    // Dropping an export without importing runs its deleter (no leak under ASan).
    drop(ro.to_dlpack_versioned().unwrap());
    // A refused import still calls the deleter exactly once: shape/len mismatch is
    // caught in Rust; a bad DLPack major version is refused by the library.
    assert!(ManagedTensorVersioned::from_vec(vec![1u8; 3], &[2, 2]).is_err());
    let bad = ManagedTensorVersioned::from_vec(vec![1u8; 4], &[4]).unwrap();
    unsafe { (*bad.as_raw()).version.major = 2 };
    assert_eq!(View::from_dlpack_versioned(bad).unwrap_err().status, sys::CUABI_ERROR_DLPACK);
    // View::from_vec: 0-d and empty views.
    let s = View::from_vec(vec![42i64], &[]).unwrap();
    assert_eq!(s.to_vec::<i64>().unwrap(), vec![42]);
    let z = View::from_vec(Vec::<f32>::new(), &[0, 5]).unwrap();
    assert_eq!(z.info().size, 0);
    assert!(z.is_c_contiguous());
}

#[test]
fn views_are_send_and_sync() {
    fn ss<T: Send + Sync>() {}
    ss::<View>();
    ss::<Buffer>();
    ss::<MemoryResource>();
    ss::<cuabi::Kernel>();
    ss::<cuabi::ObjectCode>();
    fn s<T: Send>() {}
    s::<cuabi::Linker>();
    s::<cuabi::Program>();
    s::<ManagedTensorVersioned>();
    let v = View::from_vec(vec![1u8, 2, 3], &[3]).unwrap();
    let vs: Vec<_> = (0..4).map(|_| { let v = v.clone(); std::thread::spawn(move || v.to_vec::<u8>().unwrap()) }).collect();
    for h in vs { assert_eq!(h.join().unwrap(), vec![1, 2, 3]); }
}

// A producer's DLPack C exchange table with a Rust "object": the export
// hands out a vector's DLPack tensor (what torch's table does for a tensor).
unsafe extern "C" fn export_vec(obj: *mut core::ffi::c_void,
                                out: *mut *mut sys::DLManagedTensorVersioned) -> i32 {
    let n = unsafe { *(obj as *const i64) };
    let t = ManagedTensorVersioned::from_vec((0..n).map(|i| i as f32).collect(), &[n]).unwrap();
    unsafe { *out = t.into_raw() };
    0
}

unsafe extern "C" fn export_fails(_: *mut core::ffi::c_void,
                                  out: *mut *mut sys::DLManagedTensorVersioned) -> i32 {
    unsafe { *out = core::ptr::null_mut() };
    -1
}

fn exchange_table(major: u32, export: sys::DLPackManagedTensorFromPyObjectNoSync) -> sys::DLPackExchangeAPI {
    sys::DLPackExchangeAPI {
        header: sys::DLPackExchangeAPIHeader { version: sys::DLPackVersion { major, minor: 3 },
                                               prev_api: core::ptr::null_mut() },
        managed_tensor_allocator: None,
        managed_tensor_from_py_object_no_sync: export,
        managed_tensor_to_py_object_no_sync: None,
        dltensor_from_py_object_no_sync: None,
        current_work_stream: None,
    }
}

#[test]
fn views_through_a_producers_exchange_table() {
    let mut n: i64 = 5;
    let obj = &mut n as *mut i64 as *mut core::ffi::c_void;
    let table = exchange_table(1, Some(export_vec));
    let v = unsafe { View::from_exchange(&table, obj) }.unwrap();
    assert_eq!(v.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    let two = exchange_table(2, Some(export_vec));
    let e = unsafe { View::from_exchange(&two, obj) }.unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_VERSION, "{e}");
    assert!(e.message.contains("cuabi_view_from_exchange"), "{e}");
    let failing = exchange_table(1, Some(export_fails));
    assert_eq!(unsafe { View::from_exchange(&failing, obj) }.unwrap_err().status,
               sys::CUABI_ERROR_CALLBACK);
}
