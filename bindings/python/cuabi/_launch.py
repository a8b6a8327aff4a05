"""Launching kernels: LaunchConfig, launch(), prepared launches."""
from __future__ import annotations

import ctypes as C
import weakref

from . import _capi, _lib
from functools import partial
from operator import attrgetter, methodcaller

from ._argpack import ArgPack, Packer, device_pointer, is_array_like, is_scalar
from ._core import Stream, _as_device
from ._handle import Handle
from ._lib import call, done, fast, holding, hot, lib, new_struct, raise_last, use
from .errors import ClosedHandleError, INT_MAX, INT_MIN, U32_MAX, dims_arg, index_arg


def _dim3(v, name="dims", lo=0):
    """Up to three unsigned ints (the C fields are unsigned int) from `lo`
    up, the rest 1."""
    if not hasattr(v, "__len__"):
        return (index_arg(v, name, lo, U32_MAX), 1, 1)
    v = dims_arg(v, name, lo, U32_MAX, max_length=3)
    return v + (1,) * (3 - len(v))


_SCHEDULING = {"default": _capi.CUABI_CLUSTER_SCHEDULING_DEFAULT,
               "spread": _capi.CUABI_CLUSTER_SCHEDULING_SPREAD,
               "load_balancing": _capi.CUABI_CLUSTER_SCHEDULING_LOAD_BALANCING}
_ACCESS = {"normal": _capi.CUABI_ACCESS_PROPERTY_NORMAL,
           "streaming": _capi.CUABI_ACCESS_PROPERTY_STREAMING,
           "persisting": _capi.CUABI_ACCESS_PROPERTY_PERSISTING}
_DOMAIN = {"default": _capi.CUABI_MEM_SYNC_DOMAIN_DEFAULT,
           "remote": _capi.CUABI_MEM_SYNC_DOMAIN_REMOTE}
_UNSET = _capi.CUABI_LAUNCH_UNSET


def _named(table, what, v) -> int:
    """A C enum value from a name of `table` or the number itself."""
    if isinstance(v, str):
        try:
            return table[v.lower()]
        except KeyError:
            raise ValueError(f"{what} must be one of {', '.join(table)}, not {v!r}") from None
    return int(v)


class AccessPolicyWindow:
    """An L2 access-policy window for a launch (CUaccessPolicyWindow):
    `num_bytes` from `base` (an address, or a Buffer, View or array whose
    data it starts at); `hit_ratio` of its lines get `hit_prop`, the others
    `miss_prop` ("normal", "streaming" or "persisting"; misses may not
    persist)."""

    __slots__ = ("base", "num_bytes", "hit_ratio", "hit_prop", "miss_prop")

    def __init__(self, base, num_bytes: int, hit_ratio: float = 1.0,
                 hit_prop="persisting", miss_prop="streaming"):
        self.base = index_arg(base if isinstance(base, int) else device_pointer(base),
                              "AccessPolicyWindow: base")
        self.num_bytes = index_arg(num_bytes, "AccessPolicyWindow: num_bytes")
        self.hit_ratio = float(hit_ratio)
        self.hit_prop = _named(_ACCESS, "hit_prop", hit_prop)
        self.miss_prop = _named(_ACCESS, "miss_prop", miss_prop)

    def __repr__(self):
        return (f"AccessPolicyWindow(base={self.base:#x}, num_bytes={self.num_bytes}, "
                f"hit_ratio={self.hit_ratio})")


