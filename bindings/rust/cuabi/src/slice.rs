//! Typed device memory and the safe, kind-checked launch.
//!
//! [`DeviceSlice<T>`] owns device memory of a stream-ordered pool, allocated
//! on a stream (its *home*); [`DeviceView`] / [`DeviceViewMut`] borrow parts
//! of it. A launch goes through [`Stream::launch_builder`]:
//!
//! ```no_run
//! # fn f(stream: &cuabi::Stream, kernel: &cuabi::Kernel) -> cuabi::Result<()> {
//! let x = stream.clone_htod(&[1.0f32, 2.0, 3.0])?;
//! let mut y = stream.alloc_zeros::<f32>(3)?;
//! let n = 3i32;
//! // __global__ void axpy(float a, const float *x, float *y, int n)
//! stream.launch_builder(kernel).arg(&2.0f32).arg(&x).arg(&mut y).arg(&n)
//!     .launch(cuabi::LaunchConfig::for_num_elems(3))?;
//! assert_eq!(stream.clone_dtoh(&y)?, [2.0, 4.0, 6.0]);
//! # Ok(()) }
//! ```
//!
//! What the safe launch proves:
//!
//! * **Kinds.** Each argument is checked against the kernel's parameter
//!   types, which cuabi reads from a C++ kernel's mangled name
//!   (`cuabi_kernel_param_type`): an `f32` for a `float`, a `&DeviceSlice<f32>`
//!   for a `const float *`, a `&mut DeviceSlice<f32>` for a `float *` (a
//!   read-only slice for a pointer the kernel may write is refused), a
//!   [`DeviceRepr`] struct for a parameter of its C++ name and size. A
//!   parameter nothing types exactly -- an `extern "C"` kernel's PTX `.u64`,
//!   which may be a pointer or a `long`, or a CUBIN without names -- refuses
//!   the safe launch with `Status::ArgumentMismatch`; such kernels launch
//!   through the `unsafe` [`LaunchArgs::launch_unchecked`] (or an
//!   [`ArgPack`] and the `unsafe` [`launch`](crate::launch())).
//! * **Liveness and exclusivity.** Slices are borrowed by the builder: a
//!   slice cannot be dropped, and a `&mut` one cannot be aliased, while the
//!   launch is being built (compile errors).
//! * **Stream-ordered lifetimes.** Work on the slice's home stream is
//!   ordered before its free, which is queued on that stream. Work on any
//!   other stream records an event (per launch, shared by its slices); a
//!   later use on another stream waits for the events it conflicts with
//!   (reads wait for the last write, writes for everything), and dropping
//!   the slice makes the home stream wait for all of them before the free --
//!   without blocking the host (as cudarc's `CudaSlice` does). buffer.h:
//!   "The free is ordered on that one stream only".
//! * **Host memory.** Copies from and to host slices wait for the stream
//!   before they return, so the host slice is borrowed exactly as long as
//!   the copy may touch it.
//!
//! What it cannot prove is what the kernel's code does with what it is
//! given: indexing past the slice it was passed is the kernel's bug, as an
//! out-of-bounds access in any foreign function is.
//!
//! Captures are the exception: work captured into a graph runs at every
//! replay, after the slices it names may be gone, so beginning a capture is
//! `unsafe` ([`Stream::begin_capture`]).
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};

use crate::argpack::ArgPack;
use crate::enums::{ArgKind, ParamSource};
use crate::error::{check, Error, Result};
use crate::event::Event;
use crate::launch::LaunchConfig;
use crate::memory::{byte_len, Buffer, MemoryResource, Pod};
use crate::objcode::{Kernel, ParamType};
use crate::stream::Stream;
use crate::sys;

/// A type a kernel takes by value, and the element type of device slices.
///
/// # Safety
/// `Self` must have the size, alignment and field layout of the C++ type(s)
/// named in [`DeviceRepr::CXX_NAMES`] as the kernel's compiler lays them out
/// (a `#[repr(C)]` struct for a struct), and hold no Rust references or
/// pointers to host memory. An `unsafe impl` is that promise: the safe launch
/// checks the name and the size, not the layout.
///
/// ```
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// struct Particle { x: f32, y: f32, z: f32, mass: f32 }
/// // SAFETY: the same four floats as `struct Particle` in the kernel's source.
/// unsafe impl cuabi::DeviceRepr for Particle {
///     const KIND: cuabi::ArgKind = cuabi::ArgKind::Raw;
///     const CXX_NAMES: &'static [&'static str] = &["Particle"];
/// }
/// ```
pub unsafe trait DeviceRepr: Copy + 'static {
    /// The kind cuabi gives a parameter of this type (`ArgKind::Raw` for a
    /// struct or enum; `ArgKind::Struct` for CUDA vector types like `float4`).
    const KIND: ArgKind;
    /// Its C++ spellings as a kernel's demangled name writes them
    /// ("float", "unsigned long long", "Particle", "ns::Params<3>").
    const CXX_NAMES: &'static [&'static str];
}

