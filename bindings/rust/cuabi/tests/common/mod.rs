//! Helpers shared by the test files.
#![allow(dead_code)]

/// The first device, or None (test skipped) without a driver or GPU.
pub fn gpu() -> Option<cuabi::Device> {
    match cuabi::device_count() {
        Ok(n) if n > 0 => Some(cuabi::Device::get(0).expect("device 0")),
        Ok(_) => {
            eprintln!("SKIP: no CUDA device");
            None
        }
        Err(e) => {
            eprintln!("SKIP: no CUDA driver ({e})");
            None
        }
    }
}
