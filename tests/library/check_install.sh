#!/bin/sh
# The README's install without root (issue 17 item 4): install the build into
# a scratch folder (DESTDIR, so the configured prefix need not be writable),
# then build a C program through pkg-config and run it, run the installed
# cuabi tool, and import the Python package, all through the loader path
# (LD_LIBRARY_PATH), with no CUABI_LIBRARY.
builddir=${CUABI_TEST_BUILDDIR:-.}
srcdir=${CUABI_TEST_SRCDIR:-.}
fail() { echo "FAIL: $*"; exit 1; }
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config"; exit 77; }
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "SKIP: no C compiler"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
${MAKE:-make} -s -C "$builddir" install DESTDIR="$tmp/root" >"$tmp/install.log" 2>&1 ||
    fail "make install: $(tail -5 "$tmp/install.log")"
pc=$(find "$tmp/root" -name cuabi.pc | head -n 1)
[ -n "$pc" ] || fail "cuabi.pc installed"
libdir=$(dirname "$(dirname "$pc")")
bindir=$(find "$tmp/root" -type f -name cuabi -perm -u+x | head -n 1)
[ -n "$bindir" ] || fail "the cuabi tool installed"
bindir=$(dirname "$bindir")
export PKG_CONFIG_PATH="$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$tmp/root"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset CUABI_LIBRARY
cat > "$tmp/app.c" <<'C'
#include <stdio.h>
#include <cuabi.h>
int main(void) { printf("cuabi %s\n", cuabi_version_string()); return cuabi_abi_version() > 0 ? 0 : 1; }
C
# A sanitizer build's library needs the sanitizer runtimes first in the
# program (ASan refuses to start otherwise), and Python must preload them.
san=""
if ldd "$libdir/libcuabi.so" 2>/dev/null | grep -q libasan; then
    san="-fsanitize=address,undefined"
    asan=$("$cc" -print-file-name=libasan.so 2>/dev/null)
    export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
fi
# The headers need DLPack's (configure may have been given --with-dlpack).
"$cc" $san "$tmp/app.c" $(pkg-config --cflags --libs cuabi) ${CUABI_TEST_CPPFLAGS:-} -o "$tmp/app" \
    2>"$tmp/cc.log" || fail "compile with pkg-config: $(cat "$tmp/cc.log")"
"$tmp/app" | grep -q "^cuabi [0-9]" || fail "the program runs against the installed library"
"$bindir/cuabi" info >/dev/null 2>&1 || fail "the installed cuabi tool runs"
if command -v python3 >/dev/null; then
    (cd "$tmp" && PYTHONPATH="$srcdir/bindings/python" LD_PRELOAD="${asan:-}${LD_PRELOAD:+ $LD_PRELOAD}" python3 -c '
import cuabi, sys
assert cuabi.LIBRARY_PATH.startswith("libcuabi"), cuabi.LIBRARY_PATH   # found by the loader
print("python:", cuabi.version())') || fail "Python finds the installed library through the loader path"
fi
echo "install into a folder of one's own: ok"
exit 0
