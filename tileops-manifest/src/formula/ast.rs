//! The syntax tree of one formula: a Python 3 expression restricted to the subset in
//! `tileops/docs/formula-language.md`.
//!
//! Every node carries a byte span into the formula string, so the checker can point inside the
//! formula. Parentheses leave no node (as in Python's `ast`); a composite node's span runs from its
//! first token to its last, parentheses included.

use std::fmt;
use std::ops::Range;

/// A byte range into the formula string; always on `char` boundaries.
pub type Span = Range<usize>;

/// One expression node and where it sits in the formula.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// The construct this node is, with its operands.
    pub kind: ExprKind,
    /// Byte range of the node's text in the formula; parentheses that only group (`(a)`) lie
    /// outside it.
    pub span: Span,
}

/// The expression forms of the language. Constructs that the language rejects (lambda, dict
/// displays, …) never get a node: the parser names them in its error instead.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// `42`, `0x2a`, `1_000`.
    Int(i128),
    /// `1.0e-5`, `.5`, `1.`, `1e3`.
    Float(f64),
    /// `'tanh'`, `"mean"`, with escapes resolved; adjacent literals are already concatenated.
    Str(String),
    /// `True`, `False`.
    Bool(bool),
    /// `None`.
    NoneLit,
    /// A bare name: an input, a param, a var, a helper, a comprehension variable, ….
    Name(String),
    /// `(a, b)`, `(a,)`, `()`, and the unparenthesised `a, b`.
    Tuple(Vec<Expr>),
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `{a, b}`.
    Set(Vec<Expr>),
    /// `value.attr`; `attr_span` covers the attribute name only.
    Attribute {
        /// The expression before the dot (`x` in `x.shape`).
        value: Box<Expr>,
        /// The attribute name after the dot (`shape`).
        attr: String,
        /// Byte range of `attr` alone in the formula.
        attr_span: Span,
    },
    /// `value[index]`; the index may be a [`ExprKind::Slice`] or a tuple of indices.
    Subscript {
        /// The expression being indexed (`x.shape` in `x.shape[0]`).
        value: Box<Expr>,
        /// What is between the brackets: an expression, a [`ExprKind::Slice`], or, for
        /// `s[a, b:c]`, a [`ExprKind::Tuple`] of them (its span excludes the brackets).
        index: Box<Expr>,
    },
    /// `lower:upper:step`, any part optional. Only ever the index of a subscript (or an element
    /// of a tuple index).
    Slice {
        /// The start, before the first `:` (`1` in `1:n`); `None` when omitted (`:n`).
        lower: Option<Box<Expr>>,
        /// The end, after the first `:` (`n` in `1:n`); `None` when omitted (`1:`).
        upper: Option<Box<Expr>>,
        /// The stride, after the second `:` (`2` in `::2`); `None` when omitted (`1:n`, `1:n:`).
        step: Option<Box<Expr>>,
    },
    /// `func(args…)`; a lone generator argument `f(x for x in s)` is one
    /// [`ExprKind::Comprehension`] argument.
    Call {
        /// The callee; the checks accept only a helper's name (`product` in `product(x.shape)`).
        func: Box<Expr>,
        /// The positional arguments, in order (keyword and starred arguments are rejected).
        args: Vec<Expr>,
    },
    /// `-a`, `+a`, `not a`.
    Unary {
        /// Which prefix operator.
        op: UnaryOp,
        /// The expression it applies to (`a` in `-a`).
        operand: Box<Expr>,
    },
    /// A left-associative chain of one precedence level: `a + b - c` (`+ -`) or `a * b // c`
    /// (`* / // %`), which Python evaluates as `((a + b) - c)`. One node for the whole chain, so
    /// a flat sum of thousands of terms is one level deep, not thousands.
    Binary {
        /// The first operand (`a` in `a + b - c`).
        left: Box<Expr>,
        /// Each following operator with its right operand, left to right (`+ b`, `- c`); never
        /// empty.
        rest: Vec<BinLink>,
    },
    /// `a ** b ** c`: the operands of a right-associative power chain (at least two), evaluated
    /// left to right and combined from the right, `a ** (b ** c)`. An operand that starts with a
    /// unary operator (`2 ** -x ** 2`) ends the chain: it is its own node.
    Power(Vec<Expr>),
    /// `a and b and c`, `a or b or c` (at least two operands): Python evaluates the operands in
    /// order and stops at the first that decides the result (falsy for `and`, truthy for `or`).
    BoolOp {
        /// `and` or `or`; a chain mixing them is nested nodes (`a or b and c` is
        /// `a or (b and c)`).
        op: BoolOpKind,
        /// The operands in source order, at least two.
        values: Vec<Expr>,
    },
    /// `a < b <= c`: the first operand, then each operator with its right operand.
    Compare {
        /// The first operand (`a` in `a < b <= c`).
        left: Box<Expr>,
        /// Each following operator with its right operand (`< b`, `<= c`); never empty. As in
        /// Python, `a < b <= c` means `a < b and b <= c`, with `b` evaluated once.
        rest: Vec<Comparator>,
    },
    /// `body if test else orelse`.
    IfExp {
        /// The value when `test` is truthy (`a` in `a if c else b`).
        body: Box<Expr>,
        /// The condition, evaluated first (`c`).
        test: Box<Expr>,
        /// The value when `test` is falsy (`b`).
        orelse: Box<Expr>,
    },
    /// `[elt for … in … if …]`, `{elt for …}`, `(elt for …)`.
    Comprehension {
        /// Which brackets: list `[…]`, set `{…}`, or generator `(…)`.
        kind: CompKind,
        /// The element expression before the first `for` (`d * 2` in `[d * 2 for d in s]`).
        elt: Box<Expr>,
        /// The `for … in … if …` clauses, outermost loop first; at least one.
        clauses: Vec<CompClause>,
    },
}

