//! Kernel argument packs and a typed builder for them.
use crate::error::{c_string, check, Error, Result};
use crate::sys;

handle_core!(
    /// A kernel's parameter list with the storage for its values.
    ///
    /// Not `Clone`: a second owner could set values while this one
    /// launches, which the C side documents as a race.
    ArgPack, sys::cuabi_argpack, sys::cuabi_argpack_release
);

// SAFETY: api/argpack.toml: a pack may be read from several threads at once;
// setting values while another thread launches with it is a race. Setters
// take `&mut self`, so safe Rust cannot race them with `&self` readers.
unsafe impl Send for ArgPack {}
unsafe impl Sync for ArgPack {}

/// A raw device address passed as a `ptr` parameter.
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
    if pack.slot_kind(slot)? == sys::CUABI_ARG_RAW && pack.slot_size(slot)? != size {
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
        check(unsafe { sys::cuabi_argpack_set_float(pack.as_raw(), slot, *self as f64) })
    }
}
impl KernelArg for f64 {
    fn signature(&self) -> String { "f64".into() }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
        float_fits_raw(pack, slot, 8, "f64")?;
        check(unsafe { sys::cuabi_argpack_set_float(pack.as_raw(), slot, *self) })
    }
}
impl KernelArg for DevicePtr {
    fn signature(&self) -> String { "ptr".into() }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
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
        check(unsafe { sys::cuabi_argpack_set_buffer(pack.as_raw(), slot, self.0) })
    }
}
/// A view passed as a `view` parameter (its first element's address).
#[derive(Copy, Clone, Debug)]
pub struct ViewArg(pub(crate) *mut sys::cuabi_view);
impl KernelArg for ViewArg {
    fn signature(&self) -> String { "view".into() }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
        check(unsafe { sys::cuabi_argpack_set_view(pack.as_raw(), slot, self.0) })
    }
}

/// Layout of one pack item (a slot or a struct member).
pub type ArgInfo = sys::cuabi_arg_info;

impl ArgPack {
    /// A pack from a signature, e.g. "ptr, i32, f32, struct{f32, i32}"; values start zeroed.
    pub fn new(signature: &str) -> Result<ArgPack> {
        let s = c_string("signature", signature)?;
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
        ArgPack::create(|out| unsafe { sys::cuabi_argpack_create_from_sizes(out, sizes.as_ptr(), op, sizes.len()) })
    }

    /// A pack for `kernel`: one slot per parameter, typed as its mangled name
    /// or PTX says (`Kernel::param_types`), raw where nothing does. The typed
    /// setters then refuse a value of the wrong kind (an `f32` for an `int`
    /// parameter) instead of reinterpreting its bits.
    pub fn for_kernel(kernel: &crate::Kernel) -> Result<ArgPack> {
        ArgPack::create(|out| unsafe { sys::cuabi_argpack_create_for_kernel(out, kernel.as_raw()) })
    }

    /// Start a typed builder: `ArgPack::builder().arg(DevicePtr(p)).arg(n).build()`.
    pub fn builder() -> ArgPackBuilder {
        ArgPackBuilder { args: Vec::new() }
    }

    fn size_query(&self, f: unsafe extern "C" fn(*mut usize, *mut sys::cuabi_argpack) -> sys::cuabi_status) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { f(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// Number of slots (kernel parameters).
    pub fn len(&self) -> Result<usize> { self.size_query(sys::cuabi_argpack_count) }
    /// Size of the packed blob of all parameters.
    pub fn blob_size(&self) -> Result<usize> { self.size_query(sys::cuabi_argpack_blob_size) }
    /// Number of items (slots and struct members).
    pub fn item_count(&self) -> Result<usize> { self.size_query(sys::cuabi_argpack_item_count) }

    pub fn slot_size(&self, slot: usize) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_argpack_slot_size(&mut v, self.as_raw(), slot) })?;
        Ok(v)
    }

    pub fn slot_offset(&self, slot: usize) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_argpack_slot_offset(&mut v, self.as_raw(), slot) })?;
        Ok(v)
    }

    pub fn slot_kind(&self, slot: usize) -> Result<sys::cuabi_arg_kind> {
        let mut v = sys::cuabi_arg_kind::default();
        check(unsafe { sys::cuabi_argpack_slot_kind(&mut v, self.as_raw(), slot) })?;
        Ok(v)
    }

    pub fn item(&self, index: usize) -> Result<ArgInfo> {
        let mut info = ArgInfo::default();
        unsafe {
            check(sys::cuabi_arg_info_init(&mut info, sys::CUABI_ARG_INFO_VERSION))?;
            check(sys::cuabi_argpack_item(&mut info, self.as_raw(), index))?;
        }
        Ok(info)
    }

    /// Set slot `slot` to a typed value (the library checks kind and range).
    pub fn set<T: KernelArg + ?Sized>(&mut self, slot: usize, value: &T) -> Result<()> {
        value.store(self, slot)
    }

    /// Copy raw bytes into a slot; their length must be the slot's size.
    pub fn set_bytes(&mut self, slot: usize, bytes: &[u8]) -> Result<()> {
        check(unsafe { sys::cuabi_argpack_set_bytes(self.as_raw(), slot, bytes.as_ptr().cast(), bytes.len()) })
    }

    /// A slot's current bytes.
    pub fn get_bytes(&self, slot: usize) -> Result<Vec<u8>> {
        let mut v = vec![0u8; self.slot_size(slot)?];
        check(unsafe { sys::cuabi_argpack_get_bytes(v.as_mut_ptr().cast(), v.len(), self.as_raw(), slot) })?;
        Ok(v)
    }

    /// Set every slot from one blob laid out as `slot_offset` says.
    pub fn set_blob(&mut self, blob: &[u8]) -> Result<()> {
        check(unsafe { sys::cuabi_argpack_set_blob(self.as_raw(), blob.as_ptr().cast(), blob.len()) })
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
