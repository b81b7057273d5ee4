//! The tools' files: read without hanging or reading without bound, written without ever leaving a
//! half-written file in place of a good one.
//!
//! - [`read_regular`] opens without blocking (a FIFO with no writer would otherwise wait forever),
//!   refuses anything but a regular file (a directory, a FIFO, `/dev/zero`) with what it is, and
//!   reads at most a stated bound, named in the error when a file is over it.
//! - [`write_atomic`] writes a temporary file in the target's directory, flushes it to the disk and
//!   renames it over the target: a reader sees the old file or the new one, never a part, and a
//!   failed write (a full disk, a `ulimit -f`) leaves the previous file byte for byte as it was.
//! - [`check_writable`] proves, before any long work, that [`write_atomic`] can create a file
//!   there: `bench_all --out` checks its path before the first row runs.
//!
//! ```
//! use tileops_bench::files;
//!
//! let dir = std::env::temp_dir().join(format!("tileops-files-doc-{}", std::process::id()));
//! let path = dir.join("report.txt");
//! files::check_writable(&path)?;
//! files::write_atomic(&path, b"first")?;
//! files::write_atomic(&path, b"second")?;
//! assert_eq!(files::read_regular(&path, 1 << 20)?, b"second");
//! // A directory is not a file to read or to replace.
//! let err = files::read_regular(&dir, 1 << 20).unwrap_err();
//! assert!(err.to_string().contains("is a directory"), "{err}");
//! assert!(files::write_atomic(&dir, b"x").is_err());
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What a file of this type is, for an error message (`"a FIFO (named pipe)"`).
fn describe(file_type: fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// The error for a path that is not a regular file.
fn not_regular(file_type: fs::FileType, doing: &str) -> io::Error {
    let kind = if file_type.is_dir() {
        ErrorKind::IsADirectory
    } else {
        ErrorKind::InvalidInput
    };
    io::Error::new(
        kind,
        format!(
            "is {}, not a regular file; the tools {doing} regular files only",
            describe(file_type)
        ),
    )
}

/// `bytes` for a message: `1073741824 B (1.0 GiB)`.
fn show_bytes(bytes: u64) -> String {
    format!("{bytes} B ({:.1} GiB)", bytes as f64 / (1u64 << 30) as f64)
}

/// Reads the whole of the regular file `path`, at most `bound` bytes.
///
/// The file is opened with `O_NONBLOCK`, so a FIFO without a writer does not block the open, and
/// then checked with `fstat` on the open descriptor (not on the path, which could change between
/// a check and the open): anything but a regular file is refused, saying what it is. A file over
/// `bound` is refused with its size and the bound; the read itself stops at `bound + 1` bytes, so
/// a file that grows while it is read cannot make it read without end.
///
/// # Errors
/// The open's own error (a missing file: [`ErrorKind::NotFound`]); [`ErrorKind::IsADirectory`] for
/// a directory and [`ErrorKind::InvalidInput`] for another file that is not regular;
/// [`ErrorKind::FileTooLarge`] over the bound; a read error.
pub fn read_regular(path: &Path, bound: u64) -> io::Result<Vec<u8>> {
    let mut file = open_regular(path, bound)?;
    let size = file.get_ref().metadata()?.len();
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    if bytes.len() as u64 > bound {
        return Err(too_large("growing while it is read", bound));
    }
    Ok(bytes)
}

/// The error of a file over `bound`.
fn too_large(size: &str, bound: u64) -> io::Error {
    io::Error::new(
        ErrorKind::FileTooLarge,
        format!(
            "is {size}, over the {} this tool reads from one file",
            show_bytes(bound)
        ),
    )
}

/// Opens the regular file `path` for reading, checked as [`read_regular`] checks it, for a reader
/// that parses as it reads (no copy of the whole file in memory). The reader yields at most
/// `bound + 1` bytes: a reader that gets `bound + 1` has a file that grew past the bound.
///
/// # Errors
/// As [`read_regular`], less the read.
pub fn open_regular(path: &Path, bound: u64) -> io::Result<io::Take<File>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type(), "read"));
    }
    if meta.len() > bound {
        return Err(too_large(&show_bytes(meta.len()), bound));
    }
    Ok(file.take(bound.saturating_add(1)))
}

/// The most links followed from an output path to its file (Linux's own limit, `ELOOP`).
const MAX_LINKS: usize = 40;

