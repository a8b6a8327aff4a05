#!/bin/sh
# The cuabi tool: help, info (text and JSON) with or without a GPU, libNVVM or nvFatbin.
builddir=${CUABI_TEST_BUILDDIR:-.}
cuabi="$builddir/cuabi"
fail() { echo "FAIL: $*"; exit 1; }
"$cuabi" --help | grep -q "info" || fail "help lists info"
"$cuabi" info --help | grep -q "usage: cuabi info" || fail "info --help"
"$cuabi" nope >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown command exits 2"
out=$("$cuabi" info) || fail "info exits 0"
echo "$out"
echo "$out" | grep -q "^cuabi " || fail "info prints the library version"
echo "$out" | grep -q "^NVRTC " || fail "info prints NVRTC"
echo "$out" | grep -Eq "^GPU 0:|^No GPU available: " || fail "info names GPUs or says there is none"
# Each GPU's default pool as one line (issue 25's pool summary); the C tests'
# fake driver stands in for a GPU where there is none.
fake="$builddir/tests/fixtures/.libs/fake_cuda_graph.so"
pools=$(if echo "$out" | grep -q "^GPU 0:"; then echo "$out"
        elif [ -e "$fake" ]; then CUABI_DRIVER_PATH="$fake" "$cuabi" info; fi)
[ -z "$pools" ] || echo "$pools" | grep -Eq "^  default pool +pool device 0: reserved " ||
    fail "info prints each GPU's default pool"
json=$("$cuabi" info --json) || fail "info --json exits 0"
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert "devices" in d and "nvrtc" in d' \
    || fail "info --json is JSON with devices and nvrtc"
# libNVVM and nvFatbin: a version and an existing file, or why not.
echo "$out" | grep -Eq "^libNVVM +([0-9]+\.[0-9]+ +/|not available: )" || fail "info prints libNVVM"
echo "$out" | grep -Eq "^nvFatbin +(([0-9]+\.[0-9]+|\?) +/|not available: )" || fail "info prints nvFatbin"
echo "$json" | python3 -c '
import json, os, sys
d = json.load(sys.stdin)
for lib in ("nvvm", "nvfatbin"):
    e = d[lib]
    if e["available"]:
        assert e["version"] > 0 and os.path.isfile(e["path"]) and e["error"] == "", e
    else:
        assert e["error"] and e["version"] == 0, e' || fail "info --json has nvvm and nvfatbin"
out=$(CUABI_NVVM_PATH=/nonexistent/libnvvm.so.4 CUABI_NVFATBIN_PATH=/nonexistent/libnvfatbin.so.13 \
      "$cuabi" info) || fail "info without libNVVM and nvFatbin exits 0"
echo "$out" | grep -q "^libNVVM .*not available: .*CUABI_NVVM_PATH=/nonexistent/libnvvm.so.4" \
    || fail "info names the missing libNVVM: $out"
echo "$out" | grep -q "^nvFatbin .*not available: .*CUABI_NVFATBIN_PATH=/nonexistent" \
    || fail "info names the missing nvFatbin: $out"
# NCCL: the fake one through CUABI_NCCL_PATH (version and file), a missing
# one named, and --json's "nccl" object.
fake_nccl="${CUABI_TEST_BUILDDIR:-.}/tests/fixtures/.libs/fake_nccl.so"
if [ -f "$fake_nccl" ]; then
    out=$(CUABI_NCCL_PATH="$fake_nccl" "$cuabi" info) || fail "info with the fake NCCL exits 0"
    echo "$out" | grep -Eq "^NCCL +2\.28\.9 +/.*fake_nccl\.so" || fail "info prints NCCL: $out"
    CUABI_NCCL_PATH="$fake_nccl" "$cuabi" info --json | python3 -c '
import json, sys
e = json.load(sys.stdin)["nccl"]
assert e["available"] and e["version"] == 22809 and e["path"].endswith("fake_nccl.so"), e' \
        || fail "info --json has nccl"
fi
out=$(CUABI_NCCL_PATH=/nonexistent/libnccl.so.2 "$cuabi" info) || fail "info without NCCL exits 0"
echo "$out" | grep -q "^NCCL .*not available: .*CUABI_NCCL_PATH=/nonexistent/libnccl.so.2" \
    || fail "info names the missing NCCL: $out"
# No driver at all: one clear line, exit 0.
out=$(CUABI_DRIVER_PATH=/nonexistent/libcuda.so.1 "$cuabi" info) || fail "info without driver exits 0"
echo "$out" | grep -q "^No GPU available: .*libcuda" || fail "info without driver says so"
exit 0
