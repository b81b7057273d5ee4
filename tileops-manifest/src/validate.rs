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
    /// Func mode: the Rust path to call.
    Func(syn::Path),
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
        RooflineSpec::Func { path, offset } => match syn::parse_str::<syn::Path>(path) {
            Ok(path) => Some(CheckedRoofline::Func(path)),
            Err(_) => {
                let message = match python_function(path) {
                    // TileOPs names its func by Python module path; tileops calls Rust.
                    Some(name) => format!(
                        "{}: `func` names a Python function (`{path}`, TileOPs's dotted form); tileops calls a Rust function taking `&Op`: give its Rust path (`crate::perf::{name}`)",
                        entry.name
                    ),
                    None => format!(
                        "{}: `func` must be a Rust path to a function taking `&Op` (`crate::perf::my_roofline`); `{path}` is not one",
                        entry.name
                    ),
                };
                errors.push(Diagnostic::at(&entry.file, *offset, path.len(), message));
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

/// The function name of a Python dotted path (`pkg.module.fn` → `fn`), if `path` is one.
fn python_function(path: &str) -> Option<&str> {
    let parts: Vec<&str> = path.split('.').collect();
    let identifier = |p: &&str| {
        p.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    (parts.len() > 1 && parts.iter().all(identifier)).then(|| parts[parts.len() - 1])
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

    #[test]
    fn python_dotted_paths_are_recognised() {
        assert_eq!(
            python_function("tileops.perf.formulas.clamp_fwd_roofline"),
            Some("clamp_fwd_roofline")
        );
        assert_eq!(python_function("clamp"), None);
        assert_eq!(python_function("a.1b"), None);
        assert_eq!(python_function("crate::perf::f"), None);
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
