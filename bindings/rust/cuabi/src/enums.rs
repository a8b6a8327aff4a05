//! Rust enums for the C API's enumerations.
//!
//! `cuabi-sys` keeps every C enum as an `i32` newtype (a newer library may
//! hand back a value this crate does not know, and an unknown discriminant in
//! a Rust `enum` would be undefined behaviour). Here each one the safe API
//! uses is a real, `#[non_exhaustive]` Rust `enum` that can be matched, with
//! an `Unknown(i32)` variant for such values. Each converts both ways with
//! the `sys` type (`From`) and compares equal to it, so
//! `code.code_type() == sys::CUABI_CODE_PTX` reads as before.
use crate::sys;

macro_rules! rust_enum {
    ($(#[$doc:meta])* $name:ident, $raw:ident { $($(#[$vdoc:meta])* $var:ident = $c:ident),* $(,)? }) => {
        $(#[$doc])*
        #[non_exhaustive]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $var,)*
            /// A value this binding does not know (a newer library's).
            Unknown(i32),
        }

        impl $name {
            /// The Rust value of a C value.
            pub const fn from_raw(v: sys::$raw) -> Self {
                $(if v.0 == sys::$c.0 { return $name::$var; })*
                $name::Unknown(v.0)
            }
            /// The C value.
            pub const fn to_raw(self) -> sys::$raw {
                match self {
                    $($name::$var => sys::$c,)*
                    $name::Unknown(v) => sys::$raw(v),
                }
            }
        }

        impl From<sys::$raw> for $name {
            fn from(v: sys::$raw) -> Self { $name::from_raw(v) }
        }
        impl From<$name> for sys::$raw {
            fn from(v: $name) -> Self { v.to_raw() }
        }
        impl PartialEq<sys::$raw> for $name {
            fn eq(&self, o: &sys::$raw) -> bool { self.to_raw() == *o }
        }
        impl PartialEq<$name> for sys::$raw {
            fn eq(&self, o: &$name) -> bool { *self == o.to_raw() }
        }
    };
}

rust_enum!(
    /// Why a call failed (`cuabi_status` without success); see [`crate::Error`].
    Status, cuabi_status {
        InvalidArgument = CUABI_ERROR_INVALID_ARGUMENT,
        InvalidHandle = CUABI_ERROR_INVALID_HANDLE,
        InvalidVersion = CUABI_ERROR_INVALID_VERSION,
        OutOfMemory = CUABI_ERROR_OUT_OF_MEMORY,
        NotSupported = CUABI_ERROR_NOT_SUPPORTED,
        NotFound = CUABI_ERROR_NOT_FOUND,
        BufferTooSmall = CUABI_ERROR_BUFFER_TOO_SMALL,
        Io = CUABI_ERROR_IO,
        DriverNotFound = CUABI_ERROR_DRIVER_NOT_FOUND,
        NoDevice = CUABI_ERROR_NO_DEVICE,
        EntryPointNotFound = CUABI_ERROR_ENTRY_POINT_NOT_FOUND,
        NvrtcNotFound = CUABI_ERROR_NVRTC_NOT_FOUND,
        NvJitLinkNotFound = CUABI_ERROR_NVJITLINK_NOT_FOUND,
        Cuda = CUABI_ERROR_CUDA,
        DeviceOutOfMemory = CUABI_ERROR_DEVICE_OUT_OF_MEMORY,
        NotReady = CUABI_ERROR_NOT_READY,
        Compile = CUABI_ERROR_COMPILE,
        Link = CUABI_ERROR_LINK,
        InvalidImage = CUABI_ERROR_INVALID_IMAGE,
        Cache = CUABI_ERROR_CACHE,
        LaunchConfig = CUABI_ERROR_LAUNCH_CONFIG,
        ArgumentMismatch = CUABI_ERROR_ARGUMENT_MISMATCH,
        DlPack = CUABI_ERROR_DLPACK,
        Nvrtc = CUABI_ERROR_NVRTC,
        NvJitLink = CUABI_ERROR_NVJITLINK,
        Callback = CUABI_ERROR_CALLBACK,
        Internal = CUABI_ERROR_INTERNAL,
        TensorMap = CUABI_ERROR_TENSOR_MAP,
        GraphUpdate = CUABI_ERROR_GRAPH_UPDATE,
        PeerAccess = CUABI_ERROR_PEER_ACCESS,
        Ipc = CUABI_ERROR_IPC,
        Nccl = CUABI_ERROR_NCCL,
        Timeout = CUABI_ERROR_TIMEOUT,
        StreamCapture = CUABI_ERROR_STREAM_CAPTURE,
        Nvml = CUABI_ERROR_NVML,
    }
);

rust_enum!(
    /// Kinds of code cuabi compiles, links and loads (`cuabi_code_type`).
    CodeType, cuabi_code_type {
        /// Not given: detect it from the bytes.
        None = CUABI_CODE_NONE,
        CudaCxx = CUABI_CODE_CUDA_CXX,
        Ptx = CUABI_CODE_PTX,
        Cubin = CUABI_CODE_CUBIN,
        LtoIr = CUABI_CODE_LTOIR,
        Fatbin = CUABI_CODE_FATBIN,
        Object = CUABI_CODE_OBJECT,
        Library = CUABI_CODE_LIBRARY,
        Nvvm = CUABI_CODE_NVVM,
    }
);

rust_enum!(
    /// Where memory lives (`cuabi_memory_kind`).
    MemoryKind, cuabi_memory_kind {
        /// Plain host memory (no GPU needed).
        Host = CUABI_MEMORY_HOST,
        Device = CUABI_MEMORY_DEVICE,
        /// Page-locked host memory the GPU reaches directly.
        Pinned = CUABI_MEMORY_PINNED,
        Managed = CUABI_MEMORY_MANAGED,
    }
);

impl MemoryKind {
    /// Whether host code can read or write the memory directly.
    pub const fn host_accessible(self) -> bool {
        matches!(self, MemoryKind::Host | MemoryKind::Pinned | MemoryKind::Managed)
    }
}

rust_enum!(
    /// Kinds of kernel parameters and pack slots (`cuabi_arg_kind`).
    ArgKind, cuabi_arg_kind {
        None = CUABI_ARG_NONE,
        I8 = CUABI_ARG_I8, I16 = CUABI_ARG_I16, I32 = CUABI_ARG_I32, I64 = CUABI_ARG_I64,
        U8 = CUABI_ARG_U8, U16 = CUABI_ARG_U16, U32 = CUABI_ARG_U32, U64 = CUABI_ARG_U64,
        F16 = CUABI_ARG_F16, Bf16 = CUABI_ARG_BF16, F32 = CUABI_ARG_F32, F64 = CUABI_ARG_F64,
        C64 = CUABI_ARG_C64, C128 = CUABI_ARG_C128, Bool = CUABI_ARG_BOOL,
        /// A device address.
        Ptr = CUABI_ARG_PTR,
        Buffer = CUABI_ARG_BUFFER,
        View = CUABI_ARG_VIEW,
        Handle = CUABI_ARG_HANDLE,
        TensorMap = CUABI_ARG_TENSORMAP,
        Struct = CUABI_ARG_STRUCT,
        /// Bytes of a known size, type unknown.
        Raw = CUABI_ARG_RAW,
        /// An integer of unknown signedness (a PTX `.u32`).
        Integer = CUABI_ARG_INTEGER,
        /// 8 bytes that may be an integer or an address (a PTX `.u64`).
        IntPtr = CUABI_ARG_INTPTR,
    }
);

rust_enum!(
    /// Where a kernel parameter's type was learnt (`cuabi_param_source`).
    ParamSource, cuabi_param_source {
        /// Nothing tells: only the size is known.
        SizeOnly = CUABI_PARAM_UNKNOWN,
        /// The C++ mangled name: the exact type.
        FromName = CUABI_PARAM_FROM_NAME,
        /// The PTX declaration: integer, float, integer-or-pointer or bytes.
        FromPtx = CUABI_PARAM_FROM_PTX,
    }
);

rust_enum!(
    /// How a stream capture treats unsafe calls of other threads (`cuabi_capture_mode`).
    CaptureMode, cuabi_capture_mode {
        Global = CUABI_CAPTURE_MODE_GLOBAL,
        ThreadLocal = CUABI_CAPTURE_MODE_THREAD_LOCAL,
        Relaxed = CUABI_CAPTURE_MODE_RELAXED,
    }
);

rust_enum!(
    /// Whether a stream is being captured (`cuabi_capture_status`).
    CaptureStatus, cuabi_capture_status {
        None = CUABI_CAPTURE_STATUS_NONE,
        Active = CUABI_CAPTURE_STATUS_ACTIVE,
        Invalidated = CUABI_CAPTURE_STATUS_INVALIDATED,
    }
);

rust_enum!(
    /// What a graph node does (`cuabi_graph_node_kind`).
    GraphNodeKind, cuabi_graph_node_kind {
        Kernel = CUABI_GRAPH_NODE_KERNEL,
        Memcpy = CUABI_GRAPH_NODE_MEMCPY,
        Memset = CUABI_GRAPH_NODE_MEMSET,
        Host = CUABI_GRAPH_NODE_HOST,
        Graph = CUABI_GRAPH_NODE_GRAPH,
        Empty = CUABI_GRAPH_NODE_EMPTY,
        WaitEvent = CUABI_GRAPH_NODE_WAIT_EVENT,
        EventRecord = CUABI_GRAPH_NODE_EVENT_RECORD,
        ExtSemasSignal = CUABI_GRAPH_NODE_EXT_SEMAS_SIGNAL,
        ExtSemasWait = CUABI_GRAPH_NODE_EXT_SEMAS_WAIT,
        MemAlloc = CUABI_GRAPH_NODE_MEM_ALLOC,
        MemFree = CUABI_GRAPH_NODE_MEM_FREE,
        BatchMemOp = CUABI_GRAPH_NODE_BATCH_MEM_OP,
        Conditional = CUABI_GRAPH_NODE_CONDITIONAL,
    }
);

rust_enum!(
    /// Kinds of conditional graph nodes (`cuabi_graph_conditional_type`).
    ConditionalType, cuabi_graph_conditional_type {
        If = CUABI_GRAPH_CONDITIONAL_IF,
        While = CUABI_GRAPH_CONDITIONAL_WHILE,
        Switch = CUABI_GRAPH_CONDITIONAL_SWITCH,
    }
);

rust_enum!(
    /// What an IPC descriptor describes (`cuabi_ipc_kind`).
    IpcKind, cuabi_ipc_kind {
        Memory = CUABI_IPC_MEMORY,
        Event = CUABI_IPC_EVENT,
        Pool = CUABI_IPC_POOL,
        PoolMemory = CUABI_IPC_POOL_MEMORY,
    }
);

rust_enum!(
    /// What a resource is to pool IPC (`cuabi_ipc_pool_role`).
    IpcPoolRole, cuabi_ipc_pool_role {
        None = CUABI_IPC_POOL_NONE,
        Exporter = CUABI_IPC_POOL_EXPORTER,
        Mapped = CUABI_IPC_POOL_MAPPED,
    }
);

rust_enum!(
    /// Access a device has to a pool (`cuabi_peer_access`).
    PeerAccess, cuabi_peer_access {
        None = CUABI_PEER_ACCESS_NONE,
        Read = CUABI_PEER_ACCESS_READ,
        ReadWrite = CUABI_PEER_ACCESS_READ_WRITE,
    }
);

rust_enum!(
    /// One attribute of a device pair (`cuabi_peer_attribute`).
    PeerAttribute, cuabi_peer_attribute {
        PerformanceRank = CUABI_PEER_PERFORMANCE_RANK,
        AccessSupported = CUABI_PEER_ACCESS_SUPPORTED,
        NativeAtomicSupported = CUABI_PEER_NATIVE_ATOMIC_SUPPORTED,
        CudaArrayAccessSupported = CUABI_PEER_CUDA_ARRAY_ACCESS_SUPPORTED,
    }
);

rust_enum!(
    /// What limits a kernel's occupancy (`cuabi_occupancy_limiter`).
    OccupancyLimiter, cuabi_occupancy_limiter {
        None = CUABI_OCCUPANCY_LIMIT_NONE,
        Warps = CUABI_OCCUPANCY_LIMIT_WARPS,
        Registers = CUABI_OCCUPANCY_LIMIT_REGISTERS,
        SharedMemory = CUABI_OCCUPANCY_LIMIT_SHARED_MEMORY,
        Blocks = CUABI_OCCUPANCY_LIMIT_BLOCKS,
        BlockSize = CUABI_OCCUPANCY_LIMIT_BLOCK_SIZE,
    }
);

/// A device attribute (`CUdevice_attribute`): the common ones by name, any
/// other by its value from cuda.h ([`DeviceAttribute::Raw`]).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceAttribute {
    MaxThreadsPerBlock,
    MaxSharedMemoryPerBlock,
    WarpSize,
    MultiprocessorCount,
    ClockRate,
    MemoryClockRate,
    GlobalMemoryBusWidth,
    L2CacheSize,
    MaxThreadsPerMultiprocessor,
    ComputeCapabilityMajor,
    ComputeCapabilityMinor,
    MaxSharedMemoryPerBlockOptin,
    MaxRegistersPerBlock,
    ConcurrentKernels,
    ManagedMemory,
    CooperativeLaunch,
    MemoryPoolsSupported,
    UnifiedAddressing,
    /// Any `CUdevice_attribute` value.
    Raw(i32),
}

