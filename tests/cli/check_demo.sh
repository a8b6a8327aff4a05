#!/bin/sh
# cuabi demo: works with or without a GPU (exit 0), second run from the cache.
builddir=${CUABI_TEST_BUILDDIR:-.}
cuabi="$builddir/cuabi"
fail() { echo "FAIL: $*"; exit 1; }
XDG_CACHE_HOME=$(mktemp -d) || exit 1
export XDG_CACHE_HOME
trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
"$cuabi" demo --help | grep -q "usage: cuabi demo" || fail "--help"
out=$("$cuabi" demo) || fail "first run exits 0: $out"
echo "$out"
echo "$out" | grep -q "compiled now" || fail "first run compiles"
echo "$out" | grep -q "linked with nvJitLink to a CUBIN (linked now)" || fail "links with nvJitLink"
echo "$out" | grep -q "resources: .* registers" || fail "prints resources"
echo "$out" | grep -q "occupancy on sm_" || fail "prints occupancy"
if echo "$out" | grep -q "No GPU available"; then
    echo "$out" | grep -q "skipping the launch" || fail "says the launch is skipped"
    # issue 17: no GPU is not fixed by pointing CUABI_DRIVER_PATH somewhere
    echo "$out" | grep -q "CUABI_DRIVER_PATH" && fail "no GPU: no CUABI_DRIVER_PATH remedy"
    "$cuabi" demo --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["launched"] is False and d["correct"] is None, d
assert d["skipped_because"], d' || fail "json without a GPU: correct is null"
else
    echo "$out" | grep -q "\[10, 26, 42\] (correct)" || fail "small case"
    echo "$out" | grep -q "all sums match the CPU" || fail "large case"
    "$cuabi" demo --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["launched"] is True and d["correct"] is True, d' || fail "json on a GPU"
fi
out=$("$cuabi" demo) || fail "second run exits 0"
echo "$out" | grep -q "from the on-disk cache" || fail "second run from the cache"
echo "$out" | grep -q "to a CUBIN (from the on-disk cache)" || fail "second run's link from the cache"
"$cuabi" demo --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["from_cache"] and d["link_from_cache"] and "resources" in d' \
    || fail "json"
exit 0
