//! The compile cache and precompile (one test: the cache is process-wide).
use cuabi::{cache, sys, Program, ProgramOptions};

#[test]
fn cache_and_precompile() {
    let dir = std::env::temp_dir().join(format!("cuabi-rust-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    cache::set_directory(Some(&dir)).unwrap();
    cache::set_enabled(true).unwrap();
    assert_eq!(cache::directory().unwrap(), dir);
    cache::clear(sys::CUABI_CACHE_CLEAR_ALL).unwrap();

    let src = "extern \"C\" __global__ void rust_cache_k(int *o) { *o = 7; }\n";
    let o = ProgramOptions::new().arch("sm_90");
    let mut p = Program::new(src, None).unwrap();
    p.compile(&o).unwrap();
    assert_eq!(p.cache_hit().unwrap(), 0);
    p.compile(&o).unwrap();
    assert_eq!(p.cache_hit().unwrap(), 1);
    cache::clear(sys::CUABI_CACHE_CLEAR_MEMORY).unwrap();
    let mut p2 = Program::new(src, None).unwrap();
    p2.compile(&o).unwrap();
    assert_eq!(p2.cache_hit().unwrap(), 2);
    let s = cache::stats().unwrap();
    assert_eq!(s.enabled, 1);
    assert!(s.entries >= 1 && s.stores >= 1 && s.memory_hits >= 1 && s.disk_hits >= 1, "{s:?}");

    let mut seen = Vec::new();
    cache::list(|e| { seen.push(e.clone()); true }).unwrap();
    assert_eq!(seen.len() as u64, s.entries);
    assert_eq!(seen[0].key.len(), 32);
    assert!(seen[0].path.starts_with(&dir));

    // Precompile two items for two archs with a progress closure.
    let items = vec![
        cache::PrecompileItem { code_type: sys::CUABI_CODE_CUDA_CXX, source: "__global__ void pa() {}\n".into(), name: Some("pa".into()), options: None },
        cache::PrecompileItem { code_type: sys::CUABI_CODE_CUDA_CXX, source: "__global__ void pb() {}\n".into(), name: Some("pb".into()),
                                options: Some(ProgramOptions::new().define("X=1")) },
    ];
    let mut log = Vec::new();
    let mut f = |pr: &cache::Progress| { log.push((pr.done, pr.total, pr.name.to_string(), pr.arch.to_string(), pr.status)); true };
    cache::precompile(&items, &["sm_80", "sm_90"], Some(&mut f)).unwrap();
    assert_eq!(log.len(), 4);
    assert!(log.iter().all(|l| l.1 == 4 && l.4 == sys::CUABI_SUCCESS));
    assert!(log.iter().any(|l| l.2 == "pb" && l.3 == "sm_80"));
    // Cancelling from the closure gives CUABI_ERROR_CALLBACK.
    let mut stop = |_: &cache::Progress| false;
    let e = cache::precompile(&items, &["sm_90"], Some(&mut stop)).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_CALLBACK);
    // A panicking closure cancels the run and the panic comes back in Rust.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut boom = |_: &cache::Progress| -> bool { panic!("boom in progress") };
        let _ = cache::precompile(&items, &["sm_90"], Some(&mut boom));
    }));
    assert!(r.is_err());
    let bad = cache::PrecompileItem { code_type: sys::CUABI_CODE_CUDA_CXX, source: "syntax error here\n".into(), name: None, options: None };
    assert_eq!(cache::precompile(&[bad], &["sm_90"], None).unwrap_err().status, sys::CUABI_ERROR_COMPILE);

    cache::clear(sys::CUABI_CACHE_CLEAR_ALL).unwrap();
    assert_eq!(cache::stats().unwrap().entries, 0);
    cache::set_directory(None).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
