#!/usr/bin/env bash
# Run HERE (the machine with autotools) before a GPU run: fills the
# git-ignored folder .gpu/ with what the GPU machine lacks:
#   .gpu/cuabi-*.tar.gz   `make dist` tarball (configure already generated,
#                         so no autotools or libtool are needed there)
#   .gpu/debs/*.deb       libffi, Check, subunit, DLPack and xxHash headers, libiberty
#   .gpu/wheels/*.whl     pytest for the Python tests (Python 3.12 there)
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
if [ -d ../shared/bench ]; then cp ../shared/bench/* .gpu/peers/; fi
du -sh .gpu
