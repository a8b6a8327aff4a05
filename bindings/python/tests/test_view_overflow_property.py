"""Issue 29 item 3: the library's size arithmetic against exact big-integer
arithmetic. Thousands of random cases (seeded, reproducible; edge-heavy:
values near 2^31, 2^32, 2^62, 2^63, 2^64, negatives, zeros) call the C API
through ctypes directly -- no cuabi Python layer in between -- and Python's
unbounded ints say what the answer must be:

  * cuabi_view_create over host buffers (real ones, and wrapped ones of up
    to 2^64 - 8193 bytes that are never touched): accepted exactly when the
    layout is valid for the buffer; then nbytes, size, the data pointer and
    the span of every element agree; every element lies inside the buffer;
  * cuabi_view_slice of accepted views: accepted exactly for the values
    Python's slice.indices() could give; shape, strides and first address;
  * cuabi_view_from_dltensor (a producer's untrusted data pointer, byte
    offset, shape, strides): accepted exactly when the byte extents fit and
    no address wraps; and cuabi.from_dlpack of an array interface (the lazy
    view's Python mirror of that rule) agrees with the C import;
  * cuabi_buffer_copy / cuabi_buffer_memset ranges and
    cuabi_argpack_create_from_sizes layouts.

CUABI_PROPERTY_SEED picks another seed, CUABI_PROPERTY_CASES scales the
counts (a failure prints the seed and the case)."""
import ctypes as C
import math
import os
import random

import pytest

import cuabi
from cuabi import _capi, _lib

SEED = int(os.environ.get("CUABI_PROPERTY_SEED", "29"))
SCALE = float(os.environ.get("CUABI_PROPERTY_CASES", "1"))

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
U64 = 1 << 64
OK = 0
EINVAL = _capi.CUABI_ERROR_INVALID_ARGUMENT
EDLPACK = _capi.CUABI_ERROR_DLPACK
EOOM = _capi.CUABI_ERROR_OUT_OF_MEMORY
UINT, FLOAT, COMPLEX = _capi.CUABI_DTYPE_UINT, _capi.CUABI_DTYPE_FLOAT, _capi.CUABI_DTYPE_COMPLEX
DTYPES = [(UINT, 8), (UINT, 16), (FLOAT, 32), (FLOAT, 64), (COMPLEX, 128)]

# ---- the C functions, bound here with their own signatures

_cdll = C.CDLL(_lib.LIBRARY_PATH)
P, I64P, CU64, SZ = C.c_void_p, C.POINTER(C.c_int64), C.c_uint64, C.c_size_t


def _fn(name, *argtypes):
    f = _cdll[name]
    f.restype, f.argtypes = C.c_int, list(argtypes)
    return f


view_create = _fn("cuabi_view_create", C.POINTER(P), P, CU64, C.c_int, C.c_int, C.c_int, I64P,
                  I64P, C.c_uint)
view_slice = _fn("cuabi_view_slice", C.POINTER(P), P, C.c_int, I64P, I64P, I64P)
view_from_dltensor = _fn("cuabi_view_from_dltensor", C.POINTER(P), P, C.c_uint)
view_release = _fn("cuabi_view_release", P)
view_ptr = _fn("cuabi_view_data_pointer", C.POINTER(C.c_size_t), P)
view_nbytes = _fn("cuabi_view_nbytes", C.POINTER(C.c_uint64), P)
view_shape = _fn("cuabi_view_shape", I64P, SZ, P)
view_strides = _fn("cuabi_view_strides", I64P, SZ, P)
buffer_allocate = _fn("cuabi_buffer_allocate", C.POINTER(P), P, SZ, SZ, P)
buffer_wrap = _fn("cuabi_buffer_wrap", C.POINTER(P), P, C.c_int, C.c_size_t, SZ, P, P)
buffer_pointer = _fn("cuabi_buffer_pointer", C.POINTER(C.c_size_t), P)
buffer_destroy = _fn("cuabi_buffer_destroy", P)
buffer_copy = _fn("cuabi_buffer_copy", P, SZ, P, SZ, SZ, P)
buffer_memset = _fn("cuabi_buffer_memset", P, SZ, C.c_uint32, C.c_uint, SZ, P)
resource_host = _fn("cuabi_memory_resource_host", C.POINTER(P))
resource_release = _fn("cuabi_memory_resource_release", P)
argpack_from_sizes = _fn("cuabi_argpack_create_from_sizes", C.POINTER(P), C.POINTER(SZ),
                         C.POINTER(SZ), SZ)
