//! Arrays, textures, surfaces and stream memory operations against the C
//! tests' fake driver (tests/fixtures/fake_texture.h through
//! fake_cuda_graph.so, CUABI_TEST_FAKE_CUDA, set by tests/bindings/check_rust.sh):
//! no GPU needed. Fake arrays are host memory, so copies round-trip; texture
//! and surface objects are tokens. Each test prints SKIP and returns without
//! the fake.
use std::sync::Once;

use cuabi::{sys, array_desc, region, texture_desc, ArgPack, Array, Device, MemoryResource,
            MipmappedArray, Stream, Surface, Texture};

static INIT: Once = Once::new();

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

fn f32_array(dev: &Device, w: usize, h: usize, flags: u32) -> Array {
    let mut d = array_desc().unwrap();
    (d.width, d.height, d.format, d.flags) = (w, h, sys::CUABI_ARRAY_FORMAT_FLOAT32, flags);
    Array::new(dev, &d).unwrap()
}

#[test]
fn arrays_round_trip_through_host_buffers_and_other_arrays() {
    let Some(dev) = fake() else { return };
    let a = f32_array(&dev, 8, 4, 0);
    let info = a.info().unwrap();
    assert_eq!((info.width, info.height, info.element_size, info.size_bytes), (8, 4, 4, 128));
    let img: Vec<f32> = (0..32).map(|i| i as f32).collect();
    a.copy_from_host(None, &img, 0, 0).unwrap();
    let mut back = vec![0f32; 32];
    a.copy_to_host(&mut back, 0, 0, None).unwrap();
    assert_eq!(back, img);
    let r = region([2, 1, 0], [3, 2, 0]).unwrap();
    let mut bx = [0f32; 6];
    a.copy_to_host(&mut bx, 0, 0, Some(&r)).unwrap();
    assert_eq!(bx, [10.0, 11.0, 12.0, 18.0, 19.0, 20.0]);
    let res = MemoryResource::device_default(&dev).unwrap();
    let s = Stream::new(&dev).unwrap();
    let mut buf = res.allocate(4 * 64, 0, Some(&s)).unwrap();
    a.copy_to_buffer(&mut buf, 0, 64, 0, None, Some(&s)).unwrap();
    let b = f32_array(&dev, 8, 4, 0);
    b.copy_from_buffer(None, &buf, 0, 64, 0, Some(&s)).unwrap();
    s.synchronize().unwrap();
    let c = f32_array(&dev, 8, 4, 0);
    c.copy_from_array(None, &b, None, None).unwrap();
    c.copy_to_host(&mut back, 0, 0, None).unwrap();
    assert_eq!(back, img);
    // Too little host memory is refused before the driver sees it.
    let e = a.copy_from_host(None, &img[..31], 0, 0).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT);
    let m = MipmappedArray::new(&dev, &{
        let mut d = array_desc().unwrap();
        (d.width, d.height, d.format) = (16, 8, sys::CUABI_ARRAY_FORMAT_FLOAT32);
        d
    }, 3).unwrap();
    assert_eq!(m.info().unwrap().num_levels, 3);
    let lv = m.level(2).unwrap();
    drop(m);
    assert_eq!(lv.info().unwrap().width, 4);
    lv.copy_from_host(None, &[1f32; 8], 0, 0).unwrap();
}

#[test]
fn textures_and_surfaces_are_kept_by_the_packs_that_name_them() {
    let Some(dev) = fake() else { return };
    let a = f32_array(&dev, 8, 4, sys::CUABI_ARRAY_SURFACE_LDST.0 as u32);
    let mut d = texture_desc().unwrap();
    d.filter_mode = sys::CUABI_TEXTURE_FILTER_LINEAR;
    let t = Texture::from_array(&a, Some(&d)).unwrap();
    let s = Surface::new(&a).unwrap();
    assert_ne!(t.object().unwrap(), 0);
    assert_eq!(t.info().unwrap().width, 8);
    let plain = f32_array(&dev, 4, 4, 0);
    assert_eq!(Surface::new(&plain).unwrap_err().status, sys::CUABI_ERROR_INVALID_ARGUMENT);
    let mut pack = ArgPack::builder().arg(t.clone()).arg(s.clone()).arg(7u64).build().unwrap();
    drop(t);
    drop(s);
    drop(a);
    // The pack keeps both alive: the slots still resolve (the value is there).
    let v = pack.get_bytes(0).unwrap();
    assert_ne!(u64::from_le_bytes(v[..8].try_into().unwrap()), 0);
    let mut i32pack = ArgPack::new("f32").unwrap();
    let t2 = Texture::from_array(&plain, None).unwrap();
    assert_eq!(i32pack.set(0, &t2).unwrap_err().status, sys::CUABI_ERROR_ARGUMENT_MISMATCH);
    pack.set(0, &t2).unwrap();
}

#[test]
fn stream_memory_operations_write_and_wait() {
    let Some(dev) = fake() else { return };
    let res = MemoryResource::device_default(&dev).unwrap();
    let s = Stream::new(&dev).unwrap();
    let mut w = res.allocate(64, 0, Some(&s)).unwrap();
    w.memset(0, 0, 1, 64, Some(&s)).unwrap();
    s.write_value32(&mut w, 4, 7, 0).unwrap();
    s.write_value64(&mut w, 8, 1 << 40, 0).unwrap();
    s.wait_value32(&w, 4, 7, sys::CUABI_STREAM_WAIT_VALUE_EQ.0 as u32).unwrap();
    s.batch_mem_op(&mut [(sys::CUABI_STREAM_MEM_OP_WRITE_VALUE_32, Some(&mut w), 0, 9, 0),
                     (sys::CUABI_STREAM_MEM_OP_BARRIER, None, 0, 0, 0)]).unwrap();
    s.synchronize().unwrap();
    let mut words = [0u32; 4];
    w.copy_to_host(&mut words, 0).unwrap();
    assert_eq!(words, [9, 7, 0, 256]);
    assert_eq!(s.write_value64(&mut w, 4, 1, 0).unwrap_err().status, sys::CUABI_ERROR_INVALID_ARGUMENT);
}