macro_rules! device_repr {
    ($($t:ty => $k:ident, [$($n:literal),*]);* $(;)?) => {$(
        // SAFETY: a primitive whose C++ counterparts (LP64, as nvcc and NVRTC
        // lay them out) have its size and alignment.
        unsafe impl DeviceRepr for $t {
            const KIND: ArgKind = ArgKind::$k;
            const CXX_NAMES: &'static [&'static str] = &[$($n),*];
        }
    )*};
}
device_repr! {
    i8 => I8, ["signed char", "char"];
    i16 => I16, ["short"];
    i32 => I32, ["int"];
    i64 => I64, ["long", "long long"];
    u8 => U8, ["unsigned char", "char8_t"];
    u16 => U16, ["unsigned short"];
    u32 => U32, ["unsigned int"];
    u64 => U64, ["unsigned long", "unsigned long long"];
    f32 => F32, ["float"];
    f64 => F64, ["double"];
    bool => Bool, ["bool"];
}

// ------------------------------------------------------------------ tracking

/// Uses of one slice's memory on streams other than its home (see the
/// module docs); `foreign` says whether `state` may hold anything.
pub(crate) struct Tracker {
    home: Stream,
    foreign: AtomicBool,
    state: Mutex<UseState>,
}

#[derive(Default)]
struct UseState {
    write: Option<Event>,
    reads: Vec<Event>,
}

impl Tracker {
    fn new(home: Stream) -> Tracker {
        Tracker { home, foreign: AtomicBool::new(false), state: Mutex::new(UseState::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, UseState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Nothing to do: a use on the home stream while no other stream has work on it.
    #[inline]
    fn quiet(&self, s: &Stream) -> bool {
        s.as_raw() == self.home.as_raw() && !self.foreign.load(Ordering::Acquire)
    }

    /// Before a use on `s`: make `s` wait for the uses it conflicts with.
    fn before(&self, s: &Stream, write: bool) -> Result<()> {
        let mut st = self.lock();
        let home = s.as_raw() == self.home.as_raw();
        if !home && st.write.is_none() && st.reads.is_empty() {
            // Everything so far ran on the home stream: one event stands for it.
            let e = new_event(&self.home)?;
            e.record(&self.home)?;
            st.write = Some(e);
            self.foreign.store(true, Ordering::Release);
        }
        if let Some(w) = &st.write {
            s.wait_event(w)?;
        }
        if write {
            for r in &st.reads {
                s.wait_event(r)?;
            }
        }
        Ok(())
    }

    /// After a use on `s`, whose end `e` marks.
    fn after(&self, s: &Stream, e: &Event, write: bool) {
        let mut st = self.lock();
        if s.as_raw() == self.home.as_raw() && write {
            // The home stream waited for everything: it alone orders the rest.
            *st = UseState::default();
            self.foreign.store(false, Ordering::Release);
        } else if write {
            st.write = Some(e.clone());
            st.reads.clear();
            self.foreign.store(true, Ordering::Release);
        } else {
            if st.reads.len() >= 16 {
                st.reads.retain(|r| !r.query().unwrap_or(false));
            }
            st.reads.push(e.clone());
            self.foreign.store(true, Ordering::Release);
        }
    }

    /// Before the free on the home stream: it waits for every other use.
    fn before_free(&self) -> Result<()> {
        if !self.foreign.load(Ordering::Acquire) {
            return Ok(());
        }
        let st = self.lock();
        for e in st.write.iter().chain(st.reads.iter()) {
            self.home.wait_event(e)?;
        }
        Ok(())
    }

    fn events(&self) -> usize {
        let st = self.lock();
        st.write.iter().count() + st.reads.len()
    }
}

fn new_event(s: &Stream) -> Result<Event> {
    Event::with_flags(&s.device()?, sys::CUABI_EVENT_DISABLE_TIMING)
}

/// One use of slices by work queued on a stream: waits before, events after.
/// Nothing is initialised until a use needs tracking (the launch fast path).
struct Uses<'t> {
    list: [MaybeUninit<(&'t Tracker, bool)>; MAX_ARGS],
    n: usize,
}

impl<'t> Uses<'t> {
    #[inline]
    fn new() -> Self {
        Uses { list: [const { MaybeUninit::uninit() }; MAX_ARGS], n: 0 }
    }
    /// Add a use; make `s` wait for what it conflicts with.
    #[inline]
    fn add(&mut self, s: &Stream, t: &'t Tracker, write: bool) -> Result<()> {
        if t.quiet(s) {
            return Ok(());
        }
        if self.n == MAX_ARGS {
            return Err(Error::invalid_argument(format!("more than {MAX_ARGS} slices in one call")));
        }
        t.before(s, write)?;
        self.list[self.n] = MaybeUninit::new((t, write));
        self.n += 1;
        Ok(())
    }
    /// The work was queued on `s`: record its end for every use. Should that
    /// fail (no event to be had), the stream is synchronized instead, so that
    /// no slice can be freed under the work, and the error returned.
    #[inline]
    fn done(&self, s: &Stream) -> Result<()> {
        if self.n == 0 {
            return Ok(());
        }
        let e = match new_event(s).and_then(|e| e.record(s).map(|()| e)) {
            Ok(e) => e,
            Err(err) => {
                let _ = s.synchronize();
                return Err(err);
            }
        };
        for u in &self.list[..self.n] {
            // SAFETY: the first `n` entries were written by `add`.
            let (t, w) = unsafe { u.assume_init() };
            t.after(s, &e, w);
        }
        Ok(())
    }
}

// ------------------------------------------------------------------ slices

/// Device memory holding `len` values of `T`, allocated from the device's
/// stream-ordered default pool on a stream (its home), freed on it when
/// dropped -- after the work other streams queued on it (see the module docs).
pub struct DeviceSlice<T> {
    // Dropped after `Drop::drop` ran `before_free`.
    buf: Buffer,
    ptr: u64,
    len: usize,
    tracker: Tracker,
    _t: PhantomData<T>,
}

impl<T> core::fmt::Debug for DeviceSlice<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "DeviceSlice<{}>({} at {:#x})", core::any::type_name::<T>(), self.len, self.ptr)
    }
}

impl<T> Drop for DeviceSlice<T> {
    fn drop(&mut self) {
        // The free (when `buf` drops) is queued on the home stream: it waits
        // for the other streams' work first. Nothing to report on failure.
        let _ = self.tracker.before_free();
    }
}

impl<T: DeviceRepr + Pod> DeviceSlice<T> {
    fn alloc(stream: &Stream, len: usize) -> Result<DeviceSlice<T>> {
        let bytes = byte_len::<T>(len)?.max(1);
        let res = MemoryResource::device_default(&stream.device()?)?;
        let buf = Buffer::allocate(&res, bytes, 0, Some(stream))?;
        Ok(DeviceSlice {
            ptr: buf.pointer() as u64,
            buf,
            len,
            tracker: Tracker::new(stream.clone()),
            _t: PhantomData,
        })
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it has no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The stream it was allocated on and will be freed on.
    pub fn stream(&self) -> &Stream {
        &self.tracker.home
    }
    /// Its device address (for printing or `unsafe` code: using it does not
    /// borrow the slice).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
    /// The underlying untyped buffer.
    pub fn buffer(&self) -> &Buffer {
        &self.buf
    }
    /// Borrow elements `range` (read-only).
    pub fn slice(&self, range: impl core::ops::RangeBounds<usize>) -> Result<DeviceView<'_, T>> {
        let (start, n) = bounds(range, self.len)?;
        Ok(DeviceView { buf: &self.buf, tracker: &self.tracker, ptr: self.ptr + (start * size_of::<T>()) as u64,
                        start, len: n, _t: PhantomData })
    }
    /// Borrow elements `range` exclusively (writable).
    pub fn slice_mut(&mut self, range: impl core::ops::RangeBounds<usize>) -> Result<DeviceViewMut<'_, T>> {
        let (start, n) = bounds(range, self.len)?;
        Ok(DeviceViewMut { buf: &self.buf, tracker: &self.tracker,
                           ptr: self.ptr + (start * size_of::<T>()) as u64, start, len: n, _t: PhantomData })
    }
    /// Events of other streams' work kept (for tests).
    #[doc(hidden)]
    pub fn pending_events(&self) -> usize {
        self.tracker.events()
    }
}

