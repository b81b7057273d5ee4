//! The `fused` family of the manifest: several ops in one kernel, one pass.

mod qk_norm_rope_fp8;
pub(crate) mod reference;

pub use qk_norm_rope_fp8::*;
