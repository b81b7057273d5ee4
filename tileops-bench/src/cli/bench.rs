//! `tileops bench` (and `cargo run --release --example bench_all`): times every registered op on
//! every manifest workload case and writes a records file.
//!
//! On a GPU, CUDA events with the L2 flushed and the stream held before every sample; without one,
//! the CPU reference path, skipping (with the reason) the rows too large for it. On an emulated
//! device (cuda-emu) it says so and times nothing: each row within the emulator budget runs once,
//! for correctness, and is recorded with timing `emulated` and no figure. Prints a table (with
//! efficiency and verdict when a built-in profile describes the device; skipped rows collapsed into
//! one line per reason unless `--verbose`) and writes the records JSON, by default to
//! `target/bench/<timestamp>.json`, for `tileops roofline FILE`. The harness itself is
//! [`crate::bench`].
//!
//! The ops are those registered in the running binary: tileops's own, and a downstream crate's
//! when its binary calls [`main`] (see [`crate::cli`]).
//!
//! No record is lost: the records path is checked before the first row runs (a directory, a
//! device or a directory it cannot create a file in is an error at once); the file is written
//! atomically, so a failed write leaves the previous file as it was; on SIGINT or SIGTERM the run
//! stops after the row in progress and the finished rows are written, marked partial in
//! `meta.partial` (a second signal quits at once, writing nothing). A closed stdout (`| head`) ends
//! the table quietly; the records are still written.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Instant, SystemTime};

use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use regex::Regex;

use super::meta;
use super::table::{TableOptions, console_table};
use super::{ColorChoice, baseline_path, ignore_closed_pipe};
use crate::bench::{
    self, BenchConfig, BenchError, Case, CpuBudget, EmulatedBudget, L2Flush, Observer, Selection,
};
use crate::files;
use crate::profile::Profile;
use crate::records::{Record, RecordsError};
use crate::text::{for_terminal, for_terminal_text, reason_clause};
use tileops::{DType, Device};

const AFTER_HELP: &str = "\
On an emulated device (cuda-emu) nothing is timed: each row runs once for correctness and its
record has timing `emulated` and no time.

The records path is checked before the first row runs. The file is replaced atomically: a failed
write leaves the previous file as it was. On SIGINT or SIGTERM the row in progress finishes and
the rows done so far are written, marked partial in `meta.partial`; a second signal quits at once.

Exit status: 0; 1 when the run could not start (an unwritable records path among it) or the
records could not be written; 2 for bad arguments (an unknown op, family or dtype, a filter that
matches nothing); 130 (SIGINT) or 143 (SIGTERM) when interrupted, the finished rows written.";

