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
    let paths = kernel_entries::kernel_files(dir).map_err(|e| vec![e])?;
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for relative in &paths {
        let path = dir.join(relative);
        match std::fs::read_to_string(&path) {
            Ok(text) => match kernel_entries::parse(relative, &text) {
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

/// Reports every problem as an error of this build and stops it.
fn fail(errors: &[String]) -> ! {
    for error in errors {
        eprintln!("error: {error}");
    }
    std::process::exit(1);
}
