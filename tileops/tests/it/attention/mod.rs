//! The attention family (manifest/attention.yaml): gqa_decode, gqa_decode_paged.

pub(crate) mod bad_inputs;
pub(crate) mod gpu;
