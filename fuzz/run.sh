#!/bin/sh
# Run each libFuzzer target for a bounded time on a scratch copy of its
# seed corpus (the committed corpus is never written to).
#
#   fuzz/run.sh BUILDDIR [SECONDS_PER_TARGET] [TARGET...]
#
# Builds the targets (fuzz/build.sh; exit 77 without clang/libFuzzer),
# prints each target's executions, and exits non-zero on the first crash,
# leak or sanitizer report (the reproducer is left in the work directory).
set -eu
srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=$(cd "${1:?usage: fuzz/run.sh BUILDDIR [SECONDS] [TARGET...]}" && pwd)
secs=${2:-30}
shift; [ $# -gt 0 ] && shift
targets=${*:-dlpack objcode options cache argpack exchange}
out=$builddir/fuzz
"$srcdir/fuzz/build.sh" "$builddir" "$out" >/dev/null || exit $?
export LSAN_OPTIONS="suppressions=$srcdir/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fail=0
for t in $targets; do
    work=$out/work-$t
    rm -rf "$work"
    mkdir -p "$work/corpus"
    if (cd "$work" && "$out/fuzz_$t" -max_total_time="$secs" -timeout=25 -rss_limit_mb=4096 \
            -print_final_stats=1 -artifact_prefix="$work/" corpus \
            "$srcdir/fuzz/corpus/$t" >log 2>&1); then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
        echo "fuzz_$t: $runs executions in ${secs}s, no crash, no leak"
    else
        echo "fuzz_$t: FAILED (log: $work/log)"
        grep -E 'ERROR|SUMMARY|runtime error|fatal|Test unit written' "$work/log" | head -10
        fail=1
    fi
done
exit $fail
