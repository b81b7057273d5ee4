//! The tools as commands: `bench`, `roofline` and `calibrate`, with their clap arguments and their
//! logic, so that every front end runs the same code:
//!
//! - the `tileops` binary (crate `tileops-cli`: `tileops bench`, `tileops roofline`,
//!   `tileops calibrate`, `tileops manifest check`);
//! - the examples `bench_all`, `roofline` and `calibrate`, a few lines each;
//! - a downstream crate's own binary, which benches its own registered ops together with
//!   tileops's: the registry is whatever `inventory` collected in the final binary.
//!
//! ```no_run
//! // A downstream crate's `src/bin/bench.rs`: the bench CLI over every op linked into it.
//! fn main() -> std::process::ExitCode {
//!     tileops_bench::cli::bench_main()
//! }
//! ```
//!
//! Exit statuses compose across the tools: 0 success; 1 a failed run, file or `fail` verdict;
//! 2 bad arguments or input (clap's usage errors are 2 too); `roofline` adds 4 for a confirmed
//! regression (`--fail-on-regression`); 128 + the signal when `bench` is interrupted.

pub mod bench;
pub mod calibrate;
pub mod meta;
pub mod roofline;
pub mod table;

use std::ffi::OsString;
use std::io::{ErrorKind, IsTerminal};
use std::path::PathBuf;

pub use bench::{BenchArgs, main as bench_main};
pub use calibrate::{CalibrateArgs, main as calibrate_main};
pub use roofline::{RooflineArgs, main as roofline_main};

/// `--color`: when the console output is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set to a non-empty value (<https://no-color.org>).
    #[default]
    Auto,
    /// Always, even into a pipe or with `NO_COLOR` (an explicit flag wins over the environment).
    Always,
    /// Never.
    Never,
}

impl ColorChoice {
    /// Whether to colour an output that is (or is not) a terminal, given `NO_COLOR`'s value.
    ///
    /// ```
    /// use tileops_bench::cli::ColorChoice;
    /// assert!(ColorChoice::Auto.colors(true, None));
    /// assert!(!ColorChoice::Auto.colors(false, None));
    /// assert!(!ColorChoice::Auto.colors(true, Some("1".as_ref())));
    /// assert!(ColorChoice::Auto.colors(true, Some("".as_ref())));
    /// assert!(ColorChoice::Always.colors(false, Some("1".as_ref())));
    /// assert!(!ColorChoice::Never.colors(true, None));
    /// ```
    pub fn colors(self, terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => terminal && no_color.is_none_or(|v| v.is_empty()),
        }
    }

    /// [`ColorChoice::colors`] for this process's stdout and environment.
    pub fn for_stdout(self) -> bool {
        let no_color: Option<OsString> = std::env::var_os("NO_COLOR");
        self.colors(std::io::stdout().is_terminal(), no_color.as_deref())
    }
}

/// `Ok` for a write that failed only because the reader closed the pipe (`| head`): the reader
/// wanted no more, which is not the tool's failure.
pub(crate) fn ignore_closed_pipe(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Where `--save-baseline NAME` writes and `--baseline NAME` reads:
/// `<target>/tileops/baselines/NAME.json`, `<target>` being `$CARGO_TARGET_DIR` when set, else
/// `target` under the working directory (where criterion keeps its baselines too).
///
/// # Errors
/// A message when `NAME` is empty or holds anything but ASCII letters, digits, `-`, `_` and `.`
/// (a name, never a path), or starts with a dot.
///
/// ```
/// use tileops_bench::cli::baseline_path;
/// let path = baseline_path("main").unwrap();
/// assert!(path.ends_with("tileops/baselines/main.json"));
/// assert!(baseline_path("../x").is_err() && baseline_path("").is_err());
/// ```
pub fn baseline_path(name: &str) -> Result<PathBuf, String> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(format!(
            "baseline name `{name}`: use letters, digits, `-`, `_` and `.` (a name like `main`, \
             not a path; --compare takes a path)"
        ));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("target"), PathBuf::from);
    Ok(target
        .join("tileops")
        .join("baselines")
        .join(format!("{name}.json")))
}
