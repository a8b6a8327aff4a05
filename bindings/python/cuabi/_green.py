"""Green contexts: a device's SMs (Device.resources.sm), split into groups
(SMResource.split), and contexts made of groups (Device.create_context with
ContextOptions(resources=[...])) whose streams (Context.create_stream) run
on those SMs only -- cuda.core's names (docs/green-contexts.md).

cuda.core's SMResourceOptions follow the CUDA 13.1 split
(cuDevSmResourceSplit); cuabi splits with the CUDA 12.4+ one
(cuDevSmResourceSplitByCount), which makes groups of one size: `count` is
the fewest SMs a group may have (the driver rounds it up to its partition
size and alignment; a sequence asks for that many groups, all of one size),
`backfill=True` relaxes co-scheduling (finer groups). The co-scheduled SM
counts of 13.1 are refused (NotSupportedError). Workqueue configurations
(DeviceResources.workqueue, WorkqueueResource, CUDA 13.1 drivers) are
cuda.core's.

As in cuda.core, a green Context's `.handle` is its CUcontext (the driver's
cuCtxFromGreenCtx, also `.context`); `.raw` is the CUgreenCtx and
`.cuabi_handle` the cuabi handle. Both this GreenContext and a device's
primary context (Device.context, cuabi._core.PrimaryContext) are instances
of cuabi.Context, as in cuda.core."""
from __future__ import annotations

import ctypes as C
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace

from . import _capi
from ._core import Context as _CoreContext
from ._core import Device, Event, Stream, _as_device
from ._handle import Handle
from ._lib import call, holding, lib, new_struct
from .errors import INT_MAX, INT_MIN, U32_MAX, NotSupportedError, index_arg
from .typing import WorkqueueSharingScopeType

_KINDS = {_capi.CUABI_SM_RESOURCE_DEVICE: "device", _capi.CUABI_SM_RESOURCE_GROUP: "group",
          _capi.CUABI_SM_RESOURCE_REMAINDER: "remainder",
          _capi.CUABI_SM_RESOURCE_GREEN_CTX: "green_context"}


@dataclass
class SMResourceOptions:
    """How SMResource.split() splits (cuda.core's names).

    count: the fewest SMs a group may have (None: the driver's minimum); a
    sequence of counts asks for len(count) groups, all of one size.
    backfill: relax co-scheduling for finer groups
    (CUABI_SM_SPLIT_IGNORE_SM_COSCHEDULING). coscheduled_sm_count and
    preferred_coscheduled_sm_count need the CUDA 13.1 split: not supported.
    max_potential_cluster_size (cuabi's): groups for the largest clusters."""
    count: int | Sequence[int] | None = None
    coscheduled_sm_count: int | Sequence[int] | None = None
    preferred_coscheduled_sm_count: int | Sequence[int] | None = None
    backfill: bool | Sequence[bool] = False
    max_potential_cluster_size: bool = False


def _split_args(options, where):
    """(groups wanted or None for as many as fit, min_count, flags)."""
    o = options if options is not None else SMResourceOptions()
    if o.coscheduled_sm_count is not None or o.preferred_coscheduled_sm_count is not None:
        raise NotSupportedError(f"{where}: coscheduled_sm_count needs the CUDA 13.1 split "
                                "(cuDevSmResourceSplit); cuabi splits by count: give count "
                                "(and backfill) only")
    count, wanted = o.count, None
    if isinstance(count, Sequence) and not isinstance(count, (str, bytes)):
        counts = [index_arg(c, f"{where}: count", 0, INT_MAX) for c in count]
        if not counts or len(set(counts)) != 1:
            raise NotSupportedError(f"{where}: count {list(count)}: cuabi splits into groups of "
                                    "one size; give one count (or equal counts)")
        wanted, count = len(counts), counts[0]
    count = 0 if count is None else index_arg(count, f"{where}: count", 0, INT_MAX)
    backfill = o.backfill
    if isinstance(backfill, Sequence):
        if len(set(bool(b) for b in backfill)) > 1:
            raise NotSupportedError(f"{where}: backfill differs between groups: cuabi's groups "
                                    "are of one kind")
        backfill = bool(backfill[0]) if len(backfill) else False
    flags = ((_capi.CUABI_SM_SPLIT_IGNORE_SM_COSCHEDULING if backfill else 0) |
             (_capi.CUABI_SM_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE
              if o.max_potential_cluster_size else 0))
    return wanted, count, flags


