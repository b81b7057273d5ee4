//! Finding NVRTC and the CUDA headers, in this order: `$TILEOPS_CUDA_WHEELS/nvidia/cu13`,
//! `CUDA_HOME`, `CUDA_PATH`, the project's pinned wheels (`.cuda-wheels/nvidia/cu13` above the
//! working directory, the executable or this crate), `/usr/local/cuda`, Python's
//! `site-packages/nvidia/cu13`; last, whatever the dynamic linker finds (`LD_LIBRARY_PATH`).
//!
//! NVRTC needs `libnvrtc-builtins` at compile time, found by the dynamic linker. Setting
//! `LD_LIBRARY_PATH` from inside the process does nothing, so tileops loads `libnvrtc-builtins`
//! and then `libnvrtc` by absolute path with `RTLD_NOW | RTLD_GLOBAL` and keeps them loaded:
//! cudarc's later `dlopen("libnvrtc.so.13")` then finds the loaded library by its soname.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::Error;

/// Where NVRTC and the CUDA headers were found.
#[derive(Debug, Clone)]
pub struct Toolkit {
    /// The `libnvrtc` that was preloaded; `None` when the dynamic linker resolved it
    /// (`LD_LIBRARY_PATH`, system paths).
    pub nvrtc_library: Option<PathBuf>,
    /// The directory holding `cuda_fp16.h` and `cuda_bf16.h`.
    pub include_dir: PathBuf,
    /// NVRTC's version (major, minor).
    pub nvrtc_version: (i32, i32),
}

struct Missing {
    detail: String,
    searched: Vec<PathBuf>,
}

/// The toolkit, found and loaded once per process.
///
/// ```no_run
/// let toolkit = tileops::kernels::toolkit()?;
/// println!("NVRTC {:?}, headers in {}", toolkit.nvrtc_version, toolkit.include_dir.display());
/// # Ok::<(), tileops::Error>(())
/// ```
pub fn toolkit() -> Result<&'static Toolkit, Error> {
    static FOUND: OnceLock<Result<Toolkit, Missing>> = OnceLock::new();
    FOUND
        .get_or_init(find)
        .as_ref()
        .map_err(|missing| Error::NvrtcMissing {
            detail: missing.detail.clone(),
            searched: missing
                .searched
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(":"),
        })
}

fn find() -> Result<Toolkit, Missing> {
    let roots = candidate_roots();
    let mut searched = Vec::new();
    let mut nvrtc_library = None;
    let mut nvrtc_root = None;
    let mut load_errors = Vec::new();
    for root in &roots {
        for lib_dir in [
            root.join("lib64"),
            root.join("lib"),
            root.join("targets/x86_64-linux/lib"),
        ] {
            searched.push(lib_dir.clone());
            if let Some(lib) = nvrtc_in(&lib_dir) {
                match preload(&lib_dir, &lib) {
                    Ok(()) => {
                        nvrtc_library = Some(lib);
                        nvrtc_root = Some(root.clone());
                    }
                    Err(err) => load_errors.push(err),
                }
            }
            if nvrtc_library.is_some() {
                break;
            }
        }
        if nvrtc_library.is_some() {
            break;
        }
    }
    // Fall back on the dynamic linker's own search (LD_LIBRARY_PATH, ld.so.cache).
    if nvrtc_library.is_none() && !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        let mut detail = "libnvrtc.so.13 (or .so.12) not found".to_owned();
        if !load_errors.is_empty() {
            detail = format!(
                "{detail}; found but failed to load: {}",
                load_errors.join("; ")
            );
        }
        return Err(Missing { detail, searched });
    }
    let nvrtc_version = nvrtc_version().map_err(|detail| Missing {
        detail,
        searched: searched.clone(),
    })?;

    // Headers from the same root as the library first: mixing toolkit versions breaks them.
    let header_roots = nvrtc_root.iter().chain(roots.iter());
    let mut include_dir = None;
    for root in header_roots {
        let dir = root.join("include");
        searched.push(dir.clone());
        if dir.join("cuda_fp16.h").is_file() && dir.join("cuda_bf16.h").is_file() {
            include_dir = Some(dir);
            break;
        }
    }
    let include_dir = include_dir.ok_or_else(|| Missing {
        detail: "libnvrtc loaded, but no include directory with cuda_fp16.h and cuda_bf16.h"
            .to_owned(),
        searched: searched.clone(),
    })?;
    Ok(Toolkit {
        nvrtc_library,
        include_dir,
        nvrtc_version,
    })
}

