//! Object code and kernels (include/cuabi/objcode.h, kernel.h).
use crate::device::Device;
use crate::error::{c_string, check, cstr, Error, Result};
use crate::sys;

shared_handle!(
    /// An immutable code image (CUBIN, PTX, fatbin, LTO-IR), loaded lazily.
    ObjectCode, sys::cuabi_objcode, sys::cuabi_objcode_retain, sys::cuabi_objcode_release
);
shared_handle!(
    /// One entry function of an objcode, which it keeps alive.
    Kernel, sys::cuabi_kernel, sys::cuabi_kernel_retain, sys::cuabi_kernel_release
);
// SAFETY: objcode.h / kernel.h: "may be used from several threads at once";
// both are immutable apart from lazy loading, which the library serialises.
unsafe impl Send for ObjectCode {}
unsafe impl Sync for ObjectCode {}
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

/// Kind of code (`cuabi_code_type`).
pub type CodeType = sys::cuabi_code_type;
/// A kernel's needs read from its CUBIN (`cuabi_kernel_resources`).
pub type KernelResources = sys::cuabi_kernel_resources;

pub(crate) fn new_resources() -> Result<KernelResources> {
    let mut r = KernelResources::default();
    check(unsafe { sys::cuabi_kernel_resources_init(&mut r, sys::CUABI_KERNEL_RESOURCES_VERSION) })?;
    Ok(r)
}

fn opt_cstring(what: &str, s: Option<&str>) -> Result<Option<std::ffi::CString>> {
    s.map(|s| c_string(what, s)).transpose()
}

impl ObjectCode {
    /// Copy an image (`CUABI_CODE_NONE` detects the type).
    pub fn from_bytes(ty: CodeType, data: &[u8], name: Option<&str>) -> Result<ObjectCode> {
        let n = opt_cstring("name", name)?;
        let np = n.as_ref().map_or(core::ptr::null(), |n| n.as_ptr());
        ObjectCode::create(|o| unsafe { sys::cuabi_objcode_from_memory(o, ty, data.as_ptr().cast(), data.len(), np) })
    }
    /// Read a code file.
    pub fn from_file(ty: CodeType, path: &std::path::Path) -> Result<ObjectCode> {
        let p = c_string("path", &path.to_string_lossy())?;
        ObjectCode::create(|o| unsafe { sys::cuabi_objcode_from_file(o, ty, p.as_ptr()) })
    }
    pub fn code_type(&self) -> Result<CodeType> {
        let mut t = CodeType::default();
        check(unsafe { sys::cuabi_objcode_code_type(&mut t, self.as_raw()) })?;
        Ok(t)
    }
    /// The image bytes (immutable, alive as long as `self`).
    pub fn bytes(&self) -> Result<&[u8]> {
        let (mut p, mut n) = (core::ptr::null(), 0usize);
        check(unsafe { sys::cuabi_objcode_bytes(&mut p, &mut n, self.as_raw()) })?;
        Ok(if n == 0 { &[] } else { unsafe { core::slice::from_raw_parts(p.cast(), n) } })
    }
    /// Load into the driver now (needs a GPU).
    pub fn load(&self) -> Result<()> {
        check(unsafe { sys::cuabi_objcode_load(self.as_raw()) })
    }
    /// A kernel by entry name or registered name expression.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let n = c_string("kernel name", name)?;
        Kernel::create(|o| unsafe { sys::cuabi_objcode_get_kernel(o, self.as_raw(), n.as_ptr()) })
    }
    pub fn kernel_count(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_objcode_kernel_count(&mut v, self.as_raw()) })?;
        Ok(v)
    }
    /// Every kernel's entry name, in the image's symbol order.
    pub fn kernel_names(&self) -> Result<Vec<String>> {
        (0..self.kernel_count()?).map(|i| {
            let mut p = core::ptr::null();
            check(unsafe { sys::cuabi_objcode_kernel_name(&mut p, self.as_raw(), i) })?;
            Ok(unsafe { cstr(p) })
        }).collect()
    }
    /// The mangled name registered for a name expression.
    pub fn lowered_name(&self, name_expression: &str) -> Result<String> {
        let n = c_string("name expression", name_expression)?;
        let mut p = core::ptr::null();
        check(unsafe { sys::cuabi_objcode_lowered_name(&mut p, self.as_raw(), n.as_ptr()) })?;
        Ok(unsafe { cstr(p) })
    }
    /// A kernel's resources from the CUBIN, without a GPU (`arch` None: the image's).
    pub fn kernel_resources(&self, name: &str, arch: Option<&str>) -> Result<KernelResources> {
        let n = c_string("kernel name", name)?;
        let a = opt_cstring("arch", arch)?;
        let mut r = new_resources()?;
        check(unsafe { sys::cuabi_objcode_kernel_resources(&mut r, self.as_raw(), n.as_ptr(),
                                                          a.as_ref().map_or(core::ptr::null(), |a| a.as_ptr())) })?;
        Ok(r)
    }
    /// SM architecture of a CUBIN (90 for sm_90); 0 for other types.
    pub fn arch(&self) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::cuabi_objcode_arch(&mut v, self.as_raw()) })?;
        Ok(v)
    }
}

