//! rms_norm's GPU tests, and layer_norm's and fused_add_rms_norm's.

pub(crate) mod layer_norm;
pub(crate) mod rms_norm;
