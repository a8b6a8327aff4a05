"""NVML from Python, with cuda.core's names: ``cuabi.system`` is what
``cuda.core.system`` is, over the library's cuabi_nvml_* functions
(docs/nvml.md). It never creates a CUDA context, and never loads the CUDA
driver but for the two mappings to CUDA devices (Device.to_cuda_device,
Device.cuda_ordinal), which initialise it and read UUIDs.

cuda.core's names mean what they mean in cuda.core: ``system.Device(index=,
uuid=, pci_bus_id=)`` is a GPU as NVML lists it (NVML's index, not the CUDA
ordinal), ``memory_info``, ``utilization``, ``temperature.get_sensor()``,
``pci_info``, ``get_nvlink(link)``, ``current_clock_event_reasons``,
``get_clock(ClockType.SM)``, ``compute_running_processes``,
``to_cuda_device()``; ``get_num_devices()``, ``get_driver_version()``,
``get_kernel_mode_driver_version()``, ``get_nvml_version()``,
``get_topology_common_ancestor(a, b)``, ``get_p2p_status(a, b, index)``. A
value NVML does not report for a GPU raises NotSupportedError there, as in
cuda.core. cuabi's extras keep their own names: ``health()`` (every value at
once, None for what NVML does not report), ``power_usage_mw``,
``power_limit_mw``, ``ecc_errors``, ``running_processes`` (compute and
graphics), ``cuda_ordinal``. The older cuda.core ``system.num_devices`` and
``system.driver_version`` are there too.

Without NVML every call raises NotSupportedError ("NVML not available: ...").
"""
from __future__ import annotations

import ctypes as C
import enum
from types import SimpleNamespace

from . import _capi
from ._lib import call, lib, new_struct, struct_to_dict
from .errors import ERRORS, INT_MAX, index_arg

NotSupportedError = ERRORS[_capi.CUABI_ERROR_NOT_SUPPORTED]
NVMLError = ERRORS[_capi.CUABI_ERROR_NVML]
_F = _capi                                # the CUABI_NVML_FIELD_* bits


class GpuTopologyLevel(str, enum.Enum):
    """How far apart two GPUs sit (cuda.core.system.GpuTopologyLevel)."""
    INTERNAL = "internal"
    SINGLE = "single"
    MULTIPLE = "multiple"
    HOSTBRIDGE = "hostbridge"
    NODE = "node"
    SYSTEM = "system"


class GpuP2PStatus(str, enum.Enum):
    """Whether peer access works (cuda.core.system.GpuP2PStatus)."""
    OK = "ok"
    CHIPSET_NOT_SUPPORTED = "chipset not supported"
    GPU_NOT_SUPPORTED = "GPU not supported"
    IOH_TOPOLOGY_NOT_SUPPORTED = "IOH topology not supported"
    DISABLED_BY_REGKEY = "disabled by regkey"
    NOT_SUPPORTED = "not supported"
    UNKNOWN = "unknown"


class GpuP2PCapsIndex(str, enum.Enum):
    """Which peer access get_p2p_status asks about (cuda.core.system.GpuP2PCapsIndex)."""
    READ = "read"
    WRITE = "write"
    NVLINK = "nvlink"
    ATOMICS = "atomics"
    PCI = "pci"
    PROP = "prop"                         # NVML's deprecated name of PCI
    UNKNOWN = "unknown"


class ClocksEventReasons(str, enum.Enum):
    """Why the clocks are below their maximum (cuda.core.system.ClocksEventReasons)."""
    NONE = "none"
    GPU_IDLE = "gpu_idle"
    APPLICATIONS_CLOCKS_SETTING = "applications_clocks_setting"
    SW_POWER_CAP = "sw_power_cap"
    HW_SLOWDOWN = "hw_slowdown"
    SYNC_BOOST = "sync_boost"
    SW_THERMAL_SLOWDOWN = "sw_thermal_slowdown"
    HW_THERMAL_SLOWDOWN = "hw_thermal_slowdown"
    HW_POWER_BRAKE_SLOWDOWN = "hw_power_brake_slowdown"
    DISPLAY_CLOCK_SETTING = "display_clock_setting"


