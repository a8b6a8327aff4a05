//! Errors: the status of a failed call plus the calling thread's
//! last-error record, copied out before any other cuabi call can change it.
use crate::sys;
use std::ffi::CStr;
use std::fmt;

pub use crate::enums::Status;

/// A failed cuabi call. Match on [`Error::status`] (a `#[non_exhaustive]`
/// enum):
///
/// ```no_run
/// # fn f() -> cuabi::Result<()> {
/// match cuabi::Device::get(0) {
///     Ok(_) => {}
///     Err(e) if e.status == cuabi::Status::DriverNotFound => eprintln!("no driver: {}", e.message),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What failed.
    pub status: Status,
    /// The library's message, naming the C function and what to do.
    pub message: String,
    /// The compiler's or linker's log; empty when none.
    pub log: String,
    /// The CUresult of the failing driver call, or 0.
    pub cu_result: i32,
    /// The nvrtcResult of the failing NVRTC call, or 0.
    pub nvrtc_result: i32,
    /// The nvJitLinkResult of the failing nvJitLink call, or 0.
    pub nvjitlink_result: i32,
}

/// `Result<T, cuabi::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

/// A C string the library returned, copied.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string that stays valid
/// during the call.
pub(crate) unsafe fn cstr(p: *const core::ffi::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the caller's contract: a live NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl Error {
    /// Build the error for `status` from the thread's last-error record.
    pub(crate) fn from_last(status: sys::cuabi_status) -> Error {
        // SAFETY: common.h: cuabi_last_error() "never returns NULL" and the
        // record is thread-local ("a call on one thread never changes
        // another's"); its strings live until the next failing call on this
        // thread, and we copy them before making one.
        let rec = unsafe { &*sys::cuabi_last_error() };
        if rec.status == status {
            Error {
                status: Status::from_raw(status),
                // SAFETY: as above: strings of this thread's record, copied now.
                message: unsafe { cstr(rec.message) },
                // SAFETY: as above.
                log: unsafe { cstr(rec.log) },
                cu_result: rec.cu_result,
                nvrtc_result: rec.nvrtc_result,
                nvjitlink_result: rec.nvjitlink_result,
            }
        } else {
            Error::bare(status, status_message(status).to_string())
        }
    }

    pub(crate) fn bare(status: sys::cuabi_status, message: String) -> Error {
        Error {
            status: Status::from_raw(status),
            message,
            log: String::new(),
            cu_result: 0,
            nvrtc_result: 0,
            nvjitlink_result: 0,
        }
    }

    /// An error raised by the Rust layer itself (bad input before any C call).
    pub(crate) fn invalid_argument(message: impl Into<String>) -> Error {
        Error::bare(sys::CUABI_ERROR_INVALID_ARGUMENT, message.into())
    }

    /// A value the Rust layer refuses for a slot's kind.
    pub(crate) fn argument_mismatch(message: impl Into<String>) -> Error {
        Error::bare(sys::CUABI_ERROR_ARGUMENT_MISMATCH, message.into())
    }

    pub(crate) fn internal(message: &str) -> Error {
        Error::bare(sys::CUABI_ERROR_INTERNAL, message.into())
    }

    /// The error of a status a `sys` function just returned on this thread
    /// (with the thread's last-error details when they are for it).
    pub fn from_status(status: sys::cuabi_status) -> Error {
        Error::from_last(status)
    }

    /// The C status value.
    pub fn raw_status(&self) -> sys::cuabi_status {
        self.status.to_raw()
    }

    /// The status's enumerator name, e.g. "CUABI_ERROR_INVALID_HANDLE".
    pub fn status_name(&self) -> &'static str {
        status_name(self.status.to_raw())
    }
}

/// The enumerator name of a status ("cuabi_status(N)"-free: "" for an unknown value).
pub(crate) fn status_name(st: sys::cuabi_status) -> &'static str {
    // SAFETY: common.h: "the status names and messages ... live as long as
    // the process"; cuabi_status_name never returns NULL for any value.
    static_str(unsafe { sys::cuabi_status_name(st) })
}

fn status_message(st: sys::cuabi_status) -> &'static str {
    // SAFETY: as status_name: a string of the process's lifetime.
    static_str(unsafe { sys::cuabi_status_message(st) })
}

/// A string the library keeps for the life of the process.
pub(crate) fn static_str(p: *const core::ffi::c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    // SAFETY: callers pass only strings common.h says "live as long as the
    // process" (status names and messages, version strings, limiter names).
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status_name(), self.message)?;
        if !self.log.is_empty() {
            write!(f, "\n{}", self.log)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Ok for CUABI_SUCCESS, else the error with the thread's details.
#[inline]
pub(crate) fn check(status: sys::cuabi_status) -> Result<()> {
    if status == sys::CUABI_SUCCESS { Ok(()) } else { Err(Error::from_last(status)) }
}

/// A call on a live handle that cannot fail unless the library is broken:
/// getters whose values we return without a `Result`.
#[inline]
#[track_caller]
pub(crate) fn infallible(status: sys::cuabi_status, what: &str) {
    if status != sys::CUABI_SUCCESS {
        panic!("cuabi: {what} failed on a live handle: {}", Error::from_last(status));
    }
}

/// A C string argument; interior NULs are an error, not a panic.
pub(crate) fn c_string(what: &str, s: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(s).map_err(|_| Error::invalid_argument(format!("{what} contains a NUL byte")))
}
