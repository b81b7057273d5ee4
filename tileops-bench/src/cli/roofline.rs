//! `tileops roofline` (and `cargo run --example roofline`): prices a bench run against a GPU
//! profile.
//!
//! Per record: SOL time, efficiency, bound and verdict (`fail`, `anomaly`, `latency_bound`,
//! `at_ceiling`, `below`, or blank with the reason), then a summary. Without `--profile`, each
//! record is priced against the profile that describes its device: a built-in GPU profile, or a
//! host profile `calibrate --cpu` wrote to `target/profiles/host-*.yaml` (the CPU backend's rows); a
//! record from a host no profile describes comes out blank with that reason. With `--torch`
//! (PyTorch rows: `impl: torch`, `torch-compile`, written by `scripts/torch_baseline.py`), each
//! tileops row shows its strongest PyTorch row and the time ratio.
//!
//! `--compare OTHER` (or `--baseline NAME`, a run saved by `--save-baseline NAME`) matches the
//! rows of two runs and calls each faster, slower or same from the 95% bootstrap interval of the
//! ratio of medians ([`crate::report::RatioInterval`]); `--fail-on-regression PCT` turns a
//! row slower by more than PCT percent with that confidence into exit status 4.
//!
//! A records file that stopped before its last row (`meta.partial`) is reported as what it is.
//! Inputs are regular files of bounded size (2 GiB of records, 16 MiB of profile); a FIFO, a
//! device or a directory is refused at once, never waited on. The chart is written atomically. A
//! closed stdout (`| head`) ends the report quietly.

use std::io::{BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

use super::baseline_path;
use crate::calibrate_cpu as host_profiles;
use crate::files;
use crate::html;
use crate::profile::{Profile, ProfileError};
use crate::records::{RecordsError, Run};
use crate::report::{Comparison, ProfileChoice, Report, Verdict};
use crate::svg::{self, SvgError};
use crate::text::{for_terminal, for_terminal_text};

const AFTER_HELP: &str = "\
A records file that is partial (bench was interrupted: `meta.partial`) is reported as such, on
stderr and at the top of the report. Inputs must be regular files (records at most 2 GiB,
profiles at most 16 MiB). The chart is replaced atomically: a failed write leaves the old one.
Baselines live in target/tileops/baselines/NAME.json ($CARGO_TARGET_DIR/tileops/baselines when
that is set).

Exit status, bits that add up: 0 all well; 1 when any record is `fail` (an implied rate above a
theoretical peak); 2 for bad input or an output that could not be written; 4 when
--fail-on-regression finds a row slower beyond its threshold. So 3 is a `fail` and an output
error, 5 a `fail` and a regression.";

/// The size of a comparison (rows of the current run) from which its progress is shown: a
/// bootstrap per row takes ~1 ms, so from here it takes seconds.
const COMPARE_PROGRESS_ROWS: usize = 2000;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Markdown tables.
    #[default]
    #[value(name = "md", alias = "markdown")]
    Markdown,
    /// CSV.
    Csv,
    /// JSON.
    Json,
}