fn bounds(range: impl core::ops::RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    use core::ops::Bound::*;
    let start = match range.start_bound() {
        Included(&s) => s,
        Excluded(&s) => s.checked_add(1).ok_or_else(|| Error::invalid_argument("slice start overflows"))?,
        Unbounded => 0,
    };
    let end = match range.end_bound() {
        Included(&e) => e.checked_add(1).ok_or_else(|| Error::invalid_argument("slice end overflows"))?,
        Excluded(&e) => e,
        Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::invalid_argument(format!("slice {start}..{end} is out of bounds of {len} elements")));
    }
    Ok((start, end - start))
}

/// Part of a [`DeviceSlice`], borrowed read-only.
pub struct DeviceView<'a, T> {
    buf: &'a Buffer,
    tracker: &'a Tracker,
    ptr: u64,
    start: usize,
    len: usize,
    _t: PhantomData<&'a [T]>,
}

/// Part of a [`DeviceSlice`], borrowed exclusively (writable).
pub struct DeviceViewMut<'a, T> {
    buf: &'a Buffer,
    tracker: &'a Tracker,
    ptr: u64,
    start: usize,
    len: usize,
    _t: PhantomData<&'a mut [T]>,
}

macro_rules! view_common {
    ($name:ident) => {
        impl<T> $name<'_, T> {
            /// Number of elements.
            #[inline]
            pub fn len(&self) -> usize {
                self.len
            }
            /// Whether it has no elements.
            #[inline]
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }
            /// Its device address.
            pub fn device_ptr(&self) -> u64 {
                self.ptr
            }
        }
        impl<T> core::fmt::Debug for $name<'_, T> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, concat!(stringify!($name), "<{}>({} at {:#x})"), core::any::type_name::<T>(), self.len, self.ptr)
            }
        }
    };
}
view_common!(DeviceView);
view_common!(DeviceViewMut);

/// What every device memory argument gives a copy or launch.
struct Mem<'t> {
    buf: &'t Buffer,
    tracker: &'t Tracker,
    /// Byte offset into `buf` and byte length.
    offset: usize,
    bytes: usize,
}

/// Typed device memory that can be read: [`DeviceSlice`], [`DeviceView`], [`DeviceViewMut`].
pub trait DeviceMemory<T> {
    #[doc(hidden)]
    fn mem(&self) -> MemRef<'_>;
}
/// Typed device memory that can be written: `&mut` of [`DeviceSlice`] or [`DeviceViewMut`].
pub trait DeviceMemoryMut<T>: DeviceMemory<T> {}

