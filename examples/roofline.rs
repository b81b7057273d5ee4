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
//! Exit status: 0, or 1 when any record
//! is `fail` (an implied rate above a theoretical peak: a formula error), or 2 for bad input.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use tileops::perf::calibrate_cpu as host_profiles;
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

exit status: 0; 1 when any record is `fail`; 2 for bad input";

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

/// Runs the tool: the report goes to `out`, notes to `err`. Returns the exit status: 0, or 1 when
/// a record is `fail`.
///
/// # Errors
/// [`CliError`] for bad arguments, records, profiles or an unwritable output (exit status 2).
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> Result<u8, CliError> {
    let args = parse_args(args)?;
    let run = Run::load(&args.records).map_err(CliError::Records)?;
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
    let report = Report::build_with_baselines(&run, choice, &baselines);
    let comparison = match &args.compare {
        Some(path) => Some(Comparison::build(
            &run,
            &Run::load(path).map_err(CliError::Records)?,
        )),
        None => None,
    };

    let text = match args.format {
        Format::Markdown => {
            let mut text = report.to_markdown();
            if let Some(c) = &comparison {
                text.push('\n');
                text.push_str(&c.to_markdown());
            }
            text
        }
        Format::Csv => comparison
            .as_ref()
            .map_or_else(|| report.to_csv(), |c| c.to_csv()),
        Format::Json => {
            let mut value = report.to_json();
            if let (Some(c), Some(object)) = (&comparison, value.as_object_mut()) {
                object.insert("comparison".into(), c.to_json());
            }
            format!("{value:#}\n")
        }
    };
    out.write_all(text.as_bytes())
        .map_err(|e| CliError::Io("stdout".into(), e))?;

    if args.svg.is_some() || args.html.is_some() {
        // The chart shows one profile's roofs: the chosen one, or the one describing the run's device.
        let profile = match &fixed {
            Some(p) => Some(p),
            None => Profile::select(&run.meta.device.name, &builtins)
                .ok()
                .flatten(),
        };
        let chart = svg::render(&report, profile).map_err(CliError::Svg)?;
        if let Some(path) = &args.svg {
            std::fs::write(path, &chart.svg)
                .map_err(|e| CliError::Io(path.display().to_string(), e))?;
            let _ = writeln!(
                err,
                "roofline: wrote {} ({} of {} records plotted)",
                path.display(),
                chart.plotted,
                report.rows.len()
            );
        }
        if let Some(path) = &args.html {
            write_atomically(path, &html::render(&report, Some(&chart)))
                .map_err(|e| CliError::Io(path.display().to_string(), e))?;
            let _ = writeln!(err, "roofline: wrote {}", path.display());
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
        return Ok(1);
    }
    Ok(0)
}

/// Writes `text` to a temporary file beside `path`, then renames it over `path`: a reader never
/// sees half a page. (Small on purpose: a shared helper can replace it.)
fn write_atomically(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_os_string());
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(&name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(
        &args,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    ) {
        Ok(code) => ExitCode::from(code),
        Err(CliError::Help) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("roofline: {e}");
            ExitCode::from(2)
        }
    }
}
