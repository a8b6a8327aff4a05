#!/bin/sh
# libcuabi.so exports only cuabi_* symbols (never internal cuabi__*), and is
# not linked against libcuda, libnvrtc or libnvJitLink.
builddir=${CUABI_TEST_BUILDDIR:-.}
lib=$(ls "$builddir"/.libs/libcuabi.so.* 2>/dev/null | head -n 1)
[ -n "$lib" ] || { echo "libcuabi.so not built"; exit 1; }
bad=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVWiu]$/ {print $3}' |
      sed 's/@.*//' | grep -v '^cuabi_' ; nm -D --defined-only "$lib" |
      awk '{print $3}' | sed 's/@.*//' | grep '^cuabi__')
bad=$(echo "$bad" | grep -v '^CUABI_1$' | grep -v '^$')
if [ -n "$bad" ]; then
    echo "FAIL: libcuabi exports symbols outside cuabi_*:"; echo "$bad"; exit 1
fi
count=$(nm -D --defined-only "$lib" | grep -c ' T cuabi_')
echo "exports: $count cuabi_* functions, nothing else"
deps=$(readelf -d "$lib" | grep NEEDED)
echo "$deps"
if echo "$deps" | grep -Eq 'libcuda|libnvrtc|libnvJitLink'; then
    echo "FAIL: link-time dependency on a CUDA library"; exit 1
fi
exit 0
