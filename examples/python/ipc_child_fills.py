#!/usr/bin/env python3
"""Two processes, one buffer: a child process (spawn context) receives a
buffer and an event through multiprocessing (they pickle to IPC descriptors),
fills the buffer on its own stream and records the event; the parent waits on
the event on its stream and reads what the child wrote.

    python3 examples/python/ipc_child_fills.py

Runs from any directory of a source checkout built in build/ (see
_cuabi_path.py). Without a GPU it says so and exits.
"""
import multiprocessing as mp

import _cuabi_path  # noqa: F401  (finds bindings/python and build/.libs)
import cuabi

N = 1 << 20          # bytes
VALUE = 0x5EED


def child(buf, event, to_parent, from_parent):
    # `buf` and `event` arrived as IPC descriptors and are mapped here.
    stream = buf.device.create_stream(non_blocking=False)
    buf.fill(VALUE, width=4, stream=stream)   # the child's write, queued
    event.record(stream)                      # ... and marked
    to_parent.put("recorded")                 # the parent may wait on it now
    from_parent.get()                         # keep the mapping until the parent is done
    stream.synchronize()


def main():
    try:
        gpus = cuabi.device_count()
    except cuabi.CuabiError:
        gpus = 0
    if not gpus:
        print("No GPU available: the IPC example needs one; skipped.")
        return
    dev = cuabi.Device(0)
    buf = cuabi.Buffer(N, cuabi.MemoryResource.ipc(dev))   # exportable memory
    buf.fill(0, width=4)
    event = cuabi.Event.create_ipc(dev)                    # interprocess, no timing
    ctx = mp.get_context("spawn")
    to_parent, from_parent = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=child, args=(buf, event, to_parent, from_parent))
    p.start()
    assert to_parent.get(timeout=120) == "recorded"
    stream = dev.create_stream(non_blocking=False)
    stream.wait(event)                        # ordered after the child's fill
    host = buf.to_bytes(stream=stream)
    stream.synchronize()
    from_parent.put("done")
    p.join(timeout=120)
    words = memoryview(host).cast("I")
    ok = all(w == VALUE for w in words)
    print(f"child {p.pid} filled {N} bytes with 0x{VALUE:x}: "
          f"{'the parent reads them all' if ok else 'MISMATCH'} (exit code {p.exitcode})")
    if not ok or p.exitcode != 0:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
