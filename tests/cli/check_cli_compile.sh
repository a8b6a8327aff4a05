#!/bin/sh
# cuabi compile and cuabi cache, without a GPU, in a private cache directory.
builddir=${CUABI_TEST_BUILDDIR:-.}
srcdir=${CUABI_TEST_SRCDIR:-$(dirname "$0")/../..}
cuabi="$builddir/cuabi"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d /tmp/cuabi-cli-compile-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
export CUABI_CACHE_DIR="$tmp/cache"
cat > "$tmp/segred.cu" <<'SRC'
template <typename T, int BLOCK>
__global__ void segred(const T *in, T *out, const int *offsets)
{
    __shared__ T part[BLOCK];
    int s = blockIdx.x, t = threadIdx.x;
    T acc = 0;
    for (int i = offsets[s] + t; i < offsets[s + 1]; i += BLOCK) acc += in[i];
    part[t] = acc;
    __syncthreads();
    for (int w = BLOCK / 2; w > 0; w /= 2) { if (t < w) part[t] += part[t + w]; __syncthreads(); }
    if (t == 0) out[s] = part[0] * SCALE;
}
SRC
printf 'extern "C" __global__ void z(int *x) { x[0] = 1; }\n' > "$tmp/z.cu"
printf '__global__ void broken() { nope; }\n' > "$tmp/broken.cu"

"$cuabi" compile --help | grep -q "usage: cuabi compile" || fail "compile --help"
"$cuabi" cache --help | grep -q "usage: cuabi cache" || fail "cache --help"
"$cuabi" compile >/dev/null 2>&1; [ $? -eq 2 ] || fail "compile without FILE exits 2"
"$cuabi" compile "$tmp/z.cu" --bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option exits 2"
"$cuabi" compile "$tmp/nonexistent.cu" 2>&1 | grep -q "cannot read" || fail "unreadable file"

out=$("$cuabi" compile "$tmp/segred.cu" -D SCALE=2 --name-expr 'segred<float, 256>' \
      -o "$tmp/s.cubin") || fail "compile exits 0"
echo "$out"
echo "$out" | grep -q "compiled" || fail "first compile compiles"
echo "$out" | grep -q "segred<float, 256> = _Z6segredIfLi256EEvPKT_PS0_PKi" || fail "lowered name"
echo "$out" | grep -Eq "_Z6segredIfLi256EEvPKT_PS0_PKi +[0-9]+ +1024 " || fail "resources (1024 B smem)"
head -c 4 "$tmp/s.cubin" | od -c | grep -q "E   L   F" || fail "writes a CUBIN"
out=$("$cuabi" compile "$tmp/segred.cu" -DSCALE=2 --name-expr 'segred<float, 256>' -o "$tmp/s.cubin")
echo "$out" | grep -q "disk cache" || fail "second run hits the disk cache: $out"

"$cuabi" compile "$tmp/segred.cu" -D SCALE=1 --arch sm_80 --arch sm_90 --ptx -o "$tmp/s.ptx" \
    >/dev/null || fail "two archs"
grep -q "target sm_80" "$tmp/s.sm_80.ptx" || fail "sm_80 PTX"
grep -q "target sm_90" "$tmp/s.sm_90.ptx" || fail "sm_90 PTX"
"$cuabi" compile "$tmp/z.cu" --ltoir -o "$tmp/z.ltoir" >/dev/null || fail "ltoir"
[ -s "$tmp/z.ltoir" ] || fail "ltoir written"
json=$("$cuabi" compile "$tmp/z.cu" --json -o "$tmp/z.cubin") || fail "compile --json"
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); o=d["outputs"][0]; assert o["kernels"][0]["name"]=="z" and "registers" in o["kernels"][0], d' \
    || fail "compile --json has kernels with resources"
err=$("$cuabi" compile "$tmp/broken.cu" 2>&1); [ $? -eq 1 ] || fail "compile error exits 1"
echo "$err" | grep -q "broken.cu(1): error" || fail "compile error shows file:line: $err"
"$cuabi" compile "$tmp/z.cu" --arch sm_42 2>&1 | grep -q "not supported" || fail "unknown arch"

# Fatbins (issue 16): one file for several architectures, kept by the cache.
out=$("$cuabi" compile "$tmp/z.cu" --arch sm_80,sm_90 --arch compute_90 --fatbin \
      -o "$tmp/z.fatbin") || fail "fatbin exits 0"
