//! NCCL collectives (issue 23; cuabi/nccl.h, docs/distributed.md): unique
//! ids, communicators (by rank with a timeout, all devices of this process,
//! split, finalize, abort), all-reduce, broadcast, reduce, all-gather,
//! reduce-scatter, send and receive over buffers and views, groups, and
//! buffer registration. NCCL is loaded on the first call that needs it.
//!
//! A communicator is used by one thread at a time (NCCL's rule): so
//! [`Communicator`] is `Send` but neither `Sync` nor `Clone`. The one call
//! another thread may make at any time, abort, goes through an
//! [`AbortHandle`] (`Send + Sync + Clone`, its own C reference).
//!
//! ```no_run
//! use cuabi::{nccl, Device, MemoryResource, Stream, View, DType};
//! let id = nccl::UniqueId::new()?;                     // send its bytes to every rank
//! let dev = Device::get(0)?;
//! let comm = nccl::Communicator::init_rank(&dev, 2, &id, 0, &nccl::CommOptions::default())?;
//! let s = Stream::new(&dev)?;
//! let buf = MemoryResource::device_default(&dev)?.allocate(4 * 1024, 0, Some(&s))?;
//! let v = View::new(&buf, 0, DType::of::<f32>(), &[1024], None, 0)?;
//! comm.all_reduce_view(None, &v, nccl::Op::CUABI_NCCL_SUM, Some(&s))?;   // in place
//! comm.synchronize(Some(&s), None)?;                    // a dead peer: an error, not a hang
//! # Ok::<(), cuabi::Error>(())
//! ```
//!
//! # Soundness (issue 28)
//!
//! What a call writes is taken `&mut` (the receiving [`Buffer`]s), what it
//! reads `&`; every call is queued on a stream (None: the legacy default
//! stream, as nccl.h's NULL) and every buffer and view it uses records the
//! work, so it waits for it before its memory goes (crate::track). Inside an
//! NCCL group the work is queued only at the outermost group end, so groups
//! are built as a [`Group`], which borrows every operand until it is
//! launched and records the work after the end; the raw
//! [`group_unchecked`] is `unsafe`. A receive into a shared buffer does not
//! compile:
//!
//! ```compile_fail,E0308
//! fn f(c: &cuabi::nccl::Communicator, b: &cuabi::Buffer, s: &cuabi::Stream) -> cuabi::Result<()> {
//!     c.recv((b, 0), 4, cuabi::nccl::DataType::CUABI_NCCL_FLOAT32, 1, Some(s)) // error: needs `&mut Buffer`
//! }
//! ```
//!
//! nor does an all-reduce into one:
//!
//! ```compile_fail,E0308
//! fn f(c: &cuabi::nccl::Communicator, b: &cuabi::Buffer, s: &cuabi::Stream) -> cuabi::Result<()> {
//!     c.all_reduce(None, (b, 0), 4, cuabi::nccl::DataType::CUABI_NCCL_FLOAT32,
//!                  cuabi::nccl::Op::CUABI_NCCL_SUM, Some(s)) // error: needs `&mut Buffer`
//! }
//! ```
//!
//! and a group's operands outlive it (see [`Group`]).
//!
//! ```no_run
//! # use cuabi::{nccl, Device, MemoryResource, Stream};
//! # let dev = Device::get(0)?;
//! # let comm = nccl::Communicator::init_rank(&dev, 2, &nccl::UniqueId::new()?, 0, &Default::default())?;
//! # let s = Stream::new(&dev)?;
//! # let mr = MemoryResource::device_default(&dev)?;
//! use nccl::NcclElement;
//! let (mine, mut theirs) = (mr.allocate(1024, 0, None)?, mr.allocate(1024, 0, None)?);
//! let peer = 1 - comm.rank()?;
//! let mut g = nccl::Group::new();
//! g.send(&comm, (&mine, 0), 256, f32::DATATYPE, peer, Some(&s))?
//!  .recv(&comm, (&mut theirs, 0), 256, f32::DATATYPE, peer, Some(&s))?;
//! g.launch()?;                                          // both posted at once
//! # Ok::<(), cuabi::Error>(())
//! ```
use std::ffi::CString;
use std::time::Duration;

use crate::device::Device;
use crate::error::{check, Error, Result};
use crate::memory::Buffer;
use crate::stream::Stream;
use crate::sys;
use crate::view::View;

/// Bytes of a unique id.
pub const UNIQUE_ID_BYTES: usize = sys::CUABI_NCCL_UNIQUE_ID_BYTES as usize;
/// Element types of collectives over buffers (`cuabi_nccl_datatype`).
pub type DataType = sys::cuabi_nccl_datatype;
/// Reductions (`cuabi_nccl_op`).
pub type Op = sys::cuabi_nccl_op;

/// Rust element types NCCL reduces, and their [`DataType`].
pub trait NcclElement: crate::memory::Pod {
    const DATATYPE: DataType;
}
macro_rules! nccl_element {
    ($($t:ty => $c:ident),*) => { $(impl NcclElement for $t { const DATATYPE: DataType = sys::$c; })* };
}
nccl_element!(i8 => CUABI_NCCL_INT8, u8 => CUABI_NCCL_UINT8, i32 => CUABI_NCCL_INT32,
              u32 => CUABI_NCCL_UINT32, i64 => CUABI_NCCL_INT64, u64 => CUABI_NCCL_UINT64,
              f32 => CUABI_NCCL_FLOAT32, f64 => CUABI_NCCL_FLOAT64);

