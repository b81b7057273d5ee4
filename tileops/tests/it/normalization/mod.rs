//! The normalization family (manifest/normalization.yaml): rms_norm, layer_norm, fused_add_rms_norm.

pub(crate) mod bad_inputs;
pub(crate) mod gpu;