class SMResource(Handle):
    """A set of a device's SMs: the whole device's (Device.resources.sm), a
    group or the remainder of a split, or a green context's. Keeps its
    device alive."""

    _ctype = "cuabi_sm_resource"

    def _info(self):
        i = new_struct(_capi.cuabi_sm_resource_info)
        lib.cuabi_sm_resource_get_info(C.byref(i), self)
        return i

    @property
    def sm_count(self) -> int:
        """SMs in the resource."""
        return self._info().sm_count

    @property
    def min_partition_size(self) -> int:
        """The smallest group a split of it makes, as the driver reports it
        (0 for the groups and remainder of a split: the driver leaves it
        unset there)."""
        return self._info().min_partition_size

    @property
    def coscheduled_alignment(self) -> int:
        """Groups are multiples of this many co-scheduled SMs (0 where the
        driver leaves it unset)."""
        return self._info().coscheduled_alignment

    @property
    def flags(self) -> int:
        """cuda.core's raw flags field: the CUDA 13.0 resource has none (0)."""
        return 0

    @property
    def info(self) -> SimpleNamespace:
        """Everything cuabi_sm_resource_get_info says: sm_count,
        min_partition_size, coscheduled_alignment, kind ("device", "group",
        "remainder", "green_context"), ordinal, split_id, index."""
        i = self._info()
        return SimpleNamespace(sm_count=i.sm_count, min_partition_size=i.min_partition_size,
                               coscheduled_alignment=i.coscheduled_alignment,
                               kind=_KINDS.get(i.kind, "unknown"), ordinal=i.ordinal,
                               split_id=i.split_id, index=i.index)

    @property
    def device(self) -> Device:
        return Device._borrowed_of("cuabi_sm_resource_device", self)

    def group_count(self, options: SMResourceOptions | None = None) -> int:
        """How many groups split(options) would make, if it asked for as many
        as fit (the driver's dry run; nothing is made)."""
        _wanted, count, flags = _split_args(options, "SMResource.group_count")
        o = new_struct(_capi.cuabi_sm_split_options)
        o.min_count, o.flags = count, flags
        n = C.c_size_t(0)
        lib.cuabi_sm_resource_split(None, C.byref(n), None, self, C.byref(o))
        return n.value

    def split(self, options: SMResourceOptions | None = None, *, dry_run: bool = False):
        """(groups, remainder): disjoint groups of one size (as many as fit
        unless options.count is a sequence) and the SMs left over (None when
        none are). A split makes no driver resource, so dry_run=True makes
        the same objects (they are as usable as any: cuabi has no cheaper
        answer for the sizes than making them)."""
        wanted, count, flags = _split_args(options, "SMResource.split")
        o = new_struct(_capi.cuabi_sm_split_options)
        o.min_count, o.flags = count, flags
        if wanted is None:
            wanted = max(1, self.group_count(options))
        wanted = index_arg(wanted, "SMResource.split: groups", 1, 1024)
        groups = (C.c_void_p * wanted)()
        n = C.c_size_t(wanted)
        rem = C.c_void_p()
        lib.cuabi_sm_resource_split(groups, C.byref(n), C.byref(rem), self, C.byref(o))
        made = [SMResource._wrap(groups[i]) for i in range(n.value)]
        return made, (SMResource._wrap(rem.value) if rem.value else None)

    def __repr__(self):
        if self.closed:
            return "<cuabi.SMResource closed>"
        i = self.info
        return f"<cuabi.SMResource {i.kind} of device {i.ordinal}: {i.sm_count} SMs>"


@dataclass
class WorkqueueResourceOptions:
    """cuda.core's WorkqueueResource.configure options: sharing_scope
    ("device_ctx" or "green_ctx_balanced", a WorkqueueSharingScopeType) and
    concurrency_limit (the expected most concurrent stream-ordered
    workloads, 1 or more; the driver's cap is CUDA_DEVICE_MAX_CONNECTIONS,
    more may be asked for without its promise). None leaves a field as it
    is."""
    sharing_scope: WorkqueueSharingScopeType | str | None = None
    concurrency_limit: int | None = None

    def __post_init__(self):
        if self.sharing_scope is not None:
            if not isinstance(self.sharing_scope, str) or \
                    self.sharing_scope not in WorkqueueSharingScopeType._value2member_map_:
                raise ValueError(f"sharing_scope {self.sharing_scope!r}: one of "
                                 f"{', '.join(repr(m.value) for m in WorkqueueSharingScopeType)}")
        if self.concurrency_limit is not None:
            if isinstance(self.concurrency_limit, bool) or \
                    not isinstance(self.concurrency_limit, int):
                raise TypeError(f"concurrency_limit must be an int, not "
                                f"{type(self.concurrency_limit).__name__}")
            if self.concurrency_limit < 1:
                raise ValueError(f"concurrency_limit must be >= 1, got {self.concurrency_limit}")
            index_arg(self.concurrency_limit, "concurrency_limit", 1, U32_MAX)


