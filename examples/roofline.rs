//! The roofline tool: prices a bench run against a GPU profile.
//!
//! ```text
//! cargo run --example roofline -- RECORDS.json [--profile NAME|PATH] [--format md|csv|json]
//!                                             [--svg CHART.svg] [--compare OTHER.json]
//!                                             [--baseline BASELINE.json]... [--html REPORT.html]
//! ```
//!
//! Per record: SOL time, efficiency, bound and verdict (`fail`, `anomaly`, `latency_bound`,
//! `at_ceiling`, `below`, or blank with the reason), then a summary. Without `--profile`, each record
//! is priced against the profile that describes its device: a built-in GPU profile, or a host profile
//! `calibrate --cpu` wrote to `target/profiles/host-*.yaml` (the CPU backend's rows); a record from
//! a host no profile describes comes out blank with that reason. When the records file or a
//! `--baseline` file holds baseline rows (`impl: torch`, `torch-compile`, written by
//! `scripts/torch_baseline.py`), each tileops row shows its strongest baseline and the time ratio.
//!
//! A records file that stopped before its last row (`meta.partial`: bench_all interrupted) is
//! reported as what it is: a line on stderr and one at the top of the markdown report (the JSON
//! report carries `meta.partial`). Inputs are regular files of bounded size (2 GiB of records,
//! 16 MiB of profile); a FIFO, a device or a directory is refused at once, never waited on. The
//! chart is written atomically. A closed stdout (`| head`) ends the report quietly.
//!
//! Exit status: 0; 1 when any record is `fail` (an implied rate above a theoretical peak: a formula
//! error); 2 for bad input, or when an output (stdout, the chart) could not be written; 3 when both
//! a record is `fail` and an output could not be written, so that neither hides the other.

use std::io::{BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tileops::perf::calibrate_cpu as host_profiles;
use tileops::perf::files;
use tileops::perf::html;
use tileops::perf::profile::{Profile, ProfileError};
use tileops::perf::records::{RecordsError, Run};
use tileops::perf::report::{Comparison, ProfileChoice, Report, Verdict};
use tileops::perf::svg::{self, SvgError};

const USAGE: &str = "\
usage: roofline RECORDS.json [--profile NAME|PATH] [--format md|csv|json] [--svg CHART.svg] [--compare OTHER.json]
                [--baseline BASELINE.json]... [--html REPORT.html]

  RECORDS.json         a records file written by bench_all
  --profile NAME|PATH  price every record against this profile (built in: h200, h100, h20_3e; or a
                       profile YAML); records from another device come out blank with the reason.
                       Default: each record against the profile matching its device: the built-in
                       ones, and the host profiles `calibrate --cpu` wrote (target/profiles/host-*.yaml)
  --format md|csv|json output format on stdout (default md). With --compare, csv prints the
                       comparison table; md and json print both.
  --svg CHART.svg      also write a log-log roofline chart
  --html REPORT.html   also write one self-contained page: summary, sortable table and chart
  --compare OTHER.json compare with another run: per-row time ratio, and faster / slower / same
                       from the two runs' p10-p90 spreads
  --baseline FILE      baseline rows (torch_baseline.py's output; repeatable): each tileops row
                       shows its fastest baseline on the same device and the time ratio

A records file that is partial (bench_all was interrupted: `meta.partial`) is reported as such,
on stderr and at the top of the report. Inputs must be regular files (records at most 2 GiB,
profiles at most 16 MiB). The chart is replaced atomically: a failed write leaves the old one.

exit status: 0; 1 when any record is `fail`; 2 for bad input or an output that could not be
written; 3 when a record is `fail` and an output could not be written";

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Markdown tables.
    Markdown,
    /// CSV.
    Csv,
    /// JSON.
    Json,
}

/// Parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// The records file.
    pub records: PathBuf,
    /// `--profile`.
    pub profile: Option<String>,
    /// `--format`.
    pub format: Format,
    /// `--svg`.
    pub svg: Option<PathBuf>,
    /// `--compare`.
    pub compare: Option<PathBuf>,
    /// `--baseline`, in order.
    pub baselines: Vec<PathBuf>,
    /// `--html`.
    pub html: Option<PathBuf>,
}

