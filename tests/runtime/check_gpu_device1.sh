#!/bin/sh
# The launch and memory GPU suites again on the second GPU (issue 15:
# everything that takes a device works for device 1 as for device 0).
# SKIP (77) unless there are two GPUs.
builddir=${CUABI_TEST_BUILDDIR:-.}
CUABI_TEST_DEVICE=1
export CUABI_TEST_DEVICE
skipped=0
for t in test_gpu_memory test_gpu_launch; do
    "$builddir/tests/runtime/$t"
    rc=$?
    case $rc in
    0) echo "PASS: $t on device 1" ;;
    77) skipped=$((skipped + 1)) ;;
    *) echo "FAIL: $t on device 1 (exit $rc)"; exit 1 ;;
    esac
done
[ "$skipped" -eq 2 ] && exit 77
exit 0
