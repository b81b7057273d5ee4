//! The manifest formula language (`tileops/docs/formula-language.md`): a Python 3 expression subset,
//! parsed, checked against its layer's names, and turned into Rust at compile time.
//!
//! The pipeline for one formula string:
//! 1. [`parse`] → an [`Expr`] tree with byte spans, or the first syntax error;
//! 2. [`check`](fn@check) → every name/form error for its [`Layer`] and [`Scope`], and the free
//!    names it reads (what the binding block must bind);
//! 3. [`codegen`](fn@codegen) → a Rust expression of type `::tileops::roofline::Value`.
//!
//! ```text
//! let scope = Scope::new().input("x", false).param("dim");
//! let expr = formula::parse("x.shape[dim % x.ndim]")?;
//! let checked = formula::check(&expr, Layer::Vars, &scope);
//! assert!(checked.is_ok());
//! let tokens = formula::codegen(&expr, &scope); // uses `py_x` (an InputRef) and `py_dim`
//! ```
//!
//! Spans are byte offsets into the formula string; the caller maps them into the manifest file.

pub mod ast;
pub(crate) mod check;
mod codegen;
mod lexer;
mod parser;
mod types;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;

use proc_macro2::TokenStream;

pub use ast::Expr;
#[allow(unused_imports)] // the API for the other passes; not all of it is used yet
pub use check::{ARITH_HELPERS, Checked, TYPE_HELPERS, VARS_HELPERS};
pub use parser::{MAX_DEPTH, MAX_FOR_CLAUSES, MAX_NESTING};
pub use types::{Ty, Types, infer};

/// An error inside one formula: where (byte span into the formula string) and what.
///
/// Messages start lowercase, name code in backticks, have no trailing period, and stay stable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormulaError {
    /// Byte range in the formula string of the text the error is about.
    pub span: Range<usize>,
    /// What is wrong, in the style above (e.g. "lambda expressions are not supported in
    /// formulas").
    pub message: String,
}

impl FormulaError {
    /// An error at `span` (byte offsets into the formula string) saying `message`.
    pub fn new(span: Range<usize>, message: impl Into<String>) -> Self {
        FormulaError {
            span,
            message: message.into(),
        }
    }
}

impl fmt::Display for FormulaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FormulaError {}

/// Which block a formula belongs to (tileops/docs/formula-language.md, "Layers and names"); each allows different constructs and names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// A `vars` entry: the whole syntax; tensor inputs (through `.shape`, `.ndim` and presence
    /// tests), params, `elem_bytes`, earlier vars, fixed-rank dims, all [`VARS_HELPERS`].
    Vars,
    /// `flops` / `bytes`: literals, names, operators, comparisons, `and`/`or`/`not`,
    /// conditionals, calls to [`ARITH_HELPERS`]; names are vars, params, fixed-rank dims and
    /// `elem_bytes`.
    Arithmetic,
}

impl Layer {
    /// The helpers this layer may call.
    pub fn helpers(self) -> &'static [&'static str] {
        match self {
            Layer::Vars => VARS_HELPERS,
            Layer::Arithmetic => ARITH_HELPERS,
        }
    }

    /// How messages name a formula of this layer: "a `vars` formula",
    /// "a `flops`/`bytes` formula".
    pub fn describe(self) -> &'static str {
        match self {
            Layer::Vars => "a `vars` formula",
            Layer::Arithmetic => "a `flops`/`bytes` formula",
        }
    }
}

/// The names one formula may see, besides `elem_bytes` (always) and the helpers of its layer.
///
/// Build it with the chained methods or fill the fields directly; for `vars`, add each var to
/// [`Scope::vars`] after checking it, so that later entries see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// `signature.inputs`: name → `optional` (an `optional: true` input may be absent).
    pub inputs: BTreeMap<String, bool>,
    /// `signature.params`.
    pub params: BTreeSet<String>,
    /// Vars declared so far (all of them for `flops`/`bytes`).
    pub vars: BTreeSet<String>,
    /// Dim names of fixed-rank input shapes (`shape: "[M, K]"`).
    pub dims: BTreeSet<String>,
}

