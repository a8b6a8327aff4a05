#!/bin/sh
# ThreadSanitizer run of tests/library/test_concurrency (8 threads x 1,000 mixed
# operations, 4 processes on one cache), of tests/compile/test_precompile (its pool
# of compiling threads), of tests/runtime/test_graph (node additions and queries
# from 4 threads, the capture registry), of tests/runtime/test_buffer (the buffer
# park and resource leases under reclaims): the
# library sources are compiled again with gcc -fsanitize=thread into
# BUILDDIR/tsan/ (apart from the normal build). SKIP (77) when the compiler
# cannot link a TSan program.
if [ -n "${CUABI_SKIP_TSAN:-}" ]; then echo "SKIP: the ThreadSanitizer run already ran in the main build (CUABI_SKIP_TSAN)"; exit 77; fi
set -eu
srcdir=${CUABI_TEST_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=$(cd "${CUABI_TEST_BUILDDIR:-.}" && pwd)
CC=${TSAN_CC:-gcc}
out=$builddir/tsan
mkdir -p "$out/obj"
echo 'int main(void) { return 0; }' > "$out/probe.c"
"$CC" -fsanitize=thread "$out/probe.c" -o "$out/probe" 2>/dev/null && "$out/probe" ||
    { echo "SKIP: $CC cannot build ThreadSanitizer programs"; exit 77; }

var() { sed -n "s/^$1 = //p" "$builddir/Makefile" | head -1; }
CPPFLAGS="-DHAVE_CONFIG_H -I$builddir -I$builddir/include -I$srcdir/include -I$srcdir/src \
 -I$srcdir/tests/fixtures $(var CUDA_CPPFLAGS) $(var DLPACK_CPPFLAGS) $(var LIBFFI_CFLAGS) \
 $(var CHECK_CFLAGS) -DCUABI_CUDA_LIBDIR=\"$(var CUDA_LIBDIR)\" -D_GNU_SOURCE"
FLAGS="-std=c11 -pthread -g -O1 -fsanitize=thread"
objs=""
# Rebuild an object when its source or any header it may include changed.
newest_h=$(ls -t "$srcdir"/src/*/*.h "$srcdir"/include/cuabi/*.h \
           "$srcdir"/include/cuabi.h | head -n 1)
# The library's layers (src/*/ but the cli, which is no part of it).
for f in "$srcdir"/src/util/*.c "$srcdir"/src/platform/*.c "$srcdir"/src/compile/*.c \
         "$srcdir"/src/runtime/*.c "$srcdir"/src/abi/*.c; do
    o="$out/obj/$(basename "$(dirname "$f")")-$(basename "$f" .c).o"
    if [ ! -e "$o" ] || [ "$f" -nt "$o" ] || [ "$newest_h" -nt "$o" ]; then
        $CC $FLAGS $CPPFLAGS -c "$f" -o "$o"
    fi
    objs="$objs $o"
done
$CC $FLAGS $CPPFLAGS "$srcdir/tests/library/test_concurrency.c" $objs -o "$out/test_concurrency" \
    $(var CHECK_LIBS) $(var LIBFFI_LIBS) $(var LIBIBERTY_LIBS) -ldl -lm
# The precompile pool (compiles on worker threads, reports on the caller's).
$CC $FLAGS $CPPFLAGS "$srcdir/tests/compile/test_precompile.c" $objs -o "$out/test_precompile" \
    $(var CHECK_LIBS) $(var LIBFFI_LIBS) $(var LIBIBERTY_LIBS) -ldl -lm
# NVIDIA's libraries are not built with TSan: their internals are not ours.
# The compiler libraries are not instrumented: their own locking (libNVVM's
# lazily made mutexes, seen racing on the H100 host, 2026-11-26) looks like
# races to TSan. NVRTC, nvJitLink and libNVVM are documented thread-safe.
cat > "$out/tsan.supp" <<'SUPP'
called_from_lib:libnvrtc.so
called_from_lib:libnvJitLink.so
called_from_lib:libnvvm.so
race:libnvrtc-builtins
SUPP
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$out/tsan.supp"
export XDG_CACHE_HOME="$out/cache-home"
"$out/test_concurrency"
"$out/test_precompile"
# Graphs: node additions and queries from 4 threads on one graph, the
# capture registry (tests/runtime/test_graph.c against the fake driver).
$CC $FLAGS $CPPFLAGS "$srcdir/tests/runtime/test_graph.c" $objs -o "$out/test_graph" \
    $(var CHECK_LIBS) $(var LIBFFI_LIBS) $(var LIBIBERTY_LIBS) -ldl -lm
CUABI_TEST_SRCDIR=$srcdir "$out/test_graph"
# Buffers: the per-thread park and resource leases, reclaimed while other
# threads churn (tests/runtime/test_buffer.c against the fake driver).
$CC $FLAGS $CPPFLAGS "$srcdir/tests/runtime/test_buffer.c" $objs -o "$out/test_buffer" \
    $(var CHECK_LIBS) $(var LIBFFI_LIBS) $(var LIBIBERTY_LIBS) -ldl -lm
CUABI_TEST_SRCDIR=$srcdir "$out/test_buffer"
