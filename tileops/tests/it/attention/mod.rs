//! The attention family (manifest/attention.yaml): gqa_decode, gqa_decode_paged, gqa_prefill.

pub(crate) mod bad_inputs;
pub(crate) mod gpu;
pub(crate) mod nan_gpu;
pub(crate) mod prefill_gpu;
