"""Checkpoint and restore of a process's GPU state (cuda.core's
cuda.core.checkpoint: Process(pid) with state, restore_thread_id, lock,
checkpoint, restore and unlock; docs/checkpoint.md).

A controller locks a CUDA process (its CUDA calls then block), checkpoints
it (its device memory goes to host memory and is released), restores it
(optionally onto other GPUs of the same kind: gpu_mapping) and unlocks it.
Needs a CUDA 12.8+ driver on Linux and the permissions the driver asks for
(the same user, or root): NotSupportedError / EntryPointNotFoundError when
the driver cannot, NotFoundError for a process it may not act on.
A process cannot lock, checkpoint, restore or unlock itself (the driver
would wait for its own calls forever): on os.getpid() those raise
InvalidArgumentError; state and restore_thread_id are fine."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from . import _capi
from ._lib import call, lib
from .errors import index_arg

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


class Process:
    """A CUDA process (by pid) that can be locked, checkpointed, restored and
    unlocked. Holds nothing but the pid: each property asks the driver."""

    __slots__ = ("_pid",)

    def __init__(self, pid: int):
        self._pid = index_arg(pid, "Process: pid", 1, 2**31 - 1)

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def state(self) -> ProcessStateT:
        """"running", "locked", "checkpointed" or "failed" (newer drivers
        also "checkpointing", "restoring")."""
        s = call("cuabi_checkpoint_process_state", self._pid)
        return lib.cuabi_process_state_name(s).decode()

    @property
    def restore_thread_id(self) -> int:
        """The id of the thread the driver restores through (a CPU
        checkpoint tool must restore it too)."""
        return call("cuabi_checkpoint_process_restore_thread_id", self._pid)

    def lock(self, timeout_ms: int | None = None) -> None:
        """Lock the running process: its CUDA calls block. Waits for its
        work in flight at most timeout_ms (None or 0: no limit);
        NotReadyError when that runs out (it is still running)."""
        t = 0 if timeout_ms is None else index_arg(timeout_ms, "Process.lock: timeout_ms", 0,
                                                  2**32 - 1)
        lib.cuabi_checkpoint_process_lock(self._pid, t)

    def checkpoint(self) -> None:
        """Checkpoint the locked process: its device memory moves to host
        memory and its GPU resources are released."""
        lib.cuabi_checkpoint_process_checkpoint(self._pid)

    def restore(self, gpu_mapping: Mapping | None = None) -> None:
        """Restore the checkpointed process (it is then locked). gpu_mapping
        maps each GPU it was checkpointed on to the GPU to restore it onto
        (cuabi.Device, UUID bytes or UUID strings; same chip, enough
        memory; every checkpointed GPU when any)."""
        pairs = list((gpu_mapping or {}).items())
        arr = (_capi.cuabi_checkpoint_gpu_pair * max(1, len(pairs)))()
        for i, (old, new) in enumerate(pairs):
            arr[i].old_uuid[:] = _uuid_bytes(old, "Process.restore")
            arr[i].new_uuid[:] = _uuid_bytes(new, "Process.restore")
        lib.cuabi_checkpoint_process_restore(self._pid, arr if pairs else None, len(pairs))

    def unlock(self) -> None:
        """Unlock the locked process: its CUDA calls proceed."""
        lib.cuabi_checkpoint_process_unlock(self._pid)

    def __eq__(self, other):
        return isinstance(other, Process) and other._pid == self._pid

    def __hash__(self):
        return hash(("cuabi.checkpoint.Process", self._pid))

    def __repr__(self):
        return f"<cuabi.checkpoint.Process {self._pid}>"
