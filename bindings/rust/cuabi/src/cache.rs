//! The process-wide compile cache and precompilation (include/cuabi/cache.h).
//! All functions are thread-safe.
use crate::error::{c_string, check, cstr, Result};
use crate::objcode::CodeType;
use crate::program::ProgramOptions;
use crate::sys;
use core::ffi::{c_char, c_int, c_void};
use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Counters and sizes (`cuabi_cache_stats`).
pub type CacheStats = sys::cuabi_cache_stats;

/// One directory entry, as `list` reports it.
#[derive(Clone, Debug)]
pub struct CacheEntry {
    pub key: String,
    pub code_type: CodeType,
    pub size: u64,
    pub last_used: i64,
    pub num_names: usize,
    pub path: PathBuf,
    /// A linker's output (cuabi_linker_complete), not a program's compile.
    pub linked: bool,
}

/// Use this directory (None: back to the default from the environment).
pub fn set_directory(path: Option<&Path>) -> Result<()> {
    let p = path.map(|p| c_string("path", &p.to_string_lossy())).transpose()?;
    // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
    // are read during the call only (common.h: "reads or writes the memory its pointer
    // parameters name only during the call").
    check(unsafe { sys::cuabi_cache_set_directory(p.as_ref().map_or(core::ptr::null(), |p| p.as_ptr())) })
}

/// The directory in use.
pub fn directory() -> Result<PathBuf> {
    let mut n = 0usize;
    // A size query: BUFFER_TOO_SMALL with the size needed is expected here.
    // SAFETY: no output buffer; `n` is a local written during the call.
    let _ = unsafe { sys::cuabi_cache_get_directory(core::ptr::null_mut(), &mut n) };
    let mut buf = vec![0u8; n.max(1)];
    let mut cap = buf.len();
    // SAFETY: `buf` holds `cap` bytes, as `cap` tells the call.
    check(unsafe { sys::cuabi_cache_get_directory(buf.as_mut_ptr().cast(), &mut cap) })?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(PathBuf::from(String::from_utf8_lossy(&buf[..end]).into_owned()))
}

pub fn set_enabled(on: bool) -> Result<()> {
    // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
    // are read during the call only (common.h: "reads or writes the memory its pointer
    // parameters name only during the call").
    check(unsafe { sys::cuabi_cache_set_enabled(i32::from(on)) })
}
/// Directory size limit in bytes (0 = none).
pub fn set_size_limit(bytes: u64) -> Result<()> {
    // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
    // are read during the call only (common.h: "reads or writes the memory its pointer
    // parameters name only during the call").
    check(unsafe { sys::cuabi_cache_set_size_limit(bytes) })
}
pub fn stats() -> Result<CacheStats> {
    let mut s = CacheStats::default();
    // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
    // are read during the call only (common.h: "reads or writes the memory its pointer
    // parameters name only during the call").
    unsafe {
        check(sys::cuabi_cache_stats_init(&mut s, sys::CUABI_CACHE_STATS_VERSION))?;
        check(sys::cuabi_cache_get_stats(&mut s))?;
    }
    Ok(s)
}
/// Empty the memory layer (1), the directory (2) or both (3).
pub fn clear(flags: sys::cuabi_cache_clear_flags) -> Result<()> {
    // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
    // are read during the call only (common.h: "reads or writes the memory its pointer
    // parameters name only during the call").
    check(unsafe { sys::cuabi_cache_clear(flags.0 as u32) })
}

/// A Rust closure behind a C callback's payload, with any panic it raised
/// kept to be resumed once control is back in Rust.
struct Ctx<'a, A: ?Sized> {
    f: &'a mut A,
    panic: Option<Box<dyn Any + Send>>,
}

impl<A: ?Sized> Ctx<'_, A> {
    /// Run `call` unless an earlier call panicked; a panic is stored, never unwound into C.
    fn run<R>(&mut self, stop: R, call: impl FnOnce(&mut A) -> R) -> R {
        if self.panic.is_some() {
            return stop;
        }
        match catch_unwind(AssertUnwindSafe(|| call(&mut *self.f))) {
            Ok(r) => r,
            Err(p) => { self.panic = Some(p); stop }
        }
    }
    fn finish(self) {
        if let Some(p) = self.panic { resume_unwind(p) }
    }
}