/// Whether the tools may follow the symbolic link `link`, whose metadata is `link_meta`, to write
/// through it: the rule of Linux's `fs.protected_symlinks`, applied whatever that setting is
/// (resolving a link here and renaming over its target would otherwise get round it). In a sticky,
/// world-writable directory (`/tmp`) a link is followed only when it belongs to the user or to
/// the directory's owner; elsewhere only someone who may already write the directory could have
/// made it.
fn may_follow(link: &Path, link_meta: &fs::Metadata) -> io::Result<bool> {
    let dir = fs::metadata(directory_of(link))?;
    let sticky_world_writable = dir.mode() & 0o1002 == 0o1002;
    // SAFETY: geteuid takes nothing, cannot fail and touches no memory of ours.
    let me = unsafe { libc::geteuid() };
    Ok(!sticky_world_writable || link_meta.uid() == me || link_meta.uid() == dir.uid())
}

/// The file a write to `path` replaces: `path`, or the file a symbolic link at `path` points to,
/// through any chain of links (so that writing through a link updates the file, not the link). A
/// dangling link is replaced itself.
///
/// # Errors
/// [`ErrorKind::PermissionDenied`] for a link another user planted in a shared directory (see
/// [`may_follow`]); `ELOOP`'s error past [`MAX_LINKS`] links.
fn target_of(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_owned();
    for _ in 0..MAX_LINKS {
        let meta = match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => meta,
            _ => return Ok(current),
        };
        if !may_follow(&current, &meta)? {
            return Err(io::Error::new(
                ErrorKind::PermissionDenied,
                format!(
                    "{} is a symbolic link of another user (uid {}) in a shared directory: the \
                     tools do not write through it (it could point at any file you can write); \
                     remove it or write elsewhere",
                    current.display(),
                    meta.uid()
                ),
            ));
        }
        let next = directory_of(&current).join(fs::read_link(&current)?);
        if fs::symlink_metadata(&next).is_err() {
            return Ok(current);
        }
        current = next;
    }
    // ELOOP's kind, as the kernel reports it for a path with too many links.
    Err(io::Error::new(
        io::Error::from_raw_os_error(libc::ELOOP).kind(),
        format!(
            "more than {MAX_LINKS} symbolic links from {}",
            path.display()
        ),
    ))
}

/// Whether `a` and `b` are the same file (device and inode, links followed); `false` when either
/// cannot be read.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Refuses to write `output` when it is one of `inputs` (`(what, path)` pairs, for the message):
/// `roofline run.json --html run.json` would replace the records with the page.
///
/// ```
/// use std::path::Path;
/// use tileops_bench::files;
///
/// let dir = std::env::temp_dir().join(format!("tileops-same-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let records = dir.join("run.json");
/// std::fs::write(&records, "{}")?;
/// let err = files::check_not_an_input(&dir.join("./run.json"), [("records", records.as_path())])
///     .unwrap_err();
/// assert!(err.to_string().contains("is the records file"), "{err}");
/// files::check_not_an_input(&dir.join("chart.svg"), [("records", records.as_path())])?;
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// [`ErrorKind::InvalidInput`] naming the input.
pub fn check_not_an_input<'a>(
    output: &Path,
    inputs: impl IntoIterator<Item = (&'a str, &'a Path)>,
) -> io::Result<()> {
    for (what, input) in inputs {
        if same_file(output, input) {
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "is the {what} file {}: writing it would replace that input; write to another \
                     path",
                    input.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The directory of `path` (`.` for a bare file name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Checks what `path` is now: nothing yet, or a regular file (which a rename may replace).
/// Anything else, above all a device such as `/dev/full`, is refused: a rename would replace the
/// device node itself.
fn check_target(path: &Path) -> io::Result<()> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(meta) => Err(not_regular(meta.file_type(), "write")),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotADirectory => Err(io::Error::new(
            e.kind(),
            "a part of the path before the file name is a file, not a directory",
        )),
        Err(e) => Err(e),
    }
}

/// A temporary file beside `target`, named after it (`.run.json.XXXXXX.tmp`), with the
/// permissions of the file it replaces, or the usual ones for a new file (0666 less the umask;
/// a temporary file is otherwise created 0600).
fn temporary_beside(
    target: &Path,
    permissions: Option<Permissions>,
) -> io::Result<tempfile::NamedTempFile> {
    let dir = directory_of(target);
    fs::create_dir_all(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("creating the directory {}: {e}", dir.display()),
        )
    })?;
    let name = target
        .file_name()
        .map_or_else(|| "tileops".into(), |n| n.to_string_lossy().into_owned());
    let prefix = format!(".{name}.");
    tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .permissions(permissions.unwrap_or_else(|| Permissions::from_mode(0o666)))
        .tempfile_in(dir)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create a file in {}: {e}", dir.display()),
            )
        })
}