/// The NCCL version cuabi loads (loading it now): `(major, minor, patch)`.
pub fn version() -> Result<(i32, i32, i32)> {
    let mut v = 0;
    // SAFETY: `v` is a local the call writes (common.h: pointers are used during the call).
    check(unsafe { sys::cuabi_nccl_version(&mut v) })?;
    Ok((v / 10000, v / 100 % 100, v % 100))
}

/// The id naming one group of ranks: 128 bytes to send to every rank.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId(pub [u8; UNIQUE_ID_BYTES]);

impl UniqueId {
    /// A new id (ncclGetUniqueId: it names a socket of this host).
    pub fn new() -> Result<UniqueId> {
        let mut id = sys::cuabi_nccl_unique_id::default();
        // SAFETY: `id` is a local the call writes.
        check(unsafe { sys::cuabi_nccl_get_unique_id(&mut id) })?;
        Ok(UniqueId(id.internal))
    }

    /// An id received as bytes: exactly [`UNIQUE_ID_BYTES`] of them.
    pub fn from_bytes(b: &[u8]) -> Result<UniqueId> {
        let a: [u8; UNIQUE_ID_BYTES] = b.try_into().map_err(|_| {
            Error::invalid_argument(format!("an NCCL unique id is {UNIQUE_ID_BYTES} bytes, not {}", b.len()))
        })?;
        Ok(UniqueId(a))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    fn raw(&self) -> sys::cuabi_nccl_unique_id {
        sys::cuabi_nccl_unique_id { internal: self.0 }
    }
}

impl core::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "UniqueId(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

/// How a communicator is made (`cuabi_nccl_comm_options`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommOptions {
    /// How long setup (init, split, finalize) waits for the other ranks,
    /// and `synchronize`'s default: `None` = cuabi's default (ten minutes,
    /// or `CUABI_NCCL_TIMEOUT_MS`); `Some(Duration::MAX)` = for ever.
    pub timeout: Option<Duration>,
    /// Keep NCCL's nonblocking mode for the collectives too.
    pub nonblocking: bool,
    /// ncclConfig_t's cgaClusterSize, minCTAs, maxCTAs, splitShare (`None`: NCCL's default).
    pub cga_cluster_size: Option<i32>,
    pub min_ctas: Option<i32>,
    pub max_ctas: Option<i32>,
    pub split_share: Option<bool>,
    /// The network module ("Socket", "IB"); `None`: NCCL's choice.
    pub net_name: Option<String>,
    /// A name NCCL's logs use.
    pub comm_name: Option<String>,
}

impl CommOptions {
    /// Options with a timeout.
    pub fn with_timeout(timeout: Duration) -> CommOptions {
        CommOptions { timeout: Some(timeout), ..CommOptions::default() }
    }

    fn to_c(&self) -> Result<(sys::cuabi_nccl_comm_options, Vec<CString>)> {
        let mut o = sys::cuabi_nccl_comm_options::default();
        // SAFETY: `o` is a local the init function fills.
        check(unsafe { sys::cuabi_nccl_comm_options_init(&mut o, sys::CUABI_NCCL_COMM_OPTIONS_VERSION) })?;
        o.timeout_ms = timeout_ms(self.timeout);
        o.nonblocking = self.nonblocking as i32;
        o.cga_cluster_size = self.cga_cluster_size.unwrap_or(-1);
        o.min_ctas = self.min_ctas.unwrap_or(-1);
        o.max_ctas = self.max_ctas.unwrap_or(-1);
        o.split_share = self.split_share.map_or(-1, |b| b as i32);
        let mut keep = Vec::new();
        for (src, dst) in [(&self.net_name, &mut o.net_name), (&self.comm_name, &mut o.comm_name)] {
            if let Some(s) = src {
                let c = CString::new(s.as_str())
                    .map_err(|_| Error::invalid_argument("CommOptions: a name holds a NUL byte"))?;
                *dst = c.as_ptr();
                keep.push(c);
            }
        }
        Ok((o, keep))
    }
}

/// 0 = the default; a negative value = for ever; at least 1 ms otherwise.
fn timeout_ms(t: Option<Duration>) -> i64 {
    match t {
        None => 0,
        Some(d) if d == Duration::MAX => -1,
        Some(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1),
    }
}

fn opt_stream(s: Option<&Stream>) -> *mut sys::cuabi_stream {
    s.map_or(core::ptr::null_mut(), |s| s.as_raw())
}

fn int(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::invalid_argument(format!("{what} {v} is not an int")))
}

handle_core!(
    /// One rank of an NCCL communicator. Dropping it releases cuabi's
    /// reference (ncclCommDestroy once graphs that captured it are gone too).
    Communicator, sys::cuabi_nccl_comm, sys::cuabi_nccl_comm_release
);

// SAFETY: cuabi handles may move between threads; NCCL wants one thread at
// a time on a communicator, which `Send` without `Sync` (and no `Clone`) keeps.
unsafe impl Send for Communicator {}

shared_handle!(
    /// Another reference to a communicator, whose only call is `abort`:
    /// to stop a rank stuck on a dead peer from any thread.
    AbortHandle, sys::cuabi_nccl_comm, sys::cuabi_nccl_comm_retain, sys::cuabi_nccl_comm_release
);

// SAFETY: cuabi_nccl_comm_abort may run from any thread at any time
// (cuabi/nccl.h), and it is the only call an AbortHandle makes.
unsafe impl Send for AbortHandle {}
// SAFETY: as for Send: abort is the only call, and any thread may make it at once.
unsafe impl Sync for AbortHandle {}

