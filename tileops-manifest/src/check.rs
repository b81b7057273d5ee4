//! Whole-manifest checks: every entry of every file, spec-only entries included, as
//! `tileops-manifest check` and the manifest lint run them.
//!
//! The macro checks one entry when an op names it; this module checks all of them, with the same
//! passes and the same diagnostics, so a manifest can be validated before any op is written
//! (TileOPs's `validate_manifest.py`, for Rust).
//!
//! ```
//! use std::rc::Rc;
//! use tileops_manifest::check::check_families;
//! use tileops_manifest::diagnostic::SourceFile;
//! use tileops_manifest::manifest::parse_family_file;
//!
//! let text = "\
//! softmax:
//!   family: reduction
//!   status: spec-only
//!   signature:
//!     inputs: {x: {dtype: float16}}
//!   roofline: {flops: \"4 * numel\", bytes: \"2 * numel * elem_bytes\"}
//! ";
//! let file = parse_family_file(Rc::new(SourceFile {
//!     display_path: "reduction.yaml".into(),
//!     text: text.into(),
//! }));
//! let problems = check_families(&[Rc::new(file)]);
//! let rendered = problems[0].render();
//! assert!(rendered.starts_with("reduction.yaml:6:"), "{rendered}");
//! assert!(rendered.contains("`numel`"), "{rendered}");
//! ```

use crate::diagnostic::{Diagnostic, SourceFile};
use crate::load;
use crate::manifest::{self, Entry, FamilyFile, parse_family_file};
use crate::validate;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Every structural and formula problem in a set of family files that form one manifest,
/// spec-only entries included, and op names declared twice across the set.
pub fn check_families(files: &[Rc<FamilyFile>]) -> Vec<Diagnostic> {
    let mut problems = Vec::new();
    let mut seen: Vec<(&str, &Rc<FamilyFile>, usize)> = Vec::new();
    for file in files {
        problems.extend(file.errors.iter().cloned());
        for (name, offset, node) in &file.entries {
            if let Some((_, first, first_offset)) = seen.iter().find(|(n, _, _)| n == name) {
                let (line, _) = first.file.line_col(*first_offset);
                problems.push(Diagnostic::at(
                    &file.file,
                    *offset,
                    name.len(),
                    format!(
                        "op `{name}` is declared twice: first at {}:{line}",
                        first.file.display_path
                    ),
                ));
                continue;
            }
            seen.push((name, file, *offset));
            let (entry, errors) = manifest::check_entry(&file.file, name, *offset, node);
            problems.extend(errors);
            if let Some(entry) = entry
                && let Err(errors) = validate::check(&entry, false)
            {
                problems.extend(errors);
            }
        }
    }
    problems
}

/// What checking one manifest (a file, or a directory of family files) found.
#[derive(Debug)]
pub struct ManifestReport {
    /// The path as given.
    pub path: PathBuf,
    /// Family files read.
    pub files: usize,
    /// Entries found in them.
    pub entries: usize,
    /// Every problem, in file order.
    pub problems: Vec<Diagnostic>,
}

/// Check one manifest: `path` is a family file, or a directory whose `*.yaml` / `*.yml` files
/// (not recursive, sorted by name) form one manifest, op names unique across them. Paths in
/// messages are shown relative to `base`.
///
/// Files that cannot be read are problems of the report, not a failure of the call: every other
/// file is still checked.
pub fn check_manifest(base: &Path, path: &Path) -> ManifestReport {
    let (files, mut problems) = read_manifest(base, path);
    problems.extend(check_families(&files));
    ManifestReport {
        path: path.to_path_buf(),
        files: files.len(),
        entries: files.iter().map(|f| f.entries.len()).sum(),
        problems,
    }
}

/// Every entry of a manifest (a family file or a directory, as for [`check_manifest`]), checked
/// structurally, for tools and tests that read manifests: or every problem found, when there is
/// any (formulas are not checked here; [`check_manifest`] checks them).
///
/// ```
/// use std::path::Path;
/// use tileops_manifest::check::entries;
/// use tileops_manifest::manifest::Status;
///
/// let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
/// let all = entries(&repo, Path::new("manifest")).expect("the repository manifest is clean");
/// let softmax = all.iter().find(|e| e.name == "softmax").unwrap();
/// assert_eq!((softmax.family.as_str(), softmax.status), ("reduction", Status::Implemented));
/// ```
pub fn entries(base: &Path, path: &Path) -> Result<Vec<Entry>, Vec<Diagnostic>> {
    let (files, mut problems) = read_manifest(base, path);
    let mut entries = Vec::new();
    for file in &files {
        problems.extend(file.errors.iter().cloned());
        for (name, offset, node) in &file.entries {
            let (entry, errors) = manifest::check_entry(&file.file, name, *offset, node);
            problems.extend(errors);
            entries.extend(entry);
        }
    }
    if problems.is_empty() {
        Ok(entries)
    } else {
        Err(problems)
    }
}

