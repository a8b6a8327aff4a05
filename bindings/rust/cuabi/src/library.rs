//! Versions, what the library found at run time, and the layout check.
use crate::error::{c_string, check, cstr, static_str, Error, Result};
use crate::sys;

/// cuabi's version, "MAJOR.MINOR.PATCH".
pub fn version() -> &'static str {
    // SAFETY: library.h: "the strings they return live as long as the process".
    static_str(unsafe { sys::cuabi_version_string() })
}

/// cuabi's version as 0xMMmmpp.
pub fn version_hex() -> u32 {
    // SAFETY: no arguments; library.h: callable from any thread at once.
    unsafe { sys::cuabi_version_hex() }
}

/// The library's ABI version (the soname major).
pub fn abi_version() -> u32 {
    // SAFETY: as version_hex.
    unsafe { sys::cuabi_abi_version() }
}

/// The CUDA libraries cuabi found (see `cuabi_runtime_info`).
#[derive(Clone, Debug)]
pub struct RuntimeInfo {
    pub library_version: String,
    pub abi_version: u32,
    /// Ok when the driver loaded and initialised; else why not.
    pub driver: std::result::Result<(), Error>,
    pub driver_version: i32,
    pub driver_path: String,
    pub nvrtc: std::result::Result<(), Error>,
    pub nvrtc_version: i32,
    pub nvrtc_path: String,
    pub nvjitlink: std::result::Result<(), Error>,
    pub nvjitlink_version: i32,
    pub nvjitlink_path: String,
    /// Ok when libNVVM (NVVM IR programs) loaded; else why not.
    pub nvvm: std::result::Result<(), Error>,
    /// libNVVM's own version (2000 = 2.0), not the CUDA version.
    pub nvvm_version: i32,
    pub nvvm_path: String,
    /// Ok when nvFatbin loaded; else why not (fatbins then go through the fatbinary tool).
    pub nvfatbin: std::result::Result<(), Error>,
    pub nvfatbin_version: i32,
    pub nvfatbin_path: String,
}

fn component(status: sys::cuabi_status, why: String) -> std::result::Result<(), Error> {
    if status == sys::CUABI_SUCCESS { Ok(()) } else { Err(Error::bare(status, why)) }
}

/// Load the driver, NVRTC, nvJitLink, libNVVM and nvFatbin (once) and report what was found.
pub fn runtime_info() -> Result<RuntimeInfo> {
    let mut raw = sys::cuabi_runtime_info::default();
    // SAFETY: `raw` is a local the init function fills.
    check(unsafe { sys::cuabi_runtime_info_init(&mut raw, sys::CUABI_RUNTIME_INFO_VERSION) })?;
    // SAFETY: as above; the strings it points to live as long as the process
    // (library.h), and are copied below.
    check(unsafe { sys::cuabi_runtime_info_get(&mut raw) })?;
    // SAFETY: as above: strings of the process's lifetime (or NULL).
    unsafe {
        Ok(RuntimeInfo {
            library_version: cstr(raw.library_version),
            abi_version: raw.abi_version,
            driver: component(raw.driver_status, cstr(raw.driver_error)),
            driver_version: raw.driver_version,
            driver_path: cstr(raw.driver_path),
            nvrtc: component(raw.nvrtc_status, cstr(raw.nvrtc_error)),
            nvrtc_version: raw.nvrtc_version,
            nvrtc_path: cstr(raw.nvrtc_path),
            nvjitlink: component(raw.nvjitlink_status, cstr(raw.nvjitlink_error)),
            nvjitlink_version: raw.nvjitlink_version,
            nvjitlink_path: cstr(raw.nvjitlink_path),
            nvvm: component(raw.nvvm_status, cstr(raw.nvvm_error)),
            nvvm_version: raw.nvvm_version,
            nvvm_path: cstr(raw.nvvm_path),
            nvfatbin: component(raw.nvfatbin_status, cstr(raw.nvfatbin_error)),
            nvfatbin_version: raw.nvfatbin_version,
            nvfatbin_path: cstr(raw.nvfatbin_path),
        })
    }
}

/// The library's sizeof() of a public struct.
pub fn struct_size(name: &str) -> Result<usize> {
    let c = c_string("struct name", name)?;
    let mut out = 0usize;
    // SAFETY: `c` is read during the call; `out` a local.
    check(unsafe { sys::cuabi_struct_size(&mut out, c.as_ptr()) })?;
    Ok(out)
}

/// The library's offsetof() of a public struct's field.
pub fn struct_field_offset(name: &str, field: &str) -> Result<usize> {
    let c = c_string("struct name", name)?;
    let f = c_string("field name", field)?;
    let mut out = 0usize;
    // SAFETY: the names are read during the call; `out` a local.
    check(unsafe { sys::cuabi_struct_field_offset(&mut out, c.as_ptr(), f.as_ptr()) })?;
    Ok(out)
}

/// Compare every struct layout of cuabi-sys with the loaded library's; an
/// error names the first mismatch (a library built from another API version).
pub fn check_layouts() -> Result<()> {
    for (name, size, fields) in sys::LAYOUTS {
        let lib = struct_size(name)?;
        if lib != *size {
            return Err(Error::bare(sys::CUABI_ERROR_INVALID_VERSION,
                format!("cuabi::check_layouts: sizeof({name}) is {lib} in the library but {size} in cuabi-sys; rebuild the bindings against this library")));
        }
        for (field, off) in fields.iter() {
            let lib = struct_field_offset(name, field)?;
            if lib != *off {
                return Err(Error::bare(sys::CUABI_ERROR_INVALID_VERSION,
                    format!("cuabi::check_layouts: offsetof({name}, {field}) is {lib} in the library but {off} in cuabi-sys")));
            }
        }
    }
    Ok(())
}