argpack_blob_size = _fn("cuabi_argpack_blob_size", C.POINTER(SZ), P)
argpack_slot_offset = _fn("cuabi_argpack_slot_offset", C.POINTER(SZ), P, SZ)
argpack_release = _fn("cuabi_argpack_release", P)


class DLTensor(C.Structure):
    _fields_ = [("data", P), ("device_type", C.c_int32), ("device_id", C.c_int32),
                ("ndim", C.c_int32), ("code", C.c_uint8), ("bits", C.c_uint8),
                ("lanes", C.c_uint16), ("shape", I64P), ("strides", I64P),
                ("byte_offset", C.c_uint64)]


assert C.sizeof(DLTensor) == C.sizeof(_capi.DLTensor)


def arr64(values):
    return (C.c_int64 * max(len(values), 1))(*values)


# ---- edge-heavy values

def _near(r, centers, spread=2):
    c = r.choice(centers)
    return c + r.randint(-spread, spread)


EXTENT_CENTERS = [0, 1, 2, 3, 4, 7, 8, 64, 1 << 31, 1 << 32, 1 << 61, 1 << 62, I64_MAX]


def extent(r):
    x = r.random()
    if x < 0.45:
        return r.randint(0, 6)
    if x < 0.55:
        return r.choice([0, 1])
    if x < 0.97:
        return min(max(_near(r, EXTENT_CENTERS), 0), I64_MAX)
    return r.choice([-1, -2, I64_MIN])                     # negative: refused


def stride(r):
    x = r.random()
    if x < 0.5:
        return r.randint(-6, 6)
    v = min(max(_near(r, [0, 1, 1 << 31, 1 << 32, 1 << 61, 1 << 62, I64_MAX]), 0), I64_MAX)
    return v if r.random() < 0.5 else max(-v, I64_MIN) if v else 0


def layout(r, max_ndim=4):
    nd = r.choice([0, 1, 1, 2, 2, 3, max_ndim])
    shape = [extent(r) for _ in range(nd)]
    strides = None if r.random() < 0.3 else [stride(r) for _ in range(nd)]
    return shape, strides


# ---- the oracle

def reach(shape, strides, item):
    """(count, byte_lo, byte_end) exactly, or None when the layout is
    invalid on its own (negative extent, a count, size or byte extent
    outside 64-bit signed arithmetic). Empty layouts reach (0, 0, 0)."""
    if any(e < 0 for e in shape):
        return None
    if 0 in shape:
        return 0, 0, 0
    n = math.prod(shape)
    if n > I64_MAX or n * item > I64_MAX:
        return None
    if strides is None:
        lo, hi = 0, n - 1
    else:
        terms = [(e - 1) * s for e, s in zip(shape, strides) if e != 1]
        lo = sum(t for t in terms if t < 0)
        hi = sum(t for t in terms if t > 0)
    if lo * item < I64_MIN or (hi + 1) * item > I64_MAX:
        return None
    return n, lo * item, (hi + 1) * item


def elem_strides(shape, strides):
    """cuabi__row_major for NULL strides."""
    if strides is not None:
        return list(strides)
    out, s = [], 1
    for e in reversed(shape):
        out.append(s)
        s = min(s * (e if e > 1 else 1), I64_MAX)
    return list(reversed(out))


def span(ptr, shape, strides, item):
    """Lowest and one-past-highest byte of a non-empty layout at ptr."""
    lo = sum(min(0, (e - 1) * s) for e, s in zip(shape, strides))
    hi = sum(max(0, (e - 1) * s) for e, s in zip(shape, strides))
    return ptr + lo * item, ptr + (hi + 1) * item


def info(v):
    p, nb = C.c_size_t(), C.c_uint64()
    assert view_ptr(C.byref(p), v) == OK and view_nbytes(C.byref(nb), v) == OK
    return p.value, nb.value


