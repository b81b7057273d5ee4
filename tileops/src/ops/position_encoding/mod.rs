//! The `position_encoding` family of the manifest: rotary embeddings.

pub(crate) mod reference;
pub(crate) mod rope;

pub use rope::*;
