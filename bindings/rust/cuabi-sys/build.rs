//! Find libcuabi with the `pkg-config` program (no crates: std only).
//!
//! Honours PKG_CONFIG (the program to run) and PKG_CONFIG_PATH as usual, and
//! CUABI_LIB_DIR to skip pkg-config and link from one directory.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    println!("cargo:rerun-if-env-changed=CUABI_LIB_DIR");
    if let Ok(dir) = env::var("CUABI_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
        println!("cargo:rustc-link-lib=dylib=cuabi");
        return;
    }
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    let out = Command::new(&pkg_config).args(["--libs", "cuabi"]).output();
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!(
            "cuabi-sys: could not run `{pkg_config}` ({e}). Install pkg-config \
             (Debian: apt-get install pkg-config) or set CUABI_LIB_DIR to the \
             directory holding libcuabi.so."
        ),
    };
    if !out.status.success() {
        panic!(
            "cuabi-sys: `{pkg_config} --libs cuabi` failed: {}\nInstall libcuabi \
             (make install) and point PKG_CONFIG_PATH at the directory holding \
             cuabi.pc, or set CUABI_LIB_DIR to the directory holding libcuabi.so.",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut linked = false;
    for flag in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            // Exported for dependants (DEP_CUABI_LIB_DIR) and test runners.
            println!("cargo:lib_dir={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
            linked |= lib == "cuabi";
        }
    }
    if !linked {
        println!("cargo:rustc-link-lib=dylib=cuabi");
    }
}