/// One `OP right` link of a [`ExprKind::Binary`] chain.
#[derive(Debug, Clone, PartialEq)]
pub struct BinLink {
    /// Never [`BinOp::Pow`], which has its own node ([`ExprKind::Power`]).
    pub op: BinOp,
    /// The operator's token.
    pub op_span: Span,
    /// The operand after the operator (`c` in the `- c` link of `a + b - c`).
    pub right: Expr,
}

/// One `OP right` link of a comparison chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparator {
    /// The comparison operator (`<`, `in`, `is not`, …).
    pub op: CmpOp,
    /// The operator's tokens (`not in` and `is not` span both words).
    pub op_span: Span,
    /// The operand after the operator (`c` in the `<= c` link of `a < b <= c`).
    pub right: Expr,
}

/// One `for target in iter if cond…` clause of a comprehension.
#[derive(Debug, Clone, PartialEq)]
pub struct CompClause {
    /// The names bound for each item, between `for` and `in` (`d` in `for d in x.shape`).
    pub target: Target,
    /// The iterable after `in` (`x.shape`); evaluated once per iteration of the enclosing clauses.
    pub iter: Expr,
    /// The filter conditions after the iterable, each `if cond` in order; an item is kept only
    /// when all are truthy (`d > 1` in `for d in x.shape if d > 1`).
    pub ifs: Vec<Expr>,
    /// Byte range of the clause, from `for` to the end of its last condition (or of `iter`).
    pub span: Span,
}

/// A comprehension target: a name, or a tuple of names (`for a, b in …`, `for (a, b) in …`).
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A single name: `for d in …` (also `for (d) in …`).
    Name(TargetName),
    /// Names unpacked from each item: `for i, d in …`, `for (i, d) in …`, `for (d,) in …`; the
    /// span covers the whole target, parentheses included.
    Tuple(Vec<TargetName>, Span),
}

