//! The `normalization` family of the manifest: norms over the last dimension.

mod fused_add_rms_norm;
mod layer_norm;
pub(crate) mod reference;
mod rms_norm;
mod rows;

pub use fused_add_rms_norm::*;
pub use layer_norm::*;
pub use rms_norm::*;
