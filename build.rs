//! Build script of the root package (examples and integration tests).
//!
//! Generates, from the TileOPs compatibility suite vendored in `tests/tileops-compat/`, one
//! `#[roofline_op]` struct per inline entry of its family files, with the entry's inputs and params
//! as fields, for `tests/it/tileops_compat.rs`. A suite that cannot be read is a build error. The
//! macro reads the files in place at compile time.

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
            entries.push(format!("({file_name:?}, {op:?})"));
        }
    }
    Ok(format!(
        "// Generated by build.rs from {COMPAT_DIR}; do not edit.\n\
         // Expects `Value`, `TensorSpec`, `input`, `optional_input` and `param` in scope.\n\n{structs}\
         /// Every inline entry that got a struct: (file, op).\n\
         pub const ENTRIES: &[(&str, &str)] = &[{}];\n\n\
         /// Build the entry's struct from one case of expected.json and evaluate it.\n\
         pub fn eval(file: &str, op: &str, case: &serde_json::Value) -> Option<Result<tileops::Roofline, String>> {{\n\
         \x20   let run = || -> Option<Result<tileops::Roofline, String>> {{ match (file, op) {{\n{arms}        _ => None,\n    }} }};\n\
         \x20   run()\n}}\n",
        entries.join(", ")
    ))
}
