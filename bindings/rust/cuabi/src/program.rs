//! Programs: CUDA C++ / PTX / NVVM IR compiled through NVRTC, nvJitLink or libNVVM
//! (include/cuabi/program.h).
use crate::enums::CodeType;
use crate::error::{c_string, check, cstr, infallible, Result};
use crate::objcode::ObjectCode;
use crate::sys;
use core::ffi::c_char;
use std::ffi::CString;

handle_core!(
    /// Source code and the results of its last compile.
    ///
    /// Not `Clone`: the log and lowered names the C side hands out are valid
    /// only until the program's next compile, so compiling takes `&mut self`
    /// and the readers (`&self`) copy them out; no compile can run while a
    /// reader does, on any thread.
    Program, sys::cuabi_program, sys::cuabi_program_release
);
// SAFETY: program.h: "A program may be used from several threads; compiles
// of one program are serialised, and the log and lowered-name pointers it
// hands out stay valid until its next compile or its last release." Compiles
// take `&mut self` and the pointers are copied before the borrow ends.
unsafe impl Send for Program {}
// SAFETY: as for Send: `&Program` only reads (log, lowered names, cache hit).
unsafe impl Sync for Program {}

/// How to compile (see `cuabi_program_options`); `Default` = the C defaults.
#[derive(Clone, Debug)]
pub struct ProgramOptions {
    /// "sm_90", "compute_90"...; None: the current device's, or sm_90 without a GPU.
    /// For a fatbin, a comma-separated list: "sm_80,sm_90,compute_90".
    pub arch: Option<String>,
    /// CUBIN, PTX, LTOIR or FATBIN (NVVM IR: PTX or LTOIR).
    pub output: CodeType,
    pub std: Option<String>,
    /// 0..3, or -1 for the default.
    pub opt_level: i32,
    pub debug: bool,
    pub line_info: bool,
    pub fast_math: bool,
    pub relocatable: bool,
    pub lto: bool,
    pub defines: Vec<String>,
    pub include_paths: Vec<String>,
    /// In-memory headers: (name used by #include, contents).
    pub headers: Vec<(String, String)>,
    /// E.g. "segred<float, 256>": instantiated and looked up by the same text.
    pub name_expressions: Vec<String>,
    pub extra_options: Vec<String>,
    /// Use the compile cache (when enabled).
    pub cache: bool,
    /// NVVM IR only: link libdevice (`__nv_expf` and the other math functions).
    pub libdevice: bool,
}

impl Default for ProgramOptions {
    fn default() -> Self {
        ProgramOptions {
            arch: None, output: CodeType::Cubin, std: None, opt_level: -1, debug: false,
            line_info: false, fast_math: false, relocatable: false, lto: false, defines: vec![],
            include_paths: vec![], headers: vec![], name_expressions: vec![], extra_options: vec![], cache: true,
            libdevice: false,
        }
    }
}

/// A `cuabi_program_options` with the C strings it points into.
pub(crate) struct CProgramOptions {
    pub raw: sys::cuabi_program_options,
    _strings: Vec<CString>,
    _arrays: Vec<Vec<*const c_char>>,
}

impl ProgramOptions {
    pub fn new() -> Self {
        Self::default()
    }
    /// Builder-style helpers for the common fields.
    pub fn arch(mut self, a: &str) -> Self { self.arch = Some(a.into()); self }
    pub fn output(mut self, o: impl Into<CodeType>) -> Self { self.output = o.into(); self }
    pub fn std(mut self, s: &str) -> Self { self.std = Some(s.into()); self }
    pub fn opt_level(mut self, l: i32) -> Self { self.opt_level = l; self }
    pub fn debug(mut self, on: bool) -> Self { self.debug = on; self }
    pub fn line_info(mut self, on: bool) -> Self { self.line_info = on; self }
    pub fn fast_math(mut self, on: bool) -> Self { self.fast_math = on; self }
    pub fn relocatable(mut self, on: bool) -> Self { self.relocatable = on; self }
    pub fn lto(mut self, on: bool) -> Self { self.lto = on; self }
    pub fn include_path(mut self, p: &str) -> Self { self.include_paths.push(p.into()); self }
    pub fn option(mut self, o: &str) -> Self { self.extra_options.push(o.into()); self }
    pub fn cache(mut self, on: bool) -> Self { self.cache = on; self }
    pub fn name_expression(mut self, e: &str) -> Self { self.name_expressions.push(e.into()); self }
    pub fn define(mut self, d: &str) -> Self { self.defines.push(d.into()); self }
    pub fn header(mut self, name: &str, contents: &str) -> Self { self.headers.push((name.into(), contents.into())); self }
    pub fn libdevice(mut self, on: bool) -> Self { self.libdevice = on; self }

