#!/bin/sh
# The Julia bindings, checked without Julia: tests/bindings/julia_check.py parses every
# .jl file with tree-sitter and checks each ccall's types against api/*.toml.
# Then a self-test: a copy with a wrong type and a syntax error must fail.
srcdir=${CUABI_TEST_SRCDIR:-$(dirname "$0")/../..}
builddir=${CUABI_TEST_BUILDDIR:-.}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 missing"; exit 77; }
python3 "$srcdir/tests/bindings/julia_check.py" --root "$srcdir"
rc=$?
[ $rc -eq 0 ] || exit $rc

tmp="$builddir/tests/julia-selftest"
rm -rf "$tmp" && mkdir -p "$tmp/bindings/julia" || exit 1
cp -r "$srcdir/api" "$srcdir/gen" "$tmp/" && cp -r "$srcdir/bindings/julia/CuABI" "$tmp/bindings/julia/" || exit 1
lib="$tmp/bindings/julia/CuABI/src/LibCuABI.jl"
# int * -> Ptr{Cuint}: wrong signedness must be caught.
sed -i 's/(:cuabi_device_count, libcuabi), cuabi_status, (Ptr{Cint},)/(:cuabi_device_count, libcuabi), cuabi_status, (Ptr{Cuint},)/' "$lib"
printf 'function broken(\n' >> "$tmp/bindings/julia/CuABI/src/CuABI.jl"
# An occupancy function the safe wrapper no longer reaches.
sed -i 's/L\.cuabi_occupancy_max_active_clusters(/L.cuabi_occupancy_max_potential_cluster_size(/' \
    "$tmp/bindings/julia/CuABI/src/compute.jl"
out=$(python3 "$srcdir/tests/bindings/julia_check.py" --root "$tmp")
if [ $? -ne 1 ] || ! echo "$out" | grep -q 'cuabi_device_count: parameter out' ||
   ! echo "$out" | grep -q 'CuABI.jl:.*\(syntax error\|missing\)' ||
   ! echo "$out" | grep -q 'cuabi_occupancy_max_active_clusters (occupancy) is not reached'; then
    echo "FAIL: the checker did not catch a wrong ccall type, a syntax error and an"
    echo "occupancy function the safe wrapper lacks:"
    echo "$out"; exit 1
fi
echo "self-test: a wrong ccall type, a syntax error and a missing wrapper are caught"
rm -rf "$tmp"
exit 0
