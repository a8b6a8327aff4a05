#!/bin/bash
# One device call that fits the 600 s limit (the whole `make check` does not):
# ON THE GPU MACHINE, from the repository root, after scripts/gpu-prepare.sh and
# scripts/rust-gpu-prep.sh filled .gpu/ (carry .gpu). Builds the tarball
# (scripts/gpu-check.sh --skip-check), then side by side: every Python GPU test
# file (5 at a time, each under 170 s: a hang fails its file, not the call), the
# C GPU suites named in CHECK_C (default: all of tests/*/test_gpu_*; a session
# short of time names the ones it touched), the carried Rust tests, NVIDIA's
# cuda.core examples (.gpu/cuda_core_examples); then, alone on the GPU, the
# benchmarks of STEPS (scripts/gpu-bench.sh; default "graphpy peerpy rust") and
# the first-instantiate probes. Few files come back ($OUT/c.txt, py.txt, rust.txt,
# examples.txt, bench.txt): the device tool returns only so many.
#   CHECK_C="tests/runtime/test_gpu_graph ..." scripts/gpu-session.sh
root=$PWD; R=${OUT:-$root/.gpu/out}; T=/tmp/gpu-session; mkdir -p "$R" "$T"
scripts/gpu-check.sh --skip-check > "$T/build.txt" 2>&1
ls /tmp/cuabi-gpu/cuabi-*/.libs/libcuabi.so >/dev/null 2>&1 || { tail -n 30 "$T/build.txt"; exit 1; }
src=$(ls -d /tmp/cuabi-gpu/cuabi-*); P=/tmp/cuabi-prefix; L=$P/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$src/.libs:$L PYTHONPATH=$src/bindings/python:/tmp/cuabi-site \
    CUABI_LIBRARY=$src/.libs/libcuabi.so PYTHONDONTWRITEBYTECODE=1 CUDA_CACHE_DISABLE=1
cd "$src" || exit 1
CT=${CHECK_C:-$(ls tests/*/test_gpu_*.c | sed 's/\.c$//' | tr '\n' ' ')}
make -j16 $CT >/dev/null 2>&1
( timeout 300 make -j6 check TESTS="$CT" > "$T/c.log" 2>&1
  grep -hE "^(PASS|FAIL|SKIP|ERROR|XFAIL)" "$T/c.log" > "$R/c.txt"
  for f in $(grep -lE ':test-result: (FAIL|ERROR)' tests/*/test_gpu_*.trs 2>/dev/null); do
      echo "=== $f"; tail -n 30 "${f%.trs}.log"; done >> "$R/c.txt" ) &
( ls bindings/python/tests/test_gpu_*.py | xargs -P 5 -I{} sh -c 'timeout 170 python3 -m pytest -p no:cacheprovider -q -rs {} > '"$T"'/py_$(basename {}).log 2>&1; echo "rc=$? {} $(tail -n 1 '"$T"'/py_$(basename {}).log)"' > "$R/py.txt"
  for f in "$T"/py_*.log; do grep -q -E "failed|error" "$f" && { echo "=== $f"; tail -n 40 "$f"; }; done >> "$R/py.txt" ) &
( if [ -x "$root/.gpu/rust/run-rust-gpu.sh" ]; then
      timeout 300 "$root/.gpu/rust/run-rust-gpu.sh" "$src/.libs" > "$T/rust.log" 2>&1
      echo "rust rc=$?" > "$R/rust.txt"; grep -E -A3 "^=== |test result|FAILED|panicked" "$T/rust.log" | grep -v "^--$" >> "$R/rust.txt"
  fi ) &
( [ -d "$root/.gpu/cuda_core_examples" ] && timeout 200 python3 "$root/scripts/run-cuda-core-examples.py" \
      "$root/.gpu/cuda_core_examples" --timeout 60 2>&1 | tail -n 25 > "$R/examples.txt" ) &
wait
(cd "$root" && OUT=$T/bench STEPS=${STEPS:-"graphpy peerpy rust"} timeout 280 bash scripts/gpu-bench.sh >/dev/null 2>&1)
{ for f in "$T"/bench/*.txt; do echo "##### $f"; cat "$f"; done
  echo "##### probe_instantiate_first"; bash "$root/scripts/probe_instantiate_first.sh" "$T/pf.txt"
  echo "##### probe_instantiate_cuabi"
  gcc -O2 -Iinclude -I"$P/usr/include" "$root/scripts/probe_instantiate_cuabi.c" -L.libs -lcuabi \
      -L/usr/local/cuda/lib64/stubs -lcuda -I/usr/local/cuda/include -o "$T/pc" &&
      for _ in 1 2 3; do for m in cuabi rawinst raw; do LD_LIBRARY_PATH=.libs "$T/pc" $m; done; done
  # EXTRA: more commands for this call, run last in the source tree (their output here).
  [ -n "${EXTRA:-}" ] && { echo "##### EXTRA: $EXTRA"; bash -c "$EXTRA"; }
} > "$R/bench.txt" 2>&1
head -n 60 "$R/c.txt"; head -n 40 "$R/py.txt"; head -n 5 "$R/rust.txt" 2>/dev/null; tail -n 3 "$R/examples.txt" 2>/dev/null
