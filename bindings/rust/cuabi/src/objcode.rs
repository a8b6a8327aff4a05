//! Object code and kernels (include/cuabi/objcode.h, kernel.h).
use std::sync::{Arc, OnceLock};

use crate::device::Device;
use crate::enums::{ArgKind, ParamSource};
use crate::error::{c_string, check, cstr, infallible, Result};
use crate::sys;

pub use crate::enums::{CodeType, FunctionAttribute};

shared_handle!(
    /// An immutable code image (CUBIN, PTX, fatbin, LTO-IR), loaded lazily.
    ObjectCode, sys::cuabi_objcode, sys::cuabi_objcode_retain, sys::cuabi_objcode_release
);
// SAFETY: objcode.h: "An objcode may be used from several threads at once";
// it is immutable apart from lazy loading, which the library serialises.
unsafe impl Send for ObjectCode {}
// SAFETY: as for Send.
unsafe impl Sync for ObjectCode {}

handle_core!(
    /// The handle of a [`Kernel`].
    KernelRaw, sys::cuabi_kernel, sys::cuabi_kernel_release
);

/// One entry function of an objcode, which it keeps alive. `Clone` takes
/// another C reference. The parameter types a safe launch checks against
/// are read once per `Kernel` value and kept (shared by its clones).
pub struct Kernel {
    raw: KernelRaw,
    pub(crate) safe: OnceLock<Arc<crate::slice::KernelSig>>,
}
// SAFETY: kernel.h: "A kernel may be used from several threads at once";
// the cached signature is an immutable Arc behind a OnceLock.
unsafe impl Send for Kernel {}
// SAFETY: as for Send.
unsafe impl Sync for Kernel {}

impl Clone for Kernel {
    fn clone(&self) -> Self {
        // SAFETY: `self` owns a reference, so the handle is live; retain takes one for the clone.
        infallible(unsafe { sys::cuabi_kernel_retain(self.raw.as_raw()) }, "cuabi_kernel_retain");
        // SAFETY: the reference just taken is the clone's.
        let raw = unsafe { KernelRaw::from_raw(self.raw.as_raw()) }.expect("a live kernel is not NULL");
        let safe = OnceLock::new();
        if let Some(s) = self.safe.get() {
            let _ = safe.set(s.clone());
        }
        Kernel { raw, safe }
    }
}
impl core::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Kernel({:?}, {})", self.raw.as_raw(), self.name())
    }
}
impl PartialEq for Kernel {
    fn eq(&self, o: &Self) -> bool {
        self.raw == o.raw
    }
}
impl Eq for Kernel {}

impl Kernel {
    /// Take ownership of one reference to a raw kernel.
    ///
    /// # Safety
    /// `ptr` must be a live kernel handle whose reference the caller owns and gives up.
    pub unsafe fn from_raw(ptr: *mut sys::cuabi_kernel) -> Option<Kernel> {
        // SAFETY: the caller's contract.
        unsafe { KernelRaw::from_raw(ptr) }.map(|raw| Kernel { raw, safe: OnceLock::new() })
    }
    /// The raw handle, still owned by `self`.
    #[inline]
    pub fn as_raw(&self) -> *mut sys::cuabi_kernel {
        self.raw.as_raw()
    }
    /// Give up ownership: the caller must release the handle.
    pub fn into_raw(self) -> *mut sys::cuabi_kernel {
        self.raw.into_raw()
    }
    fn create(f: impl FnOnce(*mut *mut sys::cuabi_kernel) -> sys::cuabi_status) -> Result<Kernel> {
        Ok(Kernel { raw: KernelRaw::create(f)?, safe: OnceLock::new() })
    }
}

/// A kernel's needs read from its CUBIN (`cuabi_kernel_resources`).
pub type KernelResources = sys::cuabi_kernel_resources;

pub(crate) fn new_resources() -> Result<KernelResources> {
    let mut r = KernelResources::default();
    // SAFETY: `r` is a local the init function fills.
    check(unsafe { sys::cuabi_kernel_resources_init(&mut r, sys::CUABI_KERNEL_RESOURCES_VERSION) })?;
    Ok(r)
}

fn opt_cstring(what: &str, s: Option<&str>) -> Result<Option<std::ffi::CString>> {
    s.map(|s| c_string(what, s)).transpose()
}

