#!/usr/bin/env bash
# The multi-GPU checks in one command (issue 23: NCCL collectives; issue 15:
# peers), ON A GPU HOST WITH TWO OR MORE GPUS, from the repository root, after
# scripts/gpu-prepare.sh filled .gpu/ here (carry .gpu):
#
#   scripts/gpu-check-multi.sh [--bench]
#
# Builds the `make dist` tarball as scripts/gpu-check.sh does (in a folder of
# its own), then runs
#   C:      tests/runtime/test_gpu_nccl (init-all, every collective x 6 types
#           x 3 sizes, views, a captured all-reduce, two processes by rank,
#           the socket transport over loopback, a rank that never arrives),
#           tests/runtime/test_nccl (the fake NCCL), test_gpu_peer, test_multigpu,
#           test_gpu_multicast, test_gpu_vmm, test_gpu_copy_batch (issue 25's
#           two-GPU parts), test_gpu_launch_attrs;
#   Python: test_gpu_nccl.py (init-all, torch tensors, a captured all-reduce,
#           two processes through a TCPStore, a FileStore, mpirun + mpi4py,
#           the socket transport; the timeout; examples/python/
#           distributed_segred.py spawned and under Dask), test_nccl.py,
#           test_dask.py, test_gpu_peer.py, test_multigpu.py, test_gpu_memory_ext.py;
#   Rust:   .gpu/rust/bin/test-gpu_nccl (when scripts/rust-gpu-prep.sh carried it);
# and with --bench: bench/bench_nccl (host us per 8-byte all-reduce, cuabi
# beside raw ncclAllReduce) and bench/bench_nccl.py (bus bandwidth 8 B..1 GiB
# beside torch.distributed, nccl4py where it imports).
# Last line: "gpu-check-multi: PASS|FAIL -- C a/b passed (s skipped), Python
# ... on <cards>", or "gpu-check-multi: SKIP ..." (exit 77) with fewer than
# two GPUs. Logs in $OUT (if set) or .gpu/out-multi.
set -uo pipefail
root=$PWD
out=${OUT:-$root/.gpu/out-multi}
mkdir -p "$out"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
cards=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c |
        sed 's/^ *//' | paste -sd, -)
if [ "${ngpu:-0}" -lt 2 ]; then
    echo "gpu-check-multi: SKIP -- ${ngpu:-0} GPU(s) here, the multi-GPU checks need 2"
    exit 77
fi
ls "$root"/.gpu/cuabi-*.tar.gz >/dev/null 2>&1 ||
    { echo "gpu-check-multi: FAIL -- no .gpu/cuabi-*.tar.gz (run scripts/gpu-prepare.sh first)"; exit 1; }
