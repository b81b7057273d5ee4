//! The README and the reference pages of `docs/` it links, kept true: what a newcomer copies from
//! them must work, and every link leads somewhere.
//!
//! - Their Rust examples are compiled as part of this crate (which depends on tileops as a user's
//!   crate does): build.rs extracts each ```` ```rust ```` block into a module, and a complete
//!   program's `main` is run by a test (`readme::block_<line>::runs`). "Using an op" and "Your own
//!   op" must each hold one; "Your own op" compiles against the README's own YAML block.
//! - Every `--filter` regex it shows selects at least one `op/workload/dtype` case, as
//!   `tileops bench` selects them; so does the example in bench's own no-match message.
//! - Every command line of its `sh` blocks that runs a tool parses with that tool's own arguments
//!   (`tileops bench`, `roofline`, `calibrate`, the examples of those names), and `bench` lines
//!   select cases; `manifest check` passes on the path it names.
//! - Every cargo target it names (`--example`, `--bench`, `--test`, `--bin`, `-p`) exists, every
//!   `tileops SUBCOMMAND` is one of the `tileops` binary's, every `cargo install` is `--locked`,
//!   and every script it runs with `bash` or `python3` exists.
//! - Every relative link resolves: the file or directory exists, and a `#fragment` names a heading
//!   of the page it points to (as GitHub makes a heading's anchor).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::Parser;
use tileops_bench::cli::bench::{self, BenchArgs, CliError};
use tileops_bench::cli::{CalibrateArgs, RooflineArgs};

include!(concat!(env!("OUT_DIR"), "/readme_examples.rs"));

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README and the reference pages of `docs/` it links, as (path relative to the repository,
/// text), the README first.
fn documents() -> Vec<(String, String)> {
    let mut pages: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.expect("docs/ is readable").file_name())
        .map(|name| format!("docs/{}", name.to_string_lossy()))
        .filter(|name| name.ends_with(".md"))
        .collect();
    pages.sort();
    std::iter::once("README.md".to_owned())
        .chain(pages)
        .map(|path| {
            let text = std::fs::read_to_string(repo().join(&path))
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            (path, text)
        })
        .collect()
}

/// Every document of [`documents`] in one text: the checks below hold for each of them.
fn readme() -> String {
    documents()
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The README's fenced blocks as (info string, text), and its prose with the blocks left out.
fn split(readme: &str) -> (Vec<(String, String)>, String) {
    let (mut blocks, mut prose) = (Vec::new(), String::new());
    let mut open: Option<(String, String)> = None;
    for line in readme.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some((_, text)), None) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, Some(info)) => open = Some((info.trim().to_owned(), String::new())),
            (None, None) => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    assert!(
        open.is_none(),
        "README.md or docs/: a code block is never closed"
    );
    (blocks, prose)
}

/// The inline code spans of prose (`` `tileops bench` ``).
fn code_spans(prose: &str) -> Vec<String> {
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// A shell line's words: quotes removed, a `#` comment dropped, leading `VAR=value`s skipped.
fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut in_word) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                }
                in_word = false;
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    let env = words
        .iter()
        .take_while(|w| w.contains('=') && !w.starts_with('-'))
        .count();
    words.split_off(env)
}

/// Every command line of the README's `sh` blocks, as words.
fn sh_commands(readme: &str) -> Vec<Vec<String>> {
    let (blocks, _) = split(readme);
    blocks
        .iter()
        .filter(|(info, _)| info == "sh")
        .flat_map(|(_, text)| text.lines().map(words).collect::<Vec<_>>())
        .filter(|w| !w.is_empty())
        .collect()
}

/// A placeholder, not a value: `REGEX`, `NAME`, `PATH…`.
fn placeholder(word: &str) -> bool {
    let letters = word.trim_end_matches('…');
    !letters.is_empty() && letters.chars().all(|c| c.is_ascii_uppercase() || c == '_')
}

/// The value after each `--filter` anywhere in the README (blocks, tables and prose).
fn filters(readme: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in readme.lines() {
        // A code span of prose is cut at its backticks; a block's line is taken whole.
        for piece in line.split('`') {
            let w = words(piece.trim_start_matches('['));
            for pair in w.windows(2) {
                if pair[0] == "--filter" {
                    let value = pair[1].trim_end_matches(']');
                    if !placeholder(value) {
                        found.push(value.to_owned());
                    }
                }
            }
        }
    }
    found
}

