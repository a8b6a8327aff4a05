#!/usr/bin/env bash
# Run ON THE GPU MACHINE (gcc, make, CUDA driver; no autotools, libffi
# headers or Check), from the repository root, after scripts/gpu-prepare.sh
# filled .gpu/ here. Unpacks the Debian packages into a local prefix, builds
# the `make dist` tarball against it, runs `make check` (every GPU suite runs
# for real) and the benchmarks, and prints the summary line.
#   scripts/gpu-check.sh [--skip-check] [--bench] [--cold] [--sanitizer] [--multigpu]
# --skip-check builds without running `make check` (benchmarks only).
# CHECK_SET=c runs every suite but the Python binding's (check_python.sh,
# check_wheel.sh), CHECK_SET=python only those two, CHECK_SET=all (default)
# everything: the whole `make check` outlasts one 600 s device call on an
# H100 (2026-11-27), so a session runs c, then python, on the warm machine
# (the build of the first call is reused when /tmp/cuabi-gpu is there and
# CHECK_REBUILD is not 1). CHECK_JOBS: make's -j (default 8).
# --multigpu runs the peer/IPC benchmarks (bench/bench_peer, bench/bench_peer.py;
# best on a 2-GPU host) into $OUT/bench_peer.txt.
# Logs go to $OUT (if set) or .gpu/out.
set -uo pipefail
root=$PWD
out=${OUT:-$root/.gpu/out}
mkdir -p "$out"
P=/tmp/cuabi-prefix
L=$P/usr/lib/x86_64-linux-gnu
rm -rf "$P" && mkdir -p "$P"
for d in "$root"/.gpu/debs/*.deb; do dpkg -x "$d" "$P"; done
export LD_LIBRARY_PATH=$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ls "$root"/.gpu/wheels/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/cuabi-site "$root"/.gpu/wheels/*.whl >/dev/null 2>&1
    export PYTHONPATH=/tmp/cuabi-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PATH=/usr/local/cuda/bin:$PATH
work=/tmp/cuabi-gpu
reuse=0
if [ "${CHECK_REBUILD:-0}" != 1 ] && [ -f "$work"/cuabi-*/.libs/libcuabi.so ] 2>/dev/null; then
    reuse=1
else
    rm -rf "$work" && mkdir -p "$work"
    tar xzf "$root"/.gpu/cuabi-*.tar.gz -C "$work"
fi
src=$(ls -d "$work"/cuabi-*)
cd "$src" || exit 1
flags=(CPPFLAGS="-I$P/usr/include -I$P/usr/include/x86_64-linux-gnu"
       LDFLAGS="-L$L"
       LIBFFI_CFLAGS="-I$P/usr/include/x86_64-linux-gnu" LIBFFI_LIBS="-L$L -lffi"
       CHECK_CFLAGS="-I$P/usr/include -pthread"
       CHECK_LIBS="-L$L -lcheck_pic -lsubunit -lrt -lm -pthread")
if [ $reuse = 0 ]; then
    ./configure -q --with-cuda=/usr/local/cuda "${flags[@]}" >"$out/configure.log" 2>&1 ||
        { tail -n 30 "$out/configure.log" config.log; exit 1; }
fi
make -j"$(nproc)" >"$out/build.log" 2>&1 || { grep -E 'error|Error' "$out/build.log" | head -n 40; exit 1; }
export CUDA_CACHE_DISABLE=1
skip_check=0
for arg in "$@"; do [ "$arg" = --skip-check ] && skip_check=1; done
if [ $skip_check = 1 ]; then
    make -j"$(nproc)" bench/bench_launch bench/bench_memory bench/bench_compile bench/cold_driver \
        bench/bench_graph bench/bench_peer bench/bench_pool_parts bench/bench_launch_cxx \
        bench/bench_texture bench/bench_green bench/bench_vmm \
        >>"$out/build.log" 2>&1