class ClockType(str, enum.Enum):
    """A clock domain (cuda.core.system.ClockType); cuabi reads all but VIDEO."""
    GRAPHICS = "graphics"
    SM = "sm"
    MEMORY = "memory"
    VIDEO = "video"


_LEVELS = {_capi.CUABI_NVML_TOPOLOGY_INTERNAL: GpuTopologyLevel.INTERNAL,
           _capi.CUABI_NVML_TOPOLOGY_SINGLE: GpuTopologyLevel.SINGLE,
           _capi.CUABI_NVML_TOPOLOGY_MULTIPLE: GpuTopologyLevel.MULTIPLE,
           _capi.CUABI_NVML_TOPOLOGY_HOSTBRIDGE: GpuTopologyLevel.HOSTBRIDGE,
           _capi.CUABI_NVML_TOPOLOGY_NODE: GpuTopologyLevel.NODE,
           _capi.CUABI_NVML_TOPOLOGY_SYSTEM: GpuTopologyLevel.SYSTEM}
_P2P = list(GpuP2PStatus)                 # in cuabi_nvml_p2p_status's order
_P2P_FIELD = {GpuP2PCapsIndex.READ: "p2p_read", GpuP2PCapsIndex.WRITE: "p2p_write",
              GpuP2PCapsIndex.NVLINK: "p2p_nvlink", GpuP2PCapsIndex.ATOMICS: "p2p_atomics",
              GpuP2PCapsIndex.PCI: "p2p_pci", GpuP2PCapsIndex.PROP: "p2p_pci"}
_THROTTLE = [(_capi.CUABI_NVML_THROTTLE_GPU_IDLE, ClocksEventReasons.GPU_IDLE),
             (_capi.CUABI_NVML_THROTTLE_APPLICATIONS_CLOCKS_SETTING,
              ClocksEventReasons.APPLICATIONS_CLOCKS_SETTING),
             (_capi.CUABI_NVML_THROTTLE_SW_POWER_CAP, ClocksEventReasons.SW_POWER_CAP),
             (_capi.CUABI_NVML_THROTTLE_HW_SLOWDOWN, ClocksEventReasons.HW_SLOWDOWN),
             (_capi.CUABI_NVML_THROTTLE_SYNC_BOOST, ClocksEventReasons.SYNC_BOOST),
             (_capi.CUABI_NVML_THROTTLE_SW_THERMAL_SLOWDOWN,
              ClocksEventReasons.SW_THERMAL_SLOWDOWN),
             (_capi.CUABI_NVML_THROTTLE_HW_THERMAL_SLOWDOWN,
              ClocksEventReasons.HW_THERMAL_SLOWDOWN),
             (_capi.CUABI_NVML_THROTTLE_HW_POWER_BRAKE_SLOWDOWN,
              ClocksEventReasons.HW_POWER_BRAKE_SLOWDOWN),
             (_capi.CUABI_NVML_THROTTLE_DISPLAY_CLOCK_SETTING,
              ClocksEventReasons.DISPLAY_CLOCK_SETTING)]

