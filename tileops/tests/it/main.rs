//! tileops's integration tests, one test binary (`cargo test -p tileops --test it`), with a module
//! per op family of the manifests (`tileops/manifest/<family>.yaml`) and one for each check that is
//! not an op family.
//!
//! Every test that needs a GPU is in a module named `gpu` (`normalization::gpu::...`,
//! `coverage::gpu::...`), so libtest's substring filters select them:
//!
//! - `cargo test -p tileops --test it -- --skip gpu::` runs the CPU tests (the bad-input checks,
//!   the kernel compile check, the library search);
//! - `cargo test -p tileops --test it -- gpu::` runs the GPU tests (each prints `SKIP: <reason>`
//!   without a usable GPU, and fails instead with `TILEOPS_REQUIRE_GPU=1`);
//! - `cargo test -p tileops --test it -- reduction::` runs one family's tests, CPU and GPU.
//!
//! Shared helpers are in `common`.

mod common;

mod attention;
mod elementwise;
mod fused;
mod gemm;
mod normalization;
mod position_encoding;
mod quantization;
mod reduction;

mod coverage;
mod interop;
mod kernel_compile;
// The build script's reader of the kernel files' `@entry` lines, here for its unit tests (a build
// script's own tests never run).
#[path = "../../build/kernel_entries.rs"]
mod kernel_entries;
mod library_search;
mod occupancy;
