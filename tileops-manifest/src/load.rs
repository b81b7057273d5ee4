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
            if std::fs::symlink_metadata(&path).is_err() {
                return Err(Diagnostic::unlocated(format!(
                    "manifest = {rel:?}: no such file or directory (looked for {})",
                    path.display()
                )));
            }
            // A dangling link, a link loop, a FIFO or a device is refused here, by its metadata,
            // before anything opens it (opening a FIFO blocks until a writer comes).
            kind(&path).map_err(|why| {
                Diagnostic::unlocated(format!("manifest = {rel:?}: {} {why}", path.display()))
            })?;
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
    if kind(&root).is_ok_and(|k| k == Kind::File) {
        return Ok(vec![root]);
    }
    let files = yaml_files_in(&root, &root.display().to_string())?;
    // A `*.yaml` that is not a regular file is a mistake to report, not a file to skip quietly.
    for file in &files {
        if let Err(why) = kind(file).and_then(|k| match k {
            Kind::File => Ok(()),
            Kind::Dir => Err("is a directory, not a manifest file".to_owned()),
        }) {
            return Err(Diagnostic::unlocated(format!(
                "manifest directory {}: {} {why}",
                root.display(),
                file.display()
            )));
        }
    }
    Ok(files)
}

/// The `*.yaml` / `*.yml` files of a manifest directory (not recursive), sorted by name; an error
/// when it cannot be read or holds none. `shown` is how messages name the directory.
pub fn yaml_files_in(dir: &Path, shown: &str) -> Result<Vec<PathBuf>, Diagnostic> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Diagnostic::unlocated(format!("cannot read manifest directory {shown}: {e}"))
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Diagnostic::unlocated(format!(
            "manifest directory {shown} holds no *.yaml file"
        )));
    }
    Ok(files)
}

/// The largest manifest file read, in bytes: TileOPs's whole manifest is well under 1 MiB, and the
/// YAML reader's own budget stops at 64 MiB of scalar text.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// What a manifest path may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
}

/// What `path` is, from its metadata alone (nothing is opened), or why it cannot be a manifest:
/// the text completes "PATH …" ("is a FIFO (named pipe), not a file").
fn kind(path: &Path) -> Result<Kind, String> {
    let link = std::fs::symlink_metadata(path).map_err(|e| format!("cannot be read: {e}"))?;
    let meta = if link.file_type().is_symlink() {
        let target =
            std::fs::read_link(path).map_or_else(|_| "?".to_owned(), |t| t.display().to_string());
        match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!(
                    "is a dangling symbolic link: its target `{target}` does not exist"
                ));
            }
            // ELOOP: a link that (eventually) points at itself.
            Err(e) => {
                return Err(format!(
                    "is a symbolic link that cannot be followed (to `{target}`): {e}"
                ));
            }
        }
    } else {
        link
    };
    let file_type = meta.file_type();
    if file_type.is_file() {
        return Ok(Kind::File);
    }
    if file_type.is_dir() {
        return Ok(Kind::Dir);
    }
    Err(format!("is {}, not a file", special_kind(&file_type)))
}

/// A name for a file type that is neither a regular file nor a directory.
fn special_kind(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    let _ = file_type;
    "a special file"
}

