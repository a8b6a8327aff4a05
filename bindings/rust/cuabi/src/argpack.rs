//! Kernel argument packs and a typed builder for them.
use crate::enums::ArgKind;
use crate::error::{c_string, check, infallible, Error, Result};
use crate::sys;

handle_core!(
    /// The pack handle of an [`ArgPack`].
    ArgPackRaw, sys::cuabi_argpack, sys::cuabi_argpack_release
);

/// A kernel's parameter list with the storage for its values.
///
/// Not `Clone`: a second owner could set values while this one launches,
/// which the C side documents as a race.
///
/// The C pack keeps the *handles* of the buffers and views its `buffer` and
/// `view` slots name, not references, and looks them up at each launch. A
/// launch on one thread while another thread drops that `Buffer` or `View`
/// would read the freed object (the lookup and the read are not atomic), so
/// the pack also keeps a C view of that memory for as long as a slot names
/// it ([`BufferArg`], [`ViewArg`]): the struct the lookup reads stays alive,
/// and a dropped buffer's handle is refused cleanly at the launch.
pub struct ArgPack {
    raw: ArgPackRaw,
    kept: Vec<(usize, Kept)>,
    keeps: u64,         // views kept so far (set() tells a typed store that kept one)
}

// SAFETY: argpack.h: "A pack may be read from several threads at once, but
// setting values while another thread launches with the same pack is a
// race." Setters take `&mut self`, so safe Rust cannot race them with `&self`
// readers; the kept views are C references (view.h: usable from any thread).
unsafe impl Send for ArgPack {}
// SAFETY: as for Send.
unsafe impl Sync for ArgPack {}

/// What keeps alive what a slot names (see [`ArgPack`]): a reference to a C
/// view for a `buffer` or `view` slot, or the texture or surface object of
/// a `handle` slot (crate::texture).
enum Kept {
    View(core::ptr::NonNull<sys::cuabi_view>),
    Object(#[allow(dead_code)] Box<dyn core::any::Any + Send + Sync>),
}

impl Drop for Kept {
    fn drop(&mut self) {
        if let Kept::View(v) = self {
            // SAFETY: we own this reference (taken by of_buffer / of_view) and give it up once.
            let _ = unsafe { sys::cuabi_view_release(v.as_ptr()) };
        }
    }
}

impl Kept {
    /// A new view of the whole buffer (it holds the buffer's memory and struct).
    fn of_buffer(b: *mut sys::cuabi_buffer) -> Result<Kept> {
        let mut n = 0usize;
        // SAFETY: `b` comes from a live `&Buffer` (BufferArg is made by
        // Buffer::arg; a stale handle is refused, common.h); `n` is a local.
        check(unsafe { sys::cuabi_buffer_size(&mut n, b) })?;
        let shape = [i64::try_from(n).map_err(|_| Error::invalid_argument("buffer too large"))?];
        let mut v = core::ptr::null_mut();
        // SAFETY: as above; `shape` and `v` are locals used during the call.
        check(unsafe {
            sys::cuabi_view_create(&mut v, b, 0, sys::CUABI_DTYPE_UINT.0 as _, 8, 1, shape.as_ptr(),
                                   core::ptr::null(), 0)
        })?;
        core::ptr::NonNull::new(v).map(Kept::View).ok_or_else(|| Error::internal("cuabi_view_create: NULL"))
    }
    /// One more reference to a view.
    fn of_view(v: *mut sys::cuabi_view) -> Result<Kept> {
        // SAFETY: `v` comes from a live `&View` (View::arg); a stale handle is refused.
        check(unsafe { sys::cuabi_view_retain(v) })?;
        core::ptr::NonNull::new(v).map(Kept::View).ok_or_else(|| Error::internal("ViewArg: NULL"))
    }
}

impl ArgPack {
    /// Take ownership of one reference to a raw pack. Buffer and view slots
    /// it names already are not kept alive by it (see [`ArgPack`]).
    ///
    /// # Safety
    /// `ptr` must be a live pack handle whose reference the caller owns and
    /// gives up.
    pub unsafe fn from_raw(ptr: *mut sys::cuabi_argpack) -> Option<Self> {
        // SAFETY: the caller's contract.
        unsafe { ArgPackRaw::from_raw(ptr) }.map(|raw| ArgPack { raw, kept: Vec::new(), keeps: 0 })
    }

    /// The raw handle, still owned by `self`.
    pub fn as_raw(&self) -> *mut sys::cuabi_argpack {
        self.raw.as_raw()
    }

    /// Give up ownership: the caller must release the handle. The memory of
    /// the buffer and view slots is no longer kept alive by the pack.
    pub fn into_raw(self) -> *mut sys::cuabi_argpack {
        let ArgPack { raw, kept, .. } = self;
        drop(kept);
        raw.into_raw()
    }