impl Scope {
    /// An empty scope: no inputs, params, vars or dims.
    pub fn new() -> Self {
        Scope::default()
    }

    /// Adds the tensor input `name` (from `signature.inputs`); `optional` is its `optional:`
    /// flag (`true`: the input may be absent). Replaces an earlier entry of the same name.
    pub fn input(mut self, name: impl Into<String>, optional: bool) -> Self {
        self.inputs.insert(name.into(), optional);
        self
    }

    /// Adds the param `name` (from `signature.params`).
    pub fn param(mut self, name: impl Into<String>) -> Self {
        self.params.insert(name.into());
        self
    }

    /// Adds the var `name`, a `vars` entry declared before the formula being checked.
    pub fn var(mut self, name: impl Into<String>) -> Self {
        self.vars.insert(name.into());
        self
    }

    /// Adds the dim name `name`, bound by a fixed-rank input shape (`M` in `shape: "[M, K]"`).
    pub fn dim(mut self, name: impl Into<String>) -> Self {
        self.dims.insert(name.into());
        self
    }
}

/// Parses one formula into a tree whose nodes carry byte spans into `src`.
///
/// Returns the first syntax error, naming any construct outside the language (lambda, `:=`,
/// starred or keyword arguments, dict displays and comprehensions, f-strings, `await`, `yield`,
/// bitwise operators, `@`). Never panics; chains of any length parse (iteratively, into flat
/// nodes), and nesting beyond [`MAX_NESTING`] levels, a tree deeper than [`MAX_DEPTH`] or a
/// comprehension with more than [`MAX_FOR_CLAUSES`] `for` clauses is a located error.
pub fn parse(src: &str) -> Result<Expr, FormulaError> {
    parser::parse(src)
}

/// Checks a parsed formula against its layer's constructs and names (the table in
/// `formula-language.md`), returning every error, sorted by position, and the free names read.
pub fn check(expr: &Expr, layer: Layer, scope: &Scope) -> Checked {
    check::check(expr, layer, scope)
}

/// Generates a Rust expression of type `::tileops::roofline::Value` for a checked formula.
///
/// The code reads the locals `py_<name>` for every name in [`Checked::names`] (a
/// `::tileops::__private_v0_1::rt::InputRef` for tensor inputs, a `Value` for the rest — including
/// `py_elem_bytes`) and uses `?` on `Result<_, ::tileops::roofline::EvalError>`, so it belongs in
/// a closure or function returning that error. `scope` must be the one the formula was checked
/// with: it tells tensor inputs (and their presence tests) from values.
pub fn codegen(expr: &Expr, scope: &Scope) -> TokenStream {
    codegen::codegen(expr, scope)
}

