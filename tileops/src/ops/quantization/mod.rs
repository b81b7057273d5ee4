//! The `quantization` family of the manifest: float8 quantization with per-group scales.

mod fp8_quant;

pub use fp8_quant::Fp8Quant;
