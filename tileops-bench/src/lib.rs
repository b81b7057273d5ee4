//! tileops's tools: the bench harness, hardware profiles, bench records, the roofline verdicts and
//! chart, calibration, and the commands (`tileops bench`, `roofline`, `calibrate`).
//!
//! The ops crate, `tileops`, knows nothing of this one: an op registers itself and implements
//! `tileops::registry::{FromWorkload, BenchOp}`; this crate reads the registry, times each op on
//! each manifest workload and writes records, whose FLOPs and bytes are exactly what the op's
//! `eval_roofline` returned. A model crate that only runs ops depends on `tileops` alone.
//!
//! Data flows one way: the bench harness ([`bench`](mod@bench)) writes [`records`] (FLOPs and bytes
//! exactly as each op's `eval_roofline` returned them, and the timings); the roofline tool reads
//! them with a [`profile`] and [`report`]s per row the speed-of-light time, efficiency, bound and
//! verdict, and draws the [`svg`] chart. The harness knows nothing of the report that judges it nor
//! of the tools that run it: the tool stamps the run (revision, date, device: [`cli::meta`]).
//! [`calibrate`] turns microbenchmark timings into a profile. Nothing here evaluates a formula or
//! builds an op. Every file the tools read or write goes through [`files`]: bounded reads of
//! regular files only, atomic writes. [`cli`] is the tools themselves (`tileops bench`, `roofline`,
//! `calibrate`), for the `tileops` binary, the examples and a downstream crate's own bench binary;
//! [`units`] prints their figures and `table` (crate-internal) writes every table of theirs, in
//! every format. Every string from a file is untrusted: [`text`] makes it safe for the terminal,
//! CSV, markdown, HTML or SVG it is shown in.
//!
//! ```
//! use tileops_bench::profile::Profile;
//! use tileops_bench::records::{DeviceInfo, Record, Run, RunMeta, TimingStats};
//! use tileops_bench::report::{ProfileChoice, Report, Verdict};
//!
//! // A record whose bytes imply 5.3 TB/s on an H200: more than the 4.8 TB/s the HBM can move.
//! let device = DeviceInfo::new("NVIDIA H200");
//! let record = Record::new("rms_norm", "normalization", "llama-8b", "bfloat16", device.clone())
//!     .with_roofline(Some(4 * 2048 * 4096), Some(2 * 2048 * 4096 * 2))
//!     .with_roof("cuda_core.fp32")
//!     .with_timing("cuda_events", TimingStats::new(100, 0.00632, 0.0062, 0.0065));
//! let run = Run::new(RunMeta::new("abc", "2026-11-30T00:00:00Z", "0.1.0", device), vec![record]);
//! let report = Report::build(&run, ProfileChoice::ByDevice(&Profile::builtins()?));
//! assert_eq!(report.rows[0].verdict(), Some(Verdict::Fail));
//! assert!(report.has_fail());
//! # Ok::<(), tileops_bench::profile::ProfileError>(())
//! ```

pub mod bench;
pub mod calibrate;
pub mod calibrate_cpu;
pub mod calibrate_gpu;
pub mod cli;
pub mod files;
pub mod kernel_doc;
pub mod ledger;
pub mod profile;
pub mod records;
pub mod report;
pub(crate) mod table;
pub mod text;
pub mod units;

pub use report::render::{html, svg};

/// A JSON parser's message without the " at line L column C" serde_json appends: errors here
/// show the position in their own `file:line:column` prefix. Only that trailing suffix goes; a
/// message that merely contains " at line " keeps it.
pub(crate) fn parser_message(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default().trim();
    let is_position = |tail: &str| {
        let mut words = tail.split([' ', ',']).filter(|w| !w.is_empty());
        matches!(
            (words.next(), words.next(), words.next(), words.next(), words.next()),
            (Some(n), Some("column"), Some(c), None, None)
                if n.bytes().all(|b| b.is_ascii_digit()) && c.bytes().all(|b| b.is_ascii_digit())
        )
    };
    match first.rfind(" at line ") {
        Some(at) if is_position(&first[at + " at line ".len()..]) => first[..at].to_owned(),
        _ => first.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn parser_messages_lose_only_a_trailing_position() {
        use super::parser_message;
        assert_eq!(
            parser_message("expected value at line 1 column 1"),
            "expected value"
        );
        assert_eq!(parser_message("EOF at line 3, column 9"), "EOF");
        let kept = "unknown variant `at line 2 column 1 x`, expected one of `a`";
        assert_eq!(parser_message(kept), kept);
    }
}