/// A name bound by a comprehension target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetName {
    /// The identifier, as written.
    pub name: String,
    /// Byte range of the identifier in the formula.
    pub span: Span,
}

impl Target {
    /// The names this target binds, in order.
    pub fn names(&self) -> &[TargetName] {
        match self {
            Target::Name(n) => std::slice::from_ref(n),
            Target::Tuple(names, _) => names,
        }
    }
}

/// Which of Python's comprehension forms an [`ExprKind::Comprehension`] is, by its brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompKind {
    /// `[x for x in s]`: builds a list.
    List,
    /// `{x for x in s}`: builds a set.
    Set,
    /// `(x for x in s)`, or the lone argument of `f(x for x in s)`. The generated code collects
    /// its items into a list, except as the lone argument of a helper such as `sum` or `max`,
    /// which consumes them as they come.
    Generator,
}

/// A prefix operator of an [`ExprKind::Unary`] node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// Negation, `-a`.
    Neg,
    /// Unary plus, `+a`.
    Pos,
    /// Logical negation, `not a`: `True` when `a` is falsy. Binds looser than comparisons, so
    /// `not a == b` is `not (a == b)`.
    Not,
}

/// An arithmetic operator, with Python's semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// Addition, `a + b`.
    Add,
    /// Subtraction, `a - b`.
    Sub,
    /// Multiplication, `a * b`.
    Mul,
    /// True division, `a / b`: a float even for two ints (`7 / 2` is `3.5`).
    Div,
    /// Floor division, `a // b`: rounds toward negative infinity (`-7 // 2` is `-4`).
    FloorDiv,
    /// Modulo, `a % b`: the result takes the sign of `b` (`-7 % 2` is `1`).
    Mod,
    /// Exponentiation, `a ** b`. Parsed into [`ExprKind::Power`], never into a [`BinLink`].
    Pow,
}

/// The operator of an [`ExprKind::BoolOp`] chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoolOpKind {
    /// `a and b`: the first falsy operand, else the last one.
    And,
    /// `a or b`: the first truthy operand, else the last one.
    Or,
}

/// A comparison operator of a [`Comparator`] link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
    /// Membership, `a in b`.
    In,
    /// Non-membership, `a not in b` (two tokens).
    NotIn,
    /// Identity, `a is b`; on a tensor input, `t is None` is the presence test.
    Is,
    /// Negated identity, `a is not b` (two tokens); `t is not None` tests that input `t` is
    /// present.
    IsNot,
}

impl UnaryOp {
    /// The operator as written in a formula (`-`, `+`, `not`).
    pub fn symbol(self) -> &'static str {
        match self {
            UnaryOp::Neg => "-",
            UnaryOp::Pos => "+",
            UnaryOp::Not => "not",
        }
    }
}

impl BinOp {
    /// The operator as written in a formula (`+`, `//`, `**`, …).
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
        }
    }
}

impl BoolOpKind {
    /// The keyword as written in a formula (`and`, `or`).
    pub fn symbol(self) -> &'static str {
        match self {
            BoolOpKind::And => "and",
            BoolOpKind::Or => "or",
        }
    }
}

impl CmpOp {
    /// The operator as written in a formula (`<=`, `not in`, `is not`, …).
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::In => "in",
            CmpOp::NotIn => "not in",
            CmpOp::Is => "is",
            CmpOp::IsNot => "is not",
        }
    }
}

impl CompKind {
    /// The construct's name as error messages say it.
    pub fn describe(self) -> &'static str {
        match self {
            CompKind::List => "list comprehension",
            CompKind::Set => "set comprehension",
            CompKind::Generator => "generator expression",
        }
    }
}

impl Expr {
    /// A node of `kind` covering `span` (byte offsets into the formula).
    pub fn new(kind: ExprKind, span: Span) -> Self {
        Expr { kind, span }
    }

