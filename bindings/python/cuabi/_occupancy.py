"""Occupancy: how many blocks of a kernel fit on one SM, what limits them,
and which block size fills the SM best.

Kernel.occupancy asks the driver (live, on a device); Kernel.occupancy_for
answers the same five questions for a named architecture with no GPU (the
library's calculator, cuabi_occupancy_offline_*). Method names, argument
order and return types are cuda.core's KernelOccupancy's; report() and
reports() add what `cuabi occupancy` prints (limiter, warps, fraction).
"""
from __future__ import annotations

import ctypes as C
from collections import namedtuple
from dataclasses import dataclass

from . import _callbacks, _capi
from ._lib import call, holding, lib, new_struct, struct_to_dict, struct_to_namespace
from .errors import InvalidArgumentError, NotSupportedError, index_arg

MaxPotentialBlockSizeOccupancyResult = namedtuple("MaxPotentialBlockSizeOccupancyResult",
                                                  "min_grid_size max_block_size")
MaxPotentialBlockSizeOccupancyResult.__doc__ = (
    "What max_potential_block_size suggests: the smallest grid that fills the GPU "
    "(min_grid_size) with the block size of the highest occupancy (max_block_size).")

_SIZE_MAX = C.c_size_t(-1).value
_NO_CALLBACK = _capi.cuabi_block_smem_fn()     # NULL: ctypes refuses None for it


def arch_limits(arch: str | int) -> dict:
    """Hardware limits of an architecture ("sm_90", 90, "9.0")."""
    out = new_struct(_capi.cuabi_arch_limits)
    lib.cuabi_arch_limits_get(C.byref(out), str(arch).encode())
    d = struct_to_dict(out)
    d.pop("version", None)
    return d


def known_archs() -> list[int]:
    """Every architecture of the limits table, ascending."""
    archs, out = [], new_struct(_capi.cuabi_arch_limits)
    i = 0
    while True:
        st = lib.cuabi_arch_limits_at.ctypes_function
        try:
            st(C.byref(out), i)
        except Exception:
            return archs
        archs.append(out.arch)
        i += 1


def limiter_name(limiter: int) -> str:
    return lib.cuabi_occupancy_limiter_name(limiter).decode()


_LIMITERS = tuple((v, limiter_name(v)) for v in range(
    _capi.CUABI_OCCUPANCY_LIMIT_WARPS, _capi.CUABI_OCCUPANCY_LIMIT_BLOCK_SIZE + 1))


def block_smem_callback(fn):
    """A cuabi_block_smem_fn calling the Python `fn(block_size) -> bytes of
    dynamic shared memory`. Keep the returned object alive during the call.
    An exception (or a result that is not a size) is noted for the caller
    (_callbacks.take_exception) and the block size is answered with SIZE_MAX,
    which no block fits; later calls of the same search return SIZE_MAX at
    once instead of calling fn again."""
    if fn is None:
        return _NO_CALLBACK      # a NULL cuabi_block_smem_fn (ctypes refuses None)
    if isinstance(fn, int):
        const = fn
        fn = lambda block_size: const  # noqa: E731
    failed = []

    def thunk(block_size, payload):
        if failed:
            return _SIZE_MAX
        try:
            v = index_arg(fn(block_size), f"dynamic_shared_memory_needed({block_size})",
                          -_SIZE_MAX, _SIZE_MAX)
            if not 0 <= v < _SIZE_MAX:
                raise ValueError(f"dynamic_shared_memory_needed({block_size}) returned {v}, "
                                 "not a size in bytes")
            return v
        except BaseException as e:
            failed.append(e)
            _callbacks.note_exception(e)
            return _SIZE_MAX
    return _capi.cuabi_block_smem_fn(thunk)


_INT_MAX = 2**31 - 1


def _int(v, what: str, where: str, minimum: int = 0, maximum: int = _INT_MAX) -> int:
    """v as an int from `minimum` to `maximum` (errors.index_arg: TypeError,
    or InvalidArgumentError naming it): ctypes would wrap a negative size."""
    return index_arg(v, f"{where}: {what}", minimum, maximum)


def _smem_arg(dynamic_shared_memory_needed, where):
    """(callback or None, constant bytes) of max_potential_block_size's
    first argument: an int or a callable block_size -> bytes."""
    if callable(dynamic_shared_memory_needed):
        return block_smem_callback(dynamic_shared_memory_needed), 0
    if dynamic_shared_memory_needed is None:
        raise TypeError(f"{where}: dynamic_shared_memory_needed must be an int or a callable "
                        "block_size -> bytes, not None")
    return None, _int(dynamic_shared_memory_needed, "dynamic_shared_memory_needed", where,
                      maximum=_SIZE_MAX - 1)


