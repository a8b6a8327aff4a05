#!/bin/sh
# cuabi cache warm MANIFEST / verify, without a GPU, in a private cache
# directory (issue 13 item 3 and the Bad input section; issue 17 item 3:
# `cuabi cache warm bad.cu --json` must not exit 0).
builddir=${CUABI_TEST_BUILDDIR:-.}
srcdir=${CUABI_TEST_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
cuabi="$builddir/cuabi"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d /tmp/cuabi-cli-cache-XXXXXX) || exit 1
trap 'chmod -R u+rwx "$tmp"; rm -rf "$tmp"' EXIT
export CUABI_CACHE_DIR="$tmp/cache"
export CUABI_DRIVER_PATH=/nonexistent/libcuda.so.1
json() { python3 -c "import json,sys; d=json.load(sys.stdin); $1" || fail "$2"; }

# ---- issue 17 item 3: a compile error in --json mode exits 1
printf '__global__ void broken() { nope; }\n' > "$tmp/bad.cu"
out=$("$cuabi" cache warm "$tmp/bad.cu" --json); rc=$?
[ $rc -eq 1 ] || fail "warm bad.cu --json exits $rc, not 1"
printf "%s\n" "$out" | json 'r=d["results"][0]; assert r["status"]=="CUABI_ERROR_COMPILE" and "nope" in r["log"] and d["summary"]["failed"]==1, d' \
    "warm bad.cu --json reports the compile error with its log"
"$cuabi" cache warm "$tmp/missing.cu" --json >/dev/null 2>&1; [ $? -eq 1 ] || fail "warm of a missing file exits 1"

# ---- the example manifest, as shipped
"$cuabi" cache warm "$srcdir/examples/precompile/cuabi-precompile.toml" --jobs 2 >"$tmp/out" 2>"$tmp/err" ||
    fail "the example manifest warms: $(cat "$tmp/out" "$tmp/err")"
grep -Eq "^[0-9]+ compiles: [0-9]+ compiled, 0 already cached, 0 failed; 0 problems" "$tmp/out" ||
    fail "example summary: $(cat "$tmp/out")"
"$cuabi" cache warm "$srcdir/examples/precompile/cuabi-precompile.toml" --json |
    json 's=d["summary"]; assert s["compiled"]==0 and s["cached"]==s["total"]>0 and s["failed"]==0, s' \
    "a second warm of the example finds everything cached"

# ---- a manifest with every kind of problem: each reported with its line,
# the rest compiled, exit status 1
mkdir -p "$tmp/proj/kernels" "$tmp/proj/include"
echo '#define SCALE 3' > "$tmp/proj/include/config.h"
cat > "$tmp/proj/kernels/k.cu" <<'SRC'
#include <config.h>
template <typename T> __global__ void k(T *x) { x[0] = SCALE; }
SRC
cp "$tmp/bad.cu" "$tmp/proj/kernels/bad.cu"
cat > "$tmp/proj/m.toml" <<'TOML'
archs = ["sm_80", "sm_90"]
include_paths = ["include"]

[[source]]
file = "kernels/k.cu"
name_expressions = ["k<int>"]

[[source]]
file = "kernels/nothere.cu"

[[source]]
file = "kernels/k.cu"
archs = ["sm_8"]

[[source]]
file = "kernels/bad.cu"
archs = ["sm_90"]

[[source]]
file = "kernels/k.cu"
name_expressions = ["k<float>"]
archs = ["sm_42"]

