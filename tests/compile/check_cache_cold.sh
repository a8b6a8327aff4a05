#!/bin/sh
# Issue 13 item 1, without a GPU (explicit architectures):
#  (a) a compile-cache hit in a fresh process maps neither libnvrtc nor
#      libnvJitLink (CUDA C++ to CUBIN/PTX/LTO-IR, PTX to CUBIN), checked in
#      /proc/self/maps by tests/compile/cache_probe after the hit;
#      nor, for NVVM IR (text and bitcode, with libdevice), libnvvm;
#  (a') with a GPU, the same after loading the module and looking the
#      kernel up (the part the lead's GPU run exercises);
#  (b) another compiler library gives a miss: CUABI_NVRTC_PATH /
#      CUABI_NVJITLINK_PATH to a copy, the same copy found through
#      LD_LIBRARY_PATH, the file behind the path touched, grown or given
#      another build-id; a damaged identity record is ignored, never trusted;
#  (c) linked results (cuabi_linker: LTO-IR to CUBIN and PTX, PTX to CUBIN)
#      hit in a fresh process with neither library mapped (with a GPU, also
#      after loading the linked module); another input's bytes, another
#      option, output kind or arch is a miss; another nvJitLink (a copy,
#      touched) is a miss.
builddir=${CUABI_TEST_BUILDDIR:-.}
probe="$builddir/tests/compile/cache_probe"
cudalib=${CUDA_LIBDIR:-$(sed -n 's/^CUDA_LIBDIR = //p' "$builddir/Makefile" 2>/dev/null)}
fail() { echo "FAIL: $*"; exit 1; }
[ -x "$probe" ] || fail "$probe is not built"
tmp=$(mktemp -d /tmp/cuabi-cache-cold-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
export CUABI_CACHE_DIR="$tmp/cache"
export CUABI_DRIVER_PATH=/nonexistent/libcuda.so.1   # no driver: nothing else loads
unset CUABI_CACHE CUABI_NVRTC_PATH CUABI_NVJITLINK_PATH

cat > "$tmp/segred.cu" <<'SRC'
template <typename T, int BLOCK>
__global__ void segred(const T *in, T *out) { out[blockIdx.x] = in[threadIdx.x] * BLOCK; }
extern "C" __global__ void plain(float *x) { x[0] = 2.0f; }
SRC

# probe EXPECTED [VAR=VALUE] ARGS...: run the probe (with VAR=VALUE in its
# environment only), compare its line with EXPECTED (a pattern such as
# "hit=2 nvrtc=0 nvjitlink=0 *").
probe() {
    want=$1
    shift
    case "$1" in *=*) assign=$1; shift ;; *) assign= ;; esac
    got=$(env ${assign:+"$assign"} "$probe" "$@" 2>"$tmp/err") ||
        fail "${assign:+$assign }cache_probe $*: $(cat "$tmp/err")"
    case "$got" in
        $want) echo "ok: ${assign:+$assign }$* -> $got" ;;
        *) fail "${assign:+$assign }cache_probe $*: expected '$want', got '$got'" ;;
    esac
}
cu="$tmp/segred.cu --arch sm_90 --name-expr segred<float,256>"

# ---- (a) hits in fresh processes load no compiler
# shellcheck disable=SC2086
probe "hit=0 nvrtc=1 *" $cu
# shellcheck disable=SC2086
probe "hit=2 nvrtc=0 nvjitlink=0 *" $cu
# shellcheck disable=SC2086
probe "hit=0 nvrtc=1 *" $cu --ptx -o "$tmp/segred.ptx"
# shellcheck disable=SC2086
probe "hit=2 nvrtc=0 nvjitlink=0 *" $cu --ptx
# shellcheck disable=SC2086
probe "hit=0 nvrtc=1 *" $cu --ltoir
# shellcheck disable=SC2086
probe "hit=2 nvrtc=0 nvjitlink=0 *" $cu --ltoir
# PTX input, assembled to a CUBIN by nvJitLink
probe "hit=0 nvrtc=* nvjitlink=1 *" "$tmp/segred.ptx" --arch sm_90
probe "hit=2 nvrtc=0 nvjitlink=0 *" "$tmp/segred.ptx" --arch sm_90
ls "$tmp/cache"/id-nvrtc-* >/dev/null 2>&1 || fail "no NVRTC identity record written"