    /// The construct's name as error messages say it ("subscript", "list display", …).
    pub fn describe(&self) -> &'static str {
        match &self.kind {
            ExprKind::Int(_) => "integer literal",
            ExprKind::Float(_) => "float literal",
            ExprKind::Str(_) => "string literal",
            ExprKind::Bool(_) => "boolean literal",
            ExprKind::NoneLit => "`None`",
            ExprKind::Name(_) => "name",
            ExprKind::Tuple(_) => "tuple display",
            ExprKind::List(_) => "list display",
            ExprKind::Set(_) => "set display",
            ExprKind::Attribute { .. } => "attribute",
            ExprKind::Subscript { .. } => "subscript",
            ExprKind::Slice { .. } => "slice",
            ExprKind::Call { .. } => "call",
            ExprKind::Unary { .. } => "unary operator",
            ExprKind::Binary { .. } | ExprKind::Power(_) => "binary operator",
            ExprKind::BoolOp { .. } => "boolean operator",
            ExprKind::Compare { .. } => "comparison",
            ExprKind::IfExp { .. } => "conditional expression",
            ExprKind::Comprehension { kind, .. } => kind.describe(),
        }
    }

    /// The direct sub-expressions, in source (= evaluation) order.
    pub fn children(&self) -> Vec<&Expr> {
        match &self.kind {
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::NoneLit
            | ExprKind::Name(_) => Vec::new(),
            ExprKind::Tuple(items) | ExprKind::List(items) | ExprKind::Set(items) => {
                items.iter().collect()
            }
            ExprKind::Attribute { value, .. } => vec![value],
            ExprKind::Subscript { value, index } => vec![value, index],
            ExprKind::Slice { lower, upper, step } => [lower, upper, step]
                .into_iter()
                .flatten()
                .map(|b| &**b)
                .collect(),
            ExprKind::Call { func, args } => {
                let mut v: Vec<&Expr> = vec![func];
                v.extend(args.iter());
                v
            }
            ExprKind::Unary { operand, .. } => vec![operand],
            ExprKind::Binary { left, rest } => {
                let mut v: Vec<&Expr> = vec![left];
                v.extend(rest.iter().map(|l| &l.right));
                v
            }
            ExprKind::Power(items) | ExprKind::BoolOp { values: items, .. } => {
                items.iter().collect()
            }
            ExprKind::Compare { left, rest } => {
                let mut v: Vec<&Expr> = vec![left];
                v.extend(rest.iter().map(|c| &c.right));
                v
            }
            ExprKind::IfExp { body, test, orelse } => vec![test, body, orelse],
            ExprKind::Comprehension { elt, clauses, .. } => {
                let mut v: Vec<&Expr> = Vec::new();
                for c in clauses {
                    v.push(&c.iter);
                    v.extend(c.ifs.iter());
                }
                v.push(elt);
                v
            }
        }
    }

    /// The nesting depth of the tree rooted here (a leaf is 1): how deep the recursion of every
    /// pass over it goes, and how deeply the generated Rust nests. A chain (`a + b + c`,
    /// `a ** b ** c`, `a and b and c`, `a < b < c`) is one level whatever its length; each `for`
    /// clause of a comprehension is one more level for what follows it, because the generated
    /// code runs it inside one more loop.
    pub fn depth(&self) -> usize {
        let ExprKind::Comprehension { elt, clauses, .. } = &self.kind else {
            return 1 + self
                .children()
                .into_iter()
                .map(Expr::depth)
                .max()
                .unwrap_or(0);
        };
        let mut deepest = 0;
        for (k, clause) in clauses.iter().enumerate() {
            deepest = deepest.max(clause.iter.depth() + k);
            for cond in &clause.ifs {
                deepest = deepest.max(cond.depth() + k + 1);
            }
        }
        1 + deepest.max(elt.depth() + clauses.len())
    }
}

