"""Virtual memory, managed memory, pool statistics and batched copies from
Python without a GPU: fake_memory_checks.py runs against the C tests' fake
driver in a separate process (as test_ipc_pool.py does)."""

from fake_driver_run import run_checks


def test_memory_against_the_fake_driver():
    run_checks("fake_memory_checks.py")


def test_names_are_cuda_cores():
    import cuabi
    for name in ("VirtualMemoryResource", "VirtualMemoryResourceOptions", "ManagedMemoryResource",
                 "ManagedMemoryResourceOptions", "ManagedBuffer", "copy_batch", "CopyOptions",
                 "MemcpySrcAccessOrder", "MemcpyOverlapMode", "Host"):
        assert name in cuabi.__all__, name
        assert getattr(cuabi, name) is not None
    assert issubclass(cuabi.VirtualMemoryResource, cuabi.MemoryResource)
    assert issubclass(cuabi.ManagedBuffer, cuabi.Buffer)
    assert {m.value for m in cuabi.MemcpySrcAccessOrder} == {"stream", "during_api_call", "any"}
    assert callable(cuabi.VirtualMemoryResource.modify_allocation)
    o = cuabi.CopyOptions()
    assert o.src_access_order == "stream" and o.overlap_mode == "default"
    assert cuabi.MemoryResource.attributes.__doc__