def _with_callback(cb, fn, *args):
    """Run fn(*args) and raise the exception the block-size callback `cb`
    raised, if any (the C functions carry on with SIZE_MAX for that size)."""
    if cb is not None:
        _callbacks.take_exception()          # nothing stale from an earlier call
    try:
        result = fn(*args)
    except BaseException:
        exc = _callbacks.take_exception() if cb is not None else None
        if exc is not None:
            raise exc from None
        raise
    if cb is not None:
        exc = _callbacks.take_exception()
        if exc is not None:
            raise exc
    return result


def _as_config(config, where):
    """A cuabi LaunchConfig for `config`: a cuabi LaunchConfig, or an object
    with cuda.core's LaunchConfig attributes (grid, block, cluster,
    shmem_size, is_cooperative); with a
    cluster, both count the grid in clusters."""
    from ._launch import LaunchConfig, _dim3     # lazy: import time (offline use needs no launch)
    if isinstance(config, LaunchConfig):
        return config
    try:
        grid, block = _dim3(config.grid), config.block
        cluster = getattr(config, "cluster", None)
        return LaunchConfig(grid=grid, block=block, cluster=cluster,
                            shared_mem=getattr(config, "shmem_size", 0) or 0,
                            cooperative=bool(getattr(config, "is_cooperative",
                                                     getattr(config, "cooperative_launch",
                                                             False))))
    except AttributeError:
        raise TypeError(f"{where}: config must be a cuabi.LaunchConfig, not "
                        f"{type(config).__name__}") from None


def _config_copy(config):
    """A private copy of the config's C struct (another thread may be
    launching with the config itself); its attributes stay the config's."""
    return _capi.cuabi_launch_config.from_buffer_copy(config._c)


@dataclass(frozen=True)
class GridWaves:
    """How a grid of `grid_blocks` blocks runs on `sm_count` SMs (a
    device, a green context's partition, or offline a number of SMs):
    blocks_per_sm resident, blocks_per_wave of them at once, in `waves`
    waves, the last of last_wave_blocks; efficiency: the share of the block
    slots the waves use (1: no partial last wave)."""

    grid_blocks: int
    sm_count: int
    block_size: int
    blocks_per_sm: int
    blocks_per_wave: int
    waves: int
    last_wave_blocks: int
    efficiency: float
    occupancy: float
    limiter: str

    def __str__(self):
        return (f"a {self.grid_blocks:,}-block grid of {self.block_size}-thread blocks takes "
                f"{self.waves} wave{'' if self.waves == 1 else 's'} on {self.sm_count} SMs "
                f"({self.blocks_per_wave} blocks a wave, {self.last_wave_blocks} in the last)")


def _waves_from_c(w, block_size):
    return GridWaves(w.grid_blocks, w.sm_count, block_size, w.blocks_per_sm, w.blocks_per_wave,
                     w.waves, w.last_wave_blocks, w.efficiency, w.occupancy,
                     limiter_name(w.limiter))


@dataclass(frozen=True)
class OccupancyReport:
    """Occupancy of one (block size, dynamic shared memory) configuration:
    what `cuabi occupancy` prints for a block size, and why.

    limiter is the resource that limits the resident blocks ("warps",
    "registers", "shared memory", "blocks", "block size" when none fit);
    limiters every resource at its limit; limit_* the blocks per SM each
    resource alone allows (None: unlimited)."""

    block_size: int
    dynamic_shared_memory_size: int
    active_blocks_per_multiprocessor: int
    active_warps_per_multiprocessor: int
    occupancy: float
    limiter: str
    limiters: tuple
    limit_warps: int
    limit_registers: int | None
    limit_shared_memory: int | None
    limit_blocks: int
    registers_per_block: int
    shared_bytes_per_block: int
    arch: str
    live: bool

    @classmethod
    def _from_c(cls, r, block_size, smem, arch, live):
        big = 2**31 - 1
        return cls(block_size, smem, r.active_blocks_per_sm, r.active_warps_per_sm,
                   r.occupancy, limiter_name(r.limiter),
                   tuple(n for v, n in _LIMITERS if r.limiters & (1 << v)),
                   r.limit_warps, None if r.limit_registers == big else r.limit_registers,
                   None if r.limit_shared_memory == big else r.limit_shared_memory,
                   r.limit_blocks, r.registers_per_block, r.shared_bytes_per_block, arch, live)

    def __str__(self):
        return (f"block {self.block_size} on {self.arch}: "
                f"{self.active_blocks_per_multiprocessor} blocks, "
                f"{self.active_warps_per_multiprocessor} warps per SM, occupancy "
                f"{self.occupancy:.0%}, limited by {self.limiter}")


