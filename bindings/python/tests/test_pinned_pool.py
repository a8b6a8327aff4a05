"""cuda.core's PinnedMemoryResource (a pool of page-locked host memory,
issue 24) from Python without a GPU: fake_pinned_pool_checks.py runs
against the C tests' fake driver in a separate process (as
test_ipc_pool.py does)."""

from fake_driver_run import run_checks


def test_pinned_pools_against_the_fake_driver():
    run_checks("fake_pinned_pool_checks.py")


def test_names():
    import cuabi
    assert not issubclass(cuabi.PinnedMemoryResource, cuabi.LegacyPinnedMemoryResource)
    assert issubclass(cuabi.PinnedMemoryResource, cuabi.MemoryResource)
    for name in ("allocate", "deallocate", "allocation_handle", "from_allocation_handle",
                 "register", "from_registry", "device_id", "numa_id", "is_ipc_enabled",
                 "is_device_accessible", "is_host_accessible", "__reduce__"):
        assert hasattr(cuabi.PinnedMemoryResource, name), name
    o = cuabi.PinnedMemoryResourceOptions()
    assert (o.ipc_enabled, o.max_size, o.numa_id) == (False, 0, None)
