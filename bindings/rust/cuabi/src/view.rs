//! Strided views and DLPack exchange (include/cuabi/view.h, docs/memory.md).
//!
//! Ownership: importing a managed tensor moves it into the view (its
//! deleter runs once, when the view's last reference goes, or at once if
//! the import is refused). An export is owned by the consumer: the
//! [`ManagedTensorVersioned`] / [`ManagedTensor`] wrappers call its deleter
//! on drop unless it is handed on with `into_raw`.
use crate::argpack::ViewArg;
use crate::error::{check, Error, Result};
use crate::memory::{Buffer, Pod};
use crate::sys;
use core::ffi::c_void;
use core::ptr::NonNull;

shared_handle!(
    /// A typed, strided, immutable window onto memory that keeps its owner alive.
    View, sys::cuabi_view, sys::cuabi_view_retain, sys::cuabi_view_release
);
// SAFETY: view.h: "Views are immutable and may be used from several threads at once."
unsafe impl Send for View {}
unsafe impl Sync for View {}

/// An element type: DLPack type code and bits (one lane).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DType {
    pub code: i32,
    pub bits: i32,
}

impl DType {
    pub const I8: DType = DType { code: 0, bits: 8 };
    pub const I16: DType = DType { code: 0, bits: 16 };
    pub const I32: DType = DType { code: 0, bits: 32 };
    pub const I64: DType = DType { code: 0, bits: 64 };
    pub const U8: DType = DType { code: 1, bits: 8 };
    pub const U16: DType = DType { code: 1, bits: 16 };
    pub const U32: DType = DType { code: 1, bits: 32 };
    pub const U64: DType = DType { code: 1, bits: 64 };
    pub const F16: DType = DType { code: 2, bits: 16 };
    pub const F32: DType = DType { code: 2, bits: 32 };
    pub const F64: DType = DType { code: 2, bits: 64 };
    pub const BF16: DType = DType { code: 4, bits: 16 };
    pub const BOOL: DType = DType { code: 6, bits: 8 };

    /// The dtype of a Rust element type.
    pub fn of<T: Element>() -> DType {
        T::DTYPE
    }
}

/// A Rust type that is a view element.
pub trait Element: Pod {
    const DTYPE: DType;
}
macro_rules! element { ($($t:ty => $d:ident),*) => {$(impl Element for $t { const DTYPE: DType = DType::$d; })*}; }
element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64, f32 => F32, f64 => F64);

/// View flags (`cuabi_view_flags` bits).
pub const READ_ONLY: u32 = 1;
pub const IS_COPIED: u32 = 2;

/// Everything about a view, with shape and strides copied out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewInfo {
    pub data: usize,
    pub byte_offset: u64,
    /// `cuabi_dlpack_device_type` (1 CPU, 2 CUDA, 3 CUDA host, 13 managed).
    pub device_type: i32,
    pub device_id: i32,
    pub dtype: DType,
    pub shape: Vec<i64>,
    /// In elements.
    pub strides: Vec<i64>,
    pub flags: u32,
    pub itemsize: usize,
    pub size: i64,
}

/// An owned `DLManagedTensorVersioned*`: drop calls its deleter.
pub struct ManagedTensorVersioned(NonNull<sys::DLManagedTensorVersioned>);
/// An owned legacy `DLManagedTensor*`: drop calls its deleter.
pub struct ManagedTensor(NonNull<sys::DLManagedTensor>);
// SAFETY: DLPack deleters may run on any thread (view.h: "from any thread").
unsafe impl Send for ManagedTensorVersioned {}
unsafe impl Send for ManagedTensor {}

