//! Finding NVRTC and the CUDA headers, in the order of [`crate::libraries::search_order`] (named
//! CUDA roots, `/usr/local/cuda`, the dynamic loader's own search, a named wheels directory;
//! never the working directory or its ancestors).
//!
//! NVRTC needs `libnvrtc-builtins` at compile time, found by the dynamic linker. Setting
//! `LD_LIBRARY_PATH` from inside the process does nothing, so tileops loads `libnvrtc-builtins`
//! and then `libnvrtc` by absolute path with `RTLD_NOW | RTLD_GLOBAL` and keeps them loaded:
//! cudarc's later `dlopen("libnvrtc.so.13")` then finds the loaded library by its soname.
//!
//! With the `dynamic-linking` feature, NVRTC is linked into the executable and the dynamic loader
//! found it when the program started: tileops then searches only for the headers.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::Error;
use crate::libraries::{self, Location};

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
    /// The search order, described step by step.
    searched: String,
}

/// The toolkit, found and loaded once per process, in the order of
/// [`search_order`](crate::libraries::search_order). Without one, the error names every step of
/// that order, so the message says which variable to set.
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
            searched: missing.searched.clone(),
        })
}

fn find() -> Result<Toolkit, Missing> {
    let order = libraries::search_order();
    let searched = || libraries::describe(&order);
    let roots: Vec<&PathBuf> = order
        .iter()
        .filter_map(|step| match &step.location {
            Ok(Location::Root(dir)) => Some(dir),
            _ => None,
        })
        .collect();
    // A linked NVRTC (the `dynamic-linking` feature) is the one every NVRTC call goes to.
    let linked = libraries::already_loaded(&libraries::NVRTC_SONAMES[..1]);
    let mut found: Option<(Option<PathBuf>, Option<&PathBuf>)> = linked.then_some((None, None));
    let mut load_errors = Vec::new();
    'steps: for step in order.iter().filter(|_| !linked) {
        match &step.location {
            Err(_) => {}
            Ok(Location::Loader) => {
                if libraries::loader_opens(libraries::NVRTC_SONAMES) {
                    found = Some((None, None));
                    break 'steps;
                }
            }
            Ok(Location::Root(root)) => {
                for lib_dir in libraries::lib_dirs(root) {
                    let Some(lib) = nvrtc_in(&lib_dir) else {
                        continue;
                    };
                    match preload(&lib_dir, &lib) {
                        Ok(()) => {
                            found = Some((Some(lib), Some(root)));
                            break 'steps;
                        }
                        Err(err) => load_errors.push(err),
                    }
                }
            }
        }
    }
    let Some((nvrtc_library, nvrtc_root)) = found else {
        let mut detail = "libnvrtc.so.13 (or .so.12) not found".to_owned();
        if !load_errors.is_empty() {
            detail = format!(
                "{detail}; found but failed to load: {}",
                load_errors.join("; ")
            );
        }
        return Err(Missing {
            detail,
            searched: searched(),
        });
    };
    let nvrtc_version = nvrtc_version().map_err(|detail| Missing {
        detail,
        searched: searched(),
    })?;

    // Headers from the same root as the library first: mixing toolkit versions breaks them. A
    // library the loader found (a distribution's package) has its headers in /usr/include.
    let usr_include = PathBuf::from("/usr");
    let header_roots = nvrtc_root
        .into_iter()
        .chain(roots.iter().copied())
        .chain(std::iter::once(&usr_include));
    let mut looked_in = Vec::new();
    let mut include_dir = None;
    for root in header_roots {
        let dir = root.join("include");
        if dir.join("cuda_fp16.h").is_file() && dir.join("cuda_bf16.h").is_file() {
            include_dir = Some(dir);
            break;
        }
        looked_in.push(dir.display().to_string());
    }
    let include_dir = include_dir.ok_or_else(|| Missing {
        detail: format!(
            "libnvrtc loaded, but no include directory with cuda_fp16.h and cuda_bf16.h (looked in \
             {})",
            looked_in.join(", ")
        ),
        searched: searched(),
    })?;
    Ok(Toolkit {
        nvrtc_library,
        include_dir,
        nvrtc_version,
    })
}

/// The NVRTC library in `dir`, if any: CUDA 13 first, then 12.
fn nvrtc_in(dir: &Path) -> Option<PathBuf> {
    libraries::NVRTC_SONAMES
        .iter()
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

/// Loads `libnvrtc-builtins` (when it is next to `nvrtc`) and then `nvrtc`, globally: NVRTC
/// `dlopen`s the builtins by soname at compile time, which then finds the loaded one.
fn preload(dir: &Path, nvrtc: &Path) -> Result<(), String> {
    if let Some(builtins) = builtins_in(dir, nvrtc) {
        libraries::open_global(&builtins)?;
    }
    libraries::open_global(nvrtc)
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