impl AbortHandle {
    /// ncclCommAbort: work in flight stops; later calls fail. Twice is no error.
    pub fn abort(&self) -> Result<()> {
        // SAFETY: nccl.h: cuabi_nccl_comm_abort "which any thread may call at any time"; the handle is live.
        check(unsafe { sys::cuabi_nccl_comm_abort(self.as_raw()) })
    }
}

handle_core!(
    /// A buffer registered with a communicator (ncclCommRegister);
    /// dropping it deregisters.
    Registration, sys::cuabi_nccl_registration, sys::cuabi_nccl_registration_destroy
);

// SAFETY: the registration is only destroyed (from whichever thread owns it).
unsafe impl Send for Registration {}

impl Communicator {
    /// This process's rank `rank` of `nranks` named by `id`, on `device`;
    /// returns when every rank has joined, or `Status::Timeout` when the
    /// options' timeout passes first.
    pub fn init_rank(device: &Device, nranks: usize, id: &UniqueId, rank: usize, options: &CommOptions) -> Result<Communicator> {
        let (o, _keep) = options.to_c()?;
        let (n, r) = (int(nranks, "nranks")?, int(rank, "rank")?);
        let raw = id.raw();
        // SAFETY: `device` is live; `raw` and `o` are locals read during the call (the
        // names `o` points to are kept in `_keep`); `out` is create's out-pointer.
        Communicator::create(|out| unsafe { sys::cuabi_nccl_comm_init_rank(out, device.as_raw(), n, &raw, r, &o) })
    }

    /// One communicator per device of this process, rank i on `devices[i]`.
    pub fn init_all(devices: &[Device], options: &CommOptions) -> Result<Vec<Communicator>> {
        let (o, _keep) = options.to_c()?;
        let mut devs: Vec<*mut sys::cuabi_device> = devices.iter().map(|d| d.as_raw()).collect();
        let mut out = vec![core::ptr::null_mut(); devices.len()];
        let n = int(devices.len(), "the number of devices")?;
        // SAFETY: `out` and `devs` hold `n` entries each (live devices); `o` is a
        // local read during the call.
        check(unsafe { sys::cuabi_nccl_comm_init_all(out.as_mut_ptr(), devs.as_mut_ptr(), n, &o) })?;
        out.into_iter()
            .map(|p| {
                // SAFETY: on success every entry is a new reference we own.
                unsafe { Communicator::from_raw(p) }
                    .ok_or_else(|| Error::internal("cuabi_nccl_comm_init_all returned NULL"))
            })
            .collect()
    }

    /// ncclCommSplit (collective): ranks of one `color` form a new
    /// communicator ordered by `key`; `color` None takes no part (`Ok(None)`).
    /// `options` None: this communicator's timeout and settings.
    pub fn split(&self, color: Option<u32>, key: i32, options: Option<&CommOptions>) -> Result<Option<Communicator>> {
        let c = match color {
            None => sys::CUABI_NCCL_SPLIT_NOCOLOR,
            Some(c) => int(c as usize, "color")?,
        };
        let opts = options.map(|o| o.to_c()).transpose()?;
        let op = opts.as_ref().map_or(core::ptr::null(), |(o, _)| o as *const _);
        let mut out = core::ptr::null_mut();
        // SAFETY: `self` is live and used by this thread only (not Sync); `op` is
        // NULL or points into `opts`, alive here; `out` is a local.
        check(unsafe { sys::cuabi_nccl_comm_split(&mut out, self.as_raw(), c, key, op) })?;
        // SAFETY: a new reference, or NULL for no color.
        Ok(unsafe { Communicator::from_raw(out) })
    }

    /// ncclCommFinalize (collective); afterwards only dropping is allowed.
    pub fn finalize(&self) -> Result<()> {
        // SAFETY: `self` is live and used by this thread only (not Sync).
        check(unsafe { sys::cuabi_nccl_comm_finalize(self.as_raw()) })
    }

    /// ncclCommAbort, from this thread.
    pub fn abort(&self) -> Result<()> {
        // SAFETY: as AbortHandle::abort.
        check(unsafe { sys::cuabi_nccl_comm_abort(self.as_raw()) })
    }

    /// A handle other threads may abort this communicator through.
    pub fn abort_handle(&self) -> AbortHandle {
        // SAFETY: `self` is live for the call.
        let st = unsafe { sys::cuabi_nccl_comm_retain(self.as_raw()) };
        assert_eq!(st, sys::CUABI_SUCCESS, "cuabi: retain of a live communicator failed");
        // SAFETY: the retain gave us a reference of our own.
        unsafe { AbortHandle::from_raw(self.as_raw()) }.expect("a live communicator is not NULL")
    }

    pub fn rank(&self) -> Result<usize> {
        let mut v = 0;
        // SAFETY: `self` is live; `v` a local written during the call.
        check(unsafe { sys::cuabi_nccl_comm_rank(&mut v, self.as_raw()) })?;
        Ok(v as usize)
    }

    pub fn size(&self) -> Result<usize> {
        let mut v = 0;
        // SAFETY: as `rank`.
        check(unsafe { sys::cuabi_nccl_comm_size(&mut v, self.as_raw()) })?;
        Ok(v as usize)
    }

