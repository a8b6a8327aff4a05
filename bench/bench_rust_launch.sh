#!/bin/sh
# The Rust safe-launch benchmark of issue 28: a launch through the safe path
# (stream.launch_builder(..).arg(..).launch(cfg)) against the C cuabi_launch
# of the same kernel, median of PROCESSES processes of each, run alternately.
#
#   bench/bench_rust_launch.sh RUST_BENCH C_TWIN [PROCESSES (7)] [LAUNCHES (2000)] [BLOCKS (101)]
#     RUST_BENCH: the example bench_launch (DEST/bin/example-bench_launch of
#                 scripts/rust-gpu-prep.sh); C_TWIN: bench/bench_launch_cxx.
#   The library must be found (LD_LIBRARY_PATH=the build's .libs).
#
# Prints every process's figures, then two ratios:
#   in-process   the median over Rust processes of each one's median block
#                ratio safe/c (both paths timed in the same blocks: the least
#                noisy figure);
#   cross-process median safe us (Rust processes) / median c us (C twin).
# The target is <= 1.05 for both.
[ $# -ge 2 ] || { echo "usage: $0 RUST_BENCH C_TWIN [PROCESSES] [LAUNCHES] [BLOCKS]" >&2; exit 2; }
rust=$1; twin=$2; procs=${3:-7}; n=${4:-2000}; blocks=${5:-101}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
i=0
while [ $i -lt "$procs" ]; do
    "$twin" "$n" "$blocks" > "$tmp/c.$i" 2>&1 || { cat "$tmp/c.$i"; exit 1; }
    "$rust" "$n" "$blocks" > "$tmp/r.$i" 2>&1 || { cat "$tmp/r.$i"; exit 1; }
    cat "$tmp/c.$i" "$tmp/r.$i"
    i=$((i + 1))
done
if grep -q "nothing measured" "$tmp/c.0" "$tmp/r.0"; then
    echo "bench_rust_launch: no GPU; nothing measured"
    exit 0
fi
python3 - "$tmp" "$procs" <<'PY'
import re, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
c, safe, ratio = [], [], []
for i in range(n):
    c.append(float(re.search(r"c median us: ([0-9.]+)", open(f"{d}/c.{i}").read()).group(1)))
    r = open(f"{d}/r.{i}").read()
    safe.append(float(re.search(r"safe: launch_builder\s+[0-9.]+\s+([0-9.]+)", r).group(1)))
    ratio.append(float(re.search(r"safe/c median ratio: ([0-9.]+)", r).group(1)))
mc, ms, mr = statistics.median(c), statistics.median(safe), statistics.median(ratio)
print(f"C cuabi_launch (C twin)   median of {n} processes: {mc:.3f} us")
print(f"Rust safe launch_builder  median of {n} processes: {ms:.3f} us")
print(f"safe / C, in-process (median of {n}): {mr:.3f}   {'PASS' if mr <= 1.05 else 'FAIL'} (<= 1.05)")
print(f"safe / C, cross-process:             {ms / mc:.3f}   {'PASS' if ms / mc <= 1.05 else 'FAIL'} (<= 1.05)")
PY
