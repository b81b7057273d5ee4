//! Compiling one kernel file with NVRTC: CUBIN for a real architecture (`sm_90`), PTX for a
//! virtual one (`compute_90`), with ptxas's resource report in the log.

use std::ffi::{CStr, CString, c_char};
use std::fmt;

use cudarc::nvrtc::result::NvrtcError;
use cudarc::nvrtc::sys::{self as nvrtc, nvrtcProgram};

use std::sync::OnceLock;

use super::disk_cache::{CompileInputs, KernelCache};
use super::{HEADERS, KernelSource, Toolkit, toolkit};
use crate::Error;

/// What to compile a kernel file to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// A CUBIN for one real architecture (`Sm(90)` is `sm_90`): loads without the driver's JIT.
    Sm(u32),
    /// PTX for a virtual architecture (`Compute(90)` is `compute_90`): JIT-compiled by the driver.
    Compute(u32),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Sm(arch) => write!(f, "sm_{arch}"),
            Target::Compute(arch) => write!(f, "compute_{arch}"),
        }
    }
}

/// A compiled kernel file.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The kernel file (`softmax.cu`).
    pub file: &'static str,
    /// What it was compiled for.
    pub target: Target,
    /// The CUBIN, for [`Target::Sm`].
    pub cubin: Option<Vec<u8>>,
    /// The PTX: always present for [`Target::Compute`], and for [`Target::Sm`] when NVRTC keeps it.
    pub ptx: Option<String>,
    /// NVRTC's program log, including ptxas's `-v` report for CUBIN targets.
    pub log: String,
}

/// ptxas's report for one entry point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUsage {
    /// The entry point.
    pub function: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of stack frame.
    pub stack_bytes: u32,
    /// Bytes of register spill stores.
    pub spill_stores: u32,
    /// Bytes of register spill loads.
    pub spill_loads: u32,
    /// Static shared memory bytes.
    pub shared_bytes: u32,
}

impl Compiled {
    /// ptxas's per-entry report, parsed from the log (empty for PTX targets).
    pub fn resource_usage(&self) -> Vec<ResourceUsage> {
        parse_ptxas_report(&self.log)
    }
}

/// Options every compile gets. `--ptxas-options=-v` makes the log carry registers and spills.
fn options(target: Target, include_dir: &std::path::Path) -> Vec<String> {
    vec![
        format!("--gpu-architecture={target}"),
        "--std=c++17".to_owned(),
        format!("--include-path={}", include_dir.display()),
        "--ptxas-options=-v".to_owned(),
        "-DTILEOPS_NVRTC=1".to_owned(),
    ]
}

/// Compiles `source` for `target`.
///
/// ```no_run
/// use tileops::kernels::{compile, Target, SOURCES};
/// let compiled = compile(&SOURCES[0], Target::Sm(90))?;
/// for usage in compiled.resource_usage() {
///     println!("{}: {} registers, {} bytes spilled", usage.function, usage.registers, usage.spill_stores);
/// }
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn compile(source: &KernelSource, target: Target) -> Result<Compiled, Error> {
    compile_text(source.file, source.source, HEADERS, target)
}

/// Compiles the kernel file `file` of text `text` for `target`, with `headers` (name, text) as
/// the files it may include: [`compile`] for a file of this build, or another revision's
/// sources (the kernel ledger's backtest prices the kernels that ran on a GPU, not today's).
///
/// # Errors
/// As [`compile`].
pub fn compile_text(
    file: &'static str,
    text: &str,
    headers: &[(&str, &str)],
    target: Target,
) -> Result<Compiled, Error> {
    compile_with(
        KernelCache::from_env().as_ref(),
        file,
        text,
        headers,
        target,
    )
}

