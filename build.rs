//! Build script of the root package (examples and integration tests).
//!
//! Generates, from the TileOPs compatibility suite vendored in `tests/tileops-compat/`, one
//! `#[roofline_op]` struct per inline entry of its family files, with the entry's inputs and params
//! as fields, for `tests/it/tileops_compat.rs`. A suite that cannot be read is a build error. The
//! macro reads the files in place at compile time.
//!
//! Also extracts the Rust examples of the README and of the pages of `docs/` for
//! `tests/it/readme.rs` (see [`readme_examples`]), so that the code a newcomer copies is compiled,
//! and run, as this downstream crate.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use tileops_manifest::manifest::RooflineSpec;

const COMPAT_DIR: &str = "tests/tileops-compat";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={COMPAT_DIR}");
    let crate_dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("tileops_compat.rs");
    let dir = crate_dir.join(COMPAT_DIR);
    let code = generate(&dir)
        .unwrap_or_else(|why| panic!("the TileOPs compatibility suite ({COMPAT_DIR}): {why}"));
    std::fs::write(&out, code).expect("OUT_DIR is writable");

    println!("cargo:rerun-if-changed={README}");
    println!("cargo:rerun-if-changed={DOCS_DIR}");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // A README without the blocks the test needs fails that test's compilation (a
    // `compile_error!` in the generated file), not the examples' build.
    let code = documents(&crate_dir)
        .and_then(|docs| readme_examples(&docs, &crate_dir, &out_dir.join("readme-manifest")))
        .unwrap_or_else(|why| format!("compile_error!({why:?});\n"));
    std::fs::write(out_dir.join("readme_examples.rs"), code).expect("OUT_DIR is writable");
}

const README: &str = "README.md";
/// The reference pages the README links, one `*.md` each.
const DOCS_DIR: &str = "docs";

/// The README and every page of `docs/` (in name order), as (path relative to the crate, text):
/// the documents whose Rust examples are compiled.
fn documents(crate_dir: &Path) -> Result<Vec<(String, String)>, String> {
    let read = |name: String| {
        std::fs::read_to_string(crate_dir.join(&name))
            .map(|text| (name.clone(), text))
            .map_err(|e| format!("{name}: {e}"))
    };
    let mut pages: Vec<String> = std::fs::read_dir(crate_dir.join(DOCS_DIR))
        .map_err(|e| format!("{DOCS_DIR}/: {e}"))?
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("{DOCS_DIR}/{name}"))
        .collect();
    pages.sort();
    std::iter::once(README.to_owned())
        .chain(pages)
        .map(read)
        .collect()
}

/// A fenced code block of a document: its info string (`rust`, `rust,ignore`, `yaml`), the
/// section it is in (the last `## ` or `# ` heading above it), its first line's number and its
/// text.
struct Block {
    info: String,
    section: String,
    line: usize,
    text: String,
}

/// A document's fenced blocks, in order.
fn blocks(readme: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut section = String::new();
    let mut open: Option<Block> = None;
    for (i, line) in readme.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some(block), None) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    section: section.clone(),
                    line: i + 2,
                    text: String::new(),
                });
            }
            (None, None) => {
                if let Some(heading) = line.strip_prefix("## ").or(line.strip_prefix("# ")) {
                    section = heading.trim().to_owned();
                }
            }
        }
    }
    match open {
        Some(block) => Err(format!(
            "the block at line {} is never closed",
            block.line - 1
        )),
        None => Ok(blocks),
    }
}

