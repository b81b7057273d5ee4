//! `tileops`: the tools under one installable command.
//!
//! ```text
//! cargo install --path tileops-cli
//! tileops bench --cpu --op softmax        # time ops, write target/bench/<timestamp>.json
//! tileops roofline RECORDS.json           # price them against a GPU profile
//! tileops calibrate --quick               # measure this GPU's ceilings into a profile
//! tileops manifest check tileops/manifest # validate manifests
//! ```
//!
//! Each subcommand is the library's ([`tileops_bench::cli`]); `tileops manifest check` is
//! [`tileops_manifest::check::check_manifest`] over each path. The ops `tileops bench` knows are
//! those linked into this binary: tileops's own. A crate with ops of its own benches them with a
//! binary of its own that calls [`tileops_bench::cli::bench_main`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tileops_bench::cli::{BenchArgs, CalibrateArgs, RooflineArgs, bench, calibrate, roofline};

/// tileops: CUDA-backed LLM operators whose roofline is part of the code.
#[derive(Parser)]
#[command(name = "tileops", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Time every registered op on every manifest workload case and write a records file
    Bench(BenchArgs),
    /// Price a bench run against a GPU profile; compare runs and gate on regressions
    Roofline(RooflineArgs),
    /// Measure the ceilings of this GPU and write a profile YAML
    Calibrate(CalibrateArgs),
    /// Manifests
    #[command(subcommand)]
    Manifest(ManifestCommand),
}

#[derive(Subcommand)]
enum ManifestCommand {
    /// Check manifests: every entry, spec-only entries included, with the macro's own checks.
    ///
    /// Each PATH is one manifest: a family file, or a directory whose *.yaml files form one
    /// manifest (op names unique across them). Exits 1 if any has a problem.
    Check {
        /// Family files or manifest directories
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Print only the problems, not the summary lines
        #[arg(short, long)]
        quiet: bool,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Bench(args) => bench::main_with(&args),
        Command::Roofline(args) => roofline::main_with(&args),
        Command::Calibrate(args) => calibrate::main_with(&args),
        Command::Manifest(ManifestCommand::Check { paths, quiet }) => check(&paths, quiet),
    }
}

/// `tileops manifest check`: the library's command (the same as `tileops-manifest check`).
fn check(paths: &[PathBuf], quiet: bool) -> ExitCode {
    let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let failed =
        tileops_manifest::check::run_command(&base, paths, quiet, &mut std::io::stdout().lock());
    ExitCode::from(u8::from(failed))
}
