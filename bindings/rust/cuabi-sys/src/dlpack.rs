//! DLPack 1.x types, declared from the DLPack specification (dlpack.h
//! v1.1): libcuabi exchanges arrays as `DLManagedTensorVersioned`.
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]
use core::ffi::c_void;

/// Major version of the DLPack ABI these declarations follow.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// Minor version of the DLPack ABI these declarations follow.
pub const DLPACK_MINOR_VERSION: u32 = 1;

/// `DLManagedTensorVersioned.flags`: the data must not be written.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// `DLManagedTensorVersioned.flags`: the producer copied the data.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
/// `DLManagedTensorVersioned.flags`: sub-byte types are padded.
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// DLDeviceType values (an `i32` in C).
pub type DLDeviceType = i32;
pub const kDLCPU: DLDeviceType = 1;
pub const kDLCUDA: DLDeviceType = 2;
pub const kDLCUDAHost: DLDeviceType = 3;
pub const kDLCUDAManaged: DLDeviceType = 13;

/// DLDataTypeCode values (a `u8` in DLDataType).
pub const kDLInt: u8 = 0;
pub const kDLUInt: u8 = 1;
pub const kDLFloat: u8 = 2;
pub const kDLOpaqueHandle: u8 = 3;
pub const kDLBfloat: u8 = 4;
pub const kDLComplex: u8 = 5;
pub const kDLBool: u8 = 6;

#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: DLDeviceType,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for row-major.
    pub strides: *mut i64,
    pub byte_offset: u64,
}

/// Legacy (pre-1.0) managed tensor.
#[repr(C)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// Versioned managed tensor (DLPack >= 1.0).
#[repr(C)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    /// Called exactly once by the consumer when it is done with the tensor.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    // Layouts from the DLPack specification on LP64 (docs in /work DESIGN).
    #[test]
    fn dlpack_layouts() {
        assert_eq!(size_of::<DLPackVersion>(), 8);
        assert_eq!(size_of::<DLTensor>(), 48);
        assert_eq!(offset_of!(DLTensor, ndim), 16);
        assert_eq!(offset_of!(DLTensor, dtype), 20);
        assert_eq!(offset_of!(DLTensor, shape), 24);
        assert_eq!(offset_of!(DLTensor, byte_offset), 40);
        assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
        assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
        assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
        assert_eq!(size_of::<DLManagedTensor>(), 64);
    }
}

/// A producer's owning export (`managed_tensor_from_py_object_no_sync`):
/// 0 and `*out` set, or -1 with a Python exception set.
pub type DLPackManagedTensorFromPyObjectNoSync =
    Option<unsafe extern "C" fn(py_object: *mut c_void, out: *mut *mut DLManagedTensorVersioned) -> i32>;

/// The stable head of a DLPack 1.3 C exchange table: check `version.major`,
/// follow `prev_api` to an older table.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct DLPackExchangeAPIHeader {
    pub version: DLPackVersion,
    pub prev_api: *mut DLPackExchangeAPIHeader,
}

/// A Python array type's DLPack C exchange table (DLPack 1.3), published as
/// `type(x).__dlpack_c_exchange_api__`. The functions taking or giving a
/// `PyObject*` (as `*mut c_void`) need the GIL; `cuabi_view_from_exchange`
/// consumes one.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct DLPackExchangeAPI {
    pub header: DLPackExchangeAPIHeader,
    pub managed_tensor_allocator: Option<
        unsafe extern "C" fn(
            prototype: *mut DLTensor,
            out: *mut *mut DLManagedTensorVersioned,
            error_ctx: *mut c_void,
            set_error: Option<unsafe extern "C" fn(*mut c_void, *const core::ffi::c_char, *const core::ffi::c_char)>,
        ) -> i32,
    >,
    pub managed_tensor_from_py_object_no_sync: DLPackManagedTensorFromPyObjectNoSync,
    pub managed_tensor_to_py_object_no_sync:
        Option<unsafe extern "C" fn(tensor: *mut DLManagedTensorVersioned, out_py_object: *mut *mut c_void) -> i32>,
    pub dltensor_from_py_object_no_sync:
        Option<unsafe extern "C" fn(py_object: *mut c_void, out: *mut DLTensor) -> i32>,
    pub current_work_stream: Option<
        unsafe extern "C" fn(device_type: DLDeviceType, device_id: i32, out_current_stream: *mut *mut c_void) -> i32,
    >,
}
