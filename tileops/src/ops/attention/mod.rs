//! The attention family: decode over a KV cache (one query token per sequence), dense and paged;
//! prefill of packed variable-length sequences on tensor cores.

mod decode;
mod gqa_decode;
mod gqa_decode_paged;
mod gqa_prefill;
pub(crate) mod reference;

pub use decode::{AttentionOutputMut, DecodeOptions, DecodeOutput, KvScales};
pub(crate) use decode::{DecodePlan, KvLayout};
pub use gqa_decode::*;
pub use gqa_decode_paged::*;
pub use gqa_prefill::*;
