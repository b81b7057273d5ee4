//! The formula language's stated limits (`tileops/docs/formula-language.md`, "Limits"), end to end
//! through the library: a manifest entry is parsed, checked and validated, and every error it
//! produces is rendered with the diagnostic renderer, which must not panic either.
//!
//! - the largest formulas of `tests/manifests/formula_limits.yaml` (which the root test
//!   `tests/it/formula_limits.rs` compiles and evaluates) are accepted, and one level more of each is
//!   a located error;
//! - property tests: chains of thousands of operands, comprehensions with many clauses, random
//!   nesting around the limits, and identifier-like garbage in formulas.

use std::rc::Rc;

use proptest::prelude::*;
use tileops_manifest::diagnostic::{Diagnostic, SourceFile};
use tileops_manifest::formula::{self, Layer, MAX_DEPTH, MAX_FOR_CLAUSES, MAX_NESTING, Scope};
use tileops_manifest::{manifest, validate};

/// Every entry of a manifest text, validated: the rendered errors (empty when all is well).
fn errors_of(text: &str) -> Vec<String> {
    let file = Rc::new(SourceFile {
        display_path: "manifest/limits.yaml".into(),
        text: text.to_owned(),
    });
    let family = manifest::parse_family_file(Rc::clone(&file));
    let mut errors: Vec<Diagnostic> = family.errors;
    for (name, offset, node) in &family.entries {
        let (entry, problems) = manifest::check_entry(&file, name, *offset, node);
        errors.extend(problems);
        if let Some(entry) = entry
            && let Err(problems) = validate::check(&entry, false)
        {
            errors.extend(problems);
        }
    }
    errors.iter().map(Diagnostic::render).collect()
}

/// A YAML double-quoted scalar holding `s` exactly.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One entry whose var `V` is `formula` (the flops read it, so it is bound).
fn entry(formula: &str) -> String {
    format!(
        "limits:\n  family: test\n  status: implemented\n  signature:\n    inputs:\n      \
         x: {{dtype: \"float32\"}}\n    params:\n      dim: {{type: int}}\n  roofline:\n    \
         vars:\n      N: \"product(x.shape)\"\n      V: {}\n    flops: \"V\"\n    \
         bytes: \"N * elem_bytes\"\n",
        quoted(formula)
    )
}

/// Asserts exactly one error, containing `needle`, located in the formula's line with a caret.
fn one_error(formula: &str, needle: &str) {
    let errors = errors_of(&entry(formula));
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let e = &errors[0];
    assert!(e.contains(needle), "{e}");
    assert!(e.starts_with("manifest/limits.yaml:12:"), "{e}");
    assert!(e.contains("\n   | ") && e.contains('^'), "{e}");
}

#[test]
fn the_largest_formulas_are_accepted() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/manifests/formula_limits.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    assert_eq!(errors_of(&text), Vec::<String>::new());
    // What it holds, for the record: chains of 4000 `**`, 1000 comparisons, 1000 `and`s and
    // `or`s, 5000 `+` and 1000 `*`, and nesting at the limits.
    assert!(text.contains(&vec!["1"; 4000].join(" ** ")));
    assert!(text.contains(&vec!["N"; 5000].join(" + ")));
}

