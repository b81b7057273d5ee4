//! The `elementwise` family of the manifest: activations and the gated `silu_and_mul`.

mod activation;
mod silu_and_mul;

pub use activation::{Gelu, GeluApproximate, Relu, Sigmoid, Silu};
pub use silu_and_mul::SiluAndMul;