/// Internal: what a copy needs of device memory.
#[doc(hidden)]
pub struct MemRef<'t>(Mem<'t>);

impl<T: Pod> DeviceMemory<T> for DeviceSlice<T> {
    fn mem(&self) -> MemRef<'_> {
        MemRef(Mem { buf: &self.buf, tracker: &self.tracker, offset: 0, bytes: self.len * size_of::<T>() })
    }
}
impl<T: Pod> DeviceMemoryMut<T> for DeviceSlice<T> {}
impl<T: Pod> DeviceMemory<T> for DeviceView<'_, T> {
    fn mem(&self) -> MemRef<'_> {
        MemRef(Mem { buf: self.buf, tracker: self.tracker, offset: self.start * size_of::<T>(),
                     bytes: self.len * size_of::<T>() })
    }
}
impl<T: Pod> DeviceMemory<T> for DeviceViewMut<'_, T> {
    fn mem(&self) -> MemRef<'_> {
        MemRef(Mem { buf: self.buf, tracker: self.tracker, offset: self.start * size_of::<T>(),
                     bytes: self.len * size_of::<T>() })
    }
}
impl<T: Pod> DeviceMemoryMut<T> for DeviceViewMut<'_, T> {}

// --------------------------------------------------------- stream methods

fn len_mismatch(what: &str, a: usize, b: usize) -> Error {
    Error::invalid_argument(format!("{what}: {a} elements into {b}"))
}

impl Stream {
    /// `len` zeroed values of `T` in device memory, allocated (and later
    /// freed) on this stream from its device's default pool.
    pub fn alloc_zeros<T: DeviceRepr + Pod>(&self, len: usize) -> Result<DeviceSlice<T>> {
        let s = DeviceSlice::<T>::alloc(self, len)?;
        let bytes = s.len * size_of::<T>();
        if bytes > 0 {
            // SAFETY: the buffer is live and we own it; the memset is queued
            // on its home stream, before anything else can use it.
            check(unsafe { sys::cuabi_buffer_memset(s.buf.as_raw(), 0, 0, 1, bytes, self.as_raw()) })?;
        }
        Ok(s)
    }

    /// A device copy of `src` (cudarc's `clone_htod`); returns once `src` is read.
    pub fn clone_htod<T: DeviceRepr + Pod>(&self, src: &[T]) -> Result<DeviceSlice<T>> {
        let mut s = DeviceSlice::<T>::alloc(self, src.len())?;
        self.memcpy_htod(src, &mut s)?;
        Ok(s)
    }

    /// Copy `src` into `dst` (same length); returns once `src` is read.
    pub fn memcpy_htod<T: Pod, D: DeviceMemoryMut<T> + ?Sized>(&self, src: &[T], dst: &mut D) -> Result<()> {
        let MemRef(m) = dst.mem();
        if size_of_val(src) != m.bytes {
            return Err(len_mismatch("memcpy_htod", src.len(), m.bytes / size_of::<T>().max(1)));
        }
        let mut uses = Uses::new();
        uses.add(self, m.tracker, true)?;
        if m.bytes > 0 {
            // SAFETY: the buffer is live (borrowed through `dst`); `src` is
            // read when the stream reaches the copy, and we synchronize the
            // stream below before `src`'s borrow ends (buffer.h: "one with a
            // stream when the stream reaches it").
            check(unsafe {
                sys::cuabi_buffer_copy_from_host(m.buf.as_raw(), m.offset, src.as_ptr().cast(), m.bytes, self.as_raw())
            })?;
        }
        uses.done(self)?;
        self.synchronize()
    }

    /// The values of `src` on the host (cudarc's `clone_dtoh`), once the work
    /// that writes them is done.
    pub fn clone_dtoh<T: Pod + Default, S: DeviceMemory<T> + ?Sized>(&self, src: &S) -> Result<Vec<T>> {
        let n = src.mem().0.bytes / size_of::<T>().max(1);
        let mut v = vec![T::default(); n];
        self.memcpy_dtoh(src, &mut v)?;
        Ok(v)
    }

    /// Copy `src` (same length) into `dst`; returns once `dst` is written.
    pub fn memcpy_dtoh<T: Pod, S: DeviceMemory<T> + ?Sized>(&self, src: &S, dst: &mut [T]) -> Result<()> {
        let MemRef(m) = src.mem();
        if size_of_val(dst) != m.bytes {
            return Err(len_mismatch("memcpy_dtoh", m.bytes / size_of::<T>().max(1), dst.len()));
        }
        let mut uses = Uses::new();
        uses.add(self, m.tracker, false)?;
        if m.bytes > 0 {
            // SAFETY: the buffer is live (borrowed); `dst` is written when the
            // stream reaches the copy, and we synchronize before its borrow
            // ends; T is Pod, so any bytes are a valid value.
            check(unsafe {
                sys::cuabi_buffer_copy_to_host(dst.as_mut_ptr().cast(), m.buf.as_raw(), m.offset, m.bytes, self.as_raw())
            })?;
        }
        uses.done(self)?;
        self.synchronize()
    }

