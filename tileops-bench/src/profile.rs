//! GPU profiles: the ceilings a record is priced against.
//!
//! A profile (`profiles/<gpu>.yaml`) stores, per roof, the `theoretical` peak from the spec sheet
//! and the `calibration` a microbenchmark measured (optionally `calibration_burst` and
//! `calibration_mixes`). The effective ceiling, `theoretical × calibration`, is computed by
//! [`Roof::effective`] and never stored, so a profile cannot disagree with itself. Roofs:
//! [`ROOF_KEYS`] (`hbm` in bytes/s, the others in FLOP/s).
//!
//! The profiles shipped with the crate are embedded in it ([`Profile::builtin`]), so a downstream
//! user has them without a checkout; any other file loads with [`Profile::from_path`]. A bad profile
//! (YAML syntax, an unknown key, a non-positive number, a calibration above 1) is an error carrying
//! the file, line and column.
//!
//! ```
//! use tileops_bench::profile::Profile;
//!
//! let h200 = Profile::builtin("h200")?;
//! let hbm = h200.hbm();
//! assert_eq!(hbm.theoretical, 4800e9);
//! assert!((hbm.effective() - 4502.4e9).abs() < 1e3);
//! let bf16 = h200.roof("tensor_core.bf16").expect("the H200 profile has bf16");
//! assert!((bf16.effective() / 1e12 - 700.3).abs() < 0.05);
//!
//! // Selection by the CUDA device name.
//! let found = Profile::for_device("NVIDIA H200")?;
//! assert_eq!(found.map(|p| p.name), Some("h200".to_owned()));
//! assert!(Profile::for_device("NVIDIA H200 NVL")?.is_none());
//! # Ok::<(), tileops_bench::profile::ProfileError>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::files;
use super::records::{ComputeCapability, DeviceInfo};
use tileops::registry::RoofKey;

/// The largest profile file [`Profile::from_path`] reads: 16 MiB, thousands of times a real
/// profile (a bound, so that a wrong path, a device, cannot make it read without end).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Every roof key a profile may define, as the file spells them: the names of [`RoofKey::ALL`]
/// (`hbm` in bytes/s; on a host profile its DRAM), then the compute roofs (FLOP/s): a GPU's, then
/// a host's FMA rates (`cpu.fp64`, `cpu.fp32`).
pub const ROOF_KEYS: [&str; RoofKey::ALL.len()] = {
    let mut keys = [""; RoofKey::ALL.len()];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = RoofKey::ALL[i].as_str();
        i += 1;
    }
    keys
};

/// The roof every record is priced against on a host profile: the CPU backend runs each op's f64
/// reference whatever the record's dtype, so the f64 FMA rate is its compute ceiling.
pub const HOST_COMPUTE_ROOF: &str = RoofKey::CPU_FP64.as_str();

/// What kind of device a profile describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceKind {
    /// A CUDA GPU (`kind` absent, or `kind: gpu`).
    #[default]
    Gpu,
    /// The host CPU, as the CPU backend runs on it (`kind: cpu`, written by `calibrate --cpu`).
    Cpu,
}

impl DeviceKind {
    /// `"gpu"` or `"cpu"`, as in the file.
    pub const fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Gpu => "gpu",
            DeviceKind::Cpu => "cpu",
        }
    }
}

/// The profiles shipped with the crate: `(name, file, text)`.
const BUILTIN: [(&str, &str, &str); 3] = [
    (
        "h200",
        "profiles/h200.yaml",
        include_str!("../profiles/h200.yaml"),
    ),
    (
        "h100",
        "profiles/h100.yaml",
        include_str!("../profiles/h100.yaml"),
    ),
    (
        "h20_3e",
        "profiles/h20_3e.yaml",
        include_str!("../profiles/h20_3e.yaml"),
    ),
];

/// The roof the ledger prices `mma.sync` (`HMMA`) tensor-core instructions at: a warp's
/// m16n8k16, which on Hopper reaches less than `wgmma` (the cuBLAS figure behind
/// `tensor_core.bf16`).
pub const MMA_SYNC_ROOF: &str = "tensor_core.mma_sync";

/// The names of the profiles shipped with the crate.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(name, _, _)| *name).collect()
}

/// One ceiling of a device.
#[derive(Debug, Clone, PartialEq)]
pub struct Roof {
    /// The spec-sheet peak (bytes/s for `hbm`, FLOP/s otherwise).
    pub theoretical: f64,
    /// The sustained fraction of the peak a microbenchmark reached, in (0, 1].
    pub calibration: f64,
    /// The fraction a short kernel reaches before the power cap engages, when measured.
    pub calibration_burst: Option<f64>,
    /// Per-mix fractions behind the calibration (HBM: `copy`, `triad`, `read`, `write`).
    pub calibration_mixes: BTreeMap<String, f64>,
}

impl Roof {
    /// The ceiling a record is priced against: `theoretical × calibration`.
    pub fn effective(&self) -> f64 {
        self.theoretical * self.calibration
    }
}

/// The device a profile describes.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSpec {
    /// A human name (`"NVIDIA H200 SXM 141 GB HBM3e"`).
    pub name: String,
    /// A GPU or the host.
    pub kind: DeviceKind,
    /// Device names this profile describes, case-insensitive; `*` matches any run of
    /// characters. For a GPU the CUDA device name; for the host the name the CPU backend records
    /// (`"cpu: AMD EPYC (2 threads)"`).
    pub patterns: Vec<String>,
    /// The compute capability; always present for a GPU, `None` for the host.
    pub compute_capability: Option<ComputeCapability>,
    /// The L2 size in bytes (for the host: its last-level cache).
    pub l2_bytes: u64,
}

