//! IPC descriptors without a GPU (issue 15): framing errors come before the
//! driver, and host memory cannot be exported.
use cuabi::{ipc_descriptor_kind, ipc_receive_fd, ipc_send_fd, sys, Buffer, Event, MemoryResource, IPC_DESCRIPTOR_SIZE};
use std::os::fd::AsFd;

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

#[test]
fn pool_descriptors_and_fds_without_a_gpu() {
    // A legacy descriptor's frame check runs before the pool is looked at.
    let host = MemoryResource::host().unwrap();
    let junk = vec![0x41u8; IPC_DESCRIPTOR_SIZE];
    let e = Buffer::ipc_pool_import(&host, &junk).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_IPC, "{e}");
    assert!(e.message.contains("not a pool mapped"), "{e}");
    let (role, id) = host.ipc_pool_info().unwrap();
    assert_eq!(role, sys::CUABI_IPC_POOL_NONE);
    assert_eq!(id, 0);
    assert_eq!(host.ipc_pool_export().unwrap_err().status, sys::CUABI_ERROR_IPC);
    // An fd and bytes over a unix socket.
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let file = std::fs::File::open("/dev/null").unwrap();
    ipc_send_fd(a.as_fd(), file.as_fd(), b"pool").unwrap();
    let (fd, data) = ipc_receive_fd(b.as_fd(), 4).unwrap();
    assert_eq!(data, b"pool");
    drop(fd);
    drop(a);
    assert_eq!(ipc_receive_fd(b.as_fd(), 4).unwrap_err().status, sys::CUABI_ERROR_IO);
}

#[test]
fn batch_ipc_without_a_gpu() {
    // Host memory is not exportable: the batch names the element.
    let host = MemoryResource::host().unwrap();
    let a = host.allocate(64, 0, None).unwrap();
    let b = host.allocate(64, 0, None).unwrap();
    let e = Buffer::ipc_export_many(&[&a, &b]).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_IPC, "{e}");
    assert!(e.message.contains("buffers[0]"), "{e}");
    assert_eq!(Buffer::ipc_export_many(&[]).unwrap_err().status, sys::CUABI_ERROR_INVALID_ARGUMENT);
    // Imports: whole descriptors only, into a mapped pool only.
    assert_eq!(Buffer::ipc_pool_import_many(&host, &[]).unwrap_err().status,
               sys::CUABI_ERROR_INVALID_ARGUMENT);
    assert_eq!(Buffer::ipc_pool_import_many(&host, &[0u8; IPC_DESCRIPTOR_SIZE + 1]).unwrap_err().status,
               sys::CUABI_ERROR_INVALID_ARGUMENT);
    let e = Buffer::ipc_pool_import_many(&host, &vec![0x41u8; 2 * IPC_DESCRIPTOR_SIZE]).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_IPC, "{e}");
    assert!(e.message.contains("not a pool mapped"), "{e}");
}
