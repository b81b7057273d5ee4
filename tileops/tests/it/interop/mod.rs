//! GPU memory the caller already has: cudarc slices as tensors, the caller's stream (all GPU tests).

mod gpu;
