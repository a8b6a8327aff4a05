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
pub use multigpu::{
    ipc_descriptor_kind, ipc_receive_fd, ipc_send_fd, IpcKind, IpcPoolHandle, IpcPoolRole, PeerAccess,
    PeerAttribute, IPC_DESCRIPTOR_SIZE,
};
