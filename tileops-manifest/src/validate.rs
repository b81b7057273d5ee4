//! Formula checks for one entry: every name and construct, layer by layer.
//!
//! This pass generates nothing. It parses each formula, checks it against its layer's name table
//! (formula-language.md), checks `vars` keys for shadowing, and maps every error back to its place
//! in the YAML. All problems of an entry are returned together.

use crate::diagnostic::Diagnostic;
use crate::formula::{self, Expr, Layer, Scope};
use crate::manifest::{Entry, FormulaSource, RooflineSpec, Status};
use std::collections::BTreeSet;
use std::rc::Rc;

/// A formula that parsed and passed its layer's checks.
#[derive(Debug, Clone)]
pub struct CheckedFormula {
    /// Where it came from.
    pub source: FormulaSource,
    /// Its syntax tree.
    pub expr: Expr,
    /// Free names it references (inputs, params, vars, dims, `elem_bytes`).
    pub names: BTreeSet<String>,
    /// The names of the entry (codegen tells tensor inputs from values by it). One scope shared by
    /// every formula of the entry: it holds all the vars, which changes nothing for codegen (a
    /// formula that read a later var was refused), and sharing it keeps an entry of thousands of
    /// vars linear rather than one copy of the scope per var.
    pub scope: Rc<Scope>,
}

/// The checked roofline of an entry.
#[derive(Clone)]
pub enum CheckedRoofline {
    /// Inline mode: vars in declaration order, then flops and bytes.
    Inline {
        /// Each var's name with its checked formula, in declaration order.
        vars: Vec<(String, CheckedFormula)>,
        /// The checked `flops` formula.
        flops: Box<CheckedFormula>,
        /// The checked `bytes` formula.
        bytes: Box<CheckedFormula>,
    },
    /// Func mode: the function to call.
    Func(CheckedFunc),
}

/// A `func` roofline: the Rust function the generated `eval_roofline` calls with `self`.
#[derive(Clone)]
pub struct CheckedFunc {
    /// The Rust path called: the path as written, or `::a::b::f` for TileOPs's dotted `a.b.f`.
    pub path: syn::Path,
    /// The `func` string as written in the manifest.
    pub written: String,
    /// Whether `written` is TileOPs's dotted form (`tileops.perf.formulas.f`).
    pub dotted: bool,
    /// Byte offset of the string's content in the manifest file, for the location the generated
    /// code carries into rustc's error when the path does not resolve.
    pub offset: usize,
}

/// Check an entry's formulas. `require_implemented` refuses `spec-only` entries (codegen does;
/// the manifest lint checks spec-only entries' formulas too).
pub fn check(entry: &Entry, require_implemented: bool) -> Result<CheckedRoofline, Vec<Diagnostic>> {
    let mut errors = Vec::new();
    if require_implemented && entry.status == Status::SpecOnly {
        errors.push(Diagnostic::at(
            &entry.file,
            entry.offset,
            entry.name.len(),
            format!(
                "{}: the entry is `status: spec-only`, and codegen runs for implemented entries only; \
                 set `status: implemented` once the op matches its manifest signature",
                entry.name
            ),
        ));
    }
    let Some(roofline) = &entry.roofline else {
        // Structural errors were reported by the manifest pass.
        return Err(errors);
    };
    let result = match roofline {
        RooflineSpec::Func { path, offset } => match func_path(path) {
            Ok((rust, dotted)) => Some(CheckedRoofline::Func(CheckedFunc {
                path: rust,
                written: path.clone(),
                dotted,
                offset: *offset,
            })),
            Err(why) => {
                errors.push(Diagnostic::at(
                    &entry.file,
                    *offset,
                    path.len(),
                    format!(
                        "{}: `func` must name a function taking `&Op`, by a Rust path (`crate::perf::my_roofline`) or by TileOPs's dotted path (`tileops.perf.formulas.my_roofline`, which calls `::tileops::perf::formulas::my_roofline`); `{path}` is neither{why}",
                        entry.name
                    ),
                ));
                None
            }
        },
        RooflineSpec::Inline { vars, flops, bytes } => {
            check_inline(entry, vars, flops, bytes, &mut errors)
        }
    };
    match result {
        Some(checked) if errors.is_empty() => Ok(checked),
        _ => Err(errors),
    }
}

