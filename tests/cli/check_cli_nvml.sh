#!/bin/sh
# cuabi info's NVML part (issue 26 item 3) against the fake NVML
# (tests/fixtures/.libs/fake_nvml.so through CUABI_NVML_PATH; settings and
# failures through CUABI_FAKE_NVML) and without NVML: the NVML line, the
# health table, processes and topology, JSON with null for what NVML does
# not report, a GPU NVML fails on, and --watch: N refreshes with --count,
# one JSON document a line, and SIGINT/SIGTERM ending it with exit 0.
builddir=${CUABI_TEST_BUILDDIR:-.}
cuabi="$builddir/cuabi"
fail() { echo "FAIL: $*"; exit 1; }
fake=$(cd "$builddir" && pwd)/tests/fixtures/.libs/fake_nvml.so
[ -f "$fake" ] || fail "$fake is not built"
fake_driver=$(cd "$builddir" && pwd)/tests/fixtures/.libs/fake_cuda_graph.so
tmp=$(mktemp -d /tmp/cuabi-cli-nvml-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
export CUABI_CACHE_DIR="$tmp/cache"
export CUABI_DRIVER_PATH=/nonexistent/libcuda.so.1
unset CUABI_FAKE_NVML

# ---- without NVML: a line that says so, no table, exit 0
out=$(CUABI_NVML_PATH=/nonexistent/libnvidia-ml.so.1 "$cuabi" info) || fail "info without NVML exits 0"
echo "$out" | grep -q "^NVML       not available: CUABI_NVML_PATH=/nonexistent/libnvidia-ml.so.1" ||
    fail "info names the missing NVML: $out"
echo "$out" | grep -q "GPU health" && fail "a health table without NVML"
CUABI_NVML_PATH=/nonexistent/libnvidia-ml.so.1 "$cuabi" info --watch 1 >"$tmp/out" 2>"$tmp/err" &&
    fail "info --watch without NVML exits 0"
grep -q "NVML not available" "$tmp/err" || fail "info --watch without NVML says why: $(cat "$tmp/err")"

export CUABI_NVML_PATH="$fake"
# ---- the table: both GPUs, their values, processes, topology
out=$("$cuabi" info) || fail "info with the fake NVML exits 0"
echo "$out" | grep -q "^NVML       13.580.65.06  driver 580.65.06 (CUDA 13.0)  $fake" ||
    fail "info's NVML line: $out"
row0=$(echo "$out" | grep "^   0    -  NVIDIA H100 80GB HBM3") || fail "GPU 0's row: $out"
for want in "40C" "70/700" "0%/0%" "1.0/80.0 GiB" "1980/2619" "gen5 x16" "3/4" " idle"; do
    echo "$row0" | grep -qF -- "$want" || fail "GPU 0's row lacks '$want': $row0"
done
echo "$out" | grep -q "^   1    -  .* 41C .*10%/5%" || fail "GPU 1's row: $out"
echo "$out" | grep -Eq "^ +0 +1001  compute\+graphics +256 MiB" || fail "processes: $out"
echo "$out" | grep -Eq "^ +0 +1002  graphics +n/a" || fail "a process without memory: $out"
echo "$out" | grep -Eq "^GPU0 +X +NV" || fail "topology: $out"
# the CUDA ordinals, by UUID, where a driver answers (the fake one: reversed)
out=$(CUABI_DRIVER_PATH="$fake_driver" "$cuabi" info) || fail "info with both fakes exits 0"
echo "$out" | grep -q "^   0    1  NVIDIA" && echo "$out" | grep -q "^   1    0  NVIDIA" ||
    fail "CUDA ordinals beside NVML's indices: $out"

# ---- what NVML does not report: n/a, and null in JSON
export CUABI_FAKE_NVML="temp.0=-1;fail=nvmlDeviceGetPowerUsage@0:3;throttle.1=0x10024"
out=$("$cuabi" info) || fail "info exits 0 when values are not reported"
echo "$out" | grep "^   0 " | grep -q " n/a " || fail "unreported values as n/a: $out"
echo "$out" | grep "^   1 " | grep -q "power-cap,sw-thermal,0x10000" || fail "throttle names: $out"
"$cuabi" info --json >"$tmp/out" || fail "info --json exits 0"
python3 - "$tmp/out" <<'PY' || fail "info --json: $(cat "$tmp/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["nvml"]["available"] and d["nvml"]["driver_version"] == "580.65.06", d["nvml"]
h = d["health"]
assert [g["index"] for g in h] == [0, 1], h
assert h[0]["temperature_gpu"] is None and h[0]["power_usage_mw"] is None, h[0]
assert h[1]["temperature_gpu"] == 41 and h[1]["power_usage_mw"] == 71000, h[1]
assert h[0]["cuda_ordinal"] is None                 # no driver here
assert h[1]["throttle_reasons"] == ["sw_power_cap", "sw_thermal_slowdown", "0x10000"], h[1]
assert h[0]["memory_reserved"] == 512 << 20 and h[0]["memory_total"] == 80 << 30, h[0]
assert h[0]["nvlink_count"] == 4 and h[0]["nvlink_active"] == 3, h[0]
assert h[0]["pcie_tx_kib_per_s"] == 1000 and h[0]["pcie_rx_kib_per_s"] == 2000, h[0]
p = {x["pid"]: x for x in h[0]["processes"]}
assert set(p) == {1000, 1001, 1002} and p[1002]["used_memory"] is None, p
assert p[1001]["compute"] and p[1001]["graphics"] and p[1000]["used_memory"] == 512 << 20, p
assert h[1]["processes"] == [], h[1]
t = d["topology"]
assert t == [{"gpu1": 0, "gpu2": 1, "common_ancestor": "NODE", "p2p_read": "ok",
              "p2p_write": "ok", "p2p_nvlink": "ok", "p2p_atomics": "ok",
              "p2p_pci": "not_supported"}], t
PY

# ---- a GPU NVML fails on: its row says why, the others stay, exit 1
export CUABI_FAKE_NVML="fail=nvmlDeviceGetPowerUsage@1:15"
"$cuabi" info >"$tmp/out" 2>"$tmp/err" && fail "info exits 0 when a GPU cannot be read"
grep -q "^   1    -  error: .*nvmlDeviceGetPowerUsage failed: GPU is lost" "$tmp/out" ||
    fail "the failing GPU's row: $(cat "$tmp/out")"
grep -q "^   0    -  NVIDIA" "$tmp/out" || fail "the other GPU's row stays: $(cat "$tmp/out")"
grep -q "NVML GPU 1: .*GPU is lost" "$tmp/err" || fail "stderr names the failure: $(cat "$tmp/err")"
"$cuabi" info --json >"$tmp/out" && fail "info --json exits 0 when a GPU cannot be read"
python3 - "$tmp/out" <<'PY' || fail "info --json with a failing GPU: $(cat "$tmp/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "CUABI_ERROR_NVML" and "GPU is lost" in d["error"], d
assert d["health"][1]["status"] == "CUABI_ERROR_NVML" and d["health"][0]["temperature_gpu"] == 40
PY
unset CUABI_FAKE_NVML

# ---- --watch: refreshes, --count, JSON lines
out=$("$cuabi" info --watch 1 --count 2) || fail "info --watch 1 --count 2 exits 0"
[ "$(echo "$out" | grep -c '^cuabi info --watch 1 ')" -eq 2 ] || fail "two refreshes: $out"
echo "$out" | grep -q "(refresh 2; Ctrl-C ends)" || fail "the refresh is numbered: $out"
"$cuabi" info -w 1 --count 3 --json >"$tmp/out" || fail "info --watch --json exits 0"
python3 - "$tmp/out" <<'PY' || fail "info --watch --json: $(cat "$tmp/out")"
import json, sys
lines = open(sys.argv[1], "rb").read().decode().splitlines()
assert len(lines) == 3, lines
for n, line in enumerate(lines, 1):
    d = json.loads(line)
    assert d["refresh"] == n and len(d["health"]) == 2 and d["time"], d
PY
# a changing value shows in the next refresh: the fake reads its settings anew
# in each process only, so two processes show two values
CUABI_FAKE_NVML="temp.1=77" "$cuabi" info --watch 1 --count 1 | grep -q "^   1 .* 77C " ||
    fail "the watch shows NVML's values"

# ---- SIGINT and SIGTERM end a watch with exit 0 after at least one refresh.
# The signal goes 1.5 s after the first refresh is out (not at a fixed time
# from the start: a sanitizer build on a busy machine starts slowly).
# interrupt SIG FIRST_LINE_PATTERN ARGS...: rc in $rc, output in $tmp/out.
interrupt() {
    sig=$1 first=$2
    shift 2
    "$cuabi" info "$@" >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    (sleep 60; kill -KILL $pid 2>/dev/null) &
    guard=$!
    i=0
    until grep -q "$first" "$tmp/out" 2>/dev/null || [ $i -ge 400 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    sleep 1.5
    kill -$sig $pid 2>/dev/null
    wait $pid
    rc=$?
    kill $guard 2>/dev/null
    wait $guard 2>/dev/null
}
for sig in INT TERM; do
    interrupt $sig '^cuabi info --watch 1 ' --watch 1
    [ $rc -eq 0 ] || fail "SIG$sig ends info --watch with exit $rc, not 0: $(cat "$tmp/err")"
    n=$(grep -c '^cuabi info --watch 1 ' "$tmp/out")
    [ "$n" -ge 2 ] && [ "$n" -le 4 ] || fail "SIG$sig 1.5 s after the first refresh: $n refreshes, not 2 to 4"
    tail -n 1 "$tmp/out" | grep -q . || fail "the last refresh is whole: $(tail -n 3 "$tmp/out")"
done
interrupt INT '^{' --watch 1 --json
[ $rc -eq 0 ] || fail "SIGINT ends info --watch --json with exit $rc, not 0: $(cat "$tmp/err")"
python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/out" ||
    fail "every line of an interrupted --json watch is a document: $(cat "$tmp/out")"

# ---- usage errors
"$cuabi" info --count 2 >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] || fail "--count without --watch exits 2"
grep -q "needs --watch" "$tmp/err" || fail "--count without --watch says why"
for bad in 0 -1 x 86401; do
    "$cuabi" info --watch "$bad" >/dev/null 2>&1; [ $? -eq 2 ] || fail "--watch $bad exits 2"
done
echo "ok: info with NVML"