/// The ```` ```rust ```` blocks of the documents (the README and the `docs/` pages) as one module
/// each (`block_<line>` for the README's, `<page>_block_<line>` for a page's: `attention_block_12`),
/// for `tests/it/readme.rs` to include:
///
/// - a block with `fn main` is a complete program: its module gets a test that runs `main`, which
///   must return `Ok`;
/// - any other block is a fragment whose `?`s need a function around it: it is compiled, not
///   run, inside `fn fragment() -> Result<(), Box<dyn Error>>` (it may need a GPU);
/// - ```` ```rust,ignore ```` blocks (code naming a crate that does not exist here) are skipped.
///
/// A block whose attribute says `register = false)]` is an op of the reader's own, against the
/// ```` ```yaml ```` block of the same section of the same document (the reader's `manifest/`):
/// that YAML is written to `manifest_dir` and the attribute pointed at it with `manifest = "..."`,
/// a path relative to this crate as the macro wants it.
///
/// # Errors
/// What is missing, naming the document: the README's two sections a newcomer reads first must
/// each hold a complete program.
fn readme_examples(
    documents: &[(String, String)],
    crate_dir: &Path,
    manifest_dir: &Path,
) -> Result<String, String> {
    let mut code =
        String::from("// Generated by build.rs from README.md and docs/*.md; do not edit.\n\n");
    for (path, text) in documents {
        let blocks = blocks(text).map_err(|why| format!("{path}: {why}"))?;
        if path == README {
            for required in ["Using an op", "Your own op"] {
                if !blocks.iter().any(|b| {
                    b.section == required && b.info == "rust" && b.text.contains("fn main")
                }) {
                    return Err(format!(
                        "{path}: no ```rust block with a `fn main` under `## {required}`"
                    ));
                }
            }
        }
        let prefix = match path.strip_prefix(&format!("{DOCS_DIR}/")) {
            Some(page) => format!("{}_", page.trim_end_matches(".md").replace('-', "_")),
            None => String::new(),
        };
        for block in blocks.iter().filter(|b| b.info == "rust") {
            let mut text = block.text.clone();
            if text.contains("register = false)]") {
                let yaml = blocks
                    .iter()
                    .find(|b| b.section == block.section && b.info == "yaml")
                    .ok_or_else(|| {
                        format!(
                            "{path} line {}: an op of one's own, but no ```yaml manifest block \
                             under `## {}`",
                            block.line, block.section
                        )
                    })?;
                std::fs::create_dir_all(manifest_dir)
                    .and_then(|()| std::fs::write(manifest_dir.join("ops.yaml"), &yaml.text))
                    .map_err(|e| format!("writing {}: {e}", manifest_dir.display()))?;
                let relative = relative_path(crate_dir, manifest_dir);
                text = text.replace(
                    "register = false)]",
                    &format!("manifest = {relative:?}, register = false)]"),
                );
            }
            let line = block.line;
            let module = format!("{prefix}block_{line}");
            // A program's `main` is run by a test; a fragment is compiled inside a function.
            let (note, body) = if text.contains("fn main") {
                (
                    ".",
                    format!(
                        "{text}\n    #[test]\n    fn runs() {{\n        main().unwrap_or_else(|e| panic!(\"{path} line {line}: {{e}}\"));\n    }}\n"
                    ),
                )
            } else {
                (
                    ": compiled, not run.\n#[allow(dead_code, unused_variables)]",
                    format!(
                        "    fn fragment() -> Result<(), Box<dyn std::error::Error>> {{\n{text}\n        Ok(())\n    }}\n"
                    ),
                )
            };
            write!(
                code,
                "/// {path} line {line} (under `{section}`){note}\nmod {module} {{\n{body}}}\n\n",
                section = block.section,
            )
            .unwrap();
        }
    }
    Ok(code)
}

