#!/bin/sh
# The cuabi tool's command lines (issue 22 item 4): each subcommand's --help
# lists exactly the options it takes (the ones README.md and docs/ name), and
# unknown options, missing arguments, bad numbers, repeated options and "--"
# give one clear line and exit 2 — with --json, also a JSON error document.
builddir=${CUABI_TEST_BUILDDIR:-.}
cuabi="$builddir/cuabi"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d /tmp/cuabi-cli-options-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
export CUABI_CACHE_DIR="$tmp/cache"
export CUABI_DRIVER_PATH=/nonexistent/libcuda.so.1
printf 'extern "C" __global__ void z(int *x) { x[0] = 1; }\n' > "$tmp/z.cu"

# ---- --help lists every option, and nothing else: the options section's
# names (-x and --long) against the documented list
options_of() {   # the option names in `cuabi $* --help`'s options section
    "$cuabi" "$@" --help | awk '/^options:/ { on = 1; next } /^[^ ]/ { on = 0 }
        on && /^  -/ { sub(/^  /, ""); sub(/  .*/, ""); n = split($0, w, /[ ,]+/)
                       for (i = 1; i <= n; i++) if (w[i] ~ /^-/) print w[i] }' | sort
}
expect_options() {   # expect_options "SUBCOMMAND" OPTION...
    sub=$1; shift
    want=$(printf '%s\n' "$@" --help -h | sort)
    # shellcheck disable=SC2086
    got=$(options_of $sub) || fail "cuabi $sub --help exits 0"
    [ "$got" = "$want" ] || fail "cuabi $sub --help lists $(echo $got), not $(echo $want)"
    # shellcheck disable=SC2086
    usage=$("$cuabi" $sub --help | sed -n '1,/^$/p')
    for o in "$@"; do   # the usage line names each one too
        echo "$usage" | grep -q -- "$o" || fail "cuabi $sub usage line lacks $o: $usage"
    done
}
expect_options info --json --watch -w --count
expect_options compile --arch -D -I --name-expr --ptx --cubin --ltoir --fatbin --libdevice -o --json
expect_options occupancy --kernel --name-expr --arch --smem --sms --grid --json --svg
expect_options demo --json
expect_options "cache stats" --json
expect_options "cache list" --json
expect_options "cache clear" --memory --disk --json
expect_options "cache warm" --arch --jobs -j --allow-outside --json
expect_options "cache verify" --json
"$cuabi" compile --help | grep -q "^arguments:" && "$cuabi" compile --help | grep -q "^  FILE " ||
    fail "compile --help describes FILE"
"$cuabi" cache warm --help | grep -q "MANIFEST.toml|FILE..." || fail "cache warm --help describes its arguments"
for a in stats list clear warm verify; do
    "$cuabi" cache --help | grep -q "cuabi cache $a " || fail "cache --help lists $a"
done
# --help wins wherever it is, as before the table
"$cuabi" compile --bogus --help | grep -q "^usage: cuabi compile" || fail "--help after a bad option"
"$cuabi" occupancy -h | grep -q "^usage: cuabi occupancy" || fail "-h"

# ---- usage errors: exit 2, one line naming the problem, then the usage line
usage_error() {   # usage_error "MESSAGE" ARGS...
    msg=$1; shift
    "$cuabi" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc -eq 2 ] || fail "cuabi $* exits $rc, not 2"
    grep -qF -- "$msg" "$tmp/err" || fail "cuabi $* says '$msg': $(cat "$tmp/err")"
    grep -q "^usage: cuabi " "$tmp/err" || fail "cuabi $* shows the usage line"
    [ ! -s "$tmp/out" ] || fail "cuabi $* prints nothing on stdout without --json"
    # the same with --json: exactly one JSON error document on stdout
    "$cuabi" "$@" --json >"$tmp/out" 2>/dev/null; rc=$?
    [ $rc -eq 2 ] || fail "cuabi $* --json exits $rc, not 2"
    python3 -c '