    /// The communicator's device (a new reference).
    pub fn device(&self) -> Result<Device> {
        let mut d = core::ptr::null_mut();
        // SAFETY: as `rank`.
        check(unsafe { sys::cuabi_nccl_comm_device(&mut d, self.as_raw()) })?;
        // SAFETY: `d` is the communicator's live device; the retain makes it ours.
        check(unsafe { sys::cuabi_device_retain(d) })?;
        // SAFETY: the retain above gave us this reference.
        unsafe { Device::from_raw(d) }.ok_or_else(|| Error::internal("cuabi_nccl_comm_device returned NULL"))
    }

    /// NCCL's ncclResult_t of asynchronous errors: 0 none, 7 in progress.
    pub fn async_error(&self) -> Result<i32> {
        let mut v = 0;
        // SAFETY: as `rank`.
        check(unsafe { sys::cuabi_nccl_comm_get_async_error(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// Wait for `stream`'s work while watching the communicator: an NCCL
    /// error or the timeout (None: the communicator's) aborts it and fails.
    pub fn synchronize(&self, stream: Option<&Stream>, timeout: Option<Duration>) -> Result<()> {
        // SAFETY: live handles (the stream NULL: nccl.h's default stream); it only waits.
        check(unsafe { sys::cuabi_nccl_comm_synchronize(self.as_raw(), opt_stream(stream), timeout_ms(timeout)) })
    }

    /// ncclCommRegister: dropping the registration deregisters.
    pub fn register(&self, buffer: &Buffer) -> Result<Registration> {
        // SAFETY: live handles; nccl.h: "The registration keeps the communicator and the memory
        // alive", so the buffer may go first.
        Registration::create(|out| unsafe { sys::cuabi_nccl_register(out, self.as_raw(), buffer.as_raw()) })
    }

    // ---- collectives over buffers: (buffer, byte offset) operands. What a
    // collective writes is taken `&mut`; each call is queued on `stream`
    // (None: the device's legacy default stream, as nccl.h's NULL), and the
    // buffers and views it uses wait for it before their memory goes
    // (crate::track). Inside a group use [`Group`].

    /// recv = op over every rank's send (`send` None: in place).
    pub fn all_reduce(&self, send: Option<(&Buffer, usize)>, recv: (&mut Buffer, usize), count: usize,
                      datatype: DataType, op: Op, stream: Option<&Stream>) -> Result<()> {
        Queued::all_reduce(self, send, recv, count, datatype, op, stream)?.run_alone()
    }

    /// recv of every rank = send of `root` (`send` None: in place).
    pub fn broadcast(&self, send: Option<(&Buffer, usize)>, recv: (&mut Buffer, usize), count: usize,
                     datatype: DataType, root: usize, stream: Option<&Stream>) -> Result<()> {
        Queued::broadcast(self, send, recv, count, datatype, root, stream)?.run_alone()
    }

    /// recv of `root` = op over every rank's send (recv needed on the root only).
    #[allow(clippy::too_many_arguments)]
    pub fn reduce(&self, send: (&Buffer, usize), recv: Option<(&mut Buffer, usize)>, count: usize,
                  datatype: DataType, op: Op, root: usize, stream: Option<&Stream>) -> Result<()> {
        Queued::reduce(self, send, recv, count, datatype, op, root, stream)?.run_alone()
    }

    /// recv (size × send_count elements) = every rank's send, in rank order.
    pub fn all_gather(&self, send: (&Buffer, usize), recv: (&mut Buffer, usize), send_count: usize,
                      datatype: DataType, stream: Option<&Stream>) -> Result<()> {
        Queued::all_gather(self, send, recv, send_count, datatype, stream)?.run_alone()
    }

    /// recv (recv_count elements) = block `rank` of op over every rank's send.
    pub fn reduce_scatter(&self, send: (&Buffer, usize), recv: (&mut Buffer, usize), recv_count: usize,
                          datatype: DataType, op: Op, stream: Option<&Stream>) -> Result<()> {
        Queued::reduce_scatter(self, send, recv, recv_count, datatype, op, stream)?.run_alone()
    }

    /// ncclSend of `count` elements to `peer` (a peer that also sends: use a [`Group`]).
    pub fn send(&self, buffer: (&Buffer, usize), count: usize, datatype: DataType, peer: usize,
                stream: Option<&Stream>) -> Result<()> {
        Queued::send(self, buffer, count, datatype, peer, stream)?.run_alone()
    }

    /// ncclRecv of `count` elements from `peer` into `buffer`.
    pub fn recv(&self, buffer: (&mut Buffer, usize), count: usize, datatype: DataType, peer: usize,
                stream: Option<&Stream>) -> Result<()> {
        Queued::recv(self, buffer, count, datatype, peer, stream)?.run_alone()
    }

    // ---- collectives over views: type and count from the views (dense ones).
    // Views are shared (`&View`): the library checks that they are of the
    // communicator's device memory, and they wait for the work before they
    // let go of it; a host read of a view (`View::to_vec`) waits too.

    pub fn all_reduce_view(&self, send: Option<&View>, recv: &View, op: Op, stream: Option<&Stream>) -> Result<()> {
        Queued::all_reduce_view(self, send, recv, op, stream)?.run_alone()
    }

    pub fn broadcast_view(&self, send: Option<&View>, recv: &View, root: usize, stream: Option<&Stream>) -> Result<()> {
        Queued::broadcast_view(self, send, recv, root, stream)?.run_alone()
    }

    pub fn reduce_view(&self, send: &View, recv: Option<&View>, op: Op, root: usize, stream: Option<&Stream>) -> Result<()> {
        Queued::reduce_view(self, send, recv, op, root, stream)?.run_alone()
    }

    pub fn all_gather_view(&self, send: &View, recv: &View, stream: Option<&Stream>) -> Result<()> {
        Queued::all_gather_view(self, send, recv, stream)?.run_alone()
    }

    pub fn reduce_scatter_view(&self, send: &View, recv: &View, op: Op, stream: Option<&Stream>) -> Result<()> {
        Queued::reduce_scatter_view(self, send, recv, op, stream)?.run_alone()
    }

    pub fn send_view(&self, view: &View, peer: usize, stream: Option<&Stream>) -> Result<()> {
        Queued::send_view(self, view, peer, stream)?.run_alone()
    }

    pub fn recv_view(&self, view: &View, peer: usize, stream: Option<&Stream>) -> Result<()> {
        Queued::recv_view(self, view, peer, stream)?.run_alone()
    }
}

// ---- queued operations: one description per call, issued alone or in a group

/// A buffer or view a queued operation uses.
#[derive(Clone, Copy)]
enum Operand<'a> {
    Buffer(&'a Buffer),
    View(&'a View),
}

impl Operand<'_> {
    fn after_queued(self, stream: &Stream) -> Result<()> {
        match self {
            Operand::Buffer(b) => b.after_queued(Some(stream)),
            Operand::View(v) => v.after_queued(Some(stream)),
        }
    }
}

/// The stream an operation runs on: the caller's, or the legacy default
/// stream nccl.h's NULL means (so the work can be tracked).
enum StreamRef<'a> {
    Borrowed(&'a Stream),
    Owned(Stream),
}

impl StreamRef<'_> {
    fn get(&self) -> &Stream {
        match self {
            StreamRef::Borrowed(s) => s,
            StreamRef::Owned(s) => s,
        }
    }
}

/// The C call of an operation, with its scalar arguments.
#[derive(Clone, Copy)]
enum Call {
    AllReduce { count: usize, datatype: DataType, op: Op },
    Broadcast { count: usize, datatype: DataType, root: i32 },
    Reduce { count: usize, datatype: DataType, op: Op, root: i32 },
    AllGather { count: usize, datatype: DataType },
    ReduceScatter { count: usize, datatype: DataType, op: Op },
    Send { count: usize, datatype: DataType, peer: i32 },
    Recv { count: usize, datatype: DataType, peer: i32 },
    AllReduceView { op: Op },
    BroadcastView { root: i32 },
    ReduceView { op: Op, root: i32 },
    AllGatherView,
    ReduceScatterView { op: Op },
    SendView { peer: i32 },
    RecvView { peer: i32 },
}

/// One operation, its operands borrowed for `'a`: the first operand is the
/// send side (or the only one), the second the receive side.
struct Queued<'a> {
    comm: &'a Communicator,
    call: Call,
    send: Option<(Operand<'a>, usize)>,
    recv: Option<(Operand<'a>, usize)>,
    stream: StreamRef<'a>,
}

fn buf_op(b: Option<(&Buffer, usize)>) -> Option<(Operand<'_>, usize)> {
    b.map(|(b, o)| (Operand::Buffer(b), o))
}

fn view_op(v: Option<&View>) -> Option<(Operand<'_>, usize)> {
    v.map(|v| (Operand::View(v), 0))
}

/// A receive buffer: writable (no views read its host memory), then shared
/// for the life of the borrow the caller gave.
fn recv_buf<'a>(b: (&'a mut Buffer, usize), what: &str) -> Result<Option<(Operand<'a>, usize)>> {
    b.0.check_writable(what)?;
    let (b, o): (&'a Buffer, usize) = (b.0, b.1);
    Ok(Some((Operand::Buffer(b), o)))
}

#[allow(clippy::too_many_arguments)]
impl<'a> Queued<'a> {
    fn new(comm: &'a Communicator, call: Call, send: Option<(Operand<'a>, usize)>, recv: Option<(Operand<'a>, usize)>,
           stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let stream = match stream {
            Some(s) => StreamRef::Borrowed(s),
            None => StreamRef::Owned(Stream::legacy_default(&comm.device()?)?),
        };
        Ok(Queued { comm, call, send, recv, stream })
    }

    fn all_reduce(comm: &'a Communicator, send: Option<(&'a Buffer, usize)>, recv: (&'a mut Buffer, usize), count: usize,
                  datatype: DataType, op: Op, stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let r = recv_buf(recv, "nccl all_reduce")?;
        Queued::new(comm, Call::AllReduce { count, datatype, op }, buf_op(send), r, stream)
    }

    fn broadcast(comm: &'a Communicator, send: Option<(&'a Buffer, usize)>, recv: (&'a mut Buffer, usize), count: usize,
                 datatype: DataType, root: usize, stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let root = int(root, "root")?;
        let r = recv_buf(recv, "nccl broadcast")?;
        Queued::new(comm, Call::Broadcast { count, datatype, root }, buf_op(send), r, stream)
    }

    fn reduce(comm: &'a Communicator, send: (&'a Buffer, usize), recv: Option<(&'a mut Buffer, usize)>, count: usize,
              datatype: DataType, op: Op, root: usize, stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let root = int(root, "root")?;
        let r = match recv {
            Some(r) => recv_buf(r, "nccl reduce")?,
            None => None,
        };
        Queued::new(comm, Call::Reduce { count, datatype, op, root }, buf_op(Some(send)), r, stream)
    }

    fn all_gather(comm: &'a Communicator, send: (&'a Buffer, usize), recv: (&'a mut Buffer, usize), count: usize,
                  datatype: DataType, stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let r = recv_buf(recv, "nccl all_gather")?;
        Queued::new(comm, Call::AllGather { count, datatype }, buf_op(Some(send)), r, stream)
    }

    fn reduce_scatter(comm: &'a Communicator, send: (&'a Buffer, usize), recv: (&'a mut Buffer, usize), count: usize,
                      datatype: DataType, op: Op, stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let r = recv_buf(recv, "nccl reduce_scatter")?;
        Queued::new(comm, Call::ReduceScatter { count, datatype, op }, buf_op(Some(send)), r, stream)
    }

    fn send(comm: &'a Communicator, buffer: (&'a Buffer, usize), count: usize, datatype: DataType, peer: usize,
            stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let peer = int(peer, "peer")?;
        Queued::new(comm, Call::Send { count, datatype, peer }, buf_op(Some(buffer)), None, stream)
    }

    fn recv(comm: &'a Communicator, buffer: (&'a mut Buffer, usize), count: usize, datatype: DataType, peer: usize,
            stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let peer = int(peer, "peer")?;
        let r = recv_buf(buffer, "nccl recv")?;
        Queued::new(comm, Call::Recv { count, datatype, peer }, None, r, stream)
    }

    fn all_reduce_view(comm: &'a Communicator, send: Option<&'a View>, recv: &'a View, op: Op,
                       stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        Queued::new(comm, Call::AllReduceView { op }, view_op(send), view_op(Some(recv)), stream)
    }

    fn broadcast_view(comm: &'a Communicator, send: Option<&'a View>, recv: &'a View, root: usize,
                      stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let root = int(root, "root")?;
        Queued::new(comm, Call::BroadcastView { root }, view_op(send), view_op(Some(recv)), stream)
    }

    fn reduce_view(comm: &'a Communicator, send: &'a View, recv: Option<&'a View>, op: Op, root: usize,
                   stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let root = int(root, "root")?;
        Queued::new(comm, Call::ReduceView { op, root }, view_op(Some(send)), view_op(recv), stream)
    }

    fn all_gather_view(comm: &'a Communicator, send: &'a View, recv: &'a View,
                       stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        Queued::new(comm, Call::AllGatherView, view_op(Some(send)), view_op(Some(recv)), stream)
    }

    fn reduce_scatter_view(comm: &'a Communicator, send: &'a View, recv: &'a View, op: Op,
                           stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        Queued::new(comm, Call::ReduceScatterView { op }, view_op(Some(send)), view_op(Some(recv)), stream)
    }

    fn send_view(comm: &'a Communicator, view: &'a View, peer: usize, stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let peer = int(peer, "peer")?;
        Queued::new(comm, Call::SendView { peer }, view_op(Some(view)), None, stream)
    }

    fn recv_view(comm: &'a Communicator, view: &'a View, peer: usize, stream: Option<&'a Stream>) -> Result<Queued<'a>> {
        let peer = int(peer, "peer")?;
        Queued::new(comm, Call::RecvView { peer }, None, view_op(Some(view)), stream)
    }

    /// Make the C call (which queues the work on the stream, or, inside a
    /// group, leaves it for the outermost group end).
    fn issue(&self) -> Result<()> {
        let b = |o: Option<(Operand<'a>, usize)>| match o {
            Some((Operand::Buffer(b), off)) => (b.as_raw(), off),
            _ => (core::ptr::null_mut(), 0),
        };
        let v = |o: Option<(Operand<'a>, usize)>| match o {
            Some((Operand::View(v), _)) => v.as_raw(),
            _ => core::ptr::null_mut(),
        };
        let (c, s) = (self.comm.as_raw(), self.stream.get().as_raw());
        let ((sb, so), (rb, ro), sv, rv) = (b(self.send), b(self.recv), v(self.send), v(self.recv));
        // SAFETY: every handle comes from a value borrowed for 'a (the
        // communicator, the operands, the stream) and is live for the call;
        // the offsets, counts, types and sizes are checked by the library
        // (nccl.h: "both ranges must lie in their buffers", the views "must be
        // dense ... and their sizes must agree as the collective needs, else
        // CUABI_ERROR_INVALID_ARGUMENT"); a NULL operand is one nccl.h allows
        // ("[may be NULL]": in place, or the receive side of a non-root), the
        // constructors above make the required ones non-NULL. The work runs
        // later on the stream: the callers (run_alone, Group::launch) record
        // it on every operand once it is queued (crate::track), so no
        // operand's memory goes before it ends. The receiving buffer was
        // borrowed `&mut` for 'a, so nothing else reads or writes it meanwhile.
        let st = unsafe {
            match self.call {
                Call::AllReduce { count, datatype, op } =>
                    sys::cuabi_nccl_all_reduce(c, sb, so, rb, ro, count, datatype, op, s),
                Call::Broadcast { count, datatype, root } =>
                    sys::cuabi_nccl_broadcast(c, sb, so, rb, ro, count, datatype, root, s),
                Call::Reduce { count, datatype, op, root } =>
                    sys::cuabi_nccl_reduce(c, sb, so, rb, ro, count, datatype, op, root, s),
                Call::AllGather { count, datatype } => sys::cuabi_nccl_all_gather(c, sb, so, rb, ro, count, datatype, s),
                Call::ReduceScatter { count, datatype, op } =>
                    sys::cuabi_nccl_reduce_scatter(c, sb, so, rb, ro, count, datatype, op, s),
                Call::Send { count, datatype, peer } => sys::cuabi_nccl_send(c, sb, so, count, datatype, peer, s),
                Call::Recv { count, datatype, peer } => sys::cuabi_nccl_recv(c, rb, ro, count, datatype, peer, s),
                Call::AllReduceView { op } => sys::cuabi_nccl_all_reduce_view(c, sv, rv, op, s),
                Call::BroadcastView { root } => sys::cuabi_nccl_broadcast_view(c, sv, rv, root, s),
                Call::ReduceView { op, root } => sys::cuabi_nccl_reduce_view(c, sv, rv, op, root, s),
                Call::AllGatherView => sys::cuabi_nccl_all_gather_view(c, sv, rv, s),
                Call::ReduceScatterView { op } => sys::cuabi_nccl_reduce_scatter_view(c, sv, rv, op, s),
                Call::SendView { peer } => sys::cuabi_nccl_send_view(c, sv, peer, s),
                Call::RecvView { peer } => sys::cuabi_nccl_recv_view(c, rv, peer, s),
            }
        };
        check(st)
    }

    /// The work is queued on the stream: every operand waits for it before
    /// its memory goes. All are recorded; the first error is returned.
    fn track(&self) -> Result<()> {
        let s = self.stream.get();
        let mut first = Ok(());
        for (o, _) in [self.send, self.recv].into_iter().flatten() {
            if let Err(e) = o.after_queued(s) {
                first = first.and(Err(e));
            }
        }
        first
    }

    /// Outside a group: the call queues the work at once, so track it now.
    fn run_alone(self) -> Result<()> {
        self.issue()?;
        self.track()
    }
}

/// A group of NCCL operations (ncclGroupStart ... ncclGroupEnd) built first
/// and issued together by [`Group::launch`]: several devices of one process,
/// or sends and receives that must be posted at once.
///
/// NCCL queues a group's work on the streams only at the outermost group
/// end, so the group borrows every communicator, buffer, view and stream it
/// names for its whole life (`'a`), and records the work on each operand
/// (so it waits for it before its memory goes, crate::track) only after the
/// end. Receiving buffers are borrowed `&mut`.
///
/// ```no_run
/// # fn f(comm: &cuabi::nccl::Communicator, mine: &cuabi::Buffer, theirs: &mut cuabi::Buffer,
/// #      s: &cuabi::Stream) -> cuabi::Result<()> {
/// use cuabi::nccl::{Group, NcclElement};
/// let peer = 1 - comm.rank()?;
/// let mut g = Group::new();
/// g.send(comm, (mine, 0), 256, f32::DATATYPE, peer, Some(s))?
///  .recv(comm, (theirs, 0), 256, f32::DATATYPE, peer, Some(s))?;
/// g.launch()
/// # }
/// ```
///
/// A buffer a group borrows cannot be dropped before the group is launched:
///
/// ```compile_fail,E0505
/// fn f(comm: &cuabi::nccl::Communicator, buf: cuabi::Buffer, s: &cuabi::Stream) -> cuabi::Result<()> {
///     let mut g = cuabi::nccl::Group::new();
///     g.send(comm, (&buf, 0), 4, cuabi::nccl::DataType::CUABI_NCCL_FLOAT32, 1, Some(s))?;
///     drop(buf); // error: cannot move out of `buf` because it is borrowed
///     g.launch()
/// }
/// ```
///
/// nor be received into through a shared reference:
///
/// ```compile_fail,E0308
/// fn f(comm: &cuabi::nccl::Communicator, buf: &cuabi::Buffer, s: &cuabi::Stream) -> cuabi::Result<()> {
///     let mut g = cuabi::nccl::Group::new();
///     g.recv(comm, (buf, 0), 4, cuabi::nccl::DataType::CUABI_NCCL_FLOAT32, 1, Some(s))?; // error: needs `&mut Buffer`
///     g.launch()
/// }
/// ```
#[derive(Default)]
pub struct Group<'a> {
    ops: Vec<Queued<'a>>,
}

#[allow(clippy::too_many_arguments)]
impl<'a> Group<'a> {
    /// An empty group.
    pub fn new() -> Group<'a> {
        Group { ops: Vec::new() }
    }

