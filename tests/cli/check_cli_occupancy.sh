#!/bin/sh
# cuabi occupancy: offline tables, JSON records, SVG, errors; live on a GPU.
builddir=${CUABI_TEST_BUILDDIR:-.}
srcdir=${CUABI_TEST_SRCDIR:-.}
cuabi="$builddir/cuabi"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/k.cu" <<'CU'
template <int N> __global__ void fill(float *o, int n) {
  __shared__ float s[N];
  s[threadIdx.x % N] = threadIdx.x;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) o[i] = s[(threadIdx.x + 1) % N];
}
extern "C" __global__ void plain(float *o) { o[threadIdx.x] = 1.0f; }
CU
"$cuabi" occupancy --help | grep -q "usage: cuabi occupancy" || fail "--help"
"$cuabi" occupancy >/dev/null 2>&1; [ $? -eq 2 ] || fail "missing FILE exits 2"
# issue 17: without --kernel, the file's only kernel, or a list of them
out=$("$cuabi" occupancy "$tmp/k.cu" --arch sm_90) || fail "one kernel needs no --kernel"
echo "$out" | grep -q "plain on sm_90 (offline)" || fail "the only kernel is used"
cat > "$tmp/two.cu" <<'CU'
extern "C" __global__ void first(float *o) { o[0] = 1; }
extern "C" __global__ void second(float *o) { o[1] = 2; }
CU
"$cuabi" occupancy "$tmp/two.cu" --arch sm_90 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "two kernels without --kernel exit 2 (got $rc)"
grep -q "has 2 kernels; name one with --kernel: first, second" "$tmp/err" ||
    grep -q "has 2 kernels; name one with --kernel: second, first" "$tmp/err" ||
    fail "the kernels are listed: $(cat "$tmp/err")"
out=$("$cuabi" occupancy "$tmp/k.cu" --kernel plain --arch sm_90) || fail "offline sm_90 exits 0"
echo "$out" | head -8
echo "$out" | grep -q "plain on sm_90 (offline)" || fail "title names kernel and arch"
echo "$out" | grep -Eq "^ +1024 +2 +64 +100%" || fail "1024 threads: 2 blocks, 64 warps, 100%"
echo "$out" | grep -Eq "^ +32 +32 +32 +50% +blocks" || fail "32 threads limited by blocks on sm_90"
echo "$out" | grep -q "|########################################|" || fail "bar chart"
# a template through a name expression, with dynamic shared memory, as JSON
json=$("$cuabi" occupancy "$tmp/k.cu" --kernel 'fill<4096>' --name-expr 'fill<4096>' \
       --arch sm_86 --smem 65536 --json --svg "$tmp/chart.svg") || fail "json exits 0"
echo "$json" | python3 -c '
import json, sys
recs = json.load(sys.stdin)
assert len(recs) == 32, len(recs)
for r in recs:
    assert set(["block_size", "active_blocks_per_sm", "active_warps_per_sm", "occupancy", "limiter"]) <= set(r)
    assert 0 <= r["occupancy"] <= 1
# 16 KiB static + 64 KiB dynamic + 1 KiB reserved on a 100 KiB SM: one block
assert recs[0]["active_blocks_per_sm"] == 1 and recs[0]["limiter"] == "shared memory", recs[0]
' || fail "json records"
grep -q "<svg" "$tmp/chart.svg" || fail "svg written"
grep -q "limited by shared memory" "$tmp/chart.svg" || fail "svg legend"
# issue 17 / 12: a template kernel through --kernel alone or --name-expr alone;
# the SVG stays well-formed XML (the title holds '<'), legend inside, y axis named
"$cuabi" occupancy "$tmp/k.cu" --kernel 'fill<1024>' --arch sm_90 --svg "$tmp/t.svg" \
    >"$tmp/out" || fail "--kernel with template arguments needs no --name-expr"
grep -q "fill<1024> on sm_90" "$tmp/out" || fail "title of --kernel 'fill<1024>'"
"$cuabi" occupancy "$tmp/k.cu" --name-expr 'fill< 1024 >' --arch sm_90 --json >/dev/null ||
    fail "--name-expr alone"
python3 - "$tmp/t.svg" <<'PY' || fail "svg parses and is laid out"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
texts = [t for t in root.iter(ns + "text")]
assert texts[0].text.startswith("fill<1024> on sm_90"), texts[0].text
width = float(root.get("width"))
legend = [t for t in texts if (t.text or "").startswith("limited by")]
assert len(legend) == 4
for t in legend:   # ~6 px a character at 11 px: the legend ends inside the picture
    assert float(t.get("x")) + 6.5 * len(t.text) <= width, (t.get("x"), t.text, width)
assert any("occupancy" in (t.text or "") and "rotate" in (t.get("transform") or "")
           for t in texts), "y axis label"
PY
# issue 26: a partition of --sms SMs and the waves of a --grid. `plain` at
# 1024 threads: 2 blocks per SM on sm_90; 16 SMs take 32 a wave: a
# 1,000-block grid takes 32 waves, 8 blocks in the last.
out=$("$cuabi" occupancy "$tmp/k.cu" --kernel plain --arch sm_90 --sms 16 --grid 1000) ||
    fail "--sms --grid exits 0"
echo "$out" | grep -q "plain on sm_90 (offline, 16 SMs)" || fail "title names the partition"
echo "$out" | grep -Eq "^ +1024 +2 +64 +100% +warps +32 \|" || fail "waves column: $(echo "$out" | tail -4)"
echo "$out" | grep -q "best block size 1024: 2 blocks per SM; a grid of 32 blocks fills 16 SMs" ||
    fail "min grid on the partition"