P=/tmp/cuabi-prefix-multi
L=$P/usr/lib/x86_64-linux-gnu
rm -rf "$P" && mkdir -p "$P"
for d in "$root"/.gpu/debs/*.deb; do dpkg -x "$d" "$P"; done
export LD_LIBRARY_PATH=$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ls "$root"/.gpu/wheels/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/cuabi-site-multi "$root"/.gpu/wheels/*.whl >/dev/null 2>&1
    export PYTHONPATH=/tmp/cuabi-site-multi${PYTHONPATH:+:$PYTHONPATH}
fi
export PATH=/usr/local/cuda/bin:$PATH
work=/tmp/cuabi-gpu-multi
rm -rf "$work" && mkdir -p "$work"
tar xzf "$root"/.gpu/cuabi-*.tar.gz -C "$work"
src=$(ls -d "$work"/cuabi-*)
cd "$src" || exit 1
flags=(CPPFLAGS="-I$P/usr/include -I$P/usr/include/x86_64-linux-gnu"
       LDFLAGS="-L$L"
       LIBFFI_CFLAGS="-I$P/usr/include/x86_64-linux-gnu" LIBFFI_LIBS="-L$L -lffi"
       CHECK_CFLAGS="-I$P/usr/include -pthread"
       CHECK_LIBS="-L$L -lcheck_pic -lsubunit -lrt -lm -pthread")
./configure -q --with-cuda=/usr/local/cuda "${flags[@]}" >"$out/configure.log" 2>&1 ||
    { tail -n 30 "$out/configure.log"; echo "gpu-check-multi: FAIL -- configure"; exit 1; }
make -j"$(nproc)" >"$out/build.log" 2>&1 ||
    { grep -E 'error|Error' "$out/build.log" | head -n 40; echo "gpu-check-multi: FAIL -- build"; exit 1; }
export CUDA_CACHE_DISABLE=1

# C suites through make (their .trs files say PASS / SKIP / FAIL).
# ... and the two-GPU parts of issue 25 (multicast, VMM peer access, copies
# between GPUs) and the PDL test issue 29 saw fail on this host.
ctests="tests/runtime/test_gpu_nccl tests/runtime/test_nccl tests/runtime/test_gpu_peer"
ctests="$ctests tests/runtime/test_multigpu tests/runtime/test_gpu_multicast tests/runtime/test_gpu_vmm"
ctests="$ctests tests/runtime/test_gpu_copy_batch tests/runtime/test_gpu_launch_attrs"
make -j4 check TESTS="$ctests" >"$out/check-c.log" 2>&1
result() { sed -n 's/^:test-result: //p' "$1.trs" 2>/dev/null | head -n 1; }
cpass=0 cskip=0 ctotal=0
for t in $ctests; do
    ctotal=$((ctotal + 1))
    case $(result "$t") in PASS) cpass=$((cpass + 1)) ;; SKIP) cskip=$((cskip + 1)) ;; esac
done
for t in $ctests; do
    case $(result "$t") in PASS | SKIP) ;; *) echo "=== $t: $(result "$t")"; tail -n 40 "$t.log" ;; esac
done | tee "$out/failures-c.txt"
cfail=$((ctotal - cpass - cskip))

# Python: the package as the build tree has it (sources + the compiled fast path).
pkg=$src/bindings/python
export CUABI_LIBRARY=$src/.libs/libcuabi.so CUABI_TEST_BUILDDIR=$src CUABI_TOOL=$src/cuabi
export PYTHONPATH=$pkg${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1
fake=$src/tests/fixtures/.libs/fake_cuda_graph.so
[ -f "$fake" ] && export CUABI_TEST_FAKE_CUDA=$fake
pytests=""
for f in test_gpu_nccl.py test_nccl.py test_dask.py test_gpu_peer.py test_multigpu.py \
         test_gpu_memory_ext.py; do
    [ -f "$pkg/tests/$f" ] && pytests="$pytests $pkg/tests/$f"
done
python3 -m pytest -p no:cacheprovider -rs -q $pytests >"$out/check-python.log" 2>&1
prc=$?
pline=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$out/check-python.log" | tail -n 1 | tr -d '=')
[ $prc -eq 0 ] || { grep -E '^(FAILED|ERROR)' "$out/check-python.log" | head -n 30; }
grep -E '^SKIPPED' "$out/check-python.log" | head -n 20

# Rust: the two-GPU binary scripts/rust-gpu-prep.sh built (when carried).
rline="not carried"
rbin=$root/.gpu/rust/bin/test-gpu_nccl
rrc=0
if [ -x "$rbin" ]; then
    LD_LIBRARY_PATH=$src/.libs:$LD_LIBRARY_PATH "$rbin" >"$out/check-rust.log" 2>&1
    rrc=$?
    rline=$(grep -E '^test result' "$out/check-rust.log" | tail -n 1)
    [ $rrc -eq 0 ] || tail -n 30 "$out/check-rust.log"
fi

for arg in "$@"; do
    if [ "$arg" = --bench ]; then
        { echo "== bench/bench_nccl (host time per 8-byte all-reduce; target: <= 1 us over raw)"
          bench/bench_nccl
          echo "== bench/bench_nccl.py (bus bandwidth; target: cuabi >= 0.98x torch at >= 64 MiB)"
          python3 -W ignore bench/bench_nccl.py --json "$out/bench_nccl.json"
        } 2>&1 | tee "$out/bench_nccl.txt"
    fi
done

status=PASS
[ $cfail -eq 0 ] && [ $prc -eq 0 ] && [ $rrc -eq 0 ] || status=FAIL
echo "gpu-check-multi: $status -- C $cpass/$ctotal passed ($cskip skipped), Python: ${pline:-no result}, Rust gpu_nccl: ${rline:-no result} -- on $ngpu GPUs ($cards); logs in $out"
[ $status = PASS ]