# health() field -> the bit that says NVML did not report it.
_HEALTH_BITS = {
    "memory_total": _F.CUABI_NVML_FIELD_MEMORY, "memory_free": _F.CUABI_NVML_FIELD_MEMORY,
    "memory_used": _F.CUABI_NVML_FIELD_MEMORY,
    "memory_reserved": _F.CUABI_NVML_FIELD_MEMORY_RESERVED,
    "utilization_gpu": _F.CUABI_NVML_FIELD_UTILIZATION,
    "utilization_memory": _F.CUABI_NVML_FIELD_UTILIZATION,
    "temperature_gpu": _F.CUABI_NVML_FIELD_TEMPERATURE,
    "power_usage_mw": _F.CUABI_NVML_FIELD_POWER_USAGE,
    "power_limit_mw": _F.CUABI_NVML_FIELD_POWER_LIMIT,
    "power_management_limit_mw": _F.CUABI_NVML_FIELD_POWER_MANAGEMENT_LIMIT,
    "clock_graphics_mhz": _F.CUABI_NVML_FIELD_CLOCK_GRAPHICS,
    "clock_sm_mhz": _F.CUABI_NVML_FIELD_CLOCK_SM,
    "clock_memory_mhz": _F.CUABI_NVML_FIELD_CLOCK_MEMORY,
    "ecc_corrected_volatile": _F.CUABI_NVML_FIELD_ECC_VOLATILE,
    "ecc_uncorrected_volatile": _F.CUABI_NVML_FIELD_ECC_VOLATILE,
    "ecc_corrected_aggregate": _F.CUABI_NVML_FIELD_ECC_AGGREGATE,
    "ecc_uncorrected_aggregate": _F.CUABI_NVML_FIELD_ECC_AGGREGATE,
    "throttle_reasons": _F.CUABI_NVML_FIELD_THROTTLE_REASONS,
    "pcie_generation": _F.CUABI_NVML_FIELD_PCIE_LINK,
    "pcie_width": _F.CUABI_NVML_FIELD_PCIE_LINK,
    "performance_state": _F.CUABI_NVML_FIELD_PERFORMANCE_STATE,
    "fan_speed_percent": _F.CUABI_NVML_FIELD_FAN_SPEED,
}


def _index(value, what="index") -> int:
    return index_arg(value, f"system.Device: {what}", 0, INT_MAX)


def _not_reported(what: str, index: int):
    return NotSupportedError(f"NVML does not report {what} for GPU {index}",
                             status=_capi.CUABI_ERROR_NOT_SUPPORTED)


# ------------------------------------------------------------ the machine

def get_num_devices() -> int:
    """How many GPUs NVML lists (every GPU this process may open, whatever
    CUDA_VISIBLE_DEVICES says)."""
    return call("cuabi_nvml_device_count")


def _system_info() -> dict:
    s = new_struct(_capi.cuabi_nvml_system_info)
    lib.cuabi_nvml_system_info_get(C.byref(s))
    d = struct_to_dict(s)
    d["library_path"] = (s.library_path or b"").decode("utf-8", "replace")
    d.pop("version", None)
    return d


def _numbers(text: str) -> tuple:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def get_driver_version() -> tuple:
    """The CUDA version the driver supports, (13, 0), read through NVML (no
    CUDA driver loaded)."""
    v = _system_info()["cuda_driver_version"]
    if not v:
        raise NotSupportedError("NVML does not report the driver's CUDA version",
                                status=_capi.CUABI_ERROR_NOT_SUPPORTED)
    return v // 1000, (v % 1000) // 10


def get_user_mode_driver_version() -> tuple:
    """The CUDA (user-mode) driver version, (13, 0): get_driver_version()."""
    return get_driver_version()


def get_kernel_mode_driver_version() -> tuple:
    """The NVIDIA (kernel-mode) driver's version, (580, 65, 6)."""
    return _numbers(_system_info()["driver_version"])


def get_nvml_version() -> tuple:
    """NVML's own version, (13, 580, 65, 6)."""
    return _numbers(_system_info()["nvml_version"])


def nvml_library_path() -> str:
    """cuabi extra: the libnvidia-ml file loaded."""
    return _system_info()["library_path"]


# ------------------------------------------------------------ one GPU's parts

class MemoryInfo(SimpleNamespace):
    """Bytes of device memory: total, free, used, reserved (None when NVML
    does not say what the driver reserves; `used` then counts it)."""


class Utilization(SimpleNamespace):
    """Percent of the last sample period: gpu (a kernel ran), memory."""


class Temperature:
    """A GPU's temperature (cuda.core: device.temperature.get_sensor())."""

    def __init__(self, device: "Device"):
        self._device = device

    def get_sensor(self) -> int:
        """Degrees Celsius of the GPU die."""
        return self._device._health_value("temperature_gpu", "the temperature")