# ---- (c) linked results: two LTO-IR units, linked by cuabi_linker
cat > "$tmp/kern.cu" <<'SRC'
extern __device__ int helper(int x);
extern "C" __global__ void kern(int *o) { o[threadIdx.x] = helper(threadIdx.x); }
SRC
echo '__device__ int helper(int x) { return x * 3 + 1; }' > "$tmp/helper.cu"
echo '__device__ int helper(int x) { return x * 5 + 2; }' > "$tmp/helper2.cu"
for u in kern helper helper2; do
    probe "hit=* nvrtc=* *" "$tmp/$u.cu" --arch sm_90 --ltoir --rdc -o "$tmp/$u.ltoir"
done
cp "$tmp/helper.ltoir" "$tmp/helper1.ltoir"
link="--link $tmp/kern.ltoir $tmp/helper.ltoir --arch sm_90 --lto"
# shellcheck disable=SC2086
probe "hit=0 nvrtc=* nvjitlink=1 *" $link
# shellcheck disable=SC2086
probe "hit=2 nvrtc=0 nvjitlink=0 *" $link
# shellcheck disable=SC2086
probe "hit=0 nvrtc=* nvjitlink=1 *" $link --ptx
# shellcheck disable=SC2086
probe "hit=2 nvrtc=0 nvjitlink=0 *" $link --ptx
# another option
# shellcheck disable=SC2086
probe "hit=0 nvrtc=* nvjitlink=1 *" $link -O 0
# shellcheck disable=SC2086
probe "hit=2 nvrtc=0 nvjitlink=0 *" $link -O 0
# another input's bytes under the same name, then the first again
cp "$tmp/helper2.ltoir" "$tmp/helper.ltoir"
# shellcheck disable=SC2086
probe "hit=0 nvrtc=* nvjitlink=1 *" $link
cp "$tmp/helper1.ltoir" "$tmp/helper.ltoir"
# shellcheck disable=SC2086
probe "hit=2 nvrtc=0 nvjitlink=0 *" $link
# (c') with a GPU (the lead's machine): the linked hit's CUBIN loads and its
# kernel is looked up with neither compiler mapped. Skipped here.
# shellcheck disable=SC2086
gpu=$(env -u CUABI_DRIVER_PATH "$probe" $link --load kern 2>"$tmp/err") ||
    fail "cache_probe $link --load kern: $(cat "$tmp/err")"
case "$gpu" in
    *gpu=1*)
        case "$gpu" in
            "hit=2 nvrtc=0 nvjitlink=0 "*) echo "ok: link hit + module load on the GPU -> $gpu" ;;
            *) fail "link hit + module load on the GPU: $gpu" ;;
        esac ;;
    *) echo "no GPU: the linked module-load check is left to a GPU machine ($gpu)" ;;
esac
# a PTX input linked to a CUBIN, for two architectures
probe "hit=0 nvrtc=* nvjitlink=1 *" --link "$tmp/segred.ptx" --arch sm_90
probe "hit=2 nvrtc=0 nvjitlink=0 *" --link "$tmp/segred.ptx" --arch sm_90
probe "hit=0 nvrtc=* nvjitlink=1 *" --link "$tmp/segred.ptx" --arch sm_100
# the entries are listed as linked
if [ -x "$builddir/cuabi" ]; then
    n=$("$builddir/cuabi" cache list 2>/dev/null | grep -c ' linked$')
    [ "$n" -eq 6 ] || fail "cuabi cache list shows $n linked entries, not 6"
    echo "ok: cuabi cache list shows the 6 linked entries"
fi
ls "$tmp/cache"/id-nvjitlink-* >/dev/null 2>&1 || fail "no nvJitLink identity record written"

