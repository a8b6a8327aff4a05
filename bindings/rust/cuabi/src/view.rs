//! Strided views and DLPack exchange (include/cuabi/view.h, docs/memory.md).
//!
//! Ownership: importing a managed tensor moves it into the view (its
//! deleter runs once, when the view's last reference goes, or at once if
//! the import is refused). An export is owned by the consumer: the
//! [`ManagedTensorVersioned`] / [`ManagedTensor`] wrappers call its deleter
//! on drop unless it is handed on with `into_raw`.
//!
//! Views are immutable (view.h): no method here writes the memory a view
//! reads, except [`View::copy_peer`], which writes device memory only. A
//! view made from a [`Buffer`] holds a token that keeps the buffer's writes
//! to host-accessible memory refused while the view (or a slice, clone or
//! export of it) lives, so [`View::to_vec`] never reads memory another
//! thread is writing.
use std::sync::Arc;

use crate::argpack::ViewArg;
use crate::error::{check, infallible, Error, Result};
use crate::memory::{Buffer, Pod};
use crate::stream::Stream;
use crate::sys;
use crate::track::Pending;
use core::ffi::c_void;
use core::ptr::NonNull;

handle_core!(
    /// The handle of a [`View`].
    ViewRaw, sys::cuabi_view, sys::cuabi_view_release
);

/// A typed, strided, immutable window onto memory that keeps its owner alive.
/// `Clone` takes another C reference; getters read what was fixed at creation.
pub struct View {
    // Dropped first (when the last clone goes): waits for queued work.
    pending: Arc<Pending>,
    raw: ViewRaw,
    info: Arc<ViewInfo>,
    /// The token of the buffer it was made from (see the module docs).
    gate: Option<Arc<()>>,
}
// SAFETY: view.h: "Views are immutable and may be used from several threads
// at once"; the Rust fields are Arcs of immutable data and a Mutex.
unsafe impl Send for View {}
// SAFETY: as for Send: no `&self` method writes host memory a view reads.
unsafe impl Sync for View {}

impl Clone for View {
    fn clone(&self) -> Self {
        // SAFETY: `self` owns a reference, so the handle is live; retain takes
        // one for the clone (view.h: views may be used from several threads).
        let st = unsafe { sys::cuabi_view_retain(self.raw.as_raw()) };
        infallible(st, "cuabi_view_retain");
        // SAFETY: the reference just taken is the clone's to own.
        let raw = unsafe { ViewRaw::from_raw(self.raw.as_raw()) }.expect("a live view is not NULL");
        View { pending: self.pending.clone(), raw, info: self.info.clone(), gate: self.gate.clone() }
    }
}

impl core::fmt::Debug for View {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "View({:?}, {:?} {:?})", self.raw.as_raw(), self.info.dtype, self.info.shape)
    }
}
impl PartialEq for View {
    fn eq(&self, o: &Self) -> bool {
        self.raw == o.raw
    }
}
impl Eq for View {}

/// An element type: DLPack type code and bits (one lane).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
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

impl ViewInfo {
    /// Whether host code can read the memory directly (CPU, CUDA host or managed).
    pub fn host_accessible(&self) -> bool {
        self.device_type == sys::kDLCPU || self.device_type == sys::kDLCUDAHost
            || self.device_type == sys::kDLCUDAManaged
    }
}

/// An owned `DLManagedTensorVersioned*`: drop calls its deleter.
pub struct ManagedTensorVersioned(NonNull<sys::DLManagedTensorVersioned>, Option<Arc<()>>);
/// An owned legacy `DLManagedTensor*`: drop calls its deleter.
pub struct ManagedTensor(NonNull<sys::DLManagedTensor>, Option<Arc<()>>);
// SAFETY: DLPack deleters may run on any thread (view.h: the consumer "calls
// its deleter exactly once, from any thread"); the tensor is owned, not shared.
unsafe impl Send for ManagedTensorVersioned {}
// SAFETY: as above.
unsafe impl Send for ManagedTensor {}