echo "$out"
echo "$out" | grep -Eq "packed by (nvfatbin|fatbinary)" || fail "fatbin packer named: $out"
echo "$out" | grep -q "sm_80:" && echo "$out" | grep -q "sm_90:" || fail "fatbin kernels per arch"
head -c 4 "$tmp/z.fatbin" | od -An -tx1 | grep -q "50 ed 55 ba" || fail "writes a fatbin"
out=$("$cuabi" compile "$tmp/z.cu" --arch sm_80,sm_90,compute_90 --fatbin -o "$tmp/z2.fatbin")
echo "$out" | grep -q "disk cache" || fail "fatbin from the disk cache: $out"
cmp -s "$tmp/z.fatbin" "$tmp/z2.fatbin" || fail "the cached fatbin is the same"
out=$("$cuabi" compile "$tmp/z.cu" --arch sm_80,sm_90 --fatbin -o "$tmp/z3.fatbin")
echo "$out" | grep -q "compiled" || fail "no PTX is another key: $out"
"$cuabi" compile "$tmp/z.cu" --arch sm_80,sm_80 --fatbin 2>&1 | grep -q "twice" \
    || fail "duplicate fatbin arch"
err=$(CUABI_NVFATBIN_PATH=/nonexistent/libnvfatbin.so.13 CUABI_FATBINARY=/nonexistent/fatbinary \
      "$cuabi" compile "$tmp/z.cu" --arch sm_75 --fatbin -o "$tmp/z4.fatbin" 2>&1)
[ $? -eq 1 ] || fail "no nvFatbin and no fatbinary exits 1"
echo "$err" | grep -q "CUABI_NVFATBIN_PATH=/nonexistent" && echo "$err" | grep -q \
    "CUABI_FATBINARY=/nonexistent/fatbinary" || fail "missing packers named: $err"

