//! The reduction family (manifest/reduction.yaml): softmax, log_softmax, sum, mean, amax, logsumexp.

pub(crate) mod bad_inputs;
pub(crate) mod gpu;
