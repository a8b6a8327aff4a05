#!/bin/sh
# The Python binding's tests (pytest), against the freshly built libcuabi,
# once per backend: the compiled fast path (cuabi._fast, when configure built
# it) and ctypes alone. Exit 77 (SKIP) when pytest or numpy is missing.
srcdir=${CUABI_TEST_SRCDIR:-$(dirname "$0")/../..}
builddir=${CUABI_TEST_BUILDDIR:-.}
command -v python3 >/dev/null 2>&1 || { echo "python3 missing"; exit 77; }
python3 -c 'import pytest' 2>/dev/null || { echo "pytest missing (pip install pytest)"; exit 77; }
python3 -c 'import numpy' 2>/dev/null || { echo "numpy missing (pip install numpy)"; exit 77; }
lib=$(ls "$builddir"/.libs/libcuabi.so 2>/dev/null)
[ -n "$lib" ] || { echo "libcuabi.so not built in $builddir/.libs"; exit 1; }
CUABI_LIBRARY=$(cd "$(dirname "$lib")" && pwd)/libcuabi.so
export CUABI_LIBRARY
# The C tests' fake driver as a libcuda stand-in (graph tests, in a process of
# their own: bindings/python/tests/test_graph.py).
fake=$(ls "$builddir"/tests/fixtures/.libs/fake_cuda_graph.so 2>/dev/null)
[ -n "$fake" ] && CUABI_TEST_FAKE_CUDA=$(cd "$(dirname "$fake")" && pwd)/fake_cuda_graph.so &&
    export CUABI_TEST_FAKE_CUDA
# The fake NVML (cuabi.system without a GPU: bindings/python/tests/test_system.py).
fake=$(ls "$builddir"/tests/fixtures/.libs/fake_nvml.so 2>/dev/null)
[ -n "$fake" ] && CUABI_TEST_FAKE_NVML=$(cd "$(dirname "$fake")" && pwd)/fake_nvml.so &&
    export CUABI_TEST_FAKE_NVML
# A sanitizer build: the ASan runtime must be loaded first, and Python's own
# allocations at exit are not ours to report.
if command -v ldd >/dev/null 2>&1 && ldd "$lib" 2>/dev/null | grep -q libasan; then
    asan=$(${CC:-cc} -print-file-name=libasan.so 2>/dev/null)
    [ -f "$asan" ] || { echo "ASan build but libasan.so not found"; exit 77; }
    LD_PRELOAD="$asan${LD_PRELOAD:+ $LD_PRELOAD}"
    ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export LD_PRELOAD ASAN_OPTIONS
fi
# Keep bytecode out of the source tree (distcheck makes it read-only).
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
src=$(cd "$srcdir" && pwd)
# The package as the build tree has it: the sources, plus the extension
# make built next to them (out-of-tree builds: links to the sources).
pkg=$(cd "$builddir" && pwd)/bindings/python
ext=$(ls "$pkg"/cuabi/_fast*.so 2>/dev/null | head -n 1)
if [ -n "$ext" ] && [ "$pkg" != "$src/bindings/python" ]; then
    find "$pkg/cuabi" -maxdepth 1 -type l -name '*.py' -exec rm -f {} +
    for f in "$src"/bindings/python/cuabi/*.py; do ln -sf "$f" "$pkg/cuabi/"; done
fi
# The do-nothing CUDA driver: launches from Python without a GPU (test_fast_launch.py).
CUABI_FAKE_DRIVER=$(cd "$builddir" && pwd)/bench/.libs/fake_libcuda.so
export CUABI_FAKE_DRIVER
cd "$src" || exit 1
status=0
if [ -n "$ext" ]; then
    echo "== backend: compiled ($ext)"
    CUABI_BACKEND=compiled CUABI_PYTHON_PATH=$pkg \
        python3 -m pytest -q -p no:cacheprovider bindings/python/tests || status=1
else
    echo "== backend: compiled: SKIP (cuabi._fast not built: configure found no Python.h)"
fi
echo "== backend: ctypes"
CUABI_BACKEND=ctypes CUABI_PYTHON_PATH=$src/bindings/python \
    python3 -m pytest -q -p no:cacheprovider bindings/python/tests || status=1
exit $status