class PciInfo:
    """A GPU's PCI location and link (cuda.core.system's PciInfo)."""

    def __init__(self, device: "Device"):
        self._device, info = device, device._info()
        self.bus_id = info["pci_bus_id"]
        self.domain, self.bus, self.device = info["pci_domain"], info["pci_bus"], \
            info["pci_device"]
        self.device_id = info["pci_device_id"] >> 16
        self.vendor_id = info["pci_device_id"] & 0xFFFF
        # The most this GPU *and this system* allow (nvmlDeviceGetMaxPcieLink*);
        # cuda.core's max_link_generation (the GPU's own) is not read here.
        self.link_generation = info["pcie_max_generation"]
        self.max_link_width = info["pcie_max_width"]

    @property
    def current_link_generation(self) -> int:
        return self._device._health_value("pcie_generation", "the PCIe link")

    @property
    def current_link_width(self) -> int:
        return self._device._health_value("pcie_width", "the PCIe link")

    @property
    def tx_throughput(self) -> int:
        """KiB/s sent over PCIe, counted by NVML over 20 ms."""
        return self._device._throughput()[0]

    @property
    def rx_throughput(self) -> int:
        """KiB/s received over PCIe, counted by NVML over 20 ms."""
        return self._device._throughput()[1]


class ClockInfo:
    """One clock domain of a GPU (cuda.core: device.get_clock(ClockType.SM))."""

    _FIELDS = {ClockType.GRAPHICS: ("clock_graphics_mhz", "max_clock_graphics_mhz"),
               ClockType.SM: ("clock_sm_mhz", "max_clock_sm_mhz"),
               ClockType.MEMORY: ("clock_memory_mhz", "max_clock_memory_mhz")}

    def __init__(self, device: "Device", clock_type):
        self._device, self._type = device, ClockType(clock_type)

    def get_current_mhz(self) -> int:
        if self._type not in self._FIELDS:
            raise _not_reported(f"the {self._type.value} clock", self._device.index)
        return self._device._health_value(self._FIELDS[self._type][0], "the clock")

    def get_max_mhz(self) -> int:
        info = self._device._info()
        if self._type not in self._FIELDS or info["unavailable"] & _F.CUABI_NVML_FIELD_MAX_CLOCKS:
            raise _not_reported(f"the {self._type.value} clock's maximum", self._device.index)
        return info[self._FIELDS[self._type][1]]


class NvlinkInfo:
    """One NVLink link (cuda.core.system.NvlinkInfo: version, state); cuabi
    extras: link, remote_pci_bus_id, remote_device, p2p_supported."""

    max_links = 32

    def __init__(self, device: "Device", link: int):
        s = new_struct(_capi.cuabi_nvml_nvlink)
        lib.cuabi_nvml_device_nvlink_get(C.byref(s), device.index,
                                         index_arg(link, "get_nvlink: link", 0, INT_MAX))
        self._s, self.link = s, link
        self.remote_pci_bus_id = s.remote_pci_bus_id.decode("ascii", "replace")
        self.remote_device = Device(index=s.remote_index) if s.remote_index >= 0 else None
        self.p2p_supported = bool(s.p2p_supported)

    @property
    def version(self) -> tuple:
        """(major, minor): (4, 0) for NVLink 4."""
        if self._s.unavailable & _F.CUABI_NVML_FIELD_NVLINK_VERSION:
            raise NotSupportedError("NVML does not report this link's version",
                                    status=_capi.CUABI_ERROR_NOT_SUPPORTED)
        return self._s.version_major, self._s.version_minor

    @property
    def state(self) -> bool:
        """True when the link is up."""
        return bool(self._s.active)


class ProcessInfo(SimpleNamespace):
    """A process on a GPU (cuda.core.system.ProcessInfo): pid,
    used_gpu_memory (None when NVML cannot tell), gpu_instance_id,
    compute_instance_id; cuabi extras: is_compute, is_graphics."""


# ------------------------------------------------------------ Device

