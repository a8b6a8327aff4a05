"""Green contexts and checkpoints against the C tests' fake driver
(tests/fixtures/.libs/fake_cuda_graph.so as CUABI_DRIVER_PATH; test_green.py
runs this file in a process of its own). The fake has 132 SMs, groups
rounded up to multiples of 8 (2 with backfill), a green context's CUcontext
equal to its handle, and the min grid size scaled to the partition when a
green context is current. Its checkpoint side knows this process and pid
4242."""
import os
import threading

import numpy as np
import pytest

import cuabi
from cuabi import checkpoint

SRC = ('extern "C" __global__ void add_i64(long long *o, const long long *i, '
       'unsigned long long n) {}\n')

HERE = os.path.dirname(os.path.abspath(__file__))
CUBIN = os.path.join(HERE, "..", "..", "..", "tests", "fixtures", "data", "objcode_kernels_sm90.cubin")


@pytest.fixture(scope="module")
def kernel():
    return cuabi.ObjectCode.from_file(CUBIN, "cubin").get_kernel("add")


def test_device_resources():
    dev = cuabi.Device(0)
    sm = dev.resources.sm
    assert isinstance(sm, cuabi.SMResource)
    assert (sm.sm_count, sm.min_partition_size, sm.coscheduled_alignment, sm.flags) == (132, 8, 8, 0)
    i = sm.info
    assert i.kind == "device" and i.ordinal == 0 and i.split_id == 0 and i.index == -1
    assert sm.device == dev
    assert "132 SMs" in repr(sm)
    assert dev.resources.workqueue.concurrency_limit == 8    # the fake is a 13.1 driver


def test_split_as_the_driver_rounds():
    sm = cuabi.Device(0).resources.sm
    assert sm.group_count(cuabi.SMResourceOptions(count=10)) == 8
    groups, rem = sm.split(cuabi.SMResourceOptions(count=[10, 10]))
    assert [g.sm_count for g in groups] == [16, 16] and rem.sm_count == 100
    assert [g.info.index for g in groups] == [0, 1] and rem.info.kind == "remainder"
    assert groups[0].info.split_id == rem.info.split_id != 0
    assert groups[0].min_partition_size == 0     # the driver leaves it unset
    groups, rem = sm.split(cuabi.SMResourceOptions(count=16))    # as many as fit
    assert len(groups) == 8 and rem.sm_count == 4
    groups, _ = sm.split(cuabi.SMResourceOptions(count=10, backfill=True))
    assert len(groups) == 13 and groups[0].sm_count == 10
    groups, rem = sm.split(cuabi.SMResourceOptions(count=132), dry_run=True)
    assert [g.sm_count for g in groups] == [132] and rem is None
    groups, _ = sm.split()      # the driver's minimum
    assert groups[0].sm_count == 8
    with pytest.raises(cuabi.NotSupportedError, match="13.1"):
        sm.split(cuabi.SMResourceOptions(count=16, coscheduled_sm_count=8))
    with pytest.raises(cuabi.NotSupportedError, match="one size"):
        sm.split(cuabi.SMResourceOptions(count=[16, 24]))
    with pytest.raises(cuabi.InvalidArgumentError, match="132 SMs"):
        sm.split(cuabi.SMResourceOptions(count=133))
    with pytest.raises(cuabi.InvalidArgumentError, match="green context of it"):
        groups[0].split()


