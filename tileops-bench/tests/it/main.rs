//! tileops-bench's integration tests, one test binary (`cargo test -p tileops-bench --test it`).
//! The tests that need a GPU are in the module `gpu` (each prints `SKIP: <reason>` without one and
//! fails instead with `TILEOPS_REQUIRE_GPU=1`; scripts/emu-check.sh runs them on the emulated
//! device). The harness, records, reports and commands are tested through the workspace's
//! downstream-style tests (`tests/it/`) and the unit tests of each module.

mod gpu;
mod ledger;
