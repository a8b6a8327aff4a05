"""cuda.core.utils's names, as cuabi has them: `from cuabi.utils import
StridedMemoryView, args_viewable_as_strided_memory, copy_batch, CopyOptions,
MemcpySrcAccessOrder, MemcpyOverlapMode` (a cuda.core program changes only
its import), and prefetch_batch, discard_batch, discard_prefetch_batch. The
program caches are not here yet (docs/python.md's table says which issue
brings them)."""
from ._memory_ext import CopyOptions, MemcpyOverlapMode, MemcpySrcAccessOrder, copy_batch
from ._memory_ext import discard_batch, discard_prefetch_batch, prefetch_batch
from ._view import StridedMemoryView, args_viewable_as_strided_memory

__all__ = ["StridedMemoryView", "args_viewable_as_strided_memory", "copy_batch", "CopyOptions",
           "MemcpySrcAccessOrder", "MemcpyOverlapMode", "prefetch_batch", "discard_batch",
           "discard_prefetch_batch"]
