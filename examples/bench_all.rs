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
//! harness itself is `tileops::perf::bench`.
//!
//! No record is lost: the records path is checked before the first row runs (a directory, a
//! device or a directory it cannot create a file in is an error at once); the file is written
//! atomically (a temporary file beside it, flushed, renamed over it), so a failed write leaves the
//! previous file as it was; on SIGINT or SIGTERM the run stops after the row in progress and the
//! finished rows are written, marked partial in `meta.partial` (a second signal quits at once,
//! writing nothing). A closed stdout (`| head`) ends the table quietly; the records are still
//! written.
//!
//! Exit status: 0; 1 when the run could not start (the records path among it) or the records could
//! not be written; 2 for bad arguments; 130 (SIGINT) or 143 (SIGTERM) when interrupted, the
//! finished rows written.

use std::io::{ErrorKind, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Instant, SystemTime};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tileops::Device;
use tileops::perf::bench::{
    self, BenchConfig, BenchError, Case, CpuBudget, EmulatedBudget, Observer, Selection,
};
use tileops::perf::files;
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

The records path is checked before the first row runs. The file is replaced atomically: a failed
write leaves the previous file as it was. On SIGINT or SIGTERM the row in progress finishes and
the rows done so far are written, marked partial in `meta.partial`; a second signal quits at once.

exit status: 0; 1 when the run could not start (an unwritable records path among it) or the
records could not be written; 2 for bad arguments; 130 (SIGINT) or 143 (SIGTERM) when
interrupted, the finished rows written";

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
    /// The records path cannot be written: found before the first row runs.
    Output {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
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
            CliError::Output { path, source } => write!(
                f,
                "cannot write the records to {}: {source}; nothing was run (check --out)",
                path.display()
            ),
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

/// The signals that stop a run between rows: SIGINT (Ctrl-C) and SIGTERM.
const STOP_SIGNALS: [(i32, &str); 2] = [
    (signal_hook::consts::SIGINT, "SIGINT"),
    (signal_hook::consts::SIGTERM, "SIGTERM"),
];

/// Which stop signal arrived, if any: set from the signal handlers, read between rows.
#[derive(Debug, Clone, Default)]
pub struct Interrupts {
    /// The last stop signal's number, 0 before any.
    signal: Arc<AtomicUsize>,
}

impl Interrupts {
    /// Nothing ever stops the run (the tests' in-process runs).
    pub fn none() -> Self {
        Interrupts::default()
    }

    /// Registers handlers for SIGINT and SIGTERM: the first records the signal (the run stops
    /// before its next row and saves what it has), a second one exits at once with status
    /// 128 + the signal, writing nothing (the way out of a row that will not end).
    ///
    /// # Errors
    /// The registration's OS error.
    pub fn install() -> std::io::Result<Self> {
        let interrupts = Interrupts::default();
        let armed = Arc::new(AtomicBool::new(false));
        for (signal, _) in STOP_SIGNALS {
            // The shutdown goes first: on the first signal `armed` is still false, then the flag
            // below arms it for the second.
            signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, armed.clone())?;
            signal_hook::flag::register(signal, armed.clone())?;
            signal_hook::flag::register_usize(signal, interrupts.signal.clone(), signal as usize)?;
        }
        Ok(interrupts)
    }

    /// The stop signal that arrived: its number and name.
    pub fn received(&self) -> Option<(i32, &'static str)> {
        let number = self.signal.load(Ordering::SeqCst);
        STOP_SIGNALS
            .into_iter()
            .find(|(signal, _)| *signal as usize == number)
    }
}

/// `Ok` for a write that failed only because the reader closed the pipe (`| head`): the reader
/// wanted no more, which is not the tool's failure.
fn ignore_closed_pipe(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// The progress bar on stderr; when stderr is not a terminal (a log file), one line per case.
struct Progress<'a> {
    bar: ProgressBar,
    log: &'a mut dyn Write,
    total: usize,
    interrupts: &'a Interrupts,
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

    fn stop_requested(&mut self) -> Option<String> {
        self.interrupts
            .received()
            .map(|(_, name)| format!("interrupted by {name}"))
    }
}