/// Checks, before the work that produces it, that [`write_atomic`] can write `path`: that it is
/// not a directory or a device, that its directory exists (it is created, as the write would) and
/// that a file can be created, written and flushed there (a probe file, removed at once). The file
/// at `path` itself is not touched.
///
/// A disk that fills up later is only found by the write itself; the write then fails without
/// harming the previous file.
///
/// # Errors
/// [`ErrorKind::IsADirectory`] or [`ErrorKind::InvalidInput`] for a path that is not a regular
/// file; the error of creating the directory or the probe file, saying which.
pub fn check_writable(path: &Path) -> io::Result<()> {
    let target = target_of(path)?;
    check_target(&target)?;
    let mut probe = temporary_beside(&target, None)?;
    probe.write_all(b"{}\n")?;
    probe.as_file().sync_all()?;
    probe.close()
}

/// Writes `bytes` to `path` atomically: into a temporary file in the same directory (created when
/// missing), flushed to the disk (`fsync`), then renamed over `path`, and the directory flushed
/// so the rename survives a crash. A reader, or a crash, sees the previous file or the new one,
/// never a part of either; on any failure the previous file is untouched and the temporary file
/// removed. A symbolic link at `path` is followed: the file it points to is replaced; but not a
/// link another user made in a shared directory such as `/tmp` (the rule of Linux's
/// `fs.protected_symlinks`, which a rename over the resolved target would otherwise get round). A
/// file that exists keeps its permissions.
///
/// # Errors
/// As [`check_writable`], and the error of the write, the flush or the rename (for example
/// [`ErrorKind::StorageFull`], or [`ErrorKind::FileTooLarge`] under `ulimit -f` once the tool
/// ignores `SIGXFSZ`, see [`file_size_limit_as_error`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let target = target_of(path)?;
    check_target(&target)?;
    let permissions = fs::metadata(&target).ok().map(|m| m.permissions());
    let mut file = temporary_beside(&target, permissions)?;
    let shown = file.path().display().to_string();
    let context = |e: io::Error| io::Error::new(e.kind(), format!("writing {shown}: {e}"));
    file.write_all(bytes).map_err(context)?;
    file.as_file().sync_all().map_err(context)?;
    file.persist(&target).map_err(|e| {
        io::Error::new(
            e.error.kind(),
            format!("renaming {shown} to {}: {}", target.display(), e.error),
        )
    })?;
    // The rename is durable once the directory is flushed. Not every file system can flush a
    // directory (the rename has happened either way), so its failure is not the write's.
    if let Ok(dir) = File::open(directory_of(&target)) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Makes a write over the file size limit (`ulimit -f`) fail with [`ErrorKind::FileTooLarge`]