    fn create(f: impl FnOnce(*mut *mut sys::cuabi_argpack) -> sys::cuabi_status) -> Result<Self> {
        Ok(ArgPack { raw: ArgPackRaw::create(f)?, kept: Vec::new(), keeps: 0 })
    }

    /// Slot `slot` names `k`'s memory now (None: no buffer or view).
    fn keep(&mut self, slot: usize, k: Option<Kept>) {
        self.kept.retain(|(s, _)| *s != slot);
        if let Some(k) = k {
            self.kept.push((slot, k));
            self.keeps += 1;
        }
    }

    /// Slot `slot` names a texture or surface object now, which `o` keeps
    /// alive while it does (crate::texture).
    pub(crate) fn keep_object(&mut self, slot: usize, o: Box<dyn core::any::Any + Send + Sync>) {
        self.keep(slot, Some(Kept::Object(o)));
    }

    /// A `buffer` or `view` slot, whose value is a handle: only the typed
    /// setters ([`BufferArg`], [`ViewArg`]) fill it.
    fn is_ref_slot(&self, slot: usize) -> Result<bool> {
        let k = self.slot_kind(slot)?;
        Ok(k == ArgKind::Buffer || k == ArgKind::View)
    }
}

impl core::fmt::Debug for ArgPack {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ArgPack({:p})", self.raw.as_raw())
    }
}

impl PartialEq for ArgPack {
    fn eq(&self, o: &Self) -> bool {
        self.raw == o.raw
    }
}
impl Eq for ArgPack {}

/// A raw device address passed as a `ptr` parameter. Any integer makes one:
/// it is only a value to store in a pack, and a launch of a pack is `unsafe`
/// (the caller promises the address is valid for the kernel). The safe
/// launch ([`LaunchArgs`](crate::LaunchArgs)) takes
/// [`DeviceSlice`](crate::DeviceSlice)s instead.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct DevicePtr(pub u64);

/// A value that can be a kernel argument: its signature type and how to
/// store it in a pack slot.
pub trait KernelArg {
    /// The signature spelling (see api/argpack.toml), e.g. "i32".
    fn signature(&self) -> String;
    /// Store the value in `slot`.
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()>;
}

macro_rules! int_arg {
    ($($t:ty => $sig:literal, $set:ident, $wide:ty);* $(;)?) => {$(
        impl KernelArg for $t {
            fn signature(&self) -> String { $sig.into() }
            fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
                // SAFETY: `pack` is live and exclusively borrowed; the library checks slot and range.
                check(unsafe { sys::$set(pack.as_raw(), slot, *self as $wide) })
            }
        }
    )*};
}
int_arg! {
    i8 => "i8", cuabi_argpack_set_int, i64;
    i16 => "i16", cuabi_argpack_set_int, i64;
    i32 => "i32", cuabi_argpack_set_int, i64;
    i64 => "i64", cuabi_argpack_set_int, i64;
    u8 => "u8", cuabi_argpack_set_uint, u64;
    u16 => "u16", cuabi_argpack_set_uint, u64;
    u32 => "u32", cuabi_argpack_set_uint, u64;
    u64 => "u64", cuabi_argpack_set_uint, u64;
    bool => "bool", cuabi_argpack_set_uint, u64;
}

/// A float for a parameter of unknown type (a raw slot) must have the
/// slot's size: an `f64` is not converted into 4 bytes that might be an
/// `int` (docs/launch.md, "Values per slot kind").
fn float_fits_raw(pack: &ArgPack, slot: usize, size: usize, what: &str) -> Result<()> {
    if pack.slot_kind(slot)? == ArgKind::Raw && pack.slot_size(slot)? != size {
        return Err(Error::argument_mismatch(format!(
            "slot {slot}: an {what} for a {}-byte parameter of unknown type; pass a float of \
             that size", pack.slot_size(slot)?)));
    }
    Ok(())
}
impl KernelArg for f32 {
    fn signature(&self) -> String { "f32".into() }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
        float_fits_raw(pack, slot, 4, "f32")?;
        // SAFETY: as the integer setters.
        check(unsafe { sys::cuabi_argpack_set_float(pack.as_raw(), slot, *self as f64) })
    }
}
impl KernelArg for f64 {
    fn signature(&self) -> String { "f64".into() }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
        float_fits_raw(pack, slot, 8, "f64")?;
        // SAFETY: as the integer setters.
        check(unsafe { sys::cuabi_argpack_set_float(pack.as_raw(), slot, *self) })
    }
}
impl KernelArg for DevicePtr {
    fn signature(&self) -> String { "ptr".into() }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
        // SAFETY: as the integer setters; the value is stored, not followed.
        check(unsafe { sys::cuabi_argpack_set_pointer(pack.as_raw(), slot, self.0) })
    }
}
/// A `#[repr(C)]` value passed by value as opaque bytes: `Bytes(value)`
/// becomes `align(A) struct`-free raw storage of the value's size.
#[derive(Copy, Clone, Debug)]
pub struct Bytes<T: Copy>(pub T);
impl<T: Copy> KernelArg for Bytes<T> {
    fn signature(&self) -> String {
        // A struct of bytes with the value's alignment has its size and alignment.
        let n = core::mem::size_of::<T>();
        let members = vec!["u8"; n.max(1)].join(", ");
        format!("align({}) struct{{{}}}", core::mem::align_of::<T>(), members)
    }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
        let p = &self.0 as *const T as *const core::ffi::c_void;
        // SAFETY: `p` points at size_of::<T>() bytes of `self`, read during the call.
        check(unsafe { sys::cuabi_argpack_set_bytes(pack.as_raw(), slot, p, core::mem::size_of::<T>()) })
    }
}

