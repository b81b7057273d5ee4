//! A downstream crate's view: a copy of `downstream/` (its own op, its own manifest) is built with
//! plain `cargo` as a user would, then its manifest is edited and extended.
//!
//! - the op's `eval_roofline` gives the manifest's numbers;
//! - editing a formula changes the value after a plain `cargo build` (no `touch`, no `clean`);
//! - a new family file is picked up (here: one that declares the op again, which must now fail);
//! - a formula mistake is a compile error from `cargo build`, located in the user's YAML.
//!
//! The steps share one copy and one target directory, so they run in sequence in one test.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A fresh copy of `downstream/`, depending on this checkout's `tileops` by absolute path.
fn downstream_copy() -> PathBuf {
    let dir = repo().join("target/downstream-test/crate");
    let _ = std::fs::remove_dir_all(&dir);
    copy_dir(&repo().join("downstream"), &dir);
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let tileops = repo().join("tileops");
    let manifest = manifest.replace("path = \"../tileops\"", &format!("path = {:?}", tileops.display().to_string()));
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    // Same dependency versions as the workspace: no resolution surprises, and no network needed
    // beyond what the workspace build fetched.
    std::fs::copy(repo().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    dir
}

struct Outcome {
    success: bool,
    stdout: String,
    stderr: String,
}

fn cargo(dir: &Path, args: &[&str]) -> Outcome {
    let output = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", repo().join("target/downstream-test/target"))
        .env_remove("TILEOPS_MANIFEST_BASE_DIR")
        .output()
        .expect("cargo runs");
    Outcome {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn run_op(dir: &Path) -> String {
    let out = cargo(dir, &["run", "--quiet"]);
    assert!(out.success, "cargo run failed:\n{}", out.stderr);
    out.stdout.trim().to_owned()
}

#[test]
fn a_downstream_crate_builds_edits_and_fails_like_a_user_sees_it() {
    let dir = downstream_copy();
    let n: u64 = 2048 * 4096;

    // 1. The manifest's numbers (bf16: elem_bytes = 2).
    assert_eq!(run_op(&dir), format!("flops={} bytes={}", 2 * n, 3 * n * 2));

    // 2. Editing a formula changes the value after a plain cargo build.
    let yaml_path = dir.join("manifest/ops.yaml");
    let yaml = std::fs::read_to_string(&yaml_path).unwrap();
    std::fs::write(&yaml_path, yaml.replace("flops: \"2 * N\"", "flops: \"3 * N\"")).unwrap();
    assert_eq!(run_op(&dir), format!("flops={} bytes={}", 3 * n, 3 * n * 2));

    // 3. A formula mistake is a compile error located in the user's YAML, with a caret.
    let edited = std::fs::read_to_string(&yaml_path).unwrap();
    std::fs::write(&yaml_path, edited.replace("flops: \"3 * N\"", "flops: \"3 * Q\"")).unwrap();
    let out = cargo(&dir, &["build", "--quiet"]);
    assert!(!out.success, "a bad formula must not build");
    let line = edited.lines().position(|l| l.contains("flops: \"3 * N\"")).unwrap() + 1;
    // 1-based column of `N` (now `Q`) inside the formula.
    let col = edited.lines().nth(line - 1).unwrap().find("3 * N").unwrap() + 4 + 1;
    assert!(out.stderr.contains(&format!("manifest/ops.yaml:{line}:{col}")), "{}", out.stderr);
    assert!(out.stderr.contains("unknown name `Q`"), "{}", out.stderr);
    assert!(out.stderr.contains('^'), "{}", out.stderr);
    std::fs::write(&yaml_path, &edited).unwrap();
    assert_eq!(run_op(&dir), format!("flops={} bytes={}", 3 * n, 3 * n * 2));

    // 4. A new family file is picked up without touching the sources: declaring the op a second
    //    time must now fail the build.
    std::fs::write(dir.join("manifest/extra.yaml"), &edited).unwrap();
    let out = cargo(&dir, &["build", "--quiet"]);
    assert!(!out.success, "the new family file was not picked up");
    assert!(out.stderr.contains("manifest/extra.yaml:"), "{}", out.stderr);
    assert!(out.stderr.contains("declared twice"), "{}", out.stderr);
}
