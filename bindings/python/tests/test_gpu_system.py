"""cuabi.system (NVML) on a real GPU, skipped without one or without NVML:
the facts agree with the CUDA driver's, the mapping to CUDA devices is a
bijection onto the visible GPUs, the values are plausible, this process is
on the GPU once it holds memory there, and NVML from Python makes no CUDA
context (checked in a fresh process)."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

import cuabi

system = cuabi.system
PACKAGE = os.environ.get("CUABI_PYTHON_PATH") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def nvml(gpu):
    try:
        return system.get_num_devices()
    except cuabi.NotSupportedError as e:
        pytest.skip(f"a GPU but no NVML: {e}")


def _uuid_text(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def test_no_context_from_nvml(nvml):
    code = textwrap.dedent("""
        import ctypes, cuabi
        s = cuabi.system
        assert s.get_num_devices() >= 1 and s.driver_version >= (12, 0)
        for d in s.Device.get_all_devices():
            d.name, d.uuid, d.memory_info, d.utilization, d.temperature.get_sensor()
            d.pci_info.current_link_width, d.pci_info.rx_throughput, d.running_processes
            d.current_clock_event_reasons, d.health(), d.info(), list(d.get_nvlinks())
            d.cuda_ordinal
        cuda = ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
        ctx = ctypes.c_void_p(1)
        assert cuda.cuCtxGetCurrent(ctypes.byref(ctx)) == 0 and not ctx.value, ctx
        n = ctypes.c_int()
        assert cuda.cuDeviceGetCount(ctypes.byref(n)) == 0
        for o in range(n.value):
            flags, active = ctypes.c_uint(), ctypes.c_int(-1)
            assert cuda.cuDevicePrimaryCtxGetState(o, ctypes.byref(flags),
                                                   ctypes.byref(active)) == 0
            assert active.value == 0, f"device {o}'s primary context is active"
        print("no context")
    """)
    env = dict(os.environ, PYTHONPATH=PACKAGE, PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "no context" in r.stdout, r.stdout + r.stderr


def test_facts_agree_with_cuda(nvml):
    seen = set()
    for ordinal in range(cuabi.device_count()):
        d = system.Device.from_cuda_ordinal(ordinal)
        assert d.index not in seen
        seen.add(d.index)
        p = cuabi.Device(ordinal).properties
        assert d.info().uuid_bytes == bytes(p.uuid)
        assert d.uuid_without_prefix == _uuid_text(bytes(p.uuid))
        assert d.uuid.startswith("GPU-")
        assert d.name == p.name
        assert d.cuda_compute_capability == (p.compute_capability_major,
                                             p.compute_capability_minor)
        assert d.cuda_ordinal == ordinal and d.to_cuda_device().ordinal == ordinal
        assert system.Device(uuid=d.uuid) == d
        # CUDA's 4-digit-domain bus id (Device.pci_bus_id; properties.pci_bus_id is
        # cuda.core's bus number)
        assert system.Device(pci_bus_id=cuabi.Device(ordinal).pci_bus_id) == d
        assert d.pci_info.vendor_id == 0x10de
    assert len(seen) == cuabi.device_count() <= nvml


def test_versions_agree_with_the_driver(nvml):
    v = cuabi.runtime_info()["driver_version"]
    assert system.get_driver_version() == (v // 1000, (v % 1000) // 10)
    kmd = system.get_kernel_mode_driver_version()
    assert len(kmd) >= 2 and kmd[0] >= 450
    assert len(system.get_nvml_version()) >= 3
    assert "libnvidia-ml" in system.nvml_library_path()


def test_values_are_plausible(nvml):
    for d in system.Device.get_all_devices():
        m = d.memory_info
        assert m.total > 1 << 30 and 0 <= m.used <= m.total and 0 <= m.free <= m.total
        assert abs(m.free + m.used + (m.reserved or 0) - m.total) <= m.total // 64
        assert 5 <= d.temperature.get_sensor() <= 110
        assert 5000 <= d.power_usage_mw <= 1500000 and 50000 <= d.power_limit_mw <= 1500000
        u = d.utilization
        assert 0 <= u.gpu <= 100 and 0 <= u.memory <= 100
        sm = d.get_clock(system.ClockType.SM)
        assert 0 < sm.get_current_mhz() <= sm.get_max_mhz() + 100
        p = d.pci_info
        assert 1 <= p.current_link_generation <= p.link_generation <= 6
        assert 1 <= p.current_link_width <= p.max_link_width <= 32
        assert all(isinstance(r, system.ClocksEventReasons) for r in d.current_clock_event_reasons)
        assert d.performance_state is None or 0 <= d.performance_state <= 15
        h = d.health()
        if d.is_ecc_enabled:
            assert h.ecc_uncorrected_volatile is not None
        for link in d.get_nvlinks():
            if link.state:
                assert link.remote_pci_bus_id
        print(f"GPU {d.index}: {d.name} {d.uuid} {h}")


def test_this_process_shows_on_its_gpu(gpu, nvml):
    d = system.Device.from_cuda_ordinal(gpu.ordinal)

    def others():
        return {p.pid for p in d.compute_running_processes} - {os.getpid()}
    alone, before = not others(), d.memory_info.used
    buf = cuabi.Buffer(1 << 30, cuabi.MemoryResource.device_default(gpu))
    gpu.synchronize()
    try:
        mine = [p for p in d.compute_running_processes if p.pid == os.getpid()]
        assert len(mine) == 1, [p.pid for p in d.compute_running_processes]
        if mine[0].used_gpu_memory is not None:
            assert mine[0].used_gpu_memory >= 1 << 30
        # The device-wide figure moves with every process on the GPU (the GPU
        # session runs five test files at once: one freed 1 GB here on 2 x
        # H200): judged only when no other process used the GPU meanwhile.
        if alone and not others():
            assert d.memory_info.used >= before + (1 << 30) - (1 << 27)
    finally:
        buf.close()


def test_cli_info_shows_the_table(nvml):
    exe = os.path.join(os.environ.get("CUABI_TEST_BUILDDIR", "build"), "cuabi")
    if not os.path.exists(exe):
        pytest.skip("the cuabi tool is not built here")
    out = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=120).stdout
    assert "GPU health (NVML)" in out
    assert re.search(r"^ +0 +\d+ +\S", out, re.M), out