else
    all_tests=$(make -s -f Makefile -f - print-tests <<<'print-tests: ; @echo $(TESTS)' 2>/dev/null)
    python_tests="tests/bindings/check_python.sh tests/bindings/check_wheel.sh"
    case ${CHECK_SET:-all} in
    c) set_tests=$(for t in $all_tests; do [[ " $python_tests " == *" $t "* ]] || echo "$t"; done) ;;
    python) set_tests=$python_tests ;;
    *) set_tests=$all_tests ;;
    esac
    make -j"${CHECK_JOBS:-8}" check TESTS="$(echo $set_tests)" >"$out/check.log" 2>&1
fi
# Rust test binaries built on the preparing machine (scripts/rust-gpu-prep.sh),
# run against the library built here; counted like a test suite.
if [ -x "$root/.gpu/rust/run-rust-gpu.sh" ] && [ $skip_check = 0 ] && [ "${CHECK_SET:-all}" != python ]; then
    if "$root/.gpu/rust/run-rust-gpu.sh" "$src/.libs" >tests/rust-gpu.log 2>&1; then r=PASS; else r=FAIL; fi
    printf ':test-result: %s\n' "$r" > tests/rust-gpu.trs
fi
python3 scripts/summarize-tests.py --verbose . | tee "$out/summary.txt"
status=${PIPESTATUS[0]}
for f in $(grep -l -E ':test-result: (FAIL|ERROR)' $(find . -name '*.trs')); do
    echo "=== ${f%.trs}.log"; tail -n 40 "${f%.trs}.log"
done | tee "$out/failures.txt" | head -c 6000
for f in $(find . -name '*.log' \( -path './tests/*' -o -path './examples/*' \) | sort); do
    echo "=================== $f"; cat "$f"
