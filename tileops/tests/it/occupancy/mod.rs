//! The driver's occupancy answers, which size the grid-stride kernels' grids.

mod gpu;
