//! Finding and reading manifest files, once per compilation.
//!
//! The manifest is every `*.yaml` in the nearest `manifest/` directory at or above the invoking
//! crate, or what `manifest = "rel/path"` names (a file or a directory, relative to the crate).
//! Files are parsed once per compilation: rustc keeps the macro loaded for a whole crate, so a
//! cache keyed by path and modification time serves every later `#[roofline_op]`.

use crate::diagnostic::{Diagnostic, SourceFile};
use crate::manifest::{FamilyFile, parse_family_file};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;
use std::time::SystemTime;

/// The variable that replaces `CARGO_MANIFEST_DIR` as the base of relative paths. Test harnesses
/// that compile code outside the crate (trybuild) set it so fixtures keep stable relative paths.
pub const BASE_DIR_VAR: &str = "TILEOPS_MANIFEST_BASE_DIR";

/// The manifest files one attribute reads.
#[derive(Debug)]
pub struct Manifest {
    /// Parsed files, sorted by path.
    pub files: Vec<Rc<FamilyFile>>,
    /// Absolute paths read, for `include_bytes!` (so cargo rebuilds when one changes).
    pub tracked: Vec<PathBuf>,
}

/// The directory relative paths start from: the invoking crate.
pub fn base_dir() -> Result<PathBuf, Diagnostic> {
    std::env::var_os(BASE_DIR_VAR)
        .filter(|v| !v.is_empty())
        .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR"))
        .map(PathBuf::from)
        .ok_or_else(|| {
            Diagnostic::unlocated("#[roofline_op] needs CARGO_MANIFEST_DIR: build with cargo")
        })
}

/// Find the manifest files: `explicit` (relative to `base`) or the nearest `manifest/` directory.
pub fn locate(base: &Path, explicit: Option<&str>) -> Result<Vec<PathBuf>, Diagnostic> {
    let root = match explicit {
        Some(rel) => {
            if Path::new(rel).is_absolute() {
                return Err(Diagnostic::unlocated(format!(
                    "manifest = {rel:?}: give a path relative to the crate ({}), not an absolute one",
                    base.display()
                )));
            }
            let path = base.join(rel);
            if !path.exists() {
                return Err(Diagnostic::unlocated(format!(
                    "manifest = {rel:?}: no such file or directory (looked for {})",
                    path.display()
                )));
            }
            path
        }
        None => {
            let mut searched = Vec::new();
            let found = base
                .ancestors()
                .map(|dir| dir.join("manifest"))
                .find(|candidate| {
                    searched.push(candidate.display().to_string());
                    candidate.is_dir()
                });
            found.ok_or_else(|| {
                Diagnostic::unlocated(format!(
                    "no manifest found: #[roofline_op] looks for a `manifest/` directory at or above the crate; searched:\n  {}\nadd one, or point at a file or directory with `manifest = \"rel/path\"`",
                    searched.join("\n  ")
                ))
            })?
        }
    };
    if root.is_file() {
        return Ok(vec![root]);
    }
    let entries = std::fs::read_dir(&root).map_err(|e| {
        Diagnostic::unlocated(format!(
            "cannot read manifest directory {}: {e}",
            root.display()
        ))
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Diagnostic::unlocated(format!(
            "manifest directory {} holds no *.yaml file",
            root.display()
        )));
    }
    Ok(files)
}

/// `path` relative to `base` when possible (`manifest/x.yaml`, `../shared/x.yaml`), for messages.
pub fn display_path(base: &Path, path: &Path) -> String {
    let (base, path) = (normalize(base), normalize(path));
    let common = base
        .components()
        .zip(path.components())
        .take_while(|(a, b)| a == b)
        .count();
    if common == 0 {
        return path.display().to_string();
    }
    let mut rel = PathBuf::new();
    for _ in base.components().skip(common) {
        rel.push("..");
    }
    for part in path.components().skip(common) {
        rel.push(part);
    }
    rel.to_string_lossy().replace('\\', "/")
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

type CacheKey = (PathBuf, Option<SystemTime>, String);

thread_local! {
    // Proc macros run on one thread per crate compilation; `Rc` makes the cache thread-local anyway.
    static CACHE: RefCell<HashMap<CacheKey, Rc<FamilyFile>>> = RefCell::new(HashMap::new());
}

/// Read and parse the files (from the cache when unchanged).
pub fn load(base: &Path, paths: &[PathBuf]) -> Result<Manifest, Diagnostic> {
    let mut files = Vec::new();
    for path in paths {
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        let shown = display_path(base, path);
        let key = (path.clone(), modified, shown.clone());
        if let Some(hit) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
            files.push(hit);
            continue;
        }
        let text = std::fs::read_to_string(path).map_err(|e| {
            Diagnostic::unlocated(format!("cannot read manifest file {shown}: {e}"))
        })?;
        let parsed = Rc::new(parse_family_file(Rc::new(SourceFile {
            display_path: shown,
            text,
        })));
        CACHE.with(|c| c.borrow_mut().insert(key, Rc::clone(&parsed)));
        files.push(parsed);
    }
    let tracked = paths
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect();
    Ok(Manifest { files, tracked })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tileops-load-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn finds_the_nearest_manifest_directory_above_the_crate() {
        let root = temp_dir("nearest");
        std::fs::create_dir_all(root.join("manifest")).unwrap();
        std::fs::write(root.join("manifest/b.yaml"), "").unwrap();
        std::fs::write(root.join("manifest/a.yaml"), "").unwrap();
        std::fs::write(root.join("manifest/notes.txt"), "").unwrap();
        let krate = root.join("crates/op");
        std::fs::create_dir_all(&krate).unwrap();
        let files = locate(&krate, None).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, ["a.yaml", "b.yaml"]);
        assert_eq!(display_path(&krate, &files[0]), "../../manifest/a.yaml");
    }

    #[test]
    fn explicit_paths_are_relative_to_the_crate() {
        let root = temp_dir("explicit");
        std::fs::write(root.join("ops.yaml"), "").unwrap();
        assert_eq!(
            locate(&root, Some("ops.yaml")).unwrap(),
            vec![root.join("ops.yaml")]
        );
        let err = locate(&root, Some("nope.yaml")).unwrap_err();
        assert!(err.message.contains("no such file"), "{}", err.message);
        let err = locate(&root, Some("/abs.yaml")).unwrap_err();
        assert!(err.message.contains("relative"), "{}", err.message);
    }

    #[test]
    fn a_missing_manifest_names_the_directories_searched() {
        let root = temp_dir("missing");
        let err = locate(&root, None);
        // Some ancestor of the temp dir could hold a `manifest/`; only check the message otherwise.
        if let Err(err) = err {
            assert!(
                err.message
                    .contains(&root.join("manifest").display().to_string()),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn files_are_parsed_once_per_modification() {
        let root = temp_dir("cache");
        let path = root.join("a.yaml");
        std::fs::write(&path, "op: {}\n").unwrap();
        let first = load(&root, std::slice::from_ref(&path)).unwrap();
        let second = load(&root, std::slice::from_ref(&path)).unwrap();
        assert!(Rc::ptr_eq(&first.files[0], &second.files[0]));
        assert_eq!(first.files[0].file.display_path, "a.yaml");
    }
}