/// A buffer passed as a `buffer` parameter (its address at launch time).
/// Holds the handle, not the buffer: the library looks the handle up at
/// each launch and fails cleanly, naming the slot, if it was destroyed.
#[derive(Copy, Clone, Debug)]
pub struct BufferArg(pub(crate) *mut sys::cuabi_buffer);
impl KernelArg for BufferArg {
    fn signature(&self) -> String { "buffer".into() }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
        // Kept alive while the slot names it (see ArgPack).
        let kept = Kept::of_buffer(self.0)?;
        // SAFETY: both handles are live (the buffer's memory now kept by `kept`).
        check(unsafe { sys::cuabi_argpack_set_buffer(pack.as_raw(), slot, self.0) })?;
        pack.keep(slot, Some(kept));
        Ok(())
    }
}
/// A view passed as a `view` parameter (its first element's address).
#[derive(Copy, Clone, Debug)]
pub struct ViewArg(pub(crate) *mut sys::cuabi_view);
impl KernelArg for ViewArg {
    fn signature(&self) -> String { "view".into() }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
        let kept = Kept::of_view(self.0)?;
        // SAFETY: as for BufferArg.
        check(unsafe { sys::cuabi_argpack_set_view(pack.as_raw(), slot, self.0) })?;
        pack.keep(slot, Some(kept));
        Ok(())
    }
}

/// Layout of one pack item (a slot or a struct member).
pub type ArgInfo = sys::cuabi_arg_info;

impl ArgPack {
    /// A pack from a signature, e.g. "ptr, i32, f32, struct{f32, i32}"; values start zeroed.
    pub fn new(signature: &str) -> Result<ArgPack> {
        let s = c_string("signature", signature)?;
        // SAFETY: `s` is a NUL-terminated string read during the call.
        ArgPack::create(|out| unsafe { sys::cuabi_argpack_create(out, s.as_ptr()) })
    }

    /// A pack of opaque slots with these sizes (and offsets, or natural layout).
    pub fn from_sizes(sizes: &[usize], offsets: Option<&[usize]>) -> Result<ArgPack> {
        if let Some(o) = offsets {
            if o.len() != sizes.len() {
                return Err(Error::invalid_argument("ArgPack::from_sizes: offsets and sizes differ in length"));
            }
        }
        let op = offsets.map_or(core::ptr::null(), |o| o.as_ptr());
        // SAFETY: the arrays hold `sizes.len()` values, read during the call.
        ArgPack::create(|out| unsafe { sys::cuabi_argpack_create_from_sizes(out, sizes.as_ptr(), op, sizes.len()) })
    }

    /// A pack for `kernel`: one slot per parameter, typed as its mangled name
    /// or PTX says (`Kernel::param_types`), raw where nothing does. The typed
    /// setters then refuse a value of the wrong kind (an `f32` for an `int`
    /// parameter) instead of reinterpreting its bits.
    pub fn for_kernel(kernel: &crate::Kernel) -> Result<ArgPack> {
        // SAFETY: `kernel` is live for the call.
        ArgPack::create(|out| unsafe { sys::cuabi_argpack_create_for_kernel(out, kernel.as_raw()) })
    }

    /// Start a typed builder: `ArgPack::builder().arg(DevicePtr(p)).arg(n).build()`.
    pub fn builder() -> ArgPackBuilder {
        ArgPackBuilder { args: Vec::new() }
    }

    fn size_query(&self, f: unsafe extern "C" fn(*mut usize, *mut sys::cuabi_argpack) -> sys::cuabi_status,
                  what: &str) -> usize {
        let mut v = 0usize;
        // SAFETY: `self` is live; `v` a local written during the call.
        infallible(unsafe { f(&mut v, self.as_raw()) }, what);
        v
    }

