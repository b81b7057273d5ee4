//! A downstream crate's view. A copy of this checkout is made under `target/`, and its
//! `downstream/` crate (its own op, its own manifest, depending on `tileops` by path) is built with
//! plain `cargo` as a user would:
//!
//! - `use tileops::ops::Softmax` plans on `Device::best()`, runs (on the CPU without a GPU), and
//!   `eval_roofline()` gives the manifest's numbers; the user's op gives its own manifest's numbers;
//! - editing a formula, in the user's manifest and in tileops's `manifest/`, changes the value after
//!   a plain `cargo build` (no `touch`, no `clean`);
//! - a formula mistake is a compile error from `cargo build`, located in the user's YAML;
//! - a new family file is picked up, in either manifest (one that declares an op again now fails);
//! - the user's bench binary (`tileops_bench::cli::bench_main`) lists and benches the user's own
//!   registered op together with tileops's.
//!
//! The steps share one copy and one target directory, so they run in sequence in one test.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Copy the source tree (no build outputs, no git data); symlinks stay symlinks.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == "target"
            || name.starts_with("target-")
            || name == ".git"
            || name == ".cuda-wheels"
        {
            continue;
        }
        let target = to.join(&*name);
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), target).unwrap();
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

struct Outcome {
    success: bool,
    stdout: String,
    stderr: String,
}

/// The downstream crate's target directory: `TILEOPS_DOWNSTREAM_TARGET_DIR` where set (CI shares
/// it with the package check, whose verify build compiles the same dependencies first), else
/// `target/downstream-test/target`.
fn target_dir() -> PathBuf {
    std::env::var_os("TILEOPS_DOWNSTREAM_TARGET_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/downstream-test/target"))
}

