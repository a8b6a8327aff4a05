#!/bin/sh
# A host loads libcuabi with dlopen() and one dlsym().
builddir=${CUABI_TEST_BUILDDIR:-.}
lib=$(ls "$builddir"/.libs/libcuabi.so.[0-9] 2>/dev/null | head -n 1)
[ -n "$lib" ] || { echo "libcuabi.so.N not built"; exit 1; }
out=$("$builddir/examples/plugin_host" "$lib") || { echo "$out"; echo "FAIL: plugin_host"; exit 1; }
echo "$out"
echo "$out" | grep -q "^loaded cuabi " || exit 1
echo "$out" | grep -q "CUABI_ERROR_INVALID_HANDLE" || exit 1