    /// Number of slots (kernel parameters).
    pub fn len(&self) -> usize { self.size_query(sys::cuabi_argpack_count, "cuabi_argpack_count") }
    /// Whether the pack has no slots (a kernel without parameters).
    pub fn is_empty(&self) -> bool { self.len() == 0 }
    /// Size of the packed blob of all parameters.
    pub fn blob_size(&self) -> usize { self.size_query(sys::cuabi_argpack_blob_size, "cuabi_argpack_blob_size") }
    /// Number of items (slots and struct members).
    pub fn item_count(&self) -> usize { self.size_query(sys::cuabi_argpack_item_count, "cuabi_argpack_item_count") }

    pub fn slot_size(&self, slot: usize) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: `self` is live; the library checks `slot`; `v` is a local.
        check(unsafe { sys::cuabi_argpack_slot_size(&mut v, self.as_raw(), slot) })?;
        Ok(v)
    }

    pub fn slot_offset(&self, slot: usize) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: as slot_size.
        check(unsafe { sys::cuabi_argpack_slot_offset(&mut v, self.as_raw(), slot) })?;
        Ok(v)
    }

    pub fn slot_kind(&self, slot: usize) -> Result<ArgKind> {
        let mut v = sys::cuabi_arg_kind::default();
        // SAFETY: as slot_size.
        check(unsafe { sys::cuabi_argpack_slot_kind(&mut v, self.as_raw(), slot) })?;
        Ok(v.into())
    }

    pub fn item(&self, index: usize) -> Result<ArgInfo> {
        let mut info = ArgInfo::default();
        // SAFETY: `info` is a local the init function fills.
        check(unsafe { sys::cuabi_arg_info_init(&mut info, sys::CUABI_ARG_INFO_VERSION) })?;
        // SAFETY: `self` is live; the library checks `index`; `info` is a local.
        check(unsafe { sys::cuabi_argpack_item(&mut info, self.as_raw(), index) })?;
        Ok(info)
    }

    /// Set slot `slot` to a typed value (the library checks kind and range).
    pub fn set<T: KernelArg + ?Sized>(&mut self, slot: usize, value: &T) -> Result<()> {
        let keeps = self.keeps;
        value.store(self, slot)?;
        if self.keeps == keeps {
            // A plain value: an address slot no longer names a buffer or view.
            self.keep(slot, None);
        }
        Ok(())
    }

    /// Copy raw bytes into a slot; their length must be the slot's size.
    pub fn set_bytes(&mut self, slot: usize, bytes: &[u8]) -> Result<()> {
        // SAFETY: `self` is live and exclusively borrowed; `bytes` is read during the call.
        check(unsafe { sys::cuabi_argpack_set_bytes(self.as_raw(), slot, bytes.as_ptr().cast(), bytes.len()) })?;
        self.keep(slot, None);
        Ok(())
    }

    /// A slot's current bytes.
    pub fn get_bytes(&self, slot: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; self.slot_size(slot)?];
        // SAFETY: `v` holds the slot's size in bytes, written during the call.
        check(unsafe { sys::cuabi_argpack_get_bytes(v.as_mut_ptr().cast(), v.len(), self.as_raw(), slot) })?;
        Ok(v)
    }

    /// Set every slot from one blob laid out as `slot_offset` says. Refused
    /// for a pack with `buffer` or `view` slots, whose blob values would be
    /// handles the pack could not keep alive (set those with [`BufferArg`] /
    /// [`ViewArg`]).
    pub fn set_blob(&mut self, blob: &[u8]) -> Result<()> {
        for slot in 0..self.len() {
            if self.is_ref_slot(slot)? {
                return Err(Error::argument_mismatch(format!(
                    "ArgPack::set_blob: slot {slot} is a buffer or view slot, whose value is a \
                     handle: set it with BufferArg / ViewArg")));
            }
        }
        // SAFETY: `self` is live and exclusively borrowed; `blob` is read during the call.
        check(unsafe { sys::cuabi_argpack_set_blob(self.as_raw(), blob.as_ptr().cast(), blob.len()) })?;
        self.kept.clear();
        Ok(())
    }
}

/// Builds a pack from typed values: the signature follows from the Rust
/// types, so the values and the parameter list cannot disagree.
pub struct ArgPackBuilder {
    args: Vec<Box<dyn KernelArg>>,
}

impl ArgPackBuilder {
    /// Append a parameter.
    pub fn arg<T: KernelArg + 'static>(mut self, value: T) -> Self {
        self.args.push(Box::new(value));
        self
    }

    /// The signature the pack will have.
    pub fn signature(&self) -> String {
        self.args.iter().map(|a| a.signature()).collect::<Vec<_>>().join(", ")
    }

    /// Create the pack and store every value.
    pub fn build(self) -> Result<ArgPack> {
        let mut pack = ArgPack::new(&self.signature())?;
        for (i, a) in self.args.iter().enumerate() {
            a.store(&mut pack, i)?;
        }
        Ok(pack)
    }
}
