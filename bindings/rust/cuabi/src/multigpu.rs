//! Several GPUs and processes (issue 15): peer access and attributes, peer
//! copies of buffers and strided views, pool access from other devices, and
//! IPC descriptors for buffers and events, and IPC-enabled pools (see
//! cuabi/peer.h, cuabi/ipc.h).
use crate::device::Device;
use crate::error::{check, Error, Result};
use crate::event::Event;
use crate::memory::{Buffer, MemoryResource};
use crate::stream::Stream;
use crate::sys;
use crate::view::View;

/// Bytes of every IPC descriptor.
pub const IPC_DESCRIPTOR_SIZE: usize = sys::CUABI_IPC_DESCRIPTOR_SIZE as usize;
pub use crate::enums::{IpcKind, IpcPoolRole, PeerAccess, PeerAttribute};

/// An exported pool: its file descriptor (owned, closed on drop) and its
/// descriptor. Send both to the importer (`ipc_send_fd` over a unix socket).
#[derive(Debug)]
pub struct IpcPoolHandle {
    fd: std::os::fd::OwnedFd,
    pub descriptor: Vec<u8>,
}

impl IpcPoolHandle {
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }
    /// The fd, now the caller's.
    pub fn into_fd(self) -> std::os::fd::OwnedFd {
        self.fd
    }
}

use crate::memory::opt_stream;

impl Device {
    /// Let kernels on `self` reach memory allocated on `peer` (one direction;
    /// enabling twice is fine). `Status::PEER_ACCESS` when the pair cannot.
    pub fn enable_peer_access(&self, peer: &Device) -> Result<()> {
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_peer_enable(self.as_raw(), peer.as_raw()) })
    }

    pub fn disable_peer_access(&self, peer: &Device) -> Result<()> {
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_peer_disable(self.as_raw(), peer.as_raw()) })
    }

    /// One attribute of the direction `self` -> `peer` (the devices must differ).
    pub fn peer_attribute(&self, peer: &Device, attribute: impl Into<PeerAttribute>) -> Result<i32> {
        let attribute: PeerAttribute = attribute.into();
        let mut v = 0;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_peer_get_attribute(&mut v, self.as_raw(), peer.as_raw(), attribute.to_raw()) })?;
        Ok(v)
    }
}

impl MemoryResource {
    /// Device memory other processes can import (cuMemAlloc; not stream-ordered).
    pub fn ipc(device: &Device) -> Result<MemoryResource> {
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        MemoryResource::create(|o| unsafe { sys::cuabi_ipc_memory_resource(o, device.as_raw()) })
    }

    /// Set the access `device` has to this pool's memory.
    pub fn set_peer_access(&self, device: &Device, access: impl Into<PeerAccess>) -> Result<()> {
        let access: PeerAccess = access.into();
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_peer_set_pool_access(self.as_raw(), device.as_raw(), access.to_raw()) })
    }

    /// An IPC-enabled stream-ordered pool (POSIX fd handles): allocate as from
    /// any pool, export it once with [`MemoryResource::ipc_pool_export`], its
    /// buffers with [`Buffer::ipc_export`]. `max_size` 0 is the driver's default.
    pub fn ipc_pool(device: &Device, max_size: u64, release_threshold: Option<u64>) -> Result<MemoryResource> {
        let mut o = sys::cuabi_ipc_pool_options::default();
        // SAFETY: a local the init function fills.
        check(unsafe { sys::cuabi_ipc_pool_options_init(&mut o, sys::CUABI_IPC_POOL_OPTIONS_VERSION) })?;
        o.max_size = max_size;
        if let Some(t) = release_threshold {
            o.release_threshold = t;
        }
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        MemoryResource::create(|out| unsafe { sys::cuabi_ipc_pool_create(out, device.as_raw(), &o) })
    }

    /// Export an IPC pool: a new fd and the pool's descriptor.
    pub fn ipc_pool_export(&self) -> Result<IpcPoolHandle> {
        use std::os::fd::FromRawFd;
        let mut fd = -1;
        let mut d = vec![0u8; IPC_DESCRIPTOR_SIZE];
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_ipc_pool_export(&mut fd, d.as_mut_ptr(), d.len(), self.as_raw()) })?;
        // SAFETY: the call succeeded and handed us a new descriptor.
        Ok(IpcPoolHandle { fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }, descriptor: d })
    }

    /// Map a pool another process exported (the fd is not closed or kept): a
    /// resource that receives its buffers ([`Buffer::ipc_pool_import`]) and
    /// cannot allocate. A pool is mapped once per process.
    pub fn ipc_pool_import(fd: std::os::fd::BorrowedFd<'_>, descriptor: &[u8]) -> Result<MemoryResource> {
        use std::os::fd::AsRawFd;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        MemoryResource::create(|o| unsafe {
            sys::cuabi_ipc_pool_import(o, fd.as_raw_fd(), descriptor.as_ptr(), descriptor.len())
        })
    }

    /// What this resource is to pool IPC, and the pool's id (0 for none).
    pub fn ipc_pool_info(&self) -> Result<(IpcPoolRole, u64)> {
        let mut role = sys::CUABI_IPC_POOL_NONE;
        let mut id = 0u64;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_ipc_pool_info(&mut role, &mut id, self.as_raw()) })?;
        Ok((role.into(), id))
    }

    pub fn peer_access(&self, device: &Device) -> Result<PeerAccess> {
        let mut v = sys::CUABI_PEER_ACCESS_NONE;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_peer_get_pool_access(&mut v, self.as_raw(), device.as_raw()) })?;
        Ok(v.into())
    }
}