/// A GPU's SM pipes, what the kernel ledger's instruction and SFU counts are priced against
/// (`sm:` in the file): `issue` in thread-instructions/s, `sfu` in MUFU thread-operations/s, each
/// `theoretical` computed from the SM count, the clock and the per-clock rate, times a
/// `calibration` as for the roofs.
///
/// ```
/// use tileops_bench::profile::Profile;
///
/// let h200 = Profile::builtin("h200")?;
/// let sm = h200.sm.as_ref().expect("the H200 profile states its SM pipes");
/// assert_eq!(sm.count, 132);
/// // 132 SMs x 4 warp-instructions x 32 threads x 1.98 GHz
/// assert!((sm.issue.theoretical - 3.345e13).abs() < 1e10);
/// // 132 SMs x 16 MUFU results x 1.98 GHz
/// assert!((sm.sfu.theoretical - 4.18e12).abs() < 1e10);
/// # Ok::<(), tileops_bench::profile::ProfileError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SmPipes {
    /// Streaming multiprocessors.
    pub count: u32,
    /// The clock the per-clock rates run at, Hz (the boost clock).
    pub clock_hz: f64,
    /// Warp instructions one SM issues per clock (one per scheduler).
    pub issue_per_clock: f64,
    /// MUFU (SFU) thread-results one SM produces per clock.
    pub sfu_per_clock: f64,
    /// Thread-instructions per second: `count × issue_per_clock × 32 × clock_hz`, calibrated.
    pub issue: Roof,
    /// MUFU thread-operations per second: `count × sfu_per_clock × clock_hz`, calibrated.
    pub sfu: Roof,
    /// Shared-memory bytes per second (`sm.shared_memory`, bytes per SM per clock: 32 banks of
    /// 4 bytes), calibrated; `None` when the file does not state it.
    pub shared: Option<Roof>,
}

/// The constants of the kernel ledger's time model (`model:` in the file), fitted on measured
/// runs of the device the profile describes: what turns a row's pipe times into a predicted
/// time ([`crate::report::predict`]). Global constants, none per op or row.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeModel {
    /// Fixed cost of one timed call, µs: the launch, the first wave's start and the end of the
    /// last, as the bench's CUDA events see them.
    pub fixed_us: f64,
    /// Cost of each further kernel launch of the same call, µs.
    pub launch_us: f64,
    /// The latency of one dependent round of global loads, µs (HBM under load).
    pub latency_us: f64,
    /// Clock cycles one instruction costs on a lone warp's dependent chain.
    pub chain_cycles: f64,
    /// The norm the SM's own pipes (issue, SFU, shared memory, tensor) combine by:
    /// `(Σ tᵢᵖ)^(1/p)`; a large `p` is their maximum (perfect overlap), 1 their sum.
    pub pipe_norm: f64,
    /// What the constants were fitted on (the run, the rows), and the fit's figures.
    pub fitted_on: String,
}

impl TimeModel {
    /// The fixed cost, seconds.
    pub fn fixed_s(&self) -> f64 {
        self.fixed_us * 1e-6
    }

    /// A further launch's cost, seconds.
    pub fn launch_s(&self) -> f64 {
        self.launch_us * 1e-6
    }

    /// A round of loads' latency, seconds.
    pub fn latency_s(&self) -> f64 {
        self.latency_us * 1e-6
    }
}

/// A hardware profile, loaded and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The profile's name: the file stem (`"h200"`).
    pub name: String,
    /// Where it was loaded from (`"profiles/h200.yaml (built in)"` or a path).
    pub origin: String,
    /// The device it describes.
    pub device: DeviceSpec,
    /// Free-form provenance (`source`, `date`, `driver`, …).
    pub provenance: BTreeMap<String, String>,
    /// The roofs it defines, by key; always has `hbm`.
    pub roofs: BTreeMap<String, Roof>,
    /// The SM pipes (`sm:`), for the kernel ledger's issue and SFU times; `None` when the file
    /// does not state them (a host profile never does).
    pub sm: Option<SmPipes>,
    /// The time model's fitted constants (`model:`); `None` when the file states none: the
    /// ledger's pipes are then priced without a predicted time.
    pub model: Option<TimeModel>,
}

/// Why a record's device is not the one a profile describes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeviceMismatch {
    /// The device name matches none of the profile's patterns.
    #[error("timed on `{device}`, but profile {profile} describes {patterns:?}")]
    Name {
        /// The record's device name.
        device: String,
        /// The profile.
        profile: String,
        /// The profile's patterns.
        patterns: Vec<String>,
    },
    /// The name matches, the compute capability does not.
    #[error("timed on compute capability {device}, but profile {profile} describes {expected}")]
    ComputeCapability {
        /// The record's.
        device: ComputeCapability,
        /// The profile.
        profile: String,
        /// The profile's.
        expected: ComputeCapability,
    },
    /// The name matches, the L2 size does not (a MIG slice, or another SKU under the same name).
    #[error(
        "timed with {device} B of L2, but profile {profile} describes {expected} B \
         (a MIG slice or another SKU?)"
    )]
    L2 {
        /// The record's.
        device: u64,
        /// The profile.
        profile: String,
        /// The profile's.
        expected: u64,
    },
}

/// A profile that cannot be found, read or trusted.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Neither a built-in name nor an existing file.
    #[error(
        "unknown profile `{name}`: not a built-in profile ({}) and no such file; pass one of \
         those names or a path to a profile YAML",
        available.join(", ")
    )]
    Unknown {
        /// What was asked for.
        name: String,
        /// The built-in names.
        available: Vec<String>,
    },
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not parse, or does not have the profile's shape.
    #[error("{file}:{line}:{column}: {message}; see profiles/h200.yaml for the format")]
    Yaml {
        /// The file.
        file: String,
        /// Line (1-based; 0 when unknown).
        line: u64,
        /// Column (1-based; 0 when unknown).
        column: u64,
        /// What the parser found.
        message: String,
    },
    /// A value parsed but cannot be right.
    #[error("{file}:{line}:{column}: `{field}` = {value}: {problem}")]
    Invalid {
        /// The file.
        file: String,
        /// Line (1-based).
        line: u64,
        /// Column (1-based).
        column: u64,
        /// The field (`tensor_core.fp16.calibration`).
        field: String,
        /// The value found.
        value: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// More than one profile claims a device.
    #[error(transparent)]
    Ambiguous(#[from] AmbiguousDevice),
}

/// More than one profile claims a device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "device `{device}` matches several profiles ({}); pass --profile to choose",
    profiles.join(", ")
)]
pub struct AmbiguousDevice {
    /// The device name.
    pub device: String,
    /// The profiles that match it.
    pub profiles: Vec<String>,
}

impl Profile {
    /// A profile shipped with the crate (`"h200"`, `"h100"`, `"h20_3e"`; see [`builtin_names`]).
    ///
    /// # Errors
    /// [`ProfileError::Unknown`] for another name; a load error only if the shipped file is broken,
    /// which the crate's tests rule out.
    pub fn builtin(name: &str) -> Result<Profile, ProfileError> {
        let (name, file, text) =
            BUILTIN
                .iter()
                .find(|(n, _, _)| *n == name)
                .ok_or_else(|| ProfileError::Unknown {
                    name: name.to_owned(),
                    available: available(),
                })?;
        Profile::from_yaml_str(text, name, &format!("{file} (built in)"))
    }

