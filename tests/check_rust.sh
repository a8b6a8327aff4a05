#!/bin/sh
# The Rust bindings: `cargo test --offline` in bindings/rust against the
# library just built. cuabi-sys's build.rs finds it through the pkg-config
# program; we point PKG_CONFIG_PATH at an uninstalled cuabi.pc written here.
srcdir=${CUABI_TEST_SRCDIR:-$(dirname "$0")/..}
builddir=${CUABI_TEST_BUILDDIR:-.}
command -v cargo >/dev/null 2>&1 || { echo "SKIP: cargo not found"; exit 77; }
command -v pkg-config >/dev/null 2>&1 || { echo "SKIP: pkg-config not found"; exit 77; }
srcdir=$(cd "$srcdir" && pwd); builddir=$(cd "$builddir" && pwd)
libdir="$builddir/.libs"
[ -e "$libdir/libcuabi.so" ] || { echo "FAIL: $libdir/libcuabi.so not built"; exit 1; }

pcdir="$builddir/tests/rust-pc"
mkdir -p "$pcdir"
cat > "$pcdir/cuabi.pc" <<PC
libdir=$libdir
includedir=$srcdir/include
Name: cuabi
Description: cuabi, uninstalled (tests/check_rust.sh)
Version: 0
Libs: -L\${libdir} -lcuabi
Cflags: -I\${includedir}
PC
PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Build products stay in the build tree, never in the sources.
CARGO_TARGET_DIR="$builddir/rust-target"
export PKG_CONFIG_PATH LD_LIBRARY_PATH CARGO_TARGET_DIR

# A sanitizer build of libcuabi needs the runtimes loaded first in a
# program that was not itself built with them.
if readelf -d "$libdir/libcuabi.so" | grep -q 'libasan'; then
    asan=$(${CC:-cc} -print-file-name=libasan.so)
    ubsan=$(${CC:-cc} -print-file-name=libubsan.so)
    LD_PRELOAD="$asan $ubsan"; export LD_PRELOAD
    # Rust's own runtime keeps a few allocations to exit (thread-locals).
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"; export ASAN_OPTIONS
    echo "note: sanitizer build; LD_PRELOAD=$LD_PRELOAD"
fi

cd "$srcdir/bindings/rust" || exit 1
# Building scripts (build.rs) under LD_PRELOAD=asan is fine; rustc itself too.
exec cargo test --offline --locked 2>&1