impl ObjectCode {
    /// Copy an image (`CodeType::None` detects the type).
    pub fn from_bytes(ty: impl Into<CodeType>, data: &[u8], name: Option<&str>) -> Result<ObjectCode> {
        let ty: CodeType = ty.into();
        let n = opt_cstring("name", name)?;
        let np = n.as_ref().map_or(core::ptr::null(), |n| n.as_ptr());
        // SAFETY: `data` and the name are read during the call (the objcode copies the image).
        ObjectCode::create(|o| unsafe { sys::cuabi_objcode_from_memory(o, ty.to_raw(), data.as_ptr().cast(), data.len(), np) })
    }
    /// Read a code file.
    pub fn from_file(ty: impl Into<CodeType>, path: &std::path::Path) -> Result<ObjectCode> {
        let ty: CodeType = ty.into();
        let p = c_string("path", &path.to_string_lossy())?;
        // SAFETY: `p` is a NUL-terminated path read during the call.
        ObjectCode::create(|o| unsafe { sys::cuabi_objcode_from_file(o, ty.to_raw(), p.as_ptr()) })
    }
    /// What kind of code it holds.
    pub fn code_type(&self) -> CodeType {
        let mut t = sys::cuabi_code_type::default();
        // SAFETY: `self` is live; `t` is a local written during the call.
        infallible(unsafe { sys::cuabi_objcode_code_type(&mut t, self.as_raw()) }, "cuabi_objcode_code_type");
        t.into()
    }
    /// The image bytes (immutable, alive as long as `self`).
    pub fn bytes(&self) -> &[u8] {
        let (mut p, mut n) = (core::ptr::null(), 0usize);
        // SAFETY: `self` is live; the outs are locals.
        infallible(unsafe { sys::cuabi_objcode_bytes(&mut p, &mut n, self.as_raw()) }, "cuabi_objcode_bytes");
        if n == 0 || p.is_null() {
            &[]
        } else {
            // SAFETY: objcode.h: the image is immutable and lives with the
            // objcode, which the borrow of `self` keeps.
            unsafe { core::slice::from_raw_parts(p.cast(), n) }
        }
    }
    /// Load into the driver now (needs a GPU).
    pub fn load(&self) -> Result<()> {
        // SAFETY: `self` is live for the call.
        check(unsafe { sys::cuabi_objcode_load(self.as_raw()) })
    }
    /// A kernel by entry name or registered name expression.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let n = c_string("kernel name", name)?;
        // SAFETY: `self` is live; `n` is read during the call.
        Kernel::create(|o| unsafe { sys::cuabi_objcode_get_kernel(o, self.as_raw(), n.as_ptr()) })
    }
    /// A kernel by name (cudarc's `load_function`).
    pub fn load_function(&self, name: &str) -> Result<Kernel> {
        self.kernel(name)
    }
    /// Number of kernels.
    pub fn kernel_count(&self) -> usize {
        let mut v = 0usize;
        // SAFETY: `self` is live; `v` a local.
        infallible(unsafe { sys::cuabi_objcode_kernel_count(&mut v, self.as_raw()) }, "cuabi_objcode_kernel_count");
        v
    }
    /// Every kernel's entry name, in the image's symbol order.
    pub fn kernel_names(&self) -> Vec<String> {
        (0..self.kernel_count()).map(|i| {
            let mut p = core::ptr::null();
            // SAFETY: `self` is live and `i` in range; `p` a local.
            infallible(unsafe { sys::cuabi_objcode_kernel_name(&mut p, self.as_raw(), i) }, "cuabi_objcode_kernel_name");
            // SAFETY: a name borrowed from the objcode, alive with `self`; copied now.
            unsafe { cstr(p) }
        }).collect()
    }
    /// The mangled name registered for a name expression.
    pub fn lowered_name(&self, name_expression: &str) -> Result<String> {
        let n = c_string("name expression", name_expression)?;
        let mut p = core::ptr::null();
        // SAFETY: `self` is live; `n` read during the call; `p` a local.
        check(unsafe { sys::cuabi_objcode_lowered_name(&mut p, self.as_raw(), n.as_ptr()) })?;
        // SAFETY: borrowed from the objcode, alive with `self`; copied now.
        Ok(unsafe { cstr(p) })
    }
    /// A kernel's resources from the CUBIN, without a GPU (`arch` None: the image's).
    pub fn kernel_resources(&self, name: &str, arch: Option<&str>) -> Result<KernelResources> {
        let n = c_string("kernel name", name)?;
        let a = opt_cstring("arch", arch)?;
        let mut r = new_resources()?;
        // SAFETY: `self` is live; strings read during the call; `r` a local.
        check(unsafe { sys::cuabi_objcode_kernel_resources(&mut r, self.as_raw(), n.as_ptr(),
                                                          a.as_ref().map_or(core::ptr::null(), |a| a.as_ptr())) })?;
        Ok(r)
    }
    /// SM architecture of a CUBIN (90 for sm_90); 0 for other types.
    pub fn arch(&self) -> i32 {
        let mut v = 0;
        // SAFETY: `self` is live; `v` a local.
        infallible(unsafe { sys::cuabi_objcode_arch(&mut v, self.as_raw()) }, "cuabi_objcode_arch");
        v
    }
}