# ---- a damaged identity record is ignored: NVRTC is loaded to learn its
# version (still a hit: same compiler), and the record is written again
for r in "$tmp/cache"/id-nvrtc-*; do printf 'version 99999\n' >> "$r"; done
# shellcheck disable=SC2086
probe "hit=2 nvrtc=1 *" $cu
# shellcheck disable=SC2086
probe "hit=2 nvrtc=0 nvjitlink=0 *" $cu

# ---- NVVM IR through libNVVM: a hit maps no libnvvm (and no other compiler)
srcdir=${CUABI_TEST_SRCDIR:-$(dirname "$0")/../..}
nvvm_ir="$srcdir/tests/fixtures/data/nvvm_kernels.bc"
if "$probe" "$nvvm_ir" --arch sm_90 --libdevice >"$tmp/out" 2>"$tmp/err"; then
    grep -q "^hit=0 nvrtc=0 nvjitlink=0 nvvm=1 " "$tmp/out" || fail "NVVM miss: $(cat "$tmp/out")"
    probe "hit=2 nvrtc=0 nvjitlink=0 nvvm=0 *" "$nvvm_ir" --arch sm_90 --libdevice
    probe "hit=0 nvrtc=0 nvjitlink=0 nvvm=1 *" "$nvvm_ir" --arch sm_90 --libdevice --ltoir
    probe "hit=2 nvrtc=0 nvjitlink=0 nvvm=0 *" "$nvvm_ir" --arch sm_90 --libdevice --ltoir
    probe "hit=0 nvrtc=0 nvjitlink=0 nvvm=1 *" "$srcdir/tests/fixtures/data/nvvm_kernels.ll" --arch sm_90
    probe "hit=2 nvrtc=0 nvjitlink=0 nvvm=0 *" "$srcdir/tests/fixtures/data/nvvm_kernels.ll" --arch sm_90
    ls "$tmp/cache"/id-nvvm-* >/dev/null 2>&1 || fail "no libNVVM identity record written"
elif grep -q "libNVVM" "$tmp/err"; then
    echo "SKIP part NVVM: $(cat "$tmp/err")"
else
    fail "cache_probe $nvvm_ir: $(cat "$tmp/err")"
fi

# ---- (a') with a GPU (the lead's machine): the hit, the module load and the
# kernel lookup of a fresh process still map no compiler. Skipped here.
gpu=$(env -u CUABI_DRIVER_PATH "$probe" $cu --load 'segred<float,256>' 2>"$tmp/err") ||
    fail "cache_probe --load: $(cat "$tmp/err")"
case "$gpu" in
    *gpu=1*)
        case "$gpu" in
            "hit=2 nvrtc=0 nvjitlink=0 "*) echo "ok: hit + module load on the GPU -> $gpu" ;;
            *) fail "hit + module load on the GPU: $gpu" ;;
        esac ;;
    *) echo "no GPU: the module-load check is left to a GPU machine ($gpu)" ;;
esac

