#!/bin/sh
# CI fuzz smoke run: every libFuzzer target for CUABI_FUZZ_SECONDS (default
# 30) seconds, seed corpora and the regression inputs first. SKIP (77)
# without clang/libFuzzer; fails on any crash, leak or sanitizer report.
if [ -n "${CUABI_SKIP_FUZZ:-}" ]; then echo "SKIP: the fuzz smoke run already ran in the main build (CUABI_SKIP_FUZZ)"; exit 77; fi
srcdir=${CUABI_TEST_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${CUABI_TEST_BUILDDIR:-.}
exec "$srcdir/fuzz/run.sh" "$builddir" "${CUABI_FUZZ_SECONDS:-30}"
