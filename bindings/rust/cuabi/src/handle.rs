//! The RAII wrapper shared by all handle types.

/// Define `$name`, owning one reference to a `$raw` handle: released by
/// `$release` on drop; `Clone` (when `$retain` is given) takes another.
macro_rules! shared_handle {
    ($(#[$doc:meta])* $name:ident, $raw:ty, $retain:path, $release:path) => {
        handle_core!($(#[$doc])* $name, $raw, $release);

        impl Clone for $name {
            fn clone(&self) -> Self {
                // SAFETY: `self` owns a reference, so the handle is live for
                // the call; retain takes a second one for the clone
                // (common.h: every handle may be used from any thread).
                let st = unsafe { $retain(self.ptr.as_ptr()) };
                // Retaining a live handle only fails if the library is broken.
                assert_eq!(st, $crate::sys::CUABI_SUCCESS, "cuabi: retain of a live handle failed");
                $name { ptr: self.ptr }
            }
        }
    };
}

/// Define `$name`, owning one reference (or the only one) to a `$raw`
/// handle, released or destroyed by `$release` on drop; no `Clone`: for
/// single-owner handles and for shared ones whose setters must not race
/// with other owners.
macro_rules! handle_core {
    ($(#[$doc:meta])* $name:ident, $raw:ty, $release:path) => {
        $(#[$doc])*
        pub struct $name {
            ptr: core::ptr::NonNull<$raw>,
        }

        impl $name {
            /// Take ownership of one reference to a raw handle.
            ///
            /// # Safety
            /// `ptr` must be a live handle of this type whose reference the
            /// caller owns and gives up.
            #[allow(dead_code)]
            pub unsafe fn from_raw(ptr: *mut $raw) -> Option<Self> {
                core::ptr::NonNull::new(ptr).map(|ptr| $name { ptr })
            }

            /// The raw handle, still owned by `self`.
            #[inline]
            pub fn as_raw(&self) -> *mut $raw {
                self.ptr.as_ptr()
            }

            /// Give up ownership: the caller must release the handle.
            #[allow(dead_code)]
            pub fn into_raw(self) -> *mut $raw {
                let p = self.ptr.as_ptr();
                core::mem::forget(self);
                p
            }

            /// Construct through a C function filling `*out`.
            #[allow(dead_code)]
            pub(crate) fn create(
                f: impl FnOnce(*mut *mut $raw) -> $crate::sys::cuabi_status,
            ) -> $crate::Result<Self> {
                let mut out: *mut $raw = core::ptr::null_mut();
                $crate::error::check(f(&mut out))?;
                // SAFETY: the call succeeded and handed us a new reference
                // (`[out, ownership transferred]` in the header).
                unsafe { Self::from_raw(out) }.ok_or_else(|| {
                    $crate::Error::internal(concat!(stringify!($name), ": library returned NULL"))
                })
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: we own this reference and give it up exactly once;
                // `drop` has the value itself, so no borrow of it is alive on
                // any thread (common.h: releasing while another thread uses
                // the handle is the caller's race -- which safe Rust cannot make).
                // Release cannot fail for a handle we own; nothing to report.
                let _ = unsafe { $release(self.ptr.as_ptr()) };
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, concat!(stringify!($name), "({:p})"), self.ptr)
            }
        }

        impl PartialEq for $name {
            fn eq(&self, o: &Self) -> bool {
                self.ptr == o.ptr
            }
        }
        impl Eq for $name {}
    };
}