# ---- (b) another compiler library gives a miss
[ -n "$cudalib" ] && [ -f "$cudalib/libnvrtc.so.13" ] || { echo "SKIP part (b): no $cudalib/libnvrtc.so.13"; exit 0; }
mkdir -p "$tmp/lib"
cp -p "$cudalib/libnvrtc.so.13" "$tmp/lib/libnvrtc.so.13" || fail "copy NVRTC"
# A cache directory of its own, so a hit can only be the copy's entry.
export CUABI_CACHE_DIR="$tmp/cache2"
# a copy elsewhere (same size, time and build-id; another path)
# shellcheck disable=SC2086
probe "hit=0 nvrtc=1 *" CUABI_NVRTC_PATH="$tmp/lib/libnvrtc.so.13" $cu
# shellcheck disable=SC2086
probe "hit=2 nvrtc=0 nvjitlink=0 *" CUABI_NVRTC_PATH="$tmp/lib/libnvrtc.so.13" $cu
# the same copy found by the dynamic loader's search (LD_LIBRARY_PATH):
# identified without loading it, its entry hits
# shellcheck disable=SC2086
probe "hit=2 nvrtc=0 nvjitlink=0 *" LD_LIBRARY_PATH="$tmp/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" $cu
# the default NVRTC does not take the copy's entry
# shellcheck disable=SC2086
probe "hit=0 nvrtc=1 *" $cu
# the file behind the path replaced: a new modification time ...
touch "$tmp/lib/libnvrtc.so.13"
# shellcheck disable=SC2086
probe "hit=0 nvrtc=1 *" CUABI_NVRTC_PATH="$tmp/lib/libnvrtc.so.13" $cu
# ... another build-id (same size, time restored)
python3 - "$tmp/lib/libnvrtc.so.13" <<'PY' || fail "cannot change the build-id"
import struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
at = data.find(b"GNU\0", 0, 1 << 20)          # the NT_GNU_BUILD_ID note's name
assert at > 12 and struct.unpack_from("<I", data, at - 4)[0] == 3, "no build-id note"
data[at + 4] ^= 0xff
open(path, "r+b").write(data)
PY
touch -d @0 "$tmp/lib/libnvrtc.so.13"
# shellcheck disable=SC2086
probe "hit=0 nvrtc=1 *" CUABI_NVRTC_PATH="$tmp/lib/libnvrtc.so.13" $cu
# ... a different size (same time)
printf 'x' >> "$tmp/lib/libnvrtc.so.13"
touch -d @0 "$tmp/lib/libnvrtc.so.13"
# shellcheck disable=SC2086
probe "hit=0 nvrtc=1 *" CUABI_NVRTC_PATH="$tmp/lib/libnvrtc.so.13" $cu
# shellcheck disable=SC2086
probe "hit=2 nvrtc=0 nvjitlink=0 *" CUABI_NVRTC_PATH="$tmp/lib/libnvrtc.so.13" $cu
rm -f "$tmp/lib/libnvrtc.so.13"

# nvJitLink for PTX input: a copy is another compiler
if [ -f "$cudalib/libnvJitLink.so.13" ]; then
    cp -p "$cudalib/libnvJitLink.so.13" "$tmp/lib/libnvJitLink.so.13" || fail "copy nvJitLink"
    probe "hit=0 nvrtc=* nvjitlink=1 *" CUABI_NVJITLINK_PATH="$tmp/lib/libnvJitLink.so.13" \
        "$tmp/segred.ptx" --arch sm_90
    probe "hit=2 nvrtc=0 nvjitlink=0 *" CUABI_NVJITLINK_PATH="$tmp/lib/libnvJitLink.so.13" \
        "$tmp/segred.ptx" --arch sm_90
    touch "$tmp/lib/libnvJitLink.so.13"
    probe "hit=0 nvrtc=* nvjitlink=1 *" CUABI_NVJITLINK_PATH="$tmp/lib/libnvJitLink.so.13" \
        "$tmp/segred.ptx" --arch sm_90
    # linked results: the copy's entries are its own
    # shellcheck disable=SC2086
    probe "hit=0 nvrtc=* nvjitlink=1 *" CUABI_NVJITLINK_PATH="$tmp/lib/libnvJitLink.so.13" $link
    # shellcheck disable=SC2086
    probe "hit=2 nvrtc=0 nvjitlink=0 *" CUABI_NVJITLINK_PATH="$tmp/lib/libnvJitLink.so.13" $link
    # shellcheck disable=SC2086
    probe "hit=2 nvrtc=0 nvjitlink=0 *" \
        LD_LIBRARY_PATH="$tmp/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" $link
    # shellcheck disable=SC2086
    probe "hit=0 nvrtc=* nvjitlink=1 *" $link
    touch "$tmp/lib/libnvJitLink.so.13"
    # shellcheck disable=SC2086
    probe "hit=0 nvrtc=* nvjitlink=1 *" CUABI_NVJITLINK_PATH="$tmp/lib/libnvJitLink.so.13" $link
    # shellcheck disable=SC2086
    probe "hit=2 nvrtc=0 nvjitlink=0 *" CUABI_NVJITLINK_PATH="$tmp/lib/libnvJitLink.so.13" $link
fi
exit 0