def test_green_context_and_its_streams(kernel):
    dev = cuabi.Device(0)
    groups, rem = dev.resources.sm.split(cuabi.SMResourceOptions(count=[16, 16]))
    ctx = dev.create_context(cuabi.ContextOptions(resources=groups))
    assert ctx.is_green and ctx.sm_count == 32 and ctx.device == dev
    assert ctx.raw == ctx.context != 0          # the fake's, as the driver's
    assert "32 SMs" in repr(ctx)
    part = ctx.resources.sm
    assert part.sm_count == 32 and part.info.kind == "green_context" and part.min_partition_size == 8
    sub, _ = part.split(cuabi.SMResourceOptions(count=8))
    assert len(sub) == 4
    s = ctx.create_stream(priority=-2)
    assert s.priority == -2 and s.green_context == ctx and s.device == dev
    assert dev.create_stream().green_context is None

    class StreamOptions:        # cuda.core's
        nonblocking, priority = True, -1
    assert ctx.create_stream(StreamOptions()).priority == -1
    # launches on the green stream (the fake runs add_i64 on the host):
    # one-shot, prepared, and captured there
    add = cuabi.Program(SRC).compile(arch="sm_90").get_kernel("add_i64")
    out = cuabi.Buffer.from_host(np.zeros(1, np.int64), stream=None)
    inp = cuabi.Buffer.from_host(np.arange(1, 5, dtype=np.int64), stream=None)
    cfg = cuabi.LaunchConfig(grid=2, block=32)
    cuabi.launch(s, cfg, add, out, inp, np.uint64(4))
    s.synchronize()
    assert np.frombuffer(out.to_bytes(), np.int64)[0] == 10
    with s.capture() as g:
        cuabi.launch(s, cfg, add, out, inp, np.uint64(4))
    assert np.frombuffer(out.to_bytes(), np.int64)[0] == 10      # captured, not run
    g.instantiate().launch(s)
    s.synchronize()
    assert np.frombuffer(out.to_bytes(), np.int64)[0] == 20
    ctx.synchronize()
    e = ctx.record()
    ctx.wait(e)
    # the stream keeps its green context
    ctx.close()
    s.synchronize()
    assert s.green_context.sm_count == 32
    with pytest.raises(cuabi.InvalidArgumentError, match="one split"):
        dev.create_context(cuabi.ContextOptions(resources=[groups[0], sub[0]]))
    with pytest.raises(TypeError, match="ContextOptions"):
        dev.create_context()
    with pytest.raises(TypeError, match="SMResource"):
        dev.create_context(cuabi.ContextOptions(resources=[dev]))
    with pytest.raises(ValueError):
        dev.create_context(cuabi.ContextOptions(resources=[]))
    with pytest.raises(cuabi.InvalidArgumentError, match="device 1"):
        dev.create_context(cuabi.ContextOptions(resources=[cuabi.Device(1).resources.sm]))