echo "$out" | grep -q "a 1,000-block grid of plain at 1024 threads takes 32 waves on 16 SMs (32 blocks a wave, 8 in the last" ||
    fail "the waves sentence: $(echo "$out" | tail -2)"
out=$("$cuabi" occupancy "$tmp/k.cu" --kernel plain --arch sm_90 --grid 1000) || fail "--grid alone"
echo "$out" | grep -q "takes 4 waves on 132 SMs" || fail "the example GPU's 132 SMs"
json=$("$cuabi" occupancy "$tmp/k.cu" --kernel plain --arch sm_90 --sms 24 --grid 12345 --json) ||
    fail "--sms --grid --json"
echo "$json" | python3 -c '
import json, sys
recs = json.load(sys.stdin)
for r in recs:
    assert r["sm_count"] == 24 and r["grid_blocks"] == 12345, r
    per_wave = r["active_blocks_per_sm"] * 24
    assert r["waves"] == -(-12345 // per_wave), r
    assert r["last_wave_blocks"] == 12345 - (r["waves"] - 1) * per_wave, r
' || fail "json waves"
"$cuabi" occupancy "$tmp/k.cu" --kernel plain --arch sm_90 --sms 0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "--sms 0 is a usage error"
"$cuabi" occupancy "$tmp/k.cu" --kernel plain --arch sm_90 --grid 0 >/dev/null 2>&1
[ $? -eq 2 ] || fail "--grid 0 is a usage error"
"$cuabi" occupancy "$tmp/k.cu" --kernel plain --arch sm_90 --sms 65536 >/dev/null 2>&1
[ $? -eq 2 ] || fail "--sms 65536 is a usage error"
# no block fits: the waves say never, the run is no error
out=$("$cuabi" occupancy "$tmp/k.cu" --kernel 'fill<4096>' --arch sm_90 --smem 300000 --grid 10) ||
    fail "no block fits exits 0"
echo "$out" | grep -q "no block size fits" || fail "no block fits: $(echo "$out" | tail -2)"
# every architecture NVRTC targets has limits (sm_88 was missing)
"$cuabi" occupancy "$tmp/k.cu" --kernel plain --arch sm_88 >/dev/null || fail "sm_88 limits"
"$cuabi" occupancy "$tmp/k.cu" --kernel plain --arch sm_61 >/dev/null 2>&1 && fail "unknown arch fails"
"$cuabi" occupancy "$tmp/k.cu" --kernel nope --arch sm_90 2>"$tmp/err" && fail "unknown kernel fails"
grep -q "nope" "$tmp/err" || fail "unknown kernel named in the error"
"$cuabi" occupancy "$tmp/none.cu" --kernel plain --arch sm_90 2>/dev/null && fail "missing file fails"
# default: live on a GPU, else offline sm_90 and says so
out=$("$cuabi" occupancy "$tmp/k.cu" --kernel plain) || fail "default mode exits 0"
echo "$out" | grep -Eq "No GPU available: offline answers for sm_90|\(live\)" || fail "says live or offline"
# on a GPU, live: compiled for the local device, and the same answers as
# offline for that architecture (offline runs above never load the code, so
# they work whatever the GPU is)
live=$("$cuabi" occupancy "$tmp/k.cu" --kernel plain --json) || fail "default json exits 0"
if echo "$live" | grep -q '"live": *true'; then
    echo "live run on a GPU"
    larch=$(echo "$live" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["arch"])') ||
        fail "live arch"
    off=$("$cuabi" occupancy "$tmp/k.cu" --kernel plain --arch "$larch" --json) ||
        fail "offline for the live arch $larch exits 0"
    printf '%s\n%s\n' "$live" "$off" | python3 -c '
import json, sys
dec = json.JSONDecoder(); text = sys.stdin.read().strip()
live, end = dec.raw_decode(text); off, _ = dec.raw_decode(text[end:].strip())
assert all(r["live"] for r in live) and not any(r["live"] for r in off)
assert len(live) == len(off), (len(live), len(off))
for a, b in zip(live, off):
    assert a["active_blocks_per_sm"] == b["active_blocks_per_sm"], (a, b)
' || fail "live and offline agree for $larch"
    "$cuabi" occupancy "$tmp/k.cu" --kernel 'fill<4096>' --name-expr 'fill<4096>' --smem 65536 \
        --json >/dev/null || fail "live with opt-in shared memory exits 0"
    # live on a green context of at least 16 SMs: the waves equal offline's
    # for the SMs the driver gave it
    live=$("$cuabi" occupancy "$tmp/k.cu" --kernel plain --sms 16 --grid 1000 --json) ||
        fail "live --sms --grid exits 0"
    sms=$(echo "$live" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["sm_count"])')
    off=$("$cuabi" occupancy "$tmp/k.cu" --kernel plain --arch "$larch" --sms "$sms" --grid 1000 \
          --json) || fail "offline --sms $sms exits 0"
    printf '%s\n%s\n' "$live" "$off" | python3 -c '
import json, sys
dec = json.JSONDecoder(); text = sys.stdin.read().strip()
live, end = dec.raw_decode(text); off, _ = dec.raw_decode(text[end:].strip())
assert live[0]["sm_count"] >= 16, live[0]
for a, b in zip(live, off):
    assert (a["active_blocks_per_sm"], a["waves"], a["sm_count"]) == \
           (b["active_blocks_per_sm"], b["waves"], b["sm_count"]), (a, b)
' || fail "live on a partition and offline agree"
    "$cuabi" occupancy "$tmp/k.cu" --kernel plain --sms 16 | grep -q "(live, $sms SMs)" ||
        fail "live title names the partition"
else
    echo "$live" | grep -q '"live": *false' || fail "json says live or not"
fi
exit 0