macro_rules! managed_impl {
    ($name:ident, $raw:ty, |$t:ident| $tensor:expr) => {
        impl $name {
            /// Take ownership of a producer's tensor.
            ///
            /// # Safety
            /// `p` must be a valid managed tensor that the caller owns and gives up.
            pub unsafe fn from_raw(p: *mut $raw) -> Option<Self> {
                NonNull::new(p).map($name)
            }
            /// Hand the tensor on (e.g. to another library); its deleter is theirs to call.
            pub fn into_raw(self) -> *mut $raw {
                let p = self.0.as_ptr();
                core::mem::forget(self);
                p
            }
            pub fn as_raw(&self) -> *mut $raw {
                self.0.as_ptr()
            }
            /// The described tensor.
            pub fn dl_tensor(&self) -> &sys::DLTensor {
                let $t = unsafe { &*self.0.as_ptr() };
                $tensor
            }
            /// The extents.
            pub fn shape(&self) -> &[i64] {
                let t = self.dl_tensor();
                if t.ndim <= 0 || t.shape.is_null() { &[] } else { unsafe { core::slice::from_raw_parts(t.shape, t.ndim as usize) } }
            }
        }
        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, concat!(stringify!($name), "({:p}, shape {:?})"), self.0, self.shape())
            }
        }
        impl Drop for $name {
            fn drop(&mut self) {
                let p = self.0.as_ptr();
                if let Some(d) = unsafe { (*p).deleter } {
                    unsafe { d(p) };
                }
            }
        }
    };
}
managed_impl!(ManagedTensorVersioned, sys::DLManagedTensorVersioned, |t| &t.dl_tensor);
managed_impl!(ManagedTensor, sys::DLManagedTensor, |t| &t.dl_tensor);

impl ManagedTensorVersioned {
    pub fn version(&self) -> (u32, u32) {
        let v = unsafe { (*self.0.as_ptr()).version };
        (v.major, v.minor)
    }
    pub fn flags(&self) -> u64 {
        unsafe { (*self.0.as_ptr()).flags }
    }

    /// Export a Rust vector as a DLPack 1.1 host tensor (row-major `shape`),
    /// owning the vector: the deleter drops it. This is Rust as a DLPack producer.
    pub fn from_vec<T: Element + Send>(data: Vec<T>, shape: &[i64]) -> Result<ManagedTensorVersioned> {
        let n: i64 = shape.iter().try_fold(1i64, |a, &d| if d < 0 { None } else { a.checked_mul(d) })
            .ok_or_else(|| Error::invalid_argument("ManagedTensorVersioned::from_vec: bad shape"))?;
        if n as usize != data.len() {
            return Err(Error::invalid_argument(format!(
                "ManagedTensorVersioned::from_vec: shape has {n} elements, the vector {}", data.len())));
        }
        struct Ctx<T> {
            _data: Vec<T>,
            shape: Vec<i64>,
        }
        unsafe extern "C" fn deleter<T>(p: *mut sys::DLManagedTensorVersioned) {
            // SAFETY: p and its ctx were leaked by from_vec; the deleter runs once.
            let t = unsafe { Box::from_raw(p) };
            drop(unsafe { Box::from_raw(t.manager_ctx.cast::<Ctx<T>>()) });
        }
        let mut ctx = Box::new(Ctx { _data: data, shape: shape.to_vec() });
        let data_ptr = ctx._data.as_mut_ptr().cast::<c_void>();
        let shape_ptr = ctx.shape.as_mut_ptr();
        let t = Box::new(sys::DLManagedTensorVersioned {
            version: sys::DLPackVersion { major: 1, minor: 1 },
            manager_ctx: Box::into_raw(ctx).cast(),
            deleter: Some(deleter::<T>),
            flags: 0,
            dl_tensor: sys::DLTensor {
                data: data_ptr,
                device: sys::DLDevice { device_type: sys::kDLCPU, device_id: 0 },
                ndim: shape.len() as i32,
                dtype: sys::DLDataType { code: T::DTYPE.code as u8, bits: T::DTYPE.bits as u8, lanes: 1 },
                shape: shape_ptr,
                strides: core::ptr::null_mut(),
                byte_offset: 0,
            },
        });
        Ok(ManagedTensorVersioned(NonNull::from(Box::leak(t))))
    }
}

impl View {
    /// A view over a buffer: extents, strides in elements (None = row-major)
    /// from byte `offset`; the view keeps the buffer's memory alive.
    pub fn new(buffer: &Buffer, offset: u64, dtype: DType, shape: &[i64], strides: Option<&[i64]>, flags: u32) -> Result<View> {
        if let Some(s) = strides {
            if s.len() != shape.len() {
                return Err(Error::invalid_argument("View::new: strides and shape differ in length"));
            }
        }
        let sp = strides.map_or(core::ptr::null(), |s| s.as_ptr());
        View::create(|o| unsafe {
            sys::cuabi_view_create(o, buffer.as_raw(), offset, dtype.code, dtype.bits, shape.len() as i32,
                                   shape.as_ptr(), sp, flags)
        })
    }

