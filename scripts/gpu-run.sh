#!/bin/bash
# A targeted device call: ON THE GPU MACHINE, from the repository root, after
# scripts/gpu-prepare.sh filled .gpu/ (carry .gpu). Builds the tarball as
# scripts/gpu-session.sh does (reused while /tmp/cuabi-gpu is there), sets the
# same environment, then runs the command given, in the built source tree
# (the repository itself is $root):
#   scripts/gpu-run.sh 'python3 -m pytest -q bindings/python/tests/test_gpu_graph.py'
root=$PWD; T=/tmp/gpu-run; mkdir -p "$T"
# A warm machine keeps the last build: rebuilt when the carried tarball changed.
sum=$(md5sum .gpu/cuabi-*.tar.gz | cut -c1-32)
if ! ls /tmp/cuabi-gpu/cuabi-*/.libs/libcuabi.so >/dev/null 2>&1 ||
        [ "$(cat /tmp/cuabi-gpu/.tarball-sum 2>/dev/null)" != "$sum" ]; then
    CHECK_REBUILD=1 scripts/gpu-check.sh --skip-check > "$T/build.txt" 2>&1
    echo "$sum" > /tmp/cuabi-gpu/.tarball-sum
    ls /tmp/cuabi-gpu/cuabi-*/.libs/libcuabi.so >/dev/null 2>&1 || { tail -n 30 "$T/build.txt"; exit 1; }
fi
src=$(ls -d /tmp/cuabi-gpu/cuabi-*); P=/tmp/cuabi-prefix; L=$P/usr/lib/x86_64-linux-gnu
export root LD_LIBRARY_PATH=$src/.libs:$L PYTHONPATH=$src/bindings/python:/tmp/cuabi-site \
    CUABI_LIBRARY=$src/.libs/libcuabi.so PYTHONDONTWRITEBYTECODE=1
cd "$src" || exit 1
bash -c "$1"