/// Fully parenthesised rendering: every compound node is wrapped in parentheses, so the tree's
/// shape can be read (and asserted) from the text. `-2**2` prints as `(-(2 ** 2))`.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Int(v) => write!(f, "{v}"),
            // `1e999` is how Python spells an infinite literal.
            ExprKind::Float(v) if v.is_infinite() => f.write_str("1e999"),
            ExprKind::Float(v) => write!(f, "{v:?}"),
            ExprKind::Str(s) => write_py_str(f, s),
            ExprKind::Bool(true) => f.write_str("True"),
            ExprKind::Bool(false) => f.write_str("False"),
            ExprKind::NoneLit => f.write_str("None"),
            ExprKind::Name(n) => f.write_str(n),
            ExprKind::Tuple(items) => {
                f.write_str("(")?;
                write_list(f, items)?;
                if items.len() == 1 {
                    f.write_str(",")?;
                }
                f.write_str(")")
            }
            ExprKind::List(items) => {
                f.write_str("[")?;
                write_list(f, items)?;
                f.write_str("]")
            }
            ExprKind::Set(items) => {
                f.write_str("{")?;
                write_list(f, items)?;
                f.write_str("}")
            }
            // `1.real` would lex as the float `1.` followed by a name.
            ExprKind::Attribute { value, attr, .. } if matches!(value.kind, ExprKind::Int(_)) => {
                write!(f, "(({value}).{attr})")
            }
            ExprKind::Attribute { value, attr, .. } => write!(f, "({value}.{attr})"),
            // A tuple index prints bare, as written: `s[a:b, c]` (slices cannot be parenthesised).
            ExprKind::Subscript { value, index } => match &index.kind {
                ExprKind::Tuple(items) if !items.is_empty() => {
                    write!(f, "({value}[")?;
                    write_list(f, items)?;
                    if items.len() == 1 {
                        f.write_str(",")?;
                    }
                    f.write_str("])")
                }
                _ => write!(f, "({value}[{index}])"),
            },
            ExprKind::Slice { lower, upper, step } => {
                if let Some(l) = lower {
                    write!(f, "{l}")?;
                }
                f.write_str(":")?;
                if let Some(u) = upper {
                    write!(f, "{u}")?;
                }
                if let Some(s) = step {
                    write!(f, ":{s}")?;
                }
                Ok(())
            }
            ExprKind::Call { func, args } => {
                write!(f, "({func}(")?;
                write_list(f, args)?;
                f.write_str("))")
            }
            ExprKind::Unary {
                op: UnaryOp::Not,
                operand,
            } => write!(f, "(not {operand})"),
            ExprKind::Unary { op, operand } => write!(f, "({}{operand})", op.symbol()),
            // Chains print flat, as one pair of parentheses: `(a + b - c)` reads back as the same
            // single node, which nested parentheses would not.
            ExprKind::Binary { left, rest } => {
                write!(f, "({left}")?;
                for link in rest {
                    write!(f, " {} {}", link.op.symbol(), link.right)?;
                }
                f.write_str(")")
            }
            ExprKind::Power(items) => {
                f.write_str("(")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ** ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str(")")
            }
            ExprKind::BoolOp { op, values } => {
                f.write_str("(")?;
                for (i, value) in values.iter().enumerate() {
                    if i > 0 {
                        write!(f, " {} ", op.symbol())?;
                    }
                    write!(f, "{value}")?;
                }
                f.write_str(")")
            }
            ExprKind::Compare { left, rest } => {
                write!(f, "({left}")?;
                for c in rest {
                    write!(f, " {} {}", c.op.symbol(), c.right)?;
                }
                f.write_str(")")
            }
            ExprKind::IfExp { body, test, orelse } => {
                write!(f, "({body} if {test} else {orelse})")
            }
            ExprKind::Comprehension { kind, elt, clauses } => {
                let (open, close) = match kind {
                    CompKind::List => ("[", "]"),
                    CompKind::Set => ("{", "}"),
                    CompKind::Generator => ("(", ")"),
                };
                write!(f, "{open}{elt}")?;
                for c in clauses {
                    f.write_str(" for ")?;
                    match &c.target {
                        Target::Name(n) => f.write_str(&n.name)?,
                        Target::Tuple(names, _) => {
                            f.write_str("(")?;
                            for (i, n) in names.iter().enumerate() {
                                if i > 0 {
                                    f.write_str(", ")?;
                                }
                                f.write_str(&n.name)?;
                            }
                            if names.len() == 1 {
                                f.write_str(",")?;
                            }
                            f.write_str(")")?;
                        }
                    }
                    write!(f, " in {}", c.iter)?;
                    for cond in &c.ifs {
                        write!(f, " if {cond}")?;
                    }
                }
                f.write_str(close)
            }
        }
    }
}

