#!/bin/sh
# Generated files must match the API description (make gen-check), and the
# plugin table may only grow at its end (api/table_order.txt).
srcdir=${CUABI_TEST_SRCDIR:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || { echo "python3 missing"; exit 77; }
python3 -c 'import tomllib' 2>/dev/null || { echo "python3 lacks tomllib (needs 3.11+)"; exit 77; }
python3 "$srcdir/gen/cuabi_gen.py" --root "$srcdir" --check || exit 1

# A copy of the description with one function appended to an early module
# and one removed: the new one must land at the table's end, the removal
# must be refused.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cp -R "$srcdir/api" "$srcdir/gen" "$tmp/"
cat >>"$tmp/api/device.toml" <<'TOML'

[[function]]
name = "cuabi_device_zz_gen_test"
doc = "Test only."
params = [{ name = "device", type = "cuabi_device *" }]
TOML
python3 - "$tmp" <<'PY' || exit 1
import sys
sys.path.insert(0, sys.argv[1] + "/gen")
import cuabi_gen
api = cuabi_gen.Api(sys.argv[1])
names = [f.name for f in api.table_functions]
assert names[-1] == "cuabi_device_zz_gen_test", names[-3:]
with open(sys.argv[1] + "/api/table_order.txt", "a") as f:
    f.write("cuabi_gone_function\n")
try:
    cuabi_gen.Api(sys.argv[1])
except cuabi_gen.ApiError as e:
    assert "cuabi_gone_function" in str(e), e
else:
    raise SystemExit("a function removed from the table was not refused")
print("plugin table order: append-only checked")
PY