class _Occupancy:
    """The methods both kinds share: argument checks, the callback, the
    report table. Subclasses give _blocks, _best, _avail, _cluster."""

    __slots__ = ("_kernel",)

    def max_active_blocks_per_multiprocessor(self, block_size: int,
                                             dynamic_shared_memory_size: int) -> int:
        """Resident blocks per SM for a block size and dynamic shared
        memory per block (bytes; 0 when the kernel needs none)."""
        return self._report(block_size, dynamic_shared_memory_size,
                            "max_active_blocks_per_multiprocessor") \
            .active_blocks_per_multiprocessor

    def report(self, block_size: int, dynamic_shared_memory_size: int = 0) -> OccupancyReport:
        """The resident blocks and warps per SM, the occupancy (0..1) and
        the resource that limits them, for one configuration."""
        return self._report(block_size, dynamic_shared_memory_size, "report")

    def _report(self, block_size, dynamic_shared_memory_size, method):
        where = f"{type(self).__name__}.{method}"
        block_size = _int(block_size, "block_size", where, 1)
        smem = _int(dynamic_shared_memory_size, "dynamic_shared_memory_size", where,
                    maximum=_SIZE_MAX - 1)
        r = new_struct(_capi.cuabi_occupancy_result)
        self._blocks(r, block_size, smem)
        return OccupancyReport._from_c(r, block_size, smem, self._arch_name(), self._live)

    def reports(self, dynamic_shared_memory_size: int = 0) -> list[OccupancyReport]:
        """report() for every block size `cuabi occupancy` shows: multiples
        of 32 up to what the kernel and the architecture allow."""
        top = self._max_block()
        return [self.report(b, dynamic_shared_memory_size) for b in range(32, top + 1, 32)]

    def max_potential_block_size(self, dynamic_shared_memory_needed,
                                 block_size_limit: int) -> MaxPotentialBlockSizeOccupancyResult:
        """The block size of the highest occupancy and the smallest grid that
        fills the GPU with it. dynamic_shared_memory_needed: bytes per block
        (an int), or a callable block_size -> bytes (an exception it raises
        is raised here); block_size_limit: the largest block size to
        consider, 0 for the kernel's and the device's limit."""
        where = f"{type(self).__name__}.max_potential_block_size"
        cb, smem = _smem_arg(dynamic_shared_memory_needed, where)
        limit = _int(block_size_limit, "block_size_limit", where)
        block, grid = _with_callback(cb, self._best, cb, smem, limit)
        return MaxPotentialBlockSizeOccupancyResult(grid, block)

    def available_dynamic_shared_memory_per_block(self, num_blocks_per_multiprocessor: int,
                                                  block_size: int) -> int:
        """Dynamic shared memory per block (bytes) left when
        num_blocks_per_multiprocessor blocks of block_size threads are
        resident on one SM."""
        where = f"{type(self).__name__}.available_dynamic_shared_memory_per_block"
        return self._avail(_int(num_blocks_per_multiprocessor, "num_blocks_per_multiprocessor",
                                where, 1), _int(block_size, "block_size", where, 1))

    def waves(self, grid_blocks: int, block_size: int,
              dynamic_shared_memory_size: int = 0) -> GridWaves:
        """The waves a grid of grid_blocks blocks of block_size threads takes
        on this object's SMs (the device's, the green context's partition,
        or the offline sm_count): LaunchConfigError when no block fits."""
        where = f"{type(self).__name__}.waves"
        grid = _int(grid_blocks, "grid_blocks", where, 1, 2**64 - 1)
        block_size = _int(block_size, "block_size", where, 1)
        smem = _int(dynamic_shared_memory_size, "dynamic_shared_memory_size", where,
                    maximum=_SIZE_MAX - 1)
        w = new_struct(_capi.cuabi_grid_waves)
        self._waves(w, grid, block_size, smem)
        return _waves_from_c(w, block_size)

    def max_potential_cluster_size(self, config, stream=None) -> int:
        """The largest cluster size (blocks) that can be resident for the
        configuration (its cluster dimensions are ignored), on the stream's
        device (or this object's)."""
        return self._cluster(False, config, stream, "max_potential_cluster_size")

    def max_active_clusters(self, config, stream=None) -> int:
        """How many clusters of the configuration's cluster size can be
        resident at once on the stream's device (or this object's)."""
        return self._cluster(True, config, stream, "max_active_clusters")