class LaunchConfig:
    """cuda.core's LaunchConfig(grid, cluster, block, shmem_size,
    is_cooperative, programmatic_stream_serialization), in cuda.core's order: grid, cluster and block are
    ints or up to 3-tuples (each value at least 1), exposed as 3-tuples
    (cluster None when not given); with a cluster, `grid` counts clusters
    (the kernel runs grid*cluster blocks). grid and block default to 1
    (cuda.core requires them). cuabi's extras are keywords only:
    shared_mem= (= shmem_size), cooperative= and cooperative_launch= (=
    is_cooperative), grid_blocks= (the grid in blocks with a cluster:
    cuabi's former meaning of grid), and the other cuLaunchKernelEx
    attributes (cuda.core's names where it has them; docs/python.md):
    programmatic_event (+
    programmatic_event_trigger_at_block_start), launch_completion_event,
    priority, access_policy_window, preferred_cluster,
    cluster_scheduling_policy, mem_sync_domain, mem_sync_domain_map,
    preferred_shared_memory_carveout, nvlink_util_centric_scheduling.
    The C structs are built once and reused; the config keeps its events
    alive."""

    __slots__ = ("grid", "block", "cluster", "shared_mem", "cooperative", "_c", "_p",
                 "programmatic_stream_serialization", "programmatic_event",
                 "programmatic_event_trigger_at_block_start", "launch_completion_event",
                 "priority", "access_policy_window", "preferred_cluster",
                 "cluster_scheduling_policy", "mem_sync_domain", "mem_sync_domain_map",
                 "preferred_shared_memory_carveout", "nvlink_util_centric_scheduling", "_a",
                 "_addr", "_held", "grid_blocks")
    # _c: the C struct; _addr: its address, which the compiled launch reads
    # (whatever else LaunchConfig grows, both must name the struct in use).
    # _held: the Events the attributes name (their handles are in _a), in
    # use during every launch with the config (a tuple; the compiled launch
    # reads it too).

    def __init__(self, grid=None, cluster=None, block=None, shmem_size: int | None = None,
                 is_cooperative: bool = False,
                 programmatic_stream_serialization: bool = False, *,
                 shared_mem: int | None = None,
                 cooperative: bool | None = None,
                 cooperative_launch: bool | None = None,
                 grid_blocks=None,
                 programmatic_event=None,
                 programmatic_event_trigger_at_block_start: bool = False,
                 launch_completion_event=None,
                 priority: int | None = None,
                 access_policy_window: AccessPolicyWindow | None = None,
                 preferred_cluster=None,
                 cluster_scheduling_policy="default",
                 mem_sync_domain=None,
                 mem_sync_domain_map=None,
                 preferred_shared_memory_carveout: int | None = None,
                 nvlink_util_centric_scheduling: bool = False):
        if shmem_size is not None and shared_mem is not None:
            raise ValueError("LaunchConfig: give shmem_size or shared_mem (its cuabi alias), "
                             "not both")
        shared_mem = shmem_size if shmem_size is not None else shared_mem or 0
        # is_cooperative (cuda.core's), cooperative and cooperative_launch
        # (cuabi's): one switch, said once or alike.
        said = {n: bool(v) for n, v in (("is_cooperative", is_cooperative),
                                        ("cooperative_launch", cooperative_launch),
                                        ("cooperative", cooperative))
                if v is not None and (v or n != "is_cooperative")}
        if len(set(said.values())) > 1:
            raise ValueError(f"LaunchConfig: {' and '.join(said)} disagree; give one of them")
        cooperative = any(said.values())
        self.block = _dim3(1 if block is None else block, "LaunchConfig.block", 1)
        self.cluster = _dim3(cluster, "LaunchConfig.cluster", 1) if cluster is not None else None
        cl = self.cluster or (0, 0, 0)
        if grid_blocks is not None:
            if grid is not None:
                raise ValueError("LaunchConfig: give grid (clusters with a cluster) or "
                                 "grid_blocks, not both")
            blocks = _dim3(grid_blocks, "LaunchConfig.grid_blocks", 1)
            if self.cluster:
                if any(b % c for b, c in zip(blocks, self.cluster)):
                    raise ValueError(f"LaunchConfig: grid_blocks {blocks} is not a multiple "
                                     f"of the cluster {self.cluster}")
                self.grid = tuple(b // c for b, c in zip(blocks, self.cluster))
            else:
                self.grid = blocks
        else:
            self.grid = _dim3(1 if grid is None else grid, "LaunchConfig.grid", 1)
            blocks = self.grid
            if self.cluster:        # cuda.core: the grid counts clusters
                blocks = tuple(g * c for g, c in zip(self.grid, self.cluster))
                index_arg(max(blocks), "LaunchConfig: grid blocks (grid * cluster)", 0,
                          0xFFFFFFFF)
        self.grid_blocks = blocks
        shared_mem = index_arg(shared_mem, "LaunchConfig.shmem_size" if shmem_size is not None
                               else "LaunchConfig: shared_mem")
        self.shared_mem, self.cooperative = shared_mem, cooperative
        c = new_struct(_capi.cuabi_launch_config)
        c.grid[:], c.block[:], c.cluster[:] = blocks, self.block, cl
        c.dynamic_shared_bytes, c.cooperative = shared_mem, int(cooperative)
        self._c = c
        self._addr = C.addressof(c)
        self._p = _ptr(self._addr)
        self.programmatic_stream_serialization = bool(programmatic_stream_serialization)
        self.programmatic_event = programmatic_event
        self.programmatic_event_trigger_at_block_start = bool(
            programmatic_event_trigger_at_block_start)
        self.launch_completion_event = launch_completion_event
        self.priority = priority
        self.access_policy_window = access_policy_window
        self.preferred_cluster = (_dim3(preferred_cluster, "LaunchConfig.preferred_cluster")
                                  if preferred_cluster else None)
        self.cluster_scheduling_policy = cluster_scheduling_policy
        self.mem_sync_domain = mem_sync_domain
        self.mem_sync_domain_map = (tuple(mem_sync_domain_map)
                                    if mem_sync_domain_map is not None else None)
        self.preferred_shared_memory_carveout = preferred_shared_memory_carveout
        self.nvlink_util_centric_scheduling = bool(nvlink_util_centric_scheduling)
        self._held = ()
        self._a = self._attributes()
        if self._a is not None:
            c.attributes = C.pointer(self._a)

    def _attributes(self):
        """The cuabi_launch_attributes of the keywords, or None when every
        one is at its default (the launch then takes the plain path)."""
        a = new_struct(_capi.cuabi_launch_attributes)
        used = False
        if self.preferred_cluster:
            a.preferred_cluster[:] = self.preferred_cluster
            used = True
        policy = _named(_SCHEDULING, "cluster_scheduling_policy", self.cluster_scheduling_policy)
        if policy != _capi.CUABI_CLUSTER_SCHEDULING_DEFAULT:
            a.cluster_scheduling_policy, used = policy, True
        if self.programmatic_stream_serialization:
            a.programmatic_stream_serialization, used = 1, True
        for name in ("programmatic_event", "launch_completion_event"):
            ev = getattr(self, name)
            if ev is not None:
                setattr(a, name, ev.cuabi_handle)
                self._held += (ev,)
                used = True
        a.programmatic_event_trigger_at_block_start = int(
            self.programmatic_event_trigger_at_block_start)
        if self.priority is not None:
            a.priority = index_arg(self.priority, "LaunchConfig: priority", INT_MIN, INT_MAX)
            used = True
        w = self.access_policy_window
        if w is not None:
            a.access_policy_base, a.access_policy_bytes = w.base, w.num_bytes
            a.access_policy_hit_ratio = w.hit_ratio
            a.access_policy_hit_property, a.access_policy_miss_property = w.hit_prop, w.miss_prop
            used = True
        if self.mem_sync_domain is not None:
            a.mem_sync_domain = _named(_DOMAIN, "mem_sync_domain", self.mem_sync_domain)
            used = True
        if self.mem_sync_domain_map is not None:
            if len(self.mem_sync_domain_map) != 2:
                raise ValueError("mem_sync_domain_map is (default_domain_id, remote_domain_id)")
            a.mem_sync_domain_map[:] = dims_arg(self.mem_sync_domain_map,
                                                "LaunchConfig: mem_sync_domain_map",
                                                INT_MIN, INT_MAX)
            used = True
        if self.preferred_shared_memory_carveout is not None:
            a.preferred_shared_memory_carveout = index_arg(
                self.preferred_shared_memory_carveout,
                "LaunchConfig: preferred_shared_memory_carveout", INT_MIN, INT_MAX)
            used = True
        if self.nvlink_util_centric_scheduling:
            a.nvlink_util_centric_scheduling, used = 1, True
        return a if used else None

    def _for(self, stream, h):
        """A copy of the C struct for `stream`, whose handle is h (the
        caller holds the stream in use); the copy leaves the shared struct
        alone for other threads."""
        c = _capi.cuabi_launch_config.from_buffer_copy(self._c)
        c.stream = h
        return c

    @property
    def shmem_size(self) -> int:
        """cuda.core's name of shared_mem."""
        return self.shared_mem

    @property
    def is_cooperative(self) -> bool:
        """cuda.core's name of cooperative."""
        return self.cooperative

    cooperative_launch = is_cooperative     # cuabi's other spelling

    # cuda.core's identity: the attributes it has (grid, cluster, block,
    # shmem_size, is_cooperative, programmatic_stream_serialization);
    # cuabi's launch attributes join them.
    _IDENTITY = ("grid", "cluster", "block", "shmem_size", "is_cooperative",
                 "programmatic_stream_serialization")
    _EXTRAS = ("programmatic_event",
               "programmatic_event_trigger_at_block_start", "launch_completion_event",
               "priority", "access_policy_window", "preferred_cluster",
               "cluster_scheduling_policy", "mem_sync_domain", "mem_sync_domain_map",
               "preferred_shared_memory_carveout", "nvlink_util_centric_scheduling")

    def _identity(self):
        return tuple(getattr(self, n) for n in self._IDENTITY) + tuple(
            id(v) if n.endswith("event") or n == "access_policy_window" else v
            for n in self._EXTRAS for v in (getattr(self, n),))

    def __eq__(self, other):
        if not isinstance(other, LaunchConfig):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self):
        return hash(self._identity())

    def __repr__(self):
        extra = "".join(f", {n}={getattr(self, n)!r}" for n in self._EXTRAS
                        if getattr(self, n) not in (None, False, "default"))
        core = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._IDENTITY)
        return f"LaunchConfig({core}{extra})"


