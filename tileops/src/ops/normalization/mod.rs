//! The `normalization` family of the manifest: norms over the last dimension.

mod fused_add_rms_norm;
mod layer_norm;
mod rms_norm;
mod rows;

pub use fused_add_rms_norm::FusedAddRmsNorm;
pub use layer_norm::LayerNorm;
pub use rms_norm::RmsNorm;