type ListFn<'a> = dyn FnMut(&CacheEntry) -> bool + 'a;

unsafe extern "C" fn list_trampoline(e: *const sys::cuabi_cache_entry_info, payload: *mut c_void) -> c_int {
    // SAFETY: the payload is the Ctx the caller passed, alive on its stack for
    // the whole C call; cache.h: the callback is called on the calling thread.
    let ctx = unsafe { &mut *payload.cast::<Ctx<ListFn>>() };
    // SAFETY: the entry is valid during the callback.
    let e = unsafe { &*e };
    let key_end = e.key.iter().position(|&c| c == 0).unwrap_or(e.key.len());
    let entry = CacheEntry {
        key: e.key[..key_end].iter().map(|&c| c as u8 as char).collect(),
        code_type: e.code_type.into(), size: e.size, last_used: e.last_used, num_names: e.num_names,
        // SAFETY: valid during the callback; copied now.
        path: PathBuf::from(unsafe { cstr(e.path) }), linked: e.linked != 0,
    };
    ctx.run(1, |f| c_int::from(!f(&entry)))
}

/// Call `f` for each entry, least recently used first; return false to stop.
pub fn list(mut f: impl FnMut(&CacheEntry) -> bool) -> Result<()> {
    let fr: &mut ListFn = &mut f;
    let mut ctx = Ctx { f: fr, panic: None };
    // SAFETY: the trampoline and the Ctx (on this stack) are valid for the whole call.
    let st = unsafe { sys::cuabi_cache_list(Some(list_trampoline), (&mut ctx as *mut Ctx<ListFn>).cast()) };
    ctx.finish();
    check(st)
}

/// One program to precompile.
#[derive(Clone, Debug)]
pub struct PrecompileItem {
    /// `CUABI_CODE_CUDA_CXX` or `CUABI_CODE_PTX`.
    pub code_type: CodeType,
    pub source: String,
    pub name: Option<String>,
    /// None for the defaults; its arch is replaced by each of the archs given.
    pub options: Option<ProgramOptions>,
}

/// What the progress closure is told after each compile.
#[derive(Clone, Debug)]
pub struct Progress<'a> {
    pub done: usize,
    pub total: usize,
    pub name: &'a str,
    pub arch: &'a str,
    pub status: sys::cuabi_status,
    /// 0 compiled, 1 memory, 2 disk.
    pub cache_hit: i32,
}

type ProgressFn<'a> = dyn for<'p> FnMut(&Progress<'p>) -> bool + 'a;

unsafe extern "C" fn progress_trampoline(done: usize, total: usize, name: *const c_char, arch: *const c_char,
                                         status: sys::cuabi_status, cache_hit: c_int, payload: *mut c_void) -> c_int {
    // SAFETY: the payload is the Ctx the caller passed, alive on its stack for
    // the whole C call; cache.h: the callback is called on the calling thread.
    let ctx = unsafe { &mut *payload.cast::<Ctx<ProgressFn>>() };
    // SAFETY: strings valid during the callback; copied now.
    let (name, arch) = unsafe { (cstr(name), cstr(arch)) };
    let p = Progress { done, total, name: &name, arch: &arch, status, cache_hit };
    ctx.run(1, |f| c_int::from(!f(&p)))
}

/// Compile every item for every arch into the cache (nothing is loaded on a
/// GPU). `progress` returns false to cancel (CUABI_ERROR_CALLBACK); a panic
/// in it cancels too and is resumed after the C call returns.
pub fn precompile(items: &[PrecompileItem], archs: &[&str],
                  progress: Option<&mut dyn for<'p> FnMut(&Progress<'p>) -> bool>) -> Result<()> {
    let mut keep = Vec::new(); // C strings and options alive during the call
    let mut opts = Vec::new();
    let mut raw = Vec::with_capacity(items.len());
    for it in items {
        let mut r = sys::cuabi_precompile_item::default();
        // SAFETY: a local the init function fills.
        check(unsafe { sys::cuabi_precompile_item_init(&mut r, sys::CUABI_PRECOMPILE_ITEM_VERSION) })?;
        let src = c_string("source", &it.source)?;
        r.r#type = it.code_type.into();
        r.source = src.as_ptr();
        keep.push(src);
        if let Some(n) = &it.name {
            let c = c_string("name", n)?;
            r.name = c.as_ptr();
            keep.push(c);
        }
        if let Some(o) = &it.options {
            opts.push(Box::new(o.to_c()?));
            r.options = &opts.last().unwrap().raw;
        }
        raw.push(r);
    }
    let archs_c = archs.iter().map(|a| c_string("arch", a)).collect::<Result<Vec<_>>>()?;
    let archs_p: Vec<*const c_char> = archs_c.iter().map(|a| a.as_ptr()).collect();
    let ap = if archs_p.is_empty() { core::ptr::null_mut() } else { archs_p.as_ptr() as *mut _ };
    match progress {
        // SAFETY: the items, strings and arrays they point into live until the call returns.
        None => check(unsafe { sys::cuabi_cache_precompile(raw.as_ptr(), raw.len(), ap, archs_p.len(), None, core::ptr::null_mut()) }),
        Some(f) => {
            let mut ctx = Ctx { f, panic: None };
            // SAFETY: the trampoline and the Ctx (on this stack) are valid for the whole call;
            // the items, strings and arrays they point into live until it returns.
            let st = unsafe {
                sys::cuabi_cache_precompile(raw.as_ptr(), raw.len(), ap, archs_p.len(), Some(progress_trampoline),
                                            (&mut ctx as *mut Ctx<ProgressFn>).cast())
            };
            ctx.finish();
            check(st)
        }
    }
}

