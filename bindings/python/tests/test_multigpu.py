"""Peers and IPC without a GPU (issue 15): descriptors are checked before the
driver is asked, so malformed, truncated, corrupt and other-host descriptors
fail with IPCError everywhere; host memory does not pickle."""
import pickle
import struct

import pytest

import cuabi


def _fake_descriptor(version=1, host=None, size=cuabi._capi.CUABI_IPC_DESCRIPTOR_SIZE):
    d = bytearray(b"CUABIIPC" + struct.pack("<HHI", version, 1, 136) + bytes(128))
    if host is not None:
        d[24:32] = struct.pack("<Q", host)
    # FNV-1a over bytes 0..127, as the library seals it
    h = 0xcbf29ce484222325
    for b in d[:128]:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    d[128:136] = struct.pack("<Q", h)
    return bytes(d[:size])


def test_status_codes_and_exception_names():
    assert cuabi._capi.CUABI_ERROR_PEER_ACCESS == 37
    assert cuabi._capi.CUABI_ERROR_IPC == 38
    assert cuabi.ERRORS[38].__name__ == "IPCError"
    assert cuabi.ERRORS[37].__name__ == "PeerAccessError"


@pytest.mark.parametrize("desc, needle", [
    (b"", "descriptor is NULL"),
    (b"garbage!" * 17, "not a cuabi IPC descriptor"),
    (b"CUABIIPC\x01", "truncated"),
    (_fake_descriptor(size=100), "truncated"),
    (_fake_descriptor() + b"\0", "trailing"),
    (_fake_descriptor(version=7), "version 7"),
    (_fake_descriptor()[:50] + b"\xff" + _fake_descriptor()[51:], "corrupt"),
    (_fake_descriptor(host=12345), "another host"),
])
def test_bad_descriptors_raise(desc, needle):
    exc = cuabi.ERRORS[cuabi._capi.CUABI_ERROR_INVALID_ARGUMENT] if not desc else cuabi.IPCError
    with pytest.raises(exc) as e:
        cuabi.Buffer.from_ipc_descriptor(desc)
    assert needle in str(e.value)
    if desc:
        with pytest.raises(cuabi.IPCError):
            cuabi.Event.from_ipc_descriptor(desc)


def test_host_memory_does_not_pickle():
    with cuabi.Buffer(64, cuabi.MemoryResource.host()) as b:
        with pytest.raises(cuabi.IPCError, match="device memory"):
            b.get_ipc_descriptor()
        with pytest.raises(cuabi.IPCError):
            pickle.dumps(b)