    /// Every profile shipped with the crate.
    ///
    /// # Errors
    /// As [`Profile::builtin`].
    pub fn builtins() -> Result<Vec<Profile>, ProfileError> {
        BUILTIN
            .iter()
            .map(|(name, _, _)| Profile::builtin(name))
            .collect()
    }

    /// Loads a profile file; its name is the file stem.
    ///
    /// # Errors
    /// [`ProfileError::Io`] when unreadable, [`ProfileError::Yaml`] or [`ProfileError::Invalid`]
    /// (with line and column) when it is not a valid profile.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Profile, ProfileError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let io = |source| ProfileError::Io {
            path: shown.clone(),
            source,
        };
        let bytes = files::read_regular(path, MAX_FILE_BYTES).map_err(io)?;
        let text = String::from_utf8(bytes).map_err(|_| {
            io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "is not UTF-8 text, so not a profile YAML",
            ))
        })?;
        let name = path
            .file_stem()
            .map_or_else(|| shown.clone(), |s| s.to_string_lossy().into_owned());
        Profile::from_yaml_str(&text, &name, &shown)
    }

    /// A built-in name, or else a path to a profile file.
    ///
    /// # Errors
    /// [`ProfileError::Unknown`] when it is neither; a load error for a bad file.
    pub fn resolve(name_or_path: &str) -> Result<Profile, ProfileError> {
        if BUILTIN.iter().any(|(n, _, _)| *n == name_or_path) {
            return Profile::builtin(name_or_path);
        }
        let path = Path::new(name_or_path);
        // Anything at the path is what was meant: a directory or a FIFO gets the loader's "is a
        // directory, not a regular file", not "no such file".
        if path.symlink_metadata().is_ok() {
            return Profile::from_path(path);
        }
        Err(ProfileError::Unknown {
            name: name_or_path.to_owned(),
            available: available(),
        })
    }

    /// Parses and checks profile YAML; `name` names the profile, `origin` the file in errors.
    ///
    /// # Errors
    /// [`ProfileError::Yaml`] or [`ProfileError::Invalid`], with line and column.
    pub fn from_yaml_str(text: &str, name: &str, origin: &str) -> Result<Profile, ProfileError> {
        // YAML allows a byte order mark at the start; taking it off keeps the columns of line 1
        // the ones an editor shows.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let raw: RawProfile = serde_saphyr::from_str(text).map_err(|e| {
            let location = e.location();
            ProfileError::Yaml {
                file: origin.to_owned(),
                line: location.as_ref().map_or(0, |l| l.line()),
                column: location.as_ref().map_or(0, |l| l.column()),
                message: yaml_message(&e),
            }
        })?;
        raw.check(name, origin)
    }

    /// The profile among the built-in ones that describes `device_name`, if any.
    ///
    /// # Errors
    /// [`ProfileError::Ambiguous`] when several do.
    pub fn for_device(device_name: &str) -> Result<Option<Profile>, ProfileError> {
        let all = Profile::builtins()?;
        Ok(Profile::select(device_name, &all)?.cloned())
    }

    /// The profile among `candidates` whose patterns match `device_name`, if any.
    ///
    /// # Errors
    /// [`AmbiguousDevice`] when several do.
    pub fn select<'a>(
        device_name: &str,
        candidates: &'a [Profile],
    ) -> Result<Option<&'a Profile>, AmbiguousDevice> {
        let found: Vec<&Profile> = candidates
            .iter()
            .filter(|p| p.matches_name(device_name))
            .collect();
        match found.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            many => Err(AmbiguousDevice {
                device: device_name.to_owned(),
                profiles: many.iter().map(|p| p.name.clone()).collect(),
            }),
        }
    }

    /// Whether one of the profile's patterns matches a device name.
    pub fn matches_name(&self, device_name: &str) -> bool {
        self.device
            .patterns
            .iter()
            .any(|p| glob_match(p, device_name))
    }

    /// Whether a record's device is the one this profile describes: the name matches, and the
    /// compute capability and L2 size agree where the record states them.
    ///
    /// # Errors
    /// The first [`DeviceMismatch`].
    pub fn describes(&self, device: &DeviceInfo) -> Result<(), DeviceMismatch> {
        if !self.matches_name(&device.name) {
            return Err(DeviceMismatch::Name {
                device: device.name.clone(),
                profile: self.name.clone(),
                patterns: self.device.patterns.clone(),
            });
        }
        if let (Some(cc), Some(expected)) =
            (device.compute_capability, self.device.compute_capability)
            && cc != expected
        {
            return Err(DeviceMismatch::ComputeCapability {
                device: cc,
                profile: self.name.clone(),
                expected,
            });
        }
        if let Some(l2) = device.l2_bytes
            && l2 != self.device.l2_bytes
        {
            return Err(DeviceMismatch::L2 {
                device: l2,
                profile: self.name.clone(),
                expected: self.device.l2_bytes,
            });
        }
        Ok(())
    }

    /// A roof by key (`"hbm"`, `"tensor_core.bf16"`).
    pub fn roof(&self, key: &str) -> Option<&Roof> {
        self.roofs.get(key)
    }

    /// Whether the profile describes the host CPU (`kind: cpu`).
    pub fn is_host(&self) -> bool {
        self.device.kind == DeviceKind::Cpu
    }

    /// The roof a record declaring `record_roof` is priced against, with its key: that roof on a
    /// GPU profile; on a host profile [`HOST_COMPUTE_ROOF`] whatever the record declares, because
    /// the CPU backend computes every op in f64.
    pub fn pricing_roof(&self, record_roof: &str) -> Option<(&str, &Roof)> {
        let key = if self.is_host() {
            HOST_COMPUTE_ROOF
        } else {
            record_roof
        };
        self.roofs.get_key_value(key).map(|(k, r)| (k.as_str(), r))
    }

    /// The HBM roof (bytes/s), which every profile has.
    pub fn hbm(&self) -> &Roof {
        // `check` refuses a profile without it, and `roofs` is never edited after that.
        &self.roofs[RoofKey::HBM.as_str()]
    }
}

fn available() -> Vec<String> {
    builtin_names().into_iter().map(str::to_owned).collect()
}