class KernelOccupancy(_Occupancy):
    """Live occupancy of a kernel on one device (cuda.core's
    KernelOccupancy): the driver's answers (cuOccupancy*). kernel.occupancy
    is on device 0 (where cuabi kernels run without a stream);
    kernel.occupancy[device] or kernel.occupancy_on(device) on another.
    Given a green context (cuabi.Context), the driver answers in it: per SM
    as for the device, the min grid size and waves for its partition."""

    __slots__ = ("_device", "_green")
    _live = True

    def __init__(self, kernel, device=None):
        from ._core import _as_device        # lazy: import time (offline use needs no device)
        self._kernel = kernel
        self._green = device if getattr(device, "_ctype", None) == "cuabi_green_ctx" else None
        self._device = device.device if self._green is not None else _as_device(device)

    def __getitem__(self, device) -> "KernelOccupancy":
        return KernelOccupancy(self._kernel, device)

    @property
    def device(self):
        return self._device

    @property
    def green_context(self):
        """The green context the answers are for, or None (the whole device)."""
        return self._green

    def __repr__(self):
        where = f"device {self._device.ordinal}"
        if self._green is not None:
            where = f"a green context of {self._green.sm_count} SMs of {where}"
        return f"<cuabi.KernelOccupancy of {self._kernel!r} on {where}>"

    def _arch_name(self):
        return self._device.sm_arch

    def _max_block(self):
        # As `cuabi occupancy` (and the offline object): the device's limit
        # and the kernel's launch bounds, not the driver's register-bound
        # CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK (those rows show "registers").
        top = self._device.attribute(1)       # CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
        mine = self._kernel.resources.max_threads_per_block
        return min(top, mine) if mine > 0 else top

    def _blocks(self, r, block_size, smem):
        if self._green is not None:
            lib.cuabi_occupancy_green_max_active_blocks(C.byref(r), self._kernel, self._green,
                                                        block_size, smem)
            return
        lib.cuabi_occupancy_max_active_blocks(C.byref(r), self._kernel, self._device,
                                              block_size, smem)

    def _best(self, cb, smem, limit):
        if self._green is not None:
            return call("cuabi_occupancy_green_max_potential_block_size", self._kernel,
                        self._green, _NO_CALLBACK if cb is None else cb, None, smem, limit)
        return call("cuabi_occupancy_max_potential_block_size", self._kernel, self._device,
                    _NO_CALLBACK if cb is None else cb, None, smem, limit)

    def _waves(self, w, grid, block_size, smem):
        if self._green is not None:
            lib.cuabi_occupancy_green_waves(C.byref(w), self._kernel, self._green, block_size,
                                            smem, grid)
            return
        lib.cuabi_occupancy_waves(C.byref(w), self._kernel, self._device, block_size, smem, grid)

    def _avail(self, num_blocks, block_size):
        return call("cuabi_occupancy_available_dynamic_smem", self._kernel, self._device,
                    num_blocks, block_size)

    def _cluster(self, active, config, stream, what):
        config = _as_config(config, f"KernelOccupancy.{what}")
        c = _config_copy(config)
        s = None
        if stream is not None:          # its device answers
            from ._core import Stream       # lazy: import time
            s = Stream.wrap(stream, self._device)
        name = "cuabi_occupancy_max_active_clusters" if active else \
            "cuabi_occupancy_max_potential_cluster_size"
        # The handles the struct names are in use until the call is done.
        with holding(s, self._device, *config._held) as (sh, dh, *_):
            c.stream, c.device = sh, dh
            return call(name, self._kernel, C.byref(c))