/// [`compile_text`] through `cache` when there is one (loaded from it, or compiled and stored).
pub(super) fn compile_with(
    cache: Option<&KernelCache>,
    file: &'static str,
    text: &str,
    headers: &[(&str, &str)],
    target: Target,
) -> Result<Compiled, Error> {
    let toolkit = toolkit()?;
    let opts = options(target, &toolkit.include_dir);
    let inputs = CompileInputs {
        file,
        text,
        headers,
        target,
        options: &opts,
        compiler: compiler_identity(toolkit),
    };
    // Threads of this process compiling the same inputs wait for the first, then load its entry.
    let _one_compile = cache.map(|c| c.lock(&inputs));
    if let Some(hit) = cache.and_then(|c| c.load(&inputs, file)) {
        return Ok(hit);
    }
    let failed = |message: String, log: String, source_error: Option<NvrtcError>| Error::Compile {
        kernel: file.to_owned(),
        arch: target.to_string(),
        message,
        log,
        source: source_error,
    };
    let compile_error = |message: String, log: String| failed(message, log, None);
    let src = CString::new(text).map_err(|e| compile_error(e.to_string(), String::new()))?;
    let name = CString::new(file).map_err(|e| compile_error(e.to_string(), String::new()))?;
    let header_srcs: Vec<CString> = headers
        .iter()
        .map(|(_, text)| CString::new(*text))
        .collect::<Result<_, _>>()
        .map_err(|e| compile_error(e.to_string(), String::new()))?;
    let header_names: Vec<CString> = headers
        .iter()
        .map(|(name, _)| CString::new(*name))
        .collect::<Result<_, _>>()
        .map_err(|e| compile_error(e.to_string(), String::new()))?;
    let header_src_ptrs: Vec<*const c_char> = header_srcs.iter().map(|s| s.as_ptr()).collect();
    let header_name_ptrs: Vec<*const c_char> = header_names.iter().map(|s| s.as_ptr()).collect();

    let mut prog: nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer refers to a NUL-terminated string that outlives the program.
    let status = unsafe {
        nvrtc::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            i32::try_from(headers.len())
                .map_err(|e| compile_error(e.to_string(), String::new()))?,
            header_src_ptrs.as_ptr(),
            header_name_ptrs.as_ptr(),
        )
    };
    status
        .result()
        .map_err(|e| failed(format!("nvrtcCreateProgram: {e}"), String::new(), Some(e)))?;
    let program = Program(prog);

    // SAFETY: `program` is a live program made above (destroyed only by its `Drop`), and the
    // options are owned strings that outlive the call.
    let compiled = unsafe { cudarc::nvrtc::result::compile_program(program.0, &opts) };
    let log = program.log();
    if let Err(e) = compiled {
        return Err(failed(e.to_string(), log, Some(e)));
    }
    let ptx = program.ptx();
    let cubin = match target {
        Target::Sm(_) => Some(program.cubin().map_err(|e| compile_error(e, log.clone()))?),
        Target::Compute(_) => None,
    };
    if cubin.is_none() && ptx.is_none() {
        return Err(compile_error(
            "NVRTC produced neither PTX nor CUBIN".to_owned(),
            log,
        ));
    }
    let compiled = Compiled {
        file,
        target,
        cubin,
        ptx,
        log,
    };
    if let Some(cache) = cache {
        cache.store(&inputs, &compiled);
    }
    Ok(compiled)
}

/// NVRTC as the kernel cache's key names it: the version, and the library file that was loaded
/// (its path, size and modification time: another build of the same version is another file).
fn compiler_identity(toolkit: &Toolkit) -> &'static str {
    static IDENTITY: OnceLock<String> = OnceLock::new();
    IDENTITY.get_or_init(|| {
        let (major, minor) = toolkit.nvrtc_version;
        let library = match &toolkit.nvrtc_library {
            Some(path) => {
                let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                let meta = std::fs::metadata(&path).ok();
                let modified = meta
                    .as_ref()
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                format!(
                    "{} {} bytes modified {modified}",
                    path.display(),
                    meta.map_or(0, |m| m.len())
                )
            }
            None => "resolved by the dynamic linker".to_owned(),
        };
        format!("nvrtc {major}.{minor} {library}")
    })
}

