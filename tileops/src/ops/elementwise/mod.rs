//! The `elementwise` family of the manifest: activations and the gated `silu_and_mul`.

mod activation;
pub(crate) mod reference;
mod silu_and_mul;

pub use activation::*;
pub use silu_and_mul::*;
