//! softmax's bad-input tests, and log_softmax's and the reductions' (sum, mean, amax, logsumexp).

mod reductions;
mod softmax;