/// Runs the tool with nothing to interrupt it: see [`run_until`].
///
/// # Errors
/// [`CliError`]; see [`CliError::exit_code`].
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> Result<u8, CliError> {
    run_until(args, out, err, &Interrupts::none())
}

/// Runs the tool: the table (or the listing) goes to `out`, progress and notes to `err`; a signal
/// in `interrupts` stops the run between rows. Returns the exit status: 0, or 128 + the signal
/// when interrupted (the finished rows written, marked partial).
///
/// # Errors
/// [`CliError`]; see [`CliError::exit_code`].
pub fn run_until(
    args: &[String],
    out: &mut dyn Write,
    err: &mut dyn Write,
    interrupts: &Interrupts,
) -> Result<u8, CliError> {
    let started = (Instant::now(), SystemTime::now());
    let args = parse_args(args)?;
    let cases = bench::select(&args.selection).map_err(CliError::Bench)?;
    if args.list {
        ignore_closed_pipe(out.write_all(bench::list(&cases).as_bytes())).map_err(CliError::Io)?;
        return Ok(0);
    }
    // Before any row runs (and before a GPU is even looked for): a run whose records cannot be
    // written must not take its minutes first.
    let path = args
        .out
        .clone()
        .unwrap_or_else(|| bench::default_out_path(started.1));
    files::check_writable(&path).map_err(|source| CliError::Output {
        path: path.clone(),
        source,
    })?;
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
        interrupts,
    };
    let result = bench::run(&device, &cases, &config, &mut progress);
    progress.bar.finish_and_clear();
    let err = progress.log;
    let run = result.map_err(CliError::Bench)?;

    let profile = Profile::for_device(&run.meta.device.name).ok().flatten();
    let table = bench::table(&run.records, profile.as_ref());
    // The records are written whatever became of the table: its error waits until they are.
    let printed = ignore_closed_pipe(out.write_all(table.as_bytes()).and_then(|()| out.flush()));
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
    let status = match (&run.meta.partial, interrupts.received()) {
        (Some(partial), Some((signal, _))) => {
            let _ = writeln!(
                err,
                "bench_all: {}: the {} finished rows are written, marked partial in meta",
                partial.reason,
                run.records.len()
            );
            128 + signal as u8
        }
        _ => 0,
    };
    let _ = writeln!(
        err,
        "next: cargo run --example roofline -- {}",
        path.display()
    );
    printed.map_err(CliError::Io)?;
    Ok(status)
}

/// Whether a skip reason says the row's op failed (its inputs or its call), rather than that the
/// row was left out (a budget, the manifest).
pub fn failed_to_run(reason: &str) -> bool {
    reason.starts_with("running the op failed") || reason.starts_with("making random inputs failed")
}

fn main() -> ExitCode {
    // A write over `ulimit -f` then fails with an error the tool reports, rather than a SIGXFSZ
    // that kills it.
    files::file_size_limit_as_error();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut stderr = std::io::stderr();
    let interrupts = match Interrupts::install() {
        Ok(interrupts) => interrupts,
        Err(e) => {
            let _ = writeln!(stderr, "bench_all: cannot handle SIGINT and SIGTERM: {e}");
            return ExitCode::from(1);
        }
    };
    let mut stdout = std::io::stdout().lock();
    match run_until(&args, &mut stdout, &mut stderr, &interrupts) {
        Ok(status) => ExitCode::from(status),
        Err(CliError::Help) => match ignore_closed_pipe(writeln!(stdout, "{USAGE}")) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                let _ = writeln!(stderr, "bench_all: writing the usage: {e}");
                ExitCode::from(1)
            }
        },
        Err(e) => {
            let _ = writeln!(stderr, "bench_all: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
