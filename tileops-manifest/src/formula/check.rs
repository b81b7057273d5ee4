//! The name-and-form gate of the formula language (tileops/docs/formula-language.md): given a parsed formula, its layer
//! and the names in scope, report every error and the free names the formula reads.
//!
//! The checker generates nothing. Codegen runs only on formulas it passed, but relies on the
//! same [`resolve`] so that both agree on what a name means.
//!
//! Each rule below says why it exists; the messages are user-facing and kept stable (UI tests
//! snapshot them).

use std::collections::BTreeSet;

use super::ast::{CmpOp, Expr, ExprKind, Span};
use super::{FormulaError, Layer, Scope};

/// Helpers callable in a `vars` formula, in the order tileops/docs/formula-language.md lists them.
pub const VARS_HELPERS: &[&str] = &[
    "product",
    "isinstance",
    "len",
    "set",
    "tuple",
    "list",
    "range",
    "int",
    "float",
    "bool",
    "min",
    "max",
    "sum",
    "abs",
    "log2",
    "ceil",
    "floor",
];

/// Helpers callable in a `flops`/`bytes` formula (tileops/docs/formula-language.md, "Layers and names").
pub const ARITH_HELPERS: &[&str] = &["ceil", "floor", "log2"];

/// Helpers that are also values: the builtin types, usable as `isinstance(dim, (list, tuple))`.
pub const TYPE_HELPERS: &[&str] = &["int", "float", "bool", "tuple", "list", "set"];

/// The attributes a tensor input exposes.
const INPUT_ATTRS: &[&str] = &["shape", "ndim"];

/// The result of [`check`](fn@super::check): every error, and the free names read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// All errors in the formula, in source order; empty when the formula is valid.
    pub errors: Vec<FormulaError>,
    /// The inputs, params, vars, fixed-rank dims and `elem_bytes` the formula references
    /// (helpers and comprehension variables excluded): what the binding block must bind.
    pub names: BTreeSet<String>,
}

impl Checked {
    /// True when the formula has no error.
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// What a name refers to at one point of a formula.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binding {
    /// A comprehension variable in scope.
    Local,
    Input {
        optional: bool,
    },
    Param,
    Var,
    Dim,
    ElemBytes,
    Helper(&'static str),
    Unknown,
}

impl Binding {
    /// How messages call a name with this binding.
    fn describe(self) -> &'static str {
        match self {
            Binding::Local => "comprehension variable",
            Binding::Input { .. } => "tensor input",
            Binding::Param => "param",
            Binding::Var => "var",
            Binding::Dim => "shape dim",
            Binding::ElemBytes => "constant",
            Binding::Helper(_) => "helper",
            Binding::Unknown => "unknown name",
        }
    }

    /// A name the binding block binds (and so one of [`Checked::names`]).
    fn is_bound_by_the_binding_block(self) -> bool {
        matches!(
            self,
            Binding::Input { .. }
                | Binding::Param
                | Binding::Var
                | Binding::Dim
                | Binding::ElemBytes
        )
    }
}

/// Resolves `name` as Python would in the generated code: comprehension variables (innermost
/// first) shadow the method's locals (inputs, params, vars, dims, `elem_bytes`), which shadow the
/// builtin helpers. Layer-independent; the checker applies the layer's restrictions.
pub(crate) fn resolve(scope: &Scope, locals: &[String], name: &str) -> Binding {
    if locals.iter().any(|l| l == name) {
        Binding::Local
    } else if let Some(optional) = scope.inputs.get(name) {
        Binding::Input {
            optional: *optional,
        }
    } else if scope.params.contains(name) {
        Binding::Param
    } else if scope.vars.contains(name) {
        Binding::Var
    } else if scope.dims.contains(name) {
        Binding::Dim
    } else if name == "elem_bytes" {
        Binding::ElemBytes
    } else if let Some(h) = VARS_HELPERS.iter().find(|h| **h == name) {
        Binding::Helper(h)
    } else {
        Binding::Unknown
    }
}

