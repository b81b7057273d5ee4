//! `tileops calibrate` (and `cargo run --release --example calibrate`): measures the ceilings of
//! the GPU it runs on and writes a profile YAML.
//!
//! HBM (copy, triad, read-only, write-only over 2 GB arrays, block sizes 128/256/512: the envelope
//! and each mix's fraction), CUDA-core FP32 (FMA chains over ILP 1..16) and tensor cores (cuBLAS
//! fp16, bf16 and tf32 GEMMs at 4096³ and 8192³, burst and sustained); see
//! [`crate::calibrate_gpu`]. The theoretical peaks come from the base profile (default: the
//! built-in profile of this GPU); roofs not measured are carried over from it. The file records the
//! device, driver and date, and is checked by loading it back. It is written atomically, so a
//! failed write leaves the previous profile at that path as it was. Without a GPU it says so and
//! exits with status 2. A closed stdout or stderr ends its output quietly.
//!
//! With `--cpu` it measures the host instead (memory bandwidth and f64/f32 FMA rates on all cores;
//! [`crate::calibrate_cpu`]) and writes a host profile, by default to
//! `target/profiles/host-<model>.yaml`, where the roofline tool finds it.
//!
//! On an emulated device (cuda-emu) it says "emulated", measures nothing and writes no profile (an
//! emulator's timings would be fake figures): it runs each microbenchmark kernel once on a tiny
//! working set and checks its result, plus one tiny cuBLAS GemmEx per dtype
//! ([`crate::calibrate_gpu::check_kernels`]), and exits 0 when every check passes, 1
//! otherwise.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use clap::Parser;

use super::meta;
use crate::calibrate_cpu;
use crate::calibrate_gpu::{self, CalibrateOptions};
use crate::files;
use crate::profile::Profile;
use tileops::Device;
use tileops::registry::RoofKey;

const AFTER_HELP: &str = "\
On an emulated device (cuda-emu): no profile is written; each kernel runs once on a tiny working
set and its result is checked (exit status 0 when all pass, 1 otherwise).

Exit status: 0; 1 when a measurement or the file failed; 2 without a GPU or for bad arguments.";

/// The command line of `calibrate`.
// The field docs are the `--help` text, where `<name>` is a placeholder, not an HTML tag.
#[allow(rustdoc::invalid_html_tags)]
#[derive(Debug, Clone, Parser)]
#[command(
    name = "calibrate",
    version,
    about = "Measure the ceilings of this GPU and write a profile YAML",
    after_help = AFTER_HELP
)]
pub struct CalibrateArgs {
    /// The profile to write [default: target/calibrate/<profile>-<timestamp>.yaml]
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// The profile giving the theoretical peaks and the roofs not measured [default: the built-in
    /// profile that describes this GPU]
    #[arg(long, value_name = "NAME|PATH")]
    pub base: Option<String>,
    /// A short pass to check the setup (noisier numbers)
    #[arg(long)]
    pub quick: bool,
    /// Measure the host CPU (memory bandwidth, f64/f32 FMA rates, all cores) and write a host
    /// profile [default: target/profiles/host-<model>.yaml, where the roofline tool looks]; needs
    /// no GPU
    #[arg(long, conflicts_with = "base")]
    pub cpu: bool,
}

/// A line on stdout. A closed or failing stdout is not worth a panic (`println!` would give one):
/// the profile file, the result that matters, is written before anything is printed. The line may
/// quote a profile or the driver (a device name, a roof key): its hidden characters are escaped.
macro_rules! say {
    ($($arg:tt)*) => {{
        let line = format!($($arg)*);
        let _ = writeln!(std::io::stdout(), "{}", crate::text::for_terminal_text(&line));
    }};
}

/// A line on stderr; its failure is ignored, and its text escaped, for the same reasons.
macro_rules! note {
    ($($arg:tt)*) => {{
        let line = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", crate::text::for_terminal_text(&line));
    }};
}

fn fail(code: u8, message: impl std::fmt::Display) -> ExitCode {
    note!("calibrate: {message}");
    ExitCode::from(code)
}

