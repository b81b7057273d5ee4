//! The quantization family (manifest/quantization.yaml): fp8_quant.

pub(crate) mod bad_inputs;
pub(crate) mod gpu;
