//! The on-disk cache of compiled kernel files: `TILEOPS_KERNEL_CACHE=<dir>` keeps every NVRTC
//! result (CUBIN or PTX, and the log with ptxas's report) under `<dir>`, so that the next process
//! that compiles the same file for the same target loads it instead of compiling again (a kernel
//! file takes NVRTC a few seconds; every file, over a minute of CPU per architecture).
//!
//! An entry is named by the SHA-256 of everything the compile reads: the file's name and text,
//! every header's name and text, the target, the options (the toolkit's include directory among
//! them), and the NVRTC library (its version, and the path, size and modification time of the
//! library file that was loaded). A change to any of them is another name, so no entry is ever
//! stale; an entry that does not read back whole (truncated, another format) is a miss, compiled
//! and written again. Entries are written to a temporary file and renamed into place, so
//! processes sharing the directory never read a partial one. Processes that need the same entry
//! at once take turns on a lock file beside it (`<name>.lock`, an advisory `flock`): the first
//! compiles, the others wait and read its entry, so test processes started together compile each
//! file once between them, not once each. A directory that cannot be written costs the cache (and
//! its lock), not the compile.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, OnceLock};

use sha2::{Digest, Sha256};

use super::compile::{Compiled, Target, compile_with};
use super::{HEADERS, KernelSource};
use crate::Error;

/// The environment variable naming the cache directory; unset or empty, nothing is cached.
pub const CACHE_ENV: &str = "TILEOPS_KERNEL_CACHE";

/// The first bytes of every entry: the format, so that another format reads as a miss.
const MAGIC: &[u8] = b"tileops kernel cache 1\n";

/// A directory of compiled kernel files.
///
/// ```
/// use tileops::kernels::KernelCache;
/// let dir = std::env::temp_dir().join("tileops-kernel-cache-doc");
/// let cache = KernelCache::new(&dir);
/// assert_eq!(cache.dir(), dir.as_path());
/// // What `compile` uses: the directory TILEOPS_KERNEL_CACHE names, if any.
/// let _from_env: Option<KernelCache> = KernelCache::from_env();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCache {
    dir: PathBuf,
}

/// The entries some thread of this process is compiling, and the signal that one is done.
fn in_progress() -> &'static (Mutex<HashSet<PathBuf>>, Condvar) {
    static IN_PROGRESS: OnceLock<(Mutex<HashSet<PathBuf>>, Condvar)> = OnceLock::new();
    IN_PROGRESS.get_or_init(Default::default)
}

/// One thread's turn at an entry ([`KernelCache::lock`]), given up when dropped: the process's
/// own claim, and the lock file that keeps other processes out (released when the file closes).
pub(crate) struct EntryGuard {
    path: PathBuf,
    other_processes: Option<std::fs::File>,
}

impl Drop for EntryGuard {
    fn drop(&mut self) {
        // The lock file first, so that a thread let in below does not wait on this process's lock.
        drop(self.other_processes.take());
        let (busy, done) = in_progress();
        busy.lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .remove(&self.path);
        done.notify_all();
    }
}

/// Everything a compile reads, hashed into an entry's name.
pub(crate) struct CompileInputs<'a> {
    pub file: &'a str,
    pub text: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub target: Target,
    pub options: &'a [String],
    /// NVRTC's version and the identity of its library file.
    pub compiler: &'a str,
}

impl KernelCache {
    /// A cache in `dir` (created at the first write).
    pub fn new(dir: impl AsRef<Path>) -> KernelCache {
        KernelCache {
            dir: dir.as_ref().to_path_buf(),
        }
    }

