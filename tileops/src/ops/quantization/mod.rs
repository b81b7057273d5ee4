//! The `quantization` family of the manifest: float8 quantization with per-group scales.

pub(crate) mod fp8_quant;
pub(crate) mod reference;

pub use fp8_quant::*;