impl DeviceAttribute {
    /// The `CUdevice_attribute` value (cuda.h).
    pub const fn to_raw(self) -> i32 {
        match self {
            DeviceAttribute::MaxThreadsPerBlock => 1,
            DeviceAttribute::MaxSharedMemoryPerBlock => 8,
            DeviceAttribute::WarpSize => 10,
            DeviceAttribute::ClockRate => 13,
            DeviceAttribute::MultiprocessorCount => 16,
            DeviceAttribute::ConcurrentKernels => 31,
            DeviceAttribute::MemoryClockRate => 36,
            DeviceAttribute::GlobalMemoryBusWidth => 37,
            DeviceAttribute::L2CacheSize => 38,
            DeviceAttribute::MaxThreadsPerMultiprocessor => 39,
            DeviceAttribute::UnifiedAddressing => 41,
            DeviceAttribute::ComputeCapabilityMajor => 75,
            DeviceAttribute::ComputeCapabilityMinor => 76,
            DeviceAttribute::ManagedMemory => 83,
            DeviceAttribute::CooperativeLaunch => 95,
            DeviceAttribute::MaxSharedMemoryPerBlockOptin => 97,
            DeviceAttribute::MaxRegistersPerBlock => 12,
            DeviceAttribute::MemoryPoolsSupported => 115,
            DeviceAttribute::Raw(v) => v,
        }
    }
}