/// `*` matches any run of characters; everything else compares case-insensitively.
fn glob_match(pattern: &str, text: &str) -> bool {
    let pattern = pattern.trim().to_lowercase();
    let text = text.trim().to_lowercase();
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

// The file's shape. `Spanned` keeps each number's position for the value checks below.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    device: RawDevice,
    #[serde(default)]
    provenance: BTreeMap<String, String>,
    hbm: RawRoof,
    #[serde(default)]
    cuda_core: RawCudaCore,
    #[serde(default)]
    tensor_core: RawTensorCore,
    #[serde(default)]
    cpu: RawCpu,
    sm: Option<RawSm>,
    model: Option<RawModel>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    fixed_us: Spanned<f64>,
    launch_us: Spanned<f64>,
    latency_us: Spanned<f64>,
    chain_cycles: Spanned<f64>,
    pipe_norm: Spanned<f64>,
    fitted_on: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSm {
    count: Spanned<u32>,
    clock_hz: Spanned<f64>,
    issue: RawPipe,
    sfu: RawPipe,
    shared_memory: Option<RawPipe>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPipe {
    per_clock: Spanned<f64>,
    calibration: Spanned<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCpu {
    fp64: Option<RawRoof>,
    fp32: Option<RawRoof>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: String,
    kind: Option<Spanned<String>>,
    #[serde(rename = "match")]
    patterns: Spanned<Vec<String>>,
    compute_capability: Option<Spanned<String>>,
    l2_bytes: Spanned<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCudaCore {
    fp32: Option<RawRoof>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTensorCore {
    fp16: Option<RawRoof>,
    bf16: Option<RawRoof>,
    tf32: Option<RawRoof>,
    fp8: Option<RawRoof>,
    mma_sync: Option<RawRoof>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoof {
    theoretical: Spanned<f64>,
    calibration: Spanned<f64>,
    calibration_burst: Option<Spanned<f64>>,
    #[serde(default)]
    calibration_mixes: BTreeMap<String, Spanned<f64>>,
}

/// serde-saphyr's message for `error`, without the position (the error's own `file:line:column`
/// prefix shows it): its default wording with a localizer that attaches no location, where
/// cutting the rendered text at `" at line "` garbled alias errors (`(defined at line 1, column 4)
/// (used at line 3, column 7)`), and a sentence for a budget breach instead of its Debug form.
fn yaml_message(error: &serde_saphyr::Error) -> String {
    let mut options = serde_saphyr::RenderOptions::new(&PlainYamlMessages);
    options.snippets = serde_saphyr::SnippetMode::Off;
    let message = error.render_with_options(options);
    // One line: the rest of a multi-line message (none expected without snippets) is context.
    message.lines().next().unwrap_or_default().trim().to_owned()
}

/// The message formatter of [`yaml_message`].
struct PlainYamlMessages;

impl serde_saphyr::localizer::Localizer for PlainYamlMessages {
    fn attach_location<'a>(
        &self,
        base: std::borrow::Cow<'a, str>,
        _: serde_saphyr::Location,
    ) -> std::borrow::Cow<'a, str> {
        base
    }

    fn alias_used_at(&self, _: serde_saphyr::Location) -> String {
        String::new()
    }

    fn alias_defined_at(&self, defined: serde_saphyr::Location) -> String {
        format!(
            " (through an alias of the anchor at line {}, column {})",
            defined.line(),
            defined.column()
        )
    }
}

impl serde_saphyr::MessageFormatter for PlainYamlMessages {
    fn localizer(&self) -> &dyn serde_saphyr::localizer::Localizer {
        self
    }

    fn format_message<'a>(&self, error: &'a serde_saphyr::Error) -> std::borrow::Cow<'a, str> {
        use serde_saphyr::budget::BudgetBreach as B;
        let serde_saphyr::Error::Budget { breach, .. } = error else {
            return serde_saphyr::DefaultMessageFormatter.format_message(error);
        };
        let (what, count) = match breach {
            B::Events { events } => ("parser events", *events),
            B::Aliases { aliases } => ("aliases", *aliases),
            B::Anchors { anchors } => ("anchors", *anchors),
            B::Depth { depth } => ("levels of nesting", *depth),
            B::InclusionDepth { depth } => ("levels of included files", *depth as usize),
            B::Documents { documents } => ("documents", *documents),
            B::Nodes { nodes } => ("nodes", *nodes),
            B::ScalarBytes { total_scalar_bytes } => ("bytes of scalars", *total_scalar_bytes),
            B::MergeKeys { merge_keys } => ("merge keys", *merge_keys),
            B::AliasAnchorRatio { aliases, .. } => ("aliases per anchor", *aliases),
            B::InputBytes { input_bytes } => ("bytes of input", *input_bytes),
            B::RecordedAnchorEvents {
                recorded_anchor_events,
            } => ("events recorded under anchors", *recorded_anchor_events),
            B::SequenceUnbalanced => {
                return "the YAML's sequences do not balance (a parser limit was hit)".into();
            }
            // BudgetBreach is non-exhaustive: a limit a later serde-saphyr adds.
            other => return format!("the YAML is over a parser limit ({other:?})").into(),
        };
        format!(
            "the YAML has {count} {what} or more, over the parser's limit for a file this tool \
             reads (a profile is a few kilobytes: is this the right file, or an alias bomb?)"
        )
        .into()
    }
}

/// The rates a profile may state, peak or effective, per second (bytes for `hbm`, FLOPs
/// otherwise): from a megabyte or megaFLOP per second, below any processor tileops runs on, to an
/// exa-, far above any one device. Ratios of two of them (ridge points) and the chart's axes built
/// from them stay finite, normal numbers.
const PHYSICAL_RATES: std::ops::RangeInclusive<f64> = 1e6..=1e18;

struct Checker<'a> {
    origin: &'a str,
}

impl Checker<'_> {
    fn invalid<T: fmt::Display>(
        &self,
        at: &Spanned<T>,
        field: &str,
        problem: &str,
    ) -> ProfileError {
        ProfileError::Invalid {
            file: self.origin.to_owned(),
            line: at.referenced.line(),
            column: at.referenced.column(),
            field: field.to_owned(),
            value: at.value.to_string(),
            problem: problem.to_owned(),
        }
    }

    fn fraction(&self, at: &Spanned<f64>, field: &str) -> Result<f64, ProfileError> {
        let v = at.value;
        if !v.is_finite() || v <= 0.0 {
            return Err(self.invalid(
                at,
                field,
                "a calibration is a measured fraction of the peak, in (0, 1]",
            ));
        }
        if v > 1.0 {
            return Err(self.invalid(
                at,
                field,
                "a calibration above 1 means the measurement beat the spec-sheet peak: the \
                 `theoretical` figure or the microbenchmark is wrong; fix that, never clamp",
            ));
        }
        Ok(v)
    }

    /// Checks that `theoretical × fraction`, a rate the reports divide by and chart on log axes, is
    /// a physical one: a fraction such as `1e-300` is in (0, 1] but makes the rate subnormal or
    /// zero, and its ridge point (compute ÷ memory) infinite.
    fn effective_rate(
        &self,
        fraction: &Spanned<f64>,
        field: &str,
        theoretical: f64,
    ) -> Result<(), ProfileError> {
        let rate = theoretical * fraction.value;
        if PHYSICAL_RATES.contains(&rate) {
            return Ok(());
        }
        Err(self.invalid(
            fraction,
            field,
            &format!(
                "makes the effective rate (theoretical × this fraction) {rate:e} per second, outside \
                 the physical range {:e} to {:e}: a calibration is a measured fraction such as 0.9",
                PHYSICAL_RATES.start(),
                PHYSICAL_RATES.end()
            ),
        ))
    }

    fn roof(&self, raw: &RawRoof, key: &str) -> Result<Roof, ProfileError> {
        let theoretical = raw.theoretical.value;
        if !theoretical.is_finite() || theoretical <= 0.0 {
            return Err(self.invalid(
                &raw.theoretical,
                &format!("{key}.theoretical"),
                "a peak must be a positive number (bytes/s for hbm, FLOP/s otherwise), e.g. 4800e9",
            ));
        }
        if !(PHYSICAL_RATES.contains(&theoretical)) {
            return Err(self.invalid(
                &raw.theoretical,
                &format!("{key}.theoretical"),
                &format!(
                    "is outside the physical range of a peak, {:e} to {:e} per second (bytes/s \
                     for hbm, FLOP/s otherwise), e.g. 4800e9",
                    PHYSICAL_RATES.start(),
                    PHYSICAL_RATES.end()
                ),
            ));
        }
        let calibration = self.fraction(&raw.calibration, &format!("{key}.calibration"))?;
        self.effective_rate(&raw.calibration, &format!("{key}.calibration"), theoretical)?;
        let calibration_burst = match &raw.calibration_burst {
            None => None,
            Some(burst) => {
                let field = format!("{key}.calibration_burst");
                let v = self.fraction(burst, &field)?;
                self.effective_rate(burst, &field, theoretical)?;
                if v < calibration {
                    return Err(self.invalid(
                        burst,
                        &field,
                        &format!(
                            "is below the sustained calibration {calibration}: the burst rate is \
                             what a short kernel reaches before the power cap, so it cannot be \
                             lower; swap them?"
                        ),
                    ));
                }
                Some(v)
            }
        };
        let mut calibration_mixes = BTreeMap::new();
        for (mix, value) in &raw.calibration_mixes {
            let field = format!("{key}.calibration_mixes.{mix}");
            let v = self.fraction(value, &field)?;
            self.effective_rate(value, &field, theoretical)?;
            // The calibration is the envelope of the mixes: a mix above it would put correct
            // kernels of that mix above "speed of light" (the Triad-only profile's mistake).
            if v > calibration {
                return Err(self.invalid(
                    value,
                    &field,
                    &format!(
                        "exceeds the calibration {calibration}: the calibration must be the \
                         envelope (the best) of its mixes; set calibration to {v}"
                    ),
                ));
            }
            calibration_mixes.insert(mix.clone(), v);
        }
        Ok(Roof {
            theoretical,
            calibration,
            calibration_burst,
            calibration_mixes,
        })
    }
}

