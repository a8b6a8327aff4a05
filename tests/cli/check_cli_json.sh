#!/bin/sh
# Every --json command prints exactly one valid JSON document on stdout
# (issue 29 item 5): on success, and on failure with "error" and "status"
# members and a nonzero exit. Without a GPU, in a private cache directory.
builddir=${CUABI_TEST_BUILDDIR:-.}
cuabi="$builddir/cuabi"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d /tmp/cuabi-cli-json-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
export CUABI_CACHE_DIR="$tmp/cache"
export CUABI_DRIVER_PATH=/nonexistent/libcuda.so.1

# json_run RC WANT -- ARGS...: run `cuabi ARGS` (at most 60 s) and check its
# stdout is one JSON document, valid UTF-8 (decoded strictly: Python's stdin
# would let bad bytes through as surrogates), and the exit status: RC exactly,
# or "nonzero". WANT "ok": no top-level "error"; "error": an object with
# "error" and a CUABI_* "status".
json_run() {
    want_rc=$1 want=$2; shift 3
    timeout 60 "$cuabi" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc -ne 124 ] || fail "cuabi $* did not finish in 60 s"
    if [ "$want_rc" = nonzero ]; then
        [ $rc -ne 0 ] || fail "cuabi $* exits 0"
    else
        [ $rc -eq "$want_rc" ] || fail "cuabi $* exits $rc, not $want_rc: $(cat "$tmp/err")"
    fi
    python3 - "$tmp/out" "$want" <<'PY' || fail "cuabi $*: stdout is not what it should be: $(cat "$tmp/out")"
import json, sys
raw = open(sys.argv[1], "rb").read()
doc = json.loads(raw.decode("utf-8"))        # one document: trailing data raises
if sys.argv[2] == "error":
    assert isinstance(doc, dict), doc
    assert isinstance(doc.get("error"), str) and doc["error"], doc
    assert doc.get("status", "").startswith("CUABI_ERROR_"), doc
else:
    assert not (isinstance(doc, dict) and "error" in doc), doc
PY
}

printf 'extern "C" __global__ void z(int *x) { x[0] = 1; }\n' > "$tmp/z.cu"
printf '__global__ void broken() { nope; }\n' > "$tmp/broken.cu"
cat > "$tmp/two.cu" <<'CU'
extern "C" __global__ void first(float *o) { o[0] = 1; }
extern "C" __global__ void second(float *o) { o[1] = 2; }
CU

# ---- info
json_run 0 ok -- info --json
json_run 2 error -- info --json --bogus
json_run 2 error -- info --json --count 2
(   # without NVML: info says so and succeeds; there is nothing to watch
    CUABI_NVML_PATH=/nonexistent/libnvidia-ml.so.1 && export CUABI_NVML_PATH
    json_run 0 ok -- info --json
    json_run 1 error -- info --json --watch 1
) || exit 1

# ---- compile
json_run 0 ok -- compile "$tmp/z.cu" --json -o "$tmp/z.cubin"
json_run 1 error -- compile /nonexistent --json
json_run 1 error -- compile "$tmp/broken.cu" --json -o "$tmp/b.cubin"
json_run 1 error -- compile "$tmp/z.cu" --arch sm_42 --json
json_run 1 error -- compile "$tmp/z.cu" --arch sm_80,sm_42 --json -o "$tmp/y.cubin"
python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["outputs"])==1 and "sm_42" in d["error"], d' \
    <"$tmp/out" || fail "the arch that built is kept, the failure added: $(cat "$tmp/out")"
json_run 1 error -- compile "$tmp/z.cu" --json -o "$tmp/nodir/z.cubin"
json_run 2 error -- compile "$tmp/z.cu" --libdevice --json
json_run 2 error -- compile --json
json_run 2 error -- compile "$tmp/z.cu" --json --frob