macro_rules! managed_impl {
    ($name:ident, $raw:ty, |$t:ident| $tensor:expr) => {
        impl $name {
            /// Take ownership of a producer's tensor.
            ///
            /// # Safety
            /// `p` must be a valid managed tensor that the caller owns and
            /// gives up, whose memory nothing writes while views of it may read it.
            pub unsafe fn from_raw(p: *mut $raw) -> Option<Self> {
                NonNull::new(p).map(|p| $name(p, None))
            }
            /// Hand the tensor on (e.g. to another library); its deleter is theirs to call.
            pub fn into_raw(self) -> *mut $raw {
                let me = core::mem::ManuallyDrop::new(self);
                // SAFETY: the token is moved out once, and `me` is never
                // dropped, so it is not dropped twice.
                drop(unsafe { core::ptr::read(&me.1) });
                me.0.as_ptr()
            }
            pub fn as_raw(&self) -> *mut $raw {
                self.0.as_ptr()
            }
            /// The described tensor.
            pub fn dl_tensor(&self) -> &sys::DLTensor {
                // SAFETY: we own a valid tensor until drop; the borrow of
                // `self` keeps it alive and nothing else frees it.
                let $t = unsafe { &*self.0.as_ptr() };
                $tensor
            }
            /// The extents.
            pub fn shape(&self) -> &[i64] {
                let t = self.dl_tensor();
                if t.ndim <= 0 || t.shape.is_null() {
                    &[]
                } else {
                    // SAFETY: DLPack: `shape` holds `ndim` extents, alive with the tensor.
                    unsafe { core::slice::from_raw_parts(t.shape, t.ndim as usize) }
                }
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
                // SAFETY: we own the tensor; DLPack: the owner calls its deleter once.
                if let Some(d) = unsafe { (*p).deleter } {
                    // SAFETY: as above; this is that one call.
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
        // SAFETY: we own a valid tensor (see dl_tensor).
        let v = unsafe { (*self.0.as_ptr()).version };
        (v.major, v.minor)
    }
    pub fn flags(&self) -> u64 {
        // SAFETY: as `version`.
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
            // SAFETY: p and its ctx were leaked by from_vec; DLPack calls the deleter once.
            let t = unsafe { Box::from_raw(p) };
            // SAFETY: as above: the ctx box leaked with it.
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
        Ok(ManagedTensorVersioned(NonNull::from(Box::leak(t)), None))
    }
}

impl View {
    /// Own a fresh handle: read its description once (a view is immutable).
    fn adopt(raw: ViewRaw, gate: Option<Arc<()>>) -> View {
        let mut i = sys::cuabi_view_info::default();
        // SAFETY: `i` is a local the init function fills.
        infallible(unsafe { sys::cuabi_view_info_init(&mut i, sys::CUABI_VIEW_INFO_VERSION) }, "cuabi_view_info_init");
        // SAFETY: `raw` is live; `i` a local written during the call.
        infallible(unsafe { sys::cuabi_view_get_info(&mut i, raw.as_raw()) }, "cuabi_view_get_info");
        let nd = i.ndim.max(0) as usize;
        let copy = |p: *const i64| {
            if nd == 0 || p.is_null() {
                Vec::new()
            } else {
                // SAFETY: view.h: shape and strides hold ndim values "valid while
                // the view lives"; `raw` lives, and we copy them now.
                unsafe { core::slice::from_raw_parts(p, nd) }.to_vec()
            }
        };
        let info = ViewInfo {
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
        };
        View { pending: Arc::new(Pending::default()), raw, info: Arc::new(info), gate }
    }

    fn create(gate: Option<Arc<()>>, f: impl FnOnce(*mut *mut sys::cuabi_view) -> sys::cuabi_status) -> Result<View> {
        Ok(View::adopt(ViewRaw::create(f)?, gate))
    }

    /// Take ownership of one reference to a raw view.
    ///
    /// # Safety
    /// `ptr` must be a live view handle whose reference the caller owns and
    /// gives up, over memory that nothing writes while the view may read it.
    pub unsafe fn from_raw(ptr: *mut sys::cuabi_view) -> Option<View> {
        // SAFETY: the caller's contract.
        unsafe { ViewRaw::from_raw(ptr) }.map(|raw| View::adopt(raw, None))
    }

    /// The raw handle, still owned by `self`.
    #[inline]
    pub fn as_raw(&self) -> *mut sys::cuabi_view {
        self.raw.as_raw()
    }

    /// A view over a buffer: extents, strides in elements (None = row-major)
    /// from byte `offset`; the view keeps the buffer's memory alive, and, for
    /// host-accessible memory, the buffer's writes refused while it lives.
    pub fn new(buffer: &Buffer, offset: u64, dtype: DType, shape: &[i64], strides: Option<&[i64]>, flags: u32) -> Result<View> {
        if let Some(s) = strides {
            if s.len() != shape.len() {
                return Err(Error::invalid_argument("View::new: strides and shape differ in length"));
            }
        }
        let nd = i32::try_from(shape.len()).map_err(|_| Error::invalid_argument("View::new: too many dimensions"))?;
        let sp = strides.map_or(core::ptr::null(), |s| s.as_ptr());
        let gate = buffer.view_token()?;
        // SAFETY: `buffer` is live; shape and strides are read during the call.
        View::create(Some(gate), |o| unsafe {
            sys::cuabi_view_create(o, buffer.as_raw(), offset, dtype.code, dtype.bits, nd, shape.as_ptr(), sp, flags)
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
        let gate = t.1.clone();
        let p = t.into_raw();
        // SAFETY: `p` is a valid tensor we own; the import takes it over
        // ("its deleter is called exactly once ... or before returning when
        // the import is refused").
        View::create(gate, |o| unsafe { sys::cuabi_view_from_dlpack_versioned(o, p) })
    }

    /// Import a legacy DLManagedTensor, taking ownership likewise.
    pub fn from_dlpack(t: ManagedTensor) -> Result<View> {
        let gate = t.1.clone();
        let p = t.into_raw();
        // SAFETY: as `from_dlpack_versioned`.
        View::create(gate, |o| unsafe { sys::cuabi_view_from_dlpack(o, p) })
    }

    /// View a borrowed DLTensor (shape and strides copied, memory not owned).
    ///
    /// # Safety
    /// The memory must outlive the view and every export of it, and nothing
    /// may write it while they may read it.
    pub unsafe fn from_dltensor(t: &sys::DLTensor, flags: u32) -> Result<View> {
        // SAFETY: the caller's contract; `t` is read during the call.
        View::create(None, |o| unsafe { sys::cuabi_view_from_dltensor(o, t, flags) })
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
    /// held (the producer's function runs Python); nothing may write the
    /// memory while the view may read it.
    pub unsafe fn from_exchange(api: *const sys::DLPackExchangeAPI, py_object: *mut core::ffi::c_void) -> Result<View> {
        // SAFETY: the caller's contract (exchange.h: call with the GIL held).
        View::create(None, |o| unsafe { sys::cuabi_view_from_exchange(o, api, py_object) })
    }

    /// Export as DLPack 1.1; the result keeps the memory alive until dropped.
    pub fn to_dlpack_versioned(&self) -> Result<ManagedTensorVersioned> {
        let mut p = core::ptr::null_mut();
        // SAFETY: `self` is live; `p` a local the call fills with a tensor we then own.
        check(unsafe { sys::cuabi_view_to_dlpack_versioned(&mut p, self.as_raw()) })?;
        NonNull::new(p).map(|p| ManagedTensorVersioned(p, self.gate.clone()))
            .ok_or_else(|| Error::internal("cuabi_view_to_dlpack_versioned returned NULL"))
    }

    /// Export as a legacy DLManagedTensor (refused for read-only views).
    pub fn to_dlpack(&self) -> Result<ManagedTensor> {
        let mut p = core::ptr::null_mut();
        // SAFETY: as `to_dlpack_versioned`.
        check(unsafe { sys::cuabi_view_to_dlpack(&mut p, self.as_raw()) })?;
        NonNull::new(p).map(|p| ManagedTensor(p, self.gate.clone()))
            .ok_or_else(|| Error::internal("cuabi_view_to_dlpack returned NULL"))
    }

    /// A sub-view with per-dimension start/stop/step as Python's
    /// `slice.indices(n)` gives them (step None = all 1).
    pub fn slice(&self, start: &[i64], stop: &[i64], step: Option<&[i64]>) -> Result<View> {
        let nd = start.len();
        if stop.len() != nd || step.is_some_and(|s| s.len() != nd) {
            return Err(Error::invalid_argument("View::slice: start, stop and step differ in length"));
        }
        let nd = i32::try_from(nd).map_err(|_| Error::invalid_argument("View::slice: too many dimensions"))?;
        let sp = step.map_or(core::ptr::null(), |s| s.as_ptr());
        // SAFETY: `self` is live; the arrays are read during the call.
        View::create(self.gate.clone(), |o| unsafe {
            sys::cuabi_view_slice(o, self.as_raw(), nd, start.as_ptr(), stop.as_ptr(), sp)
        })
    }

    /// Everything about the view.
    #[inline]
    pub fn info(&self) -> &ViewInfo {
        &self.info
    }
    /// Address of the first element (what a kernel receives).
    #[inline]
    pub fn data_pointer(&self) -> usize {
        self.info.data.wrapping_add(self.info.byte_offset as usize)
    }
    /// The extents (row-major, outermost first).
    #[inline]
    pub fn shape(&self) -> &[i64] {
        &self.info.shape
    }
    /// The strides, in elements.
    #[inline]
    pub fn strides(&self) -> &[i64] {
        &self.info.strides
    }
    #[inline]
    pub fn ndim(&self) -> usize {
        self.info.shape.len()
    }
    #[inline]
    pub fn dtype(&self) -> DType {
        self.info.dtype
    }
    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.info.size.max(0) as usize
    }
    /// Whether it has no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.info.size <= 0
    }
    pub fn nbytes(&self) -> u64 {
        let mut v = 0u64;
        // SAFETY: `self` is live; `v` a local written during the call.
        infallible(unsafe { sys::cuabi_view_nbytes(&mut v, self.as_raw()) }, "cuabi_view_nbytes");
        v
    }
    pub fn is_c_contiguous(&self) -> bool {
        let mut v = 0;
        // SAFETY: as `nbytes`.
        infallible(unsafe { sys::cuabi_view_is_c_contiguous(&mut v, self.as_raw()) }, "cuabi_view_is_c_contiguous");
        v != 0
    }
    pub fn is_f_contiguous(&self) -> bool {
        let mut v = 0;
        // SAFETY: as `nbytes`.
        infallible(unsafe { sys::cuabi_view_is_f_contiguous(&mut v, self.as_raw()) }, "cuabi_view_is_f_contiguous");
        v != 0
    }
    /// The view as a `view` kernel argument of an [`ArgPack`](crate::ArgPack)
    /// (for `unsafe` launches).
    pub fn arg(&self) -> ViewArg {
        ViewArg(self.as_raw())
    }

    /// Events of queued work not yet waited for (for tests).
    #[doc(hidden)]
    pub fn pending_uses(&self) -> usize {
        self.pending.count()
    }

    /// Record queued work of another module on this view's memory.
    pub(crate) fn after_queued(&self, stream: Option<&Stream>) -> Result<()> {
        match stream {
            Some(s) => self.pending.queued(s, None),
            None => Ok(()),
        }
    }

    fn host_data(&self, what: &str) -> Result<*const u8> {
        let i = &self.info;
        if i.device_type != sys::kDLCPU && i.device_type != sys::kDLCUDAHost {
            return Err(Error::invalid_argument(format!("View::{what}: the view is not in host memory")));
        }
        self.pending.wait_host()?;
        Ok(self.data_pointer() as *const u8)
    }

    /// Copy a host view's elements, in row-major order, into a vector
    /// (any strides). Device memory: copy it to a host buffer first.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let i = &self.info;
        if i.dtype != T::DTYPE {
            return Err(Error::invalid_argument(format!("View::to_vec: the view's dtype is {:?}, not {:?}", i.dtype, T::DTYPE)));
        }
        let base = self.host_data("to_vec")?.cast::<T>();
        let mut out = Vec::with_capacity(i.size.max(0) as usize);
        let nd = i.shape.len();
        let mut idx = vec![0i64; nd];
        for _ in 0..i.size.max(0) {
            let off: i64 = idx.iter().zip(&i.strides).map(|(a, s)| a * s).sum();
            // SAFETY: the library checked every element lies in memory the view
            // keeps alive (view.h); views are immutable and the buffer they may
            // come from refuses writes while they live, so no thread writes it.
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
    /// Nothing may write the memory (through a kernel, a foreign owner of an
    /// imported tensor, or a raw pointer) while the slice lives.
    pub unsafe fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let i = &self.info;
        if i.dtype != T::DTYPE || !self.is_c_contiguous() {
            return Err(Error::invalid_argument("View::as_slice: needs a C-contiguous host view of this element type"));
        }
        let p = self.host_data("as_slice")?.cast::<T>();
        if i.size == 0 {
            return Ok(&[]);
        }
        // SAFETY: contiguous elements the view keeps alive for the borrow of
        // `self`; the caller promises no writer.
        Ok(unsafe { core::slice::from_raw_parts(p, i.size as usize) })
    }
}