/// Fatbins (include/cuabi/fatbin.h): one image of CUBINs for several
/// architectures and optional PTX, read offline per architecture.
impl ObjectCode {
    /// Pack CUBIN and PTX objcodes into one fatbin (nvFatbin, else the
    /// `fatbinary` tool).
    pub fn pack_fatbin(images: &[&ObjectCode]) -> Result<ObjectCode> {
        let raw: Vec<*mut sys::cuabi_objcode> = images.iter().map(|i| i.as_raw()).collect();
        // SAFETY: the handles are live (borrowed); the array is read during the call.
        ObjectCode::create(|o| unsafe { sys::cuabi_fatbin_create(o, raw.as_ptr() as *mut _, raw.len()) })
    }
    /// The SM architectures of a fatbin's CUBINs (90 for sm_90), ascending.
    pub fn fatbin_archs(&self) -> Result<Vec<i32>> {
        let mut n = 0usize;
        // SAFETY: a size query: no array, `n` a local.
        check(unsafe { sys::cuabi_fatbin_archs(core::ptr::null_mut(), 0, &mut n, self.as_raw()) })?;
        let mut v = vec![0i32; n];
        // SAFETY: `v` holds `v.len()` values the call writes.
        check(unsafe { sys::cuabi_fatbin_archs(v.as_mut_ptr(), v.len(), &mut n, self.as_raw()) })?;
        v.truncate(n);
        Ok(v)
    }
    /// A fatbin's images: (CUBIN / PTX / LTOIR / NONE, architecture number).
    pub fn fatbin_images(&self) -> Result<Vec<(CodeType, i32)>> {
        let mut n = 0usize;
        // SAFETY: `self` is live; `n` a local.
        check(unsafe { sys::cuabi_fatbin_image_count(&mut n, self.as_raw()) })?;
        (0..n).map(|i| {
            let (mut t, mut a) = (sys::cuabi_code_type::default(), 0);
            // SAFETY: as above; the library checks `i`.
            check(unsafe { sys::cuabi_fatbin_image_info(&mut t, &mut a, self.as_raw(), i) })?;
            Ok((t.into(), a))
        }).collect()
    }
    /// "nvfatbin" or "fatbinary" for a fatbin cuabi made, else "".
    pub fn fatbin_packer(&self) -> Result<String> {
        let mut p = core::ptr::null();
        // SAFETY: `self` is live; `p` a local.
        check(unsafe { sys::cuabi_fatbin_packer(&mut p, self.as_raw()) })?;
        // SAFETY: a string borrowed from the objcode, copied now.
        Ok(unsafe { cstr(p) })
    }
    /// One image of a fatbin: "sm_90" its CUBIN, "compute_90" its PTX.
    pub fn extract(&self, arch: &str) -> Result<ObjectCode> {
        let a = c_string("arch", arch)?;
        // SAFETY: `self` is live; `a` read during the call.
        ObjectCode::create(|o| unsafe { sys::cuabi_fatbin_extract(o, self.as_raw(), a.as_ptr()) })
    }
}

/// What is known of one kernel parameter (`cuabi_kernel_param_type`): its
/// place in the parameter block and its type, learnt from the C++ mangled
/// name, the PTX declaration, or nothing (`source`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamType {
    /// The slot kind `ArgPack::for_kernel` gives it (`ArgKind::Raw` when unknown).
    pub kind: ArgKind,
    pub size: usize,
    pub offset: usize,
    pub source: ParamSource,
    /// The type as its source spells it ("float const*", ".u32"; "" when unknown).
    pub type_name: String,
}

