#!/bin/bash
# Run a command; if it is still running after SECONDS, print where its threads
# are (gdb's backtraces where gdb is, else each thread's name, kernel wait
# channel and user-space instruction pointer from /proc), then kill it.
# For a hang on the GPU machine:  scripts/gpu-hang-stacks.sh 60 ./test-bin args
t=$1; shift
"$@" & pid=$!
for _ in $(seq "$t"); do kill -0 $pid 2>/dev/null || { wait $pid; echo "exit $?"; exit 0; }; sleep 1; done
echo "=== still running after ${t}s: pid $pid ($*)"
if command -v gdb >/dev/null; then
    gdb -p $pid -batch -ex "set pagination off" -ex "thread apply all bt 25" 2>&1 | grep -E "^#|^Thread" | head -150
else
    for d in /proc/$pid/task/*; do
        echo "$(basename $d) $(cat $d/comm) wchan=$(cat $d/wchan 2>/dev/null) syscall=$(cut -d' ' -f1,9 $d/syscall 2>/dev/null)"
    done
    grep -E "r-xp" /proc/$pid/maps | awk '{print $1, $6}' | head -40
fi
kill -9 $pid; wait $pid 2>/dev/null