    /// The cache `TILEOPS_KERNEL_CACHE` names; `None` when it is unset or empty.
    pub fn from_env() -> Option<KernelCache> {
        std::env::var_os(CACHE_ENV)
            .filter(|dir| !dir.is_empty())
            .map(KernelCache::new)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// [`compile`](super::compile()) through this cache: the stored result when there is one,
    /// else NVRTC's, stored.
    ///
    /// # Errors
    /// As [`compile`](super::compile()) (a compile error is never stored).
    pub fn compile(&self, source: &KernelSource, target: Target) -> Result<Compiled, Error> {
        compile_with(Some(self), source.file, source.source, HEADERS, target)
    }

    /// Holds the lock of `inputs`' entry until dropped: threads and processes that would compile
    /// the same inputs at once take turns, and the later ones find the first one's entry.
    ///
    /// Within the process a set of claimed entries serves (a `flock` is per open file, and two
    /// threads of one process must not both compile); between processes, an exclusive lock on
    /// `<entry>.lock`. A lock file that cannot be opened or locked (a read-only directory, a file
    /// system without locks) leaves the compile unguarded, never failed.
    pub(crate) fn lock(&self, inputs: &CompileInputs<'_>) -> EntryGuard {
        let path = self.entry_path(inputs);
        let (busy, done) = in_progress();
        {
            let mut busy = busy.lock().unwrap_or_else(|poison| poison.into_inner());
            while busy.contains(&path) {
                busy = done.wait(busy).unwrap_or_else(|poison| poison.into_inner());
            }
            busy.insert(path.clone());
        }
        let other_processes = std::fs::create_dir_all(&self.dir)
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(self.lock_path(inputs))
            })
            .and_then(|file| file.lock().map(|()| file))
            .ok();
        EntryGuard {
            path,
            other_processes,
        }
    }

    /// The compiled file stored for `inputs`, if a whole entry is there.
    pub(crate) fn load(&self, inputs: &CompileInputs<'_>, file: &'static str) -> Option<Compiled> {
        let bytes = std::fs::read(self.entry_path(inputs)).ok()?;
        decode(&bytes, file, inputs.target)
    }

    /// Stores `compiled` for `inputs`; a failure to write is ignored (the compile stands).
    pub(crate) fn store(&self, inputs: &CompileInputs<'_>, compiled: &Compiled) {
        let _ = self.try_store(inputs, compiled);
    }

    fn try_store(&self, inputs: &CompileInputs<'_>, compiled: &Compiled) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.entry_path(inputs);
        // A name of this process's own (pid and a counter), renamed over the entry when whole.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
        let written = std::fs::File::create(&tmp).and_then(|mut f| f.write_all(&encode(compiled)));
        match written.and_then(|()| std::fs::rename(&tmp, &path)) {
            Ok(()) => Ok(()),
            Err(err) => {
                let _ = std::fs::remove_file(&tmp);
                Err(err)
            }
        }
    }

    fn entry_path(&self, inputs: &CompileInputs<'_>) -> PathBuf {
        self.dir.join(format!("{}.bin", key(inputs)))
    }

    /// The lock file beside the entry of `inputs`, which processes compiling it take turns on.
    fn lock_path(&self, inputs: &CompileInputs<'_>) -> PathBuf {
        self.entry_path(inputs).with_extension("lock")
    }
}

