//! The `@entry` lines of tileops's kernel files, read by the build script into the
//! `tileops::kernels` statics (`SOFTMAX`, `RMS_NORM`, ..., `SOURCES`).
//!
//! A kernel file declares each of its `extern "C" __global__` entry points on a comment line, with
//! the global accesses the entry is written to issue:
//!
//! ```text
//! // @entry softmax_rows_v4_{f32,f16,bf16}: vector loads, vector stores
//! // @entry softmax_partial_{f32,f16,bf16}: vector loads
//! // @entry softmax_cols_{f32,f16,bf16}: scalar
//! ```
//!
//! One `{a,b,...}` group expands to one entry per alternative. The accesses are `vector loads`,
//! `vector stores` (128-bit global loads or stores of the main input or output), both, or
//! `scalar`. The declarations live in the kernel file because the entry names are often made by
//! preprocessor macros (`relu_##SUFFIX`) that a reader of the Rust side could not see; the
//! compile test (`tileops/tests/it/kernel_compile.rs`) checks them both ways against what NVRTC
//! compiled, and the accesses against the PTX.
//!
//! This file is shared: `build.rs` includes it to generate the statics, and the `it` test binary
//! includes it to unit-test the parser on strings (a build script's own tests never run).

use std::fmt::Write as _;

/// One declared entry point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredEntry {
    /// The symbol.
    pub name: String,
    /// Declared `vector loads`.
    pub vector_loads: bool,
    /// Declared `vector stores`.
    pub vector_stores: bool,
}

/// A kernel file and its declarations, as the generated code names it.
#[derive(Debug)]
pub struct KernelFile {
    /// Its path under `tileops/kernels/`, `/`-separated (`reduction/softmax.cu`).
    pub path: String,
    /// Its file name (`softmax.cu`): the name NVRTC compiles it under and errors cite, unique
    /// across the family directories.
    pub file: String,
    /// Its entry points, in the order of its `@entry` lines.
    pub entries: Vec<DeclaredEntry>,
}

