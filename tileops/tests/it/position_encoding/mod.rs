//! The position-encoding family (manifest/position_encoding.yaml): rope.

pub(crate) mod bad_inputs;
pub(crate) mod gpu;
