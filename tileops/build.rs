//! The build script: generates the `tileops::kernels` statics from the kernel files' `@entry`
//! lines (see `build/kernel_entries.rs`), and makes cargo rebuild tileops when a file appears in
//! or disappears from `manifest/` or `kernels/`.
//!
//! `#[roofline_op]` already tracks every manifest file it reads (`include_bytes!`), so an edit
//! triggers a rebuild; a *new* family file is only noticed through the directory itself.

#[path = "build/kernel_entries.rs"]
mod kernel_entries;

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=manifest");
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo:rerun-if-changed=build");
    println!("cargo:rerun-if-changed=build.rs");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    match kernel_sources(&manifest_dir.join("kernels")) {
        Ok(code) => {
            let path = out_dir.join("kernel_sources.rs");
            if let Err(err) = std::fs::write(&path, code) {
                fail(&[format!("writing {}: {err}", path.display())]);
            }
        }
        Err(errors) => fail(&errors),
    }
}

/// The generated statics, or every problem of every kernel file.
fn kernel_sources(dir: &Path) -> Result<String, Vec<String>> {
    let mut paths = Vec::new();
    cu_files(dir, &mut paths).map_err(|e| vec![e])?;
    paths.sort();
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for path in &paths {
        let relative = path.strip_prefix(dir).ok().and_then(Path::to_str);
        let Some(relative) = relative else {
            errors.push(format!("{}: not a UTF-8 path", path.display()));
            continue;
        };
        let relative = relative.replace(std::path::MAIN_SEPARATOR, "/");
        match std::fs::read_to_string(path) {
            Ok(text) => match kernel_entries::parse(&relative, &text) {
                Ok(file) => files.push(file),
                Err(problems) => errors.extend(problems),
            },
            Err(err) => errors.push(format!("{}: {err}", path.display())),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    kernel_entries::render(&files).map_err(|e| vec![e])
}

/// The `.cu` files in `dir` and its family directories (one level: `kernels/<family>/<op>.cu`).
fn cu_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let listing = std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    for entry in listing {
        let path = entry
            .map_err(|e| format!("reading {}: {e}", dir.display()))?
            .path();
        if path.is_dir() {
            let family =
                std::fs::read_dir(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            for entry in family {
                let file = entry
                    .map_err(|e| format!("reading {}: {e}", path.display()))?
                    .path();
                if file.extension().is_some_and(|ext| ext == "cu") {
                    out.push(file);
                }
            }
        } else if path.extension().is_some_and(|ext| ext == "cu") {
            out.push(path);
        }
    }
    Ok(())
}

/// Reports every problem as an error of this build and stops it.
fn fail(errors: &[String]) -> ! {
    for error in errors {
        eprintln!("error: {error}");
    }
    std::process::exit(1);
}
