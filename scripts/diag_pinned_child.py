"""Why a spawned child given a pinned pool's buffers does not answer (issue 24 item 1;
ON THE GPU MACHINE): the test_gpu_pinned_pool.py scenario, with every step of the
child printed to stderr and faulthandler on.  python3 scripts/diag_pinned_child.py [cuabi|cuda.core]"""
import faulthandler
import multiprocessing as mp
import os
import queue
import sys

import numpy as np

MiB = 1 << 20


def say(*a):
    print(f"[{os.getpid()}]", *a, file=sys.stderr, flush=True)


def child(lib, q, out):
    faulthandler.enable()
    import atexit
    atexit.register(lambda: say("child atexit"))
    say("child start", lib)
    core = __import__("cuabi") if lib == "cuabi" else __import__("cuda.core").core
    core.Device(0).set_current()
    say("child current")
    try:
        raw = q.get()
        say("child got message", type(raw))
        mr, bufs, value = raw
        say("child mr", type(mr).__name__, mr.is_ipc_enabled)
        for b in bufs:
            say("child buf", b.size, hex(int(b.handle)))
            host = np.from_dlpack(b).view(np.uint8)
            say("child host", int(host[0]), int(host[-1]))
            host[:16] = value + 1
        for b in bufs:
            b.close()
        out.put(("ok", len(bufs)))
        say("child answered")
    except BaseException as e:
        say("child error", repr(e))
        out.put(("error", repr(e)))
    say("child done")


def main(lib):
    faulthandler.enable()
    core = __import__("cuabi") if lib == "cuabi" else __import__("cuda.core").core
    dev = core.Device(0)
    dev.set_current()
    s = dev.create_stream()
    mr = core.PinnedMemoryResource(core.PinnedMemoryResourceOptions(ipc_enabled=True,
                                                                    max_size=64 * MiB))
    bufs = [mr.allocate(4096 * (i + 1), stream=s) for i in range(4)]
    s.sync()
    for b in bufs:
        np.from_dlpack(b).view(np.uint8)[:] = 11
    ctx = mp.get_context("spawn")
    q, out = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=child, args=(lib, q, out))
    p.start()
    q.put((mr, bufs, 11))
    say("parent sent")
    try:
        say("parent got", out.get(timeout=40))
        say("parent sees", [int(np.from_dlpack(b).view(np.uint8)[0]) for b in bufs])
    except queue.Empty:
        say("parent: no answer; child alive", p.is_alive(), "exit", p.exitcode)
    p.join(20)
    if p.is_alive():
        p.terminate()
    say("parent done, child exit", p.exitcode)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cuabi")
