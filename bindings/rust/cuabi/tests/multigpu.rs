//! IPC descriptors without a GPU (issue 15): framing errors come before the
//! driver, and host memory cannot be exported.
use cuabi::{ipc_descriptor_kind, sys, Buffer, Event, MemoryResource, IPC_DESCRIPTOR_SIZE};

#[test]
fn bad_descriptors_are_ipc_errors() {
    assert_eq!(IPC_DESCRIPTOR_SIZE, 136);
    let junk = vec![0x41u8; IPC_DESCRIPTOR_SIZE];
    let e = Buffer::ipc_import(&junk).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_IPC, "{e}");
    assert!(e.message.contains("not a cuabi IPC descriptor"), "{e}");
    let mut t = b"CUABIIPC".to_vec();
    t.extend_from_slice(&[1, 0, 1, 0]);
    let e = Event::ipc_import(&t).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_IPC, "{e}");
    assert!(e.message.contains("truncated"), "{e}");
    assert_eq!(ipc_descriptor_kind(&t).unwrap_err().status, sys::CUABI_ERROR_IPC);
}

#[test]
fn host_memory_is_not_exportable() {
    let b = MemoryResource::host().unwrap().allocate(64, 0, None).unwrap();
    let e = b.ipc_export().unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_IPC, "{e}");
}