def dims(v, nd):
    sh, st = arr64([0] * nd), arr64([0] * nd)
    assert view_shape(sh, max(nd, 1), v) == OK and view_strides(st, max(nd, 1), v) == OK
    return list(sh[:nd]), list(st[:nd])


# ---- fixtures: buffers

@pytest.fixture(scope="module")
def buffers():
    res = P()
    assert resource_host(C.byref(res)) == OK
    made = []
    for size in (0, 1, 64, 4096):
        b = P()
        assert buffer_allocate(C.byref(b), res, size, 0, None) == OK
        made.append((b, size, True))
    for size in (1 << 32, (1 << 62) + 5, U64 - 0x2001):      # never touched
        b = P()
        assert buffer_wrap(C.byref(b), None, _capi.CUABI_MEMORY_HOST, 0x1000, size, None,
                           None) == OK
        made.append((b, size, False))
    out = []
    for b, size, real in made:
        p = C.c_size_t()
        assert buffer_pointer(C.byref(p), b) == OK
        out.append((b, p.value, size, real))
    yield out
    for b, *_ in made:
        assert buffer_destroy(b) == OK
    assert resource_release(res) == OK


def offset_for(r, size):
    return r.choice([0, 0, 1, r.randint(0, max(size, 1)), size, size + 1, max(size - 8, 0),
                     1 << 32, 1 << 62, 1 << 63, U64 - 1, U64 - 8])


# ---- view_create and slices

def check_slices(r, v, base, size, ptr, shape, strides, item, where):
    nd = len(shape)
    for _ in range(3):
        starts, stops, steps, want = [], [], [], True
        lens, first = [], 0
        for e, s in zip(shape, strides):
            if r.random() < 0.85:                  # what slice.indices(e) gives
                step = r.choice([1, 1, 2, 3, -1, -2, e + 1, -(e + 1), I64_MAX, I64_MIN,
                                 r.randint(-5, 5) or 1])
                a, b, step = slice(r.randint(-e - 2, e + 2), r.randint(-e - 2, e + 2),
                                   step).indices(e)
            else:                                  # anything: the library must refuse
                step = r.choice([0, 1, -1, 2, I64_MIN])
                a = r.choice([-2, -1, 0, e - 1, e, e + 1, I64_MIN, I64_MAX])
                b = r.choice([-2, -1, 0, e - 1, e, e + 1])
            if step == 0:
                ok = False
            elif step > 0:
                ok = 0 <= a <= e and 0 <= b <= e
            else:
                ok = -1 <= a < e and -1 <= b < e
            n = 0
            if ok:
                n = len(range(a, b, step))
                if not I64_MIN <= s * step <= I64_MAX and n > 1:
                    ok = False
            want &= ok
            starts.append(a)
            stops.append(b)
            steps.append(step)
            lens.append(n)
        if any(not I64_MIN <= x <= I64_MAX for x in starts + stops + steps):
            continue
        out = P()
        st = view_slice(C.byref(out), v, nd, arr64(starts), arr64(stops), arr64(steps))
        assert (st == OK) == want, (where, starts, stops, steps, st)
        if st != OK:
            assert st == EINVAL and not out.value
            continue
        cshape, cstrides = dims(out, nd)
        assert cshape == lens, (where, starts, stops, steps)
        for d in range(nd):
            prod = strides[d] * steps[d]
            assert cstrides[d] == (prod if I64_MIN <= prod <= I64_MAX else strides[d])
        p, nb = info(out)
        n = math.prod(lens)
        assert nb == n * item
        if n:
            first = sum(a * s for a, s in zip(starts, strides))
            assert p == ptr + first * item, (where, starts, steps)
            lo, hi = span(p, lens, cstrides, item)
            assert base <= lo and hi <= base + size, (where, starts, stops, steps)
        else:
            assert p == ptr
        assert view_release(out) == OK


