//! Argument packs and the typed builder (no GPU needed).
use cuabi::{sys, ArgPack, Bytes, DevicePtr};

#[test]
fn builder_lays_out_like_c() {
    let pack = ArgPack::builder().arg(DevicePtr(0x1000)).arg(7i32).arg(2.5f32).arg(1u8).arg(3.0f64).build().unwrap();
    assert_eq!(pack.len(), 5);
    // struct { void *p; int32_t n; float f; uint8_t b; double d; }
    assert_eq!(pack.slot_offset(0).unwrap(), 0);
    assert_eq!(pack.slot_offset(1).unwrap(), 8);
    assert_eq!(pack.slot_offset(2).unwrap(), 12);
    assert_eq!(pack.slot_offset(3).unwrap(), 16);
    assert_eq!(pack.slot_offset(4).unwrap(), 24);
    assert_eq!(pack.blob_size(), 32);
    assert_eq!(pack.get_bytes(0).unwrap(), 0x1000u64.to_ne_bytes());
    assert_eq!(pack.get_bytes(1).unwrap(), 7i32.to_ne_bytes());
    assert_eq!(pack.get_bytes(2).unwrap(), 2.5f32.to_ne_bytes());
    assert_eq!(pack.slot_kind(4).unwrap(), sys::CUABI_ARG_F64);
}

#[test]
fn builder_signature_and_bytes() {
    #[repr(C)]
    #[derive(Copy, Clone)]
    struct P { x: f32, y: f32, z: f32, w: i32 }
    let b = ArgPack::builder().arg(Bytes(P { x: 1.0, y: 2.0, z: 3.0, w: 4 })).arg(5i64);
    assert!(b.signature().starts_with("align(4) struct{u8"));
    let pack = b.build().unwrap();
    assert_eq!(pack.slot_size(0).unwrap(), 16);
    assert_eq!(pack.slot_offset(1).unwrap(), 16);
    assert_eq!(&pack.get_bytes(0).unwrap()[12..16], &4i32.to_ne_bytes());
}

#[test]
fn typed_set_checks_kind_and_range() {
    let mut pack = ArgPack::new("i8, f32").unwrap();
    pack.set(0, &-5i8).unwrap();
    let e = pack.set(0, &1000i32).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT, "{e}");
    assert!(e.message.contains("cuabi_argpack_set_int"), "{e}");
    assert!(pack.set(5, &1i8).is_err());
}

#[test]
fn bad_signature_is_an_error() {
    let e = ArgPack::new("i32, nonsense").unwrap_err();
    assert!(e.message.contains("cuabi_argpack_create"), "{e}");
}

#[test]
fn items_and_sizes() {
    let pack = ArgPack::new("struct{f32, f32}, float4").unwrap();
    assert!(pack.item_count() >= 4, "2 slots + 2 struct members at least");
    let it = pack.item(1).unwrap();
    assert_eq!(it.depth, 1);
    assert_eq!(pack.slot_offset(1).unwrap(), 16, "float4 is 16-aligned");
    let p2 = ArgPack::from_sizes(&[8, 4], None).unwrap();
    assert_eq!(p2.blob_size(), 16);
    let mut blob = vec![0u8; 16];
    blob[8] = 9;
    let mut p2 = p2;
    p2.set_blob(&blob).unwrap();
    assert_eq!(p2.get_bytes(1).unwrap(), vec![9, 0, 0, 0]);
    assert!(ArgPack::from_sizes(&[8], Some(&[0, 8])).is_err());
}

/// A float for a raw slot (types unknown) must have the slot's size: an
/// f64 is not silently narrowed into 4 bytes that may be an int (issue 17).
#[test]
fn floats_for_raw_slots_need_their_size() {
    let mut pack = ArgPack::from_sizes(&[4, 8], None).unwrap();
    pack.set(0, &1.5f32).unwrap();
    pack.set(1, &2.5f64).unwrap();
    let e = pack.set(0, &1.5f64).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_ARGUMENT_MISMATCH, "{e}");
    assert!(e.message.contains("4-byte parameter of unknown type"), "{e}");
    assert!(pack.set(1, &1.5f32).is_err());
    pack.set(0, &7i32).unwrap();              // integers: range-checked by the library
}

/// A pack keeps the memory its buffer and view slots name alive for as long
/// as they name it (issue 29 item 7): the C pack keeps handles and looks
/// them up at each launch, and a Buffer dropped on another thread during a
/// launch would otherwise be read after it was freed. The memory's release
/// (a wrapped buffer's callback) shows it: before, it ran at the drop.
#[test]
fn pack_keeps_the_memory_of_its_buffer_and_view_slots() {
    use cuabi::{Buffer, View};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let hits = Arc::new(AtomicUsize::new(0));
    let wrapped = |mem: &mut [u8]| {
        let h = hits.clone();
        unsafe {
            Buffer::wrap(None, sys::CUABI_MEMORY_HOST, mem.as_mut_ptr() as usize, mem.len(),
                         Some(Box::new(move |_, _| { h.fetch_add(1, Ordering::SeqCst); })))
        }.unwrap()
    };
    let (mut m1, mut m2) = (vec![0u8; 16], vec![0u8; 16]);
    let (b1, b2) = (wrapped(&mut m1), wrapped(&mut m2));
    let mut pack = ArgPack::new("buffer, ptr, i32").unwrap();
    pack.set(0, &b1.arg()).unwrap();
    pack.set(1, &b2.arg()).unwrap();        // a buffer in an address slot
    drop(b1);
    drop(b2);
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the pack keeps both buffers' memory");
    pack.set(1, &DevicePtr(0x1000)).unwrap(); // the slot names no buffer any more
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    let b3 = Buffer::from_vec(vec![1u8; 8]).unwrap();
    pack.set(0, &b3.arg()).unwrap();        // replaced
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    // A view slot keeps its view (and so its memory).
    let mut m4 = vec![0u8; 16];
    let b4 = wrapped(&mut m4);
    let v = View::new(&b4, 0, cuabi::DType::U8, &[16], None, 0).unwrap();
    drop(b4);
    let mut vp = ArgPack::new("view").unwrap();
    vp.set(0, &v.arg()).unwrap();
    drop(v);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    drop(vp);
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    drop(pack);
    drop(b3);
    // A blob cannot carry handles the pack could not keep.
    let mut p = ArgPack::new("buffer, i32").unwrap();
    let e = p.set_blob(&[0u8; 16]).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_ARGUMENT_MISMATCH, "{e}");
    drop((m1, m2, m4));
}
