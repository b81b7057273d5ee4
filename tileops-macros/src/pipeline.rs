//! The passes in order: args → load → find the entry → check its structure → check its formulas
//! → expand, or fall back with every error found.

use crate::args::Args;
use crate::expand::{Expansion, Problem, expand};
use crate::fallback::fallback;
use proc_macro2::{Span, TokenStream};
use std::path::PathBuf;
use std::rc::Rc;
use tileops_manifest::diagnostic::{Diagnostic, Errors};
use tileops_manifest::load;
use tileops_manifest::manifest::{self, Entry, FamilyFile};
use tileops_manifest::validate;

/// The attribute, on token streams (testable outside a macro context).
pub fn roofline_op(args: TokenStream, item: TokenStream) -> TokenStream {
    let item_struct: syn::ItemStruct = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(_) => {
            let err = syn::Error::new(
                Span::call_site(),
                "#[roofline_op] applies to a struct with named fields",
            );
            let mut out = err.to_compile_error();
            out.extend(item);
            return out;
        }
    };
    let args: Args = match syn::parse2(args) {
        Ok(args) => args,
        Err(err) => {
            let mut out = err.to_compile_error();
            out.extend(fallback(
                &item_struct,
                "",
                false,
                &[],
                &[],
                Span::call_site(),
                &[],
            ));
            return out;
        }
    };
    let mut errors = Errors::new();
    let mut tracked = Vec::new();
    let mut problems = Vec::new();
    let result = run(
        &args,
        &item_struct,
        &mut errors,
        &mut problems,
        &mut tracked,
    );
    let diagnostics = errors.finish();
    match result {
        Some(tokens) if diagnostics.is_empty() && problems.is_empty() => tokens,
        _ => fallback(
            &item_struct,
            &args.op,
            args.register,
            &diagnostics,
            &problems,
            args.op_span,
            &tracked,
        ),
    }
}

fn run(
    args: &Args,
    item: &syn::ItemStruct,
    errors: &mut Errors,
    problems: &mut Vec<Problem>,
    tracked: &mut Vec<PathBuf>,
) -> Option<TokenStream> {
    if !matches!(item.fields, syn::Fields::Named(_)) {
        errors.push(Diagnostic::unlocated(
            "#[roofline_op] applies to a struct with named fields",
        ));
        return None;
    }
    let base = load::base_dir().map_err(|d| errors.push(d)).ok()?;
    let paths = load::locate(&base, args.manifest.as_deref())
        .map_err(|d| errors.push(d))
        .ok()?;
    let manifest = load::load(&base, &paths).map_err(|d| errors.push(d)).ok()?;
    tracked.extend(manifest.tracked.iter().cloned());

    for file in &manifest.files {
        errors.extend(file.errors.iter().cloned());
    }
    let (entry, entry_errors) = find_entry(&manifest.files, &args.op);
    // An op missing from a file that did not parse is no news: the syntax error says it all.
    let broken_file = manifest.files.iter().any(|f| !f.errors.is_empty());
    if !(broken_file && entry.is_none()) {
        errors.extend(entry_errors);
    }
    let entry = entry?;
    let roofline = match validate::check(&entry, true) {
        Ok(roofline) => roofline,
        Err(diagnostics) => {
            errors.extend(diagnostics);
            return None;
        }
    };
    if !errors.is_empty() {
        return None;
    }
    let expansion = Expansion {
        item,
        entry: &entry,
        roofline: &roofline,
        register: args.register,
        typed: args.typed,
        tracked: &manifest.tracked,
    };
    match expand(&expansion) {
        Ok(tokens) => Some(tokens),
        Err(found) => {
            problems.extend(found);
            None
        }
    }
}