def test_occupancy_per_partition(kernel):
    dev = cuabi.Device(0)
    groups, _ = dev.resources.sm.split(cuabi.SMResourceOptions(count=16))
    ctx = dev.create_context(cuabi.ContextOptions(resources=[groups[0]]))
    whole, part = kernel.occupancy, kernel.occupancy_on(ctx)
    assert part.green_context == ctx and part.device == dev
    assert "green context of 16 SMs" in repr(part)
    assert whole.max_potential_block_size(0, 0).min_grid_size == 264
    assert part.max_potential_block_size(0, 0).min_grid_size == 264 // 132 * 16
    assert part.report(128).active_blocks_per_multiprocessor == \
        whole.report(128).active_blocks_per_multiprocessor
    w = part.waves(1000, 128)
    assert isinstance(w, cuabi.GridWaves)
    assert (w.sm_count, w.blocks_per_sm, w.blocks_per_wave, w.waves) == (16, 4, 64, 16)
    assert w.last_wave_blocks == 1000 - 15 * 64 and 0.97 < w.efficiency < 0.98
    assert str(w).startswith("a 1,000-block grid of 128-thread blocks takes 16 waves on 16 SMs")
    assert whole.waves(1000, 128).waves == 2
    with pytest.raises(cuabi.InvalidArgumentError):
        part.waves(0, 128)
    # from several threads at once: the green context is pushed under its lock
    errors = []

    def hammer():
        try:
            for _ in range(50):
                assert part.max_potential_block_size(0, 0).min_grid_size == 32
        except Exception as e:      # pragma: no cover - reported below
            errors.append(e)
    ts = [threading.Thread(target=hammer) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_checkpoint_process():
    p = checkpoint.Process(4242)
    assert p.pid == 4242 and p.state == "running" and p.restore_thread_id == 4242 + 1000
    p.lock(timeout_ms=5000)
    assert p.state == "locked"
    with pytest.raises(cuabi.CudaError, match="is locked; this call needs it running"):
        p.lock()
    p.checkpoint()
    assert p.state == "checkpointed"
    dev = cuabi.Device(0)
    p.restore(gpu_mapping={dev: dev})                    # by Device
    assert p.state == "locked"
    p.unlock()
    assert p.state == "running"
    p.lock()
    p.checkpoint()
    uuid = dev.properties.uuid
    p.restore({uuid: "GPU-" + uuid.hex()})               # bytes and a UUID string
    p.unlock()
    p.lock()
    p.checkpoint()
    p.restore()
    p.unlock()
    assert checkpoint.Process(os.getpid()).state == "running"
    # a process cannot lock, checkpoint, restore or unlock itself (the
    # driver would wait for its own calls: an H100 hung); asked first
    me = checkpoint.Process(os.getpid())
    assert me.restore_thread_id == os.getpid() + 1000
    for step in (me.lock, me.checkpoint, me.restore, me.unlock):
        with pytest.raises(cuabi.InvalidArgumentError,
                           match="a process cannot checkpoint itself.*another process"):
            step()
    assert me.state == "running"
    assert checkpoint.Process(4242) == p and len({p, checkpoint.Process(4242)}) == 1
    with pytest.raises(cuabi.NotFoundError, match="no CUDA process 999999"):
        checkpoint.Process(999999).state
    with pytest.raises(cuabi.InvalidArgumentError):
        checkpoint.Process(0)
    with pytest.raises(ValueError, match="16 bytes"):
        p.restore({b"short": dev})
    with pytest.raises(TypeError):
        p.restore({1.5: dev})


def test_checkpoint_refusals_are_cuda_cores():
    """cuda.core's checkpoint.Process checks and errors (its checkpoint.py)."""
    for bad in (True, "1", 1.0, None):
        with pytest.raises(TypeError, match="pid must be an int"):
            checkpoint.Process(bad)
    for bad in (0, -5):
        with pytest.raises(ValueError, match="pid must be a positive int"):
            checkpoint.Process(bad)
    p = checkpoint.Process(4242)
    for bad in (1.5, "10", True):
        with pytest.raises(TypeError, match="timeout_ms must be an int"):
            p.lock(bad)
    with pytest.raises(ValueError, match="timeout_ms must be >= 0"):
        p.lock(-1)
    for bad in ([("a", "b")], "GPU-00", 7):
        with pytest.raises(TypeError, match="gpu_mapping must be a mapping"):
            p.restore(bad)
    assert p.state == "running"                  # nothing reached the driver
    # cuda.core: the driver's CUDA_ERROR_NOT_FOUND is "not supported", a RuntimeError
    with pytest.raises(RuntimeError, match="CUDA checkpointing is not supported") as ei:
        checkpoint.Process(999999).state
    assert isinstance(ei.value, cuabi.NotFoundError)       # cuabi's class stays
    assert isinstance(ei.value, cuabi.NotSupportedError)
    assert "no CUDA process 999999" in str(ei.value)
    import typing
    from cuabi.typing import ProcessStateType
    assert set(typing.get_args(ProcessStateType)) <= set(typing.get_args(checkpoint.ProcessStateT))
    assert checkpoint.__all__[0] == "Process" and cuabi.checkpoint is checkpoint


def test_context_and_stream_resources_are_cuda_cores():
    """cuda.core's Context.resources / Stream.resources: a green context's
    (and its streams') are its partition, a primary context's (and its
    streams') the whole device's."""
    dev = cuabi.Device(0)
    dev.set_current()
    assert dev.context.resources.sm.sm_count == 132
    s = dev.create_stream()
    assert s.resources.sm.sm_count == 132
    groups, _rem = dev.resources.sm.split(cuabi.SMResourceOptions(count=[16]))
    ctx = dev.create_context(cuabi.ContextOptions(resources=groups))
    assert ctx.resources.sm.sm_count == 16
    gs = ctx.create_stream()
    assert gs.resources.sm.sm_count == 16
    assert gs.resources.sm.info.kind == "green_context"
    c = dev.context
    c.close()
    with pytest.raises(RuntimeError, match="closed"):
        c.resources
    gs.close()
    s.close()
    ctx.close()


def test_workqueue_resources_are_cuda_cores():
    """cuda.core's WorkqueueResource(+Options): the device's configuration
    (the fake's cap: 8), configure() in place, a green context made with it
    reads it back; cuda.core's checks."""
    dev = cuabi.Device(0)
    wq = dev.resources.workqueue
    assert isinstance(wq, cuabi.WorkqueueResource)
    assert wq.concurrency_limit == 8 and wq.sharing_scope == "device_ctx"
    assert wq.sharing_scope is cuabi.typing.WorkqueueSharingScopeType.DEVICE_CTX
    assert wq.device == dev and isinstance(wq.handle, int) and wq.handle != 0
    assert dev.context.resources.workqueue.concurrency_limit == 8
    with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
        cuabi.WorkqueueResource()
    wq.configure(cuabi.WorkqueueResourceOptions(sharing_scope="green_ctx_balanced",
                                                concurrency_limit=3))
    assert wq.concurrency_limit == 3 and wq.sharing_scope == "green_ctx_balanced"
    wq.configure(cuabi.WorkqueueResourceOptions())              # None: left as they are
    assert wq.concurrency_limit == 3
    wq.configure({"concurrency_limit": 4})
    assert wq.concurrency_limit == 4 and wq.sharing_scope == "green_ctx_balanced"
    assert dev.resources.workqueue.concurrency_limit == 8       # the device's is untouched
    groups, _rem = dev.resources.sm.split(cuabi.SMResourceOptions(count=[16]))
    ctx = dev.create_context(cuabi.ContextOptions(resources=[groups[0], wq]))
    got = ctx.resources.workqueue
    assert (got.concurrency_limit, got.sharing_scope) == (4, "green_ctx_balanced")
    assert ctx.resources.sm.sm_count == 16
    s = ctx.create_stream()
    assert s.resources.workqueue.concurrency_limit == 4
    s.close()
    ctx.close()
    plain = dev.create_context(cuabi.ContextOptions(resources=groups))
    assert plain.resources.workqueue.concurrency_limit == 8
    plain.close()
    # cuda.core's refusals
    with pytest.raises(ValueError, match="concurrency_limit must be >= 1, got 0"):
        cuabi.WorkqueueResourceOptions(concurrency_limit=0)
    with pytest.raises(ValueError, match="sharing_scope"):
        cuabi.WorkqueueResourceOptions(sharing_scope="everyone")
    with pytest.raises(TypeError):
        cuabi.WorkqueueResourceOptions(concurrency_limit=1.5)
    with pytest.raises(TypeError):
        wq.configure(3)
    with pytest.raises(ValueError, match="at most one WorkqueueResource"):
        dev.create_context(cuabi.ContextOptions(resources=[groups[0], wq, wq]))
    with pytest.raises(ValueError, match="SM resources too"):
        dev.create_context(cuabi.ContextOptions(resources=[wq]))
    with pytest.raises(TypeError, match="Unsupported context resource type"):
        dev.create_context(cuabi.ContextOptions(resources=[groups[0], "wq"]))


def test_workqueue_on_a_cuda_13_0_driver():
    """A driver without workqueue resources: NotSupportedError (a
    RuntimeError, as cuda.core's) naming CUDA 13.1, in a process whose fake
    is a 13.0 driver (CUABI_FAKE_NO_WORKQUEUE=1)."""
    import subprocess
    import sys
    code = ("import cuabi, pytest\n"
            "d = cuabi.Device(0)\n"
            "try:\n"
            "    d.resources.workqueue\n"
            "except RuntimeError as e:\n"
            "    assert isinstance(e, cuabi.NotSupportedError) and 'CUDA 13.1' in str(e), e\n"
            "    print('refused')\n")
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cuabi.__file__)))
    env = dict(os.environ, CUABI_FAKE_NO_WORKQUEUE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [pkg, os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "refused" in r.stdout, r.stdout + r.stderr