/// `to` relative to `from`, both absolute: the common prefix dropped, a `..` per remaining
/// component of `from` (the macro refuses absolute `manifest` paths).
fn relative_path(from: &Path, to: &Path) -> String {
    let (from, to): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_owned(); from.len() - common];
    parts.extend(
        to[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// One struct per inline entry, and `eval(file, op, case)` building it from a case of expected.json.
fn generate(dir: &Path) -> Result<String, String> {
    if !dir.join("expected.json").is_file() {
        return Err(format!("{} has no expected.json", dir.display()));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    // The inputs each entry's cases bind (expected.json lists the inputs its formulas read).
    let expected = std::fs::read_to_string(dir.join("expected.json"))
        .map_err(|e| format!("expected.json: {e}"))?;
    let expected = expected
        .replace("-Infinity", "null")
        .replace("Infinity", "null")
        .replace("NaN", "null");
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(&expected).map_err(|e| format!("expected.json: {e}"))?;
    let bound_inputs = |file: &str, op: &str| -> Option<std::collections::BTreeSet<String>> {
        let mut names = std::collections::BTreeSet::new();
        let mut any = false;
        for case in cases.iter().filter(|c| c["file"] == file && c["op"] == op) {
            any = true;
            names.extend(
                case["inputs"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k.clone()),
            );
        }
        any.then_some(names)
    };
    let mut structs = String::new();
    let mut arms = String::new();
    let mut prepared = String::new();
    let mut runtime = String::new();
    let mut entries = Vec::new();
    for (file_index, path) in files.iter().enumerate() {
        println!("cargo:rerun-if-changed={}", path.display());
        let file_name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or("non-UTF-8 file name")?
            .to_owned();
        // The entries' structure, read with the macro's own manifest reader.
        let ops = tileops_manifest::check::entries(dir, path).map_err(|problems| {
            let rendered: Vec<String> = problems.iter().map(|p| p.render()).collect();
            format!("{file_name}: {}", rendered.join("\n"))
        })?;
        for (op_index, entry) in ops.iter().enumerate() {
            let op = &entry.name;
            if matches!(entry.roofline, Some(RooflineSpec::Func { .. })) {
                continue; // func entries point at Python code: out of scope
            }
            let ident = format!("Compat{file_index}_{op_index}");
            let mut fields = String::new();
            let mut inits = String::new();
            let bound = bound_inputs(&file_name, op);
            // The case's inputs; an entry without cases gets every input of its signature.
            let inputs = entry
                .inputs
                .iter()
                .filter(|input| bound.as_ref().is_none_or(|b| b.contains(&input.name)));
            for input in inputs {
                let name = &input.name;
                let (ty, init) = if input.optional {
                    (
                        "Option<TensorSpec>",
                        format!("optional_input(case, {name:?})"),
                    )
                } else {
                    ("TensorSpec", format!("input(case, {name:?})?"))
                };
                writeln!(fields, "    pub {name}: {ty},").unwrap();
                writeln!(inits, "            {name}: {init},").unwrap();
            }
            for param in &entry.params {
                let name = &param.name;
                writeln!(fields, "    pub {name}: Value,").unwrap();
                writeln!(inits, "            {name}: param(case, {name:?}),").unwrap();
            }
            let manifest = format!("{COMPAT_DIR}/{file_name}");
            write!(
                structs,
                "#[tileops::roofline_op({op:?}, manifest = {manifest:?}, register = false)]\n#[allow(non_camel_case_types, dead_code)]\npub struct {ident} {{\n{fields}}}\n\n"
            )
            .unwrap();
            write!(
                arms,
                "        ({file_name:?}, {op:?}) => Some({ident} {{\n{inits}        }}.eval_roofline().map_err(|e| e.to_string())),\n"
            )
            .unwrap();
            write!(
                prepared,
                "        ({file_name:?}, {op:?}) => {{ let op = {ident} {{\n{inits}        }}; Some(Box::new(move || op.eval_roofline())) }}\n"
            )
            .unwrap();
            // The same entry on the value runtime alone: the reference of the differential test.
            write!(
                structs,
                "#[tileops::roofline_op({op:?}, manifest = {manifest:?}, register = false, typed = false)]\n#[allow(non_camel_case_types, dead_code)]\npub struct {ident}Runtime {{\n{fields}}}\n\n"
            )
            .unwrap();
            write!(
                runtime,
                "        ({file_name:?}, {op:?}) => {{ let op = {ident}Runtime {{\n{inits}        }}; Some(Box::new(move || op.eval_roofline())) }}\n"
            )
            .unwrap();
            entries.push(format!("({file_name:?}, {op:?})"));
        }
    }
    Ok(format!(
        "// Generated by build.rs from {COMPAT_DIR}; do not edit.\n\
         // Expects `Value`, `TensorSpec`, `input`, `optional_input` and `param` in scope.\n\n{structs}\
         /// Every inline entry that got a struct: (file, op).\n\
         pub const ENTRIES: &[(&str, &str)] = &[{}];\n\n\
         /// Build the entry's struct from one case of expected.json and evaluate it.\n\
         #[allow(dead_code)]\n\
         pub fn eval(file: &str, op: &str, case: &serde_json::Value) -> Option<Result<tileops::Roofline, String>> {{\n\
         \x20   let run = || -> Option<Result<tileops::Roofline, String>> {{ match (file, op) {{\n{arms}        _ => None,\n    }} }};\n\
         \x20   run()\n}}\n\n\
         /// The entry's struct built from one case, as a closure that evaluates it: the benchmark\n\
         /// times the call alone.\n\
         #[allow(dead_code)]\n\
         pub fn prepare(file: &str, op: &str, case: &serde_json::Value) -> Option<Box<dyn Fn() -> Result<tileops::Roofline, tileops::RooflineError>>> {{\n\
         \x20   match (file, op) {{\n{prepared}        _ => None,\n    }}\n}}\n\n\
         /// As [`prepare`], with the entry compiled for the value runtime alone (`typed = false`).\n\
         #[allow(dead_code)]\n\
         pub fn prepare_runtime(file: &str, op: &str, case: &serde_json::Value) -> Option<Box<dyn Fn() -> Result<tileops::Roofline, tileops::RooflineError>>> {{\n\
         \x20   match (file, op) {{\n{runtime}        _ => None,\n    }}\n}}\n",
        entries.join(", ")
    ))
}
