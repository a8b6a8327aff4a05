#!/bin/sh
# Every public header compiles alone as strict C11 and as C++.
srcdir=${CUABI_TEST_SRCDIR:-$(dirname "$0")/../..}
builddir=${CUABI_TEST_BUILDDIR:-.}
CC=${CC:-cc}; CXX=${CXX:-c++}
# Where the build found dlpack/dlpack.h (cuabi/dlpack.h includes it).
extra=${CUABI_TEST_CPPFLAGS:-}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; n=0
for h in "$srcdir"/include/cuabi.h "$srcdir"/include/cuabi/*.h; do
    rel=${h#"$srcdir"/include/}
    printf '#include "%s"\nint cuabi_header_probe;\n' "$rel" > "$tmp/t.c"
    cp "$tmp/t.c" "$tmp/t.cpp"
    $CC -std=c11 -pedantic -Werror -Wall -Wextra -I"$builddir/include" -I"$srcdir/include" $extra \
        -c "$tmp/t.c" -o "$tmp/t.o" || { echo "FAIL (C11): $rel"; fail=1; }
    $CXX -std=c++11 -pedantic -Werror -Wall -Wextra -I"$builddir/include" -I"$srcdir/include" $extra \
        -c "$tmp/t.cpp" -o "$tmp/t.o" || { echo "FAIL (C++): $rel"; fail=1; }
    n=$((n+1))
done
echo "$n headers checked as C11 and C++"
exit $fail
