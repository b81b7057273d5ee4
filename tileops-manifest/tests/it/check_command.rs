//! `tileops-manifest check`, run as a user runs it: on the repository's manifest, on the TileOPs
//! compatibility suite vendored in `tests/tileops-compat/`, and on a directory of bad files,
//! with the output compared to a reviewed snapshot.

use std::process::{Command, Output};

/// Run the command from the crate directory (so paths in messages are stable).
fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tileops-manifest"))
        .arg("check")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the tileops-manifest binary runs")
}

/// What `check` must say of the repository's manifest: its file and entry counts, read here
/// with the library's loader (so adding an op changes no test).
fn repository_summary() -> String {
    use tileops_manifest::load;
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let paths = load::locate(base, Some("../manifest")).expect("the manifest directory");
    let manifest = load::load(base, &paths).expect("the manifest files");
    let entries: usize = manifest.files.iter().map(|f| f.entries.len()).sum();
    assert!(entries > 0, "no entries in ../manifest");
    format!(
        "../manifest: {} files, {entries} entries: ok",
        manifest.files.len()
    )
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8 output")
}

#[test]
fn the_repository_manifest_is_clean() {
    let output = check(&["../manifest"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert_eq!(text, format!("{}\n", repository_summary()));
}

#[test]
fn the_tileops_compatibility_suite_checks() {
    let output = check(&["../tests/tileops-compat"]);
    insta::assert_snapshot!("tileops_compat", stdout(&output));
}

#[test]
fn bad_files_get_every_problem_located_and_exit_1() {
    let output = check(&["tests/bad"]);
    assert_eq!(output.status.code(), Some(1));
    insta::assert_snapshot!("bad_files", stdout(&output));
}

#[test]
fn quiet_prints_only_problems_and_several_paths_are_separate_manifests() {
    // The same op in two manifests is no clash: each PATH is its own manifest.
    let output = check(&["--quiet", "../manifest", "tests/bad/twice.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert_eq!(stdout(&output), "");
}

#[test]
fn a_missing_path_is_a_problem_and_the_others_are_still_checked() {
    let output = check(&["tests/absent", "../manifest"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("error: cannot read manifest tests/absent: "),
        "{text}"
    );
    assert!(text.contains(&repository_summary()), "{text}");
}

#[test]
fn usage_errors_exit_2_with_a_suggestion() {
    let output = Command::new(env!("CARGO_BIN_EXE_tileops-manifest"))
        .arg("chek")
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("a similar subcommand exists: 'check'"),
        "{err}"
    );
}