/// The `op/workload/dtype` cases a filter selects, through bench's own selection.
fn selected(filter: &str) -> Result<usize, CliError> {
    let args = bench::parse_args(["--list", "--filter", filter])?;
    Ok(bench::cases(&args)?.len())
}

#[test]
fn every_filter_the_readme_shows_selects_a_case() {
    let filters = filters(&readme());
    // The first-run example and the table's: the extraction itself must find them.
    assert!(filters.len() >= 2, "found only {filters:?}");
    for filter in &filters {
        match selected(filter) {
            Ok(n) => assert!(n > 0, "--filter {filter:?} selects nothing"),
            Err(e) => panic!("README.md or docs/: --filter {filter:?}: {e}"),
        }
    }
}

#[test]
fn the_example_in_bench_no_match_message_selects_a_case() {
    let err = selected("^no-such-op/").unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, CliError::NoMatch(_)), "{message}");
    let example = message
        .split_once("e.g. `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(example, _)| example)
        .unwrap_or_else(|| panic!("no `e.g.` example in {message:?}"));
    assert!(
        selected(&format!("^{}$", regex_escape(example))).is_ok_and(|n| n == 1),
        "the example `{example}` of {message:?} is not a case"
    );
}

/// `text` as a regex matching itself (the case names hold `-`, `.` and `/`).
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// The `tileops` binary's subcommands: the variants of `enum Command` in tileops-cli's main.rs,
/// kebab-cased as clap names them. (The binary is not a library this crate could ask.)
fn tileops_subcommands() -> BTreeSet<String> {
    let source = std::fs::read_to_string(repo().join("tileops-cli/src/main.rs")).unwrap();
    let body = source
        .split_once("enum Command {")
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .map(|(body, _)| body)
        .expect("tileops-cli/src/main.rs declares `enum Command { ... }`");
    let names: BTreeSet<String> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['(', ',', ' ']).next())
        .filter(|v| v.starts_with(|c: char| c.is_ascii_uppercase()))
        .map(|v| {
            let mut kebab = String::new();
            for (i, c) in v.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    kebab.push('-');
                }
                kebab.push(c.to_ascii_lowercase());
            }
            kebab
        })
        .collect();
    assert!(names.contains("bench"), "{names:?} from {body}");
    names
}

/// Runs a tool's arguments through its own parser (and, for bench, its case selection); a
/// `manifest check` checks its paths.
fn check_tool(tool: &str, args: &[String], line: &str) {
    let argv = |name: &str| std::iter::once(name.to_owned()).chain(args.iter().cloned());
    match tool {
        "bench" => {
            let parsed = BenchArgs::try_parse_from(argv("bench"))
                .unwrap_or_else(|e| panic!("README.md or docs/: `{line}`: {e}"));
            let cases = bench::cases(&parsed).unwrap_or_else(|e| panic!("`{line}`: {e}"));
            assert!(!cases.is_empty(), "`{line}` selects nothing");
        }
        "roofline" => {
            RooflineArgs::try_parse_from(argv("roofline"))
                .unwrap_or_else(|e| panic!("README.md or docs/: `{line}`: {e}"));
        }
        "calibrate" => {
            CalibrateArgs::try_parse_from(argv("calibrate"))
                .unwrap_or_else(|e| panic!("README.md or docs/: `{line}`: {e}"));
        }
        "manifest" => {
            assert_eq!(args.first().map(String::as_str), Some("check"), "`{line}`");
            let paths: Vec<PathBuf> = args[1..]
                .iter()
                .filter(|a| !a.starts_with('-'))
                .map(|a| repo().join(a))
                .collect();
            let mut out = Vec::new();
            let failed = tileops_manifest::check::run_command(&repo(), &paths, false, &mut out);
            assert!(!failed, "`{line}`:\n{}", String::from_utf8_lossy(&out));
        }
        other => panic!("README.md or docs/: `{line}`: no tool `{other}` to check it with"),
    }
}

