//! Where tileops finds NVIDIA's libraries (NVRTC, cuBLAS, cuBLASLt) and the CUDA headers, and
//! how it loads them.
//!
//! Loading a shared library runs its initialisers (ELF constructors) inside this process, with
//! this process's rights, before any of its functions is called. So tileops only opens libraries
//! from places that the user or the system administrator named, in this order
//! ([`search_order`]), and takes the first place that has the library:
//!
//! 1. `$TILEOPS_CUDA_PATH`: a CUDA root, laid out like a toolkit (`lib64/` or `lib/` holding the
//!    libraries, `include/` the headers). A pip wheel tree's `nvidia/cu13` is such a root too.
//! 2. `$CUDA_HOME`, then `$CUDA_PATH`: CUDA roots, as other CUDA software reads them.
//! 3. `/usr/local/cuda`, the system toolkit.
//! 4. The dynamic loader's own search, by soname (`libnvrtc.so.13`): `LD_LIBRARY_PATH`, the
//!    executable's `RUNPATH`, `/etc/ld.so.cache`, `/lib` and `/usr/lib`.
//! 5. `$TILEOPS_CUDA_WHEELS/nvidia/cu13`: a directory of NVIDIA's pip wheels, named explicitly,
//!    such as the one `scripts/install-cuda-wheels.sh` fills (`<repo>/.cuda-wheels` by default;
//!    `scripts/test.sh` and the other scripts export it), or a Python environment's
//!    `site-packages`.
//!
//! Never searched: the current directory, its ancestors, and the executable's directory and its
//! ancestors. An archive unpacked there, or a directory another user can write, could otherwise
//! plant a `libnvrtc.so.13` whose constructor an ordinary tileops program would run. A variable
//! set to a relative path is skipped for the same reason (it would resolve against the current
//! directory), and the error says so.
//!
//! The Python environment on `PATH` is not searched on its own: which environment that is depends
//! on shims and version files (pyenv reads `.python-version` in the current directory and its
//! ancestors), which is the kind of ambient choice this order avoids. Point
//! `TILEOPS_CUDA_WHEELS` at its `site-packages` to use its NVIDIA wheels; that is a statement that
//! you trust every package installed there.
//!
//! ```
//! use tileops::libraries::{Location, search_order};
//!
//! let order = search_order();
//! assert_eq!(order[0].source, "TILEOPS_CUDA_PATH");
//! // The loader's own search comes after the named roots and /usr/local/cuda.
//! assert!(order.iter().any(|step| step.location == Ok(Location::Loader)));
//! // No step is relative to the current directory.
//! for step in &order {
//!     if let Ok(Location::Root(dir)) = &step.location {
//!         assert!(dir.is_absolute(), "{step}");
//!     }
//! }
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::Error;

/// The variable naming a CUDA root searched before anything else.
pub const CUDA_PATH_VAR: &str = "TILEOPS_CUDA_PATH";

/// The variable naming a directory of NVIDIA pip wheels (holding `nvidia/cu13`), searched last.
pub const CUDA_WHEELS_VAR: &str = "TILEOPS_CUDA_WHEELS";

/// The system toolkit's conventional location.
const SYSTEM_ROOT: &str = "/usr/local/cuda";

/// Where one step of the search looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A CUDA root: libraries in `lib64/`, `lib/` or `targets/x86_64-linux/lib/`, headers in
    /// `include/`.
    Root(PathBuf),
    /// The dynamic loader's own search by soname (`LD_LIBRARY_PATH`, `RUNPATH`,
    /// `/etc/ld.so.cache`, the system library directories).
    Loader,
}

/// One step of [`search_order`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchStep {
    /// What the step comes from: `"TILEOPS_CUDA_PATH"`, `"CUDA_HOME"`, `"CUDA_PATH"`,
    /// `"system"`, `"loader"` or `"TILEOPS_CUDA_WHEELS"`.
    pub source: &'static str,
    /// Where it looks, or why it is skipped (`"unset"`, a relative path).
    pub location: Result<Location, String>,
}

impl fmt::Display for SearchStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.location, self.source) {
            (Ok(Location::Loader), _) => f.write_str(
                "the dynamic loader (LD_LIBRARY_PATH, RUNPATH, /etc/ld.so.cache, /lib, /usr/lib)",
            ),
            (Ok(Location::Root(dir)), "system") => write!(f, "{}", dir.display()),
            (Ok(Location::Root(dir)), source) => write!(f, "{source}: {}", dir.display()),
            (Err(why), source) => write!(f, "{source} ({why})"),
        }
    }
}

