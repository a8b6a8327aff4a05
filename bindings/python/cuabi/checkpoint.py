"""Checkpoint and restore of a process's GPU state (cuda.core's
cuda.core.checkpoint: Process(pid) with state, restore_thread_id, lock,
checkpoint, restore and unlock; docs/checkpoint.md).

A controller locks a CUDA process (its CUDA calls then block), checkpoints
it (its device memory goes to host memory and is released), restores it
(optionally onto other GPUs of the same kind: gpu_mapping) and unlocks it.
Needs a CUDA 12.8+ driver on Linux and the permissions the driver asks for
(the same user, or root). As in cuda.core, a driver that cannot (no entry
points, CUDA_ERROR_NOT_SUPPORTED or CUDA_ERROR_NOT_FOUND) raises a
RuntimeError saying checkpointing is not supported: cuabi's NotSupportedError
(a NotImplementedError), which for a missing entry point or a process the
driver does not find is also EntryPointNotFoundError / NotFoundError.
cuda.core's argument checks: TypeError for a pid or timeout that is no int,
ValueError (InvalidArgumentError) for pid <= 0 or timeout < 0, TypeError
for a gpu_mapping that is no Mapping.
A process cannot lock, checkpoint, restore or unlock itself (the driver
would wait for its own calls forever): on os.getpid() those raise
InvalidArgumentError; state and restore_thread_id are fine."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from . import _capi
from ._lib import call, lib
from .errors import ERRORS, index_arg

# cuda.core.typing's ProcessStateType (cuabi.typing has it), and the two
# states newer drivers report
ProcessStateT = Literal["running", "locked", "checkpointed", "failed", "checkpointing",
                        "restoring"]

__all__ = ["Process", "ProcessStateT"]


def _uuid_bytes(gpu, where) -> bytes:
    """16 UUID bytes of a GPU given as a cuabi.Device (or anything with
    properties.uuid), 16 bytes, or a UUID string ("GPU-xxxxxxxx-...",
    dashes optional)."""
    props = getattr(gpu, "properties", None)
    if props is not None and hasattr(props, "uuid"):
        gpu = props.uuid
    if isinstance(gpu, (bytes, bytearray)):
        if len(gpu) != 16:
            raise ValueError(f"{where}: a UUID is 16 bytes, not {len(gpu)}")
        return bytes(gpu)
    if isinstance(gpu, str):
        text = gpu[4:] if gpu.upper().startswith("GPU-") else gpu
        try:
            b = bytes.fromhex(text.replace("-", ""))
        except ValueError:
            raise ValueError(f"{where}: {gpu!r} is not a GPU UUID") from None
        if len(b) != 16:
            raise ValueError(f"{where}: {gpu!r} is not a GPU UUID (16 bytes)")
        return b
    raise TypeError(f"{where}: a GPU is a cuabi.Device, 16 UUID bytes or a UUID string, not "
                    f"{type(gpu).__name__}")


_UNSUPPORTED = ("CUDA checkpointing is not supported by the installed NVIDIA driver. "
                "Upgrade to a driver version with CUDA checkpoint API support.")
_combined = {}


def _checked(fn, *args):
    """A checkpoint call, its refusals as cuda.core gives them: a driver
    without the entry points, CUDA_ERROR_NOT_FOUND or NOT_SUPPORTED is
    cuda.core's RuntimeError ("not supported by the installed NVIDIA
    driver"). cuabi's exception stays what it was (NotFoundError,
    EntryPointNotFoundError, NotSupportedError) and is also a
    NotSupportedError, so a RuntimeError (NotImplementedError) too."""
    try:
        return fn(*args)
    except tuple(ERRORS[s] for s in _REFUSALS) as e:
        cls = type(e)
        new = _combined.get(cls)
        if new is None:
            bases = (cls,) if issubclass(cls, _NOT_SUPPORTED) else (cls, _NOT_SUPPORTED)
            new = _combined[cls] = type(cls.__name__, bases, {"__module__": cls.__module__})
        raise new(f"{_UNSUPPORTED} ({e.message})", status=e.status,
                  cu_result=e.cu_result) from e


_NOT_SUPPORTED = ERRORS[_capi.CUABI_ERROR_NOT_SUPPORTED]
_REFUSALS = (_capi.CUABI_ERROR_NOT_SUPPORTED, _capi.CUABI_ERROR_NOT_FOUND,
             _capi.CUABI_ERROR_ENTRY_POINT_NOT_FOUND)


def _check_pid(pid) -> int:
    """cuda.core's checks: TypeError for anything but an int, ValueError
    for pid <= 0 (and, cuabi's, above a pid_t)."""
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise TypeError("pid must be an int")
    if pid <= 0:        # InvalidArgumentError: a ValueError, as cuda.core's
        raise ERRORS[_capi.CUABI_ERROR_INVALID_ARGUMENT]("pid must be a positive int")
    return index_arg(pid, "Process: pid", 1, 2**31 - 1)


class Process:
    """A CUDA process (by pid) that can be locked, checkpointed, restored and
    unlocked. Holds nothing but the pid: each property asks the driver."""

    __slots__ = ("_pid",)

    def __init__(self, pid: int):
        self._pid = _check_pid(pid)

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def state(self) -> ProcessStateT:
        """"running", "locked", "checkpointed" or "failed" (newer drivers
        also "checkpointing", "restoring")."""
        s = _checked(call, "cuabi_checkpoint_process_state", self._pid)
        name = lib.cuabi_process_state_name(s).decode()
        if name == "unknown":
            raise RuntimeError(f"Unknown CUDA checkpoint process state: {int(s)}")
        return name

    @property
    def restore_thread_id(self) -> int:
        """The id of the thread the driver restores through (a CPU
        checkpoint tool must restore it too)."""
        return _checked(call, "cuabi_checkpoint_process_restore_thread_id", self._pid)

    def lock(self, timeout_ms: int = 0) -> None:
        """Lock the running process: its CUDA calls block. Waits for its
        work in flight at most timeout_ms (0: no limit; cuabi also takes
        None); NotReadyError when that runs out (it is still running).
        TypeError for a timeout that is no int, ValueError below 0."""
        if timeout_ms is None:
            t = 0
        else:
            if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int):
                raise TypeError("timeout_ms must be an int")
            if timeout_ms < 0:
                raise ERRORS[_capi.CUABI_ERROR_INVALID_ARGUMENT]("timeout_ms must be >= 0")
            t = index_arg(timeout_ms, "Process.lock: timeout_ms", 0, 2**32 - 1)
        _checked(lib.cuabi_checkpoint_process_lock, self._pid, t)

    def checkpoint(self) -> None:
        """Checkpoint the locked process: its device memory moves to host
        memory and its GPU resources are released."""
        _checked(lib.cuabi_checkpoint_process_checkpoint, self._pid)

    def restore(self, gpu_mapping: Mapping | None = None) -> None:
        """Restore the checkpointed process (it is then locked). gpu_mapping
        maps each GPU it was checkpointed on to the GPU to restore it onto
        (cuabi.Device, UUID bytes or UUID strings; same chip, enough
        memory; every checkpointed GPU when any -- on a host of two H200s the
        driver refused a map that named one of the two GPUs)."""
        if gpu_mapping is None:
            gpu_mapping = {}
        if not isinstance(gpu_mapping, Mapping):
            raise TypeError("gpu_mapping must be a mapping from checkpointed GPU UUID to "
                            "restore GPU UUID")
        pairs = list(gpu_mapping.items())
        arr = (_capi.cuabi_checkpoint_gpu_pair * max(1, len(pairs)))()
        for i, (old, new) in enumerate(pairs):
            arr[i].old_uuid[:] = _uuid_bytes(old, "Process.restore")
            arr[i].new_uuid[:] = _uuid_bytes(new, "Process.restore")
        _checked(lib.cuabi_checkpoint_process_restore, self._pid, arr if pairs else None,
                 len(pairs))

    def unlock(self) -> None:
        """Unlock the locked process: its CUDA calls proceed."""
        _checked(lib.cuabi_checkpoint_process_unlock, self._pid)

    def __eq__(self, other):
        return isinstance(other, Process) and other._pid == self._pid

    def __hash__(self):
        return hash(("cuabi.checkpoint.Process", self._pid))

    def __repr__(self):
        return f"<cuabi.checkpoint.Process {self._pid}>"