_SCOPES = {_capi.CUABI_WORKQUEUE_SCOPE_DEVICE_CTX: WorkqueueSharingScopeType.DEVICE_CTX,
           _capi.CUABI_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED:
               WorkqueueSharingScopeType.GREEN_CTX_BALANCED}


class WorkqueueResource:
    """cuda.core's WorkqueueResource: a workqueue configuration (CUDA 13.1's
    CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG) of a device or a green context,
    from DeviceResources.workqueue. configure() changes it here (in place);
    given in ContextOptions.resources with SM resources, the green context
    is made with it (cuabi_green_ctx_create_with_workqueue). cuda.core's
    pre-existing workqueue (CU_DEV_RESOURCE_TYPE_WORKQUEUE) it also holds
    is used by nothing in cuda.core: cuabi does not query it."""

    __slots__ = ("_cfg", "_device")

    def __init__(self, *args, **kwargs):
        raise RuntimeError("WorkqueueResource cannot be instantiated directly. "
                           "Use dev.resources.workqueue.")

    @classmethod
    def _of(cls, cfg, device):
        self = cls.__new__(cls)
        self._cfg, self._device = cfg, device
        return self

    @property
    def handle(self) -> int:
        """The address of the configuration (a cuabi_workqueue_config here;
        cuda.core's is the CUdevResource)."""
        return C.addressof(self._cfg)

    @property
    def sharing_scope(self) -> WorkqueueSharingScopeType:
        try:
            return _SCOPES[self._cfg.sharing_scope]
        except KeyError:
            raise RuntimeError(f"Unknown sharing scope enum value: {self._cfg.sharing_scope}") \
                from None

    @property
    def concurrency_limit(self) -> int:
        return self._cfg.concurrency_limit

    @property
    def device(self) -> Device:
        return self._device

    def configure(self, options: WorkqueueResourceOptions | dict) -> None:
        """Set the sharing scope and / or concurrency limit (None leaves one
        as it is), in place."""
        if isinstance(options, dict):
            options = WorkqueueResourceOptions(**options)
        if not isinstance(options, WorkqueueResourceOptions):
            raise TypeError("configure: options must be a WorkqueueResourceOptions (or a dict "
                            f"of its fields), not {type(options).__name__}")
        if options.concurrency_limit is not None:
            self._cfg.concurrency_limit = options.concurrency_limit
        if options.sharing_scope is not None:
            self._cfg.sharing_scope = (
                _capi.CUABI_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED
                if options.sharing_scope == "green_ctx_balanced"
                else _capi.CUABI_WORKQUEUE_SCOPE_DEVICE_CTX)

    def __repr__(self):
        return (f"<cuabi.WorkqueueResource of device {self._device.device_id}: "
                f"{self.sharing_scope.value}, concurrency_limit {self.concurrency_limit}>")


class DeviceResources:
    """What a device or a green context has (cuda.core's namespace):
    .sm, its SMs as an SMResource; .workqueue, its workqueue configuration
    (CUDA 13.1 drivers: NotSupportedError, a RuntimeError, before)."""

    __slots__ = ("_of",)

    def __init__(self, of):
        self._of = of

    @property
    def sm(self) -> SMResource:
        if isinstance(self._of, GreenContext):
            return SMResource._wrap(call("cuabi_green_ctx_sm_resource", self._of))
        return SMResource._wrap(call("cuabi_device_sm_resource", self._of))

    @property
    def workqueue(self) -> WorkqueueResource:
        cfg = new_struct(_capi.cuabi_workqueue_config)
        if isinstance(self._of, GreenContext):
            lib.cuabi_green_ctx_workqueue_config(C.byref(cfg), self._of)
            return WorkqueueResource._of(cfg, self._of.device)
        lib.cuabi_device_workqueue_config(C.byref(cfg), self._of)
        return WorkqueueResource._of(cfg, self._of)


