//! The root package's integration tests (tileops-suite, the downstream user's view), one test
//! binary: `cargo test --test it`. A module per check; the helpers for running the built tools in
//! their own processes are in `common`. The trybuild UI tests are a binary of their own
//! (tests/ui.rs, `cargo test --test ui`): they set a variable of the process's environment.
//!
//! `cargo test --test it -- bench_all::` runs one module's tests. bench_all's emulated-device test
//! (`bench_all::bench_all_on_the_emulated_device_runs_rows_once_and_records_no_figure`) needs
//! cuda-emu's libraries (`TILEOPS_EMU_LIB`): scripts/emu-check.sh runs it, scripts/test.sh skips it.

// The crate names itself, as tileops does with `extern crate self as tileops`, so that a
// manifest's TileOPs-style dotted `func` path (`it.generated_code.f`, the absolute path
// `::it::generated_code::f`) resolves in it: generated_code.rs tests that.
extern crate self as it;

mod common;

mod bench_all;
mod bytes_oracle;
mod downstream;
mod formula_limits;
mod generated_code;
mod html_report;
mod readme;
mod registry;
mod roofline_tool;
mod tileops_compat;
mod tileops_constructs;
mod typed_paths;