/// The entry named `op`, checked structurally; or why not (unknown name with suggestions, a name
/// declared twice, structural errors).
fn find_entry(files: &[Rc<FamilyFile>], op: &str) -> (Option<Entry>, Vec<Diagnostic>) {
    let matches: Vec<(&Rc<FamilyFile>, usize, &tileops_manifest::yaml::Node)> = files
        .iter()
        .flat_map(|f| {
            f.entries
                .iter()
                .filter(|(name, _, _)| name == op)
                .map(move |(_, offset, node)| (f, *offset, node))
        })
        .collect();
    match matches.as_slice() {
        [] => {
            let names: Vec<&str> = files
                .iter()
                .flat_map(|f| f.entries.iter().map(|(n, _, _)| n.as_str()))
                .collect();
            (None, vec![unknown_op(op, &names, files)])
        }
        [(file, offset, node)] => {
            let (entry, errors) = manifest::check_entry(&file.file, op, *offset, node);
            (entry, errors)
        }
        [(first_file, first_offset, _), rest @ ..] => {
            let (line, _) = first_file.file.line_col(*first_offset);
            let errors = rest
                .iter()
                .map(|(file, offset, _)| {
                    Diagnostic::at(
                        &file.file,
                        *offset,
                        op.len(),
                        format!("op `{op}` is declared twice: first at {}:{line}; op names are unique across the manifest", first_file.file.display_path),
                    )
                })
                .collect();
            (None, errors)
        }
    }
}