_launch, _ptr = hot("cuabi_launch")
_memmove = C.memmove
_CONFIG_SIZE = C.sizeof(_capi.cuabi_launch_config)

# Captures begun from Python in progress (_callbacks.captures): a launch
# during one keeps its arguments with the graph (both backends: the compiled
# launch calls _keep_for_captures too).
from ._callbacks import captures as _captures, keep_for_captures as _keep_for_captures  # noqa: E402
_prepared_launch, _ = hot("cuabi_prepared_launch")

class _PlainLaunch(Packer):
    """Per kernel: one pack made for it (typed slots from its name or PTX,
    cuabi_argpack_create_for_kernel), packed in place
    (cuabi_argpack_blob_pointer) by the Packer's per-argument-types
    functions, so a plain launch is Python packing plus one C call."""

    __slots__ = ("argpack", "k", "p", "cfg", "cfg_addr", "cfg_p")

    def __init__(self, kernel, like: "_PlainLaunch | None" = None):
        """like: the kernel's first _PlainLaunch, for another pack of it (a
        thread's): its parameter description is taken over instead of read
        from the library again, which costs more than the pack itself."""
        if kernel._h is None:
            kernel.cuabi_handle   # raises ClosedHandleError, as every path does
        if like is None:
            self.argpack = ArgPack.for_kernel(kernel)
        else:
            self.argpack = ArgPack._for_kernel_like(kernel, like.argpack)
        src = self.argpack._packer
        mem = (C.c_char * max(src.size, 1)).from_address(
            call("cuabi_argpack_blob_pointer", self.argpack))
        Packer.__init__(self, target=mem, **src._layout())
        # The kernel's and pack's handles, made once: launch_py holds the
        # kernel in use around each launch; the pack is this object's own.
        self.k, self.p = _ptr(kernel.cuabi_handle), _ptr(self.argpack.cuabi_handle)
        self.cfg = _capi.cuabi_launch_config()      # launch_py's private copy
        self.cfg_addr = C.addressof(self.cfg)
        self.cfg_p = _ptr(self.cfg_addr)

    def pack_args(self, *args) -> None:
        """Pack with the packer for these argument types (Packer.pack is
        replaced by the last one built: look it up at each call)."""
        self.pack(*args)

    def lane(self):
        """What the compiled launch packs into: (pack handle, blob address,
        packer for what it leaves to Python, owner)."""
        return self.argpack.cuabi_handle, C.addressof(self.blob), self.pack_args, self


