//! The compile cache, precompile and manifests (the cache is process-wide:
//! the tests take turns).
use cuabi::{cache, sys, Linker, LinkerOptions, Program, ProgramOptions};

#[test]
fn cache_and_precompile() {
    let _one_at_a_time = LOCK.lock().unwrap_or_else(|e| e.into_inner());
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
    assert_eq!(p.cache_hit(), 0);
    p.compile(&o).unwrap();
    assert_eq!(p.cache_hit(), 1);
    cache::clear(sys::CUABI_CACHE_CLEAR_MEMORY).unwrap();
    let mut p2 = Program::new(src, None).unwrap();
    p2.compile(&o).unwrap();
    assert_eq!(p2.cache_hit(), 2);
    let s = cache::stats().unwrap();
    assert_eq!(s.enabled, 1);
    assert!(s.entries >= 1 && s.stores >= 1 && s.memory_hits >= 1 && s.disk_hits >= 1, "{s:?}");

    let mut seen = Vec::new();
    cache::list(|e| { seen.push(e.clone()); true }).unwrap();
    assert_eq!(seen.len() as u64, s.entries);
    assert_eq!(seen[0].key.len(), 32);
    assert!(seen[0].path.starts_with(&dir));
    assert!(seen.iter().all(|e| !e.linked));

    // Links go through the cache too; no_cache bypasses it.
    let ptx = b".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry rk() { ret; }\n";
    let link = |no_cache: bool| {
        let mut l = Linker::new(&LinkerOptions { arch: Some("sm_90".into()), no_cache, ..Default::default() }).unwrap();
        l.add_data(sys::CUABI_CODE_PTX, ptx, Some("rk.ptx")).unwrap();
        let out = l.complete(sys::CUABI_CODE_CUBIN).unwrap();
        (out.bytes().to_vec(), l.cache_hit())
    };
    let (first, hit) = link(false);
    assert_eq!(hit, 0);
    assert_eq!(link(false), (first.clone(), 1));
    assert_eq!(link(true), (first, 0));
    let mut linked = 0;
    cache::list(|e| { linked += usize::from(e.linked); true }).unwrap();
    assert_eq!(linked, 1);

    // Precompile two items for two archs with a progress closure.
    let items = vec![
        cache::PrecompileItem { code_type: sys::CUABI_CODE_CUDA_CXX.into(), source: "__global__ void pa() {}\n".into(), name: Some("pa".into()), options: None },
        cache::PrecompileItem { code_type: sys::CUABI_CODE_CUDA_CXX.into(), source: "__global__ void pb() {}\n".into(), name: Some("pb".into()),
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
    let bad = cache::PrecompileItem { code_type: sys::CUABI_CODE_CUDA_CXX.into(), source: "syntax error here\n".into(), name: None, options: None };
    assert_eq!(cache::precompile(&[bad], &["sm_90"], None).unwrap_err().status, sys::CUABI_ERROR_COMPILE);

    cache::clear(sys::CUABI_CACHE_CLEAR_ALL).unwrap();
    assert_eq!(cache::stats().unwrap().entries, 0);
    cache::set_directory(None).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A project's manifest in one call, each outcome with its line, and verify
/// (issue 13 item 3). Its own cache directory: the cache is process-wide,
/// so this test sets it under a lock shared with the test above.
#[test]
fn warm_a_manifest_and_verify() {
    let _one_at_a_time = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("cuabi-rust-warm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    cache::set_directory(Some(&dir.join("cache"))).unwrap();
    std::fs::write(dir.join("k.cu"), "template <int N> __global__ void k(int *x) { x[0] = N; }\n").unwrap();
    let manifest = dir.join("cuabi.toml");
    std::fs::write(&manifest, "archs = [\"sm_80\", \"sm_90\"]\n[[source]]\nfile = \"k.cu\"\n\
                               name_expressions = [\"k<3>\"]\n").unwrap();
    let s = cache::warm_manifest(&manifest).unwrap();
    assert_eq!((s.total, s.compiled, s.cached, s.failed, s.problems), (2, 2, 0, 0, 0));
    let mut seen = Vec::new();
    let mut f = |e: &cache::WarmEvent| { seen.push(e.clone()); true };
    let opts = cache::WarmOptions { jobs: 1, archs: vec!["sm_90".into()], ..Default::default() };
    let s = cache::warm_manifest_with(&manifest, &opts, Some(&mut f)).unwrap();
    assert_eq!((s.total, s.cached), (1, 1));
    assert_eq!((seen[0].arch.as_str(), seen[0].line, seen[0].cache_hit), ("sm_90", 2, 1));

    // a problem with the manifest: the error names it with its line
    std::fs::write(&manifest, "[[source]]\nfile = \"nothere.cu\"\n").unwrap();
    let mut seen = Vec::new();
    let mut f = |e: &cache::WarmEvent| { seen.push(e.clone()); true };
    let e = cache::warm_manifest_with(&manifest, &cache::WarmOptions::default(), Some(&mut f)).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_IO);
    assert!(e.message.contains("line 2"), "{}", e.message);
    assert_eq!((seen.len(), seen[0].cache_hit, seen[0].line), (1, -1, 2));
    assert_eq!(cache::warm_manifest(dir.join("absent.toml")).unwrap_err().status, sys::CUABI_ERROR_IO);

    let (r, removed) = cache::verify().unwrap();
    assert_eq!((r.checked, r.removed), (2, 0));
    assert!(removed.is_empty());
    cache::set_directory(None).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