[[source]]
file = "kernels/k.cu"
this line is not TOML
TOML
(cd "$tmp/proj" && "$cuabi" cache warm m.toml --json >"$tmp/out" 2>"$tmp/err"); rc=$?
[ $rc -eq 1 ] || fail "a manifest with problems exits $rc, not 1"
json 'r=d["results"]; s=d["summary"]
lines=[(x["line"], x["status"]) for x in r]
assert lines == sorted(lines, key=lambda l: l[0]), lines
ok=[x for x in r if x["status"]=="CUABI_SUCCESS"]
assert len(ok)==2 and all(x["name"]=="./kernels/k.cu" or x["name"]=="kernels/k.cu" for x in ok), r
probs={x["line"]: x["message"] for x in r if x["source"]=="manifest"}
assert "nothere.cu" in probs[9] and "sm_8" in probs[13] and "expected" in probs[26], probs
assert not [x for x in r if x["line"]==24], r   # a TOML error in a source: not compiled
bad=[x for x in r if x["line"]==15]; assert bad[0]["status"]=="CUABI_ERROR_COMPILE", bad
arch=[x for x in r if x["line"]==22]; assert arch[0]["status"]=="CUABI_ERROR_NOT_SUPPORTED" and arch[0]["arch"]=="sm_42", arch
assert s=={"total": 4, "compiled": 2, "cached": 0, "failed": 2, "problems": 3}, s' \
    "problems with their lines, the rest compiled: $(cat "$tmp/out")" < "$tmp/out"
(cd "$tmp/proj" && "$cuabi" cache warm m.toml 2>"$tmp/err" >"$tmp/out"); [ $? -eq 1 ] || fail "exit 1 again"
grep -q "m.toml:9: cannot open" "$tmp/err" || fail "missing file with its line: $(cat "$tmp/err")"
grep -q "m.toml:15: kernels/bad.cu (sm_90):.*failed to compile" "$tmp/err" || fail "compile error with its line"
grep -q "m.toml:26: " "$tmp/err" || fail "malformed line with its line"
grep -q "2 already cached" "$tmp/out" || fail "second run: cached: $(cat "$tmp/out")"
grep -q "/4 " "$tmp/err" || grep -q "/7 " "$tmp/err" || fail "progress bar"
# --arch replaces the manifest's architectures
(cd "$tmp/proj" && "$cuabi" cache warm m.toml --arch sm_75 --json) |
    json 'assert all(x["arch"]=="sm_75" for x in d["results"] if x["source"]!="manifest"), d' "--arch replaces"
"$cuabi" cache warm "$tmp/proj/m.toml" --arch sm_9 >/dev/null 2>&1; [ $? -eq 1 ] || fail "a malformed --arch exits 1"
"$cuabi" cache warm "$tmp/proj/m.toml" --jobs 0 >/dev/null 2>&1; [ $? -eq 2 ] || fail "--jobs 0 exits 2"
"$cuabi" cache warm "$tmp/proj/m.toml" "$tmp/bad.cu" >/dev/null 2>&1; [ $? -eq 2 ] || fail "manifest and files together exit 2"
"$cuabi" cache warm "$tmp/nonexistent.toml" 2>"$tmp/err"; [ $? -eq 1 ] || fail "an unreadable manifest exits 1"
grep -q "cannot open" "$tmp/err" || fail "an unreadable manifest says so"

# ---- issue 29: bytes that are not UTF-8 (a name, the lone byte of a BOM in
# the reader's message) come out as U+FFFD, so the JSON stays valid UTF-8
# (decoded strictly: Python's stdin would let them through as surrogates)
utf8_json() { python3 -c "import json,sys; d=json.loads(open(sys.argv[1],'rb').read().decode('utf-8')); $1" "$tmp/out" || fail "$2: $(cat "$tmp/out")"; }
printf 'archs = ["sm_80"]\n[[source]]\nname = "bad\377\376name.cu"\ncode = "extern \\"C\\" __global__ void q() {}"\n' \
    > "$tmp/badname.toml"
"$cuabi" cache warm "$tmp/badname.toml" --json > "$tmp/out" 2>/dev/null; [ $? -eq 1 ] || fail "a name that is not UTF-8 exits 1"
# (issue 29 item 5: such a name is a problem, and its source is not compiled)
utf8_json 'r=d["results"]; assert [x["line"] for x in r]==[3] and "invalid UTF-8" in r[0]["message"] and d["summary"]["total"]==0, d' \
    "a name that is not UTF-8"
