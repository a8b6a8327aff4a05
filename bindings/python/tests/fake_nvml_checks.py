"""cuabi.system against the C tests' fake NVML (no GPU): run by
test_system.py in a process whose CUABI_NVML_PATH names
tests/fixtures/.libs/fake_nvml.so and, where it is built, CUABI_DRIVER_PATH the
fake driver. The fake's two GPUs are described in tests/fixtures/fake_nvml.h;
its controls are called through ctypes on the same loaded copy."""
import ctypes
import os
import threading

import pytest

import cuabi

system = cuabi.system
fake = ctypes.CDLL(os.environ["CUABI_NVML_PATH"])
fake.fake_nvml_set.argtypes = [ctypes.c_char_p, ctypes.c_longlong]
fake.fake_nvml_fail.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
fake.fake_nvml_calls.argtypes = [ctypes.c_char_p]
fake.fake_nvml_calls.restype = ctypes.c_long


@pytest.fixture(autouse=True)
def fresh():
    fake.fake_nvml_reset()
    yield
    fake.fake_nvml_reset()


def test_the_machine():
    assert system.get_num_devices() == system.num_devices == 2
    assert system.get_driver_version() == system.driver_version == (13, 0)
    assert system.get_user_mode_driver_version() == (13, 0)
    assert system.get_kernel_mode_driver_version() == (580, 65, 6)
    assert system.get_nvml_version() == (13, 580, 65, 6)
    assert system.nvml_library_path().endswith("fake_nvml.so")
    assert [d.index for d in system.devices] == [0, 1]
    assert [d.index for d in system.Device.get_all_devices()] == [0, 1]
    fake.fake_nvml_set(b"count", 3)
    assert system.Device.get_device_count() == 3


def test_a_gpu():
    d = system.Device(index=1)
    assert d.index == 1 and d.name == "NVIDIA H100 80GB HBM3 (fake 1)"
    assert d.uuid == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert d.uuid_without_prefix == d.uuid[4:]
    assert d.pci_bus_id == "00000000:01:00.0"
    assert d.cuda_compute_capability == (9, 0)
    assert d.minor_number == 0
    m = d.memory_info
    assert (m.total, m.used, m.reserved) == (80 << 30, (1 << 30) + 1, 512 << 20)
    assert m.free == m.total - m.used - m.reserved
    assert (d.utilization.gpu, d.utilization.memory) == (10, 5)
    assert d.temperature.get_sensor() == 41
    assert d.power_usage_mw == 71000 and d.power_limit_mw == 700000
    assert d.power_management_limit_mw == 700000
    assert d.is_ecc_enabled
    assert d.ecc_errors == {"corrected_volatile": 3, "uncorrected_volatile": 0,
                            "corrected_aggregate": 7, "uncorrected_aggregate": 1}
    assert d.fan_speed == 30 and d.performance_state == 0
    assert d.current_clock_event_reasons == [system.ClocksEventReasons.GPU_IDLE]
    assert d.get_clock(system.ClockType.SM).get_current_mhz() == 1980
    assert d.get_clock("graphics").get_current_mhz() == 1755
    assert d.get_clock("memory").get_max_mhz() == 2619
    with pytest.raises(system.NotSupportedError):
        d.get_clock("video").get_current_mhz()
    p = d.pci_info
    assert (p.bus_id, p.domain, p.bus, p.device) == ("00000000:01:00.0", 0, 1, 0)
    assert (p.device_id, p.vendor_id) == (0x2330, 0x10de)
    assert (p.current_link_generation, p.current_link_width) == (5, 16)
    assert (p.link_generation, p.max_link_width) == (5, 16)
    assert (p.tx_throughput, p.rx_throughput) == (1000, 2000)
    info = d.info()
    assert info.uuid_bytes == bytes(range(16)) and info.nvlink_count == 4


def test_finding_gpus():
    d0 = system.Device(index=0)
    assert system.Device(uuid=d0.uuid) == d0
    assert system.Device(uuid=d0.uuid_without_prefix.upper().encode()) == d0
    assert system.Device(pci_bus_id="0000:02:00.0") == d0
    assert system.Device(pci_bus_id=b"00000000:01:00.0").index == 1
    assert hash(d0) == hash(system.Device(index=0)) and d0 != system.Device(index=1)
    with pytest.raises(LookupError, match="no GPU NVML lists"):
        system.Device(pci_bus_id="0000:09:00.0")
    with pytest.raises(ValueError, match="neither a GPU UUID"):
        system.Device(uuid="not a uuid")
    with pytest.raises(ValueError, match="NVML lists 2 GPU"):
        system.Device(index=2)


