#!/bin/sh
# The Rust bindings: `cargo test --offline` in bindings/rust against the
# library just built. cuabi-sys's build.rs finds it through the pkg-config
# program; we point PKG_CONFIG_PATH at an uninstalled cuabi.pc written here.
srcdir=${CUABI_TEST_SRCDIR:-$(dirname "$0")/../..}
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
Description: cuabi, uninstalled (tests/bindings/check_rust.sh)
Version: 0
Libs: -L\${libdir} -lcuabi
Cflags: -I\${includedir}
PC
PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Build products stay in the build tree, never in the sources.
CARGO_TARGET_DIR="$builddir/rust-target"
export PKG_CONFIG_PATH LD_LIBRARY_PATH CARGO_TARGET_DIR
# The C tests' fake driver as a libcuda stand-in (cuabi/tests/graph_fake.rs).
if [ -e "$builddir/tests/fixtures/.libs/fake_cuda_graph.so" ]; then
    CUABI_TEST_FAKE_CUDA="$builddir/tests/fixtures/.libs/fake_cuda_graph.so"
    export CUABI_TEST_FAKE_CUDA
fi
# ... and the fake NCCL (cuabi/tests/nccl_fake.rs).
if [ -e "$builddir/tests/fixtures/.libs/fake_nccl.so" ]; then
    CUABI_TEST_FAKE_NCCL="$builddir/tests/fixtures/.libs/fake_nccl.so"
    export CUABI_TEST_FAKE_NCCL
fi
# The fake NVML (cuabi/tests/nvml.rs).
if [ -e "$builddir/tests/fixtures/.libs/fake_nvml.so" ]; then
    CUABI_TEST_FAKE_NVML="$builddir/tests/fixtures/.libs/fake_nvml.so"
    export CUABI_TEST_FAKE_NVML
fi

# A sanitizer build of libcuabi needs its runtimes loaded first in programs
# that were not built with them. Only the test binaries get them (through a
# cargo runner): rustc itself crashes under LD_PRELOAD=libasan.
if readelf -d "$libdir/libcuabi.so" | grep -q 'libasan'; then
    asan=$(${CC:-cc} -print-file-name=libasan.so)
    ubsan=$(${CC:-cc} -print-file-name=libubsan.so)
    host=$(rustc -vV | sed -n 's/^host: //p')
    var=CARGO_TARGET_$(echo "$host" | tr 'a-z-' 'A-Z_')_RUNNER
    # Rust's runtime keeps a few allocations until exit: no leak report.
    eval "$var=\"env LD_PRELOAD=$asan:$ubsan ASAN_OPTIONS=detect_leaks=0\""
    export "$var"
    echo "note: sanitizer build; test binaries run with LD_PRELOAD=$asan:$ubsan"
fi

cd "$srcdir/bindings/rust" || exit 1
# Issue 28: the crates are clippy-clean with warnings as errors, and the
# library denies clippy::undocumented_unsafe_blocks (every unsafe block names
# the header sentence it relies on). Skipped where clippy is not installed.
if cargo clippy --version >/dev/null 2>&1; then
    cargo clippy --offline --locked --all-targets --no-deps -- -D warnings 2>&1 ||
        { echo "FAIL: cargo clippy -- -D warnings"; exit 1; }
else
    echo "note: cargo clippy not installed; lints not checked"
fi
exec cargo test --offline --locked 2>&1