/// Counts of [`warm_manifest`] (`cuabi_warm_summary`): `total`, `compiled`,
/// `cached`, `failed`, `problems`.
pub type WarmSummary = sys::cuabi_warm_summary;
/// What [`verify`] found (`cuabi_cache_verify_report`): `checked`,
/// `removed`, `bytes_removed`, `kept`, `skipped`.
pub type VerifyReport = sys::cuabi_cache_verify_report;

/// How [`warm_manifest_with`] runs.
#[derive(Clone, Debug, Default)]
pub struct WarmOptions {
    /// Compiles at once; 0: one per online CPU.
    pub jobs: u32,
    /// Architectures for every source, replacing the manifest's; empty: the manifest's.
    pub archs: Vec<String>,
    /// Let the manifest name files, include paths and `#include`s outside its
    /// own directory tree (refused by default: `cuabi cache warm --allow-outside`).
    pub allow_outside: bool,
}

/// One outcome of [`warm_manifest_with`]: a compile, or a problem with the
/// manifest itself (`cache_hit == -1`, `name` the manifest's path).
#[derive(Clone, Debug)]
pub struct WarmEvent {
    pub done: usize,
    pub total: usize,
    pub name: String,
    pub arch: String,
    /// The manifest line it comes from; 0 when none.
    pub line: i32,
    pub status: sys::cuabi_status,
    /// 0 compiled now, 1 memory, 2 disk already; -1 a manifest problem.
    pub cache_hit: i32,
    /// The error (with the compiler's log for a compile error); "" on success.
    pub message: String,
    pub log: String,
}

type WarmFn<'a> = dyn FnMut(&WarmEvent) -> bool + 'a;

unsafe extern "C" fn warm_trampoline(ev: *const sys::cuabi_warm_event, payload: *mut c_void) -> c_int {
    // SAFETY: the payload is the Ctx the caller passed, alive on its stack for
    // the whole C call; cache.h: the callback is called on the calling thread.
    let ctx = unsafe { &mut *payload.cast::<Ctx<WarmFn>>() };
    // SAFETY: the event is valid during the callback ("Strings are valid during the callback").
    let ev = unsafe { &*ev };
    // SAFETY: its strings are valid during the callback; copied now.
    let event = unsafe {
        WarmEvent {
            done: ev.done, total: ev.total, name: cstr(ev.name), arch: cstr(ev.arch), line: ev.line,
            status: ev.status, cache_hit: ev.cache_hit, message: cstr(ev.message), log: cstr(ev.log),
        }
    };
    ctx.run(1, |f| c_int::from(!f(&event)))
}

