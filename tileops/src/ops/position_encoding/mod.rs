//! The `position_encoding` family of the manifest: rotary embeddings.

pub(crate) mod rope;

pub use rope::Rope;
