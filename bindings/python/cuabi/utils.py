"""cuda.core.utils's names, as cuabi has them: `from cuabi.utils import
StridedMemoryView, args_viewable_as_strided_memory, copy_batch, CopyOptions,
MemcpySrcAccessOrder, MemcpyOverlapMode` (a cuda.core program changes only
its import). The program caches and the prefetch/discard batches are not
here yet (docs/python.md's table says which issue brings each)."""
from ._memory_ext import CopyOptions, MemcpyOverlapMode, MemcpySrcAccessOrder, copy_batch
from ._view import StridedMemoryView, args_viewable_as_strided_memory

__all__ = ["StridedMemoryView", "args_viewable_as_strided_memory", "copy_batch", "CopyOptions",
           "MemcpySrcAccessOrder", "MemcpyOverlapMode"]