/// Why the tool stopped without a report.
#[derive(Debug)]
pub enum CliError {
    /// `--help`: not an error, the usage goes to stdout.
    Help,
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

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Help => f.write_str(USAGE),
            CliError::Usage(message) => write!(f, "{message}\n\n{USAGE}"),
            CliError::Records(e) => write!(f, "{e}"),
            CliError::Profile(e) => write!(f, "{e}"),
            CliError::Svg(e) => write!(f, "{e}"),
            CliError::Io(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for CliError {}

/// Parses the arguments after the program name.
///
/// # Errors
/// [`CliError::Usage`] for a missing or repeated records file, an unknown option, or an option
/// without its value; [`CliError::Help`] for `--help`.
pub fn parse_args(args: &[String]) -> Result<Args, CliError> {
    let mut records = None;
    let (mut profile, mut format, mut svg, mut compare) = (None, Format::Markdown, None, None);
    let mut baselines = Vec::new();
    let mut html = None;
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
        match flag {
            "-h" | "--help" => return Err(CliError::Help),
            "--profile" => profile = Some(value("--profile")?),
            "--svg" => svg = Some(PathBuf::from(value("--svg")?)),
            "--compare" => compare = Some(PathBuf::from(value("--compare")?)),
            "--baseline" => baselines.push(PathBuf::from(value("--baseline")?)),
            "--html" => html = Some(PathBuf::from(value("--html")?)),
            "--format" => {
                format = match value("--format")?.as_str() {
                    "md" | "markdown" => Format::Markdown,
                    "csv" => Format::Csv,
                    "json" => Format::Json,
                    other => {
                        return Err(CliError::Usage(format!(
                            "unknown format `{other}`: use md, csv or json"
                        )));
                    }
                }
            }
            other if other.starts_with('-') && other.len() > 1 => {
                return Err(CliError::Usage(format!("unknown option `{other}`")));
            }
            path => {
                if records.replace(PathBuf::from(path)).is_some() {
                    return Err(CliError::Usage(format!(
                        "one records file, please (`{path}` is a second)"
                    )));
                }
            }
        }
    }
    let records = records.ok_or_else(|| CliError::Usage("no records file given".into()))?;
    Ok(Args {
        records,
        profile,
        format,
        svg,
        compare,
        baselines,
        html,
    })
}

/// The exit status of a finished report: 1 for a `fail` verdict, 2 for an output that could not be
/// written, 3 for both; 0 otherwise.
pub fn exit_status(failed: bool, output_error: bool) -> u8 {
    u8::from(failed) | (u8::from(output_error) << 1)
}

/// Says on `err` that a records file is partial, when it is.
fn note_partial(err: &mut dyn Write, path: &Path, run: &Run) {
    if let Some(partial) = &run.meta.partial {
        let _ = writeln!(
            err,
            "roofline: {} is a partial run: {}; {} of the {} planned rows are in the file",
            path.display(),
            partial.reason,
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

/// Runs the tool: the report goes to `out`, notes to `err`. Returns the exit status (see
/// [`exit_status`]): an output that cannot be written is said on `err` and counted in the status,
/// after every other output has been tried and the verdicts counted. A reader that closes `out`
/// early (`| head`) ends the report quietly: no error.
///
/// # Errors
/// [`CliError`] for bad arguments, records or profiles (exit status 2), before any output.
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> Result<u8, CliError> {
    let args = parse_args(args)?;
    let mut run = Run::load(&args.records).map_err(CliError::Records)?;
    // The report reads neither the inputs nor the params of a record; on a large run they are
    // about a third of its memory, which the report's rows can then reuse.
    for record in &mut run.records {
        record.params.clear();
        record.inputs = Vec::new();
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
            all.extend(
                host_profiles::discover(&host_profiles::profiles_dir())
                    .map_err(CliError::Profile)?,
            );
            all
        }
    };
    let baselines = args
        .baselines
        .iter()
        .map(Run::load)
        .collect::<Result<Vec<Run>, _>>()
        .map_err(CliError::Records)?;
    let choice = match &fixed {
        Some(p) => ProfileChoice::Fixed(p),
        None => ProfileChoice::ByDevice(&builtins),
    };
    let comparison = match &args.compare {
        Some(path) => {
            let other = Run::load(path).map_err(CliError::Records)?;
            note_partial(err, path, &other);
            Some(Comparison::build(&run, &other))
        }
        None => None,
    };
    let report = Report::build_with_baselines(&run, choice, &baselines);
    // The run's records are not needed past here; a large run's memory goes back before the
    // report is written.
    drop(run);

    let mut output_errors = Vec::new();
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
    let failed = report.summary.count(Verdict::Fail);
    if failed > 0 {
        let _ = writeln!(
            err,
            "roofline: {failed} record(s) fail: an implied rate above a theoretical peak is \
             impossible; \
             fix the formulas (see the reason column)"
        );
    }
    for e in &output_errors {
        let _ = writeln!(err, "roofline: {e}");
    }
    Ok(exit_status(failed > 0, !output_errors.is_empty()))
}

fn main() -> ExitCode {
    // A write over `ulimit -f` then fails with an error the tool reports, rather than a SIGXFSZ
    // that kills it.
    files::file_size_limit_as_error();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    match run(&args, &mut stdout, &mut stderr) {
        Ok(code) => ExitCode::from(code),
        Err(CliError::Help) => match writeln!(stdout, "{USAGE}") {
            Err(e) if e.kind() != ErrorKind::BrokenPipe => {
                let _ = writeln!(stderr, "roofline: writing the usage: {e}");
                ExitCode::from(2)
            }
            _ => ExitCode::SUCCESS,
        },
        Err(e) => {
            let _ = writeln!(stderr, "roofline: {e}");
            ExitCode::from(2)
        }
    }
}