class Device:
    """A GPU as NVML lists it (cuda.core.system.Device): exactly one of
    `index` (NVML's, which need not be the CUDA ordinal), `uuid` ("GPU-..."
    or without the prefix) or `pci_bus_id` ("0000:17:00.0")."""

    def __init__(self, *, index: int | None = None, uuid: str | bytes | None = None,
                 pci_bus_id: str | bytes | None = None):
        given = [a for a in (index, uuid, pci_bus_id) if a is not None]
        if len(given) != 1:
            raise ValueError("system.Device: give exactly one of index, uuid or pci_bus_id")
        if index is not None:
            index = _index(index)
            count = get_num_devices()
            if index >= count:
                raise ERRORS[_capi.CUABI_ERROR_INVALID_ARGUMENT](
                    f"system.Device: index {index}: NVML lists {count} GPU(s)")
            self._index = index
        else:
            key = given[0].decode("ascii") if isinstance(given[0], bytes) else str(given[0])
            self._index = call("cuabi_nvml_device_find", key.encode())

    # ---- cuda.core's names

    @classmethod
    def get_device_count(cls) -> int:
        return get_num_devices()

    @classmethod
    def get_all_devices(cls):
        """Every GPU NVML lists, in NVML's order."""
        for i in range(get_num_devices()):
            yield cls(index=i)

    @property
    def index(self) -> int:
        return self._index

    @property
    def uuid(self) -> str:
        """NVML's UUID, "GPU-xxxxxxxx-..." (with the prefix, as in cuda.core)."""
        return self._info()["uuid"]

    @property
    def uuid_without_prefix(self) -> str:
        """The UUID as CUDA writes it (no "GPU-")."""
        return self.uuid[4:]

    @property
    def pci_bus_id(self) -> str:
        return self._info()["pci_bus_id"]

    @property
    def name(self) -> str:
        return self._info()["name"]

    @property
    def cuda_compute_capability(self) -> tuple:
        info = self._info()
        if info["unavailable"] & _F.CUABI_NVML_FIELD_COMPUTE_CAPABILITY:
            raise _not_reported("the compute capability", self._index)
        return info["compute_capability_major"], info["compute_capability_minor"]

    @property
    def minor_number(self) -> int:
        """N of /dev/nvidiaN."""
        return self._info()["minor_number"]

    @property
    def memory_info(self) -> MemoryInfo:
        h = self.health()
        if h.memory_total is None:
            raise _not_reported("memory", self._index)
        return MemoryInfo(total=h.memory_total, free=h.memory_free, used=h.memory_used,
                          reserved=h.memory_reserved)

    @property
    def utilization(self) -> Utilization:
        h = self.health()
        if h.utilization_gpu is None:
            raise _not_reported("utilisation", self._index)
        return Utilization(gpu=h.utilization_gpu, memory=h.utilization_memory)

    @property
    def temperature(self) -> Temperature:
        return Temperature(self)

    @property
    def pci_info(self) -> PciInfo:
        return PciInfo(self)

    def get_clock(self, clock_type) -> ClockInfo:
        return ClockInfo(self, clock_type)

    @property
    def performance_state(self) -> int | None:
        """0 (fastest) .. 15, or None when unknown."""
        return self.health().performance_state

    @property
    def current_clock_event_reasons(self) -> list:
        """Why the clocks are held back: ClocksEventReasons, [NONE] when nothing."""
        bits = self._health_value("throttle_reasons", "throttle reasons")
        reasons = [r for bit, r in _THROTTLE if bits & bit]
        return reasons or [ClocksEventReasons.NONE]

    def get_nvlink_count(self) -> int:
        return self._info()["nvlink_count"]

    def get_nvlink(self, link: int) -> NvlinkInfo:
        count = self.get_nvlink_count()
        if not 0 <= index_arg(link, "get_nvlink: link", 0, INT_MAX) < count:
            raise ValueError(f"Link index {link} is out of range [0, {count})")
        return NvlinkInfo(self, link)

    def get_nvlinks(self):
        for link in range(self.get_nvlink_count()):
            yield NvlinkInfo(self, link)

    @property
    def compute_running_processes(self) -> list:
        """Processes with a compute (CUDA) context on this GPU."""
        return [p for p in self.running_processes if p.is_compute]

    def to_cuda_device(self):
        """The cuabi.Device that is this GPU (by UUID); RuntimeError when CUDA
        does not show it here (CUDA_VISIBLE_DEVICES, MIG). Loads the driver."""
        ordinal = self.cuda_ordinal
        if ordinal is None:
            raise RuntimeError("No corresponding CUDA device found for this NVML device.")
        from ._core import Device as CudaDevice              # lazy: import time
        return CudaDevice(ordinal)

    # ---- cuabi's extras

    @property
    def cuda_ordinal(self) -> int | None:
        """This GPU's CUDA ordinal in this process, or None (loads the driver,
        cuInit; no context)."""
        o = call("cuabi_nvml_device_cuda_ordinal", self._index)
        return o if o >= 0 else None

    @classmethod
    def from_cuda_ordinal(cls, ordinal: int) -> "Device":
        """The NVML GPU that is CUDA device `ordinal` (by UUID)."""
        return cls(index=call("cuabi_nvml_device_from_cuda_ordinal",
                              index_arg(ordinal, "from_cuda_ordinal: ordinal", 0, INT_MAX)))

    def info(self) -> SimpleNamespace:
        """Every fact of cuabi_nvml_device_info (name, uuid, uuid_bytes,
        pci_*, compute capability, memory_total, PCIe and clock maxima, ECC
        mode, nvlink_count, unavailable)."""
        return SimpleNamespace(**self._info())

    def health(self) -> SimpleNamespace:
        """Every value of cuabi_nvml_health at once; None for what NVML does
        not report for this GPU."""
        s = new_struct(_capi.cuabi_nvml_health)
        lib.cuabi_nvml_device_health_get(C.byref(s), self._index)
        d = struct_to_dict(s)
        d.pop("version", None)
        for field, bit in _HEALTH_BITS.items():
            if s.unavailable & bit:
                d[field] = None
        return SimpleNamespace(**d)

    @property
    def power_usage_mw(self) -> int:
        return self._health_value("power_usage_mw", "the power draw")

    @property
    def power_limit_mw(self) -> int:
        """The power limit in force (the lowest of all set), in milliwatts."""
        return self._health_value("power_limit_mw", "the power limit")

    @property
    def power_management_limit_mw(self) -> int:
        return self._health_value("power_management_limit_mw", "the power-management limit")

    @property
    def is_ecc_enabled(self) -> bool:
        info = self._info()
        if info["unavailable"] & _F.CUABI_NVML_FIELD_ECC_MODE:
            raise _not_reported("the ECC mode", self._index)
        return bool(info["ecc_enabled"])

    @property
    def ecc_errors(self) -> dict | None:
        """{"corrected_volatile", "uncorrected_volatile", "corrected_aggregate",
        "uncorrected_aggregate"}: counts, None where not counted (ECC off)."""
        h = self.health()
        return {k: getattr(h, "ecc_" + k) for k in ("corrected_volatile", "uncorrected_volatile",
                                                    "corrected_aggregate",
                                                    "uncorrected_aggregate")}

    @property
    def fan_speed(self) -> int | None:
        """Intended fan speed, percent; None for a GPU without a fan of its own."""
        return self.health().fan_speed_percent

    @property
    def running_processes(self) -> list:
        """Processes with a compute or a graphics context on this GPU, one
        entry each (is_compute, is_graphics), by pid."""
        capacity = 16
        while True:
            arr = (_capi.cuabi_nvml_process * capacity)()
            for s in arr:
                lib.cuabi_nvml_process_init(C.byref(s), _capi.cuabi_nvml_process._cuabi_version_)
            n = C.c_size_t()
            lib.cuabi_nvml_device_processes(arr, capacity, C.byref(n), self._index)
            if n.value <= capacity:
                break
            capacity = n.value + 8        # more came meanwhile: ask again
        return [ProcessInfo(pid=p.pid,
                            used_gpu_memory=None if p.used_memory == (1 << 64) - 1
                            else p.used_memory,
                            gpu_instance_id=p.gpu_instance_id,
                            compute_instance_id=p.compute_instance_id,
                            is_compute=bool(p.kinds & _capi.CUABI_NVML_PROCESS_COMPUTE),
                            is_graphics=bool(p.kinds & _capi.CUABI_NVML_PROCESS_GRAPHICS))
                for p in arr[:n.value]]

    @property
    def graphics_running_processes(self) -> list:
        return [p for p in self.running_processes if p.is_graphics]

    # ---- plumbing

    def _info(self) -> dict:
        s = new_struct(_capi.cuabi_nvml_device_info)
        lib.cuabi_nvml_device_info_get(C.byref(s), self._index)
        d = struct_to_dict(s)
        d.pop("version", None)
        return d

    def _health_value(self, field: str, what: str):
        value = getattr(self.health(), field)
        if value is None:
            raise _not_reported(what, self._index)
        return value

    def _throughput(self) -> tuple:
        tx, rx = C.c_uint(), C.c_uint()
        lib.cuabi_nvml_device_pcie_throughput(C.byref(tx), C.byref(rx), self._index)
        return tx.value, rx.value

    def __eq__(self, other):
        return isinstance(other, Device) and other._index == self._index

    def __hash__(self):
        return hash(("cuabi.system.Device", self._index))

    def __repr__(self):
        return f"<cuabi.system.Device index={self._index}>"