class OfflineOccupancy(_Occupancy):
    """Occupancy of a kernel on a named architecture, without a GPU (the
    library's calculator: cuabi_occupancy_offline_*, the rules of the
    toolkit's cuda_occupancy.h). Same methods as KernelOccupancy; cluster
    answers are estimates (they depend on how a GPU groups its SMs)."""

    __slots__ = ("arch", "resources", "_res", "_opts", "_limits")
    _live = False

    def __init__(self, kernel, arch, sm_count=None, max_dynamic_shared=None, carveout=None):
        # sm_count: the SMs of the GPU, or of a partition (a green context's
        # SMs): min grid sizes and waves are for that many.
        self._kernel = kernel
        self.arch = arch = _arch_text(arch)
        self._limits = arch_limits(arch)           # an unknown architecture raises here
        self._res = _offline_resources(kernel, arch)
        self.resources = struct_to_namespace(self._res)
        where = "Kernel.occupancy_for"
        o = new_struct(_capi.cuabi_occupancy_options)
        if sm_count is not None:
            o.sm_count = _int(sm_count, "sm_count", where, 1)
        if max_dynamic_shared is not None:
            o.max_dynamic_shared_bytes = _int(max_dynamic_shared, "max_dynamic_shared", where,
                                              maximum=2**63 - 1)
        if carveout is not None:
            o.carveout = _int(carveout, "carveout", where, -1, 100)
        self._opts = o

    def __repr__(self):
        return f"<cuabi.OfflineOccupancy of {self._kernel!r} for {self.arch}>"

    @property
    def limits(self) -> dict:
        """The architecture's limits (cuabi.arch_limits)."""
        return dict(self._limits)

    def _arch_name(self):
        return self.arch

    def _max_block(self):
        top = self._limits["max_threads_per_block"]
        mine = self._res.max_threads_per_block
        return min(top, mine) if mine > 0 else top

    def _args(self):
        return self.arch.encode(), C.byref(self._res)

    def _blocks(self, r, block_size, smem):
        lib.cuabi_occupancy_offline_max_active_blocks(C.byref(r), *self._args(), block_size,
                                                      smem, C.byref(self._opts))

    def _best(self, cb, smem, limit):
        return call("cuabi_occupancy_offline_max_potential_block_size", *self._args(),
                    _NO_CALLBACK if cb is None else cb, None, smem, limit, C.byref(self._opts))

    def _avail(self, num_blocks, block_size):
        return call("cuabi_occupancy_offline_available_dynamic_smem", *self._args(), num_blocks,
                    block_size, C.byref(self._opts))

    def _waves(self, w, grid, block_size, smem):
        # sm_count 0: the options' sm_count, else the architecture's example GPU
        lib.cuabi_occupancy_offline_waves(C.byref(w), *self._args(), 0, block_size, smem, grid,
                                          C.byref(self._opts))

    def _cluster(self, active, config, stream, what):
        # stream names a device for the live question; offline there is none.
        c = _config_copy(_as_config(config, f"OfflineOccupancy.{what}"))
        c.stream = c.device = None
        name = "cuabi_occupancy_offline_max_active_clusters" if active else \
            "cuabi_occupancy_offline_max_potential_cluster_size"
        return call(name, *self._args(), C.byref(c), C.byref(self._opts))


def _arch_text(arch) -> str:
    """ "sm_90" for "sm_90", 90, "90", "9.0", "compute_90" (the C functions
    take any of them; the report shows one spelling)."""
    if isinstance(arch, int):
        return f"sm_{arch}"
    if not isinstance(arch, str):
        raise TypeError(f"Kernel.occupancy_for: arch must be a str like 'sm_90' or an int, "
                        f"not {type(arch).__name__}")
    if arch[:1].isdigit() and "." not in arch:     # cuda.core's Device.arch: "90", "90a"
        return "sm_" + arch
    return arch


def _offline_resources(kernel, arch):
    """The kernel's cuabi_kernel_resources for `arch`. A PTX or LTO-IR image
    is compiled once per architecture: the library keeps the first, so
    another architecture is read from a fresh copy of the image."""
    code = kernel.objcode
    r = new_struct(_capi.cuabi_kernel_resources)
    try:
        lib.cuabi_objcode_kernel_resources(C.byref(r), code, kernel.name.encode(), arch.encode())
    except NotSupportedError:
        if code.code_type not in ("ptx", "ltoir"):
            raise
        # The kernel's ObjectCode class (cuabi._compile, the layer above).
        with type(code).from_bytes(bytes(code), code.code_type, name=f"<{arch}>") as fresh:
            lib.cuabi_objcode_kernel_resources(C.byref(r), fresh, kernel.name.encode(),
                                               arch.encode())
    return r