fn path_c(what: &str, p: &Path) -> Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| crate::error::Error::invalid_argument(format!("{what} contains a NUL byte")))
}

/// Precompile a project from its TOML manifest (docs/compile-cache.md), as
/// `cuabi cache warm` does: `cuabi::cache::warm_manifest("cuabi.toml")?`.
/// An error is the first failure's (a compile error, a problem with the
/// manifest and its line, ...); use [`warm_manifest_with`] to see each outcome.
pub fn warm_manifest(path: impl AsRef<Path>) -> Result<WarmSummary> {
    warm_manifest_with(path, &WarmOptions::default(), None)
}

/// [`warm_manifest`] with options and a progress closure, called on this
/// thread for each outcome in the manifest's order; returning false cancels
/// (CUABI_ERROR_CALLBACK), and a panic in it is resumed after the C call.
pub fn warm_manifest_with(path: impl AsRef<Path>, options: &WarmOptions,
                          progress: Option<&mut dyn FnMut(&WarmEvent) -> bool>) -> Result<WarmSummary> {
    let path = path_c("path", path.as_ref())?;
    let archs_c = options.archs.iter().map(|a| c_string("arch", a)).collect::<Result<Vec<_>>>()?;
    let mut archs_p: Vec<*const c_char> = archs_c.iter().map(|a| a.as_ptr()).collect();
    let mut o = sys::cuabi_warm_options::default();
    let mut s = WarmSummary::default();
    // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
    // are read during the call only (common.h: "reads or writes the memory its pointer
    // parameters name only during the call").
    unsafe {
        check(sys::cuabi_warm_options_init(&mut o, sys::CUABI_WARM_OPTIONS_VERSION))?;
        check(sys::cuabi_warm_summary_init(&mut s, sys::CUABI_WARM_SUMMARY_VERSION))?;
    }
    o.jobs = i32::try_from(options.jobs)
        .map_err(|_| crate::error::Error::invalid_argument("jobs is too large".to_string()))?;
    if !archs_p.is_empty() {
        o.archs = archs_p.as_mut_ptr();
        o.num_archs = archs_p.len();
    }
    o.allow_outside = c_int::from(options.allow_outside);
    let st = match progress {
        // SAFETY: the options, strings and arrays live until the call returns.
        None => unsafe { sys::cuabi_cache_warm_manifest(&mut s, path.as_ptr(), &o, None, core::ptr::null_mut()) },
        Some(f) => {
            let mut ctx = Ctx { f, panic: None };
            // SAFETY: the trampoline and the Ctx (on this stack) are valid for the whole call;
            // the items, strings and arrays they point into live until it returns.
            let st = unsafe {
                sys::cuabi_cache_warm_manifest(&mut s, path.as_ptr(), &o, Some(warm_trampoline),
                                               (&mut ctx as *mut Ctx<WarmFn>).cast())
            };
            ctx.finish();
            st
        }
    };
    check(st).map(|()| s)
}

unsafe extern "C" fn verify_trampoline(path: *const c_char, problem: *const c_char, payload: *mut c_void) -> c_int {
    // SAFETY: the payload is the Vec `verify` passed, alive for the call.
    let found = unsafe { &mut *payload.cast::<Vec<(PathBuf, String)>>() };
    // SAFETY: strings valid during the callback; copied now.
    found.push(unsafe { (PathBuf::from(cstr(path)), cstr(problem)) });
    0
}

/// Re-check every entry of the cache directory and remove the damaged ones,
/// as `cuabi cache verify` does: the counts, and each file removed with what
/// was wrong with it.
pub fn verify() -> Result<(VerifyReport, Vec<(PathBuf, String)>)> {
    let mut r = VerifyReport::default();
    let mut found: Vec<(PathBuf, String)> = Vec::new();
    // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
    // are read during the call only (common.h: "reads or writes the memory its pointer
    // parameters name only during the call").
    unsafe {
        check(sys::cuabi_cache_verify_report_init(&mut r, sys::CUABI_CACHE_VERIFY_REPORT_VERSION))?;
        check(sys::cuabi_cache_verify(&mut r, Some(verify_trampoline),
                                      (&mut found as *mut Vec<(PathBuf, String)>).cast()))?;
    }
    Ok((r, found))
}