def test_unreported_values_raise_as_in_cuda_core_and_read_none_in_health():
    fake.fake_nvml_set(b"temp.0", -1)
    fake.fake_nvml_set(b"ecc_enabled.0", 0)
    fake.fake_nvml_fail(b"nvmlDeviceGetPowerUsage", 0, 3, 0)
    fake.fake_nvml_fail(b"nvmlDeviceGetPcieThroughput", 0, 4, 0)
    d = system.Device(index=0)
    with pytest.raises(system.NotSupportedError, match="temperature"):
        d.temperature.get_sensor()
    with pytest.raises(system.NotSupportedError):
        d.power_usage_mw
    with pytest.raises(system.NotSupportedError, match="PCIe bytes"):
        d.pci_info.rx_throughput
    h = d.health()
    assert h.temperature_gpu is None and h.power_usage_mw is None
    assert h.ecc_corrected_volatile is None and d.ecc_errors["uncorrected_aggregate"] is None
    assert h.power_limit_mw == 700000 and h.unavailable != 0
    assert not d.is_ecc_enabled


def test_nvml_failures_raise_nvml_error():
    fake.fake_nvml_fail(b"nvmlDeviceGetTemperature", 1, 15, 1)
    with pytest.raises(cuabi.NVMLError, match="GPU is lost") as e:
        system.Device(index=1).temperature.get_sensor()
    assert e.value.nvml_result == 15 and e.value.status_name == "CUABI_ERROR_NVML"
    assert system.Device(index=1).temperature.get_sensor() == 41      # once


def test_processes():
    d = system.Device(index=0)
    procs = {p.pid: p for p in d.running_processes}
    assert set(procs) == {1000, 1001, 1002}
    assert procs[1001].is_compute and procs[1001].is_graphics
    assert procs[1002].used_gpu_memory is None and not procs[1002].is_compute
    assert procs[1000].used_gpu_memory == 512 << 20
    assert procs[1000].gpu_instance_id == 0xFFFFFFFF
    assert [p.pid for p in d.compute_running_processes] == [1000, 1001]
    assert [p.pid for p in d.graphics_running_processes] == [1001, 1002]
    assert system.Device(index=1).compute_running_processes == []
    fake.fake_nvml_set(b"procs.1", 40)      # more than the first array holds
    assert len(system.Device(index=1).running_processes) == 40


def test_nvlinks_and_topology():
    d0, d1 = system.Device(index=0), system.Device(index=1)
    assert d0.get_nvlink_count() == 4
    links = list(d0.get_nvlinks())
    assert [l.state for l in links] == [True, True, True, False]
    assert links[0].version == (4, 0) and links[0].remote_device == d1
    assert links[0].p2p_supported and not links[2].p2p_supported
    assert links[2].remote_device is None and links[2].remote_pci_bus_id == "00000000:80:00.0"
    assert d0.get_nvlink(1).state
    with pytest.raises(ValueError, match="out of range"):
        d0.get_nvlink(4)
    assert system.get_topology_common_ancestor(d0, d1) is system.GpuTopologyLevel.NODE
    assert system.get_topology_common_ancestor(d0, d0) is system.GpuTopologyLevel.INTERNAL
    assert system.get_p2p_status(d0, d1, "nvlink") is system.GpuP2PStatus.OK
    assert system.get_p2p_status(d0, d1, system.GpuP2PCapsIndex.PCI) is \
        system.GpuP2PStatus.NOT_SUPPORTED
    assert system.get_p2p_status(d0, d1, "prop") is system.GpuP2PStatus.NOT_SUPPORTED
    with pytest.raises(ValueError, match="Invalid P2P caps index"):
        system.get_p2p_status(d0, d1, "sideways")
    with pytest.raises(TypeError):
        system.get_topology_common_ancestor(d0, 1)


def test_cuda_devices_by_uuid():
    if "fake_cuda_graph" not in os.environ.get("CUABI_DRIVER_PATH", ""):
        pytest.skip("the fake driver is not built")
    d0 = system.Device(index=0)
    assert d0.cuda_ordinal == 1                    # the fake lists them the other way round
    cuda = d0.to_cuda_device()
    assert isinstance(cuda, cuabi.Device) and cuda.ordinal == 1
    assert system.Device.from_cuda_ordinal(0).index == 1
    fake.fake_nvml_set(b"count", 3)
    assert system.Device(index=2).cuda_ordinal is None
    with pytest.raises(RuntimeError, match="No corresponding CUDA device"):
        system.Device(index=2).to_cuda_device()


def test_threads():
    errors = []

    def work(i):
        try:
            for _ in range(50):
                d = system.Device(index=i % 2)
                assert d.temperature.get_sensor() == 40 + i % 2
                assert len(d.running_processes) == (3 if i % 2 == 0 else 0)
        except Exception as e:          # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_device_to_system_device_maps_by_uuid():
    """cuda.core's Device.to_system_device: the system.Device of the same
    UUID (NVML's index need not be the CUDA ordinal)."""
    if not os.environ.get("CUABI_DRIVER_PATH"):
        pytest.skip("the fake driver is not built")
    for k in range(min(cuabi.device_count(), system.get_num_devices())):
        d = cuabi.Device(k)
        sd = d.to_system_device()
        assert isinstance(sd, system.Device)
        assert sd.uuid == "GPU-" + d.uuid and sd.uuid_without_prefix == d.uuid
        assert sd == system.Device(uuid=d.uuid)
        assert sd.pci_info.bus_id.lower().endswith(d.pci_bus_id.lower()[-7:])