/// The command line of `bench`.
// The field docs are the `--help` text, where `<name>` is a placeholder, not an HTML tag.
#[allow(rustdoc::invalid_html_tags)]
#[derive(Debug, Clone, Parser)]
#[command(
    name = "bench",
    version,
    about = "Time every registered op on every manifest workload case and write a records file",
    after_help = AFTER_HELP
)]
pub struct BenchArgs {
    /// Only this op (repeatable); a mistyped name gets a suggestion
    #[arg(long = "op", value_name = "NAME")]
    pub ops: Vec<String>,
    /// Only ops of this family (repeatable)
    #[arg(long = "family", value_name = "NAME")]
    pub families: Vec<String>,
    /// Only the cases whose `op/workload/dtype` matches this regular expression
    #[arg(long, value_name = "REGEX")]
    pub filter: Option<Regex>,
    /// Only cases in this dtype (repeatable: `bfloat16`, `float32`, ...; `bf16`, `fp16`, `fp32`, `fp8` too)
    #[arg(long = "dtype", value_name = "DTYPE", value_parser = parse_dtype)]
    pub dtypes: Vec<DType>,
    /// Print the selected ops and cases, run nothing
    #[arg(long)]
    pub list: bool,
    /// The records file [default: target/bench/<timestamp>.json]
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Also save the records as the named baseline, for `roofline --baseline NAME`
    /// (target/tileops/baselines/NAME.json)
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// The seed of the random inputs
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_count)]
    pub seed: u64,
    /// Use the CPU backend even when a GPU is usable
    #[arg(long)]
    pub cpu: bool,
    /// CPU backend: skip rows moving more than N bytes per call
    #[arg(long, value_name = "N", default_value_t = CpuBudget::default().max_bytes, value_parser = parse_count)]
    pub cpu_max_bytes: u64,
    /// CPU backend: skip rows doing more than N FLOPs per call
    #[arg(long, value_name = "N", default_value_t = CpuBudget::default().max_flops, value_parser = parse_count)]
    pub cpu_max_flops: u64,
    /// Emulated device: run rows moving at most N bytes per call (larger ones are launched dry
    /// for their kernel ledger)
    #[arg(long, value_name = "N", default_value_t = EmulatedBudget::default().max_bytes, value_parser = parse_count)]
    pub emu_max_bytes: u64,
    /// Emulated device: launch rows over the run budget dry (launch shapes for the kernel ledger,
    /// nothing run) when they move at most N bytes per call; skip larger ones
    #[arg(long, value_name = "N", default_value_t = EmulatedBudget::default().max_dry_run_bytes, value_parser = parse_count)]
    pub emu_max_dry_run_bytes: u64,
    /// Emulated device: skip rows doing more than N FLOPs per call
    #[arg(long, value_name = "N", default_value_t = EmulatedBudget::default().max_flops, value_parser = parse_count)]
    pub emu_max_flops: u64,
    /// GPU: how the L2 is flushed before each sample: memset+read (a memset of twice the L2, then
    /// a read of another buffer that size, so no dirty line is left for the timed call) or memset
    /// (the memset only); each record's `timing` says which
    #[arg(long, value_name = "METHOD", default_value_t = L2Flush::default(), value_parser = parse_l2_flush)]
    pub l2_flush: L2Flush,
    /// List every skipped row in the table, not one line per reason
    #[arg(short, long)]
    pub verbose: bool,
    /// Colour the verdicts: auto (a terminal without NO_COLOR), always or never
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// A non-negative integer, `_` allowed as a digit separator (`8_388_608`).
fn parse_count(text: &str) -> Result<u64, String> {
    text.trim()
        .replace('_', "")
        .parse::<u64>()
        .map_err(|_| format!("a non-negative integer, not `{text}`"))
}

/// An L2 flush method's name (`memset`, `memset+read`).
fn parse_l2_flush(text: &str) -> Result<L2Flush, String> {
    text.parse()
}

/// A dtype name (the manifest's, or a short name such as `bf16`), with a suggestion for a near miss.
fn parse_dtype(text: &str) -> Result<DType, String> {
    // The short names users type (PyTorch's and CUDA's), beside the manifest's own.
    let name = match text.to_ascii_lowercase().as_str() {
        "bf16" => "bfloat16",
        "fp16" | "f16" | "half" => "float16",
        "fp32" | "f32" | "float" => "float32",
        "fp64" | "f64" | "double" => "float64",
        "fp8" | "fp8_e4m3" | "e4m3" => "float8_e4m3fn",
        "fp8_e5m2" | "e5m2" => "float8_e5m2",
        _ => text,
    };
    name.parse::<DType>().map_err(|_| {
        let known: Vec<String> = DType::ALL.iter().map(|d| d.name().to_owned()).collect();
        format!(
            "unknown dtype `{text}`{} (known: {})",
            bench::did_you_mean(text, &known),
            known.join(", ")
        )
    })
}

/// Why the tool stopped.
#[derive(Debug)]
pub enum CliError {
    /// `--help` or `--version`: the text, for stdout, exit status 0.
    Help(String),
    /// A command line it does not understand (clap's message, with its suggestions).
    Usage(clap::Error),
    /// The selection or the timing setup failed.
    Bench(BenchError),
    /// `--filter` and `--dtype` leave no case of the selection.
    NoMatch(String),
    /// A `--save-baseline` name that is not a name.
    Baseline(String),
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

/// The message for a terminal: a bench or records error may quote a manifest's names or reasons,
/// so its hidden characters are escaped ([`for_terminal_text`]).
impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Help(text) => f.write_str(text),
            CliError::Usage(e) => write!(f, "{}", e.render()),
            CliError::Bench(e) => f.write_str(&for_terminal_text(&e.to_string())),
            CliError::NoMatch(what) => write!(f, "no case matches {what}"),
            CliError::Baseline(message) => f.write_str(message),
            CliError::Output { path, source } => write!(
                f,
                "cannot write the records to {}: {source}; nothing was run (check --out)",
                path.display()
            ),
            CliError::Records(e) => f.write_str(&for_terminal_text(&e.to_string())),
            CliError::Io(e) => write!(f, "writing the table: {e}"),
        }
    }
}