/// The places searched for NVRTC, cuBLAS and cuBLASLt, in order (see the [module
/// documentation](self) for the order and why). Every step is listed, skipped ones with the
/// reason, so that an error can show the whole order.
///
/// ```
/// let order = tileops::libraries::search_order();
/// let sources: Vec<_> = order.iter().map(|step| step.source).collect();
/// assert_eq!(
///     sources,
///     ["TILEOPS_CUDA_PATH", "CUDA_HOME", "CUDA_PATH", "system", "loader", "TILEOPS_CUDA_WHEELS"]
/// );
/// ```
pub fn search_order() -> Vec<SearchStep> {
    let root_var = |var: &'static str, suffix: &str| SearchStep {
        source: var,
        location: match std::env::var_os(var).filter(|v| !v.is_empty()) {
            None => Err("unset".to_owned()),
            Some(value) => {
                let dir = PathBuf::from(value);
                if dir.is_absolute() {
                    Ok(Location::Root(dir.join(suffix)))
                } else {
                    Err(format!(
                        "{} skipped: not an absolute path, and the current directory is never \
                         searched",
                        dir.display()
                    ))
                }
            }
        },
    };
    vec![
        root_var(CUDA_PATH_VAR, ""),
        root_var("CUDA_HOME", ""),
        root_var("CUDA_PATH", ""),
        SearchStep {
            source: "system",
            location: Ok(Location::Root(PathBuf::from(SYSTEM_ROOT))),
        },
        SearchStep {
            source: "loader",
            location: Ok(Location::Loader),
        },
        root_var(CUDA_WHEELS_VAR, "nvidia/cu13"),
    ]
}

/// The order as one line, for error messages: `1. TILEOPS_CUDA_PATH (unset); 2. ...`.
pub(crate) fn describe(order: &[SearchStep]) -> String {
    order
        .iter()
        .enumerate()
        .map(|(i, step)| format!("{}. {step}", i + 1))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The directories of a CUDA root that may hold its libraries, most usual first.
pub(crate) fn lib_dirs(root: &Path) -> [PathBuf; 3] {
    [
        root.join("lib64"),
        root.join("lib"),
        root.join("targets/x86_64-linux/lib"),
    ]
}

/// Loads the library at `path` with `RTLD_NOW | RTLD_GLOBAL` and keeps it loaded for the life of
/// the process, so that cudarc's later `dlopen` by soname finds it already loaded.
///
/// Only call it with a path found through [`search_order`].
#[cfg(unix)]
pub(crate) fn open_global(path: &Path) -> Result<(), String> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: opening a library runs its initialisers in this process: the precondition is that
    // the file is trusted code. `path` lies in a location of `search_order()`, which the user or
    // the system named (never the working directory, the executable's or their ancestors).
    let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // Never unloaded: cudarc resolves its symbols from it for as long as the process runs.
    std::mem::forget(lib);
    Ok(())
}

#[cfg(not(unix))]
pub(crate) fn open_global(path: &Path) -> Result<(), String> {
    // Elsewhere the loader's own search (PATH) is all there is.
    Err(format!(
        "{}: preloading is implemented for unix only",
        path.display()
    ))
}

/// The sonames the driver is asked for by the dynamic loader's own search: the driver's own
/// soname first (every driver installation has it), then the development link.
pub(crate) const DRIVER_SONAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// NVRTC's sonames, CUDA 13 first.
pub(crate) const NVRTC_SONAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

/// cuBLASLt's and cuBLAS's sonames (CUDA 13), in the order they must be loaded.
pub(crate) const CUBLAS_SONAMES: &[&str] = &["libcublasLt.so.13", "libcublas.so.13"];

/// Whether every library of `sonames` is already loaded in this process: linked into the
/// executable (cudarc's `dynamic-linking`, which tileops's `dynamic-linking` feature selects and
/// candle builds with), or loaded by the host application. Such a library is used as it is: it
/// was loaded before tileops ran, by the program's own choice, and a second copy from the search
/// order would only shadow it.
///
/// Never loads anything (`RTLD_NOLOAD`), so it runs no initialiser.
#[cfg(unix)]
pub(crate) fn already_loaded(sonames: &[&str]) -> bool {
    use libloading::os::unix::{Library, RTLD_LAZY};
    // libloading does not name RTLD_NOLOAD; libc has every platform's value.
    use libc::RTLD_NOLOAD;
    sonames.iter().all(|soname| {
        // SAFETY: RTLD_NOLOAD only looks the soname up among the libraries already loaded: it
        // opens no file and runs no initialiser. The handle only raises a reference count.
        unsafe { Library::open(Some(*soname), RTLD_LAZY | RTLD_NOLOAD) }.is_ok()
    })
}

#[cfg(not(unix))]
pub(crate) fn already_loaded(_sonames: &[&str]) -> bool {
    false
}

