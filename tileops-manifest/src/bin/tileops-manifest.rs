//! `tileops-manifest`: validate tileops / TileOPs manifests outside a build.
//!
//! ```text
//! tileops-manifest check manifest/ extra/attention.yaml
//! ```
//!
//! Prints every problem with the same located messages `#[roofline_op]` gives, then one summary
//! line per manifest, and exits with status 1 when any manifest has a problem (2 for a usage
//! error).

use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use tileops_manifest::check::check_manifest;

#[derive(Parser)]
#[command(
    name = "tileops-manifest",
    version,
    about = "Validate tileops manifests"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check manifests: every entry, spec-only entries included, with the macro's own checks.
    ///
    /// Each PATH is one manifest: a family file, or a directory whose *.yaml files form one
    /// manifest (op names unique across them). Exits 1 if any has a problem.
    Check {
        /// Family files or manifest directories.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Print only the problems, not the summary lines.
        #[arg(short, long)]
        quiet: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Command::Check { paths, quiet } = cli.command;
    let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut out = std::io::stdout().lock();
    let mut failed = false;
    for path in &paths {
        let report = check_manifest(&base, path);
        for problem in &report.problems {
            // A closed pipe (`| head`) ends the output quietly; the exit status still counts.
            if writeln!(out, "error: {}\n", problem.render()).is_err() {
                return ExitCode::from(if failed || !report.problems.is_empty() {
                    1
                } else {
                    0
                });
            }
        }
        failed |= !report.problems.is_empty();
        if !quiet {
            let verdict = match report.problems.len() {
                0 => "ok".to_owned(),
                1 => "1 problem".to_owned(),
                n => format!("{n} problems"),
            };
            let shown = tileops_manifest::load::display_path(&base, path);
            let _ = writeln!(
                out,
                "{shown}: {} files, {} entries: {verdict}",
                report.files, report.entries
            );
        }
    }
    let _ = out.flush();
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
