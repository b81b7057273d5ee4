//! What the macro knows of a formula's types, so that codegen can compute on machine values.
//!
//! A shape dim, `elem_bytes` and `x.ndim` are Python ints, `x.shape` a tuple of ints, and a param
//! whose struct field is a Rust integer an int. From those, [`infer`] types each sub-expression:
//! an int, a bool, a tuple of dims ([`Ty::Dims`]), or [`Ty::Value`] where the type depends on
//! run-time values (an untyped param, a comprehension variable) or where the result is a float,
//! a str or a container. Codegen computes the typed parts as `i128`, `bool` and
//! `::tileops::roofline::__rt::Dims`, and everything else on the value runtime as before.
//!
//! The rules keep Python's semantics exactly: a rule types an operation only where its result is
//! always of that type (`int // int` is an int; `int / int` a float, so a value; `True + 1` an
//! int in Python, but bools mix with ints only through the runtime). Chains longer than codegen's
//! chunk stay on the runtime, which cuts them into closures (`CHUNK` in codegen).

use std::collections::BTreeMap;

use super::Scope;
use super::ast::{BinOp, CmpOp, CompClause, CompKind, Expr, ExprKind, Target, UnaryOp};
use super::check::{Binding, TYPE_HELPERS, resolve};

/// The type of a formula (or a part of one), as far as the macro knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ty {
    /// A Python int, computed as an `i128` (overflow is the runtime's `OverflowError`).
    Int,
    /// A Python bool, computed as a `bool`.
    Bool,
    /// A tuple of shape dims (`x.shape`, `x.shape[1:]`), a borrowed view.
    Dims,
    /// A list of ints: only a name has this type, a param that the version of the formulas
    /// being generated runs for a list of ints (its local a borrowed view, `rt::Ints`).
    IntList,
    /// A tuple of ints, as [`Ty::IntList`].
    IntTuple,
    /// Python's `None`: only a name has this type, a param that the version of the formulas
    /// being generated runs for a `None` value (its local is `()`). Tests of it fold away.
    None,
    /// Anything else: a runtime `Value`.
    Value,
}

/// The types of the names a formula reads that are not always ints: params and vars. A name
/// missing from the map is a [`Ty::Value`]; dims and `elem_bytes` are always [`Ty::Int`] (a dim
/// named like a var resolves as the var).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Types {
    /// Param or var name → its type.
    pub names: BTreeMap<String, Ty>,
}

impl Types {
    /// No typed names (every param and var a value).
    pub fn new() -> Self {
        Types::default()
    }

    /// Sets `name`'s type.
    pub fn with(mut self, name: impl Into<String>, ty: Ty) -> Self {
        self.names.insert(name.into(), ty);
        self
    }

    fn get(&self, name: &str) -> Ty {
        self.names.get(name).copied().unwrap_or(Ty::Value)
    }
}

/// The most links a typed chain may have: longer ones stay on the runtime, which cuts them into
/// chunks (codegen's `CHUNK`; equal so that no chain is typed that the runtime would cut).
pub(crate) const MAX_TYPED_LINKS: usize = 32;

/// Helpers whose typed form takes a tuple of dims and gives an int.
const DIMS_TO_INT: &[&str] = &["product", "len", "sum"];

/// The type of `e`, with `locals` the comprehension variables in scope (always values).
pub fn infer(e: &Expr, scope: &Scope, types: &Types, locals: &[String]) -> Ty {
    Infer {
        scope,
        types,
        locals,
        local_tys: &[],
    }
    .ty(e)
}

pub(crate) struct Infer<'a> {
    pub(crate) scope: &'a Scope,
    pub(crate) types: &'a Types,
    /// Comprehension variables in scope, innermost last.
    pub(crate) locals: &'a [String],
    /// Their types, by position (a missing one is a value): an int for a loop over a `range` of
    /// ints or over a shape.
    pub(crate) local_tys: &'a [Ty],
}