/// `--cpu`: the host profile, then its roofs.
fn calibrate_host(args: &CalibrateArgs) -> ExitCode {
    let options = if args.quick {
        calibrate_cpu::HostOptions::quick()
    } else {
        calibrate_cpu::HostOptions::default()
    };
    match calibrate_cpu::calibrate_host(args.out.as_deref(), &options, &mut |l| note!("  {l}")) {
        Ok((path, profile)) => {
            print_roofs(&profile, GB_S, (1e9, "GFLOP/s"));
            note!("calibrate: wrote {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => fail(1, e),
    }
}

/// Memory roofs in GB/s, on a GPU and on a host alike.
const GB_S: Scale = (1e9, "GB/s");

/// A scale of the roofs table: the divisor from the profile's unit (bytes/s, FLOP/s) and the
/// unit's name.
type Scale = (f64, &'static str);

/// The roofs of a profile, a line each: theoretical, calibration, effective; memory in `memory`,
/// compute in `compute` (a host's FLOP rates are far below a TFLOP/s, so its table shows GFLOP/s).
fn print_roofs(profile: &Profile, memory: Scale, compute: Scale) {
    say!("roof               theoretical   calibration   effective");
    for (key, roof) in &profile.roofs {
        let (divisor, unit) = if key == RoofKey::HBM.as_str() {
            memory
        } else {
            compute
        };
        say!(
            "{key:<18} {:>11.1}   {:>11.4}   {:>9.1} {unit}",
            roof.theoretical / divisor,
            roof.calibration,
            roof.effective() / divisor,
        );
    }
}

/// On an emulated device: the kernel check, and no profile.
fn check_emulated(device: &Device, out: Option<&std::path::Path>) -> ExitCode {
    note!(
        "calibrate: {device} is emulated: no timing, no profile; checking each microbenchmark \
         kernel once on a tiny working set"
    );
    match calibrate_gpu::check_kernels(device, &mut |line| note!("  ok: {line}")) {
        Ok(passed) => {
            let not_written =
                out.map_or_else(String::new, |p| format!(" ({} not written)", p.display()));
            say!(
                "calibrate: emulated device: {} kernel checks passed; no profile written{not_written}: \
                 an emulator's timings say nothing about a GPU",
                passed.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(1, format!("emulated device: {e}")),
    }
}

/// The calibrate CLI over this process's arguments.
pub fn main() -> ExitCode {
    let argv =
        std::iter::once(std::ffi::OsString::from("calibrate")).chain(std::env::args_os().skip(1));
    match CalibrateArgs::try_parse_from(argv) {
        Ok(args) => main_with(&args),
        // clap prints help and version on stdout (status 0), errors on stderr (status 2).
        Err(e) => {
            let _ = e.print();
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
        }
    }
}

/// [`main`] with the arguments already parsed (`tileops calibrate`).
pub fn main_with(args: &CalibrateArgs) -> ExitCode {
    // The output is checked before minutes of measuring, as `bench --out` is: a path that
    // cannot be written, or the base profile itself, fails now.
    if let Some(out) = &args.out {
        let base = args
            .base
            .as_deref()
            .map(|b| ("--base profile", std::path::Path::new(b)));
        if let Err(e) =
            files::check_not_an_input(out, base).and_then(|()| files::check_writable(out))
        {
            return fail(2, format!("--out {}: {e}", out.display()));
        }
    }
    if args.cpu {
        return calibrate_host(args);
    }
    // A write over `ulimit -f` then fails with an error the tool reports, rather than a SIGXFSZ
    // that kills it.
    files::file_size_limit_as_error();
    let (device, why) = Device::probe_best();
    if !device.is_cuda() {
        return fail(
            2,
            format!(
                "needs a CUDA GPU, and none is usable here ({why}); run it on the GPU machine \
                 (scripts/gpu-check.sh does), or measure this host for the CPU rows with \
                 `calibrate --cpu`"
            ),
        );
    }
    if device.is_emulated() {
        return check_emulated(&device, args.out.as_deref());
    }
    let base = match &args.base {
        Some(name) => Profile::resolve(name),
        None => match Profile::for_device(device.name()) {
            Ok(Some(profile)) => Ok(profile),
            Ok(None) => {
                return fail(
                    2,
                    format!(
                        "no built-in profile describes `{}`; pass --base PROFILE.yaml with its \
                         theoretical peaks",
                        device.name()
                    ),
                );
            }
            Err(e) => Err(e),
        },
    };
    let base = match base {
        Ok(base) => base,
        Err(e) => return fail(2, e),
    };
    let options = if args.quick {
        CalibrateOptions::quick()
    } else {
        CalibrateOptions::default()
    };
    note!(
        "calibrate: {device}, theoretical peaks from {} ({})",
        base.name,
        base.origin
    );
    let writer =
        match calibrate_gpu::calibrate(&device, &base, &options, &mut |line| note!("  {line}")) {
            Ok(writer) => writer,
            Err(e) => return fail(1, e),
        };
    let yaml = match writer.to_yaml() {
        Ok(yaml) => yaml,
        Err(e) => return fail(1, e),
    };
    let path = args.out.clone().unwrap_or_else(|| {
        let stamp = meta::default_out_path(SystemTime::now());
        let stem = stamp
            .file_stem()
            .map_or_else(|| "now".into(), |s| s.to_string_lossy().into_owned());
        PathBuf::from("target/calibrate").join(format!("{}-{stem}.yaml", base.name))
    });
    // Atomically (a temporary file, flushed, renamed over the path; directories created): a
    // failed write leaves the previous profile at that path as it was.
    if let Err(e) = files::write_atomic(&path, yaml.as_bytes()) {
        return fail(1, format!("{}: {e}", path.display()));
    }
    // The file must load like any profile: the same checks (calibration <= 1, ...) apply.
    let profile = match Profile::from_path(&path) {
        Ok(profile) => profile,
        Err(e) => return fail(1, format!("the written profile does not load back: {e}")),
    };
    print_roofs(&profile, GB_S, (1e12, "TFLOP/s"));
    note!("calibrate: wrote {}", path.display());
    ExitCode::SUCCESS
}
