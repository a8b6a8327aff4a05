//! TMA tensor maps (include/cuabi/tensormap.h, docs/memory.md): CUtensorMap
//! descriptors of a [`View`] in GPU memory, passed to kernels by value.
//!
//! Box, element strides and im2col corners are in the view's order
//! (outermost first). A broken TMA rule is an [`Error`](crate::Error) with
//! status `CUABI_ERROR_TENSOR_MAP` whose message names it.
use crate::argpack::{ArgPack, KernelArg};
use crate::error::{check, Result};
use crate::sys;
use crate::view::View;

/// Element types (`cuabi_tensormap_data_type`); `CUABI_TENSORMAP_DATA_TYPE_AUTO`
/// takes the view's.
pub type TensorMapDataType = sys::cuabi_tensormap_data_type;
/// `cuabi_tensormap_interleave`.
pub type TensorMapInterleave = sys::cuabi_tensormap_interleave;
/// `cuabi_tensormap_swizzle`.
pub type TensorMapSwizzle = sys::cuabi_tensormap_swizzle;
/// `cuabi_tensormap_l2_promotion`.
pub type TensorMapL2Promotion = sys::cuabi_tensormap_l2_promotion;
/// `cuabi_tensormap_oob_fill`.
pub type TensorMapOobFill = sys::cuabi_tensormap_oob_fill;
/// What a tensor map describes (`cuabi_tensormap_info`).
pub type TensorMapInfo = sys::cuabi_tensormap_info;

/// How a tensor map reads its view; the default reads it plain, with the
/// view's element type, on the view's device.
#[derive(Clone, Debug)]
pub struct TensorMapOptions {
    pub data_type: TensorMapDataType,
    /// One per dimension of the view (1..8), or empty for all 1.
    pub element_strides: Vec<u32>,
    pub interleave: TensorMapInterleave,
    pub swizzle: TensorMapSwizzle,
    pub l2_promotion: TensorMapL2Promotion,
    pub oob_fill: TensorMapOobFill,
    /// The GPU that reads the map; None: the view's (device 0 for pinned or managed memory).
    pub device: Option<i32>,
}

impl Default for TensorMapOptions {
    fn default() -> Self {
        TensorMapOptions {
            data_type: sys::CUABI_TENSORMAP_DATA_TYPE_AUTO,
            element_strides: Vec::new(),
            interleave: sys::CUABI_TENSORMAP_INTERLEAVE_NONE,
            swizzle: sys::CUABI_TENSORMAP_SWIZZLE_NONE,
            l2_promotion: sys::CUABI_TENSORMAP_L2_PROMOTION_NONE,
            oob_fill: sys::CUABI_TENSORMAP_OOB_FILL_NONE,
            device: None,
        }
    }
}

impl TensorMapOptions {
    pub fn swizzle(mut self, s: TensorMapSwizzle) -> Self { self.swizzle = s; self }
    pub fn interleave(mut self, i: TensorMapInterleave) -> Self { self.interleave = i; self }
    pub fn l2_promotion(mut self, l: TensorMapL2Promotion) -> Self { self.l2_promotion = l; self }
    pub fn oob_fill(mut self, o: TensorMapOobFill) -> Self { self.oob_fill = o; self }
    pub fn data_type(mut self, t: TensorMapDataType) -> Self { self.data_type = t; self }
    pub fn element_strides(mut self, e: &[u32]) -> Self { self.element_strides = e.to_vec(); self }
    pub fn device(mut self, d: i32) -> Self { self.device = Some(d); self }

    fn to_c(&self) -> Result<sys::cuabi_tensormap_options> {
        let mut o = sys::cuabi_tensormap_options::default();
        // SAFETY: a local the init function fills.
        check(unsafe { sys::cuabi_tensormap_options_init(&mut o, sys::CUABI_TENSORMAP_OPTIONS_VERSION) })?;
        if self.element_strides.len() > o.element_strides.len() {
            return Err(crate::Error::bare(
                sys::CUABI_ERROR_INVALID_ARGUMENT,
                format!("element_strides has {} entries; tensor maps have at most 5 dimensions",
                        self.element_strides.len()),
            ));
        }
        o.data_type = self.data_type;
        o.element_strides[..self.element_strides.len()].copy_from_slice(&self.element_strides);
        o.interleave = self.interleave;
        o.swizzle = self.swizzle;
        o.l2_promotion = self.l2_promotion;
        o.oob_fill = self.oob_fill;
        o.device = self.device.unwrap_or(-1);
        Ok(o)
    }
}