# NVVM IR (issue 16): .ll text and .bc bitcode through libNVVM; a CUBIN is
# libNVVM's PTX compiled on. tests/fixtures/data/nvvm_kernels.ll: expk (calls
# libdevice's __nv_expf) and scale.
cp "$srcdir/tests/fixtures/data/nvvm_kernels.ll" "$srcdir/tests/fixtures/data/nvvm_kernels.bc" "$tmp/"
"$cuabi" compile --help | grep -q "NVVM IR (.ll text, .bc bitcode" || fail "compile --help names NVVM IR"
err=$("$cuabi" compile "$tmp/nonexistent.ll" 2>&1); [ $? -eq 1 ] || fail "unreadable .ll exits 1"
echo "$err" | grep -q "cannot read $tmp/nonexistent.ll: No such file or directory" || fail "unreadable .ll: $err"
mkdir "$tmp/dir.bc"
"$cuabi" compile "$tmp/dir.bc" 2>&1 | grep -q "cannot read .*dir.bc: Is a directory" || fail "a directory"
# issue 29: a FIFO with no writer (or a device) is refused at once, not waited on
mkfifo "$tmp/fifo.cu" || fail "mkfifo"
err=$(timeout 10 "$cuabi" compile "$tmp/fifo.cu" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "compile of a FIFO exits $rc, not 1 (124: it hung)"
echo "$err" | grep -q "cannot read .*fifo.cu: a FIFO, not a regular file" || fail "a FIFO: $err"
err=$(timeout 10 "$cuabi" occupancy "$tmp/fifo.cu" 2>&1); [ $? -eq 1 ] || fail "occupancy of a FIFO exits 1"
err=$(timeout 10 "$cuabi" cache warm "$tmp/fifo.cu" 2>&1); [ $? -eq 1 ] || fail "warm of a FIFO exits 1"
echo "$err" | grep -q "a FIFO, not a regular file" || fail "warm of a FIFO: $err"
"$cuabi" compile /dev/null 2>&1 | grep -q "cannot read /dev/null: a character device, not a regular file" ||
    fail "a device"
"$cuabi" compile "$tmp/nvvm_kernels.ll" --fatbin >/dev/null 2>&1; [ $? -eq 2 ] || fail "--fatbin of NVVM IR exits 2"
"$cuabi" compile "$tmp/z.cu" --libdevice >/dev/null 2>&1; [ $? -eq 2 ] || fail "--libdevice of C++ exits 2"
err=$(CUABI_NVVM_PATH=/nonexistent/libnvvm.so.4 "$cuabi" compile "$tmp/nvvm_kernels.ll" --ptx \
      --arch sm_75 -o "$tmp/x.ptx" 2>&1); [ $? -eq 1 ] || fail "no libNVVM exits 1"
echo "$err" | grep -q "libNVVM (NVVM IR programs) unavailable: CUABI_NVVM_PATH=/nonexistent" \
    || fail "no libNVVM is named: $err"
if "$cuabi" info --json | python3 -c 'import json,sys; sys.exit(not json.load(sys.stdin)["nvvm"]["available"])'; then
    out=$("$cuabi" compile "$tmp/nvvm_kernels.ll" --libdevice --arch sm_80 -o "$tmp/nk.cubin") \
        || fail "NVVM IR to a CUBIN"
    echo "$out"
    echo "$out" | grep -q "(sm_80, cubin, .*compiled)" || fail "NVVM IR compiled for sm_80: $out"
    echo "$out" | grep -Eq "^  expk +[0-9]+ +0 " && echo "$out" | grep -Eq "^  scale +[0-9]+ " \
        || fail "NVVM IR kernels' resources: $out"
    head -c 4 "$tmp/nk.cubin" | od -c | grep -q "E   L   F" || fail "NVVM IR writes a CUBIN"
    out=$("$cuabi" compile "$tmp/nvvm_kernels.ll" --libdevice --arch sm_80 -o "$tmp/nk.cubin")
    echo "$out" | grep -q "disk cache" || fail "NVVM IR from the disk cache: $out"
    out=$("$cuabi" compile "$tmp/nvvm_kernels.bc" --libdevice --ptx --arch sm_80 --name-expr scale \
          -o "$tmp/nk.ptx") || fail "NVVM bitcode to PTX"
    echo "$out" | grep -q "scale = scale" || fail "NVVM name expression: $out"
    grep -q "^.target sm_80" "$tmp/nk.ptx" && grep -q "\.entry expk" "$tmp/nk.ptx" \
        || fail "NVVM bitcode's PTX for sm_80"
    "$cuabi" compile "$tmp/nvvm_kernels.bc" --libdevice --ltoir --json -o "$tmp/nk.ltoir" \
        | python3 -c 'import json,sys; o=json.load(sys.stdin)["outputs"][0]; assert o["output"]=="ltoir" and {k["name"] for k in o["kernels"]}=={"expk","scale"}, o' \
        || fail "NVVM bitcode to LTO-IR, --json"
    [ -s "$tmp/nk.ltoir" ] || fail "NVVM LTO-IR written"
    err=$("$cuabi" compile "$tmp/nvvm_kernels.ll" --arch sm_80 -o "$tmp/nolib.cubin" 2>&1)
    [ $? -eq 1 ] || fail "NVVM IR calling libdevice without --libdevice exits 1"
    echo "$err" | grep -q "__nv_expf" && echo "$err" | grep -q "add --libdevice" \
        || fail "the missing libdevice is named: $err"
    printf 'define void @k() {\n  bogus\n}\n' > "$tmp/bad.ll"
    err=$("$cuabi" compile "$tmp/bad.ll" --ptx 2>&1); [ $? -eq 1 ] || fail "malformed .ll exits 1"
    echo "$err" | grep -q "NVVM IR .*bad.ll failed to compile" && echo "$err" | grep -q "bad.ll (2, .*parse" \
        || fail "malformed .ll shows libNVVM's log: $err"
    printf 'BC\300\336 not really bitcode' > "$tmp/bad.bc"
    err=$("$cuabi" compile "$tmp/bad.bc" 2>&1); [ $? -eq 1 ] || fail "malformed .bc exits 1"
    echo "$err" | grep -q "NVVM IR .*bad.bc failed to compile" || fail "malformed .bc: $err"
    "$cuabi" compile "$tmp/nvvm_kernels.ll" -D X=1 --ptx 2>&1 | grep -q "applies to CUDA C++ only" \
        || fail "-D refused for NVVM IR"
    "$cuabi" compile "$tmp/nvvm_kernels.ll" --ptx --name-expr nope 2>&1 | grep -q "not defined by NVVM IR" \
        || fail "unknown NVVM kernel name"
else
    echo "note: libNVVM is not here; NVVM IR compiles are not tested"
fi

"$cuabi" cache stats | grep -q "^entries" || fail "cache stats"
"$cuabi" cache stats --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["entries"] >= 4, d' \
    || fail "cache stats --json"
"$cuabi" cache list | grep -Eq "^[0-9a-f]{32} +cubin" || fail "cache list"
"$cuabi" cache list --json | python3 -c 'import json,sys; assert len(json.load(sys.stdin)) >= 4' \
    || fail "cache list --json"
"$cuabi" cache clear | grep -q cleared || fail "cache clear"
"$cuabi" cache stats --json | python3 -c 'import json,sys; assert json.load(sys.stdin)["entries"] == 0' \
    || fail "clear empties the cache"
"$cuabi" cache warm "$tmp/z.cu" "$tmp/broken.cu" --arch sm_80 --arch sm_90 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] || fail "warm with a failing file exits 1"
grep -q "4/4" "$tmp/err" || fail "warm shows a progress bar"
grep -q "nope" "$tmp/err" || fail "warm names the failure"
"$cuabi" cache warm "$tmp/z.cu" --arch sm_80 --arch sm_90 >/dev/null 2>&1 || fail "warm exits 0"
"$cuabi" cache warm "$tmp/z.cu" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["results"][0]["source"] != "compiled" and d["summary"]["cached"] == 1, d' \
    || fail "warm --json: a second warm hits"
CUABI_CACHE=0 "$cuabi" cache stats | grep -q "enabled *no" || fail "CUABI_CACHE=0 shows disabled"
"$cuabi" cache frob >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown cache subcommand exits 2"
exit 0