/// Read and parse a manifest's family files; files that cannot be read are problems, and every
/// other file is still read.
fn read_manifest(base: &Path, path: &Path) -> (Vec<Rc<FamilyFile>>, Vec<Diagnostic>) {
    // Relative paths are relative to `base`, so messages show them as the user typed them.
    let path = &base.join(path);
    let mut problems = Vec::new();
    let mut parsed = Vec::new();
    match family_files(base, path) {
        Ok(files) => {
            for file in files {
                match load::load(base, std::slice::from_ref(&file)) {
                    Ok(manifest) => parsed.extend(manifest.files),
                    Err(problem) => problems.push(problem),
                }
            }
        }
        Err(problem) => problems.push(problem),
    }
    (parsed, problems)
}

/// `check PATH…` as the commands run it (`tileops-manifest check`, `tileops manifest check`): every
/// problem of each manifest with its located message, then, unless `quiet`, one summary line per
/// manifest, all on `out`. Paths are shown relative to `base`. Returns whether any manifest had a
/// problem (exit status 1). A closed pipe (`| head`) ends the output quietly; every manifest is
/// still checked, so the answer counts them all.
pub fn run_command(
    base: &Path,
    paths: &[PathBuf],
    quiet: bool,
    out: &mut dyn std::io::Write,
) -> bool {
    let mut failed = false;
    let mut open = true;
    for path in paths {
        let report = check_manifest(base, path);
        failed |= !report.problems.is_empty();
        if !open {
            continue;
        }
        for problem in &report.problems {
            open &= writeln!(out, "error: {}\n", problem.render()).is_ok();
        }
        if !quiet && open {
            let verdict = match report.problems.len() {
                0 => "ok".to_owned(),
                1 => "1 problem".to_owned(),
                n => format!("{n} problems"),
            };
            let shown = load::display_path(base, path);
            let count = |n: usize, one: &str, many: &str| {
                format!("{n} {}", if n == 1 { one } else { many })
            };
            open &= writeln!(
                out,
                "{shown}: {}, {}: {verdict}",
                count(report.files, "file", "files"),
                count(report.entries, "entry", "entries")
            )
            .is_ok();
        }
    }
    let _ = out.flush();
    failed
}

/// The family files of a manifest path (see [`check_manifest`]).
fn family_files(base: &Path, path: &Path) -> Result<Vec<PathBuf>, Diagnostic> {
    let shown = load::display_path(base, path);
    let metadata = std::fs::metadata(path)
        .map_err(|e| Diagnostic::unlocated(format!("cannot read manifest {shown}: {e}")))?;
    if !metadata.is_dir() {
        // A file; `load` says why when it is not a regular, readable one.
        return Ok(vec![path.to_path_buf()]);
    }
    load::yaml_files_in(path, &shown)
}

/// Parse one family file from text (for tests and tools that hold the text already).
pub fn family_from_text(display_path: &str, text: &str) -> Rc<FamilyFile> {
    Rc::new(parse_family_file(Rc::new(SourceFile {
        display_path: display_path.to_owned(),
        text: text.to_owned(),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRY: &str = "\
softmax:
  family: reduction
  status: spec-only
  signature:
    inputs: {x: {dtype: float16, shape: \"[M, N]\"}}
  roofline: {flops: \"4 * M * N\", bytes: \"2 * M * N * elem_bytes\"}
";

    #[test]
    fn a_clean_manifest_has_no_problems() {
        assert!(check_families(&[family_from_text("a.yaml", ENTRY)]).is_empty());
    }

    #[test]
    fn names_declared_twice_across_files_are_reported_at_the_second() {
        let problems = check_families(&[
            family_from_text("a.yaml", ENTRY),
            family_from_text("b.yaml", ENTRY),
        ]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let text = problems[0].render();
        assert!(
            text.starts_with("b.yaml:1:1: op `softmax` is declared twice: first at a.yaml:1"),
            "{text}"
        );
    }

    #[test]
    fn spec_only_formulas_are_checked() {
        let bad = ENTRY.replace("4 * M * N", "4 * M * Q");
        let problems = check_families(&[family_from_text("a.yaml", &bad)]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].render().contains("`Q`"),
            "{}",
            problems[0].render()
        );
    }

    #[test]
    fn every_file_of_a_directory_is_checked_and_unreadable_ones_are_problems() {
        let dir =
            std::env::temp_dir().join(format!("tileops-manifest-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.yaml"), ENTRY).unwrap();
        std::fs::write(dir.join("b.yaml"), ENTRY.replace("softmax", "log_softmax")).unwrap();
        std::fs::write(dir.join("notes.txt"), "not a manifest").unwrap();
        let report = check_manifest(&dir, &dir);
        assert_eq!((report.files, report.entries), (2, 2));
        assert!(report.problems.is_empty(), "{:?}", report.problems);

        let missing = check_manifest(&dir, &dir.join("absent.yaml"));
        assert_eq!(missing.files, 0);
        assert!(missing.problems[0].render().contains("absent.yaml"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