#[test]
fn one_level_more_is_a_located_error() {
    let nesting = format!("more than {MAX_NESTING} levels");
    let depth = format!("more than {MAX_DEPTH} levels");
    // Unary operators and parentheses: 63 and 64 levels pass (the formula itself is one).
    assert_eq!(errors_of(&entry(&format!("{}N", "-".repeat(63)))), [""; 0]);
    one_error(&format!("{}N", "-".repeat(64)), &nesting);
    let parens = |n: usize| format!("{}N{}", "1 * (".repeat(n), ")".repeat(n));
    assert_eq!(errors_of(&entry(&parens(63))), [""; 0]);
    one_error(&parens(64), &nesting);
    let nots = |n: usize| format!("{}N", "not ".repeat(n));
    assert_eq!(errors_of(&entry(&nots(63))), [""; 0]);
    one_error(&nots(64), &nesting);
    let conditional = |n: usize| format!("{}0", "N if N else ".repeat(n));
    assert_eq!(errors_of(&entry(&conditional(63))), [""; 0]);
    one_error(&conditional(64), &nesting);
    // A tree 100 deep passes; 101 does not.
    let tree = |n: usize| (0..n).fold("N".to_string(), |e, _| format!("({e},)[0]"));
    assert_eq!(errors_of(&entry(&format!("-{}", tree(49)))), [""; 0]);
    one_error(&format!("-{}", tree(50)), &depth);
    let comprehensions =
        |n: usize| (0..n).fold("0".to_string(), |e, _| format!("[{e} for b in range(1)]"));
    assert_eq!(
        errors_of(&entry(&format!("len({})", comprehensions(49)))),
        [""; 0]
    );
    one_error(&format!("len({})", comprehensions(50)), &depth);
    // The most `for` clauses.
    let clauses = |n: usize| {
        let fors: Vec<String> = (0..n).map(|i| format!("for a{i} in range(2)")).collect();
        format!("sum(1 {})", fors.join(" "))
    };
    assert_eq!(errors_of(&entry(&clauses(MAX_FOR_CLAUSES))), [""; 0]);
    one_error(
        &clauses(1000),
        "a comprehension may have at most 16 `for` clauses; this is clause 17",
    );
    // The inputs, all accepted now: chains are flat.
    for formula in [
        vec!["1"; 4000].join(" ** "),
        vec!["N"; 1001].join(" < "),
        vec!["N"; 100].join(" + "),
        vec!["N"; 20_000].join(" - "),
    ] {
        assert_eq!(errors_of(&entry(&formula)), [""; 0], "{}", &formula[..20]);
    }
}

fn scope() -> Scope {
    Scope::new().input("x", false).param("dim").var("N")
}

/// Parse, check in both layers, and generate: no panic, usable spans, and code that `syn`
/// reads as one Rust expression whenever the formula checks clean.
fn exercise(src: &str) -> Result<(), formula::FormulaError> {
    let expr = formula::parse(src)?;
    assert!(expr.depth() <= MAX_DEPTH);
    for layer in [Layer::Vars, Layer::Arithmetic] {
        let checked = formula::check(&expr, layer, &scope());
        for e in &checked.errors {
            assert!(src.is_char_boundary(e.span.start) && src.is_char_boundary(e.span.end));
        }
        if checked.is_ok() {
            let code = formula::codegen(&expr, &scope());
            syn::parse2::<syn::Expr>(code).unwrap();
        }
    }
    Ok(())
}

const OPERANDS: &[&str] = &[
    "N",
    "dim",
    "1",
    "2.5",
    "x.ndim",
    "(N)",
    "-N",
    "x.shape[0]",
    "True",
    "None",
    "'s'",
];
const CHAIN_OPS: &[&str] = &[
    "+", "-", "*", "/", "//", "%", "**", "<", "<=", "==", "!=", "in", "not in", "is", "is not",
    "and", "or",
];

