//! The elementwise family (manifest/elementwise.yaml): gelu, relu, sigmoid, silu, silu_and_mul.

pub(crate) mod bad_inputs;
pub(crate) mod gpu;
