//! The `reduction` family of the manifest: softmax, log_softmax and the reductions over dims.

mod log_softmax;
mod reduce;
mod softmax;

pub use log_softmax::LogSoftmax;
pub use reduce::{Amax, Logsumexp, Mean, ReduceDim, Sum};
pub use softmax::Softmax;
