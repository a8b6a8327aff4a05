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
//! ```compile_fail,E0505
//! let buf = cuabi::Buffer::from_vec(vec![0u8; 8]).unwrap();
//! std::thread::scope(|s| {
//!     s.spawn(|| buf.pointer());
//!     drop(buf); // error: cannot move out of `buf` because it is borrowed
//! });
//! ```
//!
//! nor be copied into a second owner:
//!
//! ```compile_fail,E0599
//! let buf = cuabi::Buffer::from_vec(vec![0u8; 8]).unwrap();
//! let other = buf.clone(); // error: Buffer is not Clone
//! ```
//!
//! A prepared launch's arguments cannot change while other threads launch it:
//!
//! ```compile_fail,E0596
//! fn f(p: &cuabi::PreparedLaunch) {
//!     std::thread::scope(|s| {
//!         // SAFETY: (the test is about `set` below)
//!         s.spawn(|| unsafe { p.launch() });
//!         p.set(0, &1i32); // error: `p` is a `&` reference, set needs `&mut`
//!     });
//! }
//! ```
//!
//! and a pack cannot be shared by two owners either:
//!
//! ```compile_fail,E0599
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
//! # Soundness: what safe code cannot do (issue 28)
//!
//! Launching through an [`ArgPack`] is `unsafe` ([`launch`],
//! [`Kernel::launch`], [`PreparedLaunch::launch`], [`Graph::add_kernel`]):
//! a pack holds raw values the library checks only by size. The safe launch
//! is [`Stream::launch_builder`], which checks every argument against the
//! kernel's parameter types and borrows typed [`DeviceSlice`]s (see
//! [`slice`](mod@slice)). So safe code cannot launch without `unsafe`:
//!
//! ```compile_fail,E0133
//! fn f(k: &cuabi::Kernel, p: &cuabi::ArgPack, c: &cuabi::LaunchConfig) {
//!     cuabi::launch(k, p, c).unwrap(); // error: call to unsafe function
//! }
//! ```
//!
//! nor pass a made-up address to a safe launch (`DevicePtr` is no kernel argument there):
//!
//! ```compile_fail,E0277
//! fn f(s: &cuabi::Stream, k: &cuabi::Kernel) {
//!     let p = cuabi::DevicePtr(0xdeadbeef);
//!     s.launch_builder(k).arg(&p); // error: DevicePtr is not a KernelArgument
//! }
//! ```
//!
//! nor drop a slice while a launch being built borrows it:
//!
//! ```compile_fail,E0505
//! fn f(s: &cuabi::Stream, k: &cuabi::Kernel) -> cuabi::Result<()> {
//!     let x = s.alloc_zeros::<f32>(4)?;
//!     let mut b = s.launch_builder(k);
//!     b.arg(&x);
//!     drop(x); // error: cannot move out of `x` because it is borrowed
//!     b.launch(cuabi::LaunchConfig::new(1, 4))
//! }
//! ```
//!
//! nor pass one slice as writable and as anything else in the same launch:
//!
//! ```compile_fail,E0502
//! fn f(s: &cuabi::Stream, k: &cuabi::Kernel) -> cuabi::Result<()> {
//!     let mut x = s.alloc_zeros::<f32>(4)?;
//!     let xr = &x;
//!     s.launch_builder(k).arg(xr).arg(&mut x) // error: cannot borrow `x` as mutable
//!         .launch(cuabi::LaunchConfig::new(1, 4))
//! }
//! ```
//!
//! nor keep a sub-slice past its slice:
//!
//! ```compile_fail,E0505
//! fn f(s: &cuabi::Stream) -> cuabi::Result<()> {
//!     let x = s.alloc_zeros::<f32>(4)?;
//!     let part = x.slice(1..3)?;
//!     drop(x); // error: cannot move out of `x` because it is borrowed
//!     let _ = part.len();
//!     Ok(())
//! }
//! ```
//!
//! nor begin a capture (whose graph replays the work after its memory may be gone) without `unsafe`:
//!
//! ```compile_fail,E0133
//! fn f(s: &cuabi::Stream) {
//!     s.begin_capture(cuabi::CaptureMode::Global).unwrap(); // error: call to unsafe function
//! }
//! ```
//!
//! Host memory a graph copies into is borrowed by the graph and its
//! executables, whose drop waits for the runs in flight:
//!
//! ```compile_fail,E0505
//! fn f(buf: &cuabi::Buffer, s: &cuabi::Stream) -> cuabi::Result<()> {
//!     let mut host = vec![0u8; 16];
//!     let g = cuabi::Graph::new()?;
//!     g.add_memcpy_to_host(&[], &mut host, buf, 0)?;
//!     let exe = g.instantiate()?;
//!     exe.launch(s)?;
//!     drop(host); // error: cannot move out of `host` because it is borrowed
//!     drop(exe);
//!     Ok(())
//! }
//! ```
//!
//! and the executable carries that borrow, so it cannot outlive the memory either:
//!
//! ```compile_fail,E0597
//! fn f(buf: &cuabi::Buffer) -> cuabi::Result<cuabi::GraphExec<'static>> {
//!     let mut host = vec![0u8; 16];
//!     let g = cuabi::Graph::new()?;
//!     g.add_memcpy_to_host(&[], &mut host, buf, 0)?;
//!     g.instantiate() // error: `host` does not live long enough
//! }
//! ```
//!
//! Writes to memory take `&mut`: a `&Buffer` shared with another thread
//! (that may be reading it) cannot write it:
//!
//! ```compile_fail,E0596
//! fn f(buf: &cuabi::Buffer) {
//!     std::thread::scope(|s| {
//!         s.spawn(|| buf.to_vec::<u8>());
//!         buf.copy_from_host(0, &[1u8, 2, 3]).unwrap(); // error: `buf` is a `&` reference
//!     });
//! }
//! ```
//!
//! and memory another stream still uses is not freed under it: a
//! [`DeviceSlice`] used on a stream other than its own records an event, and
//! its drop makes its stream wait for it before the free; a [`Buffer`] or
//! [`View`] waits for the copies it queued on other streams; a
//! [`GraphExec`] for its runs. The runtime refusals (wrong kinds, a
//! read-only slice for a writable pointer, an `extern "C"` kernel in a
//! safe launch, a write to a buffer whose views are alive) are tested in
//! `tests/soundness.rs`.
//!
//! Every `unsafe` block and `unsafe impl` of this crate carries a
//! `// SAFETY:` comment naming the header sentence it relies on
//! (`clippy::undocumented_unsafe_blocks` is denied). Most calls rely on the
//! same few sentences, which the comments abbreviate:
//!
//! * *"`self` is live"*, *"handles live for the call"*: the Rust value owns
//!   (or borrows an owner of) a C reference, so the handle is valid for the
//!   call -- common.h: "Every handle may be used from any thread ... a handle
//!   released before a call is refused cleanly (CUABI_ERROR_INVALID_HANDLE),
//!   never followed", and each module's sentence on use from several threads
//!   at once (cited where a type is made `Sync`).
//! * *"a local"*, *"read during the call"*: common.h: "A function reads or
//!   writes the memory its pointer parameters name only during the call,
//!   unless its documentation says it is kept". Where it is kept (a copy
//!   queued on a stream, a graph's host copy node, a wrapped buffer's
//!   memory), the comment says what keeps the memory alive.
//! * *"the init function fills"*: each `*_init(opts, version)` "Fill\[s\]
//!   \*opts with the defaults of struct version `version`".
//! * *"borrowed ... copied now"*: strings and arrays the library returns are
//!   "Borrowed: valid while the kernel lives" (argpack.h, objcode.h, view.h:
//!   "valid while the view lives"); each is copied before the borrow ends.
//! * *"ownership transferred"*: an `[out, ownership transferred]` parameter
//!   hands the caller one reference, which the new Rust value owns.
//!
//! The raw declarations are re-exported as [`sys`].
#![deny(clippy::undocumented_unsafe_blocks)]
pub use cuabi_sys as sys;