def _plain(kernel) -> _PlainLaunch:
    """The kernel's own plain launch (graphs pack node arguments with it),
    made with the compiled launch's entry: both or neither. The compiled
    launch calls this at a kernel's first launch."""
    cache = kernel._launch_cache
    pl = cache.get("plain")
    if pl is None:
        with holding(kernel) as (h,):
            pl = _PlainLaunch(kernel)
            if fast is not None:
                cache["fast"] = fast.PlainLaunch(h, tuple(pl.slots), _lanes(kernel, pl))
        cache["plain"] = pl
    return pl


def _lanes(kernel, first: _PlainLaunch):
    """The compiled launch's packs for `kernel`: one per thread launching it
    at the same time (the compiled launch marks them busy; launch_py keeps
    its own, see _py_lane), described as `first` is."""
    made = kernel._launch_cache.setdefault("lanes", [])    # tests look at them

    def new_lane():
        pl = _PlainLaunch(kernel, like=first)
        made.append(pl)
        return pl.lane()
    return new_lane


def _py_lane(kernel) -> _PlainLaunch:
    """A pack for one launch_py call, taken from the kernel's free list (list
    pop and append are atomic): a launch releases the GIL in the driver
    call, so two threads must never pack into the same pack (GPU run C: a
    thread's launch went out with another's arguments)."""
    cache = kernel._launch_cache
    free = cache.get("free")
    if free is None:
        free = cache.setdefault("free", [_plain(kernel)])
    try:
        return free.pop()
    except IndexError:
        return _PlainLaunch(kernel, like=_plain(kernel))


