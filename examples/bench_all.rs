//! Times every registered op on every manifest workload case and writes a records file: the
//! `tileops bench` command ([`tileops_bench::cli::bench`]) as an example, so that
//! `cargo run --release --example bench_all -- [FLAGS]` works from a checkout.
//!
//! ```text
//! cargo run --release --example bench_all -- [--op NAME]... [--family NAME]... [--filter REGEX]
//!     [--dtype DTYPE]... [--list] [--out PATH] [--save-baseline NAME] [--seed N] [--cpu]
//!     [--cpu-max-bytes N] [--cpu-max-flops N] [--emu-max-bytes N] [--emu-max-flops N]
//!     [--l2-flush memset|memset+read] [--verbose] [--color auto|always|never]
//! ```
//!
//! Exit status: 0; 1 when the run could not start or the records could not be written; 2 for bad
//! arguments; 130 (SIGINT) or 143 (SIGTERM) when interrupted, the finished rows written.

fn main() -> std::process::ExitCode {
    tileops_bench::cli::bench_main()
}