impl Infer<'_> {
    pub(crate) fn ty(&self, e: &Expr) -> Ty {
        match &e.kind {
            ExprKind::Int(_) => Ty::Int,
            ExprKind::Bool(_) => Ty::Bool,
            ExprKind::Name(name) => self.name(name),
            ExprKind::Attribute { value, attr, .. } => match (&value.kind, attr.as_str()) {
                (ExprKind::Name(n), "shape") if self.is_input(n) => Ty::Dims,
                (ExprKind::Name(n), "ndim") if self.is_input(n) => Ty::Int,
                _ => Ty::Value,
            },
            ExprKind::Subscript { value, index } => {
                if self.ty(value) != Ty::Dims {
                    return Ty::Value;
                }
                // A shape sliced by bounds of any type is a shape or an error; indexed by anything
                // but a tuple, an int or an error.
                match &index.kind {
                    ExprKind::Slice { .. } => Ty::Dims,
                    ExprKind::Tuple(_) => Ty::Value,
                    _ => Ty::Int,
                }
            }
            ExprKind::Call { func, args } => self.call(func, args),
            ExprKind::Unary { op, operand } => match (op, self.ty(operand)) {
                (UnaryOp::Neg | UnaryOp::Pos, Ty::Int) => Ty::Int,
                (UnaryOp::Not, Ty::Int | Ty::Bool) => Ty::Bool,
                _ => Ty::Value,
            },
            ExprKind::Binary { left, rest } => {
                let int_ops = rest.iter().all(|l| {
                    matches!(
                        l.op,
                        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::FloorDiv | BinOp::Mod
                    )
                });
                if rest.is_empty()
                    || rest.len() > MAX_TYPED_LINKS
                    || !int_ops
                    || self.ty(left) != Ty::Int
                    || rest.iter().any(|l| self.ty(&l.right) != Ty::Int)
                {
                    return Ty::Value;
                }
                Ty::Int
            }
            ExprKind::BoolOp { op: _, values } => {
                let op_ok = matches!(values.len(), 2..=MAX_TYPED_LINKS);
                if op_ok && values.iter().all(|v| self.ty(v) == Ty::Bool) {
                    Ty::Bool
                } else {
                    Ty::Value
                }
            }
            ExprKind::Compare { left, rest } => match rest.as_slice() {
                [c] if self.presence_test(left, c.op, &c.right) => Ty::Bool,
                [c] if is_ordering(c.op)
                    && self.ty(left) == Ty::Int
                    && self.ty(&c.right) == Ty::Int =>
                {
                    Ty::Bool
                }
                // `v is None`: a test of the value's kind.
                [c] if matches!(c.op, CmpOp::Is | CmpOp::IsNot)
                    && (matches!(c.right.kind, ExprKind::NoneLit)
                        || matches!(left.kind, ExprKind::NoneLit)) =>
                {
                    Ty::Bool
                }
                // `n in (0, 1, 3)`: an int among the ints of a display, or of a set of ints.
                [c] if matches!(c.op, CmpOp::In | CmpOp::NotIn)
                    && self.ty(left) == Ty::Int
                    && (self.int_display(&c.right).is_some() || self.is_int_set(&c.right)) =>
                {
                    Ty::Bool
                }
                _ => Ty::Value,
            },
            ExprKind::IfExp { body, test, orelse } => {
                if let Some(truth) = self.static_truth(test) {
                    return self.ty(if truth { body } else { orelse });
                }
                let body = self.ty(body);
                if matches!(body, Ty::Int | Ty::Bool | Ty::Dims) && body == self.ty(orelse) {
                    body
                } else {
                    Ty::Value
                }
            }
            ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::NoneLit
            | ExprKind::Tuple(_)
            | ExprKind::List(_)
            | ExprKind::Set(_)
            | ExprKind::Slice { .. }
            | ExprKind::Power(_)
            | ExprKind::Comprehension { .. } => Ty::Value,
        }
    }

    fn binding(&self, name: &str) -> Binding {
        resolve(self.scope, self.locals, name)
    }

    fn is_input(&self, name: &str) -> bool {
        matches!(self.binding(name), Binding::Input { .. })
    }

    fn name(&self, name: &str) -> Ty {
        match self.binding(name) {
            Binding::Dim | Binding::ElemBytes => Ty::Int,
            Binding::Param | Binding::Var => self.types.get(name),
            Binding::Local => self
                .locals
                .iter()
                .rposition(|l| l == name)
                .and_then(|i| self.local_tys.get(i).copied())
                .unwrap_or(Ty::Value),
            _ => Ty::Value,
        }
    }

    /// The type of a comprehension target's name over `iter`: an int for a lone name over
    /// an [`IntIter`], a value otherwise.
    pub(crate) fn loop_var_ty(&self, target: &Target, iter: &Expr) -> Ty {
        if matches!(target, Target::Name(_)) && self.int_iter(iter).is_some() {
            Ty::Int
        } else {
            Ty::Value
        }
    }

    /// What `iter` iterates, when its items are ints the typed code can loop over: a `range`
    /// of ints, `set(range(...))`, a display of ints, a shape (seen through conditionals whose
    /// test is known, [`Self::unfold`]).
    pub(crate) fn int_iter<'e>(&self, iter: &'e Expr) -> Option<IntIter<'e>> {
        let iter = self.unfold(iter);
        if let ExprKind::Call { func, args } = &iter.kind
            && self.helper(func) == Some("range")
            && (1..=3).contains(&args.len())
            && args.iter().all(|a| self.ty(a) == Ty::Int)
        {
            return Some(IntIter::Range(args));
        }
        if let Some(args) = self.range_set_args(iter) {
            return Some(IntIter::RangeSet(args));
        }
        if let Some(items) = self.int_display(iter) {
            let set = matches!(iter.kind, ExprKind::Set(_));
            return Some(IntIter::Display { items, set });
        }
        if self.is_int_set(iter) {
            return Some(IntIter::Set(iter));
        }
        match self.ty(iter) {
            Ty::Dims => Some(IntIter::Dims(iter)),
            Ty::IntList | Ty::IntTuple => Some(IntIter::Ints(iter)),
            _ => None,
        }
    }

    /// Whether `e` is a set of ints the typed code builds (or, for `set(range(...))`, need not
    /// build): a set display of ints, `set(range(...))` of ints, a set comprehension whose
    /// element is an int, or a conditional between such sets (`rt::IntSetOf`).
    pub(crate) fn is_int_set(&self, e: &Expr) -> bool {
        let e = self.unfold(e);
        match &e.kind {
            ExprKind::Set(_) => self.int_display(e).is_some(),
            ExprKind::Comprehension {
                kind: CompKind::Set,
                elt,
                clauses,
            } => self.element_ty(elt, clauses) == Ty::Int,
            ExprKind::IfExp { body, orelse, .. } => {
                self.is_int_set(body) && self.is_int_set(orelse)
            }
            _ => self.range_set_args(e).is_some(),
        }
    }

    /// The args of `set(range(args))` with one to three int args: a set of ints the typed
    /// code never builds.
    pub(crate) fn range_set_args<'e>(&self, e: &'e Expr) -> Option<&'e [Expr]> {
        let ExprKind::Call { func, args } = &self.unfold(e).kind else {
            return None;
        };
        let [range] = args.as_slice() else {
            return None;
        };
        let ExprKind::Call {
            func: range_func,
            args,
        } = &range.kind
        else {
            return None;
        };
        (self.helper(func) == Some("set")
            && self.helper(range_func) == Some("range")
            && (1..=3).contains(&args.len())
            && args.iter().all(|a| self.ty(a) == Ty::Int))
        .then_some(args.as_slice())
    }

    /// `e` with each conditional whose test is known ([`Self::static_truth`]) replaced by the
    /// branch it takes: `{dim % n} if isinstance(dim, int) else {d % n for d in dim}` is
    /// `{dim % n}` where `dim` is an int.
    pub(crate) fn unfold<'e>(&self, mut e: &'e Expr) -> &'e Expr {
        while let ExprKind::IfExp { body, test, orelse } = &e.kind {
            match self.static_truth(test) {
                Some(true) => e = body,
                Some(false) => e = orelse,
                None => break,
            }
        }
        e
    }

    /// `Some(truth)` of a test whose truth the types decide and whose evaluation can neither
    /// fail nor do anything else, so that it need not run: `isinstance(n, T)` and `n is None`
    /// of a typed name `n` (an int is never `None`, a `None` never an int), `True`/`False`, and
    /// `not`/`and`/`or` of such tests (an `and` whose first known-false operand comes after
    /// known-true ones only: the operands after it are never evaluated).
    pub(crate) fn static_truth(&self, e: &Expr) -> Option<bool> {
        match &e.kind {
            ExprKind::Bool(b) => Some(*b),
            ExprKind::Unary {
                op: UnaryOp::Not,
                operand,
            } => self.static_truth(operand).map(|t| !t),
            ExprKind::BoolOp { op, values } => {
                let decisive = matches!(op, super::ast::BoolOpKind::Or);
                for v in values {
                    match self.static_truth(v)? {
                        t if t == decisive => return Some(t),
                        _ => {}
                    }
                }
                Some(!decisive)
            }
            ExprKind::Call { func, args } if self.helper(func) == Some("isinstance") => {
                let [arg, class] = args.as_slice() else {
                    return None;
                };
                let ExprKind::Name(name) = &arg.kind else {
                    return None;
                };
                let names = self.type_names(class)?;
                let has = |t: &str| names.contains(&t);
                match self.name(name) {
                    Ty::Int => Some(has("int")),
                    // `bool` is a subclass of `int`.
                    Ty::Bool => Some(has("int") || has("bool")),
                    Ty::Dims | Ty::IntTuple => Some(has("tuple")),
                    Ty::IntList => Some(has("list")),
                    Ty::None => Some(false),
                    Ty::Value => None,
                }
            }
            ExprKind::Compare { left, rest } => {
                let [c] = rest.as_slice() else {
                    return None;
                };
                let is = match c.op {
                    CmpOp::Is => true,
                    CmpOp::IsNot => false,
                    _ => return None,
                };
                let name = match (&left.kind, &c.right.kind) {
                    (ExprKind::Name(n), ExprKind::NoneLit)
                    | (ExprKind::NoneLit, ExprKind::Name(n)) => n,
                    _ => return None,
                };
                match self.name(name) {
                    Ty::None => Some(is),
                    Ty::Int | Ty::Bool | Ty::Dims | Ty::IntList | Ty::IntTuple => Some(!is),
                    Ty::Value => None,
                }
            }
            _ => None,
        }
    }

    /// The type of a comprehension's element, its clauses' variables bound.
    fn element_ty(&self, elt: &Expr, clauses: &[CompClause]) -> Ty {
        let mut locals = self.locals.to_vec();
        let mut tys = self.local_tys.to_vec();
        tys.resize(locals.len(), Ty::Value);
        for clause in clauses {
            let ty = Infer {
                scope: self.scope,
                types: self.types,
                locals: &locals,
                local_tys: &tys,
            }
            .loop_var_ty(&clause.target, &clause.iter);
            for name in clause.target.names() {
                locals.push(name.name.clone());
                tys.push(ty);
            }
        }
        Infer {
            scope: self.scope,
            types: self.types,
            locals: &locals,
            local_tys: &tys,
        }
        .ty(elt)
    }

    pub(crate) fn helper(&self, func: &Expr) -> Option<&'static str> {
        match &func.kind {
            ExprKind::Name(name) => match self.binding(name) {
                Binding::Helper(h) => Some(h),
                _ => None,
            },
            _ => None,
        }
    }

    fn call(&self, func: &Expr, args: &[Expr]) -> Ty {
        let Some(h) = self.helper(func) else {
            return Ty::Value;
        };
        match args {
            [a] if DIMS_TO_INT.contains(&h) && self.ty(a) == Ty::Dims => Ty::Int,
            [a] if h == "product" && matches!(self.ty(a), Ty::IntList | Ty::IntTuple) => Ty::Int,
            // The product, sum, min or max of a generator of ints folds on an int.
            [
                Expr {
                    kind:
                        ExprKind::Comprehension {
                            kind: CompKind::Generator,
                            elt,
                            clauses,
                        },
                    ..
                },
            ] if matches!(h, "product" | "sum" | "min" | "max")
                && self.element_ty(elt, clauses) == Ty::Int =>
            {
                Ty::Int
            }
            // `len` of anything is an int or an error.
            [_] if h == "len" => Ty::Int,
            [_, class] if h == "isinstance" && self.type_names(class).is_some() => Ty::Bool,
            [a] if h == "abs" && self.ty(a) == Ty::Int => Ty::Int,
            _ if (h == "min" || h == "max")
                && (2..=MAX_TYPED_LINKS).contains(&args.len())
                && args.iter().all(|a| self.ty(a) == Ty::Int) =>
            {
                Ty::Int
            }
            _ => Ty::Value,
        }
    }

    /// The items of a tuple, list or set display whose items are all ints (seen through
    /// conditionals whose test is known).
    pub(crate) fn int_display<'e>(&self, e: &'e Expr) -> Option<&'e [Expr]> {
        match &self.unfold(e).kind {
            ExprKind::Tuple(items) | ExprKind::List(items) | ExprKind::Set(items)
                if items.len() <= MAX_TYPED_LINKS
                    && items.iter().all(|i| self.ty(i) == Ty::Int) =>
            {
                Some(items)
            }
            _ => None,
        }
    }

    /// The builtin types `class` names, when it is one (`int`) or a tuple display of them
    /// (`(list, tuple)`): what `isinstance` may test without building the tuple.
    pub(crate) fn type_names(&self, class: &Expr) -> Option<Vec<&'static str>> {
        let one = |e: &Expr| match &e.kind {
            ExprKind::Name(name) => match self.binding(name) {
                Binding::Helper(h) if TYPE_HELPERS.contains(&h) => Some(h),
                _ => None,
            },
            _ => None,
        };
        match &class.kind {
            ExprKind::Tuple(items) if !items.is_empty() && items.len() <= MAX_TYPED_LINKS => {
                items.iter().map(one).collect()
            }
            _ => one(class).map(|h| vec![h]),
        }
    }

    /// `t is None` / `t is not None` (either side) on a tensor input: always a bool.
    fn presence_test(&self, left: &Expr, op: CmpOp, right: &Expr) -> bool {
        if !matches!(op, CmpOp::Is | CmpOp::IsNot) {
            return false;
        }
        match (&left.kind, &right.kind) {
            (ExprKind::Name(n), ExprKind::NoneLit) | (ExprKind::NoneLit, ExprKind::Name(n)) => {
                self.is_input(n)
            }
            _ => false,
        }
    }
}

