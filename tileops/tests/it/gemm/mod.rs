//! The gemm family (manifest/gemm.yaml): gemm.

pub(crate) mod bad_inputs;
pub(crate) mod gpu;