/// The command line of `roofline`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "roofline",
    version,
    about = "Price a bench run against a GPU profile: SOL time, efficiency, bound and verdict per row",
    after_help = AFTER_HELP
)]
pub struct RooflineArgs {
    /// A records file written by bench
    #[arg(value_name = "RECORDS.json")]
    pub records: PathBuf,
    /// Price every record against this profile (built in: h200, h100, h20_3e; or a profile YAML)
    /// [default: each record against the profile matching its device: the built-in ones, and the
    /// host profiles `calibrate --cpu` wrote (target/profiles/host-*.yaml)]
    #[arg(long, value_name = "NAME|PATH")]
    pub profile: Option<String>,
    /// Output format on stdout; with a comparison, csv prints the comparison table
    #[arg(long, value_enum, default_value_t = Format::Markdown)]
    pub format: Format,
    /// Also write a log-log roofline chart
    #[arg(long, value_name = "CHART.svg")]
    pub svg: Option<PathBuf>,
    /// Also write one self-contained page: summary, sortable table and chart
    #[arg(long, value_name = "REPORT.html")]
    pub html: Option<PathBuf>,
    /// Compare with another run: per-row time ratio with its bootstrap interval, and faster /
    /// slower / same
    #[arg(long, value_name = "OTHER.json", conflicts_with = "baseline")]
    pub compare: Option<PathBuf>,
    /// Compare with the baseline saved under this name (by --save-baseline)
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,
    /// Save RECORDS as the named baseline (target/tileops/baselines/NAME.json)
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// Exit with status 4 when a compared row is slower by more than PCT percent with 95%
    /// confidence
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub fail_on_regression: Option<f64>,
    /// PyTorch rows (torch_baseline.py's output; repeatable): each tileops row shows its fastest
    /// PyTorch row on the same device and the time ratio
    #[arg(long = "torch", value_name = "RECORDS.json")]
    pub torch: Vec<PathBuf>,
    /// A run benched on the emulated device (repeatable): each row without a kernel ledger of its
    /// own takes that run's ledger of the same op/workload/dtype, so a GPU-timed row shows its
    /// measured efficiency beside the ledger's ceiling and limiter
    #[arg(long = "ledger", value_name = "RECORDS.json")]
    pub ledger: Vec<PathBuf>,
    /// Also write the kernel ledger document (tileops/docs/kernels.md): every entry point's SASS
    /// ledger and every row's ledger priced against the profile (needs --profile and a run
    /// benched on the emulated device)
    #[arg(long, value_name = "KERNELS.md", requires = "profile")]
    pub kernels_md: Option<PathBuf>,
    /// With --kernels-md: the launch log of the emulator's traffic pass (scripts/emu-check.sh
    /// writes target/emu/ledger-C.jsonl), for each entry's coalescing and bank-conflict figures
    #[arg(long, value_name = "LOG.jsonl", requires = "kernels_md")]
    pub traffic_log: Option<PathBuf>,
}

/// A percentage: finite, not negative.
fn parse_percent(text: &str) -> Result<f64, String> {
    match text.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("a percentage (0 or more, like `5`), not `{text}`")),
    }
}

/// Why the tool stopped without a report.
#[derive(Debug)]
pub enum CliError {
    /// `--help` or `--version`: the text, for stdout.
    Help(String),
    /// A command line it does not understand.
    Usage(String),
    /// A records file it cannot trust.
    Records(RecordsError),
    /// A profile it cannot find or trust.
    Profile(ProfileError),
    /// The chart could not be drawn.
    Svg(SvgError),
    /// An output could not be written.
    Io(String, std::io::Error),
}

/// The message for a terminal: a records or profile error may quote the file (a field, a key the
/// parser did not expect), so its hidden characters are escaped ([`for_terminal_text`]).
impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            CliError::Help(text) | CliError::Usage(text) => return f.write_str(text),
            CliError::Records(e) => e.to_string(),
            CliError::Profile(e) => e.to_string(),
            CliError::Svg(e) => e.to_string(),
            CliError::Io(what, e) => format!("{what}: {e}"),
        };
        f.write_str(&for_terminal_text(&text))
    }
}

impl std::error::Error for CliError {}

/// Parses the arguments after the program name.
///
/// # Errors
/// [`CliError::Usage`] for a missing or repeated records file, an unknown option, or an option
/// without its value (clap's message, with its suggestion); [`CliError::Help`] for `--help` and
/// `--version`.
///
/// ```
/// use tileops_bench::cli::roofline::parse_args;
/// let args = parse_args(["run.json", "--baseline", "main", "--fail-on-regression", "5"]).unwrap();
/// assert_eq!((args.baseline.as_deref(), args.fail_on_regression), (Some("main"), Some(5.0)));
/// assert!(parse_args(["run.json", "--compare", "a.json", "--baseline", "main"]).is_err());
/// ```
pub fn parse_args<I, T>(args: I) -> Result<RooflineArgs, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::error::ErrorKind;
    let argv = std::iter::once(std::ffi::OsString::from("roofline"))
        .chain(args.into_iter().map(Into::into));
    RooflineArgs::try_parse_from(argv).map_err(|e| match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            CliError::Help(e.render().to_string())
        }
        _ => CliError::Usage(e.render().to_string()),
    })
}

