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

fn opt_buf(b: Option<(&Buffer, usize)>) -> (*mut sys::cuabi_buffer, usize) {
    b.map_or((core::ptr::null_mut(), 0), |(b, o)| (b.as_raw(), o))
}

fn opt_view(v: Option<&View>) -> *mut sys::cuabi_view {
    v.map_or(core::ptr::null_mut(), |v| v.as_raw())
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
unsafe impl Sync for AbortHandle {}

impl AbortHandle {
    /// ncclCommAbort: work in flight stops; later calls fail. Twice is no error.
    pub fn abort(&self) -> Result<()> {
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

/// Run `f` between ncclGroupStart and ncclGroupEnd (the group ends even
/// when `f` fails; `f`'s error comes first). Groups are per thread.
pub fn group<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    check(unsafe { sys::cuabi_nccl_group_start() })?;
    let r = f();
    let end = check(unsafe { sys::cuabi_nccl_group_end() });
    let v = r?;
    end?;
    Ok(v)
}

impl Communicator {
    /// This process's rank `rank` of `nranks` named by `id`, on `device`;
    /// returns when every rank has joined, or `Status::TIMEOUT` when the
    /// options' timeout passes first.
    pub fn init_rank(device: &Device, nranks: usize, id: &UniqueId, rank: usize, options: &CommOptions) -> Result<Communicator> {
        let (o, _keep) = options.to_c()?;
        let (n, r) = (int(nranks, "nranks")?, int(rank, "rank")?);
        let raw = id.raw();
        Communicator::create(|out| unsafe { sys::cuabi_nccl_comm_init_rank(out, device.as_raw(), n, &raw, r, &o) })
    }

    /// One communicator per device of this process, rank i on `devices[i]`.
    pub fn init_all(devices: &[Device], options: &CommOptions) -> Result<Vec<Communicator>> {
        let (o, _keep) = options.to_c()?;
        let mut devs: Vec<*mut sys::cuabi_device> = devices.iter().map(|d| d.as_raw()).collect();
        let mut out = vec![core::ptr::null_mut(); devices.len()];
        let n = int(devices.len(), "the number of devices")?;
        check(unsafe { sys::cuabi_nccl_comm_init_all(out.as_mut_ptr(), devs.as_mut_ptr(), n, &o) })?;
        // SAFETY: on success every entry is a new reference we own.
        out.into_iter()
            .map(|p| unsafe { Communicator::from_raw(p) }
                .ok_or_else(|| Error::internal("cuabi_nccl_comm_init_all returned NULL")))
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
        check(unsafe { sys::cuabi_nccl_comm_split(&mut out, self.as_raw(), c, key, op) })?;
        // SAFETY: a new reference, or NULL for no color.
        Ok(unsafe { Communicator::from_raw(out) })
    }

    /// ncclCommFinalize (collective); afterwards only dropping is allowed.
    pub fn finalize(&self) -> Result<()> {
        check(unsafe { sys::cuabi_nccl_comm_finalize(self.as_raw()) })
    }

    /// ncclCommAbort, from this thread.
    pub fn abort(&self) -> Result<()> {
        check(unsafe { sys::cuabi_nccl_comm_abort(self.as_raw()) })
    }

    /// A handle other threads may abort this communicator through.
    pub fn abort_handle(&self) -> AbortHandle {
        let st = unsafe { sys::cuabi_nccl_comm_retain(self.as_raw()) };
        assert_eq!(st, sys::CUABI_SUCCESS, "cuabi: retain of a live communicator failed");
        // SAFETY: the retain gave us a reference of our own.
        unsafe { AbortHandle::from_raw(self.as_raw()) }.expect("a live communicator is not NULL")
    }

    pub fn rank(&self) -> Result<usize> {
        let mut v = 0;
        check(unsafe { sys::cuabi_nccl_comm_rank(&mut v, self.as_raw()) })?;
        Ok(v as usize)
    }

    pub fn size(&self) -> Result<usize> {
        let mut v = 0;
        check(unsafe { sys::cuabi_nccl_comm_size(&mut v, self.as_raw()) })?;
        Ok(v as usize)
    }

    /// The communicator's device (a new reference).
    pub fn device(&self) -> Result<Device> {
        let mut d = core::ptr::null_mut();
        check(unsafe { sys::cuabi_nccl_comm_device(&mut d, self.as_raw()) })?;
        check(unsafe { sys::cuabi_device_retain(d) })?;
        unsafe { Device::from_raw(d) }.ok_or_else(|| Error::internal("cuabi_nccl_comm_device returned NULL"))
    }

    /// NCCL's ncclResult_t of asynchronous errors: 0 none, 7 in progress.
    pub fn async_error(&self) -> Result<i32> {
        let mut v = 0;
        check(unsafe { sys::cuabi_nccl_comm_get_async_error(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// Wait for `stream`'s work while watching the communicator: an NCCL
    /// error or the timeout (None: the communicator's) aborts it and fails.
    pub fn synchronize(&self, stream: Option<&Stream>, timeout: Option<Duration>) -> Result<()> {
        check(unsafe { sys::cuabi_nccl_comm_synchronize(self.as_raw(), opt_stream(stream), timeout_ms(timeout)) })
    }

    /// ncclCommRegister: dropping the registration deregisters.
    pub fn register(&self, buffer: &Buffer) -> Result<Registration> {
        Registration::create(|out| unsafe { sys::cuabi_nccl_register(out, self.as_raw(), buffer.as_raw()) })
    }

    // ---- collectives over buffers: (buffer, byte offset) operands

    /// recv = op over every rank's send (`send` None: in place).
    pub fn all_reduce(&self, send: Option<(&Buffer, usize)>, recv: (&Buffer, usize), count: usize, datatype: DataType,
                      op: Op, stream: Option<&Stream>) -> Result<()> {
        let (sb, so) = opt_buf(send);
        check(unsafe {
            sys::cuabi_nccl_all_reduce(self.as_raw(), sb, so, recv.0.as_raw(), recv.1, count, datatype, op, opt_stream(stream))
        })
    }

    /// recv of every rank = send of `root` (`send` None: in place).
    pub fn broadcast(&self, send: Option<(&Buffer, usize)>, recv: (&Buffer, usize), count: usize, datatype: DataType,
                     root: usize, stream: Option<&Stream>) -> Result<()> {
        let (sb, so) = opt_buf(send);
        let root = int(root, "root")?;
        check(unsafe {
            sys::cuabi_nccl_broadcast(self.as_raw(), sb, so, recv.0.as_raw(), recv.1, count, datatype, root, opt_stream(stream))
        })
    }

    /// recv of `root` = op over every rank's send (recv needed on the root only).
    pub fn reduce(&self, send: (&Buffer, usize), recv: Option<(&Buffer, usize)>, count: usize, datatype: DataType,
                  op: Op, root: usize, stream: Option<&Stream>) -> Result<()> {
        let (rb, ro) = opt_buf(recv);
        let root = int(root, "root")?;
        check(unsafe {
            sys::cuabi_nccl_reduce(self.as_raw(), send.0.as_raw(), send.1, rb, ro, count, datatype, op, root, opt_stream(stream))
        })
    }

    /// recv (size × send_count elements) = every rank's send, in rank order.
    pub fn all_gather(&self, send: (&Buffer, usize), recv: (&Buffer, usize), send_count: usize, datatype: DataType,
                      stream: Option<&Stream>) -> Result<()> {
        check(unsafe {
            sys::cuabi_nccl_all_gather(self.as_raw(), send.0.as_raw(), send.1, recv.0.as_raw(), recv.1, send_count, datatype,
                                       opt_stream(stream))
        })
    }

    /// recv (recv_count elements) = block `rank` of op over every rank's send.
    pub fn reduce_scatter(&self, send: (&Buffer, usize), recv: (&Buffer, usize), recv_count: usize, datatype: DataType,
                          op: Op, stream: Option<&Stream>) -> Result<()> {
        check(unsafe {
            sys::cuabi_nccl_reduce_scatter(self.as_raw(), send.0.as_raw(), send.1, recv.0.as_raw(), recv.1, recv_count,
                                           datatype, op, opt_stream(stream))
        })
    }

    pub fn send(&self, buffer: (&Buffer, usize), count: usize, datatype: DataType, peer: usize,
                stream: Option<&Stream>) -> Result<()> {
        let peer = int(peer, "peer")?;
        check(unsafe { sys::cuabi_nccl_send(self.as_raw(), buffer.0.as_raw(), buffer.1, count, datatype, peer, opt_stream(stream)) })
    }

    pub fn recv(&self, buffer: (&Buffer, usize), count: usize, datatype: DataType, peer: usize,
                stream: Option<&Stream>) -> Result<()> {
        let peer = int(peer, "peer")?;
        check(unsafe { sys::cuabi_nccl_recv(self.as_raw(), buffer.0.as_raw(), buffer.1, count, datatype, peer, opt_stream(stream)) })
    }

    // ---- collectives over views: type and count from the views (dense ones)

    pub fn all_reduce_view(&self, send: Option<&View>, recv: &View, op: Op, stream: Option<&Stream>) -> Result<()> {
        check(unsafe { sys::cuabi_nccl_all_reduce_view(self.as_raw(), opt_view(send), recv.as_raw(), op, opt_stream(stream)) })
    }

    pub fn broadcast_view(&self, send: Option<&View>, recv: &View, root: usize, stream: Option<&Stream>) -> Result<()> {
        let root = int(root, "root")?;
        check(unsafe { sys::cuabi_nccl_broadcast_view(self.as_raw(), opt_view(send), recv.as_raw(), root, opt_stream(stream)) })
    }

    pub fn reduce_view(&self, send: &View, recv: Option<&View>, op: Op, root: usize, stream: Option<&Stream>) -> Result<()> {
        let root = int(root, "root")?;
        check(unsafe {
            sys::cuabi_nccl_reduce_view(self.as_raw(), send.as_raw(), opt_view(recv), op, root, opt_stream(stream))
        })
    }

    pub fn all_gather_view(&self, send: &View, recv: &View, stream: Option<&Stream>) -> Result<()> {
        check(unsafe { sys::cuabi_nccl_all_gather_view(self.as_raw(), send.as_raw(), recv.as_raw(), opt_stream(stream)) })
    }

    pub fn reduce_scatter_view(&self, send: &View, recv: &View, op: Op, stream: Option<&Stream>) -> Result<()> {
        check(unsafe {
            sys::cuabi_nccl_reduce_scatter_view(self.as_raw(), send.as_raw(), recv.as_raw(), op, opt_stream(stream))
        })
    }

    pub fn send_view(&self, view: &View, peer: usize, stream: Option<&Stream>) -> Result<()> {
        let peer = int(peer, "peer")?;
        check(unsafe { sys::cuabi_nccl_send_view(self.as_raw(), view.as_raw(), peer, opt_stream(stream)) })
    }

    pub fn recv_view(&self, view: &View, peer: usize, stream: Option<&Stream>) -> Result<()> {
        let peer = int(peer, "peer")?;
        check(unsafe { sys::cuabi_nccl_recv_view(self.as_raw(), view.as_raw(), peer, opt_stream(stream)) })
    }
}