/// The fixed arity of each helper: (min, max); `None` = no upper bound. Mirrors Python's own
/// signatures for the arguments the runtime accepts, so the mistake shows at compile time.
fn arity(helper: &str) -> (usize, Option<usize>) {
    match helper {
        "len" | "log2" | "ceil" | "floor" | "abs" | "product" => (1, Some(1)),
        "isinstance" => (2, Some(2)),
        "range" => (1, Some(3)),
        "min" | "max" => (1, None),
        "sum" => (1, Some(2)),
        // int float bool tuple list set
        _ => (0, Some(1)),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "argument" } else { "arguments" }
}

fn arity_error(helper: &str, given: usize) -> Option<String> {
    let (min, max) = arity(helper);
    let takes = match max {
        Some(max) if given > max || given < min => {
            if min == max {
                format!("exactly {min} {}", plural(min))
            } else if min == 0 {
                format!("at most {max} {}", plural(max))
            } else {
                format!("from {min} to {max} arguments")
            }
        }
        None if given < min => format!("at least {min} {}", plural(min)),
        _ => return None,
    };
    Some(format!("`{helper}()` takes {takes} ({given} given)"))
}

/// "a subscript", "an integer literal".
fn with_article(what: &str) -> String {
    let article = if what.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {what}")
}

/// Renders a sorted list of names as "`a`, `b`, `c`".
fn list_names<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The candidate closest to `name`, if it is close enough to be worth suggesting. Case is
/// ignored so `n` suggests `N`; Jaro-Winkler favours shared prefixes (`prod` → `product`).
pub(crate) fn nearest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = name.to_lowercase();
    let mut best: Option<(f64, &str)> = None;
    for c in candidates {
        let score = strsim::jaro_winkler(&lower, &c.to_lowercase());
        if score >= 0.8 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, c));
        }
    }
    best.map(|(_, c)| c)
}

pub(crate) fn check(expr: &Expr, layer: Layer, scope: &Scope) -> Checked {
    let mut c = Checker {
        layer,
        scope,
        locals: Vec::new(),
        out: Checked::default(),
    };
    c.expr(expr);
    c.out.errors.sort_by_key(|e| (e.span.start, e.span.end));
    c.out
}

struct Checker<'a> {
    layer: Layer,
    scope: &'a Scope,
    /// Comprehension variables in scope, innermost last.
    locals: Vec<String>,
    out: Checked,
}

