"""cuabi._fast's refusal of a library that does not match it (its part of
docs/python.md "Loading and checks"), with doctored copies of the library's
plugin table: a shorter table (an older library), another ABI version,
different struct layouts, a refused table version. A refused attach leaves
the extension bound to the real library."""
import ctypes as C

import numpy as np
import pytest

import cuabi
from cuabi import _capi, _lib

fast = _lib.fast
pytestmark = pytest.mark.skipif(fast is None, reason="cuabi._fast not in use")

GET_API = C.CFUNCTYPE(C.c_int, C.c_uint, C.POINTER(C.c_void_p))
ABI = C.CFUNCTYPE(C.c_uint)
SIZE = C.CFUNCTYPE(C.c_int, C.POINTER(C.c_size_t), C.c_char_p)


class Table:
    """A writable copy of the library's table behind a fake cuabi_get_api."""

    def __init__(self, status=0):
        real = C.c_void_p()
        get = _lib._cdll.cuabi_get_api
        get.restype, get.argtypes = C.c_int, [C.c_uint, C.POINTER(C.c_void_p)]
        assert get(_capi.API_TABLE_VERSION, C.byref(real)) == 0
        size = C.c_size_t.from_address(real.value + 8).value
        self.mem = (C.c_char * size).from_buffer_copy((C.c_char * size).from_address(real.value))
        self.keep = []

        @GET_API
        def get_api(version, out):
            out[0] = C.addressof(self.mem)
            return status
        self.get_api = get_api

    def slot(self, name):
        return C.c_void_p.from_buffer(self.mem, 16 + 8 * _capi.TABLE_FUNCTIONS.index(name))

    def replace(self, name, fn):
        self.keep.append(fn)
        self.slot(name).value = C.cast(fn, C.c_void_p).value

    def attach(self):
        return fast.attach(C.cast(self.get_api, C.c_void_p).value, _lib.raise_last)


def still_attached():
    return cuabi.from_dlpack(np.arange(3)).shape == (3,)


def test_the_real_table_attaches_again():
    # (Never a copy that passes: the extension would keep using it.)
    assert fast.attach(_lib.address("cuabi_get_api"), _lib.raise_last) == []
    assert still_attached()


def test_an_older_library_names_what_it_lacks():
    t = Table()
    C.c_size_t.from_buffer(t.mem, 8).value -= 3 * 8
    problems = t.attach()
    assert problems == [("missing", list(_capi.TABLE_FUNCTIONS[-3:]))]
    msg = str(_lib.refusal(problems, "libX"))
    assert "lacks 3 function(s)" in msg and _capi.TABLE_FUNCTIONS[-1] in msg
    assert still_attached()


def test_another_abi_version():
    t = Table()
    t.replace("cuabi_abi_version", ABI(lambda: 99))
    problems = t.attach()
    assert problems == [("abi", 99, _capi.ABI_VERSION)]
    assert "has ABI version 99" in str(_lib.refusal(problems, "libX"))
    assert still_attached()


def test_layout_differences_are_all_listed():
    t = Table()
    real = _lib._cdll.cuabi_struct_size
    real.restype, real.argtypes = C.c_int, [C.POINTER(C.c_size_t), C.c_char_p]

    def size(out, name):
        st = real(out, name)
        if name in (b"cuabi_launch_config", b"cuabi_view_info"):
            out[0] += 8
        return st
    t.replace("cuabi_struct_size", SIZE(size))
    problems = t.attach()
    assert [k for k, _ in problems] == ["layout", "layout"]
    msg = str(_lib.refusal(problems, "libX"))
    assert "cuabi_launch_config: size" in msg and "cuabi_view_info: size" in msg
    assert "differ from this binding" in msg
    assert still_attached()


def test_a_refused_table_version():
    t = Table(status=_capi.CUABI_ERROR_INVALID_VERSION)
    problems = t.attach()
    assert problems and problems[0][0] == "table"
    assert isinstance(_lib.refusal(problems, "libX"), ImportError)
    assert still_attached()


def test_attach_checks_its_arguments():
    with pytest.raises(ValueError):
        fast.attach(0, _lib.raise_last)
    with pytest.raises(TypeError):
        fast.attach(_lib.address("cuabi_get_api"), "not callable")
    assert still_attached()