handle_core!(
    /// The handle of a [`TensorMap`].
    TensorMapRaw, sys::cuabi_tensormap, sys::cuabi_tensormap_release
);

/// A TMA descriptor of a view, which it keeps alive. Not `Clone`: only
/// its owner may point it elsewhere (`&mut self`) while others read it.
#[derive(Debug)]
pub struct TensorMap {
    raw: TensorMapRaw,
    /// The view's buffer-write token (see [`View`]).
    view: View,
}
// SAFETY: tensormap.h: "A tensor map may be read from several threads;
// replacing its address while another thread reads it is a race": the only
// write (replace_address) takes &mut self.
unsafe impl Send for TensorMap {}
// SAFETY: as for Send.
unsafe impl Sync for TensorMap {}

impl TensorMap {
    /// A tiled map: each copy moves a box of `box_dim` elements per dimension.
    pub fn tiled(view: &View, box_dim: &[u32], options: &TensorMapOptions) -> Result<TensorMap> {
        let o = options.to_c()?;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        let raw = TensorMapRaw::create(|out| unsafe {
            sys::cuabi_tensormap_encode_tiled(out, view.as_raw(), box_dim.as_ptr(), box_dim.len(), &o)
        })?;
        Ok(TensorMap { raw, view: view.clone() })
    }

    /// An im2col map of an N, spatial..., C view: `lower`/`upper` corner
    /// offsets per spatial dimension.
    pub fn im2col(view: &View, lower: &[i32], upper: &[i32], channels_per_pixel: u32,
                  pixels_per_column: u32, options: &TensorMapOptions) -> Result<TensorMap> {
        if lower.len() != upper.len() {
            return Err(crate::Error::bare(
                sys::CUABI_ERROR_INVALID_ARGUMENT,
                "TensorMap::im2col: lower and upper corners differ in length".into(),
            ));
        }
        let o = options.to_c()?;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        let raw = TensorMapRaw::create(|out| unsafe {
            sys::cuabi_tensormap_encode_im2col(out, view.as_raw(), lower.as_ptr(), upper.as_ptr(),
                                               lower.len(), channels_per_pixel, pixels_per_column, &o)
        })?;
        Ok(TensorMap { raw, view: view.clone() })
    }

    /// Point the map at `view` (same element size, shape, strides, device).
    pub fn replace_address(&mut self, view: &View) -> Result<()> {
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_tensormap_replace_address(self.as_raw(), view.as_raw()) })?;
        self.view = view.clone();
        Ok(())
    }

    /// The raw handle, still owned by `self`.
    pub fn as_raw(&self) -> *mut sys::cuabi_tensormap {
        self.raw.as_raw()
    }

    /// The 128-byte CUtensorMap a kernel receives.
    pub fn bytes(&self) -> Result<[u8; 128]> {
        let mut b = [0u8; 128];
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_tensormap_bytes(b.as_mut_ptr().cast(), b.len(), self.as_raw()) })?;
        Ok(b)
    }

    pub fn info(&self) -> Result<TensorMapInfo> {
        let mut i = TensorMapInfo::default();
        // SAFETY: a local the init function fills.
        check(unsafe { sys::cuabi_tensormap_info_init(&mut i, sys::CUABI_TENSORMAP_INFO_VERSION) })?;
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_tensormap_get_info(&mut i, self.as_raw()) })?;
        Ok(i)
    }

    /// The view the map describes.
    pub fn view(&self) -> View {
        self.view.clone()
    }
}

/// A kernel argument by value (`const __grid_constant__ CUtensorMap`).
impl KernelArg for TensorMap {
    fn signature(&self) -> String { "tensormap".into() }
    fn store(&self, pack: &mut ArgPack, slot: usize) -> Result<()> {
        // SAFETY: the handles are live for the call (borrowed); out-pointers are locals and inputs
        // are read during the call only (common.h: "reads or writes the memory its pointer
        // parameters name only during the call").
        check(unsafe { sys::cuabi_argpack_set_tensormap(pack.as_raw(), slot, self.as_raw()) })
    }
}
