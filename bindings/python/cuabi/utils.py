"""cuda.core.utils's names, as cuabi has them: `from cuabi.utils import
StridedMemoryView, args_viewable_as_strided_memory` (a cuda.core program
changes only its import). copy_batch, CopyOptions, MemcpySrcAccessOrder and
the program caches are not here yet (docs/python.md's table says which
issue brings each)."""
from ._view import StridedMemoryView, args_viewable_as_strided_memory

__all__ = ["StridedMemoryView", "args_viewable_as_strided_memory"]