impl Checker<'_> {
    /// The time model's constants: each finite, in a range a GPU's call can have.
    fn model(&self, raw: &RawModel) -> Result<TimeModel, ProfileError> {
        let check =
            |v: &Spanned<f64>, field: &str, range: std::ops::RangeInclusive<f64>, what: &str| {
                if v.value.is_finite() && range.contains(&v.value) {
                    Ok(v.value)
                } else {
                    Err(self.invalid(v, field, what))
                }
            };
        Ok(TimeModel {
            fixed_us: check(
                &raw.fixed_us,
                "model.fixed_us",
                0.0..=1000.0,
                "is a call's fixed cost in µs, 0 to 1000",
            )?,
            launch_us: check(
                &raw.launch_us,
                "model.launch_us",
                0.0..=1000.0,
                "is a further launch's cost in µs, 0 to 1000",
            )?,
            latency_us: check(
                &raw.latency_us,
                "model.latency_us",
                0.0..=100.0,
                "is a round of loads' latency in µs, 0 to 100",
            )?,
            chain_cycles: check(
                &raw.chain_cycles,
                "model.chain_cycles",
                0.0..=1000.0,
                "is the cycles an instruction costs on a lone warp's chain, 0 to 1000",
            )?,
            pipe_norm: check(
                &raw.pipe_norm,
                "model.pipe_norm",
                1.0..=64.0,
                "is the norm the SM's pipes combine by, 1 (their sum) to 64 (their maximum)",
            )?,
            fitted_on: raw.fitted_on.trim().to_owned(),
        })
    }

    /// The SM pipes: a positive SM count and clock, per-clock rates within what a GPU can do, and
    /// calibrated rates in the physical range.
    fn sm(&self, raw: &RawSm) -> Result<SmPipes, ProfileError> {
        let count = raw.count.value;
        if !(1..=4096).contains(&count) {
            return Err(self.invalid(
                &raw.count,
                "sm.count",
                "is the number of streaming multiprocessors, 1 to 4096 (132 on an H200)",
            ));
        }
        let clock_hz = raw.clock_hz.value;
        if !(clock_hz.is_finite() && (1e8..=1e10).contains(&clock_hz)) {
            return Err(self.invalid(
                &raw.clock_hz,
                "sm.clock_hz",
                "is the SM clock in Hz, 1e8 to 1e10 (1.98e9 on an H200)",
            ));
        }
        let pipe = |raw: &RawPipe, name: &str, lanes: f64| -> Result<(f64, Roof), ProfileError> {
            let per_clock = raw.per_clock.value;
            if !(per_clock.is_finite() && per_clock > 0.0 && per_clock <= 1024.0) {
                return Err(self.invalid(
                    &raw.per_clock,
                    &format!("sm.{name}.per_clock"),
                    "is a per-SM, per-clock rate: a positive number up to 1024",
                ));
            }
            let field = format!("sm.{name}.calibration");
            let calibration = self.fraction(&raw.calibration, &field)?;
            let theoretical = f64::from(count) * per_clock * lanes * clock_hz;
            self.effective_rate(&raw.calibration, &field, theoretical)?;
            Ok((
                per_clock,
                Roof {
                    theoretical,
                    calibration,
                    calibration_burst: None,
                    calibration_mixes: BTreeMap::new(),
                },
            ))
        };
        // Issue is counted in warp instructions per clock, each of 32 threads; the SFU's rate is
        // in thread results already.
        let (issue_per_clock, issue) = pipe(&raw.issue, "issue", 32.0)?;
        let (sfu_per_clock, sfu) = pipe(&raw.sfu, "sfu", 1.0)?;
        let shared = raw
            .shared_memory
            .as_ref()
            .map(|p| pipe(p, "shared_memory", 1.0).map(|(_, roof)| roof))
            .transpose()?;
        Ok(SmPipes {
            count,
            clock_hz,
            issue_per_clock,
            sfu_per_clock,
            issue,
            sfu,
            shared,
        })
    }
}