    /// A host view owning `data` (row-major `shape`), through a DLPack export of
    /// the vector; needs no GPU.
    pub fn from_vec<T: Element + Send>(data: Vec<T>, shape: &[i64]) -> Result<View> {
        View::from_dlpack_versioned(ManagedTensorVersioned::from_vec(data, shape)?)
    }

    /// Import a DLPack 1.x tensor, taking ownership (its deleter runs when
    /// the view's last reference goes, or now if the import is refused).
    pub fn from_dlpack_versioned(t: ManagedTensorVersioned) -> Result<View> {
        let p = t.into_raw();
        View::create(|o| unsafe { sys::cuabi_view_from_dlpack_versioned(o, p) })
    }

    /// Import a legacy DLManagedTensor, taking ownership likewise.
    pub fn from_dlpack(t: ManagedTensor) -> Result<View> {
        let p = t.into_raw();
        View::create(|o| unsafe { sys::cuabi_view_from_dlpack(o, p) })
    }

    /// View a borrowed DLTensor (shape and strides copied, memory not owned).
    ///
    /// # Safety
    /// The memory must outlive the view and every export of it.
    pub unsafe fn from_dltensor(t: &sys::DLTensor, flags: u32) -> Result<View> {
        View::create(|o| unsafe { sys::cuabi_view_from_dltensor(o, t, flags) })
    }

    /// View a Python object through its type's DLPack C exchange table
    /// (DLPack 1.3, `type(obj).__dlpack_c_exchange_api__`, e.g. a torch
    /// tensor's): the table's owning export, imported with ownership. A
    /// table of an unknown version is `CUABI_ERROR_INVALID_VERSION`, the
    /// producer's failure `CUABI_ERROR_CALLBACK` (its Python exception set),
    /// a refused tensor `CUABI_ERROR_DLPACK`.
    ///
    /// # Safety
    /// `api` must point to a valid table (one a producer published) and
    /// `py_object` be a `PyObject*` of the producer's type; the GIL must be
    /// held (the producer's function runs Python).
    pub unsafe fn from_exchange(api: *const sys::DLPackExchangeAPI, py_object: *mut core::ffi::c_void) -> Result<View> {
        View::create(|o| unsafe { sys::cuabi_view_from_exchange(o, api, py_object) })
    }

    /// Export as DLPack 1.1; the result keeps the memory alive until dropped.
    pub fn to_dlpack_versioned(&self) -> Result<ManagedTensorVersioned> {
        let mut p = core::ptr::null_mut();
        check(unsafe { sys::cuabi_view_to_dlpack_versioned(&mut p, self.as_raw()) })?;
        NonNull::new(p).map(ManagedTensorVersioned).ok_or_else(|| Error::internal("cuabi_view_to_dlpack_versioned returned NULL"))
    }

    /// Export as a legacy DLManagedTensor (refused for read-only views).
    pub fn to_dlpack(&self) -> Result<ManagedTensor> {
        let mut p = core::ptr::null_mut();
        check(unsafe { sys::cuabi_view_to_dlpack(&mut p, self.as_raw()) })?;
        NonNull::new(p).map(ManagedTensor).ok_or_else(|| Error::internal("cuabi_view_to_dlpack returned NULL"))
    }

    /// A sub-view with per-dimension start/stop/step as Python's
    /// `slice.indices(n)` gives them (step None = all 1).
    pub fn slice(&self, start: &[i64], stop: &[i64], step: Option<&[i64]>) -> Result<View> {
        let nd = start.len();
        if stop.len() != nd || step.is_some_and(|s| s.len() != nd) {
            return Err(Error::invalid_argument("View::slice: start, stop and step differ in length"));
        }
        let sp = step.map_or(core::ptr::null(), |s| s.as_ptr());
        View::create(|o| unsafe { sys::cuabi_view_slice(o, self.as_raw(), nd as i32, start.as_ptr(), stop.as_ptr(), sp) })
    }