cp "$tmp/badname.toml" "$tmp/bad$(printf '\377\376')name.toml"
"$cuabi" cache warm "$tmp/bad$(printf '\377\376')name.toml" --json > "$tmp/out" 2>/dev/null
utf8_json 'assert d["results"][0]["name"].endswith("bad\ufffd\ufffdname.toml"), d' "a manifest name that is not UTF-8"
printf '\357\273\277archs = ["sm_80"]\n' > "$tmp/bom.toml"
"$cuabi" cache warm "$tmp/bom.toml" --json > "$tmp/out" 2>/dev/null; [ $? -eq 1 ] || fail "a manifest with a BOM exits 1"
utf8_json 'assert d["results"][0]["source"] == "manifest", d' "a manifest with a BOM"

# ---- issue 29 item 8: a manifest reads only its own tree. file = "../../etc/passwd"
# and an #include of /etc/passwd used to put its first line in the compile
# error, on stdout (JSON) and stderr alike.
mkdir -p "$tmp/repo"
printf 'root:x:0:0:SECRET-LINE\n' > "$tmp/secret"
printf '#include "%s"\n__global__ void k() {}\n' "$tmp/secret" > "$tmp/repo/inc.cu"
cat > "$tmp/repo/m.toml" <<'TOML'
archs = ["sm_90"]
[[source]]
file = "../secret"
type = "cuda"
[[source]]
file = "inc.cu"
TOML
"$cuabi" cache warm "$tmp/repo/m.toml" --json > "$tmp/out" 2>"$tmp/err"; [ $? -eq 1 ] || fail "a manifest reaching outside exits 1"
! grep -q SECRET "$tmp/out" "$tmp/err" || fail "no line of a file outside is shown: $(cat "$tmp/out" "$tmp/err")"
json 'p=[x for x in d["results"] if x["source"]=="manifest"]; s=d["summary"]
assert [x["line"] for x in p]==[3, 5] and "lies outside" in p[0]["message"] and "--allow-outside" in p[1]["message"] and s["total"]==0, d' \
    "both refused, with their lines: $(cat "$tmp/out")" < "$tmp/out"
"$cuabi" cache warm "$tmp/repo/m.toml" 2>"$tmp/err" >/dev/null; [ $? -eq 1 ] || fail "exit 1 without --json"
! grep -q SECRET "$tmp/err" && grep -q "m.toml:3: source \"../secret\" lies outside" "$tmp/err" || fail "stderr: $(cat "$tmp/err")"
# --allow-outside: the caller trusts it (then the compiler shows what it read)
"$cuabi" cache warm "$tmp/repo/m.toml" --allow-outside --json > "$tmp/out" 2>/dev/null; [ $? -eq 1 ] || fail "--allow-outside exits 1 (a compile error)"
json 's=d["summary"]; assert s["total"]==2 and s["problems"]==0 and s["failed"]==2, d' "--allow-outside compiles both" < "$tmp/out"

# ---- an unusable cache directory: a clear error, no crash
CUABI_CACHE=0 "$cuabi" cache warm "$tmp/proj/m.toml" 2>"$tmp/err"; [ $? -eq 1 ] || fail "cache off exits 1"
grep -q "disabled" "$tmp/err" || fail "cache off says so"
: > "$tmp/notadir"
CUABI_CACHE_DIR="$tmp/notadir" "$cuabi" cache warm "$tmp/proj/m.toml" 2>"$tmp/err"; [ $? -eq 1 ] || fail "a file as the cache directory exits 1"
grep -q "not a directory" "$tmp/err" || fail "a file as the cache directory says so: $(cat "$tmp/err")"
if [ "$(id -u)" = 0 ]; then
    mkdir "$tmp/foreign" && chown 65534 "$tmp/foreign"
    foreign="$tmp/foreign"
else
    foreign=/   # owned by root, not by this user
fi
CUABI_CACHE_DIR="$foreign" "$cuabi" cache warm "$tmp/proj/m.toml" 2>"$tmp/err"; [ $? -eq 1 ] || fail "a foreign-owned directory exits 1"
grep -q "belongs to uid" "$tmp/err" || fail "a foreign-owned directory says so: $(cat "$tmp/err")"
CUABI_CACHE_DIR="$foreign" "$cuabi" cache stats 2>"$tmp/err"; [ $? -eq 1 ] || fail "stats of a foreign-owned directory exits 1"
grep -q "belongs to uid" "$tmp/err" || fail "stats names the owner: $(cat "$tmp/err")"