/// The Rust path a `func` string names, and whether it was written in TileOPs's dotted form.
///
/// TileOPs names its roofline functions by Python module path (`tileops.perf.formulas.f`); such a
/// string, identifiers joined by dots, is the absolute Rust path `::tileops::perf::formulas::f`:
/// its first segment is a crate (tileops has `extern crate self as tileops`, so `::tileops::...`
/// resolves inside tileops too), and TileOPs's entries port verbatim once the function exists in
/// Rust. Any other string must be a Rust path, kept as written (`crate::perf::f`, `my_mod::f`).
/// The error is the reason it is neither, worded to follow "is neither" (empty when there is
/// nothing more to say than that).
///
/// ```
/// use quote::ToTokens;
/// use tileops_manifest::validate::func_path;
/// let (path, dotted) = func_path("tileops.perf.formulas.gqa_decode_roofline").unwrap();
/// assert!(dotted);
/// assert_eq!(
///     path.to_token_stream().to_string().replace(' ', ""),
///     "::tileops::perf::formulas::gqa_decode_roofline"
/// );
/// let (path, dotted) = func_path("crate::perf::f").unwrap();
/// assert!(!dotted);
/// assert_eq!(path.to_token_stream().to_string().replace(' ', ""), "crate::perf::f");
/// assert!(func_path("a.1b").is_err());
/// ```
pub fn func_path(text: &str) -> Result<(syn::Path, bool), String> {
    if text.contains('.') {
        return dotted_path(text).map(|path| (path, true));
    }
    // `syn` accepts a few strings that are no path rustc could call (` crate `, with spaces, is
    // harmless); everything it refuses is refused here.
    syn::parse_str::<syn::Path>(text)
        .map(|path| (path, false))
        .map_err(|_| String::new())
}

/// `a.b.f` as `::a::b::f`. Each part must be a Python identifier (ASCII, not a Python keyword);
/// a Rust keyword becomes a raw identifier (`type` → `r#type`), except those no path segment of
/// an absolute path can be (`self`, `Self`, `super`, `crate`, `_`).
fn dotted_path(text: &str) -> Result<syn::Path, String> {
    let mut rust = String::new();
    for part in text.split('.') {
        if !crate::manifest::names::is_identifier(part) {
            return Err(format!(
                ": in the dotted form each part is an identifier, and `{part}` is not one"
            ));
        }
        if crate::manifest::names::PYTHON_KEYWORDS.contains(&part) {
            return Err(format!(
                ": in the dotted form each part is a Python identifier, and `{part}` is a Python keyword"
            ));
        }
        if ["self", "Self", "super", "crate", "_"].contains(&part) {
            return Err(format!(
                ": `{part}` cannot be a segment of the absolute Rust path the dotted form stands for"
            ));
        }
        rust += "::";
        if syn::parse_str::<syn::Ident>(part).is_err() {
            rust += "r#"; // a Rust keyword: `type` is the raw `r#type`
        }
        rust += part;
    }
    syn::parse_str::<syn::Path>(&rust).map_err(|_| String::new())
}

fn check_inline(
    entry: &Entry,
    vars: &[crate::manifest::VarDecl],
    flops: &FormulaSource,
    bytes: &FormulaSource,
    errors: &mut Vec<Diagnostic>,
) -> Option<CheckedRoofline> {
    let mut scope = Scope::default();
    scope
        .params
        .extend(entry.params.iter().map(|p| p.name.clone()));
    for input in &entry.inputs {
        scope.inputs.insert(input.name.clone(), input.optional);
        for (_, dim, _) in input.dims() {
            // A dim named like a param is that param in the formulas, as in TileOPs (whose
            // formulas see no dims at all); codegen checks the extent against it at run time.
            if !scope.params.contains(dim) {
                scope.dims.insert(dim.to_owned());
            }
        }
    }

    let mut checked_vars = Vec::new();
    let mut ok = true;
    for var in vars {
        if let Some(what) = shadowed(&scope, &var.name) {
            errors.push(Diagnostic::at(
                &entry.file,
                var.name_offset,
                var.name.len(),
                format!(
                    "{}: `vars.{}` shadows {what}; rename the variable",
                    entry.name, var.name
                ),
            ));
            ok = false;
        }
        match check_one(entry, &var.formula, Layer::Vars, &scope, errors) {
            Some(formula) => checked_vars.push((var.name.clone(), formula)),
            None => ok = false,
        }
        scope.vars.insert(var.name.clone());
    }
    let flops = check_one(entry, flops, Layer::Arithmetic, &scope, errors);
    let bytes = check_one(entry, bytes, Layer::Arithmetic, &scope, errors);
    let scope = Rc::new(scope);
    let share = |(expr, names, source): Unscoped| CheckedFormula {
        source,
        expr,
        names,
        scope: Rc::clone(&scope),
    };
    match (flops, bytes) {
        (Some(flops), Some(bytes)) if ok => Some(CheckedRoofline::Inline {
            vars: checked_vars
                .into_iter()
                .map(|(name, f)| (name, share(f)))
                .collect(),
            flops: Box::new(share(flops)),
            bytes: Box::new(share(bytes)),
        }),
        _ => None,
    }
}