/// A string literal Python reads back as the same string.
fn write_py_str(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        match c {
            '\\' => f.write_str("\\\\")?,
            '"' => f.write_str("\\\"")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if (c as u32) < 0x20 || c as u32 == 0x7f => write!(f, "\\x{:02x}", c as u32)?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("\"")
}

fn write_list(f: &mut fmt::Formatter<'_>, items: &[Expr]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(kind: ExprKind) -> Expr {
        Expr::new(kind, 0..0)
    }

    #[test]
    fn display_is_fully_parenthesised() {
        let e = leaf(ExprKind::Binary {
            left: Box::new(leaf(ExprKind::Name("a".into()))),
            rest: vec![
                BinLink {
                    op: BinOp::Add,
                    op_span: 0..0,
                    right: leaf(ExprKind::Unary {
                        op: UnaryOp::Neg,
                        operand: Box::new(leaf(ExprKind::Int(2))),
                    }),
                },
                BinLink {
                    op: BinOp::Sub,
                    op_span: 0..0,
                    right: leaf(ExprKind::Int(3)),
                },
            ],
        });
        assert_eq!(e.to_string(), "(a + (-2) - 3)");
        assert_eq!(e.depth(), 3);
        let p = leaf(ExprKind::Power(vec![e.clone(), leaf(ExprKind::Int(2))]));
        assert_eq!(p.to_string(), "((a + (-2) - 3) ** 2)");
        assert_eq!(p.depth(), 4);
        let b = leaf(ExprKind::BoolOp {
            op: BoolOpKind::Or,
            values: vec![p, leaf(ExprKind::NoneLit), leaf(ExprKind::Bool(true))],
        });
        assert_eq!(b.to_string(), "(((a + (-2) - 3) ** 2) or None or True)");
        assert_eq!(b.depth(), 5);
    }

    #[test]
    fn display_of_literals_and_displays() {
        let one = leaf(ExprKind::Tuple(vec![leaf(ExprKind::Int(1))]));
        assert_eq!(one.to_string(), "(1,)");
        assert_eq!(leaf(ExprKind::Tuple(vec![])).to_string(), "()");
        assert_eq!(leaf(ExprKind::Str("a'b".into())).to_string(), "\"a'b\"");
        assert_eq!(leaf(ExprKind::Float(0.5)).to_string(), "0.5");
        assert_eq!(leaf(ExprKind::NoneLit).to_string(), "None");
        assert_eq!(leaf(ExprKind::Bool(true)).to_string(), "True");
    }

    #[test]
    fn children_follow_evaluation_order() {
        let e = leaf(ExprKind::IfExp {
            body: Box::new(leaf(ExprKind::Name("b".into()))),
            test: Box::new(leaf(ExprKind::Name("t".into()))),
            orelse: Box::new(leaf(ExprKind::Name("o".into()))),
        });
        let names: Vec<String> = e.children().iter().map(|c| c.to_string()).collect();
        assert_eq!(names, ["t", "b", "o"]);
    }
}
