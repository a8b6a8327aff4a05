"""cuda.core.utils's names, as cuabi has them: `from cuabi.utils import
StridedMemoryView, args_viewable_as_strided_memory, copy_batch, CopyOptions,
MemcpySrcAccessOrder, MemcpyOverlapMode, FileStreamProgramCache,
InMemoryProgramCache, ProgramCacheResource, make_program_cache_key` (a
cuda.core program changes only its import). The prefetch/discard batches
are not here yet (docs/python.md's table says which issue brings each)."""
from ._compile import make_program_cache_key
from ._memory_ext import CopyOptions, MemcpyOverlapMode, MemcpySrcAccessOrder, copy_batch
from ._program_cache import FileStreamProgramCache, InMemoryProgramCache, ProgramCacheResource
from ._view import StridedMemoryView, args_viewable_as_strided_memory

__all__ = ["StridedMemoryView", "args_viewable_as_strided_memory", "copy_batch", "CopyOptions",
           "MemcpySrcAccessOrder", "MemcpyOverlapMode"]
__all__ += ["FileStreamProgramCache", "InMemoryProgramCache", "ProgramCacheResource",
            "make_program_cache_key"]