    pub fn info(&self) -> Result<ViewInfo> {
        let mut i = sys::cuabi_view_info::default();
        unsafe {
            check(sys::cuabi_view_info_init(&mut i, sys::CUABI_VIEW_INFO_VERSION))?;
            check(sys::cuabi_view_get_info(&mut i, self.as_raw()))?;
        }
        let nd = i.ndim.max(0) as usize;
        let copy = |p: *const i64| if nd == 0 || p.is_null() { Vec::new() } else { unsafe { core::slice::from_raw_parts(p, nd) }.to_vec() };
        Ok(ViewInfo {
            data: i.data,
            byte_offset: i.byte_offset,
            device_type: i.device_type,
            device_id: i.device_id,
            dtype: DType { code: i.dtype_code, bits: i.dtype_bits },
            shape: copy(i.shape),
            strides: copy(i.strides),
            flags: i.flags,
            itemsize: i.itemsize,
            size: i.size,
        })
    }

    /// Address of the first element (what a kernel receives).
    pub fn data_pointer(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_view_data_pointer(&mut v, self.as_raw()) })?;
        Ok(v)
    }
    pub fn shape(&self) -> Result<Vec<i64>> { Ok(self.info()?.shape) }
    pub fn strides(&self) -> Result<Vec<i64>> { Ok(self.info()?.strides) }
    pub fn ndim(&self) -> Result<usize> {
        let mut v = 0;
        check(unsafe { sys::cuabi_view_ndim(&mut v, self.as_raw()) })?;
        Ok(v as usize)
    }
    pub fn nbytes(&self) -> Result<u64> {
        let mut v = 0u64;
        check(unsafe { sys::cuabi_view_nbytes(&mut v, self.as_raw()) })?;
        Ok(v)
    }
    pub fn is_c_contiguous(&self) -> Result<bool> {
        let mut v = 0;
        check(unsafe { sys::cuabi_view_is_c_contiguous(&mut v, self.as_raw()) })?;
        Ok(v != 0)
    }
    pub fn is_f_contiguous(&self) -> Result<bool> {
        let mut v = 0;
        check(unsafe { sys::cuabi_view_is_f_contiguous(&mut v, self.as_raw()) })?;
        Ok(v != 0)
    }
    /// The view as a `view` kernel argument.
    pub fn arg(&self) -> ViewArg {
        ViewArg(self.as_raw())
    }

    /// Copy a host view's elements, in row-major order, into a vector
    /// (any strides). Device memory: copy it to a host buffer first.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let i = self.info()?;
        if i.device_type != sys::kDLCPU && i.device_type != sys::kDLCUDAHost {
            return Err(Error::invalid_argument("View::to_vec: the view is not in host memory"));
        }
        if i.dtype != T::DTYPE {
            return Err(Error::invalid_argument(format!("View::to_vec: the view's dtype is {:?}, not {:?}", i.dtype, T::DTYPE)));
        }
        let base = self.data_pointer()? as *const T;
        let mut out = Vec::with_capacity(i.size.max(0) as usize);
        let nd = i.shape.len();
        let mut idx = vec![0i64; nd];
        for _ in 0..i.size.max(0) {
            let off: i64 = idx.iter().zip(&i.strides).map(|(a, s)| a * s).sum();
            // SAFETY: the library checked every element lies in memory the view keeps alive.
            out.push(unsafe { core::ptr::read_unaligned(base.offset(off as isize)) });
            for d in (0..nd).rev() {
                idx[d] += 1;
                if idx[d] < i.shape[d] { break; }
                idx[d] = 0;
            }
        }
        Ok(out)
    }

    /// A contiguous host view's elements as a slice.
    ///
    /// # Safety
    /// Nothing may write the memory (through a buffer, another view or a
    /// kernel) while the slice lives.
    pub unsafe fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let i = self.info()?;
        if i.device_type != sys::kDLCPU && i.device_type != sys::kDLCUDAHost || i.dtype != T::DTYPE || !self.is_c_contiguous()? {
            return Err(Error::invalid_argument("View::as_slice: needs a C-contiguous host view of this element type"));
        }
        let p = self.data_pointer()? as *const T;
        if i.size == 0 { return Ok(&[]); }
        Ok(unsafe { core::slice::from_raw_parts(p, i.size as usize) })
    }
}
