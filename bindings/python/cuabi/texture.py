"""cuda.core's `texture` namespace on cuabi: CUDA arrays, mipmapped arrays,
texture and surface objects (cuabi._texture; docs/textures.md), with
cuda.core's option classes for Device.create_opaque_array,
create_mipmapped_array and create_texture_object.

    from cuabi.texture import OpaqueArray, TextureObject, TextureObjectOptions
"""
from ._texture import (AddressMode, ArrayFormat, FilterMode, MipmappedArray,  # noqa: F401
                       MipmappedArrayOptions, OpaqueArray, OpaqueArrayOptions, ReadMode,
                       ResourceDescriptor, SurfaceObject, TextureDescriptor, TextureObject,
                       TextureObjectOptions)

__all__ = ["AddressMode", "ArrayFormat", "FilterMode", "MipmappedArray", "MipmappedArrayOptions",
           "OpaqueArray", "OpaqueArrayOptions", "ReadMode", "ResourceDescriptor",
           "SurfaceObject", "TextureDescriptor", "TextureObject", "TextureObjectOptions"]