/// The architectures this NVRTC can compile for (`[75, 80, 86, 89, 90, ...]`).
pub fn supported_archs() -> Result<Vec<u32>, Error> {
    toolkit()?;
    let mut count = 0;
    // SAFETY: valid out-pointer, then a buffer of the size NVRTC reported.
    unsafe { nvrtc::nvrtcGetNumSupportedArchs(&mut count) }
        .result()
        .map_err(|e| Error::NvrtcMissing {
            detail: format!("nvrtcGetNumSupportedArchs: {e}"),
            searched: String::new(),
        })?;
    let mut archs = vec![0i32; count.max(0) as usize];
    // SAFETY: `archs` holds the `count` entries NVRTC just reported it will write.
    unsafe { nvrtc::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
        .result()
        .map_err(|e| Error::NvrtcMissing {
            detail: format!("nvrtcGetSupportedArchs: {e}"),
            searched: String::new(),
        })?;
    Ok(archs
        .into_iter()
        .filter_map(|a| u32::try_from(a).ok())
        .collect())
}

/// Owns an `nvrtcProgram` and destroys it on drop.
struct Program(nvrtcProgram);

impl Program {
    fn log(&self) -> String {
        // SAFETY: the program is alive.
        unsafe { cudarc::nvrtc::result::get_program_log(self.0) }
            .map(|raw| c_chars_to_string(&raw))
            .unwrap_or_default()
    }

    fn ptx(&self) -> Option<String> {
        // SAFETY: the program is alive and compiled.
        let raw = unsafe { cudarc::nvrtc::result::get_ptx(self.0) }.ok()?;
        let text = c_chars_to_string(&raw);
        (!text.trim().is_empty()).then_some(text)
    }

    fn cubin(&self) -> Result<Vec<u8>, String> {
        let mut size = 0usize;
        // SAFETY: the program is alive and compiled; the buffer has the size NVRTC reported.
        unsafe { nvrtc::nvrtcGetCUBINSize(self.0, &mut size) }
            .result()
            .map_err(|e| format!("nvrtcGetCUBINSize: {e}"))?;
        if size == 0 {
            return Err("NVRTC produced no CUBIN (virtual architecture?)".to_owned());
        }
        let mut cubin = vec![0u8; size];
        // SAFETY: the program is alive and compiled; `cubin` holds the `size` bytes NVRTC
        // reported.
        unsafe { nvrtc::nvrtcGetCUBIN(self.0, cubin.as_mut_ptr().cast()) }
            .result()
            .map_err(|e| format!("nvrtcGetCUBIN: {e}"))?;
        Ok(cubin)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed only here.
        let _ = unsafe { cudarc::nvrtc::result::destroy_program(self.0) };
    }
}

fn c_chars_to_string(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw.iter().map(|&c| c as u8).collect();
    match CStr::from_bytes_until_nul(&bytes) {
        Ok(text) => text.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// Parses ptxas `-v` output:
///
/// ```text
/// ptxas info    : Compiling entry function 'softmax_rows_v4_f32' for 'sm_90'
/// ptxas info    : Function properties for softmax_rows_v4_f32
///     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
/// ptxas info    : Used 32 registers, used 1 barriers, 8192 bytes smem, 380 bytes cmem[0]
/// ```
fn parse_ptxas_report(log: &str) -> Vec<ResourceUsage> {
    let mut out: Vec<ResourceUsage> = Vec::new();
    let mut current: Option<ResourceUsage> = None;
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            if let Some(done) = current.take() {
                out.push(done);
            }
            let function = rest.split('\'').next().unwrap_or_default().to_owned();
            current = Some(ResourceUsage {
                function,
                registers: 0,
                stack_bytes: 0,
                spill_stores: 0,
                spill_loads: 0,
                shared_bytes: 0,
            });
            continue;
        }
        let Some(usage) = current.as_mut() else {
            continue;
        };
        if line.contains("bytes stack frame") {
            usage.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
            usage.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
            usage.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
        } else if line.contains("Used ") && line.contains("registers") {
            usage.registers = number_before(line, "registers").unwrap_or(0);
            usage.shared_bytes = number_before(line, "bytes smem").unwrap_or(0);
        }
    }
    out.extend(current);
    out
}

/// The integer right before `marker` in `line` (`"12 bytes spill stores"` -> 12).
fn number_before(line: &str, marker: &str) -> Option<u32> {
    let before = &line[..line.find(marker)?];
    before
        .split(|c: char| !c.is_ascii_digit())
        .rfind(|s| !s.is_empty())?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_ptxas_report() {
        let log = "ptxas info    : 0 bytes gmem\n\
            ptxas info    : Compiling entry function 'a' for 'sm_90'\n\
            ptxas info    : Function properties for a\n    \
            8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n\
            ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, 380 bytes cmem[0]\n\
            ptxas info    : Compiling entry function 'b' for 'sm_90'\n\
            ptxas info    : Function properties for b\n    \
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
            ptxas info    : Used 12 registers, 380 bytes cmem[0]\n";
        let usage = parse_ptxas_report(log);
        assert_eq!(usage.len(), 2);
        assert_eq!(
            usage[0],
            ResourceUsage {
                function: "a".into(),
                registers: 40,
                stack_bytes: 8,
                spill_stores: 4,
                spill_loads: 4,
                shared_bytes: 8192
            }
        );
        assert_eq!(usage[1].registers, 12);
        assert_eq!(usage[1].spill_stores, 0);
        assert_eq!(usage[1].shared_bytes, 0);
    }
}