    /// Copy device memory into device memory of the same length, queued on this stream.
    pub fn memcpy_dtod<T: Pod, S: DeviceMemory<T> + ?Sized, D: DeviceMemoryMut<T> + ?Sized>(
        &self, src: &S, dst: &mut D) -> Result<()> {
        let MemRef(s) = src.mem();
        let MemRef(d) = dst.mem();
        if s.bytes != d.bytes {
            return Err(len_mismatch("memcpy_dtod", s.bytes / size_of::<T>().max(1), d.bytes / size_of::<T>().max(1)));
        }
        let mut uses = Uses::new();
        uses.add(self, s.tracker, false)?;
        uses.add(self, d.tracker, true)?;
        if s.bytes > 0 {
            // SAFETY: both buffers are live (borrowed); the copy is queued on
            // this stream and its end recorded for both slices' frees.
            check(unsafe {
                sys::cuabi_buffer_copy(d.buf.as_raw(), d.offset, s.buf.as_raw(), s.offset, s.bytes, self.as_raw())
            })?;
        }
        uses.done(self)
    }

    /// Set every byte of `dst` to zero, queued on this stream.
    pub fn memset_zeros<T: Pod, D: DeviceMemoryMut<T> + ?Sized>(&self, dst: &mut D) -> Result<()> {
        let MemRef(d) = dst.mem();
        let mut uses = Uses::new();
        uses.add(self, d.tracker, true)?;
        if d.bytes > 0 {
            // SAFETY: the buffer is live (borrowed exclusively); queued and tracked.
            check(unsafe { sys::cuabi_buffer_memset(d.buf.as_raw(), d.offset, 0, 1, d.bytes, self.as_raw()) })?;
        }
        uses.done(self)
    }

    /// Start a launch of `kernel` on this stream: add arguments with
    /// [`LaunchArgs::arg`], then [`LaunchArgs::launch`].
    pub fn launch_builder<'a>(&'a self, kernel: &'a Kernel) -> LaunchArgs<'a> {
        LaunchArgs { stream: self, kernel, args: [const { MaybeUninit::uninit() }; MAX_ARGS], n: 0 }
    }
}

// ------------------------------------------------------------------ launch

/// Most arguments one safe launch takes.
pub const MAX_ARGS: usize = 32;

/// What a Rust argument is, for the check against the parameter type.
enum Desc {
    Value { kind: ArgKind, names: &'static [&'static str], size: usize, rust: fn() -> &'static str },
    Slice { names: &'static [&'static str], write: bool, rust: fn() -> &'static str },
}

/// The descriptions of `T` as an argument, one static each.
struct DescOf<T>(PhantomData<T>);
impl<T: DeviceRepr> DescOf<T> {
    const VALUE: &'static Desc = &Desc::Value {
        kind: T::KIND, names: T::CXX_NAMES, size: size_of::<T>(), rust: core::any::type_name::<T>,
    };
    const READ: &'static Desc = &Desc::Slice { names: T::CXX_NAMES, write: false, rust: core::any::type_name::<T> };
    const WRITE: &'static Desc = &Desc::Slice { names: T::CXX_NAMES, write: true, rust: core::any::type_name::<T> };
}

#[derive(Clone, Copy)]
struct Arg<'a> {
    desc: &'static Desc,
    /// The bytes to pass: the value, or the device address.
    data: *const u8,
    tracker: Option<&'a Tracker>,
}

/// A launch being built: the kernel, its stream and the arguments so far
/// (borrowed until the launch). See the [module docs](crate::slice).
pub struct LaunchArgs<'a> {
    stream: &'a Stream,
    kernel: &'a Kernel,
    args: [MaybeUninit<Arg<'a>>; MAX_ARGS],
    n: usize,
}

/// A value that can be a kernel argument of a safe launch: `&T` for a
/// [`DeviceRepr`] `T` (by value), `&DeviceSlice<T>` / `&DeviceView<T>` for a
/// `const T *` parameter, `&mut DeviceSlice<T>` / `&mut DeviceViewMut<T>`
/// for a `T *` one.
pub trait KernelArgument<'a> {
    #[doc(hidden)]
    fn describe(self) -> ArgSpec<'a>;
}

/// Internal: one argument's description.
#[doc(hidden)]
pub struct ArgSpec<'a>(Arg<'a>);

impl<'a, T: DeviceRepr> KernelArgument<'a> for &'a T {
    fn describe(self) -> ArgSpec<'a> {
        ArgSpec(Arg {
            desc: DescOf::<T>::VALUE,
            data: (self as *const T).cast(),
            tracker: None,
        })
    }
}

fn slice_arg<'a, T: DeviceRepr>(ptr: &'a u64, tracker: &'a Tracker, write: bool) -> ArgSpec<'a> {
    ArgSpec(Arg {
        desc: if write { DescOf::<T>::WRITE } else { DescOf::<T>::READ },
        data: (ptr as *const u64).cast(),
        tracker: Some(tracker),
    })
}

