//! cuabi::nvml against the C tests' fake NVML (tests/fixtures/fake_nvml.c,
//! CUABI_TEST_FAKE_NVML, set by tests/bindings/check_rust.sh): no GPU
//! needed. The fake's GPUs are described in tests/fixtures/fake_nvml.h; here
//! a third is added whose temperature query fails (NVML_ERROR_GPU_IS_LOST),
//! and GPU 1 reports no temperature and no power draw. Each test prints
//! SKIP and returns without the fake.
use std::sync::Once;

use cuabi::nvml::{self, NvmlDevice};
use cuabi::sys;

static INIT: Once = Once::new();

fn fake() -> bool {
    let Ok(path) = std::env::var("CUABI_TEST_FAKE_NVML") else {
        eprintln!("SKIP: CUABI_TEST_FAKE_NVML not set (tests/bindings/check_rust.sh sets it)");
        return false;
    };
    // SAFETY: every test calls this before any other cuabi call, and the
    // variables are set once, before the library first loads NVML.
    INIT.call_once(|| unsafe {
        std::env::set_var("CUABI_NVML_PATH", path);
        std::env::set_var(
            "CUABI_FAKE_NVML",
            "count=3;temp.1=-1;fail=nvmlDeviceGetPowerUsage@1:3;fail=nvmlDeviceGetTemperature@2:15",
        );
    });
    true
}

#[test]
fn the_machine() {
    if !fake() {
        return;
    }
    let s = nvml::system_info().unwrap();
    assert_eq!(s.driver_version, "580.65.06");
    assert_eq!(s.cuda_driver_version, Some(13000));
    assert_eq!(s.device_count, 3);
    assert!(s.library_path.ends_with("fake_nvml.so"));
    assert_eq!(nvml::device_count().unwrap(), 3);
    assert_eq!(nvml::devices().unwrap().len(), 3);
    assert!(NvmlDevice::get(3).is_err());
}

#[test]
fn a_gpu_and_its_health() {
    if !fake() {
        return;
    }
    let d = NvmlDevice::get(0).unwrap();
    let info = d.info().unwrap();
    assert_eq!(info.name, "NVIDIA H100 80GB HBM3 (fake 0)");
    assert_eq!(info.uuid, "GPU-01020304-0506-0708-090a-0b0c0d0e0f10");
    assert_eq!(info.uuid_bytes, Some(core::array::from_fn(|i| i as u8 + 1)));
    assert_eq!(info.pci_bus_id, "00000000:02:00.0");
    assert_eq!(info.pci_location, (0, 2, 0));
    assert_eq!(info.compute_capability, Some((9, 0)));
    assert_eq!(info.pcie_max_link, Some((5, 16)));
    assert_eq!(info.max_clocks_mhz, Some((1980, 1980, 2619)));
    assert_eq!((info.ecc_enabled, info.nvlink_count), (Some(true), 4));
    let h = d.health().unwrap();
    assert_eq!(
        h.memory,
        Some((80 << 30, (80u64 << 30) - (512 << 20) - (1 << 30), 1 << 30))
    );
    assert_eq!(h.memory_reserved, Some(512 << 20));
    assert_eq!(
        (h.temperature_c, h.power_usage_mw, h.power_limit_mw),
        (Some(40), Some(70000), Some(700000))
    );
    assert_eq!(h.ecc_volatile, Some((3, 0)));
    assert_eq!(
        h.throttle_reasons,
        Some(sys::CUABI_NVML_THROTTLE_GPU_IDLE.0 as u64)
    );
    assert_eq!((h.pcie_link, h.performance_state), (Some((5, 16)), Some(0)));
    assert_eq!(d.pcie_throughput().unwrap(), (1000, 2000));
    assert_eq!(NvmlDevice::find(&info.uuid).unwrap(), d);
    assert_eq!(NvmlDevice::find("0000:01:00.0").unwrap().index(), 1);
    assert_eq!(
        NvmlDevice::find("nonsense").unwrap_err().status,
        sys::CUABI_ERROR_INVALID_ARGUMENT
    );
    assert_eq!(
        NvmlDevice::find("a\0b").unwrap_err().status,
        sys::CUABI_ERROR_INVALID_ARGUMENT
    );
}

#[test]
fn unreported_values_are_none_and_failures_are_errors() {
    if !fake() {
        return;
    }
    let h = NvmlDevice::get(1).unwrap().health().unwrap();
    assert_eq!((h.temperature_c, h.power_usage_mw), (None, None));
    assert_eq!(h.power_limit_mw, Some(700000));
    let e = NvmlDevice::get(2).unwrap().health().unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_NVML);
    assert!(
        e.message
            .contains("nvmlDeviceGetTemperature failed: GPU is lost"),
        "{}",
        e.message
    );
}

#[test]
fn links_topology_processes() {
    if !fake() {
        return;
    }
    let (d0, d1) = (NvmlDevice::get(0).unwrap(), NvmlDevice::get(1).unwrap());
    let l = d0.nvlink(0).unwrap();
    assert_eq!(
        (l.active, l.version, l.remote, l.p2p_supported),
        (Some(true), Some((4, 0)), Some(d1), Some(true))
    );
    let down = d0.nvlink(3).unwrap();
    assert_eq!(
        (down.active, down.remote_pci_bus_id, down.remote),
        (Some(false), None, None)
    );
    assert!(d0.nvlink(4).is_err());
    let t = d0.topology(&d1).unwrap();
    assert_eq!(t.common_ancestor, Some(sys::CUABI_NVML_TOPOLOGY_NODE));
    assert_eq!(
        (t.p2p_nvlink, t.p2p_pci),
        (sys::CUABI_NVML_P2P_OK, sys::CUABI_NVML_P2P_NOT_SUPPORTED)
    );
    let p = d0.processes().unwrap();
    assert_eq!(
        p.iter().map(|p| p.pid).collect::<Vec<_>>(),
        vec![1000, 1001, 1002]
    );
    assert!(p[1].compute && p[1].graphics && p[2].used_memory.is_none());
    assert_eq!(p[0].used_memory, Some(512 << 20));
    assert!(d1.processes().unwrap().is_empty());
}
