#!/bin/sh
# The one-way rule of src/ (docs/ARCHITECTURE.md): no floor includes or calls
# a floor above it, no circles between files, the tool uses the public API
# only. tests/library/layers.py reads the includes and the built objects (nm); its
# self-test first shows that it catches each kind of breach.
srcdir=${CUABI_TEST_SRCDIR:-$(dirname "$0")/../..}
builddir=${CUABI_TEST_BUILDDIR:-.}
command -v python3 >/dev/null 2>&1 || { echo "python3 missing"; exit 77; }
command -v nm >/dev/null 2>&1 || { echo "nm missing"; exit 77; }
python3 "$srcdir/tests/library/layers.py" --self-test || exit 1
exec python3 "$srcdir/tests/library/layers.py" --src "$srcdir/src" --build "$builddir"