# ---- occupancy
json_run 0 ok -- occupancy "$tmp/z.cu" --arch sm_90 --json
json_run 1 error -- occupancy "$tmp/none.cu" --json
json_run 1 error -- occupancy "$tmp/z.cu" --arch sm_61 --json
json_run 1 error -- occupancy "$tmp/z.cu" --kernel nope --arch sm_90 --json
json_run 1 error -- occupancy "$tmp/z.cu" --arch sm_90 --json --svg "$tmp/nodir/x.svg"
json_run 2 error -- occupancy "$tmp/two.cu" --arch sm_90 --json
grep -q "has 2 kernels" "$tmp/out" || fail "which kernel, in the JSON: $(cat "$tmp/out")"
json_run 2 error -- occupancy "$tmp/z.cu" --smem x --json

# ---- demo (no GPU: a success that launches nothing); without NVRTC and
# with the cache off it cannot compile
json_run 0 ok -- demo --json
(export CUABI_CACHE=0 CUABI_NVRTC_PATH=/nonexistent/libnvrtc.so.13
 json_run 1 error -- demo --json) || exit 1
json_run 2 error -- demo --json extra

# ---- cache: each action, then each against a directory it cannot use
json_run 0 ok -- cache stats --json
json_run 0 ok -- cache list --json
json_run 0 ok -- cache verify --json
json_run 0 ok -- cache warm "$tmp/z.cu" --json
json_run 1 error -- cache warm "$tmp/broken.cu" --json
json_run 1 error -- cache warm "$tmp/missing.cu" --json
json_run 2 error -- cache warm --json
json_run 0 ok -- cache clear --json
json_run 2 error -- cache frob --json
json_run 2 error -- cache stats --json --disk
: > "$tmp/notadir"   # a cache directory that is a file: every action fails
for action in stats list clear verify "warm $tmp/z.cu"; do
    # shellcheck disable=SC2086
    (export CUABI_CACHE_DIR="$tmp/notadir"; json_run 1 error -- cache $action --json) || exit 1
    grep -q "not a directory" "$tmp/out" || fail "cache $action --json says why: $(cat "$tmp/out")"
done
# an unknown command, for completeness
json_run 2 error -- frob --json

# ---- a FIFO (no writer) as FILE: refused at once, in the JSON too
# (tests/cli/check_cli_compile.sh checks the message; UTF-8 in the output:
# tests/cli/check_cli_cache.sh and tests/cli/test_cli_options)
mkfifo "$tmp/fifo.cu" || fail "mkfifo"
json_run 1 error -- compile "$tmp/fifo.cu" --json
json_run 1 error -- occupancy "$tmp/fifo.cu" --json
json_run 1 error -- cache warm "$tmp/fifo.cu" --json
# ... and as a manifest
mkfifo "$tmp/fifo.toml" || fail "mkfifo"
json_run 1 error -- cache warm "$tmp/fifo.toml" --json
# ... and at an entry's path (list, verify)
json_run 0 ok -- cache warm "$tmp/z.cu" --json
set -- "$CUABI_CACHE_DIR"/*.bin
rm -f "$1" && mkfifo "$1" || fail "mkfifo"
json_run 0 ok -- cache list --json
json_run 0 ok -- cache verify --json
# ---- issue 29 item 5: a manifest with a BOM, names that are not UTF-8 or
# hold a NUL: problems in valid JSON, nothing compiled under a wrong name
printf '\357\273\277[[source]]\ncode = "extern \\"C\\" __global__ void b() {}"\narchs = ["sm_80"]\n' > "$tmp/bom.toml"
json_run 0 ok -- cache warm "$tmp/bom.toml" --json
printf '[[source]]\nname = "bad\377name.cu"\ncode = "extern \\"C\\" __global__ void q() {}"\narchs = ["sm_80"]\n' > "$tmp/badname.toml"
json_run 1 error -- cache warm "$tmp/badname.toml" --json
printf '[[source]]\nname = "\\u0000x.cu"\ncode = "extern \\"C\\" __global__ void q() {}"\narchs = ["sm_80"]\n' > "$tmp/nulname.toml"
json_run 1 error -- cache warm "$tmp/nulname.toml" --json
python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["summary"]["total"]==0 and d["summary"]["problems"]==1, d' \
    <"$tmp/out" || fail "a NUL in a name: a problem, not a compile: $(cat "$tmp/out")"
exit 0