done > "$out/all-logs.txt" 2>/dev/null
rm -f "$out/configure.log" "$out/build.log"  # kept only when they failed (above)
for arg in "$@"; do
    case $arg in
    --bench)
        # BENCH_REPEAT=N runs the launch, memory and Python benchmarks in N
        # processes each (the targets are medians over >= 5 processes: one
        # host's processes differ by 10-40%).
        repeat=${BENCH_REPEAT:-1}
        for b in bench/bench_launch bench/bench_memory bench/bench_pool_parts bench/bench_compile \
                 bench/bench_graph bench/bench_texture bench/bench_green bench/bench_vmm; do
            n=1
            case $b in bench/bench_launch | bench/bench_memory | bench/bench_pool_parts) n=$repeat ;; esac
            for _ in $(seq "$n"); do
                [ -x "$b" ] && { echo "== $b"; "$b"; } 2>&1 | tee -a "$out/bench.txt"
            done
        done
        # The Rust safe launch against the C cuabi_launch of the same kernel
        # (issue 28): medians of BENCH_PROCESSES processes (default 7) each.
        if [ -x "$root/.gpu/rust/bin/example-bench_launch" ] && [ -x bench/bench_launch_cxx ]; then
            { echo "== bench_rust_launch"; LD_LIBRARY_PATH=$src/.libs sh bench/bench_rust_launch.sh \
                "$root/.gpu/rust/bin/example-bench_launch" bench/bench_launch_cxx "${BENCH_PROCESSES:-7}"; } \
                2>&1 | tee -a "$out/bench.txt"
        fi
        if [ -f "$root/.gpu/peers/launch_raw.c" ]; then
            nvcc -O2 -o /tmp/launch_raw "$root/.gpu/peers/launch_raw.c" -lcuda -lnvrtc &&
                { echo "== raw (peer script)"; /tmp/launch_raw 200000; } 2>&1 | tee -a "$out/bench.txt"
        fi
        # Python against its peers (bench/bench_python.py): BENCH_PROCESSES
        # processes (default 5, at least BENCH_REPEAT), each with interleaved
        # rounds and its own raw C figure from bench_launch; the medians,
        # the ratios and the targets, and everything as JSON. The compiled
        # extension (cuabi._fast) was built by make next to the package.
        procs=${BENCH_PROCESSES:-$(( repeat > 5 ? repeat : 5 ))}
        [ -f bench/bench_python.py ] && CUABI_LIBRARY=$src/.libs/libcuabi.so \
            PYTHONPATH=$src/bindings/python:${PYTHONPATH:-} python3 -W ignore::DeprecationWarning \
            bench/bench_python.py --processes "$procs" --raw-cmd bench/bench_launch \
            --import-runs 21 --json "$out/bench_python.json" 2>&1 | tee -a "$out/bench.txt"
        [ -f bench/bench_import.py ] && CUABI_LIBRARY=$src/.libs/libcuabi.so \
            PYTHONPATH=$src/bindings/python:${PYTHONPATH:-} python3 bench/bench_import.py \
            --detail --json "$out/bench_import.json" 2>&1 | tee -a "$out/bench.txt"
        [ -f bench/dlpack_sources.py ] && python3 bench/dlpack_sources.py 2>&1 |
            tee -a "$out/bench.txt"
        # Texture objects from Python beside CuPy's TextureObject (issue 27).
        [ -f bench/bench_texture.py ] && CUABI_LIBRARY=$src/.libs/libcuabi.so \
            PYTHONPATH=$src/bindings/python:${PYTHONPATH:-} python3 -W ignore::DeprecationWarning \
            bench/bench_texture.py --json "$out/bench_texture.json" 2>&1 | tee -a "$out/bench.txt"
        # Graph replay from Python beside cuda.core's GraphBuilder (issue 14).
        [ -f bench/bench_graph.py ] && CUABI_LIBRARY=$src/.libs/libcuabi.so \
            PYTHONPATH=$src/bindings/python:${PYTHONPATH:-} python3 -W ignore::DeprecationWarning \
            bench/bench_graph.py ${raw:+--raw-us $raw} 2>&1 | tee -a "$out/bench.txt"
        # Python VMM / managed memory beside cuda.core (issue 25).
        [ -f bench/bench_memory_ext.py ] && CUABI_LIBRARY=$src/.libs/libcuabi.so \
            PYTHONPATH=$src/bindings/python:${PYTHONPATH:-} python3 -W ignore \
            bench/bench_memory_ext.py --json "$out/bench_memory_ext.json" 2>&1 | tee -a "$out/bench.txt"
        ;;
    --multigpu)
        # Peer copy bandwidth (1 MiB .. 1 GiB) and IPC latency (issue 15), C
        # and Python beside torch / CuPy / cuda.core.
        { [ -x bench/bench_peer ] && { echo "== bench/bench_peer"; bench/bench_peer; }
          [ -f bench/bench_peer.py ] && { echo "== bench/bench_peer.py";
            CUABI_LIBRARY=$src/.libs/libcuabi.so PYTHONPATH=$src/bindings/python:${PYTHONPATH:-} \
                python3 -W ignore bench/bench_peer.py --json "$out/bench_peer.json"; }
        } 2>&1 | tee "$out/bench_peer.txt"
        ;;
    --cold)
        # A new process from import to first result, beside CuPy, cuda.core
        # and the driver alone (bench/bench_cold.py); the compute cache on.
        CUABI_LIBRARY=$src/.libs/libcuabi.so PYTHONPATH=$src/bindings/python:${PYTHONPATH:-} \
            env -u CUDA_CACHE_DISABLE python3 -W ignore bench/bench_cold.py --runs "${COLD_RUNS:-5}" \
            --json "$out/cold.json" 2>&1 | tee -a "$out/bench.txt"
        ;;
    --sanitizer)
        # compute-sanitizer over every GPU suite: memcheck, then racecheck.
        for t in tests/*/test_gpu_*; do
            case $t in *.*) continue ;; esac
            [ -x "$t" ] || continue
            # API calls the tests make fail on purpose (bad images, timing
            # on an event without timing, refused launches) are not memory
            # errors: --report-api-errors no keeps memcheck to real ones.
            for tool in memcheck racecheck; do
                echo "== compute-sanitizer --tool $tool $t"
                timeout 200 compute-sanitizer --tool "$tool" --report-api-errors no \
                    --error-exitcode 99 "$t" >/tmp/cs.log 2>&1
                echo "exit: $?"
                grep -E "SUMMARY|Checks:" /tmp/cs.log
                grep -B2 -A12 -m 3 "^========= [A-Z]" /tmp/cs.log | grep -v "SUMMARY" | head -n 40
            done
        done 2>&1 | tee "$out/sanitizer.txt"
        ;;
    esac
done
exit "$status"