def _launch_failed(status: int, kernel) -> None:
    """Raise for a failed cuabi_launch, as launch() does."""
    if kernel._h is None:
        kernel.cuabi_handle
    raise_last(status, "cuabi_launch")


def launch_py(stream, config: LaunchConfig, kernel, *args) -> None:
    """Launch `kernel(*args)` on `stream`: a cuabi Stream, a foreign stream,
    or None for the legacy default stream of the current device (the device
    whose context is current on this thread, else the first the kernel was
    loaded on, else device 0). Arguments are packed in Python straight into
    the kernel's pack, typed as the kernel's name or PTX says (docs/launch.md
    lists what each parameter kind takes); then one call into C. (The
    compiled cuabi._fast.launch packs in C and leaves the rest to this.)"""
    try:
        pl = _py_lane(kernel)
    except AttributeError:
        if hasattr(kernel, "_launch_cache"):
            raise
        raise TypeError(f"launch: kernel must be a cuabi.Kernel, not "
                        f"{type(kernel).__name__}") from None
    try:
        pl.pack(*args)
        try:
            c = config._c
        except AttributeError:
            raise TypeError(f"launch: config must be a cuabi.LaunchConfig, not "
                            f"{type(config).__name__}") from None
        if stream is not None and type(stream) is not Stream:
            stream = stream if isinstance(stream, Stream) else Stream.wrap(stream)
        # The config's C struct is shared by threads: launch the lane's copy.
        _memmove(pl.cfg_addr, config._addr, _CONFIG_SIZE)
        # The stream, the kernel and the config's events are in use until the
        # launch returns (a close() on another thread leaves the release to
        # us); a closed one raises ClosedHandleError.
        pl.cfg.stream = None if stream is None else use(stream)
        try:
            use(kernel)
            try:
                if config._held:
                    with holding(*config._held):
                        st = _launch(pl.k, pl.p, pl.cfg_p)
                else:
                    st = _launch(pl.k, pl.p, pl.cfg_p)
            finally:
                done(kernel)
        finally:
            if stream is not None:
                done(stream)
    finally:
        kernel._launch_cache["free"].append(pl)
    if st:
        _launch_failed(st, kernel)
    if _captures:
        _keep_for_captures(args)


class PreparedLaunch(Handle):
    """A kernel, its arguments and its configuration bound once: calling it
    crosses into C once with one argument. set(*args) changes the arguments.
    `raw_launch()` is the foreign function itself, bound to the handle: it
    returns the status (0 on success) instead of raising, for tight loops."""

    _ctype = "cuabi_prepared"
    # _pack: its ArgPack, whose Buffers and Views (ArgPack._held) are in use
    # during each launch too (the compiled launch reads the slot).
    __slots__ = ("_pack", "__dict__")

    def __init__(self, kernel, config: LaunchConfig, stream=None, *args, pack=None):
        if stream is not None and not isinstance(stream, Stream):
            stream = Stream.wrap(stream)
        self._pack = pack if pack is not None else ArgPack.for_kernel(kernel)
        if args:
            self._pack.set(*args)
        self._stream = stream
        with holding(stream, *config._held) as (sh, *_):
            Handle.__init__(self, call("cuabi_prepared_create", kernel, self._pack,
                                       C.byref(config._for(stream, sh))))
        self._arg = _ptr(self._h)
        # The launch bound to this object, weakly (a strong reference would
        # make a cycle): the status of a closed one is INVALID_HANDLE.
        self.raw_launch = (fast.BoundPrepared(self) if fast is not None
                           else partial(_raw_launch, weakref.ref(self)))

    def __call__(self) -> None:
        # The ctypes backend's (the compiled one is C): in use while it runs,
        # so that a close() elsewhere leaves the release to it -- use() and
        # done() of cuabi._lib, inline on this hot path.
        u = self._uses
        u.append(None)
        try:
            if self._h is None:
                raise ClosedHandleError("PreparedLaunch is closed")
            held = getattr(self._pack, "_held", None)
            if held:
                with holding(*held):
                    st = _prepared_launch(self._arg)
            else:
                st = _prepared_launch(self._arg)
        finally:
            u.pop()
            if not u and self._h is None:
                _lib._finish(self)
        if st:
            raise_last(st, "cuabi_prepared_launch")

    launch = __call__

    def set(self, *args) -> "PreparedLaunch":
        self._pack.set(*args)
        return self

    def set_grid(self, grid) -> None:
        lib.cuabi_prepared_set_grid(self, *_dim3(grid, "set_grid: grid"))



