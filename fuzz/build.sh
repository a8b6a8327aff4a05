#!/bin/sh
# Build cuabi's libFuzzer targets with clang, apart from the normal build.
#
#   fuzz/build.sh BUILDDIR [OUTDIR]
#
# BUILDDIR is a configured cuabi build (for config.h, include/cuabi/version.h
# and the flags configure found); the library sources are compiled again
# with -fsanitize=fuzzer-no-link,address,undefined and each fuzz/fuzz_*.c is
# linked into OUTDIR/fuzz_<target> (default BUILDDIR/fuzz). Exits 77 when
# clang or its libFuzzer runtime is missing (Automake's SKIP).
set -eu
srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=$(cd "${1:?usage: fuzz/build.sh BUILDDIR [OUTDIR]}" && pwd)
out=${2:-$builddir/fuzz}
CLANG=${CLANG:-clang}

command -v "$CLANG" >/dev/null 2>&1 || { echo "SKIP: $CLANG not found"; exit 77; }
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' \
    > "$probe/p.c"
"$CLANG" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>/dev/null ||
    { echo "SKIP: $CLANG cannot link libFuzzer (apt-get install libclang-rt-14-dev)"; exit 77; }

var() { sed -n "s/^$1 = //p" "$builddir/Makefile" | head -1; }
CPPFLAGS="-DHAVE_CONFIG_H -I$builddir -I$builddir/include -I$srcdir/include -I$srcdir/src \
 $(var CUDA_CPPFLAGS) $(var DLPACK_CPPFLAGS) $(var LIBFFI_CFLAGS) \
 -DCUABI_CUDA_LIBDIR=\"$(var CUDA_LIBDIR)\" -D_GNU_SOURCE"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
mkdir -p "$out/obj"
objs=""
# Rebuild an object when its source or any header it may include changed.
newest_h=$(ls -t "$srcdir"/src/*/*.h "$srcdir"/include/cuabi/*.h \
           "$srcdir"/include/cuabi.h | head -n 1)
# The library's layers (src/*/ but the cli, which is no part of it).
for f in "$srcdir"/src/util/*.c "$srcdir"/src/platform/*.c "$srcdir"/src/compile/*.c \
         "$srcdir"/src/runtime/*.c "$srcdir"/src/abi/*.c; do
    o="$out/obj/$(basename "$(dirname "$f")")-$(basename "$f" .c).o"
    if [ ! -e "$o" ] || [ "$f" -nt "$o" ] || [ "$newest_h" -nt "$o" ]; then
        "$CLANG" -std=c11 -pthread $CPPFLAGS $SAN -fsanitize=fuzzer-no-link -c "$f" -o "$o"
    fi
    objs="$objs $o"
done
for t in "$srcdir"/fuzz/fuzz_*.c; do
    name=$(basename "$t" .c)
    "$CLANG" -std=c11 -pthread $CPPFLAGS $SAN -fsanitize=fuzzer -I"$srcdir/tests/fixtures" \
        "$t" $objs -o "$out/$name" $(var LIBFFI_LIBS) $(var LIBIBERTY_LIBS) -ldl -lm
    echo "built $out/$name"
done
