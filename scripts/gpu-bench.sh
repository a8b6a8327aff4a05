#!/usr/bin/env bash
# The benchmarks and outside-in checks of issues 24-28 in one device call,
# ON THE GPU MACHINE, after scripts/gpu-check.sh (or --skip-check) built the
# tarball in /tmp/cuabi-gpu on the same warm machine:
#   scripts/gpu-bench.sh            (every step)
#   STEPS="graph graphpy" scripts/gpu-bench.sh
# Steps: tex texpy green graph graphpy hostpy peerpy rust memory memorypy examples
# cudacore parity. Each logs to $OUT/<name>.txt (or .gpu/out) and goes on
# after a failure; steps.txt lists rc and seconds per step, then the card and
# the peers' versions. cudacore needs .gpu/cuda_core_examples/ (NVIDIA's
# cuda_core/examples, kept outside the repository); rust needs
# .gpu/rust/bin (scripts/rust-gpu-prep.sh).
set -u
root=$PWD
out=${OUT:-$root/.gpu/out}; mkdir -p "$out"
src=$(ls -d /tmp/cuabi-gpu/cuabi-* 2>/dev/null | head -n 1)
[ -n "$src" ] || { echo "no build in /tmp/cuabi-gpu: run scripts/gpu-check.sh first"; exit 1; }
P=/tmp/cuabi-prefix; L=$P/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$src/.libs:$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$src/bindings/python:/tmp/cuabi-site
export CUABI_LIBRARY=$src/.libs/libcuabi.so PYTHONDONTWRITEBYTECODE=1
export PATH=/usr/local/cuda/bin:$PATH
cd "$src"
step() { # name, seconds, command...
    local name=$1 t=$2; shift 2
    echo "=== $name: $*" >"$out/$name.txt"
    local s=$(date +%s%N)     # no bc on the GPU machine: nanoseconds in bash
    timeout "$t" "$@" >>"$out/$name.txt" 2>&1; local rc=$?
    local ms=$(( ($(date +%s%N) - s) / 1000000 ))
    printf '%-22s rc=%-3s %4d.%01ds\n' "$name" "$rc" $((ms / 1000)) $((ms % 1000 / 100)) | tee -a "$out/steps.txt"
}
want() { [ "${STEPS:-all}" = all ] || [[ " $STEPS " == *" $1 "* ]]; }
want tex      && step bench_texture 60 bench/bench_texture
want texpy    && step bench_texture_py 90 python3 -W ignore bench/bench_texture.py --iters 5000 --rounds 7
want green    && step bench_green 90 bench/bench_green
want graph    && step bench_graph 120 bench/bench_graph
want graphpy  && step bench_graph_py 150 python3 -W ignore bench/bench_graph.py
want hostpy   && step bench_host_launch_py 120 python3 -W ignore bench/bench_host_launch.py
want peerpy   && step bench_peer_py 150 python3 -W ignore bench/bench_peer.py --quick
want peerpy   && step bench_ipc_py 90 python3 -W ignore bench/bench_ipc_python.py
want rust     && [ -x "$root/.gpu/rust/bin/example-bench_launch" ] &&
    step bench_rust_launch 120 sh bench/bench_rust_launch.sh "$root/.gpu/rust/bin/example-bench_launch" bench/bench_launch_cxx 5
want memory   && [ -x bench/bench_vmm ] && step bench_vmm 90 bench/bench_vmm
want memorypy && step bench_memory_ext_py 120 python3 -W ignore bench/bench_memory_ext.py
want examples && step examples_texture 60 sh -c 'python3 examples/python/texture_blur.py && python3 examples/python/texture_kernel_args.py'
want cudacore && [ -d "$root/.gpu/cuda_core_examples" ] &&
    step cuda_core_examples 300 python3 "$root/scripts/run-cuda-core-examples.py" "$root/.gpu/cuda_core_examples" --timeout 60
want parity   && step parity 200 python3 -m pytest -p no:cacheprovider -q -rs bindings/python/tests/test_gpu_cuda_core_parity.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$out/steps.txt" 2>&1
python3 -c "import torch,cupy,numpy;print('torch',torch.__version__,'cupy',cupy.__version__,'numpy',numpy.__version__)" >>"$out/steps.txt" 2>&1
python3 -c "import cuda.core as c;print('cuda.core',c.__version__)" >>"$out/steps.txt" 2>&1
cat "$out/steps.txt"
