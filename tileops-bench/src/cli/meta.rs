//! What a tool stamps on the run it starts: the git revision, the date, the tileops version and
//! the device ([`run_meta`]), and where its records go by default ([`default_out_path`]). The
//! bench harness ([`crate::bench`]) takes the metadata from its caller and records the
//! device it names; the calibration tools stamp their profiles' provenance with the same facts.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use tileops::cudarc::driver::sys;

use crate::bench;
use crate::records::{ComputeCapability, DeviceInfo, RunMeta};
use tileops::Device;

/// The run's metadata: git revision, `now` as RFC 3339, the tileops version and the device.
pub fn run_meta(device: &Device, now: SystemTime) -> RunMeta {
    RunMeta::new(
        git_revision(),
        rfc3339_utc(now),
        env!("CARGO_PKG_VERSION"),
        device_info(device),
    )
}

/// What a record says about the device: for a GPU its name, compute capability, driver and L2
/// size; for the CPU `"cpu: <model> (<n> threads)"`, which no GPU profile matches.
pub fn device_info(device: &Device) -> DeviceInfo {
    if device.is_cuda() {
        return gpu_info(device);
    }
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    DeviceInfo::new(format!("cpu: {} ({threads} threads)", cpu_model()))
}

/// The host CPU's model name (`/proc/cpuinfo`'s `model name`), else the architecture (`x86_64`).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned())
}

/// `git rev-parse HEAD` in the working directory (with `-dirty` when tracked files changed), else
/// `$TILEOPS_GIT_REVISION` (set by the GPU bundle, which has no checkout), else `"unknown"`.
pub fn git_revision() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    if let Some(rev) = git(&["rev-parse", "HEAD"]).filter(|r| !r.is_empty()) {
        let dirty =
            git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
        return if dirty { format!("{rev}-dirty") } else { rev };
    }
    std::env::var("TILEOPS_GIT_REVISION")
        .ok()
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// `t` as a jiff timestamp; a time outside jiff's range (years -9999 to 9999) is clamped to the
/// nearest end, which no clock of a bench machine reads.
fn timestamp(t: SystemTime) -> jiff::Timestamp {
    jiff::Timestamp::try_from(t).unwrap_or(if t < UNIX_EPOCH {
        jiff::Timestamp::MIN
    } else {
        jiff::Timestamp::MAX
    })
}

/// `t` as RFC 3339 in UTC, to the second (`"2026-11-30T04:00:00Z"`).
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// let t = UNIX_EPOCH + Duration::from_secs(1_796_011_200);
/// assert_eq!(tileops_bench::cli::meta::rfc3339_utc(t), "2026-11-30T04:00:00Z");
/// ```
pub fn rfc3339_utc(t: SystemTime) -> String {
    timestamp(t).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The default records path for a run started at `t`: `target/bench/<YYYYMMDDTHHMMSSZ>.json`.
pub fn default_out_path(t: SystemTime) -> PathBuf {
    PathBuf::from("target/bench").join(format!("{}.json", timestamp(t).strftime("%Y%m%dT%H%M%SZ")))
}

/// The kernel driver version (`580.65.06`, from `/proc/driver/nvidia/version`) and the CUDA
/// version the driver supports (`CUDA 13.0`), as far as known.
/// The kernel module's version in the first line of `/proc/driver/nvidia/version`: the first
/// word after "Kernel Module" that starts with a digit. The proprietary module's line reads
/// `NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 ...`; the open one's
/// `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...` (the
/// word right after it is "for", which the H200 machine's first records showed as the driver).
fn module_version(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once("Kernel Module")?;
    rest.split_whitespace()
        .find(|word| word.starts_with(|c: char| c.is_ascii_digit()))
}

fn driver_version() -> Option<String> {
    let module = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|text| module_version(text.lines().next()?).map(str::to_owned));
    let mut version: std::ffi::c_int = 0;
    // SAFETY: writes one int; the driver library is loaded (a device was opened).
    let cuda = unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .ok()
        .filter(|_| version > 0)
        .map(|_| format!("CUDA {}.{}", version / 1000, version % 1000 / 10));
    match (module, cuda) {
        (Some(m), Some(c)) => Some(format!("{m} ({c})")),
        (m, c) => m.or(c),
    }
}

/// Name, compute capability, driver and L2 size of a GPU.
fn gpu_info(device: &Device) -> DeviceInfo {
    let mut info = DeviceInfo::new(device.name());
    if let Some((major, minor)) = device.compute_capability() {
        info = info.with_compute_capability(ComputeCapability { major, minor });
    }
    if let Some(driver) = driver_version() {
        info = info.with_driver(driver);
    }
    if let Some(l2) = bench::l2_bytes(device) {
        info = info.with_l2_bytes(l2);
    }
    info
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_module_version_is_read_from_both_drivers_lines() {
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 06:54:38 UTC 2025";
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22-I3-AE18-23-3)";
        assert_eq!(module_version(proprietary), Some("580.65.06"));
        assert_eq!(module_version(open), Some("580.159.04"));
        assert_eq!(module_version("NVRM version: something else"), None);
        assert_eq!(module_version("Kernel Module for x86_64"), None);
    }

    #[test]
    fn dates_are_rfc3339_utc() {
        let t = |s: u64| UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(rfc3339_utc(t(0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(t(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(t(1_709_251_199)), "2024-02-29T23:59:59Z");
        assert_eq!(rfc3339_utc(t(4_102_444_800)), "2100-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH - Duration::from_secs(5)),
            "1969-12-31T23:59:55Z"
        );
        assert_eq!(
            default_out_path(t(1_796_011_200)),
            PathBuf::from("target/bench/20261130T040000Z.json")
        );
    }
}