/// Generates a Rust expression for a checked formula, computing the parts whose types are known
/// on machine values, and returns it with its Rust type: `i128` for [`Ty::Int`], `bool` for
/// [`Ty::Bool`], `::tileops::roofline::Value` for [`Ty::Value`].
///
/// As [`codegen()`], except that the locals of the names [`infer`] types are of their Rust types:
/// `py_<dim>` and `py_elem_bytes` are `i128`s, and a param or var of `types` is an `i128` or a
/// `bool` as its [`Ty`] says. Each value and each error is the one [`codegen()`]'s code gives.
///
/// ```
/// use tileops_manifest::formula::{self, Scope, Ty, Types};
/// let scope = Scope::new().input("x", false).param("dim");
/// // A shape indexed by anything is an int; a product with an untyped param is a value.
/// let expr = formula::parse("x.shape[dim % x.ndim]")?;
/// let (_, ty) = formula::codegen_typed(&expr, &scope, &Types::new());
/// assert_eq!(ty, Ty::Int);
/// let expr = formula::parse("dim * x.shape[0]")?;
/// let (_, ty) = formula::codegen_typed(&expr, &scope, &Types::new().with("dim", Ty::Int));
/// assert_eq!(ty, Ty::Int);
/// let (_, ty) = formula::codegen_typed(&expr, &scope, &Types::new());
/// assert_eq!(ty, Ty::Value);
/// # Ok::<(), formula::FormulaError>(())
/// ```
pub fn codegen_typed(expr: &Expr, scope: &Scope, types: &Types) -> (TokenStream, Ty) {
    codegen::codegen_typed(expr, scope, types)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One inline entry of the TileOPs suite vendored in `tests/tileops-compat/` (TileOPs commit
    /// 52dbc086): its inputs (name, optional), params, vars and the flops and bytes formulas.
    struct Entry {
        op: String,
        inputs: Vec<(String, bool)>,
        params: Vec<String>,
        vars: Vec<(String, String)>,
        flops: String,
        bytes: String,
    }

    /// The inline entries of the vendored suite, read from its files with this crate's own
    /// entry parser (read, not copied: the suite is the one source of these formulas).
    fn compat_entries() -> Vec<Entry> {
        use crate::load;
        use crate::manifest::{RooflineSpec, check_entry};
        let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let paths = load::locate(base, Some("../tests/tileops-compat")).expect("the suite");
        let manifest = load::load(base, &paths).expect("the suite's files");
        let mut entries = Vec::new();
        for family in &manifest.files {
            assert!(family.errors.is_empty(), "{:?}", family.errors);
            for (name, offset, node) in &family.entries {
                let (entry, _) = check_entry(&family.file, name, *offset, node);
                let entry = entry.unwrap_or_else(|| panic!("{name}: not an entry"));
                let Some(RooflineSpec::Inline { vars, flops, bytes }) = entry.roofline else {
                    continue;
                };
                entries.push(Entry {
                    op: entry.name,
                    inputs: entry
                        .inputs
                        .into_iter()
                        .map(|i| (i.name, i.optional))
                        .collect(),
                    params: entry.params.into_iter().map(|p| p.name).collect(),
                    vars: vars.into_iter().map(|v| (v.name, v.formula.text)).collect(),
                    flops: flops.text,
                    bytes: bytes.text,
                });
            }
        }
        entries
    }

    /// Checks one formula the way the expansion pass will, asserting it is clean and that its
    /// generated code is a Rust expression.
    fn accept(op: &str, field: &str, src: &str, layer: Layer, scope: &Scope) -> BTreeSet<String> {
        let expr = parse(src).unwrap_or_else(|e| panic!("{op}.{field}: {src:?}: {e}"));
        let checked = check(&expr, layer, scope);
        assert!(
            checked.is_ok(),
            "{op}.{field}: {src:?}: {:#?}",
            checked.errors
        );
        let tokens = codegen(&expr, scope);
        syn::parse2::<syn::Expr>(tokens)
            .unwrap_or_else(|e| panic!("{op}.{field}: generated invalid Rust: {e}"));
        checked.names
    }

    #[test]
    fn every_compat_formula_parses_and_checks_clean() {
        let compat = compat_entries();
        // The suite's 44 inline entries (its `func` entries are the expansion pass's business).
        assert_eq!(compat.len(), 44);
        let mut formulas = 0;
        for entry in &compat {
            let mut scope = Scope::new();
            for (name, optional) in &entry.inputs {
                scope = scope.input(name, *optional);
            }
            for name in &entry.params {
                scope = scope.param(name);
            }
            let mut used = BTreeSet::new();
            for (name, src) in &entry.vars {
                used.extend(accept(&entry.op, name, src, Layer::Vars, &scope));
                scope.vars.insert(name.clone());
                formulas += 1;
            }
            for (field, src) in [("flops", &entry.flops), ("bytes", &entry.bytes)] {
                used.extend(accept(&entry.op, field, src, Layer::Arithmetic, &scope));
                formulas += 1;
            }
            // Every entry reads its first input and `elem_bytes`.
            assert!(used.contains("elem_bytes"), "{}", entry.op);
            assert!(used.contains(&entry.inputs[0].0), "{}", entry.op);
        }
        let vars: usize = compat.iter().map(|e| e.vars.len()).sum();
        assert_eq!(formulas, 2 * compat.len() + vars);
    }

    #[test]
    fn compat_names_are_what_the_binding_block_binds() {
        let scope = Scope::new()
            .input("x", false)
            .input("weight", true)
            .input("bias", true)
            .input("running_mean", true)
            .input("running_var", true)
            .param("use_input_stats")
            .param("eps");
        let expr = parse("running_mean is not None and not use_input_stats").unwrap();
        let names = check(&expr, Layer::Vars, &scope).names;
        let expected: BTreeSet<String> = ["running_mean", "use_input_stats"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn layer_tables() {
        assert_eq!(Layer::Vars.helpers().len(), 17);
        assert_eq!(Layer::Arithmetic.helpers(), ["ceil", "floor", "log2"]);
        for t in TYPE_HELPERS {
            assert!(VARS_HELPERS.contains(t));
        }
        assert_eq!(Layer::Vars.describe(), "a `vars` formula");
        let e = FormulaError::new(1..2, "boom");
        assert_eq!(e.to_string(), "boom");
    }

    fn proptest_scope() -> Scope {
        Scope::new()
            .input("x", false)
            .input("weight", true)
            .param("dim")
            .var("M")
            .dim("K")
    }

    fn on_boundary(src: &str, span: &Range<usize>) -> bool {
        span.start <= span.end
            && span.end <= src.len()
            && src.is_char_boundary(span.start)
            && src.is_char_boundary(span.end)
    }

    /// Runs every pass on `src`; asserts spans are usable and round trips hold.
    fn exercise(src: &str) {
        let scope = proptest_scope();
        match parse(src) {
            Err(e) => assert!(on_boundary(src, &e.span), "{src:?}: {e:?}"),
            Ok(expr) => {
                assert!(on_boundary(src, &expr.span));
                assert!(expr.depth() <= MAX_DEPTH);
                // The fully parenthesised rendering parses back to the same tree.
                let printed = expr.to_string();
                let again = parse(&printed)
                    .unwrap_or_else(|e| panic!("{src:?} printed as {printed:?}: {e}"));
                assert_eq!(again.to_string(), printed);
                for layer in [Layer::Vars, Layer::Arithmetic] {
                    let checked = check(&expr, layer, &scope);
                    for e in &checked.errors {
                        assert!(on_boundary(src, &e.span), "{src:?}: {e:?}");
                    }
                    let tokens = codegen(&expr, &scope);
                    if checked.is_ok() {
                        syn::parse2::<syn::Expr>(tokens.clone()).unwrap_or_else(|e| {
                            panic!("{src:?} ({layer:?}) generated invalid Rust: {e}\n{tokens}")
                        });
                    }
                }
            }
        }
    }

    const ALPHABET: &[&str] = &[
        "x",
        "weight",
        "dim",
        "M",
        "K",
        "i",
        "j",
        "elem_bytes",
        "product",
        "len",
        "range",
        "isinstance",
        "int",
        "tuple",
        "set",
        "ceil",
        "foo",
        "shape",
        "ndim",
        "0",
        "1",
        "2.5",
        "1e3",
        ".5",
        "0x1f",
        "1_0",
        "'a'",
        "\"b\"",
        "f'c'",
        "+",
        "-",
        "*",
        "/",
        "//",
        "%",
        "**",
        "<",
        "<=",
        ">",
        ">=",
        "==",
        "!=",
        "=",
        ":=",
        "|",
        "^",
        "&",
        "<<",
        ">>",
        "~",
        "@",
        ".",
        ",",
        ":",
        ";",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "...",
        "and",
        "or",
        "not",
        "in",
        "is",
        "if",
        "else",
        "for",
        "lambda",
        "None",
        "True",
        "False",
        "await",
        "yield",
        "async",
        "def",
        "$",
        "é",
        "#",
        "\\",
    ];

    /// Well-formed formulas over the whole syntax, every compound parenthesised.
    fn formula() -> impl Strategy<Value = String> {
        let leaf = prop::sample::select(
            &[
                "x.shape",
                "x.ndim",
                "dim",
                "M",
                "K",
                "i",
                "elem_bytes",
                "(weight is None)",
                "0",
                "1",
                "7",
                "2.5",
                ".5",
                "1e3",
                "'a'",
                "\"b\"",
                "True",
                "None",
                "int",
            ][..],
        )
        .prop_map(str::to_string);
        leaf.prop_recursive(4, 48, 3, |inner| {
            let two = (inner.clone(), inner.clone());
            prop_oneof![
                (
                    two.clone(),
                    prop::sample::select(
                        &[
                            "+", "-", "*", "/", "//", "%", "**", "and", "or", "<", "<=", "==",
                            "!=", "in", "not in", "is", "is not"
                        ][..]
                    )
                )
                    .prop_map(|((a, b), op)| format!("({a} {op} {b})")),
                (inner.clone(), prop::sample::select(&["-", "+", "not "][..]))
                    .prop_map(|(a, op)| format!("({op}{a})")),
                (inner.clone(), inner.clone(), inner.clone())
                    .prop_map(|(a, b, c)| format!("({a} if {b} else {c})")),
                (inner.clone(), inner.clone(), inner.clone())
                    .prop_map(|(a, b, c)| format!("({a} < {b} <= {c})")),
                (
                    inner.clone(),
                    prop::sample::select(
                        &[
                            "product", "len", "ceil", "floor", "log2", "abs", "list", "set"
                        ][..]
                    )
                )
                    .prop_map(|(a, f)| format!("{f}({a})")),
                two.clone().prop_map(|(a, b)| format!("max({a}, {b})")),
                two.clone()
                    .prop_map(|(a, b)| format!("isinstance({a}, ({b}, int))")),
                two.clone().prop_map(|(a, b)| format!("[{a}, {b}]")),
                two.clone().prop_map(|(a, b)| format!("({a}, {b})")),
                inner.clone().prop_map(|a| format!("({a},)")),
                two.clone().prop_map(|(a, b)| format!("{{{a}, {b}}}")),
                two.clone().prop_map(|(a, b)| format!("({a})[{b}]")),
                two.clone().prop_map(|(a, b)| format!("({a})[{b}:]")),
                (inner.clone(), inner.clone(), inner.clone())
                    .prop_map(|(a, b, c)| format!("({a})[:{b}:{c}]")),
                (inner.clone(), inner.clone(), inner.clone())
                    .prop_map(|(a, b, c)| format!("[{a} for i in {b} if {c}]")),
                two.clone()
                    .prop_map(|(a, b)| format!("{{{a} for i, j in {b}}}")),
                two.prop_map(|(a, b)| format!("sum({a} for i in {b} for j in i)")),
            ]
        })
    }

    proptest! {
        #[test]
        fn generated_formulas_parse_check_and_generate(src in formula()) {
            prop_assert!(parse(&src).is_ok(), "{src:?}: {:?}", parse(&src).err());
            exercise(&src);
            // Without the outer parentheses too: the printer must still agree with the parser.
            exercise(src.trim_start_matches('(').trim_end_matches(')'));
        }

        #[test]
        fn arbitrary_strings_never_panic(src in any::<String>()) {
            exercise(&src);
        }

        #[test]
        fn printable_strings_never_panic(src in "[ -~éü\\n\\t]{0,60}") {
            exercise(&src);
        }

        #[test]
        fn token_soup_never_panics(
            toks in prop::collection::vec(prop::sample::select(ALPHABET), 0..40),
            glue in prop::sample::select(&[" ", ""][..]),
        ) {
            exercise(&toks.join(glue));
        }

        #[test]
        fn well_formed_soup_round_trips(
            toks in prop::collection::vec(
                prop::sample::select(&[
                    "x.shape", "x.ndim", "dim", "M", "K", "1", "2", "(", ")", "[", "]", "+", "-",
                    "*", "//", "%", "**", "<", "==", "and", "or", "not", "if", "else", ",", ":",
                    "for i in", "range(", "product(", "weight is None", "None",
                ][..]),
                0..30,
            ),
        ) {
            exercise(&toks.join(" "));
        }
    }
}