impl std::error::Error for CliError {}

impl CliError {
    /// The exit status: 0 for help, 2 for what the user typed, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Help(_) => 0,
            CliError::Usage(_)
            | CliError::NoMatch(_)
            | CliError::Baseline(_)
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
/// [`CliError::Help`] for `--help` and `--version`; [`CliError::Usage`] otherwise.
///
/// ```
/// use tileops_bench::cli::bench::parse_args;
/// let args = parse_args(["--op", "softmax", "--cpu", "--cpu-max-bytes", "1_000"]).unwrap();
/// assert_eq!((args.ops, args.cpu, args.cpu_max_bytes), (vec!["softmax".to_owned()], true, 1000));
/// use tileops_bench::bench::L2Flush;
/// assert_eq!(args.l2_flush, L2Flush::MemsetRead);
/// assert_eq!(parse_args(["--l2-flush", "memset"]).unwrap().l2_flush, L2Flush::Memset);
/// assert!(parse_args(["--l2-flush", "read"]).is_err());
/// assert!(parse_args(["--cpu-max-byte", "1"]).unwrap_err().to_string().contains("--cpu-max-bytes"));
/// ```
pub fn parse_args<I, T>(args: I) -> Result<BenchArgs, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv =
        std::iter::once(std::ffi::OsString::from("bench")).chain(args.into_iter().map(Into::into));
    BenchArgs::try_parse_from(argv).map_err(from_clap)
}

/// clap's error as ours: help and version are texts for stdout, the rest usage errors.
fn from_clap(e: clap::Error) -> CliError {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            CliError::Help(e.render().to_string())
        }
        _ => CliError::Usage(e),
    }
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

/// The progress bar on stderr (with its ETA); when stderr is not a terminal (a log file), one line
/// per case.
struct Progress<'a> {
    bar: ProgressBar,
    log: &'a mut dyn Write,
    total: usize,
    interrupts: &'a Interrupts,
    /// Skip reasons printed in full (their first clause with numbers as `N`), and the row that
    /// printed each.
    reasons_shown: std::collections::HashMap<String, usize>,
}

impl Observer for Progress<'_> {
    fn started(&mut self, total: usize) {
        self.total = total;
        self.bar.set_length(total as u64);
    }

    fn case_started(&mut self, _index: usize, case: &Case) {
        // Names come from a manifest: nothing in them may drive the terminal.
        self.bar
            .set_message(for_terminal(&case.name()).into_owned());
    }

    fn case_finished(&mut self, index: usize, record: &Record) {
        self.bar.inc(1);
        if self.bar.is_hidden() {
            let outcome = match (&record.skipped, record.median_ms) {
                (Some(_), _) if record.is_emulated() => {
                    "ran once on the emulated device (not timed)".to_owned()
                }
                (Some(reason), _) => {
                    // A reason in full once; the same reason again (its numbers aside) by its
                    // first clause, pointing back: a log of 96 rows skipped for one reason is
                    // otherwise 96 copies of it.
                    let (clause, key) = reason_clause(reason);
                    match self.reasons_shown.get(&key) {
                        Some(&first) if clause != reason => format!(
                            "skipped: {} (the rest as in [{first}/{}])",
                            for_terminal(clause),
                            self.total
                        ),
                        _ => {
                            self.reasons_shown.entry(key).or_insert(index + 1);
                            format!("skipped: {}", for_terminal(reason))
                        }
                    }
                }
                (None, Some(ms)) => format!("{ms:.4} ms median of {}", record.samples),
                (None, None) => String::new(),
            };
            let _ = writeln!(
                self.log,
                "[{}/{}] {}/{}-{}: {outcome}",
                index + 1,
                self.total,
                for_terminal(&record.op),
                for_terminal(&record.workload),
                for_terminal(&record.dtype)
            );
        }
    }

    fn stop_requested(&mut self) -> Option<String> {
        self.interrupts
            .received()
            .map(|(_, name)| format!("interrupted by {name}"))
    }
}

