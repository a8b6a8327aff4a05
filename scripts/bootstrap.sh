#!/usr/bin/env bash
# The README's first command: install what is missing, build, run the demo.
# For a Debian/Ubuntu machine with the CUDA toolkit at /usr/local/cuda (or
# CUDA_HOME). Builds out of tree in build/.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS="autoconf automake libtool pkg-config make gcc g++ libffi-dev libdlpack-dev libxxhash-dev libiberty-dev check libsubunit-dev python3 python3-pip"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "bootstrap: installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
# Test-only Python packages (PyPI); the library itself needs none of them.
python3 -m pip install --quiet --disable-pip-version-check pytest numpy tree-sitter tree-sitter-julia "dask[distributed]" \
    2>/dev/null || python3 -m pip install --quiet --break-system-packages pytest numpy tree-sitter tree-sitter-julia "dask[distributed]"

[ -x configure ] || autoreconf -fi
mkdir -p build
cd build
[ -f Makefile ] || ../configure --with-cuda="${CUDA_HOME:-/usr/local/cuda}" -q
make -j"$(nproc)" >/dev/null
./cuabi demo
