"""Stand-ins for torch tensors and CuPy arrays, built over numpy arrays, that
expose exactly the attributes cuabi's from_dlpack fast paths read (so those
paths are tested without the libraries; the GPU tests use the real ones)."""
import types

import numpy as np

_TORCH_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float16", "float32", "float64", "bfloat16", "complex64",
                 "complex128", "complex32"]


class _Dtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


class _Device:
    def __init__(self, type, index=None):
        self.type, self.index = type, index


def make_fake_torch():
    """A module object named "torch" with a Tensor type mimicking torch.Tensor."""
    torch = types.ModuleType("torch")
    for n in _TORCH_DTYPES:
        setattr(torch, n, _Dtype(n))
    torch.strided, torch.sparse_coo = object(), object()
    torch.version = types.SimpleNamespace(hip=None, cuda="12.8")

    class Tensor:
        """torch.Tensor's view of a numpy array: data_ptr() includes the
        storage offset, stride() is in elements; __dlpack__ is numpy's
        (CPU), which the fast path must reproduce exactly."""

        def __init__(self, arr, device=("cpu", None), dtype=None, requires_grad=False,
                     conj=False, layout=None):
            self._a = arr
            self.device = _Device(*device)
            self.dtype = dtype or getattr(torch, arr.dtype.name)
            self.requires_grad = requires_grad
            self._conj = conj
            self.layout = torch.strided if layout is None else layout

        @property
        def shape(self):
            return tuple(self._a.shape)   # torch.Size is a tuple subclass

        def stride(self):
            return tuple(s // self._a.itemsize for s in self._a.strides)

        def data_ptr(self):
            return self._a.__array_interface__["data"][0]

        def is_conj(self):
            return self._conj

        def is_neg(self):
            return False

        def __dlpack__(self, stream=None, max_version=None, **kw):
            if self.requires_grad:
                raise RuntimeError("Can't export tensors that require gradient, "
                                   "use tensor.detach()")
            if self._conj:
                raise RuntimeError("conjugate bit set: call resolve_conj() first")
            return self._a.__dlpack__(max_version=max_version)

        def __dlpack_device__(self):
            return (2, self.device.index or 0) if self.device.type == "cuda" else (1, 0)

    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    torch.from_numpy = Tensor
    return torch


class _CupyDevice:
    def __init__(self, id):
        self.id = id


class FakeCupyArray:
    """cupy.ndarray's __cuda_array_interface__ (v3: strides in bytes, None
    when C-contiguous; stream) and .device.id, over a numpy array."""

    def __init__(self, arr, device_id=0, stream=1):
        self._a, self.device, self._stream = arr, _CupyDevice(device_id), stream

    @property
    def __cuda_array_interface__(self):
        ai = self._a.__array_interface__
        return {"shape": ai["shape"], "typestr": ai["typestr"], "descr": ai["descr"],
                "data": ai["data"], "strides": ai["strides"], "version": 3,
                "stream": self._stream}

    def __dlpack__(self, stream=None, max_version=None, **kw):
        return self._a.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return (2, self.device.id)


FakeCupyArray.__module__ = "cupy"
FakeCupyArray.__name__ = FakeCupyArray.__qualname__ = "ndarray"
