//! The fused family (manifest/fused.yaml): qk_norm_rope_fp8.

pub(crate) mod bad_inputs;
pub(crate) mod gpu;
