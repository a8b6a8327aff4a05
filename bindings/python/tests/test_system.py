"""cuabi.system (NVML, issue 26 item 3) without a GPU: the names cuda.core's
system has, NVML absent (a clear NotSupportedError), and the whole layer
against the C tests' fake NVML in a process of its own
(fake_nvml_checks.py; the fake is tests/fixtures/.libs/fake_nvml.so, beside
the fake driver for the mapping to CUDA devices)."""
import os
import subprocess
import sys
import textwrap

import pytest

import cuabi

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.environ.get("CUABI_PYTHON_PATH") or os.path.dirname(HERE)


def _built(env_name, file_name):
    path = os.environ.get(env_name)
    if not path:
        build = os.environ.get("CUABI_TEST_BUILDDIR", "build")
        path = os.path.join(build, "tests", "fixtures", ".libs", file_name)
    return os.path.abspath(path) if os.path.exists(path) else None


def _run(code, **env):
    full = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=PACKAGE, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                          capture_output=True, text=True, timeout=120)


def test_cuda_core_names():
    s = cuabi.system
    for name in ("Device", "get_num_devices", "get_driver_version", "get_nvml_version",
                 "get_kernel_mode_driver_version", "get_user_mode_driver_version",
                 "get_topology_common_ancestor", "get_p2p_status", "GpuTopologyLevel",
                 "GpuP2PStatus", "GpuP2PCapsIndex", "ClocksEventReasons", "ClockType",
                 "NotSupportedError", "num_devices", "driver_version", "devices"):
        assert hasattr(type(s), name), name
    d = s.Device
    for name in ("index", "uuid", "uuid_without_prefix", "pci_bus_id", "name",
                 "cuda_compute_capability", "memory_info", "utilization", "temperature",
                 "pci_info", "get_nvlink", "get_nvlink_count", "get_nvlinks",
                 "current_clock_event_reasons", "get_clock", "compute_running_processes",
                 "performance_state", "to_cuda_device", "get_device_count", "get_all_devices",
                 # cuabi's own
                 "health", "info", "power_usage_mw", "power_limit_mw", "ecc_errors",
                 "running_processes", "graphics_running_processes", "cuda_ordinal",
                 "from_cuda_ordinal", "is_ecc_enabled", "fan_speed"):
        assert hasattr(d, name), name
    assert s.GpuTopologyLevel.NODE == "node" and s.GpuP2PStatus.OK == "ok"
    assert s.ClocksEventReasons.SW_POWER_CAP.value == "sw_power_cap"
    assert issubclass(s.NotSupportedError, NotImplementedError)
    assert s.NVMLError is cuabi.NVMLError and issubclass(cuabi.NVMLError, cuabi.CuabiError)
    assert "system" in dir(cuabi)


def test_device_arguments():
    with pytest.raises(ValueError, match="exactly one"):
        cuabi.system.Device()
    with pytest.raises(ValueError, match="exactly one"):
        cuabi.system.Device(index=0, uuid="GPU-x")
    with pytest.raises(TypeError):
        cuabi.system.Device(index=1.5)
    with pytest.raises(ValueError):
        cuabi.system.Device(index=-1)


def test_without_nvml_everything_says_so():
    r = _run("""
        import cuabi
        s = cuabi.system
        for call in (s.get_num_devices, lambda: s.num_devices, s.get_driver_version,
                     s.get_nvml_version, lambda: s.Device(index=0),
                     lambda: s.Device(uuid="GPU-00010203-0405-0607-0809-0a0b0c0d0e0f")):
            try:
                call()
            except cuabi.NotSupportedError as e:
                assert "NVML not available: CUABI_NVML_PATH=/nonexistent/libnvidia-ml.so.1" \\
                    in str(e), e
                assert isinstance(e, NotImplementedError) and e.nvml_result == 0
            else:
                raise AssertionError("no error without NVML")
        print("ok")
    """, CUABI_NVML_PATH="/nonexistent/libnvidia-ml.so.1")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_system_layer_against_the_fake_nvml():
    fake = _built("CUABI_TEST_FAKE_NVML", "fake_nvml.so")
    if fake is None:
        pytest.skip("tests/fixtures/.libs/fake_nvml.so is not built (make check builds it)")
    env = dict(os.environ, CUABI_NVML_PATH=fake, PYTHONDONTWRITEBYTECODE="1")
    env.pop("CUABI_FAKE_NVML", None)
    driver = _built("CUABI_TEST_FAKE_CUDA", "fake_cuda_graph.so")
    if driver:
        env["CUABI_DRIVER_PATH"] = driver
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.join(HERE, "fake_nvml_checks.py")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