import json, sys
d = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
assert sys.argv[2] in d["error"] and d["status"] == "CUABI_ERROR_INVALID_ARGUMENT", d' \
        "$tmp/out" "$msg" || fail "cuabi $* --json: $(cat "$tmp/out")"
}
usage_error "unknown option '--bogus'" compile "$tmp/z.cu" --bogus
usage_error "unknown option '-q'" occupancy "$tmp/z.cu" -q
usage_error "unknown option '--frob'" info --frob
usage_error "unknown option '--memory'" cache stats --memory
usage_error "unknown option '--jobs'" demo --jobs 2
usage_error "missing argument to --arch" compile "$tmp/z.cu" --arch
usage_error "missing argument to -o" compile "$tmp/z.cu" -o
usage_error "missing argument to --kernel" occupancy "$tmp/z.cu" --kernel
usage_error "missing argument to -j" cache warm "$tmp/z.cu" -j
usage_error "missing argument to --kernel (NAME)" occupancy "$tmp/z.cu" --kernel --arch sm_90
usage_error "--smem wants an integer in 0..2147483647, got 'x'" occupancy "$tmp/z.cu" --smem x
usage_error "--smem wants an integer in 0..2147483647, got '-1'" occupancy "$tmp/z.cu" --smem -1
usage_error "--jobs wants an integer in 1..1024, got '0'" cache warm "$tmp/z.cu" --jobs 0
usage_error "-j wants an integer in 1..1024, got '2x'" cache warm "$tmp/z.cu" -j 2x
usage_error "--jobs wants an integer in 1..1024, got '99999999999999999999'" \
    cache warm "$tmp/z.cu" --jobs=99999999999999999999
usage_error "--kernel given twice ('a', then 'b')" occupancy "$tmp/z.cu" --kernel a --kernel b
usage_error "-o given twice" compile "$tmp/z.cu" -o a.cubin -o b.cubin
usage_error "--ptx and --cubin cannot go together" compile "$tmp/z.cu" --ptx --cubin
usage_error "--arch wants architectures such as sm_90" compile "$tmp/z.cu" --arch sm_80,,sm_90
usage_error "--json takes no value" info --json=yes
usage_error "missing FILE" compile
usage_error "missing FILE.cu" occupancy --arch sm_90
usage_error "missing MANIFEST.toml|FILE..." cache warm --arch sm_90
usage_error "unexpected argument 'b.cu' (one FILE only, and 'a.cu' is given)" compile a.cu b.cu
usage_error "unexpected argument 'x' (cuabi demo takes options only)" demo x
usage_error "unknown action 'frob'" cache frob
"$cuabi" cache warm "$tmp/m.toml" "$tmp/z.cu" 2>"$tmp/err"; [ $? -eq 2 ] || fail "a manifest and files exit 2"
grep -q "give one manifest" "$tmp/err" || fail "a manifest and files: $(cat "$tmp/err")"

# ---- what is allowed: repeated lists and flags, the same alternative twice,
# values glued on, "--" before a file named like an option
out=$("$cuabi" compile "$tmp/z.cu" --json --json --ptx --ptx -DX=1 -D Y -I"$tmp" -I "$tmp" \
      --arch=sm_80 --arch sm_90,sm_86 -o "$tmp/z.ptx") || fail "repeatable options: $out"
echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert [o["arch"] for o in d["outputs"]] == ["sm_80", "sm_90", "sm_86"], d' || fail "three archs: $out"
[ -s "$tmp/z.sm_86.ptx" ] || fail "--arch sm_90,sm_86 splits"
# (a file named -z.cu is taken as a file; NVRTC itself then reads a program
# name starting with '-' as one of its options, so only its reading is tested)
(cd "$tmp" && "$cuabi" compile -o z3.cubin -- -z.cu) 2>"$tmp/err"; [ $? -eq 1 ] || fail "-- -z.cu exits 1"
grep -q "cannot read -z.cu: No such file" "$tmp/err" || fail "after --, -z.cu is a file: $(cat "$tmp/err")"
"$cuabi" compile "$tmp/z.cu" -- --json >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] ||
    fail "after --, --json is an argument"
grep -q "unexpected argument '--json'" "$tmp/err" || fail "after --: $(cat "$tmp/err")"
"$cuabi" occupancy "$tmp/z.cu" --arch sm_90 --smem 0x100 --json | python3 -c '
import json, sys; assert json.load(sys.stdin)[0]["block_size"] == 32' || fail "--smem takes 0x hex"
"$cuabi" cache warm "$tmp/z.cu" -j4 --arch sm_90 >/dev/null || fail "-j4 glued"
(cd "$tmp" && "$cuabi" compile z.cu -o-z5.cubin >/dev/null && [ -s ./-z5.cubin ]) ||
    fail "a value starting with - glued on"
exit 0