    pub(crate) fn to_c(&self) -> Result<CProgramOptions> {
        let mut o = sys::cuabi_program_options::default();
        // SAFETY: `o` is a local the init function fills.
        check(unsafe { sys::cuabi_program_options_init(&mut o, sys::CUABI_PROGRAM_OPTIONS_VERSION) })?;
        let mut strings = Vec::new();
        let mut arrays: Vec<Vec<*const c_char>> = Vec::new();
        let mut one = |what: &str, s: &Option<String>| -> Result<*const c_char> {
            Ok(match s {
                Some(s) => { let c = c_string(what, s)?; let p = c.as_ptr(); strings.push(c); p }
                None => core::ptr::null(),
            })
        };
        o.arch = one("arch", &self.arch)?;
        o.std = one("std", &self.std)?;
        let mut list = |what: &str, v: &[&String]| -> Result<(*mut *const c_char, usize)> {
            if v.is_empty() { return Ok((core::ptr::null_mut(), 0)); }
            let cs = v.iter().map(|s| c_string(what, s)).collect::<Result<Vec<_>>>()?;
            let ps: Vec<*const c_char> = cs.iter().map(|c| c.as_ptr()).collect();
            strings.extend(cs);
            let p = ps.as_ptr() as *mut _;
            arrays.push(ps); // moving the Vec keeps its heap block where it is
            Ok((p, v.len()))
        };
        (o.defines, o.num_defines) = list("define", &self.defines.iter().collect::<Vec<_>>())?;
        (o.include_paths, o.num_include_paths) = list("include path", &self.include_paths.iter().collect::<Vec<_>>())?;
        let names: Vec<&String> = self.headers.iter().map(|h| &h.0).collect();
        let bodies: Vec<&String> = self.headers.iter().map(|h| &h.1).collect();
        (o.header_names, o.num_headers) = list("header name", &names)?;
        (o.header_contents, _) = list("header contents", &bodies)?;
        (o.name_expressions, o.num_name_expressions) = list("name expression", &self.name_expressions.iter().collect::<Vec<_>>())?;
        (o.extra_options, o.num_extra_options) = list("option", &self.extra_options.iter().collect::<Vec<_>>())?;
        o.output = self.output.to_raw();
        o.opt_level = self.opt_level;
        o.debug = i32::from(self.debug);
        o.line_info = i32::from(self.line_info);
        o.fast_math = i32::from(self.fast_math);
        o.relocatable = i32::from(self.relocatable);
        o.lto = i32::from(self.lto);
        o.cache = i32::from(self.cache);
        o.libdevice = i32::from(self.libdevice);
        Ok(CProgramOptions { raw: o, _strings: strings, _arrays: arrays })
    }
}