impl RawProfile {
    fn check(self, name: &str, origin: &str) -> Result<Profile, ProfileError> {
        let checker = Checker { origin };
        let device = &self.device;
        if device.patterns.value.iter().all(|p| p.trim().is_empty()) {
            return Err(checker.invalid(
                &Spanned::new("[]", device.patterns.referenced, device.patterns.defined),
                "device.match",
                "lists no device name; add the CUDA device name(s) this profile describes, \
                 e.g. [\"NVIDIA H200\"]",
            ));
        }
        let kind = match &device.kind {
            None => DeviceKind::Gpu,
            Some(k) if k.value == "gpu" => DeviceKind::Gpu,
            Some(k) if k.value == "cpu" => DeviceKind::Cpu,
            Some(k) => {
                return Err(checker.invalid(k, "device.kind", "is `gpu` (the default) or `cpu`"));
            }
        };
        let compute_capability = match (&device.compute_capability, kind) {
            (Some(cc), _) => Some(cc.value.parse::<ComputeCapability>().map_err(|e| {
                checker.invalid(cc, "device.compute_capability", &format!("{e}; quote it"))
            })?),
            (None, DeviceKind::Cpu) => None,
            (None, DeviceKind::Gpu) => {
                return Err(checker.invalid(
                    &Spanned::new(
                        "(missing)",
                        device.patterns.referenced,
                        device.patterns.defined,
                    ),
                    "device.compute_capability",
                    "a GPU profile needs its compute capability, e.g. \"9.0\" (a host profile \
                     says `kind: cpu` instead)",
                ));
            }
        };
        if device.l2_bytes.value == 0 {
            return Err(checker.invalid(
                &device.l2_bytes,
                "device.l2_bytes",
                "must be the L2 size in bytes, > 0",
            ));
        }
        let mut roofs = BTreeMap::new();
        let hbm = RoofKey::HBM.as_str();
        roofs.insert(hbm.to_owned(), checker.roof(&self.hbm, hbm)?);
        let compute = [
            (RoofKey::CUDA_CORE_FP32, &self.cuda_core.fp32),
            (RoofKey::TENSOR_CORE_FP16, &self.tensor_core.fp16),
            (RoofKey::TENSOR_CORE_BF16, &self.tensor_core.bf16),
            (RoofKey::TENSOR_CORE_TF32, &self.tensor_core.tf32),
            (RoofKey::TENSOR_CORE_FP8, &self.tensor_core.fp8),
            (RoofKey::CPU_FP64, &self.cpu.fp64),
            (RoofKey::CPU_FP32, &self.cpu.fp32),
        ];
        for (key, raw) in compute {
            if let Some(raw) = raw {
                roofs.insert(key.as_str().to_owned(), checker.roof(raw, key.as_str())?);
            }
        }
        // The tensor cores as `mma.sync` (HMMA) drives them: no manifest roof names it, the
        // ledger's tensor pipe prices HMMA instructions at it.
        if let Some(raw) = &self.tensor_core.mma_sync {
            roofs.insert(MMA_SYNC_ROOF.to_owned(), checker.roof(raw, MMA_SYNC_ROOF)?);
        }
        let model = self.model.as_ref().map(|m| checker.model(m)).transpose()?;
        let sm = match (&self.sm, kind) {
            (None, _) => None,
            (Some(raw), DeviceKind::Gpu) => Some(checker.sm(raw)?),
            (Some(raw), DeviceKind::Cpu) => {
                return Err(checker.invalid(
                    &raw.count,
                    "sm.count",
                    "a host profile has no SM pipes: `sm:` describes a GPU's streaming \
                     multiprocessors",
                ));
            }
        };
        Ok(Profile {
            name: name.to_owned(),
            origin: origin.to_owned(),
            device: DeviceSpec {
                name: self.device.name,
                kind,
                patterns: self
                    .device
                    .patterns
                    .value
                    .into_iter()
                    .filter(|p| !p.trim().is_empty())
                    .collect(),
                compute_capability,
                l2_bytes: self.device.l2_bytes.value,
            },
            provenance: self.provenance,
            roofs,
            sm,
            model,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
device:
  name: Test GPU
  match: [\"Test GPU*\"]
  compute_capability: \"9.0\"
  l2_bytes: 1024
hbm:
  theoretical: 1000e9
  calibration: 0.9
";

    fn error(text: &str) -> ProfileError {
        match Profile::from_yaml_str(text, "t", "t.yaml") {
            Ok(p) => panic!("expected an error, loaded {p:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn builtins_load_with_effective_rates() {
        let h200 = Profile::builtin("h200").unwrap();
        let expect = [
            ("hbm", 4502.4e9),
            ("cuda_core.fp32", 57.27e12),
            ("tensor_core.fp16", 661.4e12),
            ("tensor_core.bf16", 700.3e12),
            ("tensor_core.tf32", 358.6e12),
            ("tensor_core.fp8", 1247.4e12),
        ];
        for (key, effective) in expect {
            let roof = h200.roof(key).unwrap();
            assert!(
                (roof.effective() / effective - 1.0).abs() < 1e-3,
                "{key}: {}",
                roof.effective()
            );
        }
        assert_eq!(h200.hbm().calibration_mixes.len(), 4);
        assert_eq!(
            h200.roof("tensor_core.fp16").unwrap().calibration_burst,
            Some(0.7370)
        );
        assert_eq!(h200.device.l2_bytes, 62_914_560);
        assert_eq!(Profile::builtins().unwrap().len(), 3);
        assert!(
            Profile::builtin("h100")
                .unwrap()
                .roof("tensor_core.fp16")
                .is_none()
        );
        assert!(
            Profile::builtin("h20_3e")
                .unwrap()
                .roof("cuda_core.fp32")
                .is_none()
        );
    }

    #[test]
    fn selection_by_device_name() {
        let name = |d: &str| Profile::for_device(d).unwrap().map(|p| p.name);
        assert_eq!(name("NVIDIA H200").as_deref(), Some("h200"));
        assert_eq!(name("nvidia h200").as_deref(), Some("h200"));
        assert_eq!(name("NVIDIA H100 80GB HBM3").as_deref(), Some("h100"));
        assert_eq!(name("NVIDIA H20-3e").as_deref(), Some("h20_3e"));
        assert_eq!(name("NVIDIA H20"), None);
        assert_eq!(name("NVIDIA H100 PCIe"), None);
        assert_eq!(name("cpu: AMD EPYC"), None);
    }

    #[test]
    fn ambiguous_selection_is_an_error() {
        let a = Profile::from_yaml_str(GOOD, "a", "a.yaml").unwrap();
        let b = Profile::from_yaml_str(GOOD, "b", "b.yaml").unwrap();
        let err = Profile::select("Test GPU 80GB", &[a, b]).unwrap_err();
        assert_eq!(err.profiles, ["a", "b"]);
    }

    #[test]
    fn sm_pipes_load_and_bad_ones_are_located_errors() {
        let sm = "sm:\n  count: 2\n  clock_hz: 1e9\n  issue: {per_clock: 4, calibration: 0.5}\n  \
                  sfu: {per_clock: 16, calibration: 1.0}\n";
        let p = Profile::from_yaml_str(&format!("{GOOD}{sm}"), "t", "t.yaml").unwrap();
        let pipes = p.sm.unwrap();
        assert_eq!(pipes.issue.theoretical, 2.0 * 4.0 * 32.0 * 1e9);
        assert_eq!(pipes.issue.effective(), 2.0 * 4.0 * 32.0 * 1e9 * 0.5);
        assert_eq!(pipes.sfu.effective(), 2.0 * 16.0 * 1e9);
        assert!(
            Profile::from_yaml_str(GOOD, "t", "t.yaml")
                .unwrap()
                .sm
                .is_none()
        );
        let cases = [
            ("count: 2", "count: 0", "sm.count", 10),
            ("clock_hz: 1e9", "clock_hz: 1e30", "sm.clock_hz", 11),
            ("per_clock: 4,", "per_clock: -4,", "sm.issue.per_clock", 12),
            (
                "calibration: 1.0}",
                "calibration: 1.5}",
                "sm.sfu.calibration",
                13,
            ),
        ];
        for (from, to, expected_field, expected_line) in cases {
            let err = error(&format!("{GOOD}{}", sm.replace(from, to)));
            let ProfileError::Invalid { field, line, .. } = &err else {
                panic!("{to}: {err}")
            };
            assert_eq!(
                (field.as_str(), *line),
                (expected_field, expected_line),
                "{err}"
            );
        }
        let host = GOOD.replace("match:", "kind: cpu\n  match:");
        let err = error(&format!("{host}{sm}"));
        assert!(
            err.to_string().contains("a host profile has no SM pipes"),
            "{err}"
        );
    }

    #[test]
    fn glob() {
        assert!(glob_match("NVIDIA H200", "nvidia h200"));
        assert!(!glob_match("NVIDIA H200", "NVIDIA H200 NVL"));
        assert!(glob_match("NVIDIA H100*", "NVIDIA H100 PCIe"));
        assert!(glob_match("*H100*HBM3", "NVIDIA H100 80GB HBM3"));
        assert!(!glob_match("*H100*HBM3", "NVIDIA H100 PCIe"));
        assert!(!glob_match("a*a", "a"));
    }

    #[test]
    fn device_mismatch_reasons() {
        let h200 = Profile::builtin("h200").unwrap();
        let ok = DeviceInfo::new("NVIDIA H200")
            .with_compute_capability("9.0".parse().unwrap())
            .with_l2_bytes(62_914_560);
        assert_eq!(h200.describes(&ok), Ok(()));
        assert!(matches!(
            h200.describes(&DeviceInfo::new("NVIDIA A100")),
            Err(DeviceMismatch::Name { .. })
        ));
        let mig = ok.clone().with_l2_bytes(7_864_320);
        assert!(matches!(
            h200.describes(&mig),
            Err(DeviceMismatch::L2 { .. })
        ));
        let cc = ok.with_compute_capability("8.0".parse().unwrap());
        assert!(matches!(
            h200.describes(&cc),
            Err(DeviceMismatch::ComputeCapability { .. })
        ));
    }

    #[test]
    fn rates_outside_the_physical_range_are_refused() {
        // Each of these passed the checks once, and the chart's axes, built from a zero, subnormal
        // or near-f64::MAX rate or ridge, then looped until memory ran out.
        let cases = [
            (
                "theoretical: 1000e9",
                "theoretical: 1e-300",
                "hbm.theoretical",
            ),
            ("calibration: 0.9", "calibration: 1e-300", "hbm.calibration"),
            ("calibration: 0.9", "calibration: 5e-324", "hbm.calibration"),
            (
                "theoretical: 1000e9",
                "theoretical: 6e-295",
                "hbm.theoretical",
            ),
            (
                "theoretical: 1000e9",
                "theoretical: 1e300",
                "hbm.theoretical",
            ),
            (
                "calibration: 0.9",
                "calibration: 0.9\n  calibration_burst: 1.0\n  calibration_mixes: { copy: 1e-20 }",
                "hbm.calibration_mixes.copy",
            ),
        ];
        for (from, to, expected_field) in cases {
            let err = error(&GOOD.replace(from, to));
            let ProfileError::Invalid { field, problem, .. } = &err else {
                panic!("{to}: {err}")
            };
            assert_eq!(field, expected_field, "{to}: {err}");
            assert!(problem.contains("physical range"), "{to}: {err}");
        }
        let compute =
            format!("{GOOD}cuda_core:\n  fp32:\n    theoretical: 60e12\n    calibration: 1e-300\n");
        assert!(matches!(
            error(&compute),
            ProfileError::Invalid { field, .. } if field == "cuda_core.fp32.calibration"
        ));
    }

    #[test]
    fn calibration_above_one_names_the_line() {
        let text = GOOD.replace("calibration: 0.9", "calibration: 1.2");
        let err = error(&text);
        let ProfileError::Invalid { line, field, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!((*line, field.as_str()), (8, "hbm.calibration"));
        let shown = err.to_string();
        assert!(shown.starts_with("t.yaml:8:"), "{shown}");
        assert!(shown.contains("above 1"), "{shown}");
    }

    #[test]
    fn non_positive_numbers_are_errors() {
        for (from, to, field) in [
            ("theoretical: 1000e9", "theoretical: 0", "hbm.theoretical"),
            (
                "theoretical: 1000e9",
                "theoretical: -4800e9",
                "hbm.theoretical",
            ),
            ("calibration: 0.9", "calibration: 0", "hbm.calibration"),
            ("l2_bytes: 1024", "l2_bytes: 0", "device.l2_bytes"),
        ] {
            let err = error(&GOOD.replace(from, to));
            assert!(
                matches!(&err, ProfileError::Invalid { field: f, line, .. } if f == field && *line > 0),
                "{err}"
            );
        }
        assert!(matches!(
            error(&GOOD.replace("l2_bytes: 1024", "l2_bytes: -1")),
            ProfileError::Yaml { line: 5, .. }
        ));
    }

    #[test]
    fn envelope_and_burst_are_checked() {
        let mixes = format!("{GOOD}  calibration_mixes: {{triad: 0.8, read: 0.95}}\n");
        let err = error(&mixes);
        assert!(
            matches!(&err, ProfileError::Invalid { field, line: 9, .. } if field == "hbm.calibration_mixes.read"),
            "{err}"
        );
        let burst = format!("{GOOD}  calibration_burst: 0.5\n");
        assert!(
            matches!(error(&burst), ProfileError::Invalid { field, .. } if field == "hbm.calibration_burst")
        );
    }

    #[test]
    fn bad_yaml_and_unknown_keys_have_positions() {
        let err = error("device: [unclosed\n");
        assert!(matches!(err, ProfileError::Yaml { line: 1.., .. }), "{err}");
        let typo = GOOD.replace("calibration: 0.9", "calibraton: 0.9");
        let err = error(&typo);
        let ProfileError::Yaml { line, message, .. } = &err else {
            panic!("{err}")
        };
        assert!(*line >= 6, "{err}");
        assert!(message.contains("calibraton"), "{err}");
        let tensor_typo =
            format!("{GOOD}tensor_core:\n  bf61:\n    theoretical: 1e12\n    calibration: 0.5\n");
        assert!(error(&tensor_typo).to_string().contains("bf61"));
        let missing = GOOD.replace("  l2_bytes: 1024\n", "");
        assert!(error(&missing).to_string().contains("l2_bytes"));
        let cc = GOOD.replace("\"9.0\"", "\"sm90\"");
        assert!(matches!(error(&cc), ProfileError::Invalid { line: 4, .. }));
    }

    #[test]
    fn host_profiles_need_no_compute_capability_and_price_on_the_f64_roof() {
        let host = "device:\n  name: Host\n  kind: cpu\n  match: [\"cpu: Host (2 threads)\"]\n  \
                    l2_bytes: 1024\nhbm:\n  theoretical: 100e9\n  calibration: 0.2\ncpu:\n  \
                    fp64:\n    theoretical: 50e9\n    calibration: 1\n";
        let p = Profile::from_yaml_str(host, "host", "host.yaml").unwrap();
        assert!(p.is_host());
        assert_eq!(p.device.compute_capability, None);
        assert_eq!(
            p.pricing_roof("tensor_core.bf16").map(|r| r.0),
            Some("cpu.fp64")
        );
        assert_eq!(
            p.pricing_roof("cuda_core.fp32").map(|r| r.0),
            Some("cpu.fp64")
        );
        assert!(
            p.describes(&DeviceInfo::new("cpu: Host (2 threads)"))
                .is_ok()
        );
        // A GPU profile prices on the record's own roof, and must state its compute capability.
        let h200 = Profile::builtin("h200").unwrap();
        assert!(!h200.is_host());
        assert_eq!(
            h200.pricing_roof("tensor_core.bf16").map(|r| r.0),
            Some("tensor_core.bf16")
        );
        assert!(h200.pricing_roof("cpu.fp64").is_none());
        let err = error(&GOOD.replace("  compute_capability: \"9.0\"\n", ""));
        assert!(
            matches!(&err, ProfileError::Invalid { field, .. } if field == "device.compute_capability"),
            "{err}"
        );
        let err = error(&GOOD.replace("  name: Test GPU\n", "  name: Test GPU\n  kind: tpu\n"));
        assert!(
            matches!(&err, ProfileError::Invalid { field, .. } if field == "device.kind"),
            "{err}"
        );
    }

    #[test]
    fn unknown_profile_lists_the_builtins() {
        let err = Profile::resolve("a100").unwrap_err();
        assert!(err.to_string().contains("h200, h100, h20_3e"), "{err}");
        assert!(matches!(
            Profile::builtin("nope"),
            Err(ProfileError::Unknown { .. })
        ));
    }

    #[test]
    fn from_path_names_the_file() {
        let dir = std::env::temp_dir().join(format!("tileops-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mygpu.yaml");
        std::fs::write(&path, GOOD).unwrap();
        let p = Profile::resolve(path.to_str().unwrap()).unwrap();
        assert_eq!(p.name, "mygpu");
        std::fs::write(&path, GOOD.replace("0.9", "9")).unwrap();
        let err = Profile::from_path(&path).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}:8:", path.display())), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod yaml_message_tests {
    use super::*;

    fn message(text: &str) -> String {
        match Profile::from_yaml_str(text, "t", "t.yaml") {
            Ok(p) => panic!("expected an error, loaded {p:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn alias_errors_keep_their_whole_message() {
        // Once cut at its last " at line ": `invalid ... (defined at line 1, column 8) (used`.
        let text = "device:\n  name: &n Test GPU\n  match: [\"Test GPU\"]\n  \
                    compute_capability: \"9.0\"\n  l2_bytes: *n\n";
        let shown = message(text);
        assert!(!shown.contains("(used"), "{shown}");
        assert!(
            shown
                .contains("invalid u64 (through an alias of the anchor at line 2, column 12); see"),
            "{shown}"
        );
        assert!(shown.starts_with("t.yaml:5:"), "{shown}");
        assert_eq!(message("device: *missing\n").matches("line").count(), 0);
    }

    #[test]
    fn a_budget_breach_is_a_sentence_not_a_debug_dump() {
        let text = format!("device:\n  name: {}\n", "x".repeat(70_000_000));
        let shown = message(&text);
        assert!(!shown.contains("ScalarBytes {"), "{shown}");
        assert!(
            shown.contains("bytes of scalars or more, over the parser's limit"),
            "{shown}"
        );
    }
}