/// The exit status of a finished report, bits that add up: 1 for a `fail` verdict, 2 for an
/// output that could not be written, 4 for a regression beyond `--fail-on-regression`.
///
/// ```
/// use tileops_bench::cli::roofline::exit_status;
/// assert_eq!(exit_status(false, false, false), 0);
/// assert_eq!(exit_status(true, true, false), 3);
/// assert_eq!(exit_status(true, false, true), 5);
/// ```
pub fn exit_status(failed: bool, output_error: bool, regressed: bool) -> u8 {
    u8::from(failed) | (u8::from(output_error) << 1) | (u8::from(regressed) << 2)
}

/// Says on `err` that a records file is partial, when it is.
fn note_partial(err: &mut dyn Write, path: &Path, run: &Run) {
    if let Some(partial) = &run.meta.partial {
        let _ = writeln!(
            err,
            "roofline: {} is a partial run: {}; {} of the {} planned rows are in the file",
            path.display(),
            for_terminal(&partial.reason),
            run.records.len(),
            partial.planned_rows
        );
    }
}

/// Writes the report (and the comparison) to `out` in `format`, buffered; the JSON is streamed
/// row by row.
fn write_report(
    out: &mut dyn Write,
    format: Format,
    report: &Report,
    comparison: Option<&Comparison>,
) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 16, out);
    match format {
        Format::Markdown => {
            out.write_all(report.to_markdown().as_bytes())?;
            if let Some(c) = comparison {
                out.write_all(b"\n")?;
                out.write_all(c.to_markdown().as_bytes())?;
            }
        }
        Format::Csv => {
            let text = comparison.map_or_else(|| report.to_csv(), Comparison::to_csv);
            out.write_all(text.as_bytes())?;
        }
        Format::Json => report.write_json(&mut out, comparison)?,
    }
    out.flush()
}

/// Where the host profiles `calibrate --cpu` wrote are looked for: its own directory
/// ([`host_profiles::profiles_dir`]: `$CARGO_TARGET_DIR/profiles` or `target/profiles`), and beside
/// the records (their directory, and `../profiles` from it: a run in `target/bench/` finds
/// `target/profiles/` wherever the tool is run from). Each directory once.
fn host_profile_dirs(records: &Path) -> Vec<PathBuf> {
    let beside = records.parent().filter(|p| !p.as_os_str().is_empty());
    let mut dirs = vec![host_profiles::profiles_dir()];
    if let Some(dir) = beside {
        dirs.extend([dir.join("../profiles"), dir.to_owned()]);
    }
    let mut seen = Vec::new();
    dirs.retain(|dir| {
        let id = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        let new = !seen.contains(&id);
        seen.push(id);
        new
    });
    dirs
}

/// Refuses, before anything is read or written, an output (`--svg`, `--html`, the baseline
/// `--save-baseline` writes) that is the same file as an input: the records, the run compared
/// with, a `--torch` file or the profile.
fn check_outputs_are_not_inputs(
    args: &RooflineArgs,
    other: Option<&Path>,
    save_to: Option<&Path>,
) -> Result<(), CliError> {
    let mut inputs: Vec<(&str, &Path)> = vec![("records", &args.records)];
    inputs.extend(other.map(|p| ("compared run's", p)));
    inputs.extend(args.torch.iter().map(|p| ("PyTorch records", p.as_path())));
    inputs.extend(args.ledger.iter().map(|p| ("ledger records", p.as_path())));
    inputs.extend(
        args.traffic_log
            .iter()
            .map(|p| ("traffic log", p.as_path())),
    );
    // A built-in profile's name is not a file; a path is.
    inputs.extend(args.profile.as_deref().map(|p| ("profile", Path::new(p))));
    let outputs = [
        ("--svg", args.svg.as_deref()),
        ("--html", args.html.as_deref()),
        ("--kernels-md", args.kernels_md.as_deref()),
        ("--save-baseline", save_to),
    ];
    for (option, output) in outputs {
        if let Some(output) = output {
            files::check_not_an_input(output, inputs.iter().copied())
                .map_err(|e| CliError::Usage(format!("{option} {}: {e}", output.display())))?;
        }
    }
    Ok(())
}