impl Program {
    /// CUDA C++ source (`name` shown in the log).
    pub fn new(source: &str, name: Option<&str>) -> Result<Program> {
        Program::with_type(sys::CUABI_CODE_CUDA_CXX, source, name)
    }
    /// CUDA C++ (`CUABI_CODE_CUDA_CXX`) or PTX (`CUABI_CODE_PTX`) source.
    pub fn with_type(ty: impl Into<CodeType>, source: &str, name: Option<&str>) -> Result<Program> {
        let ty: CodeType = ty.into();
        let n = name.map(|n| c_string("name", n)).transpose()?;
        let np = n.as_ref().map_or(core::ptr::null(), |n| n.as_ptr());
        // Given with its length, so no terminating NUL is needed; the C side refuses interior NULs.
        // SAFETY: `source` and the name are read during the call (the program copies them).
        Program::create(|o| unsafe { sys::cuabi_program_create(o, ty.to_raw(), source.as_ptr().cast(), source.len(), np) })
    }
    /// NVVM IR for libNVVM: text (.ll) or bitcode (.bc), which may hold NUL
    /// bytes. `name` None: "program.ll" or "program.bc". Compile it to
    /// `CUABI_CODE_PTX` or `CUABI_CODE_LTOIR`.
    pub fn nvvm(ir: &[u8], name: Option<&str>) -> Result<Program> {
        let n = name.map(|n| c_string("name", n)).transpose()?;
        let np = n.as_ref().map_or(core::ptr::null(), |n| n.as_ptr());
        // SAFETY: as with_type.
        Program::create(|o| unsafe {
            sys::cuabi_program_create(o, sys::CUABI_CODE_NVVM, ir.as_ptr().cast(), ir.len(), np)
        })
    }
    /// Compile (or fetch from the cache). A compile error's `log` has the compiler's messages.
    pub fn compile(&mut self, options: &ProgramOptions) -> Result<ObjectCode> {
        let o = options.to_c()?;
        // SAFETY: the program is live and exclusively borrowed; `o` and the
        // strings it points into live until the call returns.
        ObjectCode::create(|out| unsafe { sys::cuabi_program_compile(out, self.as_raw(), &o.raw) })
    }
    /// Compile into the cache only.
    pub fn compile_to_cache(&mut self, options: &ProgramOptions) -> Result<()> {
        let o = options.to_c()?;
        // SAFETY: as compile; NULL `out` stores into the cache only.
        check(unsafe { sys::cuabi_program_compile(core::ptr::null_mut(), self.as_raw(), &o.raw) })
    }
    /// The last compile's log ("" before the first).
    pub fn log(&self) -> String {
        let mut p = core::ptr::null();
        // SAFETY: the program is live; `p` a local.
        infallible(unsafe { sys::cuabi_program_log(&mut p, self.as_raw()) }, "cuabi_program_log");
        // SAFETY: valid until the next compile, which `&self` excludes; copied now.
        unsafe { cstr(p) }
    }
    /// The mangled name of a name expression of the last compile.
    pub fn lowered_name(&self, name_expression: &str) -> Result<String> {
        let e = c_string("name expression", name_expression)?;
        let mut p = core::ptr::null();
        // SAFETY: the program is live; `e` read during the call; `p` a local.
        check(unsafe { sys::cuabi_program_lowered_name(&mut p, self.as_raw(), e.as_ptr()) })?;
        // SAFETY: valid until the next compile, which `&self` excludes; copied now.
        Ok(unsafe { cstr(p) })
    }
    /// Where the last compile's code came from: 0 compiled, 1 memory cache, 2 disk cache.
    pub fn cache_hit(&self) -> i32 {
        let mut v = 0;
        // SAFETY: the program is live; `v` a local.
        infallible(unsafe { sys::cuabi_program_cache_hit(&mut v, self.as_raw()) }, "cuabi_program_cache_hit");
        v
    }
}

/// The architectures the loaded NVRTC can target (90 for sm_90).
pub fn supported_archs() -> Result<Vec<i32>> {
    let mut n = 0usize;
    // SAFETY: a size query: no array, `n` a local.
    check(unsafe { sys::cuabi_program_supported_archs(core::ptr::null_mut(), 0, &mut n) })?;
    let mut v = vec![0i32; n];
    // SAFETY: `v` holds `v.len()` values the call writes.
    check(unsafe { sys::cuabi_program_supported_archs(v.as_mut_ptr(), v.len(), &mut n) })?;
    v.truncate(n);
    Ok(v)
}