/// The hex SHA-256 naming the entry of `inputs`. Every field is written with its length first,
/// so no two different inputs write the same bytes.
pub(crate) fn key(inputs: &CompileInputs<'_>) -> String {
    let mut hash = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    field(MAGIC);
    field(inputs.compiler.as_bytes());
    field(inputs.target.to_string().as_bytes());
    field(&(inputs.options.len() as u64).to_le_bytes());
    for option in inputs.options {
        field(option.as_bytes());
    }
    field(inputs.file.as_bytes());
    field(inputs.text.as_bytes());
    field(&(inputs.headers.len() as u64).to_le_bytes());
    for (name, text) in inputs.headers {
        field(name.as_bytes());
        field(text.as_bytes());
    }
    hash.finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// An absent part (no CUBIN for a PTX target) is written as this length.
const ABSENT: u64 = u64::MAX;

fn encode(compiled: &Compiled) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let mut part = |bytes: Option<&[u8]>| match bytes {
        Some(bytes) => {
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        None => out.extend_from_slice(&ABSENT.to_le_bytes()),
    };
    part(compiled.cubin.as_deref());
    part(compiled.ptx.as_deref().map(str::as_bytes));
    part(Some(compiled.log.as_bytes()));
    out
}

/// The entry in `bytes`, or `None` when they are not exactly one whole entry of this format.
fn decode(bytes: &[u8], file: &'static str, target: Target) -> Option<Compiled> {
    let mut rest = bytes.strip_prefix(MAGIC)?;
    let mut part = || -> Option<Option<Vec<u8>>> {
        let (len, tail) = rest.split_first_chunk::<8>()?;
        let len = u64::from_le_bytes(*len);
        if len == ABSENT {
            rest = tail;
            return Some(None);
        }
        let len = usize::try_from(len).ok()?;
        if len > tail.len() {
            return None;
        }
        let (bytes, tail) = tail.split_at(len);
        rest = tail;
        Some(Some(bytes.to_vec()))
    };
    let cubin = part()?;
    let ptx = part()?.map(String::from_utf8).transpose().ok()?;
    let log = String::from_utf8(part()??).ok()?;
    if !rest.is_empty() || (cubin.is_none() && ptx.is_none()) {
        return None;
    }
    if matches!(target, Target::Sm(_)) != cubin.is_some() {
        return None;
    }
    Some(Compiled {
        file,
        target,
        cubin,
        ptx,
        log,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs<'a>(
        text: &'a str,
        headers: &'a [(&'a str, &'a str)],
        target: Target,
    ) -> CompileInputs<'a> {
        CompileInputs {
            file: "softmax.cu",
            text,
            headers,
            target,
            options: &[],
            compiler: "nvrtc 13.0",
        }
    }

    fn compiled(target: Target) -> Compiled {
        Compiled {
            file: "softmax.cu",
            target,
            cubin: matches!(target, Target::Sm(_)).then(|| vec![0x7f, b'E', b'L', b'F', 0, 1]),
            ptx: Some(".version 9.0\n.target sm_90\n".to_owned()),
            log: "ptxas info    : Used 32 registers".to_owned(),
        }
    }

    #[test]
    fn the_key_changes_with_every_input() {
        let headers = [("a.cuh", "int a;")];
        let base = key(&inputs("k", &headers, Target::Sm(90)));
        assert_eq!(base.len(), 64);
        assert_eq!(
            base,
            key(&inputs("k", &headers, Target::Sm(90))),
            "deterministic"
        );
        let mut others = vec![
            key(&inputs("k2", &headers, Target::Sm(90))),
            key(&inputs("k", &[("a.cuh", "int b;")], Target::Sm(90))),
            key(&inputs("k", &[("b.cuh", "int a;")], Target::Sm(90))),
            key(&inputs("k", &[], Target::Sm(90))),
            key(&inputs("k", &headers, Target::Sm(80))),
            key(&inputs("k", &headers, Target::Compute(90))),
        ];
        let options = ["--std=c++17".to_owned()];
        others.push(key(&CompileInputs {
            options: &options,
            ..inputs("k", &headers, Target::Sm(90))
        }));
        others.push(key(&CompileInputs {
            compiler: "nvrtc 13.1",
            ..inputs("k", &headers, Target::Sm(90))
        }));
        others.push(key(&CompileInputs {
            file: "rms_norm.cu",
            ..inputs("k", &headers, Target::Sm(90))
        }));
        // A boundary moved between two fields is another key too.
        let moved = [("a.cuh", "int a;k")];
        others.push(key(&inputs("", &moved, Target::Sm(90))));
        for (i, other) in others.iter().enumerate() {
            assert_ne!(&base, other, "input change {i} kept the key");
        }
    }

    #[test]
    fn entries_read_back_whole_and_nothing_else_does() {
        for target in [Target::Sm(90), Target::Compute(80)] {
            let original = compiled(target);
            let bytes = encode(&original);
            let back = decode(&bytes, "softmax.cu", target).expect("a whole entry");
            assert_eq!(back.cubin, original.cubin);
            assert_eq!(back.ptx, original.ptx);
            assert_eq!(back.log, original.log);
            assert_eq!(back.target, target);
            // Every truncation, and a byte too many, is a miss.
            for len in 0..bytes.len() {
                assert!(
                    decode(&bytes[..len], "softmax.cu", target).is_none(),
                    "{len}"
                );
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(decode(&longer, "softmax.cu", target).is_none());
            // Another format's magic is a miss.
            let mut other = bytes.clone();
            other[MAGIC.len() - 2] = b'9';
            assert!(decode(&other, "softmax.cu", target).is_none());
        }
        // An entry of a CUBIN target read for a PTX target (or back) is a miss.
        let sm = encode(&compiled(Target::Sm(90)));
        assert!(decode(&sm, "softmax.cu", Target::Compute(90)).is_none());
        // A length past the end is a miss, not a panic or an allocation of it.
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&(u64::MAX - 1).to_le_bytes());
        assert!(decode(&huge, "softmax.cu", Target::Sm(90)).is_none());
    }

    #[test]
    fn a_stored_entry_loads_and_a_corrupt_one_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::new(dir.path().join("nested"));
        let headers = [("a.cuh", "int a;")];
        let key_inputs = inputs("k", &headers, Target::Sm(90));
        assert!(cache.load(&key_inputs, "softmax.cu").is_none());
        cache.store(&key_inputs, &compiled(Target::Sm(90)));
        let back = cache.load(&key_inputs, "softmax.cu").expect("stored");
        assert_eq!(back.cubin, compiled(Target::Sm(90)).cubin);
        let names: Vec<_> = std::fs::read_dir(cache.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            names,
            [format!("{}.bin", key(&key_inputs))],
            "no temporary file left"
        );
        // Truncated on disk: a miss, then the next store writes it whole again.
        let path = cache.entry_path(&key_inputs);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(cache.load(&key_inputs, "softmax.cu").is_none());
        cache.store(&key_inputs, &compiled(Target::Sm(90)));
        assert!(cache.load(&key_inputs, "softmax.cu").is_some());
        // Another input's entry is not this one.
        assert!(
            cache
                .load(&inputs("k2", &headers, Target::Sm(90)), "softmax.cu")
                .is_none()
        );
    }

    #[test]
    fn threads_compiling_the_same_inputs_take_turns() {
        let cache = KernelCache::new(std::env::temp_dir().join("tileops-kernel-cache-lock-test"));
        let headers = [];
        let first = cache.lock(&inputs("k", &headers, Target::Sm(90)));
        // Other inputs are not held up.
        drop(cache.lock(&inputs("k2", &headers, Target::Sm(90))));
        let (sent, received) = std::sync::mpsc::channel();
        let waiter = {
            let cache = cache.clone();
            std::thread::spawn(move || {
                let headers = [];
                let _turn = cache.lock(&inputs("k", &headers, Target::Sm(90)));
                sent.send(()).unwrap();
            })
        };
        assert!(
            received
                .recv_timeout(std::time::Duration::from_millis(100))
                .is_err(),
            "the second thread went ahead while the first held the entry"
        );
        drop(first);
        received
            .recv()
            .expect("the second thread's turn after the first");
        waiter.join().unwrap();
    }

    #[test]
    fn another_process_waits_on_the_entry_s_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::new(dir.path());
        let headers = [];
        let key_inputs = inputs("k", &headers, Target::Sm(90));
        let lock_file = cache.lock_path(&key_inputs);
        // What another process does: its own open of the lock file (a separate open file
        // description, so `flock` treats it as another owner even inside this process).
        let other = || std::fs::File::open(&lock_file).unwrap().try_lock();
        let held = cache.lock(&key_inputs);
        assert!(
            matches!(other(), Err(std::fs::TryLockError::WouldBlock)),
            "another process could take the entry while this one compiles it"
        );
        drop(held);
        assert!(other().is_ok(), "the lock outlived the guard");
    }

    #[test]
    fn an_unwritable_directory_costs_the_cache_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"not a directory").unwrap();
        let cache = KernelCache::new(&file);
        let headers = [];
        let key_inputs = inputs("k", &headers, Target::Sm(90));
        // No lock file can be made there either: the compile goes ahead unguarded.
        drop(cache.lock(&key_inputs));
        cache.store(&key_inputs, &compiled(Target::Sm(90)));
        assert!(cache.load(&key_inputs, "softmax.cu").is_none());
    }
}
