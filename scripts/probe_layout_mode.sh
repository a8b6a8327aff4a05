#!/bin/bash
# ON THE GPU MACHINE, from the repository root: scripts/probe_layout_mode.c in
# many fresh processes, ROUNDS rounds of one process of each KIND (alternating),
# one JSON line each into OUTFILE, and a summary here (probe_layout_summary.py).
# Kinds: plain; aslr_off (setarch -R); hugetlb (GLIBC_TUNABLES=glibc.malloc.hugetlb=1:
# glibc asks for transparent huge pages for its heap and mappings); aslr_off_env
# (ASLR off, the stack 2000 bytes lower: a longer environment); aslr_off_mmap8m
# (ASLR off, the mmap base 8 MiB lower: a 136 MiB stack limit).
#   scripts/probe_layout_mode.sh OUTFILE ROUNDS KIND...
set -u
root=$PWD; out=$1; rounds=$2; shift 2; tmp=$(mktemp -d)
printf 'extern "C" __global__ void k(float* p, int n, float a) { if (n < 0) p[0] = a; }\n' > "$tmp/k.cu"
nvcc -cubin -arch=sm_90 -o "$tmp/k.cubin" "$tmp/k.cu" &&
    gcc -O2 -o "$tmp/probe" "$root/scripts/probe_layout_mode.c" -I/usr/local/cuda/include \
        -L/usr/local/cuda/lib64/stubs -lcuda -ldl || exit 1
: > "$out"
for i in $(seq "$rounds"); do
    for kind in "$@"; do
        case $kind in
            plain) p=$("$tmp/probe" "$tmp/k.cubin") ;;
            aslr_off) p=$(setarch -R "$tmp/probe" "$tmp/k.cubin") ;;
            hugetlb) p=$(GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "$tmp/probe" "$tmp/k.cubin") ;;
            aslr_off_env) p=$(CUABI_PROBE_PAD=$(printf '%*s' 2000 '') setarch -R "$tmp/probe" "$tmp/k.cubin") ;;
            aslr_off_mmap8m) p=$(ulimit -s 139264; setarch -R "$tmp/probe" "$tmp/k.cubin") ;;
            *) echo "unknown kind $kind"; exit 2 ;;
        esac
        echo "{\"kind\": \"$kind\", \"aslr\": 1, \"run\": $i, \"p\": $p}" >> "$out"
    done
done
python3 "$root/scripts/probe_layout_summary.py" "$out"