impl From<i32> for DeviceAttribute {
    fn from(v: i32) -> Self {
        DeviceAttribute::Raw(v)
    }
}

/// A kernel attribute (`CUfunction_attribute`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FunctionAttribute {
    MaxThreadsPerBlock,
    SharedSizeBytes,
    ConstSizeBytes,
    LocalSizeBytes,
    NumRegs,
    PtxVersion,
    BinaryVersion,
    CacheModeCa,
    /// Settable: the dynamic shared memory a launch may ask for.
    MaxDynamicSharedSizeBytes,
    /// Settable: the preferred shared memory carveout in percent.
    PreferredSharedMemoryCarveout,
    /// Any `CUfunction_attribute` value.
    Raw(i32),
}

impl FunctionAttribute {
    /// The `CUfunction_attribute` value (cuda.h).
    pub const fn to_raw(self) -> i32 {
        match self {
            FunctionAttribute::MaxThreadsPerBlock => 0,
            FunctionAttribute::SharedSizeBytes => 1,
            FunctionAttribute::ConstSizeBytes => 2,
            FunctionAttribute::LocalSizeBytes => 3,
            FunctionAttribute::NumRegs => 4,
            FunctionAttribute::PtxVersion => 5,
            FunctionAttribute::BinaryVersion => 6,
            FunctionAttribute::CacheModeCa => 7,
            FunctionAttribute::MaxDynamicSharedSizeBytes => 8,
            FunctionAttribute::PreferredSharedMemoryCarveout => 9,
            FunctionAttribute::Raw(v) => v,
        }
    }
}

impl From<i32> for FunctionAttribute {
    fn from(v: i32) -> Self {
        FunctionAttribute::Raw(v)
    }
}
