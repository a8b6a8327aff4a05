//! Devices, streams and events on a real GPU; each test skips without one.
mod common;

#[test]
fn device_properties() {
    let Some(dev) = common::gpu() else { return };
    let p = dev.properties().unwrap();
    assert!(!p.name().is_empty());
    assert!(p.compute_capability().0 >= 5);
    assert_eq!(dev.ordinal(), 0);
    let (free, total) = dev.memory_info().unwrap();
    assert!(free <= total && total > 0);
    assert_eq!(cuabi::Device::get(0).unwrap(), dev, "same handle for the same ordinal");
}

#[test]
fn stream_and_event_timing() {
    let Some(dev) = common::gpu() else { return };
    let s = cuabi::Stream::new(&dev).unwrap();
    let (a, b) = (cuabi::Event::new(&dev).unwrap(), cuabi::Event::new(&dev).unwrap());
    a.record(&s).unwrap();
    b.record(&s).unwrap();
    s.synchronize().unwrap();
    assert!(s.query().unwrap());
    assert!(b.query().unwrap());
    assert!(a.elapsed_ms(&b).unwrap() >= 0.0);
    assert_eq!(s.device().unwrap(), dev);
    let s2 = cuabi::Stream::with_options(&dev, cuabi::sys::CUABI_STREAM_NON_BLOCKING, 0).unwrap();
    s2.wait_event(&b).unwrap();
    s2.join(&s).unwrap(); // the GPU's ordering event, both ways and itself
    s.join(&s2).unwrap();
    s2.join(&s2).unwrap();
    s2.synchronize().unwrap();
    assert_ne!(s2.raw(), 0);
}

#[test]
fn stream_used_from_threads() {
    let Some(dev) = common::gpu() else { return };
    let s = std::sync::Arc::new(cuabi::Stream::new(&dev).unwrap());
    let hs: Vec<_> = (0..4).map(|_| { let s = s.clone(); std::thread::spawn(move || s.synchronize()) }).collect();
    for h in hs { h.join().unwrap().unwrap(); }
}
