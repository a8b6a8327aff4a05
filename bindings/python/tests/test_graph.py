"""Graphs without a GPU: the API's shape and errors here, and the whole
Python layer against the C tests' fake driver in a separate process
(fake_graph_checks.py; the fake is tests/fixtures/.libs/fake_cuda_graph.so)."""

import numpy as np
import pytest

from fake_driver_run import run_checks

import cuabi
from cuabi import _graph


def test_graph_layer_against_the_fake_driver():
    run_checks("fake_graph_checks.py")


def test_names():
    for name in ("Graph", "GraphExec", "GraphNode", "GraphBuilder", "CompleteOptions",
                 "GraphUpdateError", "StreamCaptureError"):
        assert hasattr(cuabi, name)
    s = cuabi.Stream
    assert callable(s.capture) and callable(s.create_graph_builder)
    opts = cuabi.CompleteOptions()
    assert (opts.auto_free_on_launch, opts.upload_stream, opts.device_launch,
            opts.use_node_priority) == (False, None, False, False)
    assert issubclass(cuabi.GraphUpdateError, cuabi.CuabiError)


def test_no_driver_is_a_clear_error():
    if cuabi.runtime_info()["driver_status"] == 0:
        pytest.skip("a driver is loaded")
    with pytest.raises(cuabi.CuabiError, match="cuabi_graph_create"):
        cuabi.Graph()


def test_capture_mode_names():
    assert _graph._mode("global") == cuabi._capi.CUABI_CAPTURE_MODE_GLOBAL
    assert _graph._mode("relaxed") == cuabi._capi.CUABI_CAPTURE_MODE_RELAXED
    with pytest.raises(ValueError, match="thread_local"):
        _graph._mode("local")


def test_placeholder_graph_says_why():
    g = _graph.Graph._placeholder(None)
    with pytest.raises(RuntimeError, match="capture ends"):
        g.handle
    assert "capturing" in repr(g)


def test_host_memory_a_graph_writes_must_be_writable():
    with pytest.raises(ValueError, match="writable"):
        _graph._host_addr(b"read-only")
    addr, n, keep = _graph._host_addr(np.zeros(4, np.int32))
    assert n == 16 and addr and keep is not None


def test_host_trampoline_ignores_unknown_payloads():
    _graph._run_host(None)
    _graph._run_host(123456789)
