#!/bin/sh
# Generated files must match the API description (make gen-check).
srcdir=${CUABI_TEST_SRCDIR:-$(dirname "$0")/..}
command -v python3 >/dev/null 2>&1 || { echo "python3 missing"; exit 77; }
python3 -c 'import tomllib' 2>/dev/null || { echo "python3 lacks tomllib (needs 3.11+)"; exit 77; }
exec python3 "$srcdir/gen/cuabi_gen.py" --root "$srcdir" --check
