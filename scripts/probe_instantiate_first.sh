#!/bin/bash
# ON THE GPU MACHINE, from the repository root: the first and later raw
# cuGraphInstantiate of 100 captured launches in fresh processes, kernel nodes
# made from a CUfunction or from a CUkernel (scripts/probe_instantiate_first.c),
# five processes of each, alternating. Prints each process's rounds to OUTFILE
# and the first instantiates here. Issue 24 item 3: does the handle kind explain
# cuabi's slower first instantiate (docs/PERFORMANCE.md, 2026-11-28)?
#   scripts/probe_instantiate_first.sh OUTFILE
set -u
root=$PWD; out=$1; tmp=$(mktemp -d)
printf 'extern "C" __global__ void k(float* p, int n, float a) { if (n < 0) p[0] = a; }\n' > "$tmp/k.cu"
nvcc -cubin -arch=sm_90 -o "$tmp/k.cubin" "$tmp/k.cu" &&
    gcc -O2 -o "$tmp/probe" "$root/scripts/probe_instantiate_first.c" -I/usr/local/cuda/include \
        -L/usr/local/cuda/lib64/stubs -lcuda || exit 1
for _ in 1 2 3 4 5; do "$tmp/probe" "$tmp/k.cubin" function; "$tmp/probe" "$tmp/k.cubin" kernel; done >"$out" 2>&1
grep "round 0" "$out"
