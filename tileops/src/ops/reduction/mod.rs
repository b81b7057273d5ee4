//! The `reduction` family of the manifest: softmax, log_softmax and the reductions over dims.

mod log_softmax;
mod reduce;
pub(crate) mod reference;
mod softmax;

pub use log_softmax::*;
pub use reduce::*;
pub use softmax::*;
