"""Live occupancy (Kernel.occupancy) against the C tests' fake driver
(tests/fixtures/.libs/fake_cuda_graph.so as CUABI_DRIVER_PATH; test_occupancy.py
runs this file in a process of its own). The fake's best block is the
largest whose dynamic shared memory is at most 48 KiB, asking the
block-size callback as the driver does; its other answers are fixed:
available smem 232448 / blocks, cluster size 8 (4 for blocks over 256
threads), 132 / cluster width active clusters."""
import os
import threading

import pytest

import cuabi

HERE = os.path.dirname(os.path.abspath(__file__))
CUBIN = os.path.join(HERE, "..", "..", "..", "tests", "fixtures", "data", "objcode_kernels_sm90.cubin")


@pytest.fixture(scope="module")
def kernel():
    return cuabi.ObjectCode.from_file(CUBIN, "cubin").get_kernel("add")


def test_devices(kernel):
    occ = kernel.occupancy
    assert isinstance(occ, cuabi.KernelOccupancy) and occ.device.ordinal == 0
    assert kernel.occupancy_on(1).device.ordinal == 1
    assert occ[1].device.ordinal == 1 and occ[cuabi.Device(1)].device.ordinal == 1
    assert "device 0" in repr(occ)


def test_answers(kernel):
    occ = kernel.occupancy
    assert occ.max_potential_block_size(0, 0) == (264, 1024)
    assert occ.max_potential_block_size(0, 0).max_block_size == 1024
    assert occ.max_potential_block_size(0, 256) == (264, 256)
    assert occ.max_potential_block_size(64 * 1024, 0) == (0, 0)
    # The driver calls the Python callable (largest b with 64 b <= 48 KiB).
    assert occ.max_potential_block_size(lambda b: 64 * b, 0) == (264, 768)
    assert occ.available_dynamic_shared_memory_per_block(2, 128) == 232448 // 2
    r = occ.report(128)
    assert r.live and r.arch == "sm_90" and r.block_size == 128
    assert r.active_blocks_per_multiprocessor == occ.max_active_blocks_per_multiprocessor(128, 0)
    # One report per 32 threads up to the kernel's launch bounds (256 for add).
    assert kernel.resources.max_threads_per_block == 256
    assert [x.block_size for x in occ.reports(64)] == list(range(32, 257, 32))
    assert all(x.live and x.dynamic_shared_memory_size == 64 for x in occ.reports(64))


def test_clusters(kernel, gpu_stream):
    occ = kernel.occupancy
    cfg = cuabi.LaunchConfig(grid_blocks=8, block=128, cluster=2)
    assert occ.max_potential_cluster_size(cfg) == 8
    assert occ.max_potential_cluster_size(cuabi.LaunchConfig(grid=8, block=512)) == 4
    assert occ.max_active_clusters(cuabi.LaunchConfig(grid_blocks=8, block=128, cluster=4)) == 33
    assert occ.max_active_clusters(cfg, stream=gpu_stream) == 66
    assert occ.max_active_clusters(cfg, gpu_stream) == 66

    class Foreign:          # cuda.core's LaunchConfig attributes
        grid, block, cluster, shmem_size = (8, 1, 1), (128, 1, 1), (4, 1, 1), 0
    assert occ.max_active_clusters(Foreign()) == 33
    with pytest.raises(TypeError, match="LaunchConfig"):
        occ.max_potential_cluster_size(42)


@pytest.fixture
def gpu_stream():
    with cuabi.Stream(cuabi.Device(0)) as s:
        yield s


class Boom(Exception):
    pass


def test_callback_exception_through_the_driver(kernel):
    occ = kernel.occupancy
    err = Boom("992 threads: no answer")

    def need(b):
        if b == 992:
            raise err
        return 64 * b
    with pytest.raises(Boom) as ei:
        occ.max_potential_block_size(need, 0)
    assert ei.value is err
    with pytest.raises(ValueError, match="returned -5"):
        occ.max_potential_block_size(lambda b: -5, 0)
    # Nothing stale: the next query answers.
    assert occ.max_potential_block_size(lambda b: 64 * b, 0) == (264, 768)


def test_callbacks_from_threads(kernel):
    """Each thread's callback answers its own search."""
    results, errors = {}, []

    def work(i):
        try:
            occ = kernel.occupancy
            for _ in range(20):
                got = occ.max_potential_block_size(lambda b: (i + 1) * 16 * b, 0)
                want = max(b for b in range(32, 1025, 32) if (i + 1) * 16 * b <= 48 * 1024)
                assert got.max_block_size == want, (i, got, want)
            results[i] = got
        except BaseException as e:       # reported by the main thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 4


def test_bad_input(kernel):
    occ = kernel.occupancy
    with pytest.raises(cuabi.InvalidArgumentError, match="block_size"):
        occ.max_active_blocks_per_multiprocessor(0, 0)
    with pytest.raises(cuabi.InvalidArgumentError):
        occ.available_dynamic_shared_memory_per_block(0, 128)
    with pytest.raises(TypeError):
        occ.max_potential_block_size(None, 0)
    k2 = cuabi.ObjectCode.from_file(CUBIN, "cubin").get_kernel("add")
    occ2 = k2.occupancy
    k2.close()
    with pytest.raises(cuabi.ClosedHandleError):
        occ2.max_potential_block_size(0, 0)
