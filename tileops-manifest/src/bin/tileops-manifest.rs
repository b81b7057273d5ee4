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
use std::path::PathBuf;
use std::process::ExitCode;
use tileops_manifest::check::run_command;

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
    let failed = run_command(&base, &paths, quiet, &mut std::io::stdout().lock());
    ExitCode::from(u8::from(failed))
}
