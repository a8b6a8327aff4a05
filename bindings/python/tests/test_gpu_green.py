"""Green contexts and checkpoints from Python on a GPU (skipped without
one): work on a green context's stream stays on its SMs (%smid per block),
offline occupancy with the partition's SM count equals the live answers in
the green context (min grid size, waves), and a child process is locked,
checkpointed (its memory released), restored and unlocked with its data
intact (skipped with the driver's reason where it refuses)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cuabi
from occupancy_kernels import KERNELS, compile_source

pytestmark = pytest.mark.skipif(not hasattr(cuabi, "GreenContext"), reason="no green contexts")

SMID = r'''
extern "C" __global__ void smid(unsigned *out, long long spin) {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  long long t0 = clock64();
  while (clock64() - t0 < spin) { }
  if (threadIdx.x == 0) out[blockIdx.x] = s + 1;
}
'''


@pytest.fixture(scope="module")
def resources(gpu):
    try:
        return gpu.resources.sm
    except (cuabi.NotSupportedError, cuabi.EntryPointNotFoundError) as e:
        pytest.skip(f"no green contexts here: {e}")


def test_work_stays_on_the_partition(gpu, resources):
    groups, _ = resources.split(cuabi.SMResourceOptions(count=[16, 16]))
    a = gpu.create_context(cuabi.ContextOptions(resources=[groups[0]]))
    b = gpu.create_context(cuabi.ContextOptions(resources=[groups[1]]))
    k = cuabi.Program(SMID).compile(arch=gpu.sm_arch).get_kernel("smid")
    blocks = 8 * resources.sm_count
    seen = []
    for ctx in (a, b):
        s = ctx.create_stream()
        out = cuabi.Buffer.from_host(np.zeros(blocks, np.uint32), stream=None)
        cuabi.launch(s, cuabi.LaunchConfig(grid=blocks, block=128), k, out, np.int64(20000))
        s.synchronize()
        ids = np.frombuffer(out.to_bytes(), np.uint32)
        assert (ids > 0).all()
        used = set((ids - 1).tolist())
        assert len(used) <= ctx.sm_count, (len(used), ctx.sm_count)
        seen.append(used)
    assert not seen[0] & seen[1], "two green contexts of one split shared an SM"


def test_offline_equals_live_per_partition(gpu, resources):
    if cuabi.runtime_info()["nvrtc_status"] != 0:
        pytest.skip("NVRTC not available")
    code = compile_source(cuabi, gpu.sm_arch)
    sizes = sorted({resources.min_partition_size, 2 * resources.min_partition_size,
                    resources.sm_count // 2})
    for want in sizes:
        groups, _ = resources.split(cuabi.SMResourceOptions(count=want))
        ctx = gpu.create_context(cuabi.ContextOptions(resources=[groups[0]]))
        for name in KERNELS:
            k = code.get_kernel(name)
            live = k.occupancy_on(ctx)
            off = k.occupancy_for(gpu.sm_arch, sm_count=ctx.sm_count)
            assert live.max_potential_block_size(0, 0) == off.max_potential_block_size(0, 0), \
                (name, ctx.sm_count)
            # Past the kernel's launch bounds the driver still answers
            # (test_gpu_occupancy.py says so); offline answers 0: compared
            # where a launch is possible (max_threads_per_block is 0 for a
            # kernel without launch bounds: 1024 then).
            limit = k.resources.max_threads_per_block or 1024
            for block in (b for b in (64, 128, 256, 1024) if b <= limit):
                for grid in (1, 1000, 54321):
                    try:
                        lw = live.waves(grid, block)
                    except cuabi.LaunchConfigError:
                        with pytest.raises(cuabi.LaunchConfigError):
                            off.waves(grid, block)
                        continue
                    ow = off.waves(grid, block)
                    assert (lw.waves, lw.blocks_per_sm, lw.sm_count) == \
                        (ow.waves, ow.blocks_per_sm, ow.sm_count), (name, block, grid, lw, ow)


CHILD = textwrap.dedent('''
    import sys, numpy as np, cuabi
    n = 1 << 28                      # 1 GiB of uint32
    data = (np.arange(n, dtype=np.uint64) * 2654435761 % (1 << 32)).astype(np.uint32)
    buf = cuabi.Buffer.from_host(data, stream=None)
    print("R", flush=True)
    sys.stdin.readline()
    back = np.frombuffer(buf.to_bytes(), np.uint32)
    print("K" if np.array_equal(back, data) else "B", flush=True)
''')


def _nvml_used_by(pid, gpu):
    """GPU memory the process uses on `gpu` by NVML; None when NVML cannot tell."""
    try:
        d = cuabi.system.Device.from_cuda_ordinal(gpu.ordinal)
        for proc in d.running_processes:
            if proc.pid == pid:
                return proc.used_gpu_memory
        return 0
    except cuabi.CuabiError:
        return None


def test_checkpoint_a_child(gpu):
    from cuabi import checkpoint
    # the child imports the cuabi under test (the runner puts it on sys.path,
    # not in the environment)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cuabi.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (pkg, os.environ.get("PYTHONPATH")) if p))
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "R"
        p = checkpoint.Process(child.pid)
        try:
            assert p.state == "running"
        except (cuabi.NotSupportedError, cuabi.EntryPointNotFoundError, cuabi.NotFoundError) as e:
            pytest.skip(f"checkpointing refused here: {e}")
        before, used_before = gpu.memory_info()[0], _nvml_used_by(child.pid, gpu)
        p.lock(timeout_ms=30000)
        assert p.state == "locked"
        p.checkpoint()
        assert p.state == "checkpointed"
        # The child's own use, by NVML, where NVML sees it: free memory is every
        # process's, and the GPU suites run side by side (two H200s, 2026-11-28:
        # 383 MiB "freed" while the others allocated).
        if used_before is not None and used_before >= 1 << 30:
            used = _nvml_used_by(child.pid, gpu)
            assert used is not None and used < 64 << 20, (used_before, used)
        else:
            freed = gpu.memory_info()[0] - before
            assert freed >= (1 << 30) - (64 << 20), freed
        # by UUID onto the same GPUs. Two H200s refused a map of GPU 0 alone
        # (CUDA_ERROR_INVALID_VALUE, 2026-11-28): every visible GPU is named; a
        # refusal of that too restores plainly (as test_gpu_checkpoint.c does)
        try:
            p.restore(gpu_mapping={cuabi.Device(i): cuabi.Device(i)
                                   for i in range(cuabi.device_count())})
        except cuabi.CudaError as e:
            print(f"restore by UUID refused ({e}); restoring plainly")
            assert p.state == "checkpointed"
            p.restore()
        assert p.state == "locked"
        p.unlock()
        assert p.state == "running"
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "K"
    finally:
        child.kill()
        child.wait()


def test_workqueue_configuration(gpu, resources):
    """cuda.core's WorkqueueResource on the GPU: the device's limit is the
    driver's cap; a green context made with limit 2 and the balanced scope
    reads them back, and its stream runs kernels on its partition. A driver
    before CUDA 13.1 refuses (NotSupportedError naming 13.1)."""
    try:
        wq = gpu.resources.workqueue
    except cuabi.NotSupportedError as e:
        assert "13.1" in str(e)
        pytest.skip(f"no workqueue resources here: {e}")
    print(f"device workqueue: {wq.concurrency_limit}, {wq.sharing_scope}")
    assert 1 <= wq.concurrency_limit <= 128 and wq.device == gpu
    wq.configure(cuabi.WorkqueueResourceOptions(sharing_scope="green_ctx_balanced",
                                                concurrency_limit=2))
    groups, _ = resources.split(cuabi.SMResourceOptions(count=[16]))
    ctx = gpu.create_context(cuabi.ContextOptions(resources=[groups[0], wq]))
    got = ctx.resources.workqueue
    assert (got.concurrency_limit, str(got.sharing_scope)) == (2, "green_ctx_balanced")
    s = ctx.create_stream()
    assert s.resources.workqueue.concurrency_limit == 2
    k = cuabi.Program(SMID).compile(arch=gpu.sm_arch).get_kernel("smid")
    blocks = 8 * resources.sm_count
    out = cuabi.Buffer.from_host(np.zeros(blocks, np.uint32), stream=None)
    cuabi.launch(s, cuabi.LaunchConfig(grid=blocks, block=128), k, out, np.int64(20000))
    s.synchronize()
    ids = np.frombuffer(out.to_bytes(), np.uint32)
    assert (ids > 0).all()
    assert len(set((ids - 1).tolist())) <= ctx.sm_count
    s.close()
    ctx.close()