/// Wrappers that each add one level of nesting around an expression.
fn wrap(e: String, kind: u8) -> String {
    match kind % 9 {
        0 => format!("({e})"),
        1 => format!("-{e}"),
        // `-not x` is not Python; `(not x)` is.
        2 => format!("(not {e})"),
        3 => format!("abs({e})"),
        4 => format!("[{e}]"),
        5 => format!("N if N else {e}"),
        6 => format!("[{e} for i in range(2)]"),
        7 => format!("({e},)[0]"),
        _ => format!("{{{e}, 1}}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A chain of one operator, of any length, is one flat node: it parses, checks and
    /// generates code, whatever the operands.
    #[test]
    fn chains_of_any_length_parse_flat(
        op in prop::sample::select(CHAIN_OPS),
        operands in prop::collection::vec(prop::sample::select(OPERANDS), 1..2500),
    ) {
        // After `**`, a unary operand takes the rest of the chain as its operand (Python's
        // grammar: `a ** -b ** c` is `a ** (-(b ** c))`), which is real nesting, bounded like any
        // other; parenthesised, it is one operand of the flat chain.
        let operands: Vec<&str> = operands
            .iter()
            .map(|o| if op == "**" && *o == "-N" { "(-N)" } else { o })
            .collect();
        let src = operands.join(&format!(" {op} "));
        let expr = formula::parse(&src).unwrap();
        // The chain node, its operand, and the operand's own parts (`x.shape[0]` is 3 deep).
        prop_assert!(expr.depth() <= 5, "{}", expr.depth());
        exercise(&src).unwrap();
        // Through a manifest too: at most the layer's own complaints, each rendered.
        for e in errors_of(&entry(&src)) {
            prop_assert!(e.starts_with("manifest/limits.yaml:12:"), "{}", e);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Comprehensions with 1 to 40 clauses: up to the limit they pass; beyond it the error
    /// points at the first clause too many.
    #[test]
    fn many_clauses_are_bounded(n in 1_usize..40, ifs in prop::collection::vec(any::<bool>(), 40)) {
        let clauses: Vec<String> = (0..n)
            .map(|i| {
                let cond = if ifs[i] { format!(" if a{i} >= 0") } else { String::new() };
                format!("for a{i} in range(2){cond}")
            })
            .collect();
        let src = format!("[a0 {}]", clauses.join(" "));
        match exercise(&src) {
            Ok(()) => prop_assert!(n <= MAX_FOR_CLAUSES),
            Err(e) => {
                prop_assert!(n > MAX_FOR_CLAUSES);
                let at = src.match_indices("for").nth(MAX_FOR_CLAUSES).unwrap().0;
                prop_assert_eq!(e.span, at..at + 3);
            }
        }
        let errors = errors_of(&entry(&src));
        prop_assert_eq!(errors.len(), usize::from(n > MAX_FOR_CLAUSES), "{:?}", errors);
    }

    /// Random nesting around the limits: accepted within them, a located "nested too deeply"
    /// beyond them; never a panic, and each error rendered.
    #[test]
    fn random_nesting_is_bounded(kinds in prop::collection::vec(any::<u8>(), 0..140)) {
        let src = kinds.iter().fold("N".to_string(), |e, k| wrap(e, *k));
        match exercise(&src) {
            Ok(()) => prop_assert!(kinds.len() <= MAX_DEPTH),
            Err(e) => prop_assert!(e.message.contains("nested too deeply"), "{}", e.message),
        }
        for e in errors_of(&entry(&src)) {
            prop_assert!(e.starts_with("manifest/limits.yaml:12:"), "{}", e);
        }
    }

    /// Identifier-like garbage (names that are not identifiers, keywords, digits first,
    /// multibyte letters, stray punctuation) where formulas have names: every error is located
    /// and renders.
    #[test]
    fn identifier_like_garbage_never_panics(
        // `"` and `\` are YAML escapes inside the double-quoted formula: the errors after them
        // must still be located (see `multibyte_text_after_yaml_escapes_renders`).
        garbage in prop::collection::vec("[A-Za-z_0-9é漢ß\\- .$'\"\\\\]{0,12}", 1..6),
        template in 0_usize..6,
    ) {
        let g = |i: usize| garbage[i % garbage.len()].as_str();
        let src = match template {
            0 => g(0).to_string(),
            1 => format!("{} + {}", g(0), g(1)),
            2 => format!("product({}.shape)", g(0)),
            3 => format!("[{} for {} in range({})]", g(0), g(1), g(2)),
            4 => format!("{} ** {} ** {} < {}", g(0), g(1), g(2), g(3)),
            _ => format!("x.shape[{}] if {} else {}", g(0), g(1), g(2)),
        };
        let _ = exercise(&src);
        for e in errors_of(&entry(&src)) {
            prop_assert!(e.starts_with("manifest/limits.yaml:"), "{}", e);
        }
    }
}

/// Found by `identifier_like_garbage_never_panics` with `"` and `\` in its alphabet: an error in a
/// double-quoted scalar with escapes before a multibyte character made the renderer slice inside
/// that character (the YAML layer now maps offsets through the escapes).
#[test]
fn multibyte_text_after_yaml_escapes_renders() {
    let errors = errors_of(&entry("\"\\漢\"a"));
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with("manifest/limits.yaml:12:"),
        "{}",
        errors[0]
    );
}
