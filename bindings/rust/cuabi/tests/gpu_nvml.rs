//! cuabi::nvml on a real GPU; each test skips without a GPU or NVML: the
//! facts agree with the CUDA device's, the mapping to CUDA ordinals is
//! consistent both ways, the values are plausible, and this process shows
//! on its GPU once it holds memory there.
mod common;

use cuabi::nvml::{self, NvmlDevice};

fn nvml_here() -> bool {
    match nvml::device_count() {
        Ok(n) if n > 0 => true,
        Ok(_) => {
            eprintln!("SKIP: NVML lists no GPU");
            false
        }
        Err(e) => {
            eprintln!("SKIP: no NVML ({e})");
            false
        }
    }
}

#[test]
fn facts_agree_with_cuda() {
    let Some(dev) = common::gpu() else { return };
    if !nvml_here() {
        return;
    }
    let p = dev.properties().unwrap();
    let n = NvmlDevice::from_cuda_ordinal(0).unwrap();
    assert_eq!(n.cuda_ordinal().unwrap(), Some(0));
    let info = n.info().unwrap();
    assert_eq!(info.uuid_bytes, Some(p.raw.uuid));
    assert_eq!(info.name, p.name());
    assert_eq!(info.compute_capability, Some(p.compute_capability()));
    assert_eq!(NvmlDevice::find(&p.pci_bus_id()).unwrap(), n);
    assert_eq!(NvmlDevice::find(&info.uuid).unwrap(), n);
    let s = nvml::system_info().unwrap();
    let rt = cuabi::runtime_info().unwrap();
    assert_eq!(s.cuda_driver_version, Some(rt.driver_version));
}

#[test]
fn health_is_plausible_and_this_process_shows() {
    let Some(dev) = common::gpu() else { return };
    if !nvml_here() {
        return;
    }
    let n = NvmlDevice::from_cuda_ordinal(0).unwrap();
    let h = n.health().unwrap();
    let (total, free, used) = h.memory.expect("memory");
    assert!(total > 1 << 30 && free <= total && used <= total);
    let t = h.temperature_c.expect("temperature");
    assert!((5..=110).contains(&t), "{t} C");
    let mw = h.power_usage_mw.expect("power");
    assert!((5_000..=1_500_000).contains(&mw), "{mw} mW");
    let (g, m) = h.utilization.expect("utilisation");
    assert!(g <= 100 && m <= 100);
    let res = cuabi::MemoryResource::device_default(&dev).unwrap();
    let buf = res.allocate(256 << 20, 0, None).unwrap();
    dev.synchronize().unwrap();
    let me = std::process::id();
    let procs = n.processes().unwrap();
    assert!(
        procs.iter().any(|p| p.pid == me && p.compute),
        "pid {me} not in {procs:?}"
    );
    drop(buf);
    eprintln!("NVML GPU {}: {h:?}", n.index());
}