#[test]
fn every_tool_command_of_the_readme_parses_and_selects() {
    let subcommands = tileops_subcommands();
    let mut checked = BTreeSet::new();
    for words in sh_commands(&readme()) {
        let line = words.join(" ");
        let tool_args = match words[0].as_str() {
            "tileops" => Some((words[1].clone(), words[2..].to_vec())),
            "cargo" if words[1] == "run" => {
                let after = words.iter().position(|w| w == "--");
                let rest = after.map_or(&[][..], |i| &words[i + 1..]);
                let example = words
                    .windows(2)
                    .find(|p| p[0] == "--example")
                    .map(|p| p[1].clone());
                match example.as_deref() {
                    Some("bench_all") => Some(("bench".to_owned(), rest.to_vec())),
                    Some(tool @ ("roofline" | "calibrate")) => {
                        Some((tool.to_owned(), rest.to_vec()))
                    }
                    _ if words.windows(2).any(|p| p == ["-p", "tileops-cli"]) => {
                        Some((rest[0].clone(), rest[1..].to_vec()))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some((tool, args)) = tool_args {
            assert!(
                subcommands.contains(&tool),
                "README.md or docs/: `{line}`: `tileops` has no subcommand `{tool}` (it has {subcommands:?})"
            );
            check_tool(&tool, &args, &line);
            checked.insert(tool);
        }
    }
    // The first run and the tools' block name these: an extraction that found none is broken.
    for tool in ["bench", "roofline", "calibrate", "manifest"] {
        assert!(
            checked.contains(tool),
            "no `{tool}` command found: {checked:?}"
        );
    }
}

#[test]
fn every_tileops_subcommand_the_readme_names_exists() {
    let subcommands = tileops_subcommands();
    let readme = readme();
    let (blocks, prose) = split(&readme);
    let mut lines: Vec<String> = code_spans(&prose);
    lines.extend(
        blocks
            .iter()
            .filter(|(info, _)| info == "sh" || info == "text")
            .flat_map(|(_, text)| text.lines().map(str::to_owned).collect::<Vec<_>>()),
    );
    let mut named = 0;
    for line in &lines {
        let w = words(line);
        if w.first().map(String::as_str) != Some("tileops") {
            continue;
        }
        let Some(sub) = w.get(1) else { continue };
        // `tileops --help`, `tileops COMMAND --help`, `tileops = { path = ... }` name none.
        if !sub.starts_with(|c: char| c.is_ascii_lowercase())
            || !sub.chars().all(|c| c.is_ascii_lowercase() || c == '-')
        {
            continue;
        }
        named += 1;
        assert!(
            subcommands.contains(sub.as_str()),
            "README.md or docs/: `{line}`: `tileops` has no subcommand `{sub}` (it has {subcommands:?})"
        );
    }
    assert!(named >= 4, "found only {named} `tileops SUBCOMMAND`s");
}

/// A workspace package: its name, its directory and its targets as (kind, name).
type Package = (String, PathBuf, BTreeSet<(String, String)>);

/// The workspace's packages, from `cargo metadata`.
fn workspace_targets() -> Vec<Package> {
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(repo().join("Cargo.toml"))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let targets = package["targets"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|t| {
                    let name = t["name"].as_str().unwrap().to_owned();
                    t["kind"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(move |k| (k.as_str().unwrap().to_owned(), name.clone()))
                })
                .collect();
            let dir = Path::new(package["manifest_path"].as_str().unwrap())
                .parent()
                .unwrap()
                .to_path_buf();
            (package["name"].as_str().unwrap().to_owned(), dir, targets)
        })
        .collect()
}

/// Checks one cargo command: its package (`-p`, else the root package; any member with
/// `--workspace`) has each target it names, and `cargo install` is `--locked`.
fn check_cargo(words: &[String], packages: &[Package]) -> Result<(), String> {
    let words = match words.iter().position(|w| w == "--") {
        Some(i) => &words[..i],
        None => words,
    };
    let value = |flags: &[&str]| {
        words
            .windows(2)
            .find(|p| flags.contains(&p[0].as_str()))
            .map(|p| p[1].clone())
    };
    if words[1] == "install" {
        if !words.iter().any(|w| w == "--locked") {
            return Err("`cargo install` without `--locked`".to_owned());
        }
        if let Some(path) = value(&["--path"])
            && !packages
                .iter()
                .any(|(_, dir, _)| *dir == repo().join(&path))
        {
            return Err(format!("no workspace package at `{path}`"));
        }
        return Ok(());
    }
    let candidates: Vec<_> = match value(&["-p", "--package"]) {
        Some(name) => packages.iter().filter(|(n, _, _)| *n == name).collect(),
        None if words.iter().any(|w| w == "--workspace") => packages.iter().collect(),
        None => packages
            .iter()
            .filter(|(n, _, _)| n == "tileops-suite")
            .collect(),
    };
    if candidates.is_empty() {
        return Err("no such package in the workspace".to_owned());
    }
    let mut wanted: Vec<(&str, String)> = Vec::new();
    for (flag, kind) in [
        ("--example", "example"),
        ("--bench", "bench"),
        ("--test", "test"),
        ("--bin", "bin"),
    ] {
        for pair in words.windows(2).filter(|p| p[0] == flag) {
            wanted.push((kind, pair[1].clone()));
        }
    }
    // `cargo run -p PKG` with no target runs the package's binary.
    if words[1] == "run" && wanted.is_empty() {
        let has_bin = candidates
            .iter()
            .any(|(_, _, t)| t.iter().any(|(k, _)| k == "bin"));
        if !has_bin {
            return Err("the package has no binary to run".to_owned());
        }
    }
    for (kind, name) in wanted {
        let found = candidates
            .iter()
            .any(|(_, _, t)| t.contains(&(kind.to_owned(), name.clone())));
        if !found {
            return Err(format!("no {kind} target `{name}`"));
        }
    }
    Ok(())
}

#[test]
fn every_cargo_target_and_script_the_readme_names_exists() {
    let packages = workspace_targets();
    let readme = readme();
    let (_, prose) = split(&readme);
    let mut commands: Vec<Vec<String>> = sh_commands(&readme);
    commands.extend(code_spans(&prose).iter().map(|s| words(s)));
    let (mut cargo, mut scripts) = (0, 0);
    for words in commands.iter().filter(|w| w.len() >= 2) {
        let line = words.join(" ");
        match words[0].as_str() {
            "cargo" => {
                cargo += 1;
                check_cargo(words, &packages)
                    .unwrap_or_else(|e| panic!("README.md or docs/: `{line}`: {e}"));
            }
            // Scripts of the checkout (`target/` ones are built, not shipped).
            "bash" | "python3" if !words[1].starts_with("target/") && !placeholder(&words[1]) => {
                scripts += 1;
                assert!(
                    repo().join(&words[1]).is_file(),
                    "README.md or docs/: `{line}`: no script {}",
                    words[1]
                );
            }
            _ => {}
        }
    }
    assert!(
        cargo >= 10 && scripts >= 3,
        "{cargo} cargo commands, {scripts} scripts"
    );
}

/// A heading's anchor as GitHub makes it: lower case, spaces to hyphens, every character but
/// letters, digits, `-` and `_` dropped (`Compiled kernels: \`X_Y\`` is `compiled-kernels-x_y`).
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown page's headings.
fn anchors(page: &str) -> BTreeSet<String> {
    let (_, prose) = split(page);
    prose
        .lines()
        .filter_map(|line| line.strip_prefix('#'))
        .map(|rest| anchor(rest.trim_start_matches('#')))
        .collect()
}

/// The targets of a page's markdown links (`[text](target)`), outside code blocks and spans.
fn link_targets(page: &str) -> Vec<String> {
    let (_, prose) = split(page);
    let outside_spans: String = prose.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    outside_spans
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(target, _)| target.to_owned()))
        .collect()
}

#[test]
fn every_relative_link_of_the_readme_and_docs_resolves() {
    let mut checked = 0;
    for (path, text) in documents() {
        let dir = repo().join(&path).parent().expect("a file").to_path_buf();
        for target in link_targets(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (file, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if file.is_empty() {
                repo().join(&path)
            } else {
                dir.join(file)
            };
            assert!(
                resolved.exists(),
                "{path}: the link ({target}) points to {}, which does not exist",
                resolved.display()
            );
            if !fragment.is_empty() {
                let page = std::fs::read_to_string(&resolved)
                    .unwrap_or_else(|e| panic!("{path}: the link ({target}): {e}"));
                let known = anchors(&page);
                assert!(
                    known.contains(fragment),
                    "{path}: the link ({target}) names no heading of {} (its anchors: {known:?})",
                    resolved.display()
                );
            }
            checked += 1;
        }
    }
    // The README links the docs pages, tileops-candle's README and more: a parser that found
    // nothing would pass vacuously.
    assert!(checked >= 20, "only {checked} relative links found");
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    assert_eq!(
        anchor(" Compiled kernels across processes: `TILEOPS_KERNEL_CACHE`"),
        "compiled-kernels-across-processes-tileops_kernel_cache"
    );
    assert_eq!(
        anchor("The kernel ledger: speed without a GPU"),
        "the-kernel-ledger-speed-without-a-gpu"
    );
    assert_eq!(
        link_targets("see [a](b.md#c) and `[x](y)`\n```\n[d](e)\n```\n"),
        ["b.md#c"]
    );
}
