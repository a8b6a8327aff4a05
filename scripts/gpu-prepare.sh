#!/usr/bin/env bash
# Run HERE (the machine with autotools) before a GPU run: fills the
# git-ignored folder .gpu/ with what the GPU machine lacks:
#   .gpu/cuabi-*.tar.gz   `make dist` tarball (configure already generated,
#                         so no autotools or libtool are needed there)
#   .gpu/debs/*.deb       libffi, Check, subunit, DLPack and xxHash headers, libiberty
#   .gpu/wheels/*.whl     pytest for the Python tests (Python 3.12 there); cffi (an
#                         example of cuda.core needs it); dask and
#                         distributed with what they need, and nccl4py (issue 23:
#                         tests/test_dask.py, bench/bench_nccl.py). Ray's wheel
#                         (~70 MB) does not fit the 64 MiB a call carries: not carried
#                         (docs/distributed.md says what runs only on paper).
#   .gpu/peers/           the peer benchmark scripts from ../shared/bench
# Then, on the GPU machine:  scripts/gpu-check.sh   (carry .gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mkdir -p .gpu/debs .gpu/wheels .gpu/peers
rm -f .gpu/cuabi-*.tar.gz .gpu/debs/*.deb .gpu/wheels/*.whl
[ -x configure ] || autoreconf -fi
mkdir -p build
(cd build && { [ -f Makefile ] || "$root/configure" -q; } && make -j"$(nproc)" >/dev/null && make dist >/dev/null)
cp build/cuabi-*.tar.gz .gpu/
(cd .gpu/debs && apt-get download -qq libffi-dev libffi8 check libsubunit-dev libsubunit0 \
    libdlpack-dev libxxhash-dev libiberty-dev >/dev/null)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 --platform any -d .gpu/wheels \
    pytest pluggy iniconfig packaging >/dev/null
# cffi: NVIDIA's strided_memory_view_cpu example (issue 24's outside-in run) needs it.
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
    -d .gpu/wheels cffi pycparser >/dev/null 2>&1 || echo "cffi: no wheel for the GPU host (left out)"
# Dask (distributed) for the collectives' tests and benchmark, pure Python
# except msgpack, psutil, pyyaml and markupsafe; nccl4py where PyPI has it
# for this platform (a failure here leaves it out: bench_nccl.py skips it).
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform any -d .gpu/wheels \
    dask distributed click cloudpickle fsspec jinja2 markupsafe locket msgpack partd psutil \
    pyyaml sortedcontainers tblib toolz tornado urllib3 zict >/dev/null
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform any \
    -d .gpu/wheels nccl4py >/dev/null 2>&1 || echo "nccl4py: no wheel for the GPU host (left out)"
if [ -d ../shared/bench ]; then cp ../shared/bench/* .gpu/peers/; fi
du -sh .gpu