/// Fatbins (include/cuabi/fatbin.h): one image of CUBINs for several
/// architectures and optional PTX, read offline per architecture.
impl ObjectCode {
    /// Pack CUBIN and PTX objcodes into one fatbin (nvFatbin, else the
    /// `fatbinary` tool).
    pub fn pack_fatbin(images: &[&ObjectCode]) -> Result<ObjectCode> {
        let raw: Vec<*mut sys::cuabi_objcode> = images.iter().map(|i| i.as_raw()).collect();
        ObjectCode::create(|o| unsafe { sys::cuabi_fatbin_create(o, raw.as_ptr() as *mut _, raw.len()) })
    }
    /// The SM architectures of a fatbin's CUBINs (90 for sm_90), ascending.
    pub fn fatbin_archs(&self) -> Result<Vec<i32>> {
        let mut n = 0usize;
        check(unsafe { sys::cuabi_fatbin_archs(core::ptr::null_mut(), 0, &mut n, self.as_raw()) })?;
        let mut v = vec![0i32; n];
        check(unsafe { sys::cuabi_fatbin_archs(v.as_mut_ptr(), v.len(), &mut n, self.as_raw()) })?;
        v.truncate(n);
        Ok(v)
    }
    /// A fatbin's images: (CUBIN / PTX / LTOIR / NONE, architecture number).
    pub fn fatbin_images(&self) -> Result<Vec<(CodeType, i32)>> {
        let mut n = 0usize;
        check(unsafe { sys::cuabi_fatbin_image_count(&mut n, self.as_raw()) })?;
        (0..n).map(|i| {
            let (mut t, mut a) = (CodeType::default(), 0);
            check(unsafe { sys::cuabi_fatbin_image_info(&mut t, &mut a, self.as_raw(), i) })?;
            Ok((t, a))
        }).collect()
    }
    /// "nvfatbin" or "fatbinary" for a fatbin cuabi made, else "".
    pub fn fatbin_packer(&self) -> Result<String> {
        let mut p = core::ptr::null();
        check(unsafe { sys::cuabi_fatbin_packer(&mut p, self.as_raw()) })?;
        Ok(unsafe { cstr(p) })
    }
    /// One image of a fatbin: "sm_90" its CUBIN, "compute_90" its PTX.
    pub fn extract(&self, arch: &str) -> Result<ObjectCode> {
        let a = c_string("arch", arch)?;
        ObjectCode::create(|o| unsafe { sys::cuabi_fatbin_extract(o, self.as_raw(), a.as_ptr()) })
    }
}

/// What is known of one kernel parameter (`cuabi_kernel_param_type`): its
/// place in the parameter block and its type, learnt from the C++ mangled
/// name, the PTX declaration, or nothing (`source`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamType {
    /// The slot kind `ArgPack::for_kernel` gives it (`CUABI_ARG_RAW` when unknown).
    pub kind: sys::cuabi_arg_kind,
    pub size: usize,
    pub offset: usize,
    pub source: sys::cuabi_param_source,
    /// The type as its source spells it ("float const*", ".u32"; "" when unknown).
    pub type_name: String,
}