/// The selected cases: `--op` and `--family` ([`bench::select`]), then `--dtype` and `--filter`
/// over `op/workload/dtype`.
///
/// # Errors
/// [`CliError::Bench`] for an unknown op or family; [`CliError::NoMatch`] when the filters leave
/// nothing.
pub fn cases(args: &BenchArgs) -> Result<Vec<Case>, CliError> {
    let selection = Selection {
        ops: args.ops.clone(),
        families: args.families.clone(),
    };
    let mut cases = bench::select(&selection).map_err(CliError::Bench)?;
    let before = cases.len();
    cases.retain(|c| {
        (args.dtypes.is_empty() || args.dtypes.contains(&c.case.dtype))
            && args.filter.as_ref().is_none_or(|re| {
                re.is_match(&format!(
                    "{}/{}/{}",
                    c.op.name, c.case.workload.label, c.case.dtype
                ))
            })
    });
    if cases.is_empty() {
        let mut what = Vec::new();
        if let Some(re) = &args.filter {
            what.push(format!("--filter `{re}`"));
        }
        if !args.dtypes.is_empty() {
            let names: Vec<&str> = args.dtypes.iter().map(|d| d.name()).collect();
            what.push(format!("--dtype {}", names.join(", ")));
        }
        return Err(CliError::NoMatch(format!(
            "{} among the {before} selected cases (`--list` shows them; the filter sees \
             `op/workload/dtype`, e.g. `softmax/attn-weights-4k/bfloat16`)",
            what.join(" with ")
        )));
    }
    Ok(cases)
}

/// Runs the tool from its arguments (after the program name) with nothing to interrupt it and
/// no colour: see [`run_until`].
///
/// # Errors
/// [`CliError`]; see [`CliError::exit_code`].
pub fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> Result<u8, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = parse_args(args)?;
    let color = args.color.colors(false, None);
    run_until(&args, out, err, &Interrupts::none(), color)
}