def test_view_create_and_slices_agree_with_exact_arithmetic(buffers):
    r = random.Random(SEED)
    accepted = refused = 0
    for case in range(int(4000 * SCALE)):
        b, base, size, real = r.choice(buffers)
        code, bits = r.choice(DTYPES)
        item = bits // 8
        shape, strides = layout(r)
        offset = offset_for(r, size)
        where = f"seed {SEED} case {case}: buffer {size}, {code}/{bits}, shape {shape}, " \
                f"strides {strides}, offset {offset}"
        lay = reach(shape, strides, item)
        want = lay is not None and offset <= size
        if want and lay[0]:
            want = offset + lay[1] >= 0 and offset + lay[2] <= size
        if not all(I64_MIN <= x <= I64_MAX for x in shape + (strides or [])):
            continue
        v = P()
        st = view_create(C.byref(v), b, offset, code, bits, len(shape), arr64(shape),
                         arr64(strides) if strides is not None else None, 0)
        assert (st == OK) == want, (where, st, lay)
        if st != OK:
            assert st == EINVAL and not v.value, where
            refused += 1
            continue
        accepted += 1
        p, nb = info(v)
        assert p == base + offset, where
        assert nb == lay[0] * item, where
        sh, es = dims(v, len(shape))
        assert sh == shape and es == elem_strides(shape, strides), where
        if lay[0]:   # every element inside the buffer
            lo, hi = span(p, shape, es, item)
            assert base <= lo and hi <= base + size, where
        check_slices(r, v, base, size, p, shape, es, item, where)
        assert view_release(v) == OK
    assert accepted > 500 and refused > 500, (accepted, refused)


# ---- DLPack import of untrusted tensors, and the lazy mirror

ADDR = [0, 1, 0x1000, 0x7f0000000000, 1 << 63, U64 - 1, U64 - 16, U64 - 4096]


def test_dltensor_import_agrees_with_exact_arithmetic():
    r = random.Random(SEED + 1)
    accepted = refused = 0
    for case in range(int(4000 * SCALE)):
        code, bits = r.choice(DTYPES)
        item = bits // 8
        shape, strides = layout(r)
        if not all(I64_MIN <= x <= I64_MAX for x in shape + (strides or [])):
            continue
        data = min(max(_near(r, ADDR, 64), 0), U64 - 1)
        boff = r.choice([0, 0, 0, 8, 1 << 20, I64_MAX - 8, I64_MAX, 1 << 63, U64 - 1])
        lay = reach(shape, strides, item)
        want = lay is not None
        if want:
            n, blo, bend = lay
            first = data + boff
            want = (not (n and data == 0) and boff <= I64_MAX and boff + bend <= I64_MAX
                    and first < U64 and (not n or (first + blo >= 0 and first + bend <= U64)))
        t = DLTensor(data or None, 1, 0, len(shape), code, bits, 1)
        sh = arr64(shape)
        st_arr = arr64(strides) if strides is not None else None
        t.shape = C.cast(sh, I64P)
        t.strides = C.cast(st_arr, I64P) if st_arr is not None else None
        t.byte_offset = boff
        v = P()
        st = view_from_dltensor(C.byref(v), C.byref(t), 0)
        where = f"seed {SEED + 1} case {case}: data {data:#x}, byte_offset {boff}, " \
                f"{code}/{bits}, shape {shape}, strides {strides}"
        assert (st == OK) == want, (where, st, lay)
        if st != OK:
            assert st == EDLPACK and not v.value, where
            refused += 1
            continue
        accepted += 1
        p, nb = info(v)
        assert p == data + boff and nb == lay[0] * item, where
        assert view_release(v) == OK
    assert accepted > 300 and refused > 300, (accepted, refused)


class _CAI:
    def __init__(self, d):
        self.__cuda_array_interface__ = d


