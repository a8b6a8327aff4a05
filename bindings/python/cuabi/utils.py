"""cuda.core.utils's names, as cuabi has them: `from cuabi.utils import
StridedMemoryView, args_viewable_as_strided_memory, copy_batch, CopyOptions,
MemcpySrcAccessOrder, MemcpyOverlapMode, prefetch_batch, discard_batch,
discard_prefetch_batch, FileStreamProgramCache, InMemoryProgramCache,
ProgramCacheResource, make_program_cache_key` (a cuda.core program changes
only its import)."""
from ._compile import make_program_cache_key
from ._memory_ext import CopyOptions, MemcpyOverlapMode, MemcpySrcAccessOrder, copy_batch
from ._memory_ext import discard_batch, discard_prefetch_batch, prefetch_batch
from ._program_cache import FileStreamProgramCache, InMemoryProgramCache, ProgramCacheResource
from ._view import StridedMemoryView, args_viewable_as_strided_memory

__all__ = ["StridedMemoryView", "args_viewable_as_strided_memory", "copy_batch", "CopyOptions",
           "MemcpySrcAccessOrder", "MemcpyOverlapMode", "prefetch_batch", "discard_batch",
           "discard_prefetch_batch"]
__all__ += ["FileStreamProgramCache", "InMemoryProgramCache", "ProgramCacheResource",
            "make_program_cache_key"]