def _raw_launch(ref) -> int:
    """PreparedLaunch.raw_launch of the ctypes backend: the status, never
    raising."""
    prep = ref()
    if prep is None:
        return _capi.CUABI_ERROR_INVALID_HANDLE
    u = prep._uses          # use() and done(), inline as in __call__
    u.append(None)
    try:
        if prep._h is None:
            return _capi.CUABI_ERROR_INVALID_HANDLE
        held = getattr(prep._pack, "_held", None)
        if not held:
            return _prepared_launch(prep._arg)
        with holding(*held):
            return _prepared_launch(prep._arg)
    except Exception:       # a Buffer or View of the pack closed
        return _capi.CUABI_ERROR_INVALID_HANDLE
    finally:
        u.pop()
        if not u and prep._h is None:
            _lib._finish(prep)


def prepare(kernel, config: LaunchConfig, stream=None, *args) -> PreparedLaunch:
    return PreparedLaunch(kernel, config, stream, *args)


def _pointer_getter(t):
    """The fastest address getter for arguments of array-like type t."""
    if getattr(t, "_cuabi_pointer_", False):
        return attrgetter("ptr")
    if callable(getattr(t, "data_ptr", None)) and not hasattr(t, "__cuda_array_interface__"):
        return methodcaller("data_ptr")
    return device_pointer


def _arg_class(v):
    """How the compiled packer reads arguments of type(v) (asked once per
    type): (class, item size, address getter) with the classes of
    fast_pack.c. Arrays: their address, by the getter launch() uses; numpy
    scalars: their value, read from the object once its layout is checked
    here; anything else: the Python packer's."""
    t = type(v)
    if is_array_like(v):
        # lazy: import time (launches without Buffers or Views load neither)
        from ._memory import Buffer
        from ._view import View
        cls = (fast.ARG_VIEW if t is View else fast.ARG_BUFFER if t is Buffer
               else fast.ARG_POINTER)
        return cls, 8, _pointer_getter(t)
    dt = getattr(v, "dtype", None)
    if dt is not None and t.__module__ == "numpy" and is_scalar(v) and _scalar_layout_holds(v):
        cls = {"i": fast.ARG_NP_INT, "u": fast.ARG_NP_UINT, "f": fast.ARG_NP_FLOAT,
               "b": fast.ARG_NP_BOOL}.get(dt.kind)
        if cls is not None and dt.itemsize in (1, 2, 4, 8) and dt.isnative:
            return cls, dt.itemsize, None
    return fast.ARG_UNKNOWN, 0, None


_SCALAR_VALUE_OFFSET = object.__basicsize__   # numpy scalars: the value after the header


def _scalar_layout_holds(v) -> bool:
    """A numpy scalar type keeps its value right after the object header
    (numpy's Py<Type>ScalarObject): checked on two values of the type."""
    t = type(v)
    try:
        probes = (t(1), t(0))
        return all(C.string_at(id(p) + _SCALAR_VALUE_OFFSET, p.dtype.itemsize) == p.tobytes()
                   for p in probes + (v,))
    except Exception:
        return False


if fast is not None:
    # The compiled backend: launch() and PreparedLaunch.__call__ in C, with
    # launch_py as the path for everything they leave to Python.
    PreparedLaunch.__call__ = PreparedLaunch.launch = fast.launch_setup(
        Stream, LaunchConfig, PreparedLaunch, launch_py, _launch_failed, _captures,
        _keep_for_captures, _plain, ArgPack)
    fast.pack_setup(_arg_class, _SCALAR_VALUE_OFFSET)
    launch = fast.launch
else:
    launch = launch_py