fn unknown_op(op: &str, names: &[&str], files: &[Rc<FamilyFile>]) -> Diagnostic {
    let mut near: Vec<(f64, &str)> = names
        .iter()
        .map(|n| {
            (
                strsim::jaro_winkler(&op.to_lowercase(), &n.to_lowercase()),
                *n,
            )
        })
        .filter(|(score, _)| *score >= 0.8)
        .collect();
    near.sort_by(|a, b| b.0.total_cmp(&a.0));
    let suggestion = match near.as_slice() {
        [] => String::new(),
        [(_, one)] => format!("; did you mean `{one}`?"),
        many => format!(
            "; did you mean one of {}?",
            many.iter()
                .take(3)
                .map(|(_, n)| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let searched: Vec<&str> = files.iter().map(|f| f.file.display_path.as_str()).collect();
    Diagnostic::unlocated(format!(
        "unknown op `{op}`: no manifest entry has that name (searched {}){suggestion}",
        searched.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    // The whole-manifest check lives in the library; the macro's tests hold it to the macro.
    use quote::quote;
    use std::path::Path;
    use tileops_manifest::check::check_families as lint;

    fn family(path: &str, text: &str) -> Rc<FamilyFile> {
        tileops_manifest::check::family_from_text(path, text)
    }

    const ENTRY: &str = "op_a:\n  family: t\n  status: implemented\n  signature:\n    inputs:\n      x: {dtype: float16}\n  roofline:\n    vars:\n      N: \"product(x.shape)\"\n    flops: \"N\"\n    bytes: \"2 * N * elem_bytes\"\n";

    #[test]
    fn the_shipped_manifest_is_valid_spec_only_entries_included() {
        let base = Path::new(env!("CARGO_MANIFEST_DIR"));
        let paths = load::locate(base, Some("../tileops/manifest")).expect("manifest directory");
        let manifest = load::load(base, &paths).expect("manifest files read");
        let problems: Vec<String> = lint(&manifest.files)
            .iter()
            .map(Diagnostic::render)
            .collect();
        assert!(problems.is_empty(), "{}", problems.join("\n\n"));
        let entries: usize = manifest.files.iter().map(|f| f.entries.len()).sum();
        assert!(
            entries >= 18,
            "expected the 18 ops of the catalog, found {entries}"
        );
    }

    #[test]
    fn lint_finds_names_declared_twice_across_files() {
        let files = [
            family("manifest/a.yaml", ENTRY),
            family("manifest/b.yaml", ENTRY),
        ];
        let problems = lint(&files);
        assert_eq!(problems.len(), 1);
        let text = problems[0].render();
        assert!(
            text.starts_with(
                "manifest/b.yaml:1:1: op `op_a` is declared twice: first at manifest/a.yaml:1"
            ),
            "{text}"
        );
    }

    #[test]
    fn lint_checks_formulas_of_spec_only_entries_too() {
        let text = ENTRY
            .replace("implemented", "spec-only")
            .replace("flops: \"N\"", "flops: \"Q\"");
        let problems = lint(&[family("m.yaml", &text)]);
        assert!(
            problems.iter().any(|p| p.render().contains("`Q`")),
            "{problems:?}"
        );
    }

    #[test]
    fn find_entry_suggests_near_names() {
        let files = [family("m.yaml", ENTRY)];
        let (entry, errors) = find_entry(&files, "op_b");
        assert!(entry.is_none());
        assert!(
            errors[0].render().contains("did you mean `op_a`?"),
            "{}",
            errors[0].render()
        );
        let (entry, errors) = find_entry(&files, "op_a");
        assert!(entry.is_some() && errors.is_empty());
    }

    fn expand_with(manifest_text: &str, args: TokenStream, item: TokenStream) -> String {
        // One directory per call: tests run on parallel threads, and two of them writing different
        // manifests to one path would read each other's (or a half-written) file.
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("tileops-pipeline-{}-{call}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ops.yaml"), manifest_text).unwrap();
        // The pipeline resolves paths against the crate dir; give it an absolute base via the
        // override variable's value in a child-free way: pass the path relative to the base.
        let base = load::base_dir().unwrap();
        let rel = load::display_path(&base, &dir.join("ops.yaml"));
        let args = quote! { #args, manifest = #rel };
        roofline_op(args, item).to_string()
    }

    #[test]
    fn a_good_entry_expands_to_eval_roofline_and_registration() {
        let out = expand_with(
            ENTRY,
            quote!("op_a"),
            quote! { pub struct A { x: tileops::TensorSpec } },
        );
        assert!(out.contains("fn eval_roofline"), "{out}");
        assert!(out.contains("inventory :: submit"), "{out}");
        // The ManifestOp constants' rustdoc names this entry, not another op's example.
        assert!(
            out.contains("doc = \"The manifest entry's name: `op_a`.\""),
            "{out}"
        );
        assert!(out.contains("doc = \"`op_a`'s family: `t`.\""), "{out}");
        assert!(out.contains("include_bytes"), "{out}");
        assert!(!out.contains("compile_error"), "{out}");
    }

    /// An entry whose `dim` param is `int | list[int] | None`, held as a `Value`.
    const UNION_ENTRY: &str = "op_u:\n  family: t\n  status: implemented\n  signature:\n    inputs:\n      x: {dtype: float16}\n    params:\n      dim: {type: \"int | list[int] | None\"}\n      eps: {type: \"float\"}\n  roofline:\n    vars:\n      N: \"x.shape[(dim if dim is not None else 0) % x.ndim]\"\n    flops: \"N if eps else 0\"\n    bytes: \"2 * N * elem_bytes\"\n";

    #[test]
    fn a_value_param_gets_a_typed_version_per_kind_its_type_admits() {
        let out = expand_with(
            UNION_ENTRY,
            quote!("op_u", register = false),
            quote! { pub struct U { x: tileops::TensorSpec, dim: tileops::roofline::Value, eps: tileops::roofline::Value } },
        );
        if std::env::var_os("TILEOPS_PRINT_EXPANSION").is_some() {
            println!("{out}");
        }
        let squash = |s: &str| s.split_whitespace().collect::<String>();
        let out = squash(&out);
        // One match on the kind of `dim` (`eps`, a float, has no version); an arm per kind the
        // type admits (`int`, `list[int]`, `None`), the general body last.
        let rt = "::tileops::__private_v0_1::rt::";
        assert_eq!(
            out.matches(&squash(&format!("match ({rt}param_kind(&self.dim),)")))
                .count(),
            1,
            "{out}"
        );
        assert!(
            out.contains(&squash(&format!(
                "({rt}ParamKind::Int(__tileops_kind_dim),) => {{"
            ))),
            "{out}"
        );
        assert!(
            out.contains(&squash(&format!("({rt}ParamKind::None,) => {{"))),
            "{out}"
        );
        assert!(
            out.contains(&squash(&format!(
                "({rt}ParamKind::IntList(__tileops_kind_dim),) => {{"
            ))),
            "{out}"
        );
        assert_eq!(out.matches("ParamKind::").count(), 3, "{out}");
        // The int version computes on the int; the `None` one has folded its test to the `0`.
        assert!(out.contains("py_dim=__tileops_kind_dim;"), "{out}");
        assert!(
            out.contains(&squash(&format!("{rt}int_mod(py_dim, py_x.rank(\"x\")?)?"))),
            "{out}"
        );
        assert!(out.contains("py_dim=();"), "{out}");
        assert!(
            out.contains(&squash(&format!("{rt}int_mod(0i128, py_x.rank(\"x\")?)?"))),
            "{out}"
        );
        // The general version, as without types for `dim`.
        assert!(
            out.contains(&squash(&format!("py_dim={rt}param_value(&self.dim);"))),
            "{out}"
        );
        // `typed = false` generates the general body alone.
        let plain = expand_with(
            UNION_ENTRY,
            quote!("op_u", register = false, typed = false),
            quote! { pub struct U { x: tileops::TensorSpec, dim: tileops::roofline::Value, eps: tileops::roofline::Value } },
        );
        assert!(!plain.contains("ParamKind"), "{plain}");
    }

    #[test]
    fn register_false_leaves_the_registration_out() {
        let out = expand_with(
            ENTRY,
            quote!("op_a", register = false),
            quote! { pub struct A { x: tileops::TensorSpec } },
        );
        assert!(out.contains("fn eval_roofline"), "{out}");
        assert!(!out.contains("inventory"), "{out}");
    }

    #[test]
    fn every_error_of_an_entry_is_reported_with_a_stub() {
        let text = ENTRY
            .replace("flops: \"N\"", "flops: \"Q\"")
            .replace("bytes: \"2 * N * elem_bytes\"", "bytes: \"x.shape[0]\"");
        let out = expand_with(
            &text,
            quote!("op_a", register = false),
            quote! { pub struct A { x: tileops::TensorSpec } },
        );
        assert_eq!(out.matches("compile_error").count(), 2, "{out}");
        assert!(
            out.contains("fn eval_roofline"),
            "the stub keeps callers compiling: {out}"
        );
        assert!(out.contains("unreachable"), "{out}");
    }

    /// The expansion of a func entry (the string on line 8 of its file), without spaces, and the
    /// name of the place-bearing module alias it imports, if any.
    fn func_expansion(func: &str, item: TokenStream) -> (String, Option<String>) {
        let text = format!(
            "op_f:\n  family: t\n  status: implemented\n  signature:\n    inputs:\n      x: {{dtype: float16}}\n  roofline:\n    func: \"{func}\"\n"
        );
        let out = expand_with(&text, quote!("op_f", register = false), item).replace(' ', "");
        assert!(!out.contains("compile_error"), "{func}: {out}");
        let module = out.find("__roofline_func_").map(|start| {
            let end = start + out[start..].find("_line_8").expect("the line") + "_line_8".len();
            out[start..end].to_owned()
        });
        if let Some(module) = &module {
            // The file's display path, sanitised: the temporary `.../ops.yaml`.
            assert!(module.ends_with("_ops_yaml_line_8"), "{module}");
        }
        (out, module)
    }

    #[test]
    fn a_dotted_func_calls_the_absolute_path_through_place_named_imports() {
        let item = quote! { pub struct F { x: tileops::TensorSpec } };
        let (out, module) = func_expansion("tileops.perf.formulas.gqa_decode_roofline", item);
        let m = module.expect("a place-bearing alias");
        assert!(
            out.contains(&format!(
                "use::tileopsas{m}_tileops;use{m}_tileops::perf::formulasas{m};{m}::gqa_decode_roofline(self)"
            )),
            "{out}"
        );
        assert!(
            out.contains("Computedby`::tileops::perf::formulas::gqa_decode_roofline`,whichthemanifestnamesinTileOPs'sdottedform,`tileops.perf.formulas.gqa_decode_roofline`."),
            "{out}"
        );
    }

    #[test]
    fn rust_func_paths_resolve_as_written_through_place_named_imports() {
        let item = || quote! { pub struct F<T> { x: tileops::TensorSpec, t: T } };
        for (func, expected) in [
            (
                "crate::perf::f",
                "usecrateas{m}_crate;use{m}_crate::perfas{m};{m}::f(self)",
            ),
            ("::tileops::f", "use::tileopsas{m};{m}::f(self)"),
            ("my_mod::f", "usemy_modas{m};{m}::f(self)"),
            ("super::f", "usesuperas{m};{m}::f(self)"),
            (
                "super::super::m::f",
                "usesuper::superas{m}_super;use{m}_super::mas{m};{m}::f(self)",
            ),
            (
                "self::m::n::f",
                "useself::mas{m}_m;use{m}_m::nas{m};{m}::f(self)",
            ),
            ("MyOp::roofline", "useMyOpas{m};{m}::roofline(self)"),
            ("m::f::<T>", "usemas{m};{m}::f::<T>(self)"),
        ] {
            let (out, module) = func_expansion(func, item());
            let m = module.unwrap_or_else(|| panic!("{func}: no place-bearing alias: {out}"));
            let expected = expected.replace("{m}", &m);
            assert!(out.contains(&expected), "{func}: {expected}\n{out}");
            assert!(out.contains(&format!("Computedby`{func}`.")), "{out}");
        }
        // Nothing to import under a name: called as written.
        for func in ["f", "self::f", "Self::f", "Helper::<T>::f"] {
            let (out, module) = func_expansion(func, item());
            assert_eq!(module, None, "{func}: {out}");
            assert!(out.contains(&format!("{func}(self)")), "{func}: {out}");
        }
    }

    #[test]
    fn missing_fields_are_listed() {
        let out = expand_with(
            ENTRY,
            quote!("op_a", register = false),
            quote! { pub struct A { y: u8 } },
        );
        assert!(
            out.contains("lacks the field that eval_roofline reads: `x: TensorSpec` (input; it also gives `elem_bytes`, which a `dtype: DType` field could give instead)"),
            "{out}"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any text as a formula, in any position of an entry: parse + validate report, never panic.
        #[test]
        fn lint_never_panics_on_arbitrary_formulas(formula in "\\PC{0,60}", slot in 0usize..3) {
            let quoted = format!("{formula:?}");
            let text = match slot {
                0 => ENTRY.replace("\"product(x.shape)\"", &quoted),
                1 => ENTRY.replace("flops: \"N\"", &format!("flops: {quoted}")),
                _ => ENTRY.replace("\"2 * N * elem_bytes\"", &quoted),
            };
            for problem in lint(&[family("m.yaml", &text)]) {
                proptest::prop_assert!(!problem.render().is_empty());
            }
        }

        /// Any text as a family file: the YAML and manifest passes report, never panic.
        #[test]
        fn lint_never_panics_on_arbitrary_yaml(text in "[a-z_:\\-\\[\\]{}, \"'\\n0-9.]{0,120}") {
            for problem in lint(&[family("m.yaml", &text)]) {
                proptest::prop_assert!(!problem.render().is_empty());
            }
        }

        /// Mutations of a valid entry (a character replaced) keep the passes panic-free.
        #[test]
        fn lint_never_panics_on_mutated_entries(at in 0usize..300, c in proptest::char::any()) {
            let mut text: Vec<char> = ENTRY.chars().collect();
            let at = at % text.len();
            text[at] = c;
            let text: String = text.into_iter().collect();
            for problem in lint(&[family("m.yaml", &text)]) {
                proptest::prop_assert!(!problem.render().is_empty());
            }
        }
    }

    /// Names for the garbage-name property test: identifiers, keywords, and near-identifiers.
    fn name_strategy() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        // Mostly identifiers, so that a good share of entries is valid and expands.
        prop_oneof![
            12 => "[a-zA-Z_][a-zA-Z0-9_]{0,4}",
            1 => "[a-zA-Z0-9_ .\\-]{0,5}",
            1 => "[a-z]{1,3}[-. ][a-z0-9]{1,2}",
            1 => "[0-9][a-z_]{0,3}",
            1 => proptest::sample::select(vec![
                "type", "match", "fn", "self", "Self", "super", "crate", "_", "lambda", "None",
                "for", "x", "N", "elem_bytes", "product", "",
            ])
            .prop_map(str::to_owned),
        ]
    }

    /// A struct with a field for each name that can be one (raw identifiers for Rust keywords).
    fn struct_for(inputs: &[&str], params: &[&str]) -> TokenStream {
        let field = |name: &str| {
            syn::parse_str::<syn::Ident>(name)
                .or_else(|_| syn::parse_str::<syn::Ident>(&format!("r#{name}")))
                .ok()
        };
        let inputs = inputs.iter().filter_map(|n| field(n));
        let params = params.iter().filter_map(|n| field(n));
        quote! { pub struct P { #(#inputs: tileops::TensorSpec,)* #(#params: i64,)* } }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Identifier-like garbage as input, param, dim and var names: the library passes and the
        /// macro never panic, every diagnostic renders, and the macro generates code exactly when
        /// the library finds nothing wrong (the struct has a field for every name that can be one).
        #[test]
        fn garbage_names_never_panic_and_every_error_renders(
            in1 in name_strategy(),
            in2 in name_strategy(),
            d1 in name_strategy(),
            d2 in name_strategy(),
            param in name_strategy(),
            var in name_strategy(),
        ) {
            let q = |s: &str| format!("{s:?}");
            let text = format!(
                "op_p:\n  family: t\n  status: implemented\n  signature:\n    inputs:\n      {}: {{dtype: float16, shape: \"[{d1}, {d2}]\"}}\n      {}: {{dtype: float16}}\n    params:\n      {}: {{type: int}}\n  roofline:\n    vars:\n      {}: \"product({in2}.shape)\"\n    flops: \"{d1} * {var}\"\n    bytes: \"{param} * elem_bytes\"\n",
                q(&in1), q(&in2), q(&param), q(&var),
            );
            let problems = lint(&[family("m.yaml", &text)]);
            for problem in &problems {
                let rendered = problem.render();
                proptest::prop_assert!(!rendered.is_empty());
                if problem.location.is_some() {
                    proptest::prop_assert!(rendered.starts_with("m.yaml:"), "{}", rendered);
                }
            }
            let out = expand_with(
                &text,
                quote!("op_p", register = false),
                struct_for(&[&in1, &in2], &[&param]),
            );
            proptest::prop_assert_eq!(
                out.contains("compile_error"),
                !problems.is_empty(),
                "lint: {:?}\nmacro: {}",
                problems.iter().map(Diagnostic::render).collect::<Vec<_>>(),
                out
            );
        }
    }

    #[test]
    fn non_structs_and_bad_args_are_errors_not_panics() {
        let out = roofline_op(quote!("op_a"), quote! { fn f() {} });
        assert!(out.to_string().contains("compile_error"), "{out}");
        let out = roofline_op(quote!(op_a), quote! { struct A { x: u8 } });
        assert!(out.to_string().contains("compile_error"), "{out}");
        let out = roofline_op(quote!("op_a"), quote! { struct A(u8); });
        assert!(out.to_string().contains("compile_error"), "{out}");
    }
}
