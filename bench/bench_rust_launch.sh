#!/bin/sh
# The Rust safe-launch benchmark of issue 28: a launch through the safe path
# (stream.launch_builder(..).arg(..).launch(cfg)) against the C cuabi_launch
# of the same kernel, median of PROCESSES processes of each, run in turns.
#
#   bench/bench_rust_launch.sh RUST_BENCH C_TWIN [PROCESSES (7)] [LAUNCHES (2000)] [BLOCKS (101)]
#     RUST_BENCH: the example bench_launch (DEST/bin/example-bench_launch of
#                 scripts/rust-gpu-prep.sh); C_TWIN: bench/bench_launch_cxx.
#   The library must be found (LD_LIBRARY_PATH=the build's .libs).
#
# Each round runs four processes: the C twin; the Rust example with
# `--only safe` and with `--only c` (one path per process, in the C twin's
# exact structure: the same kernel, stream kind, pack values, config, one
# warm-up launch, then BLOCKS blocks of LAUNCHES launches with the stream
# drained before each, timed by the monotonic clock); and the Rust example
# interleaving its three paths block by block. It prints every process's
# figures, then:
#
#   target        median safe-only us (Rust) / median c us (C twin): the
#                 issue's comparison -- a Rust program launching through the
#                 safe path against a C program calling cuabi_launch, median
#                 of >= 5 processes -- now that both processes do the same
#                 thing in the same structure. <= 1.05 passes.
#   control       median c-only us (Rust calling sys::cuabi_launch) / median
#                 c us (C twin): the same C call from the two binaries. Far
#                 from 1.00 means a process-level difference (placement,
#                 clocks, the GPU queue), not the safe path's work: read the
#                 target against it.
#   in-process    the median over the interleaved Rust processes of each
#                 one's median block ratio safe/c (both timed in the same
#                 blocks of one process: the least noisy measure of what the
#                 safe path adds, but not a C program's figure).
[ $# -ge 2 ] || { echo "usage: $0 RUST_BENCH C_TWIN [PROCESSES] [LAUNCHES] [BLOCKS]" >&2; exit 2; }
rust=$1; twin=$2; procs=${3:-7}; n=${4:-2000}; blocks=${5:-101}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
i=0
while [ $i -lt "$procs" ]; do
    "$twin" "$n" "$blocks" > "$tmp/c.$i" 2>&1 || { cat "$tmp/c.$i"; exit 1; }
    "$rust" "$n" "$blocks" --only safe > "$tmp/s.$i" 2>&1 || { cat "$tmp/s.$i"; exit 1; }
    "$rust" "$n" "$blocks" --only c > "$tmp/k.$i" 2>&1 || { cat "$tmp/k.$i"; exit 1; }
    "$rust" "$n" "$blocks" > "$tmp/r.$i" 2>&1 || { cat "$tmp/r.$i"; exit 1; }
    cat "$tmp/c.$i" "$tmp/s.$i" "$tmp/k.$i" "$tmp/r.$i"
    i=$((i + 1))
done
if grep -q "nothing measured" "$tmp/c.0" "$tmp/r.0"; then
    echo "bench_rust_launch: no GPU; nothing measured"
    exit 0
fi
python3 - "$tmp" "$procs" <<'PY'
import re, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
def fig(name, pat):
    return [float(re.search(pat, open(f"{d}/{name}.{i}").read()).group(1)) for i in range(n)]
c = fig("c", r"c median us: ([0-9.]+)")
safe = fig("s", r"safe median us: ([0-9.]+)")
rc = fig("k", r"c median us: ([0-9.]+)")
ratio = fig("r", r"safe/c median ratio: ([0-9.]+)")
mc, ms, mk, mr = (statistics.median(v) for v in (c, safe, rc, ratio))
ok = lambda r: "PASS" if r <= 1.05 else "FAIL"
print(f"C cuabi_launch (C twin)            median of {n} processes: {mc:.3f} us")
print(f"Rust safe launch_builder (--only)  median of {n} processes: {ms:.3f} us")
print(f"Rust sys::cuabi_launch (--only c)  median of {n} processes: {mk:.3f} us")
print(f"target     safe (Rust) / C (C twin), cross-process: {ms / mc:.3f}   {ok(ms / mc)} (<= 1.05)")
print(f"control    c (Rust) / C (C twin), cross-process:    {mk / mc:.3f}   (the same C call in both binaries)")
print(f"in-process safe / c, interleaved (median of {n}):    {mr:.3f}   {ok(mr)} (<= 1.05; diagnostic)")
PY