/// Runs the tool: the table (or the listing) goes to `out`, progress and notes to `err`; a signal
/// in `interrupts` stops the run between rows; `color` colours the table's verdicts. Returns the
/// exit status: 0, or 128 + the signal when interrupted (the finished rows written, marked
/// partial).
///
/// # Errors
/// [`CliError`]; see [`CliError::exit_code`].
pub fn run_until(
    args: &BenchArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
    interrupts: &Interrupts,
    color: bool,
) -> Result<u8, CliError> {
    let started = (Instant::now(), SystemTime::now());
    let cases = cases(args)?;
    if args.list {
        // The listing quotes the manifests' labels and skip reasons.
        let listing = list(&cases);
        ignore_closed_pipe(out.write_all(for_terminal_text(&listing).as_bytes()))
            .map_err(CliError::Io)?;
        return Ok(0);
    }
    let baseline = args
        .save_baseline
        .as_deref()
        .map(baseline_path)
        .transpose()
        .map_err(CliError::Baseline)?;
    // Before any row runs (and before a GPU is even looked for): a run whose records cannot be
    // written must not take its minutes first.
    let path = args
        .out
        .clone()
        .unwrap_or_else(|| meta::default_out_path(started.1));
    for target in std::iter::once(&path).chain(&baseline) {
        files::check_writable(target).map_err(|source| CliError::Output {
            path: target.clone(),
            source,
        })?;
    }
    // The tool, not the library, says which device it runs on and why.
    let (device, why) = if args.cpu {
        (Device::cpu(), "--cpu".to_owned())
    } else {
        Device::probe_best()
    };
    // The device's name is the driver's (or /proc/cpuinfo's) text.
    let _ = writeln!(
        err,
        "bench: running on {} ({})",
        for_terminal(&device.to_string()),
        for_terminal(&why)
    );
    let config = BenchConfig {
        cpu: CpuBudget {
            max_bytes: args.cpu_max_bytes,
            max_flops: args.cpu_max_flops,
        },
        emulated: EmulatedBudget {
            max_bytes: args.emu_max_bytes,
            max_flops: args.emu_max_flops,
            max_dry_run_bytes: args.emu_max_dry_run_bytes,
        },
        seed: args.seed,
        l2_flush: args.l2_flush,
        ..BenchConfig::default()
    };
    if device.is_cuda() {
        let _ = writeln!(
            err,
            "bench: L2 flush: {} ({})",
            config.l2_flush,
            if device.is_emulated() {
                "exercised once, nothing timed".to_owned()
            } else {
                format!("the records' timing: {}", config.l2_flush.timing(true))
            }
        );
    }
    if device.is_emulated() {
        let _ = writeln!(
            err,
            "bench: {} is emulated: nothing is timed; each row of at most {} B and {} \
             FLOP per call runs once, for correctness, and is recorded with timing `emulated` \
             and no time; larger rows of at most {} B are launched dry; every row gets its \
             kernel ledger (`tileops roofline` prices it: ceiling and limiter)",
            for_terminal(&device.to_string()),
            config.emulated.max_bytes,
            config.emulated.max_flops,
            config.emulated.max_dry_run_bytes
        );
    }
    let draw = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(cases.len() as u64), draw);
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} eta {eta} {wide_msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    let mut progress = Progress {
        bar,
        log: err,
        total: cases.len(),
        interrupts,
        reasons_shown: std::collections::HashMap::new(),
    };
    let meta = meta::run_meta(&device, SystemTime::now());
    let result = bench::run(&device, meta, &cases, &config, &mut progress);
    progress.bar.finish_and_clear();
    let err = progress.log;
    let run = result.map_err(CliError::Bench)?;

    let profile = Profile::for_device(&run.meta.device.name).ok().flatten();
    let table = console_table(
        &run.records,
        profile.as_ref(),
        TableOptions {
            color,
            verbose: args.verbose,
        },
    );
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
            // On the CPU backend the way to a priced row is a host profile.
            let hint = if device.is_cuda() {
                ""
            } else {
                "; `calibrate --cpu` measures this host, and `roofline` then prices its rows"
            };
            let _ = writeln!(
                err,
                "efficiency blank: no built-in profile describes `{}`{hint}",
                for_terminal(&run.meta.device.name)
            );
        }
    }
    run.save(&path).map_err(CliError::Records)?;
    if let Some(baseline) = &baseline {
        run.save(baseline).map_err(CliError::Records)?;
        let _ = writeln!(err, "bench: saved the baseline {}", baseline.display());
    }
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
        "bench: {} records ({counts}) on {} in {:.1} s; wrote {}",
        run.records.len(),
        for_terminal(&run.meta.device.name),
        started.0.elapsed().as_secs_f64(),
        path.display()
    );
    let status = match (&run.meta.partial, interrupts.received()) {
        (Some(partial), Some((signal, _))) => {
            let _ = writeln!(
                err,
                "bench: {}: the {} finished rows are written, marked partial in meta",
                for_terminal(&partial.reason),
                run.records.len()
            );
            128 + signal as u8
        }
        _ => 0,
    };
    let program = std::env::args_os().next();
    let _ = writeln!(err, "next: {}", roofline_command(program.as_deref(), &path));
    printed.map_err(CliError::Io)?;
    Ok(status)
}

/// The command that prices the records at `path`, in the form matching how bench was run: a user
/// of the `bench_all` example (`argv[0]` ending in `bench_all`) has a checkout and maybe no
/// installed `tileops`, so it gets the `roofline` example; anything else (`tileops bench`, a
/// downstream crate's bench binary) gets `tileops roofline`.
///
/// ```
/// use std::ffi::OsStr;
/// use std::path::Path;
/// use tileops_bench::cli::bench::roofline_command;
/// let run = Path::new("target/bench/run.json");
/// assert_eq!(
///     roofline_command(Some(OsStr::new("target/release/examples/bench_all")), run),
///     "cargo run --release --example roofline -- target/bench/run.json"
/// );
/// assert_eq!(
///     roofline_command(Some(OsStr::new("/usr/bin/tileops")), run),
///     "tileops roofline target/bench/run.json"
/// );
/// ```
pub fn roofline_command(program: Option<&std::ffi::OsStr>, path: &std::path::Path) -> String {
    let stem = program.and_then(|p| std::path::Path::new(p).file_stem());
    if stem.is_some_and(|s| s == "bench_all") {
        format!(
            "cargo run --release --example roofline -- {}",
            path.display()
        )
    } else {
        format!("tileops roofline {}", path.display())
    }
}

