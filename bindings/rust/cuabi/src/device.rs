//! CUDA devices.
use crate::enums::DeviceAttribute;
use crate::error::{check, infallible, Result};
use crate::sys;

shared_handle!(
    /// One GPU and its primary context. The library hands out the same
    /// handle for the same ordinal while any reference lives.
    Device, sys::cuabi_device, sys::cuabi_device_retain, sys::cuabi_device_release
);

// SAFETY: device.h: "A device may be used from several threads at once: its
// functions may run concurrently on one handle"; the library makes the
// right context current itself.
unsafe impl Send for Device {}
// SAFETY: as for Send.
unsafe impl Sync for Device {}

/// Number of visible CUDA devices; an error when there is no driver.
pub fn device_count() -> Result<usize> {
    let mut n = 0;
    // SAFETY: `n` is a local written during the call.
    check(unsafe { sys::cuabi_device_count(&mut n) })?;
    Ok(n.max(0) as usize)
}

/// Facts about a device (the C struct, with string helpers).
#[derive(Clone, Debug)]
pub struct DeviceProperties {
    pub raw: sys::cuabi_device_properties,
}

fn c_array_string(chars: &[core::ffi::c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl DeviceProperties {
    pub fn name(&self) -> String {
        c_array_string(&self.raw.name)
    }
    pub fn pci_bus_id(&self) -> String {
        c_array_string(&self.raw.pci_bus_id)
    }
    /// (major, minor) compute capability.
    pub fn compute_capability(&self) -> (i32, i32) {
        (self.raw.compute_capability_major, self.raw.compute_capability_minor)
    }
}

impl Device {
    /// The device with this ordinal (0 .. device_count()).
    pub fn get(ordinal: usize) -> Result<Device> {
        let ordinal = i32::try_from(ordinal)
            .map_err(|_| crate::Error::invalid_argument("Device::get: ordinal out of range"))?;
        // SAFETY: `out` is the out-pointer `create` hands us.
        Device::create(|out| unsafe { sys::cuabi_device_get(out, ordinal) })
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        let mut n = 0;
        // SAFETY: the device is live; `n` a local.
        infallible(unsafe { sys::cuabi_device_ordinal(&mut n, self.as_raw()) }, "cuabi_device_ordinal");
        n as usize
    }

    pub fn properties(&self) -> Result<DeviceProperties> {
        let mut raw = sys::cuabi_device_properties::default();
        // SAFETY: `raw` is a local the init function fills.
        check(unsafe { sys::cuabi_device_properties_init(&mut raw, sys::CUABI_DEVICE_PROPERTIES_VERSION) })?;
        // SAFETY: the device is live; `raw` a local.
        check(unsafe { sys::cuabi_device_get_properties(&mut raw, self.as_raw()) })?;
        Ok(DeviceProperties { raw })
    }

    /// A device attribute ([`DeviceAttribute`], or any `CUdevice_attribute`
    /// value from cuda.h as an `i32`).
    pub fn attribute(&self, attribute: impl Into<DeviceAttribute>) -> Result<i32> {
        let mut v = 0;
        // SAFETY: the device is live; `v` a local.
        check(unsafe { sys::cuabi_device_attribute(&mut v, self.as_raw(), attribute.into().to_raw()) })?;
        Ok(v)
    }

    /// (free, total) device memory in bytes.
    pub fn memory_info(&self) -> Result<(u64, u64)> {
        let (mut free, mut total) = (0u64, 0u64);
        // SAFETY: the device is live; the outs are locals.
        check(unsafe { sys::cuabi_device_memory_info(&mut free, &mut total, self.as_raw()) })?;
        Ok((free, total))
    }

    /// Make the primary context current on this thread.
    pub fn set_current(&self) -> Result<()> {
        // SAFETY: the device is live.
        check(unsafe { sys::cuabi_device_set_current(self.as_raw()) })
    }

    /// Make the primary context current on this thread until the returned
    /// guard drops, which gives the thread's previous context (or none)
    /// back. For code that asks the runtime's current device. The guard
    /// borrows the device and stays on its thread (a pop belongs to the
    /// thread that pushed):
    ///
    /// ```compile_fail,E0277
    /// fn f(d: &cuabi::Device) -> cuabi::Result<()> {
    ///     let g = d.push_current()?;
    ///     std::thread::scope(|s| { s.spawn(move || drop(g)); }); // error: `*const ()` cannot be sent
    ///     Ok(())
    /// }
    /// ```
    ///
    /// ```compile_fail,E0505
    /// fn f(d: cuabi::Device) -> cuabi::Result<()> {
    ///     let g = d.push_current()?;
    ///     drop(d); // error: cannot move out of `d` because it is borrowed
    ///     drop(g);
    ///     Ok(())
    /// }
    /// ```
    pub fn push_current(&self) -> Result<CurrentGuard<'_>> {
        // SAFETY: the device is live.
        check(unsafe { sys::cuabi_device_push_current(self.as_raw()) })?;
        Ok(CurrentGuard { device: self, _not_send: core::marker::PhantomData })
    }

    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the device is live.
        check(unsafe { sys::cuabi_device_synchronize(self.as_raw()) })
    }

    /// The raw CUcontext, kept alive by this handle.
    pub fn raw_context(&self) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: the device is live; `v` a local.
        check(unsafe { sys::cuabi_device_context(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// (least, greatest) stream priority; numerically lower is higher.
    pub fn stream_priority_range(&self) -> Result<(i32, i32)> {
        let (mut l, mut g) = (0, 0);
        // SAFETY: the device is live; the outs are locals.
        check(unsafe { sys::cuabi_device_stream_priority_range(&mut l, &mut g, self.as_raw()) })?;
        Ok((l, g))
    }

    pub fn can_access_peer(&self, peer: &Device) -> Result<bool> {
        let mut v = 0;
        // SAFETY: both devices are live; `v` a local.
        check(unsafe { sys::cuabi_device_can_access_peer(&mut v, self.as_raw(), peer.as_raw()) })?;
        Ok(v != 0)
    }
}

/// The device's context current on this thread while it lives
/// ([`Device::push_current`]); dropping it makes the previous one current.
#[must_use = "dropping the guard at once gives the previous context back"]
pub struct CurrentGuard<'a> {
    device: &'a Device,
    // The driver's context stack is per thread: the pop must run where the push ran.
    _not_send: core::marker::PhantomData<*const ()>,
}

impl Drop for CurrentGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the device is live (borrowed); this thread pushed it last
        // unless the caller pushed or set another context since, which the
        // library refuses cleanly (nothing popped; nothing to report from a drop).
        let _ = unsafe { sys::cuabi_device_pop_current(self.device.as_raw()) };
    }
}
