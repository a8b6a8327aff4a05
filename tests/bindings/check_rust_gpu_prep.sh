#!/bin/sh
# scripts/rust-gpu-prep.sh on a fresh build directory (issue 12: it wrote
# into BUILDDIR/rust-target before anything created it). A stand-in cargo
# reports one artifact, so this runs in a second, without compiling Rust.
srcdir=${CUABI_TEST_SRCDIR:-.}
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build/.libs" "$tmp/bin"
: > "$tmp/build/.libs/libcuabi.so"
printf '#!/bin/sh\necho fake binary\n' > "$tmp/artifact"
chmod +x "$tmp/artifact"
cat > "$tmp/bin/cargo" <<CARGO
#!/bin/sh
# prints what cargo --message-format=json prints for one test binary
echo '{"reason":"compiler-artifact","executable":"$tmp/artifact","target":{"kind":["test"],"name":"smoke"}}'
CARGO
chmod +x "$tmp/bin/cargo"
PATH="$tmp/bin:$PATH" sh "$srcdir/scripts/rust-gpu-prep.sh" "$tmp/build" "$tmp/dest" >"$tmp/out" 2>&1 ||
    fail "rust-gpu-prep.sh on a fresh build directory: $(cat "$tmp/out")"
[ -x "$tmp/dest/bin/test-smoke" ] || fail "the test binary was carried"
[ -x "$tmp/dest/run-rust-gpu.sh" ] || fail "the runner was written"
[ -d "$tmp/build/rust-target" ] || fail "rust-target was created"
echo "rust-gpu-prep.sh works on a fresh build directory"
exit 0