/// The `.cu` files of `dir` (tileops's `kernels/`) and of its family directories
/// (`kernels/<family>/<op>.cu`, one level), as sorted `/`-separated paths relative to `dir`.
pub fn kernel_files(dir: &std::path::Path) -> Result<Vec<String>, String> {
    let read = |dir: &std::path::Path| -> Result<Vec<std::path::PathBuf>, String> {
        let listing =
            std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
        listing
            .map(|entry| {
                entry
                    .map(|e| e.path())
                    .map_err(|e| format!("reading {}: {e}", dir.display()))
            })
            .collect()
    };
    let mut files = Vec::new();
    for path in read(dir)? {
        let found = if path.is_dir() {
            read(&path)?
        } else {
            vec![path]
        };
        for file in found {
            if file.extension().is_some_and(|ext| ext == "cu") {
                let relative = file.strip_prefix(dir).ok().and_then(|r| r.to_str());
                let relative =
                    relative.ok_or_else(|| format!("{}: not a UTF-8 path", file.display()))?;
                files.push(relative.replace(std::path::MAIN_SEPARATOR, "/"));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The marker of a declaration line (after the comment's `//`).
const DIRECTIVE: &str = "@entry";

/// The entry points `text` (the file at `path` under `tileops/kernels/`) declares, or every
/// problem found, each as `kernels/<path>:<line>: <what>`.
pub fn parse(path: &str, text: &str) -> Result<KernelFile, Vec<String>> {
    let mut entries: Vec<DeclaredEntry> = Vec::new();
    let mut errors = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let at = |what: String| format!("kernels/{path}:{}: {what}", index + 1);
        let Some(comment) = line.trim_start().strip_prefix("//") else {
            continue;
        };
        let comment = comment.trim_start();
        // Any `// @word` is a directive: a typo (`@entries`, `@Entry`) is an error, not a comment
        // that silently declares nothing.
        let Some(directive) = comment.strip_prefix('@') else {
            continue;
        };
        let word = directive.split(|c: char| !c.is_ascii_alphanumeric()).next();
        if word != Some(&DIRECTIVE[1..]) {
            errors.push(at(format!(
                "unknown directive `@{}` (the one directive is `{DIRECTIVE}`)",
                word.unwrap_or_default()
            )));
            continue;
        }
        let declaration = directive[DIRECTIVE.len() - 1..].trim();
        match parse_declaration(declaration) {
            Ok(declared) => {
                for entry in declared {
                    if entries.iter().any(|e| e.name == entry.name) {
                        errors.push(at(format!("`{}` is declared twice", entry.name)));
                    } else {
                        entries.push(entry);
                    }
                }
            }
            Err(what) => errors.push(at(what)),
        }
    }
    if entries.is_empty() && errors.is_empty() {
        errors.push(format!(
            "kernels/{path}: declares no entry points (add a `// {DIRECTIVE} <name>: <accesses>` \
             line per `extern \"C\" __global__` function)"
        ));
    }
    if errors.is_empty() {
        Ok(KernelFile {
            path: path.to_owned(),
            file: path.rsplit('/').next().unwrap_or(path).to_owned(),
            entries,
        })
    } else {
        Err(errors)
    }
}

/// `name_{a,b}: vector loads, vector stores` into its entries.
fn parse_declaration(declaration: &str) -> Result<Vec<DeclaredEntry>, String> {
    let Some((pattern, accesses)) = declaration.split_once(':') else {
        return Err(format!(
            "`{declaration}`: expected `{DIRECTIVE} <name>: <accesses>`, with the accesses \
             `vector loads`, `vector stores`, both, or `scalar`"
        ));
    };
    let (vector_loads, vector_stores) = parse_accesses(accesses.trim())?;
    Ok(expand(pattern.trim())?
        .into_iter()
        .map(|name| DeclaredEntry {
            name,
            vector_loads,
            vector_stores,
        })
        .collect())
}

fn parse_accesses(accesses: &str) -> Result<(bool, bool), String> {
    if accesses == "scalar" {
        return Ok((false, false));
    }
    let (mut loads, mut stores) = (false, false);
    for access in accesses.split(',').map(str::trim) {
        let seen = match access {
            "vector loads" => &mut loads,
            "vector stores" => &mut stores,
            "scalar" => return Err("`scalar` excludes the vector accesses".to_owned()),
            other => {
                return Err(format!(
                    "unknown access `{other}` (expected `vector loads`, `vector stores` or \
                     `scalar`)"
                ));
            }
        };
        if *seen {
            return Err(format!("`{access}` is listed twice"));
        }
        *seen = true;
    }
    Ok((loads, stores))
}

/// `softmax_{f32,f16}` into `softmax_f32`, `softmax_f16`; a name without braces into itself.
fn expand(pattern: &str) -> Result<Vec<String>, String> {
    let names = match pattern.split_once('{') {
        None => vec![pattern.to_owned()],
        Some((head, rest)) => {
            let Some((alternatives, tail)) = rest.split_once('}') else {
                return Err(format!("`{pattern}`: `{{` without its `}}`"));
            };
            if tail.contains(['{', '}']) {
                return Err(format!("`{pattern}`: one `{{...}}` group at most"));
            }
            alternatives
                .split(',')
                .map(|alternative| format!("{head}{}{tail}", alternative.trim()))
                .collect()
        }
    };
    for name in &names {
        let mut chars = name.chars();
        let starts_well = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !starts_well || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("`{name}` (from `{pattern}`) is not a C identifier"));
        }
    }
    Ok(names)
}

/// The name of a file's static: `fused_add_rms_norm.cu` is `FUSED_ADD_RMS_NORM`.
pub fn static_name(file: &str) -> Result<String, String> {
    let stem = file.strip_suffix(".cu").unwrap_or(file);
    let name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) || name == "SOURCES" {
        return Err(format!(
            "kernels/{file}: its name gives no usable static name (`{name}`)"
        ));
    }
    Ok(name)
}

/// The Rust source of the statics: one `KernelSource` per file, then `SOURCES`.
///
/// The text of each file is embedded through the crate's own `CARGO_MANIFEST_DIR`, so the
/// generated file holds no absolute path of the machine that built it.
pub fn render(files: &[KernelFile]) -> Result<String, String> {
    let mut out = String::from(
        "// Generated by tileops's build script from the `@entry` lines of tileops/kernels/*.cu.\n",
    );
    let mut names = Vec::new();
    for file in files {
        let name = static_name(&file.file)?;
        if names.contains(&name) {
            return Err(format!(
                "kernels/{}: another file has the static name `{name}` (file names must be \
                 unique across the family directories)",
                file.path
            ));
        }
        let _ = writeln!(
            out,
            "\n#[doc = \"`{f}`: the entry points its `@entry` lines declare.\"]\n\
             pub static {name}: KernelSource = KernelSource {{\n    \
             file: {f:?},\n    \
             path: {p:?},\n    \
             source: include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/kernels/{p}\")),\n    \
             entries: &[",
            f = file.file,
            p = file.path,
        );
        for entry in &file.entries {
            let _ = writeln!(
                out,
                "        Entry {{ name: {:?}, vector_loads: {}, vector_stores: {} }},",
                entry.name, entry.vector_loads, entry.vector_stores
            );
        }
        out.push_str("    ],\n};\n");
        names.push(name);
    }
    out.push_str("\n/// Every kernel file of the crate, by file name.\npub static SOURCES: &[&KernelSource] = &[");
    for name in &names {
        let _ = write!(out, "&{name}, ");
    }
    out.push_str("];\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, vector_loads: bool, vector_stores: bool) -> DeclaredEntry {
        DeclaredEntry {
            name: name.to_owned(),
            vector_loads,
            vector_stores,
        }
    }

    #[test]
    fn declarations_expand_and_keep_their_accesses() {
        let text = "// header\n\
                    // @entry rows_{f32,bf16}: vector loads, vector stores\n\
                    //   a note about the next one\n\
                    // @entry partial_f16: vector loads\n\
                    //@entry cols: scalar\n\
                    extern \"C\" __global__ void cols() {}\n";
        let file = parse("k.cu", text).unwrap();
        assert_eq!(
            file.entries,
            [
                entry("rows_f32", true, true),
                entry("rows_bf16", true, true),
                entry("partial_f16", true, false),
                entry("cols", false, false),
            ]
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_line() {
        let text = "// @entry a: vector loads\n\
                    // @entries b: scalar\n\
                    // @entry c vector loads\n\
                    // @entry d: vector loads, vector loads\n\
                    // @entry e: scalar, vector stores\n\
                    // @entry f: wide loads\n\
                    // @entry g_{x,y: scalar\n\
                    // @entry h_{x}_{y}: scalar\n\
                    // @entry 9i: scalar\n\
                    // @entry a: scalar\n";
        let errors = parse("fam/k.cu", text).unwrap_err();
        let expected = [
            "kernels/fam/k.cu:2: unknown directive `@entries`",
            "kernels/fam/k.cu:3: `c vector loads`: expected",
            "kernels/fam/k.cu:4: `vector loads` is listed twice",
            "kernels/fam/k.cu:5: `scalar` excludes the vector accesses",
            "kernels/fam/k.cu:6: unknown access `wide loads`",
            "kernels/fam/k.cu:7: `g_{x,y`: `{` without its `}`",
            "kernels/fam/k.cu:8: `h_{x}_{y}`: one `{...}` group at most",
            "kernels/fam/k.cu:9: `9i` (from `9i`) is not a C identifier",
            "kernels/fam/k.cu:10: `a` is declared twice",
        ];
        assert_eq!(errors.len(), expected.len(), "{errors:#?}");
        for (error, start) in errors.iter().zip(expected) {
            assert!(
                error.starts_with(start),
                "{error:?} should start with {start:?}"
            );
        }
    }

    #[test]
    fn a_file_without_declarations_is_an_error() {
        let errors = parse("empty.cu", "// only prose\nvoid f() {}\n").unwrap_err();
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("kernels/empty.cu: declares no entry points"));
    }

    #[test]
    fn kernel_files_are_the_root_and_family_cu_files_sorted() {
        let dir = tempfile::tempdir().unwrap();
        for path in [
            "b/y.cu",
            "b/notes.md",
            "a/z.cu",
            "top.cu",
            "common.cuh",
            "a/deep/w.cu",
        ] {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        // One level of family directories: a deeper file is not a kernel file.
        assert_eq!(
            kernel_files(dir.path()).unwrap(),
            ["a/z.cu", "b/y.cu", "top.cu"]
        );
        assert!(
            kernel_files(&dir.path().join("absent"))
                .unwrap_err()
                .starts_with("reading ")
        );
    }

    #[test]
    fn statics_are_named_after_their_files() {
        assert_eq!(
            static_name("fused_add_rms_norm.cu").unwrap(),
            "FUSED_ADD_RMS_NORM"
        );
        assert_eq!(static_name("bench-util.cu").unwrap(), "BENCH_UTIL");
        assert!(static_name("8bit.cu").is_err());
        assert!(static_name("sources.cu").is_err());
    }

    #[test]
    fn rendering_lists_every_file_and_entry() {
        let files = [
            parse("fam/a.cu", "// @entry a_{f32,f16}: vector loads\n").unwrap(),
            parse("b_c.cu", "// @entry spin: scalar\n").unwrap(),
        ];
        assert_eq!(
            (files[0].path.as_str(), files[0].file.as_str()),
            ("fam/a.cu", "a.cu")
        );
        let code = render(&files).unwrap();
        assert!(code.contains("pub static A: KernelSource"));
        assert!(code.contains("pub static B_C: KernelSource"));
        assert!(code.contains(r#"file: "a.cu","#));
        assert!(code.contains(r#"path: "fam/a.cu","#));
        assert!(
            code.contains(
                r#"include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/fam/a.cu"))"#
            )
        );
        assert!(
            code.contains(r#"Entry { name: "a_f16", vector_loads: true, vector_stores: false },"#)
        );
        assert!(
            code.contains(r#"Entry { name: "spin", vector_loads: false, vector_stores: false },"#)
        );
        assert!(code.contains("pub static SOURCES: &[&KernelSource] = &[&A, &B_C, ];"));
        let clash = [
            parse("x/a_b.cu", "// @entry x: scalar\n").unwrap(),
            parse("y/a_b.cu", "// @entry y: scalar\n").unwrap(),
        ];
        let error = render(&clash).unwrap_err();
        assert!(error.starts_with("kernels/y/a_b.cu: another file has the static name `A_B`"));
    }
}
