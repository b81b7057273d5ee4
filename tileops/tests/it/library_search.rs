//! Only trusted libraries are loaded: a `libnvrtc.so.13` or `libcublas.so.13` planted in an
//! ancestor of the working directory (or of the executable) is never opened, so its constructor
//! never runs; the same file named explicitly through `TILEOPS_CUDA_PATH` is (which shows the
//! planted library would run if it were searched).
//!
//! Each case runs this test binary again as a child process (the search runs once per process),
//! from a copy of the binary under a temporary directory, with the working directory two levels
//! below a planted `.cuda-wheels/nvidia/cu13/lib`. The child (`child_loads_the_libraries`,
//! ignored unless run that way) asks for NVRTC and cuBLAS as a kernel compile and a GEMM would.
//! The planted libraries are built here with `cc`: a constructor that appends the library's name
//! to a marker file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Set in the child's environment; the child test does nothing without it.
const CHILD: &str = "TILEOPS_LIBRARY_SEARCH_CHILD";

/// The libraries planted, each with its soname.
const PLANTED: [&str; 4] = [
    "libnvrtc.so.13",
    "libnvrtc-builtins.so.13.0",
    "libcublasLt.so.13",
    "libcublas.so.13",
];

/// Variables that name a search location, cleared in the child unless a case sets one.
const LOCATION_VARS: [&str; 5] = [
    "TILEOPS_CUDA_PATH",
    "TILEOPS_CUDA_WHEELS",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
];

struct Planted {
    root: PathBuf,
    marker: PathBuf,
    /// The working directory of the child: `<root>/a/b`.
    cwd: PathBuf,
    /// This test binary, linked (or copied) into `<root>/a/b/bin`.
    exe: PathBuf,
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A fresh directory with the planted libraries in `<root>/.cuda-wheels/nvidia/cu13/lib` and in
/// `<root>/a/b/.cuda-wheels/nvidia/cu13/lib` (the working directory itself), and this binary
/// under `<root>/a/b/bin`.
fn plant(case: &str) -> Planted {
    let root = std::env::temp_dir().join(format!(
        "tileops-library-search-{}-{case}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    let cwd = root.join("a/b");
    let marker = root.join("constructor-ran.txt");
    let planted = Planted {
        exe: cwd.join("bin").join("library-search-child"),
        root: root.clone(),
        marker: marker.clone(),
        cwd: cwd.clone(),
    };
    for base in [&root, &cwd] {
        let lib = base.join(".cuda-wheels/nvidia/cu13/lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::create_dir_all(base.join(".cuda-wheels/nvidia/cu13/include")).unwrap();
        for name in ["cuda_fp16.h", "cuda_bf16.h"] {
            std::fs::write(base.join(".cuda-wheels/nvidia/cu13/include").join(name), "").unwrap();
        }
        for soname in PLANTED {
            build_planted(&lib.join(soname), soname, &marker);
        }
    }
    std::fs::create_dir_all(cwd.join("bin")).unwrap();
    let me = std::env::current_exe().unwrap();
    if std::fs::hard_link(&me, &planted.exe).is_err() {
        std::fs::copy(&me, &planted.exe).unwrap();
    }
    planted
}

/// Builds a shared library named `soname` whose constructor appends `soname` to `marker`.
fn build_planted(out: &Path, soname: &str, marker: &Path) {
    let dir = out.parent().unwrap();
    let source = dir.join(format!("{soname}.c"));
    std::fs::write(
        &source,
        format!(
            "#include <stdio.h>\n\
             __attribute__((constructor)) static void planted(void) {{\n\
                 FILE *f = fopen({marker:?}, \"a\");\n\
                 if (f) {{ fputs({soname:?} \"\\n\", f); fclose(f); }}\n\
             }}\n",
            marker = marker.display().to_string(),
        ),
    )
    .unwrap();
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(out)
        .arg(format!("-Wl,-soname,{soname}"))
        .arg(&source)
        .status()
        .expect("cc (a C compiler) is needed to build the planted libraries");
    assert!(status.success(), "cc failed building {}", out.display());
}

/// Runs the child in `planted.cwd` with the location variables cleared, then `env` set.
fn run_child(planted: &Planted, env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(&planted.exe);
    cmd.args([
        "--ignored",
        "--exact",
        "library_search::child_loads_the_libraries",
        "--nocapture",
    ])
    .current_dir(&planted.cwd)
    .env(CHILD, "1");
    for var in LOCATION_VARS {
        cmd.env_remove(var);
    }
    for (var, value) in env {
        cmd.env(var, value);
    }
    let output = cmd.output().unwrap();
    assert!(
        output.status.success(),
        "the child failed: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn constructors_run(planted: &Planted) -> String {
    std::fs::read_to_string(&planted.marker).unwrap_or_default()
}

#[test]
fn a_library_planted_above_the_working_directory_is_never_loaded() {
    let planted = plant("ancestor");
    let output = run_child(&planted, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        constructors_run(&planted),
        "",
        "a planted library's constructor ran; the child said:\n{stdout}"
    );
    // Without a toolkit anywhere trusted, the errors name the whole search order.
    for line in stdout.lines().filter(|l| l.contains(": Err(")) {
        for step in [
            "TILEOPS_CUDA_PATH",
            "CUDA_HOME",
            "dynamic loader",
            "TILEOPS_CUDA_WHEELS",
        ] {
            assert!(line.contains(step), "{step} missing from {line}");
        }
    }
    assert!(
        stdout.contains("nvrtc: ") && stdout.contains("cublas: "),
        "{stdout}"
    );
}

#[test]
fn a_relative_path_in_a_variable_is_skipped_not_resolved() {
    let planted = plant("relative");
    // Relative to the working directory, these name the planted copies exactly.
    let output = run_child(
        &planted,
        &[
            ("TILEOPS_CUDA_PATH", Path::new(".cuda-wheels/nvidia/cu13")),
            ("TILEOPS_CUDA_WHEELS", Path::new("../../.cuda-wheels")),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(constructors_run(&planted), "", "{stdout}");
    assert!(stdout.contains("not an absolute path"), "{stdout}");
}

#[test]
fn the_same_library_named_explicitly_is_loaded() {
    // The control: the planted libraries do run their constructors when a variable names them,
    // so the test above would see them if the search reached them.
    let planted = plant("explicit");
    let root = planted.root.join(".cuda-wheels/nvidia/cu13");
    let output = run_child(&planted, &[("TILEOPS_CUDA_PATH", &root)]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let ran = constructors_run(&planted);
    for soname in PLANTED {
        assert!(
            ran.contains(soname),
            "{soname} not loaded: {ran:?}\n{stdout}"
        );
    }
    // The planted NVRTC has no nvrtcVersion: an error value, not a crash.
    assert!(stdout.contains("nvrtc: Err("), "{stdout}");
    assert!(stdout.contains("nvrtcVersion"), "{stdout}");
}

/// The child's side: asks for NVRTC (as a kernel compile does) and cuBLAS (as a GEMM does) and
/// prints the outcome. Run only by the tests above.
#[test]
#[ignore = "a child process of the tests above"]
fn child_loads_the_libraries() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    match tileops::kernels::toolkit() {
        Ok(toolkit) => println!("nvrtc: Ok({:?})", toolkit.nvrtc_library),
        Err(err) => println!("nvrtc: Err({err})"),
    }
    match tileops::libraries::cublas() {
        Ok(found) => println!("cublas: Ok({:?})", found.library_dir),
        Err(err) => println!("cublas: Err({err})"),
    }
}