#[macro_use]
mod handle;
mod enums;
mod error;
mod library;
mod device;
mod stream;
mod event;
mod argpack;
mod track;

pub use argpack::{ArgInfo, ArgPack, ArgPackBuilder, Bytes, DevicePtr, KernelArg};
pub use device::{CurrentGuard, Device, DeviceProperties, device_count};
pub use enums::{
    ArgKind, CodeType, DeviceAttribute, FunctionAttribute, MemoryKind, OccupancyLimiter, ParamSource,
};
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
pub mod slice;

pub use argpack::{BufferArg, ViewArg};
pub use launch::{
    launch, launch_check, AccessPolicyWindow, AccessProperty, ClusterSchedulingPolicy,
    LaunchAttributes, LaunchConfig, MemSyncDomain, PreparedLaunch,
};
pub use slice::{
    DeviceMemory, DeviceMemoryMut, DeviceRepr, DeviceSlice, DeviceView, DeviceViewMut, KernelArgument,
    LaunchArgs,
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
pub use memory::{Buffer, MemoryResource, Pod, ReleaseFn};
pub use objcode::{Kernel, KernelResources, ObjectCode, ParamType};
pub use occupancy::{ArchLimits, BlockSize, OccupancyOptions, OccupancyResult};
pub use program::{supported_archs, Program, ProgramOptions};
pub use view::{DType, Element, ManagedTensor, ManagedTensorVersioned, View, ViewInfo, IS_COPIED, READ_ONLY};
mod texture;
pub use texture::{
    array_desc, region, texture_desc, Array, ArrayDesc, ArrayInfo, ArrayRegion, MipmappedArray,
    StreamMemOp, Surface, Texture, TextureDesc, TextureInfo,
};
pub mod green;
pub mod host;
pub use host::{drop_finished_host_funcs, take_host_panics, HostPanic};
pub mod checkpoint;
pub mod nvml;
mod multigpu;
pub mod nccl;
mod memory_ext;
pub use memory_ext::{
    copy_batch, copy_batch_raw, copy_between, copy_item, copy_reason, managed_options, vmm_granularity, vmm_options,
    vmm_supported, CopyBatch, CopyItem, CopyResult, LocationType, ManagedAdvice, ManagedOptions, ManagedRange,
    PoolAttribute, PoolStats, VmmInfo, VmmOptions,
};
pub use multigpu::{
    ipc_descriptor_kind, ipc_receive_fd, ipc_send_fd, IpcKind, IpcPoolHandle, IpcPoolRole, PeerAccess,
    PeerAttribute, IPC_DESCRIPTOR_SIZE,
};