def test_lazy_views_agree_with_the_c_import():
    r = random.Random(SEED + 2)
    lazy = agreed = 0
    typestr = {(UINT, 8): "|u1", (UINT, 16): "<u2", (FLOAT, 32): "<f4", (FLOAT, 64): "<f8",
               (COMPLEX, 128): "<c16"}
    for case in range(int(1500 * SCALE)):
        cb = r.choice(DTYPES)
        item = cb[1] // 8
        shape, strides = layout(r)
        if any(e < 0 for e in shape):
            continue
        data = min(max(_near(r, ADDR[1:], 64), 1), U64 - 1)
        byte_strides = None if strides is None else [s * item for s in strides]
        obj = _CAI({"shape": tuple(shape), "typestr": typestr[cb], "data": (data, False),
                    "strides": None if byte_strides is None else tuple(byte_strides),
                    "version": 3})
        lay = reach(shape, strides, item)
        want = lay is not None and (not lay[0] or (data + lay[1] >= 0 and data + lay[2] <= U64))
        where = f"seed {SEED + 2} case {case}: data {data:#x}, shape {shape}, strides {strides}"
        try:
            v = cuabi.from_dlpack(obj)
        except BufferError:
            assert not want, where
            continue
        except (ValueError, OverflowError):        # the interface itself cannot be described
            assert any(not I64_MIN <= x <= I64_MAX for x in shape + (byte_strides or [])), where
            continue
        assert want, where
        lazy += v.lazy
        v.handle                                   # a lazy view's C view: never refused now
        assert v.nbytes == lay[0] * item and v.ptr == data, where
        agreed += 1
        v.close()
    assert agreed > 200 and lazy > 100, (agreed, lazy)


# ---- buffer ranges and argument-pack layouts

def test_copy_and_memset_ranges_agree_with_exact_arithmetic(buffers):
    r = random.Random(SEED + 3)
    real = [(b, size) for b, _p, size, is_real in buffers if is_real]
    for case in range(int(3000 * SCALE)):
        (d, dsize), (s, ssize) = r.choice(real), r.choice(real)
        doff, soff = offset_for(r, dsize), offset_for(r, ssize)
        n = r.choice([0, 1, 8, dsize, ssize, max(dsize - doff, 0), U64 - 1, U64 - doff % U64,
                      1 << 63])
        n %= U64
        want = doff + n <= dsize and soff + n <= ssize
        st = buffer_copy(d, doff, s, soff, n, None)
        assert (st == OK) == want, (f"seed {SEED + 3} case {case}", dsize, doff, ssize, soff, n)
        width = r.choice([1, 2, 4])
        count = r.choice([0, 1, 3, dsize // width, U64 // width, (U64 // width) + 1,
                          (1 << 62) + 1]) % U64
        off = r.choice([0, width, 1, dsize, dsize - width if dsize >= width else 0, U64 - width])
        want = off % width == 0 and count * width < U64 and off + count * width <= dsize
        st = buffer_memset(d, off, 0, width, count, None)
        assert (st == OK) == want, (f"seed {SEED + 3} case {case}", dsize, off, width, count)


def pack_layout(sizes):
    """The blob size cuabi_argpack_create_from_sizes must lay out (raw slots
    aligned to the largest power of two dividing their size, at most 8), or
    None when it does not fit in a size_t."""
    end, most, offsets = 0, 1, []
    for s in sizes:
        a = 1
        while a < 8 and s % (a * 2) == 0:
            a *= 2
        if end + a - 1 >= U64 or -(-end // a) * a == U64 - 1:
            return None
        end = -(-end // a) * a
        offsets.append(end)
        end += s
        if end >= U64:
            return None
        most = max(most, a)
    if end + most - 1 >= U64 or -(-end // most) * most == U64 - 1:
        return None
    return -(-end // most) * most, offsets


def test_argpack_layouts_agree_with_exact_arithmetic():
    r = random.Random(SEED + 4)
    checked = 0
    for case in range(int(2000 * SCALE)):
        n = r.randint(1, 4)
        sizes = [r.choice([1, 2, 3, 4, 8, 12, 16, r.randint(1, 40), U64 - 1, U64 - 8, U64 - 16,
                           1 << 63, (1 << 63) + 8, 1 << 62]) for _ in range(n)]
        want = pack_layout(sizes)
        if want is not None and want[0] > 1 << 24:
            continue                  # valid but large: its storage is really allocated
        p = P()
        st = argpack_from_sizes(C.byref(p), (SZ * n)(*sizes), None, n)
        assert (st == OK) == (want is not None), (f"seed {SEED + 4} case {case}", sizes, st)
        if st != OK:
            assert st == EINVAL, (sizes, st)
            continue
        blob, off = SZ(), SZ()
        assert argpack_blob_size(C.byref(blob), p) == OK and blob.value == want[0]
        for i in range(n):
            assert argpack_slot_offset(C.byref(off), p, i) == OK and off.value == want[1][i]
        assert argpack_release(p) == OK
        checked += 1
    assert checked > 300