fn cargo(dir: &Path, args: &[&str]) -> Outcome {
    let output = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("TILEOPS_MANIFEST_BASE_DIR")
        .output()
        .expect("cargo runs");
    Outcome {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn run(dir: &Path) -> String {
    let out = cargo(dir, &["run", "--quiet"]);
    assert!(out.success, "cargo run failed:\n{}", out.stderr);
    out.stdout
}

fn edit(path: &Path, from: &str, to: &str) -> String {
    let before = std::fs::read_to_string(path).unwrap();
    assert!(before.contains(from), "{} has no {from:?}", path.display());
    std::fs::write(path, before.replacen(from, to, 1)).unwrap();
    before
}

#[test]
fn a_downstream_crate_builds_edits_and_fails_like_a_user_sees_it() {
    let copy = repo().join("target/downstream-test/repo");
    let _ = std::fs::remove_dir_all(&copy);
    copy_tree(&repo(), &copy);
    let dir = copy.join("downstream");
    // The workspace's dependency versions: no resolution surprises.
    std::fs::copy(repo().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();

    let (m, n) = (32 * 32u64, 4096u64);
    let user_n: u64 = 2048 * 4096;

    // 1. Manifest numbers for the library op (bf16) and the user's op; the op runs.
    let out = run(&dir);
    assert!(
        out.contains(&format!(
            "softmax flops={} bytes={}",
            5 * m * n,
            2 * m * n * 2
        )),
        "{out}"
    );
    assert!(out.contains("softmax row sum=1.0000"), "{out}");
    assert!(
        out.contains(&format!(
            "scaled_residual_add flops={} bytes={}",
            2 * user_n,
            3 * user_n * 2
        )),
        "{out}"
    );

    // 1b. The user's bench binary: the user's op is registered next to tileops's, listed, and a
    // filtered CPU run times it (the prefill row over the CPU budget, skipped with the reason).
    let out = cargo(&dir, &["run", "--quiet", "--bin", "bench", "--", "--list"]);
    assert!(out.success, "bench --list failed:\n{}", out.stderr);
    assert!(
        out.stdout
            .contains("scaled_residual_add (elementwise, manifest/ops.yaml): 3 cases"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("softmax (reduction, "),
        "{}",
        out.stdout
    );
    let records = copy.join("user-bench.json");
    let out = cargo(
        &dir,
        &[
            "run",
            "--quiet",
            "--bin",
            "bench",
            "--",
            "--cpu",
            "--filter",
            "^scaled_residual_add/",
            "--out",
            records.to_str().unwrap(),
        ],
    );
    assert!(out.success, "the user's bench failed:\n{}", out.stderr);
    let benched = tileops_bench::records::Run::load(&records).unwrap_or_else(|e| panic!("{e}"));
    let rows: Vec<(&str, &str, bool)> = benched
        .records
        .iter()
        .map(|r| (r.workload.as_str(), r.dtype.as_str(), r.skipped.is_none()))
        .collect();
    assert_eq!(
        rows,
        [
            ("llama-8b-prefill", "bfloat16", false),
            ("decode", "bfloat16", true),
            ("decode", "float32", true),
        ],
        "{}",
        out.stderr
    );
    let decode = &benched.records[1];
    assert_eq!(decode.bytes, Some(3 * 32 * 4096 * 2));
    assert_eq!(decode.flops, Some(2 * 32 * 4096));
    assert!(out.stdout.contains("scaled_residual_add"), "{}", out.stdout);
    assert!(
        out.stdout.contains("1 row skipped: CPU backend: "),
        "{}",
        out.stdout
    );

    // 2. Editing the user's formula changes its value after a plain cargo build.
    let user_yaml = dir.join("manifest/ops.yaml");
    edit(&user_yaml, "flops: \"2 * N\"", "flops: \"3 * N\"");
    assert!(run(&dir).contains(&format!("scaled_residual_add flops={}", 3 * user_n)));

    // 3. A formula mistake is a compile error located in the user's YAML, with a caret.
    let good = edit(&user_yaml, "flops: \"3 * N\"", "flops: \"3 * Q\"");
    let out = cargo(&dir, &["build", "--quiet"]);
    assert!(!out.success, "a bad formula must not build");
    let line_index = good
        .lines()
        .position(|l| l.contains("flops: \"3 * N\""))
        .unwrap();
    let column = good.lines().nth(line_index).unwrap().find("3 * N").unwrap() + 4 + 1;
    let location = format!("manifest/ops.yaml:{}:{column}", line_index + 1);
    assert!(
        out.stderr.contains(&location),
        "no {location} in:\n{}",
        out.stderr
    );
    assert!(out.stderr.contains("unknown name `Q`"), "{}", out.stderr);
    assert!(out.stderr.contains('^'), "{}", out.stderr);
    std::fs::write(&user_yaml, &good).unwrap();

    // 4. A new family file in the user's manifest is picked up without touching the sources.
    let extra = dir.join("manifest/extra.yaml");
    std::fs::write(&extra, &good).unwrap();
    let out = cargo(&dir, &["build", "--quiet"]);
    assert!(!out.success, "the new family file was not picked up");
    assert!(
        out.stderr.contains("manifest/extra.yaml:") && out.stderr.contains("declared twice"),
        "{}",
        out.stderr
    );
    std::fs::remove_file(&extra).unwrap();

    // 5. Editing tileops's own manifest changes the library op's value too. (The steps on
    // tileops's manifest come last, and share one edit: each change to it rebuilds the library.)
    let reduction = copy.join("tileops/manifest/reduction.yaml");
    let original = std::fs::read_to_string(&reduction).unwrap();
    let softmax_flops = original
        .find("flops: \"5 * M * N\"")
        .expect("softmax's flops formula");
    let mut edited = original.clone();
    edited.replace_range(
        softmax_flops..softmax_flops + "flops: \"5 * M * N\"".len(),
        "flops: \"7 * M * N\"",
    );
    std::fs::write(&reduction, &edited).unwrap();
    assert!(run(&dir).contains(&format!("softmax flops={} ", 7 * m * n)));

    // 6. And in tileops's manifest: a new file that declares softmax again breaks the library.
    let lib_extra = copy.join("tileops/manifest/zz_extra.yaml");
    let softmax_entry = &original[original.find("softmax:").unwrap()..];
    let softmax_entry = &softmax_entry[..softmax_entry
        .find("\nlog_softmax:")
        .unwrap_or(softmax_entry.len())];
    std::fs::write(&lib_extra, softmax_entry).unwrap();
    let out = cargo(&dir, &["build", "--quiet"]);
    assert!(
        !out.success,
        "the new tileops family file was not picked up"
    );
    assert!(
        out.stderr.contains("manifest/zz_extra.yaml:") && out.stderr.contains("declared twice"),
        "{}",
        out.stderr
    );
    std::fs::remove_file(&lib_extra).unwrap();
    std::fs::write(&reduction, &original).unwrap();
    assert!(run(&dir).contains(&format!("softmax flops={} ", 5 * m * n)));
}