/// A checked formula before the entry's shared scope is attached: tree, names read, source.
type Unscoped = (Expr, BTreeSet<String>, FormulaSource);

/// What a `vars` key would hide, if anything.
fn shadowed(scope: &Scope, name: &str) -> Option<String> {
    if scope.inputs.contains_key(name) {
        Some(format!("the input `{name}`"))
    } else if scope.params.contains(name) {
        Some(format!("the param `{name}`"))
    } else if name == "elem_bytes" {
        Some("`elem_bytes`".to_owned())
    } else if formula::VARS_HELPERS.contains(&name) {
        Some(format!("the helper `{name}`"))
    } else if scope.vars.contains(name) {
        Some(format!("an earlier var `{name}`"))
    } else {
        // A fixed-rank dim may be reused: the var is the binding later formulas see, as in
        // TileOPs, which binds no dims when `vars` is present.
        None
    }
}

fn check_one(
    entry: &Entry,
    source: &FormulaSource,
    layer: Layer,
    scope: &Scope,
    errors: &mut Vec<Diagnostic>,
) -> Option<Unscoped> {
    let locate = |e: formula::FormulaError| {
        Diagnostic::in_scalar(
            &entry.file,
            source.origin,
            &source.text,
            e.span,
            format!("{}: `{}`: {}", entry.name, source.field, e.message),
        )
    };
    let expr = match formula::parse(&source.text) {
        Ok(expr) => expr,
        Err(e) => {
            errors.push(locate(e));
            return None;
        }
    };
    let checked = formula::check(&expr, layer, scope);
    if !checked.errors.is_empty() {
        errors.extend(checked.errors.into_iter().map(locate));
        return None;
    }
    Some((expr, checked.names, source.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::diagnostic::SourceFile;
    use quote::ToTokens;

    fn rust(text: &str) -> (String, bool) {
        let (path, dotted) = func_path(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        (path.to_token_stream().to_string().replace(' ', ""), dotted)
    }

    #[test]
    fn a_dotted_path_is_the_absolute_rust_path_of_its_parts() {
        assert_eq!(
            rust("tileops.perf.formulas.gqa_decode_roofline"),
            (
                "::tileops::perf::formulas::gqa_decode_roofline".to_owned(),
                true
            )
        );
        assert_eq!(rust("my_crate.f"), ("::my_crate::f".to_owned(), true));
        // A Rust keyword is a valid Python module name: it becomes a raw identifier.
        assert_eq!(rust("pkg.type.f"), ("::pkg::r#type::f".to_owned(), true));
    }

    #[test]
    fn a_rust_path_is_kept_as_written() {
        for path in [
            "crate::perf::f",
            "::tileops::perf::f",
            "my_mod::f",
            "f",
            "super::f",
            "self::m::f",
            "MyOp::roofline",
            "f::<u8>",
        ] {
            assert_eq!(rust(path), (path.to_owned(), false), "{path}");
        }
    }

    #[test]
    fn a_string_that_is_neither_form_is_refused_with_the_reason() {
        for (text, why) in [
            ("a.1b", "`1b` is not one"),
            ("a..f", "`` is not one"),
            (".f", "`` is not one"),
            ("a.f(x)", "`f(x)` is not one"),
            ("pkg.lambda.f", "`lambda` is a Python keyword"),
            ("pkg.self.f", "`self` cannot be a segment"),
            ("f(x)", ""),
            ("", ""),
            ("crate::", ""),
        ] {
            let err = func_path(text).map(|_| ()).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err:?}");
        }
    }

    fn entry_with_func(func: &str) -> Entry {
        let text = format!(
            "op:\n  family: t\n  status: implemented\n  signature:\n    inputs:\n      x: {{dtype: float16}}\n  roofline:\n    func: \"{func}\"\n"
        );
        let file = std::rc::Rc::new(SourceFile {
            display_path: "manifest/t.yaml".into(),
            text,
        });
        let family = crate::manifest::parse_family_file(std::rc::Rc::clone(&file));
        let (name, offset, node) = &family.entries[0];
        let (entry, errors) = crate::manifest::check_entry(&file, name, *offset, node);
        assert!(errors.is_empty(), "{errors:?}");
        entry.unwrap()
    }

    #[test]
    fn func_entries_check_to_the_path_they_call() {
        let entry = entry_with_func("tileops.perf.formulas.gqa_decode_roofline");
        let Ok(CheckedRoofline::Func(func)) = check(&entry, true) else {
            panic!("not a checked func")
        };
        assert!(func.dotted);
        assert_eq!(func.written, "tileops.perf.formulas.gqa_decode_roofline");
        assert_eq!(&entry.file.text[func.offset..][..8], "tileops.");
        let path = &func.path;
        assert_eq!(
            quote::quote!(#path).to_string().replace(' ', ""),
            "::tileops::perf::formulas::gqa_decode_roofline"
        );
        let entry = entry_with_func("crate::perf::f");
        let Ok(CheckedRoofline::Func(func)) = check(&entry, true) else {
            panic!("not a checked func")
        };
        assert!(!func.dotted);
    }

    #[test]
    fn an_invalid_func_is_refused_at_its_place_naming_both_forms() {
        let entry = entry_with_func("a.1b");
        let Err(errors) = check(&entry, true) else {
            panic!("accepted")
        };
        let rendered = errors[0].render();
        assert!(
            rendered.starts_with("manifest/t.yaml:8:12: op: `func` must name a function taking `&Op`, by a Rust path (`crate::perf::my_roofline`) or by TileOPs's dotted path (`tileops.perf.formulas.my_roofline`, which calls `::tileops::perf::formulas::my_roofline`); `a.1b` is neither: in the dotted form each part is an identifier, and `1b` is not one"),
            "{rendered}"
        );
        assert!(rendered.ends_with("^^^^"), "{rendered}");
        let Err(errors) = check(&entry_with_func("f(x)"), true) else {
            panic!("accepted")
        };
        assert!(
            errors[0].render().contains("; `f(x)` is neither\n"),
            "{}",
            errors[0].render()
        );
    }

    fn entry_from(text: &str) -> Entry {
        let file = std::rc::Rc::new(SourceFile {
            display_path: "manifest/t.yaml".into(),
            text: text.to_owned(),
        });
        let family = crate::manifest::parse_family_file(std::rc::Rc::clone(&file));
        let (name, offset, node) = &family.entries[0];
        let (entry, errors) = crate::manifest::check_entry(&file, name, *offset, node);
        assert!(errors.is_empty(), "{errors:?}");
        entry.unwrap()
    }

    /// TileOPs's MoeGroupedGemmNopadFwdOp, reduced: every dim of `a` and `b` is also a param.
    const DIMS_AS_PARAMS: &str = "op:\n  family: t\n  status: implemented\n  signature:\n    inputs:\n      a: {dtype: float16, shape: [numel, k]}\n      b: {dtype: float16, shape: [num_experts, n, k]}\n    params:\n      numel: {type: int}\n      num_experts: {type: int}\n      n: {type: int}\n      k: {type: int}\n  roofline:\n    flops: \"2 * numel * n * k\"\n    bytes: \"(numel * k + num_experts * n * k + numel * n) * elem_bytes\"\n";

    #[test]
    fn a_dim_named_like_a_param_is_the_param_in_the_formulas() {
        let entry = entry_from(DIMS_AS_PARAMS);
        let Ok(CheckedRoofline::Inline { flops, .. }) = check(&entry, true) else {
            panic!("refused")
        };
        // The scope holds them as params only: the formulas read the params.
        for name in ["numel", "num_experts", "n", "k"] {
            assert!(flops.scope.params.contains(name), "{name}");
            assert!(!flops.scope.dims.contains(name), "{name}");
        }
        assert_eq!(
            flops.names.iter().map(String::as_str).collect::<Vec<_>>(),
            ["k", "n", "numel"]
        );
        // A dim that is no param is still a dim.
        let entry = entry_from(&DIMS_AS_PARAMS.replace("      n: {type: int}\n", ""));
        let Ok(CheckedRoofline::Inline { flops, .. }) = check(&entry, true) else {
            panic!("refused")
        };
        assert!(flops.scope.dims.contains("n") && !flops.scope.params.contains("n"));
    }
}
