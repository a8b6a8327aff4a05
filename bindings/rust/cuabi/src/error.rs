//! Errors: the status of a failed call plus the calling thread's
//! last-error record, copied out before any other cuabi call can change it.
use crate::sys;
use std::ffi::CStr;
use std::fmt;

/// A `cuabi_status` value (an `i32` newtype: values newer than this binding
/// are representable and print as `cuabi_status(N)`).
pub type Status = sys::cuabi_status;

/// A failed cuabi call.
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

pub(crate) unsafe fn cstr(p: *const core::ffi::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl Error {
    /// Build the error for `status` from the thread's last-error record.
    pub(crate) fn from_last(status: Status) -> Error {
        // SAFETY: cuabi_last_error never returns NULL; its strings live
        // until the next failing call on this thread, and we copy them now.
        let rec = unsafe { &*sys::cuabi_last_error() };
        if rec.status == status {
            unsafe {
                Error {
                    status,
                    message: cstr(rec.message),
                    log: cstr(rec.log),
                    cu_result: rec.cu_result,
                    nvrtc_result: rec.nvrtc_result,
                    nvjitlink_result: rec.nvjitlink_result,
                }
            }
        } else {
            Error::bare(status, unsafe { cstr(sys::cuabi_status_message(status)) })
        }
    }

    pub(crate) fn bare(status: Status, message: String) -> Error {
        Error { status, message, log: String::new(), cu_result: 0, nvrtc_result: 0, nvjitlink_result: 0 }
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

    /// The status's enumerator name, e.g. "CUABI_ERROR_INVALID_HANDLE".
    pub fn status_name(&self) -> String {
        unsafe { cstr(sys::cuabi_status_name(self.status)) }
    }
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
pub(crate) fn check(status: Status) -> Result<()> {
    if status == sys::CUABI_SUCCESS { Ok(()) } else { Err(Error::from_last(status)) }
}

/// A C string argument; interior NULs are an error, not a panic.
pub(crate) fn c_string(what: &str, s: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(s).map_err(|_| Error::invalid_argument(format!("{what} contains a NUL byte")))
}