# ------------------------------------------------------------ between GPUs

def _topology(a: Device, b: Device):
    if not isinstance(a, Device) or not isinstance(b, Device):
        raise TypeError("expected two cuabi.system.Device objects")
    s = new_struct(_capi.cuabi_nvml_topology)
    lib.cuabi_nvml_topology_get(C.byref(s), a.index, b.index)
    return s


def get_topology_common_ancestor(device1: Device, device2: Device) -> GpuTopologyLevel:
    """The closest common ancestor of two GPUs' PCIe paths."""
    s = _topology(device1, device2)
    if s.unavailable & _F.CUABI_NVML_FIELD_TOPOLOGY:
        raise NotSupportedError("NVML does not report the topology between these GPUs",
                                status=_capi.CUABI_ERROR_NOT_SUPPORTED)
    return _LEVELS.get(s.common_ancestor, GpuTopologyLevel.SYSTEM)


def get_p2p_status(device1: Device, device2: Device, index) -> GpuP2PStatus:
    """Whether peer access of kind `index` (GpuP2PCapsIndex or its string) works."""
    try:
        field = _P2P_FIELD[GpuP2PCapsIndex(index)]
    except (ValueError, KeyError):
        raise ValueError(f"Invalid P2P caps index: {index!r}. Must be one of "
                         f"{[i.value for i in _P2P_FIELD]}") from None
    value = getattr(_topology(device1, device2), field)
    return _P2P[value] if 0 <= value < len(_P2P) else GpuP2PStatus.UNKNOWN