@dataclass
class ContextOptions:
    """Device.create_context's options: the SM resources of the green
    context (groups of one split, or one resource) and at most one
    WorkqueueResource (its configuration)."""
    resources: Sequence[SMResource | WorkqueueResource]


class GreenContext(Handle, _CoreContext):
    """A green context: a context limited to a partition of a device's SMs
    (Device.create_context). Its streams (create_stream) run there; each
    keeps it alive."""

    _ctype = "cuabi_green_ctx"
    is_green = True

    @classmethod
    def _create(cls, device, options):
        if options is None or not hasattr(options, "resources"):
            raise TypeError("Device.create_context: cuabi makes green contexts: give "
                            "ContextOptions(resources=[...]) (Device.resources.sm.split())")
        everything = list(options.resources)
        if not everything:
            raise ValueError("Device.create_context: options.resources is empty")
        res, wqs = [], []
        for r in everything:
            if isinstance(r, SMResource):
                res.append(r)
            elif isinstance(r, WorkqueueResource):
                wqs.append(r)
            else:
                raise TypeError(f"Unsupported context resource type: {type(r)} (give "
                                "SMResource and WorkqueueResource objects)")
        if len(wqs) > 1:
            raise ValueError("Device.create_context: at most one WorkqueueResource (a green "
                             "context has one workqueue configuration)")
        if not res:
            raise ValueError("Device.create_context: give SM resources too (Device.resources."
                             "sm.split()); a workqueue configuration alone makes no partition")
        dev = _as_device(device)
        with holding(*res) as hs:
            arr = (C.c_void_p * len(hs))(*hs)
            if wqs:
                if wqs[0].device.device_id != dev.device_id:
                    raise ValueError(f"Device.create_context: the WorkqueueResource is of device "
                                     f"{wqs[0].device.device_id}, not {dev.device_id}")
                return cls._wrap(call("cuabi_green_ctx_create_with_workqueue", dev, arr,
                                      len(hs), C.byref(wqs[0]._cfg)))
            return cls._wrap(call("cuabi_green_ctx_create", dev, arr, len(hs)))

    @property
    def raw(self) -> int:
        """The CUgreenCtx."""
        return call("cuabi_green_ctx_raw", self)

    @property
    def context(self) -> int:
        """The CUcontext the driver makes of it (cuCtxFromGreenCtx), for
        libraries that work on the current context."""
        return call("cuabi_green_ctx_context", self)

    @property
    def handle(self) -> int:
        """cuda.core's Context.handle: the CUcontext (as `context`)."""
        return self.context

    @property
    def sm_count(self) -> int:
        """SMs of its partition."""
        return call("cuabi_green_ctx_sm_count", self)

    @property
    def device(self) -> Device:
        return Device._borrowed_of("cuabi_green_ctx_device", self)

    @property
    def resources(self) -> DeviceResources:
        """Its resources: .sm is its partition (which may be split again)."""
        return DeviceResources(self)

    def create_stream(self, options=None, *, priority: int | None = None) -> Stream:
        """A stream of this green context (always non-blocking, as the
        driver wants). options: cuda.core's StreamOptions (its priority is
        used) or None."""
        prio = priority if priority is not None else getattr(options, "priority", None)
        opts = new_struct(_capi.cuabi_stream_options)
        opts.flags = _capi.CUABI_STREAM_NON_BLOCKING
        opts.priority = 0 if prio is None else index_arg(prio, "Context.create_stream: priority",
                                                         INT_MIN, INT_MAX)
        return Stream._wrap(call("cuabi_green_ctx_stream_create", self, C.byref(opts)))

    def synchronize(self) -> None:
        """Wait for all of its work."""
        lib.cuabi_green_ctx_synchronize(self)

    sync = synchronize

    def record(self, event: Event | None = None) -> Event:
        """Record all of its work queued so far in `event` (a new one with
        timing off by default)."""
        if event is None:
            event = Event(self.device, timing=False)
        lib.cuabi_green_ctx_record_event(self, event)
        return event

    def wait(self, event: Event) -> None:
        """Make all of its later work wait for `event`."""
        lib.cuabi_green_ctx_wait_event(self, event)

    def __repr__(self):
        if self.closed:
            return "<cuabi.Context closed>"
        return f"<cuabi.Context green, {self.sm_count} SMs of device {self.device.ordinal}>"
