//! Times every registered op on every manifest workload case and writes a records file.
//!
//! ```text
//! cargo run --release --example bench_all -- [--op NAME]... [--family NAME]... [--list]
//!     [--out PATH] [--seed N] [--cpu] [--cpu-max-bytes N] [--cpu-max-flops N]
//!     [--emu-max-bytes N] [--emu-max-flops N]
//! ```
//!
//! On a GPU, CUDA events with the L2 flushed and the stream held before every sample; without one,
//! the CPU reference path, skipping (with the reason) the rows too large for it. On an emulated
//! device (cuda-emu) it says so and times nothing: each row within the emulator budget runs once,
//! for correctness, and is recorded with timing `emulated` and no figure. Prints a table
//! (with efficiency when a built-in profile describes the device) and writes the records JSON, by
//! default to `target/bench/<timestamp>.json`, for `cargo run --example roofline -- FILE`. The
//! harness itself is `tileops::perf::bench`. Exit status: 0; 1 when the run could not start or the
//! file could not be written; 2 for bad arguments.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Instant, SystemTime};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tileops::Device;
use tileops::perf::bench::{
    self, BenchConfig, BenchError, Case, CpuBudget, EmulatedBudget, Observer, Selection,
};
use tileops::perf::profile::Profile;
use tileops::perf::records::{Record, RecordsError};

const USAGE: &str = "\
usage: bench_all [--op NAME]... [--family NAME]... [--list] [--out PATH] [--seed N] [--cpu]
                 [--cpu-max-bytes N] [--cpu-max-flops N] [--emu-max-bytes N] [--emu-max-flops N]

  --op NAME          only this op (repeatable)
  --family NAME      only ops of this family (repeatable)
  --list             print the selected ops and cases, run nothing
  --out PATH         records file (default target/bench/<timestamp>.json)
  --seed N           seed of the random inputs (default 0)
  --cpu              use the CPU backend even when a GPU is usable
  --cpu-max-bytes N  CPU backend: skip rows moving more than N bytes per call (default 8388608)
  --cpu-max-flops N  CPU backend: skip rows doing more than N FLOPs per call (default 64000000)
  --emu-max-bytes N  emulated device: skip rows moving more than N bytes per call (default 33554432)
  --emu-max-flops N  emulated device: skip rows doing more than N FLOPs per call (default 4000000000)

On an emulated device (cuda-emu) nothing is timed: each row runs once for correctness and its
record has timing `emulated` and no time.

exit status: 0; 1 when the run could not start or the records could not be written; 2 for bad
arguments";

/// Parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// `--op` and `--family`.
    pub selection: Selection,
    /// `--list`.
    pub list: bool,
    /// `--out`.
    pub out: Option<PathBuf>,
    /// `--seed`.
    pub seed: u64,
    /// `--cpu`.
    pub cpu: bool,
    /// `--cpu-max-bytes` and `--cpu-max-flops`.
    pub cpu_budget: CpuBudget,
    /// `--emu-max-bytes` and `--emu-max-flops`.
    pub emulated_budget: EmulatedBudget,
}

/// Why the tool stopped.
#[derive(Debug)]
pub enum CliError {
    /// `--help`.
    Help,
    /// A command line it does not understand.
    Usage(String),
    /// The selection or the timing setup failed.
    Bench(BenchError),
    /// The records could not be written.
    Records(RecordsError),
    /// stdout could not be written.
    Io(std::io::Error),
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Help => f.write_str(USAGE),
            CliError::Usage(message) => write!(f, "{message}\n\n{USAGE}"),
            CliError::Bench(e) => write!(f, "{e}"),
            CliError::Records(e) => write!(f, "{e}"),
            CliError::Io(e) => write!(f, "writing the table: {e}"),
        }
    }
}

impl std::error::Error for CliError {}

impl CliError {
    /// The exit status: 2 for what the user typed, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Help => 0,
            CliError::Usage(_)
            | CliError::Bench(
                BenchError::UnknownOp { .. }
                | BenchError::UnknownFamily { .. }
                | BenchError::Empty { .. },
            ) => 2,
            _ => 1,
        }
    }
}

/// Parses the arguments after the program name.
///
/// # Errors
/// [`CliError::Usage`] for an unknown option, a missing or malformed value; [`CliError::Help`].
pub fn parse_args(args: &[String]) -> Result<Args, CliError> {
    let mut parsed = Args {
        selection: Selection::default(),
        list: false,
        out: None,
        seed: 0,
        cpu: false,
        cpu_budget: CpuBudget::default(),
        emulated_budget: EmulatedBudget::default(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if arg.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| CliError::Usage(format!("{name} needs a value")))
        };
        let number = |name: &str, text: String| {
            text.trim().replace('_', "").parse::<u64>().map_err(|_| {
                CliError::Usage(format!("{name} takes a non-negative integer, not `{text}`"))
            })
        };
        match flag {
            "-h" | "--help" => return Err(CliError::Help),
            "--op" => parsed.selection.ops.push(value("--op")?),
            "--family" => parsed.selection.families.push(value("--family")?),
            "--list" => parsed.list = true,
            "--cpu" => parsed.cpu = true,
            "--out" => parsed.out = Some(PathBuf::from(value("--out")?)),
            "--seed" => parsed.seed = number("--seed", value("--seed")?)?,
            "--cpu-max-bytes" => {
                parsed.cpu_budget.max_bytes = number(flag, value(flag)?)?;
            }
            "--cpu-max-flops" => {
                parsed.cpu_budget.max_flops = number(flag, value(flag)?)?;
            }
            "--emu-max-bytes" => {
                parsed.emulated_budget.max_bytes = number(flag, value(flag)?)?;
            }
            "--emu-max-flops" => {
                parsed.emulated_budget.max_flops = number(flag, value(flag)?)?;
            }
            other => {
                return Err(CliError::Usage(format!("unexpected argument `{other}`")));
            }
        }
    }
    Ok(parsed)
}