impl<'a, T: DeviceRepr> KernelArgument<'a> for &'a DeviceSlice<T> {
    fn describe(self) -> ArgSpec<'a> {
        slice_arg::<T>(&self.ptr, &self.tracker, false)
    }
}
impl<'a, T: DeviceRepr> KernelArgument<'a> for &'a mut DeviceSlice<T> {
    fn describe(self) -> ArgSpec<'a> {
        let s: &'a DeviceSlice<T> = self;
        slice_arg::<T>(&s.ptr, &s.tracker, true)
    }
}
impl<'a, T: DeviceRepr> KernelArgument<'a> for &'a DeviceView<'_, T> {
    fn describe(self) -> ArgSpec<'a> {
        slice_arg::<T>(&self.ptr, self.tracker, false)
    }
}
impl<'a, T: DeviceRepr> KernelArgument<'a> for &'a DeviceViewMut<'_, T> {
    fn describe(self) -> ArgSpec<'a> {
        slice_arg::<T>(&self.ptr, self.tracker, false)
    }
}
impl<'a, T: DeviceRepr> KernelArgument<'a> for &'a mut DeviceViewMut<'_, T> {
    fn describe(self) -> ArgSpec<'a> {
        let v: &'a DeviceViewMut<'_, T> = self;
        slice_arg::<T>(&v.ptr, v.tracker, true)
    }
}

/// A kernel's parameters as the safe launch checks them, with a pack to
/// launch from (kept per [`Kernel`] value).
pub(crate) struct KernelSig {
    params: Vec<Param>,
    /// The pack; `busy` says a launch is writing and launching it.
    pack: PackBlob,
    busy: AtomicBool,
}

struct PackBlob {
    pack: ArgPack,
    blob: *mut u8,
    size: usize,
}
// SAFETY: `blob` points into `pack`'s own storage (argpack.h: "valid while
// the pack lives"); it is written only by the launch holding `busy`
// (KernelSig::take), so one thread at a time, and the pack is read by the
// library only during that launch's call.
unsafe impl Send for PackBlob {}
// SAFETY: as for Send: `&PackBlob` is used only under `busy`.
unsafe impl Sync for PackBlob {}

/// The pack of one launch: the kernel's own (`busy` taken), or, when
/// another thread has it, a fresh one for this launch.
enum PackUse<'k> {
    Shared(&'k KernelSig),
    Own(PackBlob),
}

impl PackUse<'_> {
    fn blob(&self) -> &PackBlob {
        match self {
            PackUse::Shared(k) => &k.pack,
            PackUse::Own(p) => p,
        }
    }
}

impl Drop for PackUse<'_> {
    fn drop(&mut self) {
        if let PackUse::Shared(k) = self {
            k.busy.store(false, Ordering::Release);
        }
    }
}

struct Param {
    offset: usize,
    size: usize,
    check: Check,
    /// The last argument description a checked launch accepted here: the
    /// next launch with the same one (the same Rust type and kind) skips the
    /// checks. A `Desc` is a `'static` constant, so equal addresses mean
    /// equal contents and the same verdict; a miss just checks again.
    accepted: AtomicPtr<Desc>,
}

enum Check {
    /// A scalar of this kind (exact).
    Kind(ArgKind),
    /// Any integer of this size (PTX `.u32` and the like).
    Integer(usize),
    /// A struct, enum or vector type by its C++ name.
    Named(String),
    /// A pointer to this element type ("void": any); writable unless const.
    Pointer { elem: String, constant: bool },
    /// Nothing safe: why not.
    Refuse(String),
}

/// The pointee and its constness of a C++ pointer or reference type name
/// ("float const*", "const float *", "float* restrict"); None when it is
/// not a pointer to a plain type (a pointer to pointer, a function pointer).
fn pointee(t: &str) -> Option<(String, bool)> {
    let mut t = t.trim();
    // Qualifiers of the pointer itself.
    loop {
        let before = t;
        for q in ["restrict", "__restrict__", "__restrict", "const", "volatile"] {
            if let Some(r) = t.strip_suffix(q) {
                if r.ends_with([' ', '*', '&']) {
                    t = r.trim_end();
                }
            }
        }
        if t == before {
            break;
        }
    }
    let inner = t.strip_suffix('*').or_else(|| t.strip_suffix('&'))?.trim_end();
    if inner.contains(['*', '&', '(', ')', '[']) {
        return None;
    }
    let mut constant = false;
    let words: Vec<&str> = inner.split_whitespace().filter(|w| match *w {
        "const" => { constant = true; false }
        "volatile" => false,
        _ => true,
    }).collect();
    if words.is_empty() {
        return None;
    }
    Some((words.join(" "), constant))
}

fn scalar(k: ArgKind) -> bool {
    use ArgKind::*;
    matches!(k, I8 | I16 | I32 | I64 | U8 | U16 | U32 | U64 | F16 | Bf16 | F32 | F64 | C64 | C128 | Bool)
}

fn is_integer(k: ArgKind) -> bool {
    use ArgKind::*;
    matches!(k, I8 | I16 | I32 | I64 | U8 | U16 | U32 | U64 | Bool)
}