/// Runs the tool from its arguments (after the program name): see [`run_with`].
///
/// # Errors
/// [`CliError`] for bad arguments, records or profiles (exit status 2), before any output.
pub fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> Result<u8, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    run_with(&parse_args(args)?, out, err)
}

/// Runs the tool: the report goes to `out`, notes to `err`. Returns the exit status (see
/// [`exit_status`]): an output that cannot be written is said on `err` and counted in the status,
/// after every other output has been tried and the verdicts counted. A reader that closes `out`
/// early (`| head`) ends the report quietly: no error.
///
/// # Errors
/// [`CliError`] for bad arguments, records or profiles (exit status 2), before any output.
pub fn run_with(
    args: &RooflineArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, CliError> {
    if args.fail_on_regression.is_some() && args.compare.is_none() && args.baseline.is_none() {
        return Err(CliError::Usage(
            "--fail-on-regression needs a run to compare with: --compare OTHER.json or \
             --baseline NAME"
                .into(),
        ));
    }
    let name_path = |name: &str| baseline_path(name).map_err(CliError::Usage);
    let other_path = match (&args.compare, &args.baseline) {
        (Some(path), _) => Some(path.clone()),
        (None, Some(name)) => Some(name_path(name)?),
        (None, None) => None,
    };
    let save_to = args.save_baseline.as_deref().map(name_path).transpose()?;
    check_outputs_are_not_inputs(args, other_path.as_deref(), save_to.as_deref())?;
    let mut run = Run::load(&args.records).map_err(CliError::Records)?;
    let mut output_errors = Vec::new();
    if let Some(path) = &save_to {
        match run.save(path) {
            Ok(()) => {
                let _ = writeln!(err, "roofline: saved the baseline {}", path.display());
            }
            Err(e) => output_errors.push(CliError::Records(e)),
        }
    }
    // The report reads neither the inputs nor the params of a record; on a large run they are
    // about a third of its memory, which the report's rows can then reuse. The raw samples are
    // only for a comparison.
    for record in &mut run.records {
        record.params.clear();
        record.inputs = Vec::new();
        if other_path.is_none() {
            record.samples_ms = Vec::new();
        }
    }
    note_partial(err, &args.records, &run);
    let fixed = args
        .profile
        .as_deref()
        .map(Profile::resolve)
        .transpose()
        .map_err(CliError::Profile)?;
    let builtins = match fixed {
        Some(_) => Vec::new(),
        None => {
            let mut all = Profile::builtins().map_err(CliError::Profile)?;
            for dir in host_profile_dirs(&args.records) {
                all.extend(host_profiles::discover(&dir).map_err(CliError::Profile)?);
            }
            all
        }
    };
    let torch = args
        .torch
        .iter()
        .map(Run::load)
        .collect::<Result<Vec<Run>, _>>()
        .map_err(CliError::Records)?;
    let ledgers = args
        .ledger
        .iter()
        .map(Run::load)
        .collect::<Result<Vec<Run>, _>>()
        .map_err(CliError::Records)?;
    let choice = match &fixed {
        Some(p) => ProfileChoice::Fixed(p),
        None => ProfileChoice::ByDevice(&builtins),
    };
    let comparison = match &other_path {
        Some(path) => {
            let other = Run::load(path).map_err(CliError::Records)?;
            note_partial(err, path, &other);
            // A large comparison says how far it is, a line per tenth (never a line per row).
            let mut shown = 0;
            let mut progress = |done: usize, total: usize| {
                let tenth = done * 10 / total.max(1);
                if total >= COMPARE_PROGRESS_ROWS && tenth > shown {
                    shown = tenth;
                    let _ = writeln!(err, "roofline: comparing: {done} of {total} rows");
                }
            };
            Some(Comparison::build_with_progress(&run, &other, &mut progress))
        }
        None => None,
    };
    if let (Some(path), Some(profile)) = (&args.kernels_md, &fixed) {
        match write_kernels_md(&run, profile, path, args.traffic_log.as_deref()) {
            Err(e) => output_errors.push(e),
            Ok(()) => {
                let _ = writeln!(err, "roofline: wrote {}", path.display());
            }
        }
    }
    let report = Report::build_with_ledgers(&run, choice, &torch, &ledgers);
    // The run's records are not needed past here; a large run's memory goes back before the
    // report is written.
    drop(run);

    match write_report(out, args.format, &report, comparison.as_ref()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {}
        Err(e) => output_errors.push(CliError::Io("stdout".into(), e)),
        Ok(()) => {}
    }

    if args.svg.is_some() || args.html.is_some() {
        // The chart shows one profile's roofs: the chosen one, or the one describing the run's device.
        let profile = match &fixed {
            Some(p) => Some(p),
            None => Profile::select(&report.meta.device.name, &builtins)
                .ok()
                .flatten(),
        };
        match svg::render(&report, profile) {
            Err(e) => output_errors.push(CliError::Svg(e)),
            Ok(chart) => {
                if let Some(path) = &args.svg {
                    match chart.save(path) {
                        Err(e) => output_errors.push(CliError::Io(path.display().to_string(), e)),
                        Ok(()) => {
                            let _ = writeln!(
                                err,
                                "roofline: wrote {} ({} of {} records plotted)",
                                path.display(),
                                chart.plotted,
                                report.rows.len()
                            );
                        }
                    }
                }
                if let Some(path) = &args.html {
                    let page = html::render(&report, Some(&chart));
                    match files::write_atomic(path, page.as_bytes()) {
                        Err(e) => output_errors.push(CliError::Io(path.display().to_string(), e)),
                        Ok(()) => {
                            let _ = writeln!(err, "roofline: wrote {}", path.display());
                        }
                    }
                }
            }
        }
    }

    if let Some(n) = report.summary.blank.get("emulated") {
        let _ = writeln!(
            err,
            "roofline: {n} record(s) ran on an emulated device: blank (emulated device: no timing)"
        );
    }
    let ledgered = report.rows.iter().filter(|r| r.pipes.is_some()).count();
    if ledgered > 0 {
        let priced = report
            .rows
            .iter()
            .filter(|r| matches!(r.pipes, Some(Ok(_))))
            .count();
        let _ = writeln!(
            err,
            "roofline: {ledgered} record(s) carry a kernel ledger, {priced} priced against the \
             profile's pipes: ceiling and limiter from the ledger, not measured"
        );
    }
    if let Some(n) = report.summary.blank.get("no_profile")
        && report.meta.device.name.starts_with("cpu")
    {
        let _ = writeln!(
            err,
            "roofline: {n} record(s) have no profile of their device; the CPU rows of this host \
             are priced once `tileops calibrate --cpu` (or `cargo run --release --example \
             calibrate -- --cpu`) has measured it into {}",
            host_profiles::profiles_dir().display()
        );
    }
    let failed = report.summary.count(Verdict::Fail);
    if failed > 0 {
        let _ = writeln!(
            err,
            "roofline: {failed} record(s) fail: an implied rate above a theoretical peak is \
             impossible; fix the formulas (see the reason column)"
        );
    }
    let mut regressed = false;
    if let (Some(pct), Some(c)) = (args.fail_on_regression, &comparison) {
        let slower = c.regressions(pct);
        regressed = !slower.is_empty();
        for row in &slower {
            let interval = row.interval.map_or_else(
                || "from the spreads".to_owned(),
                |i| format!("95% interval {:.3}–{:.3}", i.low, i.high),
            );
            let _ = writeln!(
                err,
                "roofline: regression: {} is {:.1}% slower ({interval}), beyond --fail-on-regression {pct}",
                for_terminal(&row.key.to_string()),
                (row.time_ratio().unwrap_or(f64::NAN) - 1.0) * 100.0
            );
        }
        let _ = writeln!(
            err,
            "roofline: --fail-on-regression {pct}: {} of {} compared rows slower beyond it",
            slower.len(),
            c.rows.iter().filter(|r| r.call().is_some()).count()
        );
    }
    for e in &output_errors {
        let _ = writeln!(err, "roofline: {e}");
    }
    Ok(exit_status(
        failed > 0,
        !output_errors.is_empty(),
        regressed,
    ))
}

/// `--kernels-md`: the kernel ledger document of `run` priced against `profile`, with the
/// traffic pass's launch log when given.
fn write_kernels_md(
    run: &Run,
    profile: &Profile,
    path: &Path,
    traffic_log: Option<&Path>,
) -> Result<(), CliError> {
    let sass = crate::ledger::Ledger::builtin()
        .map_err(|e| CliError::Usage(format!("--kernels-md: {e}")))?;
    let traffic = traffic_log
        .map(|p| {
            files::read_regular(p, crate::records::MAX_FILE_BYTES)
                .map_err(|e| CliError::Io(p.display().to_string(), e))
                .and_then(|bytes| {
                    String::from_utf8(bytes).map_err(|_| {
                        CliError::Usage(format!("{}: the traffic log is not UTF-8", p.display()))
                    })
                })
        })
        .transpose()?;
    let doc = crate::kernel_doc::render(
        run,
        profile,
        sass,
        crate::kernel_doc::CHANGES,
        traffic.as_deref(),
        // The backtest's inputs live in the repository, not in a run: the committed document
        // (tests/it/bench_all.rs) renders it with them.
        None,
    )
    .map_err(|e| CliError::Usage(format!("--traffic-log: {e}")))?;
    files::write_atomic(path, doc.as_bytes())
        .map_err(|e| CliError::Io(path.display().to_string(), e))
}

/// The roofline CLI over this process's arguments.
pub fn main() -> ExitCode {
    match parse_args(std::env::args_os().skip(1)) {
        Ok(args) => main_with(&args),
        Err(e) => report_error(e),
    }
}

/// [`main`] with the arguments already parsed (`tileops roofline`).
pub fn main_with(args: &RooflineArgs) -> ExitCode {
    // A write over `ulimit -f` then fails with an error the tool reports, rather than a SIGXFSZ
    // that kills it.
    files::file_size_limit_as_error();
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    match run_with(args, &mut stdout, &mut stderr) {
        Ok(code) => ExitCode::from(code),
        Err(e) => report_error(e),
    }
}

/// Prints an error (help on stdout, the rest on stderr); its status is 2 (0 for help).
fn report_error(e: CliError) -> ExitCode {
    match e {
        CliError::Help(text) => match std::io::stdout().write_all(text.as_bytes()) {
            Err(e) if e.kind() != ErrorKind::BrokenPipe => {
                let _ = writeln!(std::io::stderr(), "roofline: writing the usage: {e}");
                ExitCode::from(2)
            }
            _ => ExitCode::SUCCESS,
        },
        // clap's message carries its own `error:` prefix and usage line.
        CliError::Usage(text) if text.starts_with("error:") => {
            let _ = std::io::stderr().write_all(text.as_bytes());
            ExitCode::from(2)
        }
        e => {
            let _ = writeln!(std::io::stderr(), "roofline: {e}");
            ExitCode::from(2)
        }
    }
}
