//! A safe Rust API over libcuabi.
//!
//! * Every handle is an RAII type: dropping it releases the C reference;
//!   `Clone` on shared handles retains another one.
//! * Every fallible call returns [`Result`], whose [`Error`] carries the
//!   status, the library's message (naming the C function) and, for compile
//!   and link failures, the compiler's or linker's log.
//! * cuabi handles are usable from any thread (the library makes the right
//!   CUDA context current itself), so handle types are `Send`; those whose
//!   C functions may also run concurrently on one handle are `Sync`.
//!
//! # Threads and lifetimes
//!
//! Safe Rust never releases a handle while another thread uses it (issue
//! 29 item 7): releasing is `Drop`, which needs the value itself, so no
//! borrow of it -- on this thread or a scoped one -- may be alive;
//! single-owner handles (`Buffer`, `ArgPack`, prepared launches) are not
//! `Clone`, and `Clone` of a shared handle takes a C reference of its own,
//! so each clone releases only its own. Setters that the C side may not run
//! beside a launch take `&mut self`. What a pack names by handle (its
//! `buffer` and `view` slots) it keeps alive itself (see [`ArgPack`]).
//!
//! A buffer cannot be dropped while another thread borrows it:
//!
//! ```compile_fail
//! let buf = cuabi::Buffer::from_vec(vec![0u8; 8]).unwrap();
//! std::thread::scope(|s| {
//!     s.spawn(|| buf.pointer());
//!     drop(buf); // error: cannot move out of `buf` because it is borrowed
//! });
//! ```
//!
//! nor be copied into a second owner:
//!
//! ```compile_fail
//! let buf = cuabi::Buffer::from_vec(vec![0u8; 8]).unwrap();
//! let other = buf.clone(); // error: Buffer is not Clone
//! ```
//!
//! A prepared launch's arguments cannot change while other threads launch it:
//!
//! ```compile_fail
//! fn f(p: &cuabi::PreparedLaunch) {
//!     std::thread::scope(|s| {
//!         s.spawn(|| p.launch());
//!         p.set(0, &1i32); // error: `p` is a `&` reference, set needs `&mut`
//!     });
//! }
//! ```
//!
//! and a pack cannot be shared by two owners either:
//!
//! ```compile_fail
//! let pack = cuabi::ArgPack::new("i32").unwrap();
//! let other = pack.clone(); // error: ArgPack is not Clone
//! ```
//!
//! Sharing a shared handle across threads is an `Arc` or a `Clone`; both
//! release the C reference only when the last owner goes:
//!
//! ```no_run
//! let ev = std::sync::Arc::new(cuabi::Event::new(&cuabi::Device::get(0)?)?);
//! let e2 = ev.clone();
//! std::thread::spawn(move || e2.query()).join().unwrap()?;
//! # Ok::<(), cuabi::Error>(())
//! ```
//!
//! The raw declarations are re-exported as [`sys`].
pub use cuabi_sys as sys;

#[macro_use]
mod handle;
mod error;
mod library;
mod device;
mod stream;
mod event;
mod argpack;

pub use argpack::{ArgInfo, ArgPack, ArgPackBuilder, Bytes, DevicePtr, KernelArg};
pub use device::{Device, DeviceProperties, device_count};
pub use error::{Error, Result, Status};
pub use event::{Event, EventFlags};
pub use library::{
    RuntimeInfo, abi_version, check_layouts, runtime_info, struct_field_offset, struct_size, version,
    version_hex,
};
pub use stream::{Stream, StreamFlags};
mod memory;
mod view;
mod objcode;
mod linker;
mod program;
pub mod cache;
mod launch;
pub mod occupancy;
mod graph;

pub use argpack::{BufferArg, ViewArg};
pub use launch::{
    launch, launch_check, AccessPolicyWindow, AccessProperty, ClusterSchedulingPolicy,
    LaunchAttributes, LaunchConfig, MemSyncDomain, PreparedLaunch,
};
mod tensormap;
pub use tensormap::{
    TensorMap, TensorMapDataType, TensorMapInfo, TensorMapInterleave, TensorMapL2Promotion,
    TensorMapOobFill, TensorMapOptions, TensorMapSwizzle,
};
pub use graph::{
    CaptureMode, CaptureStatus, ConditionalType, Graph, GraphExec, GraphNode, GraphNodeKind,
    InstantiateOptions, UpdateInfo,
};
pub use linker::{Linker, LinkerOptions};
pub use memory::{Buffer, MemoryKind, MemoryResource, Pod};
pub use objcode::{CodeType, Kernel, KernelResources, ObjectCode, ParamType};
pub use occupancy::{ArchLimits, BlockSize, OccupancyOptions, OccupancyResult};
pub use program::{supported_archs, Program, ProgramOptions};
pub use view::{DType, Element, ManagedTensor, ManagedTensorVersioned, View, ViewInfo, IS_COPIED, READ_ONLY};
mod multigpu;
mod memory_ext;
pub use memory_ext::{
    copy_batch, copy_between, copy_item, copy_reason, managed_options, vmm_granularity, vmm_options,
    vmm_supported, CopyItem, CopyResult, LocationType, ManagedAdvice, ManagedOptions, ManagedRange,
    PoolAttribute, PoolStats, VmmInfo, VmmOptions,
};
pub use multigpu::{
    ipc_descriptor_kind, ipc_receive_fd, ipc_send_fd, IpcKind, IpcPoolHandle, IpcPoolRole, PeerAccess,
    PeerAttribute, IPC_DESCRIPTOR_SIZE,
};