impl Checker<'_> {
    fn error(&mut self, span: Span, message: impl Into<String>) {
        self.out.errors.push(FormulaError::new(span, message));
    }

    fn resolve(&self, name: &str) -> Binding {
        resolve(self.scope, &self.locals, name)
    }

    fn layer_helpers(&self) -> &'static [&'static str] {
        match self.layer {
            Layer::Vars => VARS_HELPERS,
            Layer::Arithmetic => ARITH_HELPERS,
        }
    }

    /// Every name the layer allows at this point, sorted.
    fn allowed_names(&self) -> BTreeSet<&str> {
        let s = self.scope;
        let mut names: BTreeSet<&str> = BTreeSet::new();
        names.extend(s.params.iter().map(String::as_str));
        names.extend(s.vars.iter().map(String::as_str));
        names.extend(s.dims.iter().map(String::as_str));
        names.insert("elem_bytes");
        names.extend(self.layer_helpers().iter().copied());
        if self.layer == Layer::Vars {
            names.extend(s.inputs.keys().map(String::as_str));
            names.extend(self.locals.iter().map(String::as_str));
        }
        names
    }

    /// Rule: a name must be in the layer's table; the message lists the table and suggests the
    /// nearest entry, because a typo is the usual cause.
    fn unknown_name(&mut self, name: &str, span: Span) {
        let allowed = self.allowed_names();
        let hint = nearest(name, allowed.iter().copied())
            .map(|n| format!(" (did you mean `{n}`?)"))
            .unwrap_or_default();
        let message = format!(
            "unknown name `{name}`{hint}; the names allowed in {} here are: {}",
            self.layer.describe(),
            list_names(allowed.iter().copied())
        );
        self.error(span, message);
    }

    /// Rule: the arithmetic layer is straight-line arithmetic over resolved names; anything that
    /// reads structure (subscripts, attributes, displays, comprehensions) belongs in `vars`
    /// (the language never inlines a vars expression into the arithmetic block).
    fn construct_not_allowed(&mut self, e: &Expr) {
        let construct = match &e.kind {
            ExprKind::Attribute { attr, .. } => format!("an attribute (`.{attr}`)"),
            _ => with_article(e.describe()),
        };
        self.error(
            e.span.clone(),
            format!(
                "{construct} is not allowed in {}; compute it in a `vars` entry and use that \
                 name here",
                Layer::Arithmetic.describe()
            ),
        );
    }

    fn expr(&mut self, e: &Expr) {
        let arith = self.layer == Layer::Arithmetic;
        match &e.kind {
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::NoneLit => {}
            ExprKind::Name(n) => self.name_value(n, e.span.clone()),
            ExprKind::Tuple(items) | ExprKind::List(items) | ExprKind::Set(items) => {
                if arith {
                    return self.construct_not_allowed(e);
                }
                for item in items {
                    self.expr(item);
                }
            }
            ExprKind::Attribute {
                value,
                attr,
                attr_span,
            } => {
                if arith {
                    return self.construct_not_allowed(e);
                }
                self.attribute(e, value, attr, attr_span.clone());
            }
            ExprKind::Subscript { value, index } => {
                if arith {
                    return self.construct_not_allowed(e);
                }
                self.expr(value);
                self.index(index);
            }
            ExprKind::Slice { .. } => {
                if arith {
                    return self.construct_not_allowed(e);
                }
                // The parser only makes slices inside subscripts; a hand-built tree may not.
                self.error(
                    e.span.clone(),
                    "a slice can only be the index of a subscript",
                );
                self.slice_parts(e);
            }
            ExprKind::Call { func, args } => self.call(e, func, args),
            ExprKind::Unary { operand, .. } => self.expr(operand),
            ExprKind::Binary { left, rest } => {
                self.expr(left);
                for link in rest {
                    self.expr(&link.right);
                }
            }
            ExprKind::Power(items) | ExprKind::BoolOp { values: items, .. } => {
                for item in items {
                    self.expr(item);
                }
            }
            ExprKind::Compare { left, rest } => {
                if let [c] = rest.as_slice()
                    && matches!(c.op, CmpOp::Is | CmpOp::IsNot)
                    && !arith
                    && let Some(input) = self.presence_test(left, &c.right)
                {
                    self.out.names.insert(input.to_string());
                    return;
                }
                self.expr(left);
                for c in rest {
                    self.expr(&c.right);
                }
            }
            ExprKind::IfExp { body, test, orelse } => {
                self.expr(test);
                self.expr(body);
                self.expr(orelse);
            }
            ExprKind::Comprehension { elt, clauses, .. } => {
                if arith {
                    return self.construct_not_allowed(e);
                }
                // Python's scoping: the first iterable is evaluated outside the comprehension;
                // each later clause sees the targets bound before it, the element sees all.
                let depth = self.locals.len();
                for clause in clauses {
                    self.expr(&clause.iter);
                    self.locals
                        .extend(clause.target.names().iter().map(|t| t.name.clone()));
                    for cond in &clause.ifs {
                        self.expr(cond);
                    }
                }
                self.expr(elt);
                self.locals.truncate(depth);
            }
        }
    }

    /// `t is None` / `None is t` (or `is not`) on a tensor input: the one way to read an
    /// optional input's presence. Returns the input's name.
    fn presence_test<'e>(&self, left: &'e Expr, right: &'e Expr) -> Option<&'e str> {
        let name = match (&left.kind, &right.kind) {
            (ExprKind::Name(n), ExprKind::NoneLit) | (ExprKind::NoneLit, ExprKind::Name(n)) => n,
            _ => return None,
        };
        matches!(self.resolve(name), Binding::Input { .. }).then_some(name.as_str())
    }

    /// A name read as a value.
    fn name_value(&mut self, name: &str, span: Span) {
        let binding = self.resolve(name);
        if binding.is_bound_by_the_binding_block() {
            self.out.names.insert(name.to_string());
        }
        match binding {
            Binding::Local | Binding::Param | Binding::Var | Binding::Dim | Binding::ElemBytes => {}
            // Rule: tensors are not formula values; formulas see them only through their
            // shape (vars) or through vars (arithmetic), which keeps the layers apart.
            Binding::Input { .. } if self.layer == Layer::Arithmetic => self.error(
                span,
                format!(
                    "tensor input `{name}` cannot be used in {}; read what you need from it in a \
                     `vars` entry (e.g. `N: \"product({name}.shape)\"`) and use that name here",
                    Layer::Arithmetic.describe()
                ),
            ),
            // Rule: an optional input may be absent, so beyond its shape only its presence is
            // meaningful, and Python spells that `is None`.
            Binding::Input { optional: true } => self.error(
                span,
                format!(
                    "optional input `{name}` can only be tested for presence (`{name} is None`, \
                     `{name} is not None`) or read through `{name}.shape` / `{name}.ndim`"
                ),
            ),
            Binding::Input { optional: false } => self.error(
                span,
                format!(
                    "tensor input `{name}` is not a value; use `{name}.shape` or `{name}.ndim`"
                ),
            ),
            Binding::Helper(h) => {
                if self.layer == Layer::Vars && TYPE_HELPERS.contains(&h) {
                    return;
                }
                if self.layer_helpers().contains(&h) {
                    self.error(
                        span,
                        format!("helper `{h}` is a function; call it, as in `{h}(...)`"),
                    );
                } else {
                    self.helper_not_in_layer(h, span);
                }
            }
            Binding::Unknown => self.unknown_name(name, span),
        }
    }

    fn helper_not_in_layer(&mut self, helper: &str, span: Span) {
        self.error(
            span,
            format!(
                "`{helper}` is not available in {}, which can only call {}; compute it in a \
                 `vars` entry and use that name here",
                Layer::Arithmetic.describe(),
                list_names(ARITH_HELPERS.iter().copied())
            ),
        );
    }

    /// Rule: attributes exist only as `INPUT.shape` and `INPUT.ndim` — the whole interface a
    /// tensor offers formulas (a tensor is exposed through its `.shape` accessor).
    fn attribute(&mut self, e: &Expr, value: &Expr, attr: &str, attr_span: Span) {
        if let ExprKind::Name(name) = &value.kind {
            match self.resolve(name) {
                Binding::Input { .. } => {
                    self.out.names.insert(name.clone());
                    if !INPUT_ATTRS.contains(&attr) {
                        self.error(
                            attr_span,
                            format!(
                                "tensor input `{name}` has no attribute `{attr}`; only \
                                 `{name}.shape` and `{name}.ndim` are available"
                            ),
                        );
                    }
                }
                Binding::Unknown => self.unknown_name(name, value.span.clone()),
                other => {
                    if other.is_bound_by_the_binding_block() {
                        self.out.names.insert(name.clone());
                    }
                    self.error(
                        e.span.clone(),
                        format!(
                            "attribute `.{attr}` on {} `{name}`: attributes are only available \
                             on tensor inputs (`INPUT.shape`, `INPUT.ndim`)",
                            other.describe()
                        ),
                    );
                }
            }
            return;
        }
        self.error(
            e.span.clone(),
            format!(
                "attribute `.{attr}` on {}: attributes are only available on tensor inputs \
                 (`INPUT.shape`, `INPUT.ndim`)",
                with_article(value.describe())
            ),
        );
        self.expr(value);
    }

    /// A subscript's index: one expression, one slice, or a tuple of plain indices.
    fn index(&mut self, index: &Expr) {
        match &index.kind {
            ExprKind::Slice { .. } => self.slice_parts(index),
            ExprKind::Tuple(items) => {
                for item in items {
                    if let ExprKind::Slice { .. } = item.kind {
                        // No formula value takes a tuple of slices (that is numpy's
                        // multi-dimensional indexing), and the runtime has no slice value.
                        self.error(
                            item.span.clone(),
                            "a slice inside a tuple index (`s[a:b, c]`) is not supported; \
                             formula sequences take one index or one slice",
                        );
                        self.slice_parts(item);
                    } else {
                        self.expr(item);
                    }
                }
            }
            _ => self.expr(index),
        }
    }

    fn slice_parts(&mut self, slice: &Expr) {
        if let ExprKind::Slice { lower, upper, step } = &slice.kind {
            for part in [lower, upper, step].into_iter().flatten() {
                self.expr(part);
            }
        }
    }

    /// Rule: only the layer's helpers can be called, with Python's arity — the binding table is
    /// the single source of truth for what a formula may call (tileops/docs/formula-language.md).
    fn call(&mut self, e: &Expr, func: &Expr, args: &[Expr]) {
        let arith = self.layer == Layer::Arithmetic;
        let callable = list_names(self.layer_helpers().iter().copied());
        let ok = match &func.kind {
            ExprKind::Name(name) => match self.resolve(name) {
                Binding::Helper(h) if self.layer_helpers().contains(&h) => {
                    if let Some(message) = arity_error(h, args.len()) {
                        self.error(e.span.clone(), message);
                    }
                    true
                }
                Binding::Helper(h) => {
                    self.helper_not_in_layer(h, func.span.clone());
                    false
                }
                Binding::Unknown => {
                    let hint = nearest(name, self.layer_helpers().iter().copied())
                        .map(|n| format!(" (did you mean `{n}`?)"))
                        .unwrap_or_default();
                    self.error(
                        func.span.clone(),
                        format!(
                            "unknown function `{name}`{hint}; the helpers callable in {} are: \
                             {callable}",
                            self.layer.describe()
                        ),
                    );
                    false
                }
                other => {
                    if other.is_bound_by_the_binding_block() {
                        self.out.names.insert(name.clone());
                    }
                    self.error(
                        func.span.clone(),
                        format!(
                            "`{name}` is a {}, not a helper; the helpers callable in {} are: \
                             {callable}",
                            other.describe(),
                            self.layer.describe()
                        ),
                    );
                    false
                }
            },
            _ => {
                let what = match &func.kind {
                    ExprKind::Attribute { attr, .. } => format!("an attribute (`.{attr}`)"),
                    _ => with_article(func.describe()),
                };
                self.error(
                    func.span.clone(),
                    format!(
                        "only helpers can be called, not {what}; the helpers callable in {} are: \
                         {callable}",
                        self.layer.describe()
                    ),
                );
                if !arith {
                    match &func.kind {
                        // `x.shape(...)`: the attribute is the mistake already reported; only
                        // what it is applied to still needs checking.
                        ExprKind::Attribute { value, .. } => match &value.kind {
                            ExprKind::Name(n) => {
                                if self.resolve(n).is_bound_by_the_binding_block() {
                                    self.out.names.insert(n.clone());
                                }
                            }
                            _ => self.expr(value),
                        },
                        _ => self.expr(func),
                    }
                }
                false
            }
        };
        // A rejected call in the arithmetic layer is one mistake: do not cascade into its
        // arguments (a generator argument would be reported a second time).
        if ok || !arith {
            for arg in args {
                self.expr(arg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn scope() -> Scope {
        Scope::new()
            .input("x", false)
            .input("weight", true)
            .param("dim")
            .param("use_input_stats")
            .var("M")
            .dim("K")
    }

    fn run(src: &str, layer: Layer) -> Checked {
        let e = parse(src).unwrap_or_else(|e| panic!("{src:?}: {}", e.message));
        check(&e, layer, &scope())
    }

    fn clean(src: &str, layer: Layer) -> BTreeSet<String> {
        let c = run(src, layer);
        assert!(c.errors.is_empty(), "{src:?} ({layer:?}): {:#?}", c.errors);
        c.names
    }

    /// Asserts exactly one error, containing `needle`, spanning `spanned`.
    fn one_error(src: &str, layer: Layer, needle: &str, spanned: &str) -> String {
        let c = run(src, layer);
        assert_eq!(c.errors.len(), 1, "{src:?} ({layer:?}): {:#?}", c.errors);
        let e = &c.errors[0];
        assert!(
            e.message.contains(needle),
            "{src:?}: {:?} lacks {needle:?}",
            e.message
        );
        assert_eq!(&src[e.span.clone()], spanned, "{src:?}: span {:?}", e.span);
        e.message.clone()
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn vars_layer_accepts_the_whole_syntax() {
        let n = clean(
            "product(x.shape[i] for i in range(x.ndim) if i not in ({dim % x.ndim} if \
             isinstance(dim, int) else {d % x.ndim for d in dim} if isinstance(dim, (list, \
             tuple)) and len(dim) > 0 else set(range(x.ndim))))",
            Layer::Vars,
        );
        assert_eq!(n, names(&["dim", "x"]));
        let n = clean(
            "[a * b for a, b in [(1, 2)] if a][0:M:K] + [K, elem_bytes]",
            Layer::Vars,
        );
        assert_eq!(n, names(&["K", "M", "elem_bytes"]));
        clean("weight is not None and not use_input_stats", Layer::Vars);
        clean("None is weight", Layer::Vars);
        clean("x is None", Layer::Vars);
        clean("weight.shape == (x.shape[1],)", Layer::Vars);
        clean("-x.ndim <= dim < x.ndim", Layer::Vars);
        clean("max(1, 2.5, 'a' * 2, True, None)", Layer::Vars);
        clean(
            "isinstance(dim, (int, float, bool, tuple, list, set))",
            Layer::Vars,
        );
        clean("abs(log2(ceil(floor(min(sum([1], 0), 2)))))", Layer::Vars);
    }

    #[test]
    fn a_name_that_is_both_a_param_and_a_dim_binds_the_param() {
        // The manifest pass leaves such a dim out of the scope; resolution agrees regardless.
        let scope = scope().dim("dim");
        assert!(matches!(resolve(&scope, &[], "dim"), Binding::Param));
        assert!(matches!(resolve(&scope, &[], "K"), Binding::Dim));
    }

    #[test]
    fn comprehension_variables_are_scoped() {
        // Shadowing an input inside the comprehension, but not in its first iterable.
        let n = clean("[x + 1 for x in x.shape]", Layer::Vars);
        assert_eq!(n, names(&["x"]));
        // Later clauses see earlier targets.
        clean(
            "[j for i in range(3) for j in range(i) if j < i]",
            Layer::Vars,
        );
        // A comprehension variable does not leak.
        one_error(
            "[i for i in range(3)] + [i]",
            Layer::Vars,
            "unknown name `i`",
            "i",
        );
        // Nor is it visible in the first iterable.
        one_error(
            "[i for i in range(i)]",
            Layer::Vars,
            "unknown name `i`",
            "i",
        );
        // Nested comprehensions.
        clean("[[a * b for b in range(a)] for a in range(3)]", Layer::Vars);
    }

    #[test]
    fn arithmetic_layer_accepts_its_subset() {
        let n = clean(
            "(5 if M > 0 and not dim else 3) * K * elem_bytes + ceil(M / 2) - floor(log2(K)) \
             ** 2 // 1 % 7",
            Layer::Arithmetic,
        );
        assert_eq!(n, names(&["K", "M", "dim", "elem_bytes"]));
        clean(
            "-M <= K < M or dim is None or 'a' != None",
            Layer::Arithmetic,
        );
    }

    #[test]
    fn unknown_names_list_the_layer_and_suggest() {
        let m = one_error("M * Kk", Layer::Arithmetic, "unknown name `Kk`", "Kk");
        assert_eq!(
            m,
            "unknown name `Kk` (did you mean `K`?); the names allowed in a `flops`/`bytes` \
             formula here are: `K`, `M`, `ceil`, `dim`, `elem_bytes`, `floor`, `log2`, \
             `use_input_stats`"
        );
        let m = one_error(
            "elem_byte",
            Layer::Vars,
            "did you mean `elem_bytes`?",
            "elem_byte",
        );
        assert!(m.contains("`product`") && m.contains("`x`") && m.contains("`weight`"));
        let m = one_error("zzz + 1", Layer::Vars, "unknown name `zzz`;", "zzz");
        assert!(!m.contains("did you mean"));
        one_error(
            "prod(x.shape)",
            Layer::Vars,
            "did you mean `product`?",
            "prod",
        );
        // Comprehension variables are listed while in scope.
        let m = one_error(
            "[q for i in range(2)]",
            Layer::Vars,
            "unknown name `q`",
            "q",
        );
        assert!(m.contains("`i`"));
    }

    #[test]
    fn constructs_rejected_in_arithmetic() {
        for (src, needle, spanned) in [
            ("x.shape[0] * 2", "a subscript is not allowed", "x.shape[0]"),
            ("M.real", "an attribute (`.real`) is not allowed", "M.real"),
            ("[M][0]", "a subscript", "[M][0]"),
            ("M + len([1])", "`len` is not available", "len"),
            ("(M, K)", "a tuple display is not allowed", "(M, K)"),
            ("[M]", "a list display is not allowed", "[M]"),
            ("{M}", "a set display is not allowed", "{M}"),
            ("[i for i in M]", "a list comprehension", "[i for i in M]"),
            ("{i for i in M}", "a set comprehension", "{i for i in M}"),
            (
                "ceil(i for i in M)",
                "a generator expression",
                "i for i in M",
            ),
            ("product(x.shape)", "`product` is not available", "product"),
        ] {
            one_error(src, Layer::Arithmetic, needle, spanned);
        }
        let m = one_error(
            "M * 2 + (M, K)[0]",
            Layer::Arithmetic,
            "subscript",
            "(M, K)[0]",
        );
        assert!(m.contains("compute it in a `vars` entry"));
    }

    #[test]
    fn tensor_inputs() {
        one_error(
            "x * 2",
            Layer::Vars,
            "tensor input `x` is not a value; use `x.shape`",
            "x",
        );
        one_error(
            "len(x)",
            Layer::Vars,
            "tensor input `x` is not a value",
            "x",
        );
        one_error(
            "x is dim",
            Layer::Vars,
            "tensor input `x` is not a value",
            "x",
        );
        one_error(
            "x * 2",
            Layer::Arithmetic,
            "tensor input `x` cannot be used in a `flops`/`bytes` formula",
            "x",
        );
        one_error(
            "2 if weight is None else 3",
            Layer::Arithmetic,
            "tensor input `weight` cannot be used",
            "weight",
        );
        one_error(
            "x.dtype",
            Layer::Vars,
            "tensor input `x` has no attribute `dtype`; only `x.shape` and `x.ndim`",
            "dtype",
        );
        one_error(
            "dim.real",
            Layer::Vars,
            "attribute `.real` on param `dim`",
            "dim.real",
        );
        one_error("M.shape", Layer::Vars, "on var `M`", "M.shape");
        one_error(
            "[i.shape for i in [1]]",
            Layer::Vars,
            "on comprehension variable `i`",
            "i.shape",
        );
        one_error(
            "(1, 2).count",
            Layer::Vars,
            "attribute `.count` on a tuple display",
            "(1, 2).count",
        );
        one_error("y.shape", Layer::Vars, "unknown name `y`", "y");
        let n = clean("x.shape", Layer::Vars);
        assert_eq!(n, names(&["x"]));
    }

    #[test]
    fn optional_inputs() {
        one_error(
            "weight",
            Layer::Vars,
            "optional input `weight` can only be tested for presence (`weight is None`, \
             `weight is not None`) or read through `weight.shape` / `weight.ndim`",
            "weight",
        );
        one_error(
            "weight == None",
            Layer::Vars,
            "optional input `weight`",
            "weight",
        );
        one_error(
            "weight is None is None",
            Layer::Vars,
            "optional input",
            "weight",
        );
        one_error("weight and 1", Layer::Vars, "optional input", "weight");
        let n = clean("weight.shape[0] if weight is not None else 0", Layer::Vars);
        assert_eq!(n, names(&["weight"]));
        // A presence test on a required input is harmless.
        clean("x is not None", Layer::Vars);
        // A comprehension variable that shadows the input is an ordinary value.
        clean("[weight for weight in [1]]", Layer::Vars);
    }

    #[test]
    fn calls() {
        one_error(
            "x.shape()",
            Layer::Vars,
            "only helpers can be called, not an attribute (`.shape`)",
            "x.shape",
        );
        one_error("(1)(2)", Layer::Vars, "not an integer literal", "1");
        one_error(
            "len([1])(1)",
            Layer::Vars,
            "only helpers can be called, not a call",
            "len([1])",
        );
        one_error(
            "dim(1)",
            Layer::Vars,
            "`dim` is a param, not a helper",
            "dim",
        );
        one_error(
            "M(1)",
            Layer::Arithmetic,
            "`M` is a var, not a helper; the helpers callable in a `flops`/`bytes` formula are: `ceil`, `floor`, `log2`",
            "M",
        );
        one_error(
            "qux(1)",
            Layer::Vars,
            "unknown function `qux`; the helpers callable in a `vars` formula are: `product`",
            "qux",
        );
        one_error(
            "sqrt(M)",
            Layer::Arithmetic,
            "unknown function `sqrt`",
            "sqrt",
        );
        one_error(
            "flor(M)",
            Layer::Arithmetic,
            "did you mean `floor`?",
            "flor",
        );
        one_error(
            "x.shape.index(1)",
            Layer::Vars,
            "not an attribute (`.index`)",
            "x.shape.index",
        );
    }

    #[test]
    fn helpers_as_values() {
        one_error(
            "product",
            Layer::Vars,
            "helper `product` is a function; call it, as in `product(...)`",
            "product",
        );
        one_error(
            "M * ceil",
            Layer::Arithmetic,
            "helper `ceil` is a function",
            "ceil",
        );
        one_error(
            "int",
            Layer::Arithmetic,
            "`int` is not available in a `flops`/`bytes` formula",
            "int",
        );
        // Type names are values in vars, for isinstance.
        let n = clean("(int, float, bool, tuple, list, set)", Layer::Vars);
        assert!(n.is_empty());
        // A local shadows a helper, as in Python.
        let s = Scope::new().param("max");
        let c = check(&parse("max(1, 2)").unwrap(), Layer::Vars, &s);
        assert!(
            c.errors[0]
                .message
                .contains("`max` is a param, not a helper")
        );
        let c = check(&parse("max + 1").unwrap(), Layer::Vars, &s);
        assert!(c.is_ok());
        assert_eq!(c.names, names(&["max"]));
    }

    #[test]
    fn helper_arity() {
        for (src, message) in [
            ("len()", "`len()` takes exactly 1 argument (0 given)"),
            ("len(1, 2)", "`len()` takes exactly 1 argument (2 given)"),
            ("log2(1, 2)", "`log2()` takes exactly 1 argument (2 given)"),
            ("ceil()", "`ceil()` takes exactly 1 argument (0 given)"),
            (
                "floor(1, 2)",
                "`floor()` takes exactly 1 argument (2 given)",
            ),
            ("abs()", "`abs()` takes exactly 1 argument (0 given)"),
            (
                "isinstance(1)",
                "`isinstance()` takes exactly 2 arguments (1 given)",
            ),
            ("range()", "`range()` takes from 1 to 3 arguments (0 given)"),
            (
                "range(1, 2, 3, 4)",
                "`range()` takes from 1 to 3 arguments (4 given)",
            ),
            ("min()", "`min()` takes at least 1 argument (0 given)"),
            ("max()", "`max()` takes at least 1 argument (0 given)"),
            (
                "product(1, 2)",
                "`product()` takes exactly 1 argument (2 given)",
            ),
            ("sum()", "`sum()` takes from 1 to 2 arguments (0 given)"),
            (
                "sum(1, 2, 3)",
                "`sum()` takes from 1 to 2 arguments (3 given)",
            ),
            ("int(1, 2)", "`int()` takes at most 1 argument (2 given)"),
            ("set(1, 2)", "`set()` takes at most 1 argument (2 given)"),
        ] {
            assert_eq!(one_error(src, Layer::Vars, message, src), message);
        }
        for ok in [
            "int()",
            "float(1)",
            "bool()",
            "tuple([1])",
            "list()",
            "set()",
            "range(1)",
            "range(1, 2, 3)",
            "min(1)",
            "max(1, 2, 3, 4)",
            "sum([1], 2)",
            "isinstance(1, int)",
        ] {
            clean(ok, Layer::Vars);
        }
        one_error(
            "ceil(1, 2)",
            Layer::Arithmetic,
            "`ceil()` takes exactly 1 argument (2 given)",
            "ceil(1, 2)",
        );
    }

    #[test]
    fn slices_in_tuple_indices() {
        one_error(
            "x.shape[1:2, 0]",
            Layer::Vars,
            "a slice inside a tuple index",
            "1:2",
        );
        clean("x.shape[0, 1]", Layer::Vars);
    }

    #[test]
    fn all_errors_are_reported_in_source_order() {
        let c = run("foo + x.dtype + bar(1) + weight", Layer::Vars);
        let spans: Vec<_> = c.errors.iter().map(|e| e.span.clone()).collect();
        assert_eq!(spans, [0..3, 8..13, 16..19, 25..31]);
        let c = run("x.shape[0] + y + [1]", Layer::Arithmetic);
        assert_eq!(c.errors.len(), 3, "{:#?}", c.errors);
    }
}
