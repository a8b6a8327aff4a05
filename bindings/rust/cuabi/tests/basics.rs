//! Library info and errors: everything here runs without a GPU.
mod common;
use cuabi::sys;

#[test]
fn version_matches_runtime_info() {
    let v = cuabi::version();
    assert_eq!(v.split('.').count(), 3, "{v}");
    let hex = cuabi::version_hex();
    let parts: Vec<u32> = v.split('.').map(|p| p.parse().unwrap()).collect();
    assert_eq!(hex, (parts[0] << 16) | (parts[1] << 8) | parts[2]);
    let info = cuabi::runtime_info().unwrap();
    assert_eq!(info.library_version, v);
    assert_eq!(info.abi_version, cuabi::abi_version());
    // NVRTC presence depends on the machine; either way it is reported.
    if let Err(e) = &info.nvrtc {
        assert!(!e.message.is_empty());
    }
    // libNVVM and nvFatbin (runtime info version 2): found with a path, or why not.
    for (lib, path) in [(&info.nvvm, &info.nvvm_path), (&info.nvfatbin, &info.nvfatbin_path)] {
        match lib {
            Ok(()) => assert!(!path.is_empty()),
            Err(e) => assert!(!e.message.is_empty(), "{e:?} {path}"),
        }
    }
}

#[test]
fn layouts_agree() {
    cuabi::check_layouts().unwrap();
}

#[test]
fn error_carries_status_and_message() {
    let e = cuabi::struct_size("cuabi_nope").unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_NOT_FOUND);
    assert!(e.message.contains("cuabi_struct_size"), "{}", e.message);
    assert!(e.message.contains("cuabi_nope"), "{}", e.message);
    assert_eq!(e.status_name(), "CUABI_ERROR_NOT_FOUND");
    assert!(e.to_string().starts_with("CUABI_ERROR_NOT_FOUND: "));
    assert!(e.log.is_empty());
}

#[test]
fn nul_in_argument_is_an_error_not_a_panic() {
    let e = cuabi::struct_size("a\0b").unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT);
}

#[test]
fn errors_are_per_thread() {
    let _ = cuabi::struct_size("cuabi_nope");
    let other = std::thread::spawn(|| cuabi::struct_size("cuabi_stream_options")).join().unwrap();
    assert!(other.unwrap() > 0);
}

#[test]
fn unknown_status_values_are_safe() {
    let st = sys::cuabi_status(12345);
    assert_eq!(st.name(), None);
    assert_eq!(format!("{st:?}"), "cuabi_status(12345)");
}

#[test]
fn device_count_without_driver_is_a_clear_error_or_a_number() {
    match cuabi::device_count() {
        Ok(_) => {}
        Err(e) => {
            assert!(e.status == sys::CUABI_ERROR_DRIVER_NOT_FOUND || e.status == sys::CUABI_ERROR_NO_DEVICE
                || e.status == sys::CUABI_ERROR_CUDA, "{e}");
            // The loader's message names the missing library and what to set.
            assert!(e.message.contains("libcuda") || e.message.contains("cuabi_device_count"), "{e}");
        }
    }
}

#[test]
fn handle_types_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<cuabi::Device>();
    both::<cuabi::Stream>();
    both::<cuabi::Event>();
}
