//! softmax's GPU tests, and log_softmax's and the reductions' (sum, mean, amax, logsumexp).

pub(crate) mod reductions;
pub(crate) mod softmax;