/// Directories that may be a CUDA root (holding `lib*/` and `include/`), most specific first.
pub(crate) fn candidate_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    // An explicit wheel directory (install-cuda-wheels.sh's TILEOPS_CUDA_WHEELS; the GPU check
    // points it at the bundle's pinned NVRTC), then the toolkit the environment names.
    if let Some(dir) = std::env::var_os("TILEOPS_CUDA_WHEELS").filter(|v| !v.is_empty()) {
        roots.push(PathBuf::from(dir).join("nvidia/cu13"));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(dir) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            roots.push(PathBuf::from(dir));
        }
    }
    // The project's pinned wheels (scripts/install-cuda-wheels.sh), looked for above the working
    // directory, above the executable (test binaries live in target/*/deps) and above this
    // crate's source.
    let mut bases: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        bases.push(cwd);
    }
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        bases.push(exe_dir);
    }
    bases.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    for base in &bases {
        for dir in base.ancestors() {
            roots.push(dir.join(".cuda-wheels/nvidia/cu13"));
        }
    }
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots.extend(
        site_packages()
            .into_iter()
            .map(|dir| dir.join("nvidia/cu13")),
    );

    let mut unique = Vec::new();
    for root in roots {
        if root.is_dir() && !unique.contains(&root) {
            unique.push(root);
        }
    }
    unique
}

/// Python `site-packages`/`dist-packages` directories where pip puts `nvidia/cu13`.
fn site_packages() -> Vec<PathBuf> {
    let mut prefixes = vec![PathBuf::from("/usr/local/lib"), PathBuf::from("/usr/lib")];
    if let Some(home) = std::env::var_os("HOME") {
        prefixes.push(PathBuf::from(home).join(".local/lib"));
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        prefixes.push(PathBuf::from(venv).join("lib"));
    }
    if let Some(conda) = std::env::var_os("CONDA_PREFIX") {
        prefixes.push(PathBuf::from(conda).join("lib"));
    }
    let mut dirs = vec![PathBuf::from("/usr/lib/python3/dist-packages")];
    for prefix in prefixes {
        let Ok(entries) = std::fs::read_dir(&prefix) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"))
            })
            .collect();
        pythons.sort();
        for python in pythons.into_iter().rev() {
            dirs.push(python.join("site-packages"));
            dirs.push(python.join("dist-packages"));
        }
    }
    dirs
}

/// The NVRTC library in `dir`, if any: CUDA 13 first, then 12.
fn nvrtc_in(dir: &Path) -> Option<PathBuf> {
    ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
        .into_iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
}

/// `libnvrtc-builtins` next to `nvrtc` (`libnvrtc-builtins.so.13.0`; not the `.alt` variant).
fn builtins_in(dir: &Path, nvrtc: &Path) -> Option<PathBuf> {
    let major = nvrtc
        .file_name()?
        .to_str()?
        .strip_prefix("libnvrtc.so")?
        .trim_start_matches('.')
        .to_owned();
    let prefix = if major.is_empty() {
        "libnvrtc-builtins.so".to_owned()
    } else {
        format!("libnvrtc-builtins.so.{major}")
    };
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

#[cfg(unix)]
fn preload(dir: &Path, nvrtc: &Path) -> Result<(), String> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    static HANDLES: std::sync::Mutex<Vec<Library>> = std::sync::Mutex::new(Vec::new());
    let mut handles = HANDLES.lock().unwrap_or_else(|poison| poison.into_inner());
    if let Some(builtins) = builtins_in(dir, nvrtc) {
        // SAFETY: loading NVIDIA's library runs its initialisers, which have no preconditions.
        let lib = unsafe { Library::open(Some(&builtins), RTLD_NOW | RTLD_GLOBAL) }
            .map_err(|e| format!("{}: {e}", builtins.display()))?;
        handles.push(lib);
    }
    // SAFETY: as above.
    let lib = unsafe { Library::open(Some(nvrtc), RTLD_NOW | RTLD_GLOBAL) }
        .map_err(|e| format!("{}: {e}", nvrtc.display()))?;
    handles.push(lib);
    Ok(())
}

#[cfg(not(unix))]
fn preload(_dir: &Path, _nvrtc: &Path) -> Result<(), String> {
    // Elsewhere the loader's own search (PATH) is all there is.
    Err("preloading is implemented for unix only".to_owned())
}

fn nvrtc_version() -> Result<(i32, i32), String> {
    let call = || {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: two valid out-pointers.
        let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        status
            .result()
            .map(|()| (major, minor))
            .map_err(|e| format!("nvrtcVersion failed: {e}"))
    };
    // cudarc panics when a symbol is missing from the library it loaded.
    std::panic::catch_unwind(call)
        .unwrap_or_else(|_| Err("libnvrtc loaded, but nvrtcVersion is missing".to_owned()))
}