impl Param {
    fn of(i: usize, t: &ParamType) -> Param {
        let unchecked = "launch it with the unsafe LaunchArgs::launch_unchecked";
        let check = match t.source {
            ParamSource::FromName => match t.kind {
                k if scalar(k) => Check::Kind(k),
                ArgKind::Ptr => match pointee(&t.type_name) {
                    Some((elem, constant)) => Check::Pointer { elem, constant },
                    None => Check::Refuse(format!(
                        "parameter {i} is `{}`, which no slice type stands for; {unchecked}", t.type_name)),
                },
                ArgKind::Raw | ArgKind::Struct => Check::Named(t.type_name.clone()),
                _ => Check::Refuse(format!("parameter {i} is `{}`; {unchecked}", t.type_name)),
            },
            ParamSource::FromPtx => match t.kind {
                ArgKind::F32 | ArgKind::F64 => Check::Kind(t.kind),
                ArgKind::Integer => Check::Integer(t.size),
                ArgKind::IntPtr => Check::Refuse(format!(
                    "parameter {i} is a PTX `{}`: a pointer or an integer, the PTX does not say \
                     (an extern \"C\" kernel); compile it as C++ (no extern \"C\", look it up by a \
                     name expression) for a kind-checked launch, or {unchecked}", t.type_name)),
                _ => Check::Refuse(format!("parameter {i} is a PTX `{}`; {unchecked}", t.type_name)),
            },
            _ => Check::Refuse(format!(
                "the type of parameter {i} is unknown (only its size, {} bytes, is); {unchecked}", t.size)),
        };
        Param { offset: t.offset, size: t.size, check, accepted: AtomicPtr::new(core::ptr::null_mut()) }
    }

    /// Whether `d` may be passed here; else why not.
    fn accepts(&self, i: usize, d: &Desc) -> std::result::Result<(), String> {
        let ok = match (&self.check, d) {
            (Check::Refuse(why), _) => return Err(why.clone()),
            (Check::Kind(k), Desc::Value { kind, size, .. }) => k == kind && *size == self.size,
            (Check::Integer(n), Desc::Value { kind, size, .. }) => is_integer(*kind) && size == n,
            (Check::Named(name), Desc::Value { names, size, .. }) => *size == self.size && names.contains(&name.as_str()),
            (Check::Pointer { elem, constant }, Desc::Slice { names, write, rust }) => {
                if !(elem == "void" || names.contains(&elem.as_str())) {
                    false
                } else if !*constant && !*write {
                    return Err(format!(
                        "parameter {i} is `{elem} *`, which the kernel may write: pass `&mut` \
                         of a slice of {} (a `&` slice is read-only: `const {elem} *`)", rust()));
                } else {
                    true
                }
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!("parameter {i} is {}, not {}", self.describe(), describe(d)))
        }
    }

    fn describe(&self) -> String {
        match &self.check {
            Check::Kind(k) => format!("{k:?} ({} bytes)", self.size),
            Check::Integer(n) => format!("an integer of {n} bytes"),
            Check::Named(n) => format!("`{n}` ({} bytes)", self.size),
            Check::Pointer { elem, constant } => format!("`{}{elem} *`", if *constant { "const " } else { "" }),
            Check::Refuse(w) => w.clone(),
        }
    }
}

fn describe(d: &Desc) -> String {
    match d {
        Desc::Value { rust, size, .. } => format!("a {} ({size} bytes)", rust()),
        Desc::Slice { rust, write: true, .. } => format!("a writable slice of {}", rust()),
        Desc::Slice { rust, write: false, .. } => format!("a read-only slice of {}", rust()),
    }
}

impl PackBlob {
    fn of(kernel: &Kernel) -> Result<PackBlob> {
        let pack = ArgPack::for_kernel(kernel)?;
        let mut blob = core::ptr::null_mut();
        // SAFETY: the pack is live and ours; `blob` is a local the call fills
        // with the pack's own storage, "valid while the pack lives".
        check(unsafe { sys::cuabi_argpack_blob_pointer(&mut blob, pack.as_raw()) })?;
        let size = pack.blob_size();
        Ok(PackBlob { pack, blob: blob.cast(), size })
    }
}

impl KernelSig {
    fn of(kernel: &Kernel) -> Result<KernelSig> {
        let types = kernel.param_types()?;
        let params = types.iter().enumerate().map(|(i, t)| Param::of(i, t)).collect();
        Ok(KernelSig { params, pack: PackBlob::of(kernel)?, busy: AtomicBool::new(false) })
    }

    /// The pack for one launch (see [`PackUse`]).
    #[inline]
    fn take(&self, kernel: &Kernel) -> Result<PackUse<'_>> {
        if self.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            Ok(PackUse::Shared(self))
        } else {
            Ok(PackUse::Own(PackBlob::of(kernel)?))
        }
    }
}

impl Kernel {
    /// The parameter checks and launch pack of this kernel value, made once.
    pub(crate) fn sig(&self) -> Result<&Arc<KernelSig>> {
        if let Some(s) = self.safe.get() {
            return Ok(s);
        }
        let s = Arc::new(KernelSig::of(self)?);
        Ok(self.safe.get_or_init(|| s))
    }
}

