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
counts of 13.1 are refused (NotSupportedError), as are workqueue resources.

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
from .errors import INT_MAX, INT_MIN, NotSupportedError, index_arg

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


class DeviceResources:
    """What a device or a green context has (cuda.core's namespace):
    .sm, its SMs as an SMResource."""

    __slots__ = ("_of",)

    def __init__(self, of):
        self._of = of

    @property
    def sm(self) -> SMResource:
        if isinstance(self._of, GreenContext):
            return SMResource._wrap(call("cuabi_green_ctx_sm_resource", self._of))
        return SMResource._wrap(call("cuabi_device_sm_resource", self._of))

    @property
    def workqueue(self):
        raise NotSupportedError("DeviceResources.workqueue: workqueue resources need the CUDA "
                                "13.1 driver API; cuabi is built against CUDA 13.0")


@dataclass
class ContextOptions:
    """Device.create_context's options: the SM resources of the green
    context (groups of one split, or one resource)."""
    resources: Sequence[SMResource]


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
        res = list(options.resources)
        if not res:
            raise ValueError("Device.create_context: options.resources is empty")
        for r in res:
            if not isinstance(r, SMResource):
                raise TypeError(f"Device.create_context: resources hold SMResource objects, "
                                f"not {type(r).__name__}")
        dev = _as_device(device)
        with holding(*res) as hs:
            arr = (C.c_void_p * len(hs))(*hs)
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
