//! Measures the ceilings of the GPU it runs on and writes a profile YAML: the `tileops calibrate`
//! command ([`tileops_bench::cli::calibrate`]) as an example.
//!
//! ```text
//! cargo run --release --example calibrate -- [--out PATH] [--base NAME|PATH] [--quick]
//! ```
//!
//! Exit status: 0; 1 when a measurement or the file failed; 2 without a GPU or for bad arguments.

fn main() -> std::process::ExitCode {
    tileops_bench::cli::calibrate_main()
}
