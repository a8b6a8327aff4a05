//! Several GPUs and processes (issue 15): peer access and attributes, peer
//! copies of buffers and strided views, pool access from other devices, and
//! IPC descriptors for buffers and events (see cuabi/peer.h, cuabi/ipc.h).
use crate::device::Device;
use crate::error::{check, Result};
use crate::event::Event;
use crate::memory::{Buffer, MemoryResource};
use crate::stream::Stream;
use crate::sys;
use crate::view::View;

/// Bytes of every IPC descriptor.
pub const IPC_DESCRIPTOR_SIZE: usize = sys::CUABI_IPC_DESCRIPTOR_SIZE as usize;
/// One attribute of a device pair (`cuabi_peer_attribute`).
pub type PeerAttribute = sys::cuabi_peer_attribute;
/// Access a device has to a pool (`cuabi_peer_access`).
pub type PeerAccess = sys::cuabi_peer_access;
/// What an IPC descriptor describes (`cuabi_ipc_kind`).
pub type IpcKind = sys::cuabi_ipc_kind;

fn opt_stream(s: Option<&Stream>) -> *mut sys::cuabi_stream {
    s.map_or(core::ptr::null_mut(), |s| s.as_raw())
}

impl Device {
    /// Let kernels on `self` reach memory allocated on `peer` (one direction;
    /// enabling twice is fine). `Status::PEER_ACCESS` when the pair cannot.
    pub fn enable_peer_access(&self, peer: &Device) -> Result<()> {
        check(unsafe { sys::cuabi_peer_enable(self.as_raw(), peer.as_raw()) })
    }

    pub fn disable_peer_access(&self, peer: &Device) -> Result<()> {
        check(unsafe { sys::cuabi_peer_disable(self.as_raw(), peer.as_raw()) })
    }

    /// One attribute of the direction `self` -> `peer` (the devices must differ).
    pub fn peer_attribute(&self, peer: &Device, attribute: PeerAttribute) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::cuabi_peer_get_attribute(&mut v, self.as_raw(), peer.as_raw(), attribute) })?;
        Ok(v)
    }
}

impl MemoryResource {
    /// Device memory other processes can import (cuMemAlloc; not stream-ordered).
    pub fn ipc(device: &Device) -> Result<MemoryResource> {
        MemoryResource::create(|o| unsafe { sys::cuabi_ipc_memory_resource(o, device.as_raw()) })
    }

    /// Set the access `device` has to this pool's memory.
    pub fn set_peer_access(&self, device: &Device, access: PeerAccess) -> Result<()> {
        check(unsafe { sys::cuabi_peer_set_pool_access(self.as_raw(), device.as_raw(), access) })
    }

    pub fn peer_access(&self, device: &Device) -> Result<PeerAccess> {
        let mut v = sys::CUABI_PEER_ACCESS_NONE;
        check(unsafe { sys::cuabi_peer_get_pool_access(&mut v, self.as_raw(), device.as_raw()) })?;
        Ok(v)
    }
}

impl Buffer {
    /// Copy `size` bytes of device memory from `src` (any device) into
    /// `self` (cuMemcpyPeer); with a stream of either device, ordered on it.
    pub fn copy_peer(&self, dst_offset: usize, src: &Buffer, src_offset: usize, size: usize,
                     stream: Option<&Stream>) -> Result<()> {
        check(unsafe {
            sys::cuabi_peer_copy(self.as_raw(), dst_offset, src.as_raw(), src_offset, size, opt_stream(stream))
        })
    }

    /// The buffer's IPC descriptor, for [`Buffer::ipc_import`] in another
    /// process of this host. Keep `self` alive while importers use the memory.
    pub fn ipc_export(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; IPC_DESCRIPTOR_SIZE];
        check(unsafe { sys::cuabi_ipc_buffer_export(out.as_mut_ptr(), out.len(), self.as_raw()) })?;
        Ok(out)
    }

    /// Map memory another process exported; the mapping lasts until this
    /// buffer and its views are gone. `Status::IPC` for a malformed, stale,
    /// other-host or same-process descriptor.
    pub fn ipc_import(descriptor: &[u8]) -> Result<Buffer> {
        Buffer::create(|o| unsafe { sys::cuabi_ipc_buffer_import(o, descriptor.as_ptr(), descriptor.len()) })
    }
}

impl View {
    /// Copy every element of `src` (device memory, any device, same shape
    /// and dtype, strided up to 3-D) into `self` (cuMemcpy3DPeer).
    pub fn copy_peer(&self, src: &View, stream: Option<&Stream>) -> Result<()> {
        check(unsafe { sys::cuabi_peer_copy_view(self.as_raw(), src.as_raw(), opt_stream(stream)) })
    }
}

impl Event {
    /// An event other processes can import and wait on (interprocess, no timing).
    pub fn ipc(device: &Device) -> Result<Event> {
        Event::create(|o| unsafe { sys::cuabi_ipc_event_create(o, device.as_raw()) })
    }

    pub fn ipc_export(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; IPC_DESCRIPTOR_SIZE];
        check(unsafe { sys::cuabi_ipc_event_export(out.as_mut_ptr(), out.len(), self.as_raw()) })?;
        Ok(out)
    }

    pub fn ipc_import(descriptor: &[u8]) -> Result<Event> {
        Event::create(|o| unsafe { sys::cuabi_ipc_event_import(o, descriptor.as_ptr(), descriptor.len()) })
    }
}

/// Check a descriptor's framing (no driver needed) and say what it describes.
pub fn ipc_descriptor_kind(descriptor: &[u8]) -> Result<IpcKind> {
    let mut k = sys::CUABI_IPC_MEMORY;
    check(unsafe { sys::cuabi_ipc_descriptor_kind(&mut k, descriptor.as_ptr(), descriptor.len()) })?;
    Ok(k)
}