/// Read one manifest file's text: a regular file (checked before opening, and again on the open
/// handle, so a file swapped for a FIFO in between cannot block), at most [`MAX_FILE_BYTES`],
/// UTF-8. `shown` is the path for messages.
pub fn read_text(path: &Path, shown: &str) -> Result<String, Diagnostic> {
    use std::io::Read;
    let fail = |why: String| Diagnostic::unlocated(format!("manifest file {shown} {why}"));
    match kind(path).map_err(fail)? {
        Kind::File => {}
        Kind::Dir => return Err(fail("is a directory, not a manifest file".into())),
    }
    let mut file = open(path).map_err(|e| fail(format!("cannot be opened: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| fail(format!("cannot be read: {e}")))?;
    if !meta.file_type().is_file() {
        return Err(fail(format!(
            "is {}, not a file",
            special_kind(&meta.file_type())
        )));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(fail(format!(
            "is too large: {} bytes, more than the {MAX_FILE_BYTES} a manifest file may have",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    // `take` also bounds a file that grows while it is read.
    file.by_ref()
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(format!("cannot be read: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(fail(format!(
            "is too large: more than the {MAX_FILE_BYTES} bytes a manifest file may have"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = 1 + valid.iter().filter(|&&b| b == b'\n').count();
        fail(format!(
            "is not UTF-8 text: invalid byte at offset {} (line {line})",
            valid.len()
        ))
    })
}

/// Open for reading without waiting: with O_NONBLOCK, opening a FIFO returns at once instead of
/// waiting for a writer (reads of a regular file ignore the flag). std has no constant for it, and
/// its value differs by OS.
fn open(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, 0o4000);
    #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, 0x0004);
    options.open(path)
}

/// `path` relative to `base` when possible (`manifest/x.yaml`, `../sibling/x.yaml`), for messages.
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
            // `..` cancels a named directory, never another `..` (`../../x` stays as it is).
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
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
        let text = read_text(path, &shown)?;
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

    #[test]
    fn display_paths_keep_leading_parent_directories() {
        assert_eq!(
            normalize(Path::new("../../sibling/x.yaml")),
            Path::new("../../sibling/x.yaml")
        );
        assert_eq!(normalize(Path::new("a/../b/./c/..")), Path::new("b"));
        assert_eq!(normalize(Path::new("/../a")), Path::new("/a"));
        assert_eq!(
            display_path(Path::new("/w/main"), Path::new("/w/main/../sibling/x.yaml")),
            "../sibling/x.yaml"
        );
    }

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

    /// Runs `f` on another thread and fails the test if it does not finish in time: the checks
    /// below are about never hanging, so a hang must be a failure, not a stuck test run.
    fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = send.send(f());
        });
        receive
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the manifest loader hung")
    }

    fn message(result: Result<Vec<PathBuf>, Diagnostic>) -> String {
        result.expect_err("an error").message
    }

    #[cfg(unix)]
    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .expect("mkfifo runs");
        assert!(status.success());
    }

    #[cfg(unix)]
    #[test]
    fn dangling_symlinks_and_loops_are_named_as_such() {
        let root = temp_dir("links");
        std::os::unix::fs::symlink("gone.yaml", root.join("dangling.yaml")).unwrap();
        std::os::unix::fs::symlink("loop_b.yaml", root.join("loop_a.yaml")).unwrap();
        std::os::unix::fs::symlink("loop_a.yaml", root.join("loop_b.yaml")).unwrap();
        let m = message(locate(&root, Some("dangling.yaml")));
        assert!(
            m.contains("dangling symbolic link") && m.contains("`gone.yaml` does not exist"),
            "{m}"
        );
        let m = message(locate(&root, Some("loop_a.yaml")));
        assert!(m.contains("symbolic link that cannot be followed"), "{m}");
        // The same files found in a manifest directory are errors too, not silently skipped.
        let m = message(locate(&root, Some(".")));
        assert!(
            m.contains("dangling.yaml is a dangling symbolic link"),
            "{m}"
        );
        // A link to a real file is fine.
        let ok = temp_dir("links-ok");
        std::fs::write(ok.join("real.yaml"), "op: {}\n").unwrap();
        std::os::unix::fs::symlink("real.yaml", ok.join("link.yaml")).unwrap();
        assert_eq!(
            locate(&ok, Some("link.yaml")).unwrap(),
            vec![ok.join("link.yaml")]
        );
        assert_eq!(locate(&ok, Some(".")).unwrap().len(), 2);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let root = temp_dir("fifo");
        mkfifo(&root.join("pipe.yaml"));
        let base = root.clone();
        let m = within_seconds(move || message(locate(&base, Some("pipe.yaml"))));
        assert!(m.contains("is a FIFO (named pipe), not a file"), "{m}");
        let base = root.clone();
        let m = within_seconds(move || message(locate(&base, Some("."))));
        assert!(m.contains("pipe.yaml is a FIFO"), "{m}");
        // `load` on a FIFO path (as a tool may call it directly) neither blocks nor reads.
        let base = root.clone();
        let m = within_seconds(move || {
            load(&base, &[base.join("pipe.yaml")])
                .expect_err("an error")
                .message
        });
        assert!(m.contains("manifest file pipe.yaml is a FIFO"), "{m}");
        // Should the FIFO appear after the metadata check, opening it still returns at once and
        // the open handle's metadata says what it is.
        let pipe = root.join("pipe.yaml");
        let meta = within_seconds(move || open(&pipe).and_then(|f| f.metadata()).unwrap());
        assert!(!meta.file_type().is_file());
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_refused_without_reading_it() {
        // `/dev/zero` would never end; it must be refused by its metadata.
        let m = within_seconds(|| message(locate(Path::new("/dev"), Some("zero"))));
        assert!(m.contains("is a character device, not a file"), "{m}");
        let m = within_seconds(|| {
            read_text(Path::new("/dev/zero"), "/dev/zero")
                .expect_err("an error")
                .message
        });
        assert!(m.contains("character device"), "{m}");
    }

    #[test]
    fn a_directory_named_like_a_manifest_is_reported() {
        let root = temp_dir("dir-yaml");
        std::fs::create_dir_all(root.join("nested.yaml")).unwrap();
        std::fs::write(root.join("a.yaml"), "").unwrap();
        let m = message(locate(&root, Some(".")));
        assert!(m.contains("nested.yaml is a directory"), "{m}");
    }

    #[test]
    fn text_that_is_not_utf8_or_too_large_is_refused() {
        let root = temp_dir("bytes");
        let bad = root.join("bad.yaml");
        std::fs::write(&bad, b"op:\n  family: \xff\n").unwrap();
        let m = read_text(&bad, "bad.yaml").unwrap_err().message;
        assert_eq!(
            m,
            "manifest file bad.yaml is not UTF-8 text: invalid byte at offset 14 (line 2)"
        );
        let big = root.join("big.yaml");
        // Sparse: no real disk space is used.
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let m = read_text(&big, "big.yaml").unwrap_err().message;
        assert!(m.contains("is too large"), "{m}");
    }
}
