//! The performance model's code that lives with the ops: the roofline functions of the manifest's
//! func-mode entries ([`formulas`], at TileOPs's own module path `tileops.perf.formulas`).
//!
//! The tools that measure and judge — the bench harness, records, profiles, reports, calibration
//! and the commands — are the crate `tileops-bench`, which reads the ops' registry; this crate
//! knows nothing of them.

pub mod formulas;
