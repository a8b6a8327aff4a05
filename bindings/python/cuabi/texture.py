"""cuda.core's `texture` namespace on cuabi: CUDA arrays, mipmapped arrays,
texture and surface objects (cuabi._texture; docs/textures.md).

    from cuabi.texture import OpaqueArray, TextureObject, TextureDescriptor
"""
from ._texture import (AddressMode, ArrayFormat, FilterMode, MipmappedArray,  # noqa: F401
                       OpaqueArray, ReadMode, ResourceDescriptor, SurfaceObject,
                       TextureDescriptor, TextureObject)

__all__ = ["AddressMode", "ArrayFormat", "FilterMode", "MipmappedArray", "OpaqueArray",
           "ReadMode", "ResourceDescriptor", "SurfaceObject", "TextureDescriptor",
           "TextureObject"]
