//! Tensor maps and launch attributes without a GPU: each broken TMA rule is
//! refused with CUABI_ERROR_TENSOR_MAP naming it (checked before any driver
//! call); LaunchAttributes fill the C struct.
use cuabi::{sys, AccessPolicyWindow, AccessProperty, ClusterSchedulingPolicy, LaunchAttributes,
            MemSyncDomain, TensorMap, TensorMapOptions, View};

/// A borrowed view of device memory at a made-up address (nothing reads it).
fn device_view(addr: usize, shape: &mut [i64], strides: Option<&mut [i64]>, bits: u8) -> View {
    let t = sys::DLTensor {
        data: addr as *mut core::ffi::c_void,
        device: sys::DLDevice { device_type: sys::kDLCUDA, device_id: 0 },
        ndim: shape.len() as i32,
        dtype: sys::DLDataType { code: sys::kDLFloat, bits, lanes: 1 },
        shape: shape.as_mut_ptr(),
        strides: strides.map_or(core::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: 0,
    };
    // SAFETY: nothing dereferences the address; shape and strides are copied.
    unsafe { View::from_dltensor(&t, 0) }.unwrap()
}

fn refused(r: cuabi::Result<TensorMap>, says: &str) {
    let e = r.expect_err("the encoding was accepted");
    assert_eq!(e.status, sys::CUABI_ERROR_TENSOR_MAP, "{}", e.message);
    assert!(e.message.contains(says), "\"{}\" does not say \"{}\"", e.message, says);
}

#[test]
fn broken_rules_are_named() {
    let plain = TensorMapOptions::default();
    let v = device_view(0x10_0008, &mut [8, 64], None, 32);
    refused(TensorMap::tiled(&v, &[8, 8], &plain), "is not 16-byte aligned");
    let v = device_view(0x10_0000, &mut [4, 5], None, 32);
    refused(TensorMap::tiled(&v, &[4, 4], &plain), "stride of 20 bytes, not a multiple of 16");
    let v = device_view(0x10_0000, &mut [8, 64], None, 32);
    refused(TensorMap::tiled(&v, &[8, 512], &plain), "box[1] = 512");
    refused(TensorMap::tiled(&v, &[8], &plain), "the box has 1 dimensions, the view 2");
    refused(TensorMap::tiled(&v, &[8, 16], &plain.clone().swizzle(sys::CUABI_TENSORMAP_SWIZZLE_32B)),
            "longer than the 32B swizzle's span");
    refused(TensorMap::tiled(&v, &[8, 8], &plain.clone().element_strides(&[9, 1])),
            "element_strides[0] = 9");
    let v = device_view(0x10_0000, &mut [8, 8], Some(&mut [1, 8]), 32);
    refused(TensorMap::tiled(&v, &[8, 8], &plain), "must be contiguous");
    let img = device_view(0x10_0000, &mut [1, 8, 8, 16], None, 32);
    refused(TensorMap::im2col(&img, &[-200, 0], &[0, 0], 16, 64, &plain), "-128 to 127");
    let e = TensorMap::im2col(&img, &[0], &[0, 0], 16, 64, &plain).err().unwrap();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT);
    let e = TensorMap::tiled(&v, &[8, 8], &plain.clone().element_strides(&[1; 6])).err().unwrap();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT);
}

#[test]
fn launch_attributes_fill_the_c_struct() {
    let none = LaunchAttributes::default().to_c().unwrap();
    assert_eq!(none.priority, sys::CUABI_LAUNCH_UNSET);
    assert_eq!(none.mem_sync_domain, sys::CUABI_LAUNCH_UNSET);
    assert_eq!(none.access_policy_bytes, 0);
    let mut w = AccessPolicyWindow::new(0x7000_0000, 4096);
    w.hit_ratio = 0.5;
    w.miss_property = AccessProperty::Normal;
    let a = LaunchAttributes {
        preferred_cluster: [4, 1, 1],
        cluster_scheduling_policy: ClusterSchedulingPolicy::LoadBalancing,
        programmatic_stream_serialization: true,
        priority: Some(0),
        access_policy_window: Some(w),
        mem_sync_domain: Some(MemSyncDomain::Remote),
        mem_sync_domain_map: Some([0, 1]),
        preferred_shared_memory_carveout: Some(25),
        nvlink_util_centric_scheduling: true,
        ..Default::default()
    };
    let c = a.to_c().unwrap();
    assert_eq!(c.preferred_cluster, [4, 1, 1]);
    assert_eq!(c.cluster_scheduling_policy, sys::CUABI_CLUSTER_SCHEDULING_LOAD_BALANCING);
    assert_eq!(c.programmatic_stream_serialization, 1);
    assert_eq!(c.priority, 0);
    assert_eq!((c.access_policy_base, c.access_policy_bytes), (0x7000_0000, 4096));
    assert_eq!(c.access_policy_hit_ratio, 0.5);
    assert_eq!(c.access_policy_hit_property, sys::CUABI_ACCESS_PROPERTY_PERSISTING);
    assert_eq!(c.access_policy_miss_property, sys::CUABI_ACCESS_PROPERTY_NORMAL);
    assert_eq!(c.mem_sync_domain, 1);
    assert_eq!(c.mem_sync_domain_map, [0, 1]);
    assert_eq!(c.preferred_shared_memory_carveout, 25);
    assert_eq!(c.nvlink_util_centric_scheduling, 1);
    assert!(c.programmatic_event.is_null() && c.launch_completion_event.is_null());
}
