#!/bin/sh
# The Python package as users install it: `pip install ./bindings/python`
# into a fresh virtual environment builds libcuabi, the `cuabi` tool and the
# compiled fast path with configure && make (bindings/python/build_backend,
# nothing fetched from PyPI) and bundles them; there, with no environment
# variable, `import cuabi` uses the bundled library and cuabi._fast, a
# program compiles, and the `cuabi` console script runs `cuabi info`.
# CUABI_LIBRARY still overrides the bundled library. Under `make distcheck`
# the source is the unpacked dist tarball: the sdist route.
# Exit 77 (SKIP) when a virtual environment with pip cannot be made here, or
# in a sanitizer build (the plain build checks the wheel).
srcdir=${CUABI_TEST_SRCDIR:-$(dirname "$0")/../..}
builddir=${CUABI_TEST_BUILDDIR:-.}
src=$(cd "$srcdir" && pwd)
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 missing"; exit 77; }
lib=$(cd "$builddir" && pwd)/.libs/libcuabi.so
if command -v ldd >/dev/null 2>&1 && ldd "$lib" 2>/dev/null | grep -q libasan; then
    echo "SKIP: sanitizer build (the wheel builds its own library; the plain build checks it)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuabi-wheel.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m venv "$tmp/venv" >"$tmp/venv.log" 2>&1; then
    echo "SKIP: python3 -m venv does not work here:"; tail -n 3 "$tmp/venv.log"; exit 77
fi
py=$tmp/venv/bin/python
"$py" -m pip --version >/dev/null 2>&1 || { echo "SKIP: the virtual environment has no pip"; exit 77; }
# The wheel's build configures like this build tree did (the GPU machine's
# headers and libraries live in a local prefix named by configure options).
if [ -x "$builddir/config.status" ]; then
    CUABI_CONFIGURE_ARGS=$(cd "$builddir" && ./config.status --config)
    export CUABI_CONFIGURE_ARGS
fi
# Nothing from the test environment: the package must find its own library.
unset CUABI_LIBRARY PYTHONPATH CUABI_BACKEND CUABI_DRIVER_PATH
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
echo "== pip install $src/bindings/python"
if ! "$py" -m pip install --no-cache-dir --disable-pip-version-check "$src/bindings/python" \
        >"$tmp/pip.log" 2>&1; then
    echo "FAIL: pip install"; tail -n 40 "$tmp/pip.log"; exit 1
fi
cd "$tmp" || exit 1
fail=0
check() {   # description, command...
    what=$1; shift
    if out=$("$@" 2>&1); then
        echo "ok: $what"
        [ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/    /' | head -n 8
    else
        echo "FAIL: $what"; printf '%s\n' "$out" | tail -n 20; fail=1
    fi
}
check "import cuabi uses the bundled library and the compiled fast path" "$py" -c '
import os, cuabi
assert cuabi.backend == "compiled", cuabi.backend_note
here = os.path.dirname(cuabi.__file__)
assert os.path.dirname(os.path.realpath(cuabi.LIBRARY_PATH)) == os.path.realpath(here), cuabi.LIBRARY_PATH
print(cuabi.__version__, cuabi.LIBRARY_PATH, cuabi.backend_note)'
check "a compile" "$py" -c '
import cuabi
obj = cuabi.Program("extern \"C\" __global__ void k(float *p, int n) { if (n) p[0] = 1; }").compile(arch="sm_90")
k = obj.get_kernel("k")
assert k.param_info == [(0, 8), (8, 4)], k.param_info
print("kernel", k.name, k.param_info)'
check "the cuabi console script runs cuabi info" "$tmp/venv/bin/cuabi" info
check "cuabi info --json reports the package's version" "$py" -c '
import json, os, subprocess, sys, cuabi
tool = os.path.join(os.path.dirname(sys.executable), "cuabi")
info = json.loads(subprocess.run([tool, "info", "--json"], capture_output=True, text=True,
                                 check=True).stdout)
assert info["library_version"] == cuabi.__version__, info'
check "CUABI_LIBRARY still overrides" env CUABI_LIBRARY="$lib" "$py" -c "
import cuabi
assert cuabi.LIBRARY_PATH == '$lib', cuabi.LIBRARY_PATH
print(cuabi.LIBRARY_PATH)"
exit $fail