impl Kernel {
    /// The type of parameter `index`, without a GPU where `param_info` works.
    pub fn param_type(&self, index: usize) -> Result<ParamType> {
        let mut t = sys::cuabi_param_type::default();
        // SAFETY: `t` is a local the init function fills.
        check(unsafe { sys::cuabi_param_type_init(&mut t, sys::CUABI_PARAM_TYPE_VERSION) })?;
        // SAFETY: `self` is live; the library checks `index` and fills `t`.
        check(unsafe { sys::cuabi_kernel_param_type(&mut t, self.as_raw(), index) })?;
        Ok(ParamType { kind: t.kind.into(), size: t.size, offset: t.offset, source: t.source.into(),
                       // SAFETY: argpack.h: type_name is "Borrowed: valid while
                       // the kernel lives" -- `self` does; copied now.
                       type_name: unsafe { cstr(t.type_name) } })
    }
    /// Every parameter's type.
    pub fn param_types(&self) -> Result<Vec<ParamType>> {
        (0..self.param_count()?).map(|i| self.param_type(i)).collect()
    }
    /// The parameter types joined with ", " ("?" where unknown).
    pub fn signature(&self) -> Result<String> {
        let mut p = core::ptr::null();
        // SAFETY: `self` is live; `p` a local.
        check(unsafe { sys::cuabi_kernel_signature(&mut p, self.as_raw()) })?;
        // SAFETY: borrowed, "valid while the kernel lives"; copied now.
        Ok(unsafe { cstr(p) })
    }
    /// The (lowered) entry name.
    pub fn name(&self) -> String {
        let mut p = core::ptr::null();
        // SAFETY: `self` is live; `p` a local.
        infallible(unsafe { sys::cuabi_kernel_name(&mut p, self.as_raw()) }, "cuabi_kernel_name");
        // SAFETY: borrowed from the kernel, alive with `self`; copied now.
        unsafe { cstr(p) }
    }
    /// The objcode (a new reference).
    pub fn objcode(&self) -> ObjectCode {
        let mut p = core::ptr::null_mut();
        // SAFETY: `self` is live; `p` a local.
        infallible(unsafe { sys::cuabi_kernel_objcode(&mut p, self.as_raw()) }, "cuabi_kernel_objcode");
        // SAFETY: `p` is the live objcode the kernel keeps; retain takes our own reference.
        infallible(unsafe { sys::cuabi_objcode_retain(p) }, "cuabi_objcode_retain");
        // SAFETY: the reference just taken is ours.
        unsafe { ObjectCode::from_raw(p) }.expect("a kernel's objcode is not NULL")
    }
    /// A CUfunction_attribute on a device (needs a GPU).
    pub fn attribute(&self, device: &Device, attribute: impl Into<FunctionAttribute>) -> Result<i32> {
        let mut v = 0;
        // SAFETY: both handles are live; `v` a local.
        check(unsafe { sys::cuabi_kernel_attribute(&mut v, self.as_raw(), device.as_raw(), attribute.into().to_raw()) })?;
        Ok(v)
    }
    /// Set a settable CUfunction_attribute on a device (needs a GPU).
    pub fn set_attribute(&self, device: &Device, attribute: impl Into<FunctionAttribute>, value: i32) -> Result<()> {
        // SAFETY: both handles are live (kernel.h: usable from several threads at once).
        check(unsafe { sys::cuabi_kernel_set_attribute(self.as_raw(), device.as_raw(), attribute.into().to_raw(), value) })
    }
    /// Number of parameters.
    pub fn param_count(&self) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: `self` is live; `v` a local.
        check(unsafe { sys::cuabi_kernel_param_count(&mut v, self.as_raw()) })?;
        Ok(v)
    }
    /// (offset, size) of parameter `index` in the parameter block.
    pub fn param_info(&self, index: usize) -> Result<(usize, usize)> {
        let (mut o, mut s) = (0usize, 0usize);
        // SAFETY: `self` is live; the library checks `index`; locals written.
        check(unsafe { sys::cuabi_kernel_param_info(&mut o, &mut s, self.as_raw(), index) })?;
        Ok((o, s))
    }
    /// Resources from the CUBIN, without a GPU.
    pub fn resources(&self) -> Result<KernelResources> {
        let mut r = new_resources()?;
        // SAFETY: `self` is live; `r` a local.
        check(unsafe { sys::cuabi_kernel_get_resources(&mut r, self.as_raw()) })?;
        Ok(r)
    }
    /// The CUkernel (needs a GPU).
    pub fn raw(&self) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: `self` is live; `v` a local.
        check(unsafe { sys::cuabi_kernel_raw(&mut v, self.as_raw()) })?;
        Ok(v)
    }
    /// The CUfunction in the device's primary context (needs a GPU).
    pub fn function(&self, device: &Device) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: both handles are live; `v` a local.
        check(unsafe { sys::cuabi_kernel_function(&mut v, self.as_raw(), device.as_raw()) })?;
        Ok(v)
    }
}
