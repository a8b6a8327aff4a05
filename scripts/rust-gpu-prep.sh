#!/bin/sh
# Build the Rust bindings' test and example binaries here and copy them into
# DEST, with a runner, so they can be carried to a GPU machine without cargo.
#
#   scripts/rust-gpu-prep.sh BUILDDIR DEST
#     BUILDDIR: a configured and built cuabi build tree (its .libs/libcuabi.so
#               is linked against here); DEST: folder to fill (created).
#   Then, on the GPU machine, after building libcuabi there:
#     DEST/run-rust-gpu.sh LIBDIR     (LIBDIR holds libcuabi.so.1)
#
# Release profile (smaller binaries; assert! still checks), stripped.
set -e
[ $# -eq 2 ] || { echo "usage: $0 BUILDDIR DEST" >&2; exit 2; }
srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=$(cd "$1" && pwd)
mkdir -p "$2"; dest=$(cd "$2" && pwd)
libdir="$builddir/.libs"
[ -e "$libdir/libcuabi.so" ] || { echo "$libdir/libcuabi.so not built" >&2; exit 1; }
pcdir="$builddir/tests/rust-pc"
mkdir -p "$pcdir"
cat > "$pcdir/cuabi.pc" <<PC
libdir=$libdir
includedir=$srcdir/include
Name: cuabi
Description: cuabi, uninstalled (scripts/rust-gpu-prep.sh)
Version: 0
Libs: -L\${libdir} -lcuabi
Cflags: -I\${includedir}
PC
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export CARGO_TARGET_DIR="$builddir/rust-target"
mkdir -p "$CARGO_TARGET_DIR"   # the JSON below is written there before cargo makes it
cd "$srcdir/bindings/rust"
json="$builddir/rust-target/gpu-prep.json"
cargo test --offline --locked --release --no-run --message-format=json > "$json"
cargo build --offline --locked --release --examples --message-format=json >> "$json"
mkdir -p "$dest/bin"
python3 - "$json" "$dest/bin" <<'PY'
import json, shutil, sys, os
seen = set()
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    exe = m.get("executable") if m.get("reason") == "compiler-artifact" else None
    if not exe or exe in seen:
        continue
    seen.add(exe)
    kind = m["target"]["kind"][0]
    name = ("example-" if kind == "example" else "test-") + m["target"]["name"]
    if kind == "lib":
        name = "test-" + m["target"]["name"] + "-lib"
    shutil.copy2(exe, os.path.join(sys.argv[2], name))
    print(name)
PY
strip "$dest"/bin/* 2>/dev/null || true
cat > "$dest/run-rust-gpu.sh" <<'RUN'
#!/bin/sh
# Run every carried Rust test and example binary against LIBDIR/libcuabi.so.1.
# Exit status: the number of failing binaries.
[ $# -eq 1 ] || { echo "usage: $0 LIBDIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fail=0
for b in "$here"/bin/*; do
    echo "=== $(basename "$b")"
    case $(basename "$b") in
        test-*) "$b" --test-threads=1 ;;
        *) "$b" ;;
    esac || { echo "FAILED: $(basename "$b")"; fail=$((fail + 1)); }
done
echo "=== $fail failing binaries"
exit $fail
RUN
chmod +x "$dest/run-rust-gpu.sh"
du -sh "$dest"