impl<'a> LaunchArgs<'a> {
    /// Append an argument (see [`KernelArgument`]).
    #[allow(clippy::should_implement_trait)]
    pub fn arg<A: KernelArgument<'a>>(&mut self, a: A) -> &mut Self {
        let ArgSpec(arg) = a.describe();
        if self.n < MAX_ARGS {
            self.args[self.n] = MaybeUninit::new(arg);
        }
        self.n += 1; // past MAX_ARGS: refused at launch
        self
    }

    fn arguments(&self) -> Result<&[Arg<'a>]> {
        if self.n > MAX_ARGS {
            return Err(Error::invalid_argument(format!(
                "LaunchArgs: {} arguments; a safe launch takes at most {MAX_ARGS} (use an ArgPack)", self.n)));
        }
        // SAFETY: the first `n` entries were written by `arg` (MaybeUninit::new).
        Ok(unsafe { core::slice::from_raw_parts(self.args.as_ptr().cast::<Arg<'a>>(), self.n) })
    }

    /// Check every argument against the kernel's parameter types and launch
    /// (see the [module docs](crate::slice) for what is checked). A mismatch
    /// is `Status::ArgumentMismatch` naming the parameter; nothing is launched.
    pub fn launch(&mut self, config: LaunchConfig) -> Result<()> {
        self.go(config, true)
    }

    /// Launch without checking kinds -- only the count and each argument's
    /// size against the kernel's parameters (what an `extern "C"` kernel
    /// allows). Slices are still borrowed and their stream-ordered lifetimes
    /// kept.
    ///
    /// # Safety
    /// Each argument must be what the kernel's parameter at its place is
    /// (a slice for a pointer the kernel reads within the slice's bounds, and
    /// writes only through a `&mut` slice; a value of the parameter's type).
    pub unsafe fn launch_unchecked(&mut self, config: LaunchConfig) -> Result<()> {
        self.go(config, false)
    }

    fn go(&mut self, config: LaunchConfig, checked: bool) -> Result<()> {
        let args = self.arguments()?;
        let sig = self.kernel.sig()?;
        if args.len() != sig.params.len() {
            return Err(Error::argument_mismatch(format!(
                "launch of {}: {} arguments for {} parameters", self.kernel.name(), args.len(), sig.params.len())));
        }
        for (i, (a, p)) in args.iter().zip(&sig.params).enumerate() {
            let d = (a.desc as *const Desc).cast_mut();
            if checked && p.accepted.load(Ordering::Relaxed) == d {
                continue; // this description passed both checks below before
            }
            let size = match a.desc { Desc::Value { size, .. } => *size, Desc::Slice { .. } => 8 };
            if size != p.size {
                return Err(Error::argument_mismatch(format!(
                    "launch of {}: parameter {i} has {} bytes, the argument ({}) {size}",
                    self.kernel.name(), p.size, describe(a.desc))));
            }
            if checked {
                p.accepts(i, a.desc).map_err(|why| Error::argument_mismatch(format!(
                    "launch of {}: {why}", self.kernel.name())))?;
                p.accepted.store(d, Ordering::Relaxed);
            }
        }
        let s = self.stream;
        let mut uses = Uses::new();
        for a in args {
            if let (Some(t), Desc::Slice { write, .. }) = (a.tracker, a.desc) {
                uses.add(s, t, *write)?;
            }
        }
        let pu = sig.take(self.kernel)?;
        let pb = pu.blob();
        for (a, p) in args.iter().zip(&sig.params) {
            // Sizes were checked equal above; the slot lies inside the blob
            // (the pack was made from the same parameter info).
            debug_assert!(p.offset + p.size <= pb.size);
            if p.offset + p.size > pb.size {
                return Err(Error::internal("launch: a parameter lies outside the pack"));
            }
            // SAFETY: `a.data` points at `p.size` readable bytes borrowed for
            // 'a (a value, or a slice's address field); `pb.blob` is the
            // pack's storage of `pb.size` bytes, ours while `pu` lives.
            unsafe {
                let dst = pb.blob.add(p.offset);
                match p.size {
                    // The common sizes as one load and store, not a memcpy call.
                    8 => dst.cast::<u64>().write_unaligned(a.data.cast::<u64>().read_unaligned()),
                    4 => dst.cast::<u32>().write_unaligned(a.data.cast::<u32>().read_unaligned()),
                    n => core::ptr::copy_nonoverlapping(a.data, dst, n),
                }
            };
        }
        let cfg = LaunchConfig { stream: Some(s), ..config };
        // SAFETY: kernel, pack and stream are live; the pack holds values
        // checked against the kernel's parameter types (or vouched for by the
        // caller of launch_unchecked); the slices named stay alive until the
        // work is done (stream order or the events recorded below); the pack
        // is ours while `pu` lives (argpack.h: no set races the launch).
        let st = cfg.with_c(|c| unsafe { sys::cuabi_launch(self.kernel.as_raw(), pb.pack.as_raw(), c) })?;
        drop(pu);
        check(st)?;
        uses.done(s)
    }
}

#[cfg(test)]
mod tests {
    use super::pointee;

    #[test]
    fn pointer_type_names() {
        let p = pointee;
        assert_eq!(p("float const*"), Some(("float".into(), true)));
        assert_eq!(p("const float *"), Some(("float".into(), true)));
        assert_eq!(p("float*"), Some(("float".into(), false)));
        assert_eq!(p("unsigned long long*"), Some(("unsigned long long".into(), false)));
        assert_eq!(p("float* restrict"), Some(("float".into(), false)));
        assert_eq!(p("float const* __restrict__"), Some(("float".into(), true)));
        assert_eq!(p("float volatile*"), Some(("float".into(), false)));
        assert_eq!(p("float&"), Some(("float".into(), false)));
        assert_eq!(p("void const*"), Some(("void".into(), true)));
        assert_eq!(p("ns::P<3>*"), Some(("ns::P<3>".into(), false)));
        assert_eq!(p("float**"), None);
        assert_eq!(p("void (*)(int)"), None);
        assert_eq!(p("float"), None);
        assert_eq!(p("*"), None);
    }
}