# ---- verify: damaged entries and records go, good ones stay
"$cuabi" cache verify | grep -Eq "^[0-9]+ entries checked, 0 damaged removed" || fail "verify of a good cache"
set -- "$CUABI_CACHE_DIR"/*.bin
[ $# -ge 3 ] || fail "entries to damage"
printf 'x' | dd of="$1" bs=1 seek=100 conv=notrunc 2>/dev/null
head -c 40 "$2" > "$tmp/part" && cat "$tmp/part" > "$2"
for r in "$CUABI_CACHE_DIR"/id-*; do printf 'junk\n' >> "$r"; done
"$cuabi" cache verify --json > "$tmp/out" || fail "verify --json exits 0"
json 'assert d["removed_count"] >= 3 and any("checksum" in x["problem"] for x in d["removed"]) and any("truncated" in x["problem"] for x in d["removed"]) and any("identity" in x["problem"] for x in d["removed"]), d' \
    "verify removes the damaged entries and records" < "$tmp/out"
[ ! -e "$1" ] && [ ! -e "$2" ] || fail "damaged entries are gone"
"$cuabi" cache verify | grep -q "0 damaged removed" || fail "verify again: clean"
CUABI_CACHE_DIR="$foreign" "$cuabi" cache verify 2>"$tmp/err"; [ $? -eq 1 ] || fail "verify of a foreign-owned directory exits 1"

# ---- issue 29: hostile files under an entry's name. A FIFO blocked list,
# verify and every lookup; verify deleted what it could not read; a shared
# directory was used as long as it was this user's.
set -- "$CUABI_CACHE_DIR"/*.bin
[ $# -ge 3 ] || fail "entries to replace"
rm -f "$1" && mkfifo "$1" || fail "mkfifo"
timeout 20 "$cuabi" cache list > "$tmp/out" || fail "list with a FIFO: $?"
grep -q "unusable: a FIFO, not a regular file" "$tmp/out" || fail "list names the FIFO: $(cat "$tmp/out")"
timeout 20 "$cuabi" cache list --json |
    json 'p=[x["problem"] for x in d if x["problem"]]; assert p==["a FIFO, not a regular file"] and all("problem" in x for x in d), d' \
    "list --json names the FIFO"
truncate -s 4G "$2" || fail "truncate"
if [ "$(id -u)" = 0 ]; then
    chown 4242 "$3"; left="owned by uid 4242, not by this user (uid 0)"
else
    chmod 000 "$3"; left="Permission denied"
    echo "note: not root: an unreadable entry stands for another user's"
fi
timeout 20 "$cuabi" cache verify --json > "$tmp/out"; [ $? -eq 0 ] || fail "verify --json with hostile files: $(cat "$tmp/out")"
LEFT="$left" json 'import os
rm={x["problem"] for x in d["removed"]}; lf=[x["problem"] for x in d["left"]]
assert "a FIFO, not a regular file" in rm and "truncated or padded payload" in rm, d
assert lf==[os.environ["LEFT"]] and d["skipped"]==1, d' "verify removes the FIFO and the padded entry, leaves the other: $(cat "$tmp/out")" < "$tmp/out"
[ ! -e "$1" ] && [ ! -e "$2" ] && [ -e "$3" ] || fail "what verify removed and left"
"$cuabi" cache verify > "$tmp/out" || fail "verify exits 0"
grep -q "^left alone $3: $left" "$tmp/out" && grep -q "1 left alone" "$tmp/out" || fail "verify says what it left: $(cat "$tmp/out")"
chmod 600 "$3"; chown "$(id -u)" "$3"
chmod 777 "$CUABI_CACHE_DIR"
"$cuabi" cache stats 2>"$tmp/err"; [ $? -eq 1 ] || fail "stats of a world-writable directory exits 1"
grep -q "is writable by others (mode 0777) and not sticky" "$tmp/err" || fail "stats says why: $(cat "$tmp/err")"
chmod 1777 "$CUABI_CACHE_DIR"
"$cuabi" cache stats >/dev/null || fail "a sticky shared directory is used"
chmod 700 "$CUABI_CACHE_DIR"
exit 0