/// Loads the first library of `sonames` the dynamic loader's own search finds (the
/// [`Location::Loader`] step), with `RTLD_NOW | RTLD_GLOBAL`, and keeps it loaded; `false` when
/// none is found. A library already loaded (linked) is found at once.
///
/// tileops probes this way rather than through cudarc's `is_culib_present`, which exists only in
/// cudarc's `dynamic-loading` mode: the same code then serves both modes, and a program whose
/// cudarc another crate put in `dynamic-linking` (candle's CUDA backend does) still builds.
pub(crate) fn loader_opens(sonames: &[&str]) -> bool {
    sonames.iter().any(|soname| {
        // SAFETY: loading by soname runs the initialisers of whatever the loader's own path
        // (system configuration, LD_LIBRARY_PATH, RUNPATH) provides: trusted by definition, the
        // step of the search order that names it.
        match unsafe { libloading::Library::new(*soname) } {
            Ok(lib) => {
                // Kept for the life of the process, as cudarc keeps the libraries it loads.
                std::mem::forget(lib);
                true
            }
            Err(_) => false,
        }
    })
}

/// Where cuBLAS and cuBLASLt were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cublas {
    /// The directory `libcublasLt.so.13` and `libcublas.so.13` were loaded from; `None` when the
    /// dynamic loader's own search found them.
    pub library_dir: Option<PathBuf>,
}

/// Finds and loads cuBLASLt and cuBLAS (CUDA 13) once per process, in [`search_order`]; the
/// GEMM op calls it before its first cuBLAS call.
///
/// cudarc asks the dynamic loader for the libraries by soname; where they live in a CUDA root
/// that is not on the loader's path, tileops loads them by absolute path with `RTLD_GLOBAL`
/// first, and cudarc's `dlopen("libcublasLt.so.13")` then matches the loaded library.
///
/// ```no_run
/// match tileops::libraries::cublas() {
///     Ok(found) => println!("cuBLAS from {:?}", found.library_dir),
///     Err(err) => eprintln!("{err}"), // names every step of the search order
/// }
/// ```
pub fn cublas() -> Result<&'static Cublas, Error> {
    static LOADED: OnceLock<Result<Cublas, (String, String)>> = OnceLock::new();
    LOADED
        .get_or_init(find_cublas)
        .as_ref()
        .map_err(|(detail, searched)| Error::CublasMissing {
            detail: detail.clone(),
            searched: searched.clone(),
        })
}

fn find_cublas() -> Result<Cublas, (String, String)> {
    if already_loaded(CUBLAS_SONAMES) {
        return Ok(Cublas { library_dir: None });
    }
    let order = search_order();
    let mut load_errors = Vec::new();
    for step in &order {
        match &step.location {
            Err(_) => {}
            Ok(Location::Loader) => {
                // cuBLAS links against cuBLASLt: load it first.
                if loader_opens(&CUBLAS_SONAMES[..1]) && loader_opens(&CUBLAS_SONAMES[1..]) {
                    return Ok(Cublas { library_dir: None });
                }
            }
            Ok(Location::Root(root)) => {
                for dir in lib_dirs(root) {
                    let lt = dir.join("libcublasLt.so.13");
                    let blas = dir.join("libcublas.so.13");
                    if !(lt.is_file() && blas.is_file()) {
                        continue;
                    }
                    // cuBLAS links against cuBLASLt: load it first.
                    match open_global(&lt).and_then(|()| open_global(&blas)) {
                        Ok(()) => {
                            return Ok(Cublas {
                                library_dir: Some(dir),
                            });
                        }
                        Err(err) => load_errors.push(err),
                    }
                }
            }
        }
    }
    let mut detail = "libcublasLt.so.13 and libcublas.so.13 not found".to_owned();
    if !load_errors.is_empty() {
        detail = format!(
            "{detail}; found but failed to load: {}",
            load_errors.join("; ")
        );
    }
    Err((detail, describe(&order)))
}

/// Runs a cudarc call that panics when a library or one of its symbols is missing (cudarc's
/// dynamic loading does), returning the panic's message instead: one home for the device's and
/// cuBLAS's guards, which each map it to their own error.
pub(crate) fn catch_library_panic<T>(call: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).map_err(|panic| {
        panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "panicked".to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_is_listed_and_described() {
        let order = search_order();
        assert_eq!(order.len(), 6);
        let text = describe(&order);
        for needle in [
            "1. TILEOPS_CUDA_PATH",
            "CUDA_HOME",
            "/usr/local/cuda",
            "dynamic loader",
            "6. TILEOPS_CUDA_WHEELS",
        ] {
            assert!(text.contains(needle), "{needle} missing from {text}");
        }
    }

    #[test]
    fn the_lib_directories_of_a_root() {
        let dirs = lib_dirs(Path::new("/opt/cuda"));
        assert_eq!(dirs[0], Path::new("/opt/cuda/lib64"));
        assert_eq!(dirs[1], Path::new("/opt/cuda/lib"));
    }
}