impl Buffer {
    /// Copy `size` bytes of device memory from `src` (any device) into
    /// `self` (cuMemcpyPeer); with a stream of either device, ordered on it
    /// (and waited for before either buffer's memory goes).
    pub fn copy_peer(&mut self, dst_offset: usize, src: &Buffer, src_offset: usize, size: usize,
                     stream: Option<&Stream>) -> Result<()> {
        self.check_writable("copy_peer")?;
        if stream.is_none() {
            self.wait_pending()?;
            src.wait_pending()?;
        }
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe {
            sys::cuabi_peer_copy(self.as_raw(), dst_offset, src.as_raw(), src_offset, size, opt_stream(stream))
        })?;
        self.after_queued(stream)?;
        src.after_queued(stream)
    }

    /// The buffer's IPC descriptor, for [`Buffer::ipc_import`] (cuMemAlloc
    /// memory) or [`Buffer::ipc_pool_import`] (a buffer of an IPC pool) in
    /// another process of this host. Keep `self` alive while importers use
    /// the memory (they free their imports first).
    pub fn ipc_export(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; IPC_DESCRIPTOR_SIZE];
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_ipc_buffer_export(out.as_mut_ptr(), out.len(), self.as_raw()) })?;
        Ok(out)
    }

    /// Map memory another process exported; the mapping lasts until this
    /// buffer and its views are gone. `Status::IPC` for a malformed, stale,
    /// other-host or same-process descriptor.
    pub fn ipc_import(descriptor: &[u8]) -> Result<Buffer> {
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        Buffer::create(|o| unsafe { sys::cuabi_ipc_buffer_import(o, descriptor.as_ptr(), descriptor.len()) })
    }

    /// Import a buffer of the pool `pool` maps (cuMemPoolImportPointer); the
    /// import is freed when this buffer and its views are gone. `Status::IPC`
    /// for a bad descriptor or one of another pool.
    pub fn ipc_pool_import(pool: &MemoryResource, descriptor: &[u8]) -> Result<Buffer> {
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        Buffer::create(|o| unsafe {
            sys::cuabi_ipc_pool_buffer_import(o, pool.as_raw(), descriptor.as_ptr(), descriptor.len())
        })
    }

    /// The IPC descriptors of many buffers in one call, end to end
    /// (`IPC_DESCRIPTOR_SIZE` bytes each; cuabi_ipc_buffers_export): what
    /// [`Buffer::ipc_export`] gives for each. 1 to 65536 buffers.
    pub fn ipc_export_many(buffers: &[&Buffer]) -> Result<Vec<u8>> {
        let mut raw: Vec<*mut sys::cuabi_buffer> = buffers.iter().map(|b| b.as_raw()).collect();
        let mut out = vec![0u8; buffers.len().saturating_mul(IPC_DESCRIPTOR_SIZE)];
        // SAFETY: `raw` holds `buffers.len()` live handles (borrowed for the call), `out` has room
        // for that many descriptors; both are read or written during the call only.
        check(unsafe {
            sys::cuabi_ipc_buffers_export(out.as_mut_ptr(), out.len(), raw.as_mut_ptr(), raw.len())
        })?;
        Ok(out)
    }

    /// Import many buffers of the pool `pool` maps from their descriptors
    /// laid end to end (cuabi_ipc_pool_buffers_import), all or nothing:
    /// `Status::IPC` naming the refused descriptor, and then no buffer stays
    /// imported.
    pub fn ipc_pool_import_many(pool: &MemoryResource, descriptors: &[u8]) -> Result<Vec<Buffer>> {
        let n = descriptors.len() / IPC_DESCRIPTOR_SIZE;
        if n == 0 || descriptors.len() % IPC_DESCRIPTOR_SIZE != 0 {
            return Err(Error::invalid_argument(
                "Buffer::ipc_pool_import_many: not a whole, nonzero number of descriptors"));
        }
        let mut out = vec![core::ptr::null_mut(); n];
        // SAFETY: `out` has room for `n` handles; `descriptors` is read during the call only.
        check(unsafe {
            sys::cuabi_ipc_pool_buffers_import(out.as_mut_ptr(), core::ptr::null_mut(), pool.as_raw(),
                                               descriptors.as_ptr(), descriptors.len(), n)
        })?;
        out.into_iter()
            .map(|p| {
                // SAFETY: on success every entry is a new buffer we own.
                unsafe { Buffer::from_raw(p) }
                    .ok_or_else(|| Error::internal("cuabi_ipc_pool_buffers_import returned NULL"))
            })
            .collect()
    }
}