/// The progress bar on stderr; when stderr is not a terminal (a log file), one line per case.
struct Progress<'a> {
    bar: ProgressBar,
    log: &'a mut dyn Write,
    total: usize,
}

impl Observer for Progress<'_> {
    fn started(&mut self, total: usize) {
        self.total = total;
        self.bar.set_length(total as u64);
    }

    fn case_started(&mut self, _index: usize, case: &Case) {
        self.bar.set_message(case.name());
    }

    fn case_finished(&mut self, index: usize, record: &Record) {
        self.bar.inc(1);
        if self.bar.is_hidden() {
            let outcome = match (&record.skipped, record.median_ms) {
                (Some(_), _) if record.is_emulated() => {
                    "ran once on the emulated device (not timed)".to_owned()
                }
                (Some(reason), _) => format!("skipped: {reason}"),
                (None, Some(ms)) => format!("{ms:.4} ms median of {}", record.samples),
                (None, None) => String::new(),
            };
            let _ = writeln!(
                self.log,
                "[{}/{}] {}/{}-{}: {outcome}",
                index + 1,
                self.total,
                record.op,
                record.workload,
                record.dtype
            );
        }
    }
}

/// Runs the tool: the table (or the listing) goes to `out`, progress and notes to `err`.
///
/// # Errors
/// [`CliError`]; see [`CliError::exit_code`].
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
    let args = parse_args(args)?;
    let cases = bench::select(&args.selection).map_err(CliError::Bench)?;
    if args.list {
        return out
            .write_all(bench::list(&cases).as_bytes())
            .map_err(CliError::Io);
    }
    let device = if args.cpu {
        Device::cpu()
    } else {
        Device::best()
    };
    let config = BenchConfig {
        cpu: args.cpu_budget,
        emulated: args.emulated_budget,
        seed: args.seed,
        ..BenchConfig::default()
    };
    if device.is_emulated() {
        let budget = args.emulated_budget;
        let _ = writeln!(
            err,
            "bench_all: {device} is emulated: nothing is timed; each row of at most {} B and {} \
             FLOP per call runs once, for correctness, and is recorded with timing `emulated` \
             and no time",
            budget.max_bytes, budget.max_flops
        );
    }
    let started = (Instant::now(), SystemTime::now());
    let draw = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(cases.len() as u64), draw);
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {wide_msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    let mut progress = Progress {
        bar,
        log: err,
        total: cases.len(),
    };
    let result = bench::run(&device, &cases, &config, &mut progress);
    progress.bar.finish_and_clear();
    let err = progress.log;
    let run = result.map_err(CliError::Bench)?;

    let profile = Profile::for_device(&run.meta.device.name).ok().flatten();
    let table = bench::table(&run.records, profile.as_ref());
    out.write_all(table.as_bytes()).map_err(CliError::Io)?;
    match &profile {
        _ if device.is_emulated() => {
            let _ = writeln!(err, "efficiency blank: emulated device, no timing");
        }
        Some(p) => {
            let _ = writeln!(err, "efficiency against the built-in profile `{}`", p.name);
        }
        None => {
            let _ = writeln!(
                err,
                "efficiency blank: no built-in profile describes `{}`",
                run.meta.device.name
            );
        }
    }
    let path = args
        .out
        .unwrap_or_else(|| bench::default_out_path(started.1));
    run.save(&path).map_err(CliError::Records)?;
    let timed = run.records.iter().filter(|r| r.skipped.is_none()).count();
    let emulated = run.records.iter().filter(|r| r.is_emulated()).count();
    let counts = if device.is_emulated() {
        let failed = run
            .records
            .iter()
            .filter(|r| r.skipped.as_deref().is_some_and(failed_to_run))
            .count();
        format!(
            "emulated: {emulated} ran once untimed, {} skipped ({failed} of them failed to run)",
            run.records.len() - timed - emulated
        )
    } else {
        format!("{timed} timed, {} skipped", run.records.len() - timed)
    };
    let _ = writeln!(
        err,
        "bench_all: {} records ({counts}) on {} in {:.1} s; wrote {}",
        run.records.len(),
        run.meta.device.name,
        started.0.elapsed().as_secs_f64(),
        path.display()
    );
    let _ = writeln!(
        err,
        "next: cargo run --example roofline -- {}",
        path.display()
    );
    Ok(())
}

/// Whether a skip reason says the row's op failed (its inputs or its call), rather than that the
/// row was left out (a budget, the manifest).
pub fn failed_to_run(reason: &str) -> bool {
    reason.starts_with("running the op failed") || reason.starts_with("making random inputs failed")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args, &mut std::io::stdout().lock(), &mut std::io::stderr()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Help) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_all: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
