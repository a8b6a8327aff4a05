"""Devices, streams, events on a real GPU (skipped without one)."""
import pytest

import cuabi


def test_device(gpu):
    p = gpu.properties
    assert p.ordinal == 0 and p.name and p.multiprocessor_count > 0
    assert gpu.arch.isdigit() and gpu.sm_arch == "sm_" + gpu.arch      # cuda.core's "90"
    free, total = gpu.memory_info()
    assert 0 < free <= total
    assert cuabi.Device(0) == gpu          # same handle value for the same ordinal
    assert gpu.context_handle != 0 and gpu.context.handle == gpu.context_handle


def test_stream_event(gpu):
    with gpu.create_stream(non_blocking=True) as s, cuabi.Event(gpu) as a, cuabi.Event(gpu) as b:
        assert s.raw not in (0, 1, 2)
        assert s.device == gpu
        a.record(s)
        b.record(s)
        s.synchronize()
        assert s.query() and b.query()
        assert b - a >= 0.0
        w = cuabi.Stream.wrap(s.raw, gpu)
        assert w.raw == s.raw
        w.close()
        other = gpu.create_stream(non_blocking=False)
        other.wait(s)

        class Foreign:                      # cuda.core's __cuda_stream__ protocol
            def __cuda_stream__(self):
                return (0, s.raw)
        other.wait(Foreign())
        with pytest.raises(ValueError):
            other.wait(42)
        other.synchronize()
        other.close()
    assert s.closed


def test_default_streams(gpu):
    assert gpu.legacy_default_stream().raw == 1
    assert gpu.default_stream.raw == 1                      # cuda.core: a property
    assert gpu.per_thread_default_stream().raw == 2