/// What a comprehension clause over ints iterates ([`Infer::int_iter`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum IntIter<'e> {
    /// `range(args)`.
    Range(&'e [Expr]),
    /// `set(range(args))`.
    RangeSet(&'e [Expr]),
    /// A tuple, list (`set: false`) or set display of ints.
    Display { items: &'e [Expr], set: bool },
    /// A shape, or a slice of one.
    Dims(&'e Expr),
    /// A list or tuple of ints (a param's version).
    Ints(&'e Expr),
    /// A set of ints ([`Infer::is_int_set`]) other than a display or `set(range(...))`.
    Set(&'e Expr),
}

/// `<`, `<=`, `>`, `>=`, `==`, `!=`: on two ints, a plain integer comparison.
pub(crate) fn is_ordering(op: CmpOp) -> bool {
    matches!(
        op,
        CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge | CmpOp::Eq | CmpOp::Ne
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formula::parse;

    fn scope() -> Scope {
        Scope::new()
            .input("x", false)
            .input("bias", true)
            .param("dim")
            .param("eps")
            .param("flag")
            .param("nothing")
            .var("M")
            .dim("K")
    }

    fn types() -> Types {
        Types::new()
            .with("dim", Ty::Int)
            .with("flag", Ty::Bool)
            .with("nothing", Ty::None)
            .with("M", Ty::Int)
    }

    fn ty(src: &str) -> Ty {
        let e = parse(src).unwrap_or_else(|e| panic!("{src}: {}", e.message));
        infer(&e, &scope(), &types(), &[])
    }

    #[test]
    fn ints_from_shapes_dims_and_typed_names() {
        for src in [
            "1",
            "K",
            "elem_bytes",
            "M",
            "dim",
            "x.ndim",
            "x.shape[0]",
            "x.shape[dim % x.ndim]",
            "product(x.shape[:dim % x.ndim]) * product(x.shape[dim % x.ndim + 1:])",
            "product(x.shape)",
            "len(x.shape[1:])",
            "len(eps)",
            "sum(x.shape[::2])",
            "x.shape[1:][0]",
            "-M",
            "+M",
            "abs(M - K)",
            "min(M, K, 3)",
            "max(M, 1)",
            "(M * K + M) * elem_bytes",
            "M // K % 3",
            "M if flag else K",
            "M if bias is None else K",
            "x.shape[eps]",
            "x.shape[(dim if eps is not None else 1) % x.ndim]",
            "product(x.shape[:eps])",
            "M if eps else K",
            "product(x.shape[i] for i in range(x.ndim) if i not in {dim})",
            "product(d for d in x.shape)",
            "product(i * j for i in range(M) for j in range(i, K, 2))",
            // Over a display of ints, `set(range(...))`, and through conditionals whose test
            // the types decide (the branch not taken is never evaluated, so never typed).
            "product(i for i in (M, K))",
            "sum(i * 2 for i in range(M))",
            "min(x.shape[i] for i in range(x.ndim))",
            "max(d for d in x.shape if d > 1)",
            "product(i for i in [M])",
            "product(x.shape[i] for i in {dim % x.ndim, 0})",
            "product(x.shape[i] for i in set(range(x.ndim)))",
            "product(x.shape[i] for i in set(range(1, x.ndim, 2)))",
            "product(x.shape[i] for i in ({dim} if isinstance(dim, int) else {d for d in dim}))",
            "product(x.shape[i] for i in range(x.ndim) if i not in ({dim} if isinstance(dim, int) else eps))",
            "M if nothing is None else eps",
            "eps if nothing is not None else M",
            "eps if isinstance(nothing, (list, tuple)) and len(nothing) > 0 else M",
            "M if isinstance(flag, int) else eps",
            "eps if isinstance(M, bool) else M",
            "M if not isinstance(dim, int) or eps else K",
        ] {
            assert_eq!(ty(src), Ty::Int, "{src}");
        }
    }

    #[test]
    fn bools_dims_and_values() {
        for src in [
            "True",
            "M < K",
            "M == 0",
            "not M",
            "not flag",
            "bias is None",
            "None is not bias",
            "flag and M > 0",
            "flag or not flag or M != K",
            "isinstance(dim, int)",
            "isinstance(eps, (list, tuple))",
            "eps is None",
            "None is not eps",
            "x.ndim in (0, 1, 3)",
            "M not in [K, 2]",
            "M in {1}",
            "M in ()",
            "M in set(range(K))",
            "M not in set(range(1, K))",
            "M in ({1} if dim is not None else eps)",
            "isinstance(nothing, int)",
            "nothing is None",
        ] {
            assert_eq!(ty(src), Ty::Bool, "{src}");
        }
        for src in [
            "x.shape",
            "x.shape[1:]",
            "x.shape[:M:2]",
            "x.shape[None:-1]",
        ] {
            assert_eq!(ty(src), Ty::Dims, "{src}");
        }
        for src in [
            // Depend on run-time values, or are floats, strs, containers.
            "eps",
            "eps * M",
            "M / 2",
            "M ** 2",
            "2.0",
            "'a'",
            "None",
            "(M, K)",
            "[M]",
            "{M}",
            "flag + 1",
            "M < K < 3",
            "M in x.shape",
            "M and K",
            "M if flag else eps",
            "M if flag else flag",
            "x.shape[1, 2]",
            "product(e for e in [eps])",
            "product(a for a, b in x.shape)",
            "product(i / 2 for i in x.shape)",
            "sum(i / 2 for i in x.shape)",
            "min(e for e in eps)",
            "product(i for i in range(eps))",
            "product([M])",
            "min(x.shape)",
            "min(M)",
            "ceil(M / 2)",
            "isinstance(dim, eps)",
            "isinstance(dim, ())",
            "isinstance(dim, (int, product))",
            "eps in (1, 2)",
            "M in (1, eps)",
            "[i for i in range(M)]",
            // A test the types do not decide keeps both branches, and they differ.
            "M if eps is None else eps",
            "M if isinstance(eps, int) else eps",
            "M if isinstance(dim, int) and eps else eps",
            "product(i for i in set(range(eps)))",
            "product(i for i in set(range(M, K, 1, 2)))",
            "M in set(range(eps))",
            "M in set((1, 2))",
            // Only a name is a `None`: anything built from one is a value.
            "nothing if flag else nothing",
        ] {
            assert_eq!(ty(src), Ty::Value, "{src}");
        }
        assert_eq!(ty("nothing"), Ty::None);
        // A comprehension variable shadows a typed name: inside, it is a value.
        let e = parse("M").unwrap();
        assert_eq!(infer(&e, &scope(), &types(), &["M".to_owned()]), Ty::Value);
        // Without types, params and vars are values; dims and `elem_bytes` are still ints.
        assert_eq!(
            infer(&parse("dim").unwrap(), &scope(), &Types::new(), &[]),
            Ty::Value
        );
        assert_eq!(
            infer(
                &parse("K * elem_bytes").unwrap(),
                &scope(),
                &Types::new(),
                &[]
            ),
            Ty::Int
        );
    }

    #[test]
    fn long_chains_stay_on_the_runtime() {
        let short = vec!["M"; MAX_TYPED_LINKS + 1].join(" + ");
        assert_eq!(ty(&short), Ty::Int);
        let long = vec!["M"; MAX_TYPED_LINKS + 2].join(" + ");
        assert_eq!(ty(&long), Ty::Value);
        let many = vec!["flag"; MAX_TYPED_LINKS + 1].join(" and ");
        assert_eq!(ty(&many), Ty::Value);
    }
}