/// Whether a skip reason says the row's op failed (its inputs or its call), rather than that the
/// row was left out (a budget, the manifest).
pub fn failed_to_run(reason: &str) -> bool {
    reason.starts_with("running the op failed") || reason.starts_with("making random inputs failed")
}

/// The bench CLI over this process's arguments and every op registered in the binary: what
/// `tileops bench`, `cargo run --example bench_all` and a downstream crate's bench binary run.
pub fn main() -> ExitCode {
    match parse_args(std::env::args_os().skip(1)) {
        Ok(args) => main_with(&args),
        Err(e) => report(e),
    }
}

/// [`main`] with the arguments already parsed (`tileops bench`'s subcommand): installs the
/// signal handlers, runs, and turns the outcome into the exit status.
pub fn main_with(args: &BenchArgs) -> ExitCode {
    // A write over `ulimit -f` then fails with an error the tool reports, rather than a SIGXFSZ
    // that kills it.
    files::file_size_limit_as_error();
    let mut stderr = std::io::stderr();
    let interrupts = match Interrupts::install() {
        Ok(interrupts) => interrupts,
        Err(e) => {
            let _ = writeln!(stderr, "bench: cannot handle SIGINT and SIGTERM: {e}");
            return ExitCode::from(1);
        }
    };
    let color = args.color.for_stdout();
    let mut stdout = std::io::stdout().lock();
    match run_until(args, &mut stdout, &mut stderr, &interrupts, color) {
        Ok(status) => ExitCode::from(status),
        Err(e) => report(e),
    }
}

/// Prints an error (help on stdout, the rest on stderr) and returns its status.
fn report(e: CliError) -> ExitCode {
    match e {
        CliError::Help(text) => {
            match ignore_closed_pipe(std::io::stdout().write_all(text.as_bytes())) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "bench: writing the usage: {e}");
                    ExitCode::from(1)
                }
            }
        }
        // clap's message carries its own `error:` prefix, its suggestion and the usage line.
        CliError::Usage(e) => {
            let _ = e.print();
            ExitCode::from(2)
        }
        e => {
            let _ = writeln!(std::io::stderr(), "bench: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// What `--list` prints: each op with its family and manifest, then its cases with their
/// input shapes (and the manifest's skip reason, if any).
fn list(cases: &[Case]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut current: Option<&str> = None;
    for case in cases {
        if current != Some(case.op.name) {
            current = Some(case.op.name);
            let n = cases.iter().filter(|c| c.op.name == case.op.name).count();
            let _ = writeln!(
                out,
                "{} ({}, {}): {n} case{}",
                case.op.name,
                case.op.family,
                case.op.manifest_file,
                if n == 1 { "" } else { "s" }
            );
        }
        let shapes: Vec<String> = case
            .inputs()
            .iter()
            .map(|(name, shape, _)| format!("{name}={shape:?}"))
            .collect();
        let _ = write!(
            out,
            "  {:<32} {:<9} {}",
            case.case.workload.label,
            case.case.dtype.to_string(),
            shapes.join(" ")
        );
        if let Some(reason) = case.case.workload.bench_skip_reason {
            let _ = write!(out, "  [manifest skip: {reason}]");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Selection;

    #[test]
    fn dtypes_take_the_short_names_users_type() {
        for (alias, dtype) in [
            ("bf16", DType::BFloat16),
            ("BF16", DType::BFloat16),
            ("fp16", DType::Float16),
            ("f16", DType::Float16),
            ("fp32", DType::Float32),
            ("fp8", DType::Float8E4M3Fn),
            ("float32", DType::Float32),
        ] {
            assert_eq!(parse_dtype(alias), Ok(dtype), "{alias}");
        }
        let err = parse_dtype("bfloat61").unwrap_err();
        assert!(err.contains("did you mean `bfloat16`"), "{err}");
    }

    #[test]
    fn the_listing_names_each_op_then_its_cases_and_their_input_shapes() {
        let norms = bench::select(&Selection {
            ops: vec![],
            families: vec!["normalization".into()],
        })
        .unwrap();
        let listing = list(&norms);
        assert!(
            listing
                .lines()
                .any(|l| l.starts_with("rms_norm (normalization, ")),
            "{listing}"
        );
        assert!(
            listing.contains("x=[2048, 4096] weight=[4096]"),
            "{listing}"
        );
    }
}