impl Kernel {
    /// The type of parameter `index`, without a GPU where `param_info` works.
    pub fn param_type(&self, index: usize) -> Result<ParamType> {
        let mut t = core::mem::MaybeUninit::<sys::cuabi_param_type>::zeroed();
        // SAFETY: the init function fills the struct; the library then fills it
        // and type_name points into the kernel, which `self` keeps alive here.
        unsafe {
            check(sys::cuabi_param_type_init(t.as_mut_ptr(), sys::CUABI_PARAM_TYPE_VERSION))?;
            check(sys::cuabi_kernel_param_type(t.as_mut_ptr(), self.as_raw(), index))?;
            let t = t.assume_init();
            Ok(ParamType { kind: t.kind, size: t.size, offset: t.offset, source: t.source,
                           type_name: cstr(t.type_name) })
        }
    }
    /// Every parameter's type.
    pub fn param_types(&self) -> Result<Vec<ParamType>> {
        (0..self.param_count()?).map(|i| self.param_type(i)).collect()
    }
    /// The parameter types joined with ", " ("?" where unknown).
    pub fn signature(&self) -> Result<String> {
        let mut p = core::ptr::null();
        check(unsafe { sys::cuabi_kernel_signature(&mut p, self.as_raw()) })?;
        Ok(unsafe { cstr(p) })
    }
    /// The (lowered) entry name.
    pub fn name(&self) -> Result<String> {
        let mut p = core::ptr::null();
        check(unsafe { sys::cuabi_kernel_name(&mut p, self.as_raw()) })?;
        Ok(unsafe { cstr(p) })
    }
    /// The objcode (a new reference).
    pub fn objcode(&self) -> Result<ObjectCode> {
        let mut p = core::ptr::null_mut();
        check(unsafe { sys::cuabi_kernel_objcode(&mut p, self.as_raw()) })?;
        check(unsafe { sys::cuabi_objcode_retain(p) })?;
        unsafe { ObjectCode::from_raw(p) }.ok_or_else(|| Error::internal("cuabi_kernel_objcode returned NULL"))
    }
    /// A CUfunction_attribute on a device (needs a GPU).
    pub fn attribute(&self, device: &Device, attribute: i32) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::cuabi_kernel_attribute(&mut v, self.as_raw(), device.as_raw(), attribute) })?;
        Ok(v)
    }
    /// Set a settable CUfunction_attribute on a device (needs a GPU).
    pub fn set_attribute(&self, device: &Device, attribute: i32, value: i32) -> Result<()> {
        check(unsafe { sys::cuabi_kernel_set_attribute(self.as_raw(), device.as_raw(), attribute, value) })
    }
    pub fn param_count(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_kernel_param_count(&mut v, self.as_raw()) })?;
        Ok(v)
    }
    /// (offset, size) of parameter `index` in the parameter block.
    pub fn param_info(&self, index: usize) -> Result<(usize, usize)> {
        let (mut o, mut s) = (0usize, 0usize);
        check(unsafe { sys::cuabi_kernel_param_info(&mut o, &mut s, self.as_raw(), index) })?;
        Ok((o, s))
    }
    /// Resources from the CUBIN, without a GPU.
    pub fn resources(&self) -> Result<KernelResources> {
        let mut r = new_resources()?;
        check(unsafe { sys::cuabi_kernel_get_resources(&mut r, self.as_raw()) })?;
        Ok(r)
    }
    /// The CUkernel (needs a GPU).
    pub fn raw(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_kernel_raw(&mut v, self.as_raw()) })?;
        Ok(v)
    }
    /// The CUfunction in the device's primary context (needs a GPU).
    pub fn function(&self, device: &Device) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_kernel_function(&mut v, self.as_raw(), device.as_raw()) })?;
        Ok(v)
    }
}