impl View {
    /// Copy every element of `src` (device memory, any device, same shape
    /// and dtype, strided up to 3-D) into `self` (cuMemcpy3DPeer). `self`
    /// must be device memory, which no host code reads directly (views are
    /// otherwise immutable); a queued copy is waited for before either view
    /// lets go of its memory.
    pub fn copy_peer(&self, src: &View, stream: Option<&Stream>) -> Result<()> {
        if self.info().device_type != sys::kDLCUDA {
            return Err(Error::invalid_argument("View::copy_peer: the destination must be device memory"));
        }
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_peer_copy_view(self.as_raw(), src.as_raw(), opt_stream(stream)) })?;
        self.after_queued(stream)?;
        src.after_queued(stream)
    }
}

impl Event {
    /// An event other processes can import and wait on (interprocess, no timing).
    pub fn ipc(device: &Device) -> Result<Event> {
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        Event::create(|o| unsafe { sys::cuabi_ipc_event_create(o, device.as_raw()) })
    }

    pub fn ipc_export(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; IPC_DESCRIPTOR_SIZE];
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_ipc_event_export(out.as_mut_ptr(), out.len(), self.as_raw()) })?;
        Ok(out)
    }

    pub fn ipc_import(descriptor: &[u8]) -> Result<Event> {
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        Event::create(|o| unsafe { sys::cuabi_ipc_event_import(o, descriptor.as_ptr(), descriptor.len()) })
    }
}

/// Check a descriptor's framing (no driver needed) and say what it describes.
pub fn ipc_descriptor_kind(descriptor: &[u8]) -> Result<IpcKind> {
    let mut k = sys::CUABI_IPC_MEMORY;
    // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
    // are read during the call only (common.h: "reads or writes the memory its pointer
    // parameters name only during the call").
    check(unsafe { sys::cuabi_ipc_descriptor_kind(&mut k, descriptor.as_ptr(), descriptor.len()) })?;
    Ok(k.into())
}

/// Send a file descriptor and `data` (a pool descriptor) in one message over
/// a connected unix socket (SCM_RIGHTS). The fd stays the caller's.
pub fn ipc_send_fd(socket: std::os::fd::BorrowedFd<'_>, fd: std::os::fd::BorrowedFd<'_>, data: &[u8]) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
    // are read during the call only (common.h: "reads or writes the memory its pointer
    // parameters name only during the call").
    check(unsafe { sys::cuabi_ipc_fd_send(socket.as_raw_fd(), fd.as_raw_fd(), data.as_ptr(), data.len()) })
}

/// Receive what [`ipc_send_fd`] sent: a new fd (close-on-exec) and exactly
/// `size` bytes.
pub fn ipc_receive_fd(socket: std::os::fd::BorrowedFd<'_>, size: usize) -> Result<(std::os::fd::OwnedFd, Vec<u8>)> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut fd = -1;
    let mut d = vec![0u8; size];
    // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
    // are read during the call only (common.h: "reads or writes the memory its pointer
    // parameters name only during the call").
    check(unsafe { sys::cuabi_ipc_fd_receive(&mut fd, d.as_mut_ptr(), d.len(), socket.as_raw_fd()) })?;
    // SAFETY: the call succeeded and handed us a new descriptor.
    Ok((unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }, d))
}
