//! The linker: nvJitLink (include/cuabi/linker.h).
use crate::enums::CodeType;
use crate::error::{c_string, check, cstr, infallible, Result};
use crate::objcode::ObjectCode;
use crate::sys;
use std::ffi::CString;

handle_core!(
    /// One nvJitLink session (single owner).
    Linker, sys::cuabi_linker, sys::cuabi_linker_destroy
);
// SAFETY: linker.h: "A linker is used by one thread at a time": it may move
// between threads (Send) but not be shared (no Sync).
unsafe impl Send for Linker {}

impl LinkerOptions {
    pub fn new() -> Self { Self::default() }
    pub fn arch(mut self, a: &str) -> Self { self.arch = Some(a.into()); self }
    pub fn lto(mut self, on: bool) -> Self { self.lto = on; self }
    pub fn optimization(mut self, level: i32) -> Self { self.optimization = Some(level); self }
    pub fn debug(mut self, on: bool) -> Self { self.debug = on; self }
    pub fn verbose(mut self, on: bool) -> Self { self.verbose = on; self }
    pub fn option(mut self, o: &str) -> Self { self.extra_options.push(o.into()); self }
    pub fn no_cache(mut self, on: bool) -> Self { self.no_cache = on; self }
}

/// How to link. Tri-state options are `None` for nvJitLink's default.
#[derive(Clone, Debug, Default)]
pub struct LinkerOptions {
    /// "sm_90"...; None: the first device's, or sm_90 without a GPU.
    /// A comma-separated list ("sm_80,sm_90") links once per architecture into a fatbin.
    pub arch: Option<String>,
    /// Link-time optimisation: needed for LTO-IR inputs.
    pub lto: bool,
    /// 0..3; None for the default.
    pub optimization: Option<i32>,
    pub debug: bool,
    pub line_info: bool,
    pub ftz: Option<bool>,
    pub prec_div: Option<bool>,
    pub prec_sqrt: Option<bool>,
    pub fma: Option<bool>,
    /// 0 for no limit.
    pub max_registers: i32,
    pub verbose: bool,
    pub extra_options: Vec<String>,
    /// Bypass the compile cache (always run nvJitLink, store nothing).
    pub no_cache: bool,
}

fn tri(v: Option<bool>) -> i32 {
    v.map_or(-1, i32::from)
}

impl Linker {
    pub fn new(options: &LinkerOptions) -> Result<Linker> {
        let mut o = sys::cuabi_linker_options::default();
        // SAFETY: `o` is a local the init function fills.
        check(unsafe { sys::cuabi_linker_options_init(&mut o, sys::CUABI_LINKER_OPTIONS_VERSION) })?;
        let arch = options.arch.as_deref().map(|a| c_string("arch", a)).transpose()?;
        let extra = options.extra_options.iter().map(|s| c_string("linker option", s)).collect::<Result<Vec<CString>>>()?;
        let extra_p: Vec<*const core::ffi::c_char> = extra.iter().map(|s| s.as_ptr()).collect();
        o.arch = arch.as_ref().map_or(core::ptr::null(), |a| a.as_ptr());
        o.lto = i32::from(options.lto);
        o.optimization = options.optimization.unwrap_or(-1);
        o.debug = i32::from(options.debug);
        o.line_info = i32::from(options.line_info);
        o.ftz = tri(options.ftz);
        o.prec_div = tri(options.prec_div);
        o.prec_sqrt = tri(options.prec_sqrt);
        o.fma = tri(options.fma);
        o.max_registers = options.max_registers;
        o.verbose = i32::from(options.verbose);
        o.extra_options = if extra_p.is_empty() { core::ptr::null_mut() } else { extra_p.as_ptr() as *mut _ };
        o.extra_option_count = extra_p.len();
        o.cache = i32::from(!options.no_cache);
        // SAFETY: `o` and the strings it points into are read during the call
        // (common.h: pointers are used during the call unless said otherwise).
        Linker::create(|out| unsafe { sys::cuabi_linker_create(out, &o) })
    }
    /// Add an input from memory (`CUABI_CODE_NONE` detects the type).
    pub fn add_data(&mut self, ty: impl Into<CodeType>, data: &[u8], name: Option<&str>) -> Result<()> {
        let n = name.map(|n| c_string("name", n)).transpose()?;
        // SAFETY: the linker is live and exclusively borrowed; `data` is copied during the call.
        check(unsafe { sys::cuabi_linker_add_data(self.as_raw(), ty.into().to_raw(), data.as_ptr().cast(), data.len(),
                                                  n.as_ref().map_or(core::ptr::null(), |n| n.as_ptr())) })
    }
    pub fn add_file(&mut self, ty: impl Into<CodeType>, path: &std::path::Path) -> Result<()> {
        let p = c_string("path", &path.to_string_lossy())?;
        // SAFETY: as add_data; `p` is read during the call.
        check(unsafe { sys::cuabi_linker_add_file(self.as_raw(), ty.into().to_raw(), p.as_ptr()) })
    }
    pub fn add_objcode(&mut self, code: &ObjectCode) -> Result<()> {
        // SAFETY: both handles are live; the linker exclusively borrowed.
        check(unsafe { sys::cuabi_linker_add_objcode(self.as_raw(), code.as_raw()) })
    }
    /// Finish: a CUBIN or PTX objcode. A failed link's error has the log.
    pub fn complete(&mut self, output: impl Into<CodeType>) -> Result<ObjectCode> {
        let output: CodeType = output.into();
        // SAFETY: the linker is live and exclusively borrowed.
        ObjectCode::create(|o| unsafe { sys::cuabi_linker_complete(o, self.as_raw(), output.to_raw()) })
    }
    pub fn info_log(&self) -> String {
        let mut p = core::ptr::null();
        // SAFETY: the linker is live; `p` a local.
        infallible(unsafe { sys::cuabi_linker_info_log(&mut p, self.as_raw()) }, "cuabi_linker_info_log");
        // SAFETY: kept on the linker, which `&self` keeps unchanged; copied now.
        unsafe { cstr(p) }
    }
    pub fn error_log(&self) -> String {
        let mut p = core::ptr::null();
        // SAFETY: as info_log.
        infallible(unsafe { sys::cuabi_linker_error_log(&mut p, self.as_raw()) }, "cuabi_linker_error_log");
        // SAFETY: as info_log.
        unsafe { cstr(p) }
    }
    /// Where the output came from: 0 linked by nvJitLink (or not completed), 1 memory cache, 2 disk cache.
    pub fn cache_hit(&self) -> i32 {
        let mut v = 0;
        // SAFETY: the linker is live; `v` a local.
        infallible(unsafe { sys::cuabi_linker_cache_hit(&mut v, self.as_raw()) }, "cuabi_linker_cache_hit");
        v
    }
}
