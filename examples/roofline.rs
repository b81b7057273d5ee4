//! The roofline tool: prices a bench run against a GPU profile. The `tileops roofline` command
//! ([`tileops_bench::cli::roofline`]) as an example.
//!
//! ```text
//! cargo run --example roofline -- RECORDS.json [--profile NAME|PATH] [--format md|csv|json]
//!     [--svg CHART.svg] [--compare OTHER.json | --baseline NAME] [--save-baseline NAME]
//!     [--fail-on-regression PCT] [--torch RECORDS.json]...
//! ```
//!
//! Exit status, bits that add up: 0; 1 when any record is `fail`; 2 for bad input or an output
//! that could not be written; 4 when `--fail-on-regression` finds a regression.

fn main() -> std::process::ExitCode {
    tileops_bench::cli::roofline_main()
}
