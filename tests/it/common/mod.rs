//! The tools as a user runs them: built binaries in their own processes, for what only a process
//! shows (signals, closed pipes, exit statuses, inputs that block, file size limits).
//!
//! `cargo test --test it` does not build the examples, so the first call builds them here with
//! the cargo that runs the tests, into the same target directory and profile (the library is
//! already built, so this only compiles and links the three examples): the binaries tested are
//! always those of the source under test, never a stale build.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The examples directory holding the built tools.
fn built() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(build)
        .as_ref()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn build() -> Result<PathBuf, String> {
    // The test runs from <target>/<profile dir>/deps/<name>-<hash>.
    let exe = std::env::current_exe().map_err(|e| format!("the test executable: {e}"))?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{} is not in <target>/<profile>/deps", exe.display()))?;
    let target = profile_dir
        .parent()
        .ok_or_else(|| format!("{} has no target directory", profile_dir.display()))?;
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(name) => name,
        None => return Err(format!("{}: no profile name", profile_dir.display())),
    };
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let output = Command::new(env!("CARGO"))
        // The workspace without the emulator, as scripts/test.sh selects it: the same feature
        // resolution, so the test's own build of tileops serves (one package alone can resolve
        // the dependencies' features otherwise, and build everything again).
        .args(["build", "--quiet", "--locked", "--profile", profile])
        .args(["--workspace", "--exclude", "cuda-emu"])
        .args([
            "--example",
            "bench_all",
            "--example",
            "roofline",
            "--example",
            "calibrate",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target)
        .output()
        .map_err(|e| format!("running cargo to build the tools: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building the tools failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(profile_dir.join("examples"))
}

/// The built tool `name` (`bench_all`, `roofline`, `calibrate`).
pub fn tool(name: &str) -> Command {
    let mut command = Command::new(built().join(name));
    // The CPU backend whatever the machine, and no inherited device choice.
    command.env_remove("TILEOPS_DEVICE").stdin(Stdio::null());
    command
}

/// What a finished tool left.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
    /// How long it ran.
    pub elapsed: Duration,
}

impl Finished {
    /// The exit code; a death by signal fails the test, with the output.
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .unwrap_or_else(|| panic!("killed by a signal: {self:?}"))
    }
}

/// Runs `command` with stdout and stderr captured, killing it (and failing the test) if it is not
/// done within `limit`: a tool that hangs must fail the test, not hang it.
pub fn run_within(command: &mut Command, limit: Duration) -> Finished {
    run_with_stdout(command, Stdio::piped(), limit)
}

/// [`run_within`] with stdout sent to `stdout` (a closed pipe, `/dev/full`): its text is then
/// empty.
pub fn run_with_stdout(
    command: &mut Command,
    stdout: impl Into<Stdio>,
    limit: Duration,
) -> Finished {
    let started = Instant::now();
    let mut child = command
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {:?}: {e}", command.get_program()));
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = wait_within(&mut child, limit, command);
    Finished {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        elapsed: started.elapsed(),
    }
}

/// Reads a pipe to its end on a thread (so that a full pipe never blocks the child).
pub fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        text
    })
}

/// Waits for `child`, killing it and failing the test after `limit`.
pub fn wait_within(child: &mut Child, limit: Duration, what: &Command) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("waiting for the tool") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what:?} did not finish within {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fresh scratch directory for one test, under the target directory.
pub fn scratch(test: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("tools")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The names in `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A stdout whose reader is already gone: every write to it fails with a broken pipe.
pub fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    writer
}

/// `command` run by `sh` under `ulimit -f blocks`: no file it writes may grow past that size.
pub fn with_file_size_limit(blocks: u32, command: &Command) -> Command {
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("ulimit -f {blocks} && exec \"$0\" \"$@\""))
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => sh.env(key, value),
            None => sh.env_remove(key),
        };
    }
    sh.stdin(Stdio::null());
    sh
}