/// instead of killing the process: by default the kernel sends `SIGXFSZ`, which ends the process
/// before it can say what happened or save anything else. The tools call it first thing in `main`.
/// It changes the disposition of one signal for the whole process, which is why a library never
/// calls it on its own.
pub fn file_size_limit_as_error() {
    // SAFETY: `signal` with `SIG_IGN` installs no handler (no code runs in signal context); the
    // only precondition, a valid signal number, holds for SIGXFSZ on every Unix.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tileops-files-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn reads_regular_files_within_the_bound_only() {
        let dir = scratch("read");
        let path = dir.join("a.json");
        fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_regular(&path, 10).unwrap(), b"0123456789");
        let err = read_regular(&path, 9).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::FileTooLarge);
        assert!(
            err.to_string()
                .starts_with("is 10 B (0.0 GiB), over the 9 B (0.0 GiB) this tool reads"),
            "{err}"
        );
        let err = read_regular(&dir, 10).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::IsADirectory);
        let err = read_regular(Path::new("/dev/zero"), 10).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(
            err.to_string()
                .starts_with("is a character device, not a regular file")
        );
        assert_eq!(
            read_regular(&dir.join("missing"), 10).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_replace_whole_files_and_leave_no_temporary_file() {
        let dir = scratch("write");
        let path = dir.join("sub/run.json");
        check_writable(&path).unwrap();
        assert!(!path.exists(), "the check writes nothing at the path");
        assert!(names(&dir.join("sub")).is_empty(), "the probe is removed");
        write_atomic(&path, b"one").unwrap();
        fs::set_permissions(&path, Permissions::from_mode(0o640)).unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(names(&dir.join("sub")), ["run.json"]);

        // Through a link: the file it points to is replaced, the link stays a link.
        let link = dir.join("link.json");
        symlink(&path, &link).unwrap();
        write_atomic(&link, b"three").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&path).unwrap(), b"three");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_another_user_planted_in_a_shared_directory_is_not_followed() {
        // A sticky, world-writable directory like /tmp, a victim file, and a link to it as
        // another user would plant it: owned by uid 65534 (nobody), which needs root to make.
        let dir = scratch("foreign-link");
        let shared = dir.join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, Permissions::from_mode(0o1777)).unwrap();
        let victim = dir.join("victim.txt");
        fs::write(&victim, b"precious").unwrap();
        let planted = shared.join("report.html");
        symlink(&victim, &planted).unwrap();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            println!(
                "SKIP: a link owned by another user needs root to make (run as root, as CI does)"
            );
            fs::remove_dir_all(&dir).unwrap();
            return;
        }
        std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).unwrap();
        for result in [check_writable(&planted), write_atomic(&planted, b"<html>")] {
            let err = result.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
            assert!(
                err.to_string().contains("another user (uid 65534)"),
                "{err}"
            );
        }
        assert_eq!(
            fs::read(&victim).unwrap(),
            b"precious",
            "the victim untouched"
        );
        assert!(
            fs::symlink_metadata(&planted)
                .unwrap()
                .file_type()
                .is_symlink()
        );

        // The user's own link in the same directory, and the other user's link outside a shared
        // directory, are followed as before.
        fs::remove_file(&planted).unwrap();
        symlink(&victim, &planted).unwrap();
        write_atomic(&planted, b"mine").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"mine");
        let private = dir.join("private-link.txt");
        symlink(&victim, &private).unwrap();
        std::os::unix::fs::lchown(&private, Some(65534), Some(65534)).unwrap();
        write_atomic(&private, b"followed").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"followed");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn chains_of_links_end_or_are_refused() {
        let dir = scratch("chains");
        let file = dir.join("file.txt");
        fs::write(&file, b"a").unwrap();
        symlink("file.txt", dir.join("one")).unwrap();
        symlink("one", dir.join("two")).unwrap();
        write_atomic(&dir.join("two"), b"b").unwrap();
        assert_eq!(
            fs::read(&file).unwrap(),
            b"b",
            "a relative chain, followed to its end"
        );
        symlink("loop-b", dir.join("loop-a")).unwrap();
        symlink("loop-a", dir.join("loop-b")).unwrap();
        let err = write_atomic(&dir.join("loop-a"), b"x").unwrap_err();
        assert!(
            err.to_string().contains("more than 40 symbolic links"),
            "{err}"
        );
        // A dangling link is replaced itself, as before.
        symlink("nowhere", dir.join("dangling")).unwrap();
        write_atomic(&dir.join("dangling"), b"c").unwrap();
        assert_eq!(fs::read(dir.join("dangling")).unwrap(), b"c");
        assert!(!dir.join("nowhere").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_output_that_is_an_input_is_refused() {
        let dir = scratch("same");
        let records = dir.join("run.json");
        fs::write(&records, b"{}").unwrap();
        let link = dir.join("link.json");
        symlink(&records, &link).unwrap();
        let hard = dir.join("hard.json");
        fs::hard_link(&records, &hard).unwrap();
        for output in [records.clone(), link, hard, dir.join("sub/../run.json")] {
            fs::create_dir_all(dir.join("sub")).unwrap();
            let err = check_not_an_input(
                &output,
                [("profile", Path::new("/")), ("records", &*records)],
            )
            .unwrap_err();
            assert!(err.to_string().starts_with("is the records file"), "{err}");
        }
        check_not_an_input(&dir.join("new.json"), [("records", records.as_path())]).unwrap();
        assert!(!same_file(&dir.join("missing"), &dir.join("missing")));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn directories_and_devices_are_never_replaced() {
        let dir = scratch("refuse");
        for path in [
            dir.as_path(),
            Path::new("/dev/full"),
            Path::new("/dev/null"),
        ] {
            let err = check_writable(path).unwrap_err();
            assert!(err.to_string().contains(", not a regular file"), "{err}");
            assert!(write_atomic(path, b"x").is_err());
        }
        assert!(
            fs::metadata("/dev/full")
                .unwrap()
                .file_type()
                .is_char_device()
        );
        let err = check_writable(Path::new("/proc/x.json")).unwrap_err();
        assert!(
            err.to_string().starts_with("cannot create a file in /proc"),
            "{err}"
        );
        // A file in the way of the directory.
        fs::write(dir.join("file"), b"").unwrap();
        let err = check_writable(&dir.join("file/run.json")).unwrap_err();
        assert!(
            err.to_string().ends_with("is a file, not a directory"),
            "{err}"
        );
        let err = check_writable(&dir.join("file/sub/run.json")).unwrap_err();
        assert!(
            err.to_string().ends_with("is a file, not a directory"),
            "{err}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