    /// How many operations the group holds.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    fn push(&mut self, q: Result<Queued<'a>>) -> Result<&mut Group<'a>> {
        self.ops.push(q?);
        Ok(self)
    }

    /// [`Communicator::all_reduce`] in the group.
    pub fn all_reduce(&mut self, comm: &'a Communicator, send: Option<(&'a Buffer, usize)>, recv: (&'a mut Buffer, usize),
                      count: usize, datatype: DataType, op: Op, stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::all_reduce(comm, send, recv, count, datatype, op, stream))
    }

    /// [`Communicator::broadcast`] in the group.
    pub fn broadcast(&mut self, comm: &'a Communicator, send: Option<(&'a Buffer, usize)>, recv: (&'a mut Buffer, usize),
                     count: usize, datatype: DataType, root: usize, stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::broadcast(comm, send, recv, count, datatype, root, stream))
    }

    /// [`Communicator::reduce`] in the group.
    pub fn reduce(&mut self, comm: &'a Communicator, send: (&'a Buffer, usize), recv: Option<(&'a mut Buffer, usize)>,
                  count: usize, datatype: DataType, op: Op, root: usize, stream: Option<&'a Stream>)
                  -> Result<&mut Group<'a>> {
        self.push(Queued::reduce(comm, send, recv, count, datatype, op, root, stream))
    }

    /// [`Communicator::all_gather`] in the group.
    pub fn all_gather(&mut self, comm: &'a Communicator, send: (&'a Buffer, usize), recv: (&'a mut Buffer, usize),
                      send_count: usize, datatype: DataType, stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::all_gather(comm, send, recv, send_count, datatype, stream))
    }

    /// [`Communicator::reduce_scatter`] in the group.
    pub fn reduce_scatter(&mut self, comm: &'a Communicator, send: (&'a Buffer, usize), recv: (&'a mut Buffer, usize),
                          recv_count: usize, datatype: DataType, op: Op, stream: Option<&'a Stream>)
                          -> Result<&mut Group<'a>> {
        self.push(Queued::reduce_scatter(comm, send, recv, recv_count, datatype, op, stream))
    }

    /// [`Communicator::send`] in the group.
    pub fn send(&mut self, comm: &'a Communicator, buffer: (&'a Buffer, usize), count: usize, datatype: DataType,
                peer: usize, stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::send(comm, buffer, count, datatype, peer, stream))
    }

    /// [`Communicator::recv`] in the group.
    pub fn recv(&mut self, comm: &'a Communicator, buffer: (&'a mut Buffer, usize), count: usize, datatype: DataType,
                peer: usize, stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::recv(comm, buffer, count, datatype, peer, stream))
    }

    /// [`Communicator::all_reduce_view`] in the group.
    pub fn all_reduce_view(&mut self, comm: &'a Communicator, send: Option<&'a View>, recv: &'a View, op: Op,
                           stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::all_reduce_view(comm, send, recv, op, stream))
    }

    /// [`Communicator::broadcast_view`] in the group.
    pub fn broadcast_view(&mut self, comm: &'a Communicator, send: Option<&'a View>, recv: &'a View, root: usize,
                          stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::broadcast_view(comm, send, recv, root, stream))
    }

    /// [`Communicator::reduce_view`] in the group.
    pub fn reduce_view(&mut self, comm: &'a Communicator, send: &'a View, recv: Option<&'a View>, op: Op, root: usize,
                       stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::reduce_view(comm, send, recv, op, root, stream))
    }

    /// [`Communicator::all_gather_view`] in the group.
    pub fn all_gather_view(&mut self, comm: &'a Communicator, send: &'a View, recv: &'a View,
                           stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::all_gather_view(comm, send, recv, stream))
    }

    /// [`Communicator::reduce_scatter_view`] in the group.
    pub fn reduce_scatter_view(&mut self, comm: &'a Communicator, send: &'a View, recv: &'a View, op: Op,
                               stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::reduce_scatter_view(comm, send, recv, op, stream))
    }

    /// [`Communicator::send_view`] in the group.
    pub fn send_view(&mut self, comm: &'a Communicator, view: &'a View, peer: usize,
                     stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::send_view(comm, view, peer, stream))
    }

    /// [`Communicator::recv_view`] in the group.
    pub fn recv_view(&mut self, comm: &'a Communicator, view: &'a View, peer: usize,
                     stream: Option<&'a Stream>) -> Result<&mut Group<'a>> {
        self.push(Queued::recv_view(comm, view, peer, stream))
    }

    /// ncclGroupStart, every operation in order, ncclGroupEnd (which
    /// queues the work); then every operand records it. An operation the
    /// library refuses ends the issuing (the group still ends, so what was
    /// issued before it runs); its error comes first, then the end's.
    pub fn launch(self) -> Result<()> {
        // SAFETY: nccl.h: groups "are per thread" and nest; this one is ended
        // below on every path, on this thread (a Group is not Send: it holds
        // `&Communicator`, and Communicator is not Sync).
        check(unsafe { sys::cuabi_nccl_group_start() })?;
        let mut issued = 0;
        let mut first = Ok(());
        for q in &self.ops {
            if let Err(e) = q.issue() {
                first = Err(e);
                break;
            }
            issued += 1;
        }
        // SAFETY: ends the group started above; nccl.h: "the outermost end
        // launches what the group queued" -- the work is on the streams now
        // (an enclosing group_unchecked would break that, which its contract
        // forbids).
        let end = check(unsafe { sys::cuabi_nccl_group_end() });
        // Track even after a failed end: an event after nothing costs nothing,
        // and work the end did queue is waited for.
        let mut tracked = Ok(());
        for q in &self.ops[..issued] {
            if let Err(e) = q.track() {
                tracked = tracked.and(Err(e));
            }
        }
        first.and(end).and(tracked)
    }
}

/// Run `f` between ncclGroupStart and ncclGroupEnd (the group ends even when
/// `f` fails; `f`'s error comes first). Groups are per thread. The safe form
/// is [`Group`].
///
/// # Safety
/// Inside a group NCCL queues the work only at the outermost group end, but
/// the calls made in `f` ([`Communicator::all_reduce`] and the others, and
/// [`Group::launch`]) record it on their buffers and views when they return,
/// before it is queued: so every buffer and view the calls in `f` use must
/// stay alive (not dropped, freed or given up) and unwritten by anything
/// else until the streams have run the group's work (e.g. until
/// [`Communicator::synchronize`] after this returns).
pub unsafe fn group_unchecked<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    // SAFETY: nccl.h: groups "are per thread" and nest; ended below on every path.
    check(unsafe { sys::cuabi_nccl_group_start() })?;
    let r = f();
    // SAFETY: ends the group started above; the caller keeps the operands.
    let end = check(unsafe { sys::cuabi_nccl_group_end() });
    let v = r?;
    end?;
    Ok(v)
}