# ------------------------------------------------------------ cuabi.system

class _System:
    """``cuabi.system``: the functions and classes above, and the older
    cuda.core ``system`` object's properties (num_devices, driver_version)."""

    Device = Device
    MemoryInfo, Utilization, Temperature, PciInfo = MemoryInfo, Utilization, Temperature, PciInfo
    ClockInfo, NvlinkInfo, ProcessInfo = ClockInfo, NvlinkInfo, ProcessInfo
    GpuTopologyLevel, GpuP2PStatus, GpuP2PCapsIndex = GpuTopologyLevel, GpuP2PStatus, \
        GpuP2PCapsIndex
    ClocksEventReasons, ClockType = ClocksEventReasons, ClockType
    NotSupportedError, NVMLError = NotSupportedError, NVMLError
    get_num_devices = staticmethod(get_num_devices)
    get_driver_version = staticmethod(get_driver_version)
    get_user_mode_driver_version = staticmethod(get_user_mode_driver_version)
    get_kernel_mode_driver_version = staticmethod(get_kernel_mode_driver_version)
    get_nvml_version = staticmethod(get_nvml_version)
    get_topology_common_ancestor = staticmethod(get_topology_common_ancestor)
    get_p2p_status = staticmethod(get_p2p_status)
    nvml_library_path = staticmethod(nvml_library_path)

    @property
    def num_devices(self) -> int:
        return get_num_devices()

    @property
    def driver_version(self) -> tuple:
        return get_driver_version()

    @property
    def devices(self) -> tuple:
        return tuple(Device.get_all_devices())

    def __repr__(self):
        return "<cuabi.system: NVML>"


system = _System()
