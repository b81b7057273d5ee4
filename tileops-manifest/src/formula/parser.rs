//! Recursive-descent parser for the formula subset of Python 3 expressions.
//!
//! One function per precedence level, lowest first, following Python's grammar:
//! conditional < `or` < `and` < `not` < comparisons (chained) < `|` < `^` < `&` < shifts <
//! `+ -` < `* / // % @` < unary `+ - ~` < `**` (right-associative; its right operand is a unary
//! expression, so `-2**2 == -(2**2)` and `2**-1` parses) < `await` < primary (call, subscript,
//! attribute) < atom. Every chain of one level is parsed iteratively into one flat node
//! (`a + b - c`, `a ** b ** c`, `a or b or c`, `a < b < c`), so chains of any length are one
//! level deep.
//!
//! The stated limits (`tileops/docs/formula-language.md`): at most [`MAX_NESTING`] nested brackets,
//! parentheses, unary operators, `not`s and conditionals; a tree at most [`MAX_DEPTH`] deep; at
//! most [`MAX_FOR_CLAUSES`] `for` clauses in one comprehension. Each is a located error.
//!
//! Constructs outside the subset (lambda, `:=`, starred and keyword arguments, dict displays and
//! comprehensions, f-strings, `await`, `yield`, bitwise operators, `@`) are recognised so the
//! error can name them. The first error wins. Nesting is bounded so that no input can exhaust the
//! stack, here or in the passes that walk the tree.

use super::FormulaError;
use super::ast::{
    BinLink, BinOp, BoolOpKind, CmpOp, CompClause, CompKind, Comparator, Expr, ExprKind, Span,
    Target, TargetName, UnaryOp,
};
use super::lexer::{Kw, Tok, Token, lex};

/// How deeply the parser may recurse: each bracket, parenthesis, unary operator or `not` costs a
/// level. Real formulas stay under 10; the bound keeps an unoptimised build within ~1 MiB of stack
/// (a test thread has 2 MiB).
pub const MAX_NESTING: usize = 64;
/// The deepest syntax tree accepted ([`Expr::depth`]); bounds the recursion of the checker,
/// codegen and drop, and the nesting of the generated Rust, which rustc must compile.
pub const MAX_DEPTH: usize = 100;
/// The most `for` clauses one comprehension may have. Each clause is one more nested loop in the
/// generated code; real formulas use one or two.
pub const MAX_FOR_CLAUSES: usize = 16;

type PResult<T> = Result<T, FormulaError>;

/// Parses one formula. See the module docs for the grammar.
pub fn parse(src: &str) -> PResult<Expr> {
    if src.trim().is_empty() {
        return Err(FormulaError::new(0..src.len(), "the formula is empty"));
    }
    let mut p = Parser {
        toks: lex(src),
        pos: 0,
        nesting: 0,
        prev_end: 0,
    };
    let expr = p.top()?;
    if !matches!(p.peek(), Tok::Eof) {
        return Err(p.unexpected("an operator or the end of the formula"));
    }
    Ok(expr)
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    nesting: usize,
    /// End of the last consumed token: where the node being built ends.
    prev_end: usize,
}

impl Parser {
    // ----- token access -------------------------------------------------------------------

    fn token(&self, ahead: usize) -> &Token {
        // The token list always ends with Eof or Error, and `pos` never moves past it.
        let i = (self.pos + ahead).min(self.toks.len().saturating_sub(1));
        &self.toks[i]
    }

    fn peek(&self) -> &Tok {
        &self.token(0).tok
    }

    fn peek_span(&self) -> Span {
        self.token(0).span.clone()
    }

    fn start(&self) -> usize {
        self.token(0).span.start
    }

    fn bump(&mut self) -> Token {
        let t = self.token(0).clone();
        if !matches!(t.tok, Tok::Eof | Tok::Error(_)) {
            self.pos += 1;
            self.prev_end = t.span.end;
        }
        t
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Tok::Op(o) if *o == op)
    }

    fn is_kw(&self, kw: Kw) -> bool {
        matches!(self.peek(), Tok::Kw(k) if *k == kw)
    }

    fn eat_op(&mut self, op: &str) -> bool {
        let yes = self.is_op(op);
        if yes {
            self.bump();
        }
        yes
    }

    fn eat_kw(&mut self, kw: Kw) -> bool {
        let yes = self.is_kw(kw);
        if yes {
            self.bump();
        }
        yes
    }

    fn expect_op(&mut self, op: &str, expected: &str) -> PResult<()> {
        if self.eat_op(op) {
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    /// The error for the current token, which is not what the grammar needs here. A lexical
    /// error token reports itself; some tokens get a message that says what they would mean.
    fn unexpected(&self, expected: &str) -> FormulaError {
        let t = self.token(0);
        let span = t.span.clone();
        let message = match &t.tok {
            Tok::Error(m) => m.clone(),
            Tok::Op(":=") => "assignment expressions (`:=`) are not supported in formulas".into(),
            Tok::Op("=") => "assignment (`=`) is not supported in formulas; use `==` to compare \
                             (keyword arguments are not supported either)"
                .into(),
            Tok::Op(
                o @ ("+=" | "-=" | "*=" | "/=" | "//=" | "%=" | "**=" | "&=" | "|=" | "^=" | ">>="
                | "<<=" | "@="),
            ) => format!("augmented assignment (`{o}`) is not supported in formulas"),
            Tok::Op(";") => "`;` separates statements; a formula is a single expression".into(),
            Tok::Op("->") => "`->` (an annotation) is not an expression".into(),
            Tok::Kw(
                k @ (Kw::Def
                | Kw::Class
                | Kw::Import
                | Kw::From
                | Kw::Return
                | Kw::Pass
                | Kw::Del
                | Kw::Global
                | Kw::Nonlocal
                | Kw::Assert
                | Kw::Raise
                | Kw::Try
                | Kw::Except
                | Kw::Finally
                | Kw::While
                | Kw::With
                | Kw::Break
                | Kw::Continue
                | Kw::Elif),
            ) => format!(
                "`{}` starts a statement; a formula is a single expression",
                k.as_str()
            ),
            other => format!("expected {expected}, found {}", other.describe()),
        };
        FormulaError::new(span, message)
    }

    fn enter(&mut self) -> PResult<()> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(FormulaError::new(
                self.peek_span(),
                format!("the formula is nested too deeply (more than {MAX_NESTING} levels)"),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nesting = self.nesting.saturating_sub(1);
    }

    /// Builds a node from `start` to the end of the last consumed token, refusing trees deeper
    /// than [`MAX_DEPTH`]. Children are already bounded, so computing the depth is cheap.
    fn node(&self, kind: ExprKind, start: usize) -> PResult<Expr> {
        let e = Expr::new(kind, start..self.prev_end.max(start));
        if e.depth() > MAX_DEPTH {
            return Err(FormulaError::new(
                e.span.clone(),
                format!("the formula is nested too deeply (more than {MAX_DEPTH} levels)"),
            ));
        }
        Ok(e)
    }

    // ----- expressions, lowest precedence first ---------------------------------------------
    //
    // Each chain (`or`, `and`, comparisons, `+ -`, `* / // %`, `**`) is parsed by a loop into
    // one flat node, so its length costs neither stack here nor depth in the tree; only
    // brackets, parentheses, unary operators, `not` and conditionals recurse. On an error the
    // parse is over, so `leave` only runs on success.

    /// The whole formula: an expression, or an unparenthesised tuple `a, b` / `a,`.
    fn top(&mut self) -> PResult<Expr> {
        let start = self.start();
        let first = self.expression()?;
        if !self.is_op(",") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_op(",") {
            if matches!(self.peek(), Tok::Eof) {
                break;
            }
            items.push(self.expression()?);
        }
        self.node(ExprKind::Tuple(items), start)
    }

    /// `expression`: a conditional expression (or a lambda, which is rejected).
    fn expression(&mut self) -> PResult<Expr> {
        self.enter()?;
        if self.is_kw(Kw::Lambda) {
            return Err(self.lambda());
        }
        let start = self.start();
        let body = self.disjunction()?;
        let e = if self.eat_kw(Kw::If) {
            let test = self.disjunction()?;
            if !self.eat_kw(Kw::Else) {
                return Err(self.unexpected("`else` (a conditional expression needs one)"));
            }
            let orelse = self.expression()?;
            self.node(
                ExprKind::IfExp {
                    body: Box::new(body),
                    test: Box::new(test),
                    orelse: Box::new(orelse),
                },
                start,
            )?
        } else {
            body
        };
        if self.is_op(":=") {
            self.bump();
            // The value only widens the span; its own errors yield to this one.
            let _ = self.expression();
            return Err(FormulaError::new(
                start..self.prev_end,
                "assignment expressions (`:=`) are not supported in formulas",
            ));
        }
        self.leave();
        Ok(e)
    }

    /// Rejects `lambda params: body`, spanning all of it when the body parses.
    fn lambda(&mut self) -> FormulaError {
        let kw = self.bump().span;
        let mut depth = 0usize;
        loop {
            match self.peek() {
                Tok::Eof | Tok::Error(_) => break,
                Tok::Op("(" | "[" | "{") => depth += 1,
                Tok::Op(")" | "]" | "}") => depth = depth.saturating_sub(1),
                Tok::Op(":") if depth == 0 => {
                    self.bump();
                    break;
                }
                _ => {}
            }
            self.bump();
        }
        let end = match self.expression() {
            Ok(_) => self.prev_end,
            Err(_) => kw.end,
        };
        FormulaError::new(
            kw.start..end.max(kw.end),
            "lambda expressions are not supported in formulas",
        )
    }

    /// `disjunction`: `a or b or …`, one node for the whole chain. Also the operand of
    /// `if`/`else` and of comprehension clauses.
    fn disjunction(&mut self) -> PResult<Expr> {
        self.bool_chain(BoolOpKind::Or)
    }

    /// `a or b or c` (over conjunctions) or `a and b and c` (over inversions), parsed in a loop
    /// into one flat node.
    fn bool_chain(&mut self, op: BoolOpKind) -> PResult<Expr> {
        let start = self.start();
        let operand = |p: &mut Self| match op {
            BoolOpKind::Or => p.bool_chain(BoolOpKind::And),
            BoolOpKind::And => p.inversion(),
        };
        let first = operand(self)?;
        let kw = match op {
            BoolOpKind::Or => Kw::Or,
            BoolOpKind::And => Kw::And,
        };
        if !self.is_kw(kw) {
            return Ok(first);
        }
        let mut values = vec![first];
        while self.eat_kw(kw) {
            values.push(operand(self)?);
        }
        self.node(ExprKind::BoolOp { op, values }, start)
    }

    /// `not a` (which binds looser than comparisons: `not a == b` is `not (a == b)`), or a
    /// comparison.
    fn inversion(&mut self) -> PResult<Expr> {
        if !self.is_kw(Kw::Not) {
            return self.comparison();
        }
        let start = self.start();
        self.bump();
        self.enter()?;
        let operand = self.inversion()?;
        self.leave();
        self.node(
            ExprKind::Unary {
                op: UnaryOp::Not,
                operand: Box::new(operand),
            },
            start,
        )
    }

    /// `a < b <= c …`: one node for the whole chain, parsed in a loop.
    fn comparison(&mut self) -> PResult<Expr> {
        let start = self.start();
        let left = self.sum()?;
        let mut rest = Vec::new();
        while self.at_comparison_op() {
            let (op, op_span) = self.comparison_op();
            let right = self.sum()?;
            rest.push(Comparator { op, op_span, right });
        }
        if rest.is_empty() {
            return Ok(left);
        }
        self.node(
            ExprKind::Compare {
                left: Box::new(left),
                rest,
            },
            start,
        )
    }

    fn at_comparison_op(&self) -> bool {
        match self.peek() {
            Tok::Op("<" | "<=" | ">" | ">=" | "==" | "!=") | Tok::Kw(Kw::In | Kw::Is) => true,
            Tok::Kw(Kw::Not) => matches!(self.token(1).tok, Tok::Kw(Kw::In)),
            _ => false,
        }
    }

    /// `a + b - c …` over terms: one node for the whole chain, parsed in a loop.
    fn sum(&mut self) -> PResult<Expr> {
        self.arith_chain(true)
    }

    /// A left-associative chain of one level: `+ -` over terms (`sum`), or `* / // %` over
    /// unary expressions (`!sum`).
    fn arith_chain(&mut self, sum: bool) -> PResult<Expr> {
        let start = self.start();
        let operand = |p: &mut Self| {
            if sum {
                p.arith_chain(false)
            } else {
                p.factor()
            }
        };
        let left = operand(self)?;
        let mut rest = Vec::new();
        loop {
            if !sum {
                self.reject_bitwise()?;
            }
            let op = match (sum, self.peek()) {
                (true, Tok::Op("+")) => BinOp::Add,
                (true, Tok::Op("-")) => BinOp::Sub,
                (false, Tok::Op("*")) => BinOp::Mul,
                (false, Tok::Op("/")) => BinOp::Div,
                (false, Tok::Op("//")) => BinOp::FloorDiv,
                (false, Tok::Op("%")) => BinOp::Mod,
                _ => break,
            };
            let op_span = self.bump().span;
            let right = operand(self)?;
            rest.push(BinLink { op, op_span, right });
        }
        if rest.is_empty() {
            return Ok(left);
        }
        self.node(
            ExprKind::Binary {
                left: Box::new(left),
                rest,
            },
            start,
        )
    }

    /// Operators outside the language (bitwise, shifts, `@`) are named in an error wherever an
    /// operand ends; every operand passes through a term, so checking there finds them all.
    fn reject_bitwise(&self) -> PResult<()> {
        let Tok::Op(o @ ("|" | "^" | "&" | "<<" | ">>" | "@")) = self.peek() else {
            return Ok(());
        };
        let what = match *o {
            "|" => "bitwise or operator",
            "^" => "bitwise xor operator",
            "&" => "bitwise and operator",
            "@" => "matrix multiplication operator",
            _ => "shift operator",
        };
        Err(FormulaError::new(
            self.peek_span(),
            format!("the {what} `{o}` is not supported in formulas"),
        ))
    }

    /// Consumes one comparison operator (`not in` and `is not` are two tokens).
    fn comparison_op(&mut self) -> (CmpOp, Span) {
        let start = self.start();
        let op = match self.bump().tok {
            Tok::Op("<") => CmpOp::Lt,
            Tok::Op("<=") => CmpOp::Le,
            Tok::Op(">") => CmpOp::Gt,
            Tok::Op(">=") => CmpOp::Ge,
            Tok::Op("==") => CmpOp::Eq,
            Tok::Op("!=") => CmpOp::Ne,
            Tok::Kw(Kw::Is) => {
                if self.eat_kw(Kw::Not) {
                    CmpOp::IsNot
                } else {
                    CmpOp::Is
                }
            }
            Tok::Kw(Kw::Not) => {
                self.bump();
                CmpOp::NotIn
            }
            _ => CmpOp::In,
        };
        (op, start..self.prev_end)
    }

    /// Unary `-`, `+` (and the rejected `~`), then `**`.
    fn factor(&mut self) -> PResult<Expr> {
        let start = self.start();
        let op = match self.peek() {
            Tok::Op("-") => UnaryOp::Neg,
            Tok::Op("+") => UnaryOp::Pos,
            Tok::Op("~") => {
                return Err(FormulaError::new(
                    self.peek_span(),
                    "the bitwise not operator `~` is not supported in formulas",
                ));
            }
            _ => return self.power(),
        };
        self.bump();
        self.enter()?;
        let operand = self.factor()?;
        self.leave();
        self.node(
            ExprKind::Unary {
                op,
                operand: Box::new(operand),
            },
            start,
        )
    }

    /// `a ** b ** c`: Python's `power: primary '**' factor`, right-associative, parsed in a loop
    /// into one flat node. An exponent that starts with a unary operator is a whole factor
    /// (`2 ** -3 ** 2` is `2 ** (-(3 ** 2))`), which ends the chain.
    fn power(&mut self) -> PResult<Expr> {
        let start = self.start();
        let base = self.await_primary()?;
        if !self.is_op("**") {
            return Ok(base);
        }
        let mut operands = vec![base];
        while self.eat_op("**") {
            if matches!(self.peek(), Tok::Op("-" | "+" | "~")) {
                operands.push(self.factor()?);
                break;
            }
            operands.push(self.await_primary()?);
        }
        self.node(ExprKind::Power(operands), start)
    }

    /// A primary, after rejecting `await`.
    fn await_primary(&mut self) -> PResult<Expr> {
        if self.is_kw(Kw::Await) {
            return Err(self.keyword_construct("`await` expressions"));
        }
        self.primary()
    }

    /// Rejects a construct introduced by a keyword (`await x`, `yield x`), spanning its operand
    /// when one parses.
    fn keyword_construct(&mut self, what: &str) -> FormulaError {
        let kw = self.bump().span;
        let end = if matches!(
            self.peek(),
            Tok::Eof | Tok::Op(")" | "]" | "}" | ",") | Tok::Error(_)
        ) {
            kw.end
        } else {
            match self.expression() {
                Ok(_) => self.prev_end,
                Err(_) => kw.end,
            }
        };
        FormulaError::new(
            kw.start..end.max(kw.end),
            format!("{what} are not supported in formulas"),
        )
    }

    /// An atom followed by any number of `.name`, `(args)` and `[index]`.
    fn primary(&mut self) -> PResult<Expr> {
        let start = self.start();
        let mut e = self.atom()?;
        loop {
            if self.eat_op(".") {
                let Tok::Name(attr) = self.peek().clone() else {
                    return Err(self.unexpected("an attribute name after `.`"));
                };
                let attr_span = self.bump().span;
                e = self.node(
                    ExprKind::Attribute {
                        value: Box::new(e),
                        attr,
                        attr_span,
                    },
                    start,
                )?;
            } else if self.is_op("(") {
                let args = self.call_args()?;
                e = self.node(
                    ExprKind::Call {
                        func: Box::new(e),
                        args,
                    },
                    start,
                )?;
            } else if self.is_op("[") {
                let index = self.subscript_index()?;
                e = self.node(
                    ExprKind::Subscript {
                        value: Box::new(e),
                        index: Box::new(index),
                    },
                    start,
                )?;
            } else {
                return Ok(e);
            }
        }
    }

    /// `( args )`, with `self` on the `(`.
    fn call_args(&mut self) -> PResult<Vec<Expr>> {
        self.bump();
        let mut args = Vec::new();
        loop {
            if self.eat_op(")") {
                return Ok(args);
            }
            let start = self.start();
            if self.is_op("*") || self.is_op("**") {
                let star = self.bump();
                let what = if matches!(star.tok, Tok::Op("*")) {
                    "starred arguments (`*args`)"
                } else {
                    "double-starred arguments (`**kwargs`)"
                };
                return Err(self.rejected_operand(start, what));
            }
            if matches!(self.peek(), Tok::Name(_)) && matches!(self.token(1).tok, Tok::Op("=")) {
                self.bump();
                self.bump();
                // The value only widens the span; its own errors yield to this one.
                let _ = self.expression();
                return Err(FormulaError::new(
                    start..self.prev_end,
                    "keyword arguments are not supported in formulas; pass arguments by position",
                ));
            }
            let arg = self.expression()?;
            if self.is_kw(Kw::For) || self.is_kw(Kw::Async) {
                let clauses = self.comp_clauses()?;
                let generator = self.node(
                    ExprKind::Comprehension {
                        kind: CompKind::Generator,
                        elt: Box::new(arg),
                        clauses,
                    },
                    start,
                )?;
                if !args.is_empty() || self.is_op(",") {
                    return Err(FormulaError::new(
                        generator.span,
                        "a generator expression must be parenthesised unless it is the only \
                         argument",
                    ));
                }
                self.expect_op(")", "`)` after the generator argument")?;
                args.push(generator);
                return Ok(args);
            }
            args.push(arg);
            if !self.eat_op(",") {
                self.expect_op(")", "`,` or `)` in the argument list")?;
                return Ok(args);
            }
        }
    }

    /// The error for a `*x` / `**x` item, spanning the operand when it parses.
    fn rejected_operand(&mut self, start: usize, what: &str) -> FormulaError {
        // The operand only widens the span; its own errors yield to this one.
        let _ = self.sum();
        FormulaError::new(
            start..self.prev_end.max(start + 1),
            format!("{what} are not supported in formulas"),
        )
    }

    /// `[ index ]`, with `self` on the `[`: one index or slice, or a tuple of them.
    fn subscript_index(&mut self) -> PResult<Expr> {
        self.bump();
        let start = self.start();
        let first = self.slice_item()?;
        let index = if self.is_op(",") {
            let mut items = vec![first];
            while self.eat_op(",") {
                if self.is_op("]") {
                    break;
                }
                items.push(self.slice_item()?);
            }
            self.node(ExprKind::Tuple(items), start)?
        } else {
            first
        };
        self.expect_op("]", "`]` to close the subscript")?;
        Ok(index)
    }

    fn slice_item(&mut self) -> PResult<Expr> {
        let start = self.start();
        let lower = if self.is_op(":") {
            None
        } else {
            Some(self.expression()?)
        };
        if !self.eat_op(":") {
            return lower.ok_or_else(|| self.unexpected("an index"));
        }
        let ends_part = |p: &Self| p.is_op(":") || p.is_op(",") || p.is_op("]");
        let upper = if ends_part(self) {
            None
        } else {
            Some(self.expression()?)
        };
        let mut step = None;
        if self.eat_op(":") && !ends_part(self) {
            step = Some(self.expression()?);
        }
        self.node(
            ExprKind::Slice {
                lower: lower.map(Box::new),
                upper: upper.map(Box::new),
                step: step.map(Box::new),
            },
            start,
        )
    }

    fn atom(&mut self) -> PResult<Expr> {
        let start = self.start();
        let kind = match self.peek().clone() {
            Tok::Name(n) => ExprKind::Name(n),
            Tok::Int(v) => ExprKind::Int(v),
            Tok::Float(v) => ExprKind::Float(v),
            Tok::Kw(Kw::True) => ExprKind::Bool(true),
            Tok::Kw(Kw::False) => ExprKind::Bool(false),
            Tok::Kw(Kw::None) => ExprKind::NoneLit,
            Tok::Str(_) => {
                let mut s = String::new();
                while let Tok::Str(part) = self.peek() {
                    s.push_str(part);
                    self.bump();
                }
                return self.node(ExprKind::Str(s), start);
            }
            Tok::Op("(") => return self.paren(),
            Tok::Op("[") => return self.list(),
            Tok::Op("{") => return self.brace(),
            Tok::Op("*") => {
                self.bump();
                return Err(self.rejected_operand(start, "starred expressions (`*x`)"));
            }
            Tok::Op("**") => {
                self.bump();
                return Err(self.rejected_operand(start, "double-starred expressions (`**x`)"));
            }
            Tok::Op("...") => {
                return Err(FormulaError::new(
                    self.peek_span(),
                    "the Ellipsis literal `...` is not supported in formulas",
                ));
            }
            Tok::Kw(Kw::Lambda) => return Err(self.lambda()),
            Tok::Kw(Kw::Yield) => return Err(self.keyword_construct("`yield` expressions")),
            Tok::Kw(Kw::Await) => return Err(self.keyword_construct("`await` expressions")),
            _ => return Err(self.unexpected("an expression")),
        };
        self.bump();
        self.node(kind, start)
    }

    /// `()`, `(e)`, `(a,)`, `(a, b)`, `(x for x in s)`.
    fn paren(&mut self) -> PResult<Expr> {
        let start = self.start();
        self.bump();
        if self.eat_op(")") {
            return self.node(ExprKind::Tuple(Vec::new()), start);
        }
        let first = self.expression()?;
        if self.is_kw(Kw::For) || self.is_kw(Kw::Async) {
            let clauses = self.comp_clauses()?;
            self.expect_op(")", "`)` to close the generator expression")?;
            return self.node(
                ExprKind::Comprehension {
                    kind: CompKind::Generator,
                    elt: Box::new(first),
                    clauses,
                },
                start,
            );
        }
        if !self.is_op(",") {
            self.expect_op(")", "`)`")?;
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_op(",") {
            if self.is_op(")") {
                break;
            }
            items.push(self.expression()?);
        }
        self.expect_op(")", "`,` or `)` in the tuple")?;
        self.node(ExprKind::Tuple(items), start)
    }

    /// `[a, b]`, `[x for x in s]`.
    fn list(&mut self) -> PResult<Expr> {
        let start = self.start();
        self.bump();
        if self.eat_op("]") {
            return self.node(ExprKind::List(Vec::new()), start);
        }
        let first = self.expression()?;
        if self.is_kw(Kw::For) || self.is_kw(Kw::Async) {
            let clauses = self.comp_clauses()?;
            self.expect_op("]", "`]` to close the list comprehension")?;
            return self.node(
                ExprKind::Comprehension {
                    kind: CompKind::List,
                    elt: Box::new(first),
                    clauses,
                },
                start,
            );
        }
        let items = self.rest_of_display(first, "]", "`,` or `]` in the list")?;
        self.node(ExprKind::List(items), start)
    }

    /// `{a, b}`, `{x for x in s}`; dict displays and comprehensions are parsed to be rejected.
    fn brace(&mut self) -> PResult<Expr> {
        let start = self.start();
        self.bump();
        if self.eat_op("}") {
            return Err(self.dict_error(start, false));
        }
        if self.is_op("**") {
            return self.dict_rest(start);
        }
        let first = self.expression()?;
        if self.is_op(":") {
            return self.dict_rest(start);
        }
        if self.is_kw(Kw::For) || self.is_kw(Kw::Async) {
            let clauses = self.comp_clauses()?;
            self.expect_op("}", "`}` to close the set comprehension")?;
            return self.node(
                ExprKind::Comprehension {
                    kind: CompKind::Set,
                    elt: Box::new(first),
                    clauses,
                },
                start,
            );
        }
        let items = self.rest_of_display(first, "}", "`,` or `}` in the set")?;
        self.node(ExprKind::Set(items), start)
    }

    fn rest_of_display(&mut self, first: Expr, close: &str, expected: &str) -> PResult<Vec<Expr>> {
        let mut items = vec![first];
        while self.eat_op(",") {
            if self.is_op(close) {
                break;
            }
            items.push(self.expression()?);
        }
        self.expect_op(close, expected)?;
        Ok(items)
    }

    /// Parses the rest of a dict display or comprehension (the first key, if any, is consumed;
    /// `self` is on its `:` or on a `**`), only to reject it with a span over all of it.
    fn dict_rest(&mut self, start: usize) -> PResult<Expr> {
        let mut first = true;
        loop {
            if self.eat_op("**") {
                self.sum()?;
            } else {
                if !first {
                    self.expression()?;
                }
                self.expect_op(":", "`:` in the dict display")?;
                self.expression()?;
            }
            if first && (self.is_kw(Kw::For) || self.is_kw(Kw::Async)) {
                self.comp_clauses()?;
                self.expect_op("}", "`}` to close the dict comprehension")?;
                return Err(self.dict_error(start, true));
            }
            first = false;
            if !self.eat_op(",") || self.is_op("}") {
                break;
            }
        }
        self.expect_op("}", "`,` or `}` in the dict display")?;
        Err(self.dict_error(start, false))
    }

    fn dict_error(&self, start: usize, comprehension: bool) -> FormulaError {
        let what = if comprehension {
            "dict comprehensions are not supported in formulas"
        } else {
            "dict displays are not supported in formulas (`{}` is an empty dict; use `set()` \
             for an empty set)"
        };
        FormulaError::new(start..self.prev_end, what)
    }

    /// One or more `for target in iter (if cond)*` clauses.
    fn comp_clauses(&mut self) -> PResult<Vec<CompClause>> {
        let mut clauses = Vec::new();
        loop {
            let start = self.start();
            if self.is_kw(Kw::Async) {
                return Err(FormulaError::new(
                    self.peek_span(),
                    "asynchronous comprehensions (`async for`) are not supported in formulas",
                ));
            }
            if !self.is_kw(Kw::For) {
                return Ok(clauses);
            }
            if clauses.len() == MAX_FOR_CLAUSES {
                return Err(FormulaError::new(
                    self.peek_span(),
                    format!(
                        "a comprehension may have at most {MAX_FOR_CLAUSES} `for` clauses; this is clause {}",
                        MAX_FOR_CLAUSES + 1
                    ),
                ));
            }
            self.bump();
            let target = self.target()?;
            if !self.eat_kw(Kw::In) {
                return Err(self.unexpected("`in` after the comprehension target"));
            }
            let iter = self.disjunction()?;
            let mut ifs = Vec::new();
            while self.eat_kw(Kw::If) {
                ifs.push(self.disjunction()?);
            }
            clauses.push(CompClause {
                target,
                iter,
                ifs,
                span: start..self.prev_end,
            });
        }
    }

    /// A comprehension target: `x`, `a, b`, `(a, b)`, `(a,)`.
    fn target(&mut self) -> PResult<Target> {
        let start = self.start();
        if self.eat_op("(") {
            let mut names = Vec::new();
            let mut trailing_comma = false;
            while !self.is_op(")") {
                names.push(self.target_name()?);
                trailing_comma = self.eat_op(",");
                if !trailing_comma {
                    break;
                }
            }
            self.expect_op(")", "`,` or `)` in the comprehension target")?;
            if names.is_empty() {
                return Err(FormulaError::new(
                    start..self.prev_end,
                    "a comprehension target must be a name or a tuple of names",
                ));
            }
            if names.len() == 1 && !trailing_comma {
                return Ok(Target::Name(names.remove(0)));
            }
            return Ok(Target::Tuple(names, start..self.prev_end));
        }
        let first = self.target_name()?;
        if !self.is_op(",") {
            return Ok(Target::Name(first));
        }
        let mut names = vec![first];
        while self.eat_op(",") {
            if self.is_kw(Kw::In) {
                break;
            }
            names.push(self.target_name()?);
        }
        Ok(Target::Tuple(names, start..self.prev_end))
    }

    fn target_name(&mut self) -> PResult<TargetName> {
        match self.peek().clone() {
            Tok::Name(name) => {
                let span = self.bump().span;
                Ok(TargetName { name, span })
            }
            Tok::Op("(") => Err(FormulaError::new(
                self.peek_span(),
                "nested tuple targets are not supported in comprehensions; use a tuple of names",
            )),
            Tok::Op("*") => Err(FormulaError::new(
                self.peek_span(),
                "starred targets (`*rest`) are not supported in comprehensions",
            )),
            Tok::Error(_) => Err(self.unexpected("a name")),
            _ => Err(FormulaError::new(
                self.peek_span(),
                format!(
                    "a comprehension target must be a name or a tuple of names, found {}",
                    self.peek().describe()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses and prints fully parenthesised.
    fn p(src: &str) -> String {
        match parse(src) {
            Ok(e) => e.to_string(),
            Err(e) => panic!("{src:?} failed to parse: {} at {:?}", e.message, e.span),
        }
    }

    fn err(src: &str) -> FormulaError {
        match parse(src) {
            Ok(e) => panic!("{src:?} parsed as {e}"),
            Err(e) => e,
        }
    }

    /// Asserts an error whose message contains `needle` and whose span covers `spanned`.
    fn rejects(src: &str, needle: &str, spanned: &str) {
        let e = err(src);
        assert!(
            e.message.contains(needle),
            "{src:?}: message {:?} lacks {needle:?}",
            e.message
        );
        assert_eq!(
            &src[e.span.clone()],
            spanned,
            "{src:?}: wrong span {:?}",
            e.span
        );
    }

    #[test]
    fn literals() {
        assert_eq!(p("42"), "42");
        assert_eq!(p("1_000"), "1000");
        assert_eq!(p("0xff"), "255");
        assert_eq!(p("1.0e-5"), "1e-5");
        assert_eq!(p(".5"), "0.5");
        assert_eq!(p("1."), "1.0");
        assert_eq!(p("'tanh'"), "\"tanh\"");
        assert_eq!(p("\"mean\""), "\"mean\"");
        assert_eq!(p("'a' \"b\""), "\"ab\"");
        assert_eq!(p("True"), "True");
        assert_eq!(p("False"), "False");
        assert_eq!(p("None"), "None");
    }

    #[test]
    fn displays() {
        assert_eq!(p("(a, b)"), "(a, b)");
        assert_eq!(p("(a,)"), "(a,)");
        assert_eq!(p("()"), "()");
        assert_eq!(p("(a)"), "a");
        assert_eq!(p("a, b"), "(a, b)");
        assert_eq!(p("a,"), "(a,)");
        assert_eq!(p("[a, b,]"), "[a, b]");
        assert_eq!(p("[]"), "[]");
        assert_eq!(p("{a, b}"), "{a, b}");
        assert_eq!(p("{a}"), "{a}");
        assert_eq!(p("((a, b), [c])"), "((a, b), [c])");
    }

    #[test]
    fn primaries() {
        assert_eq!(p("x.shape"), "(x.shape)");
        assert_eq!(p("x.shape[0]"), "((x.shape)[0])");
        assert_eq!(p("s[a:b]"), "(s[a:b])");
        assert_eq!(p("s[a:b:c]"), "(s[a:b:c])");
        assert_eq!(p("s[:-1]"), "(s[:(-1)])");
        assert_eq!(p("s[::2]"), "(s[::2])");
        assert_eq!(p("s[:]"), "(s[:])");
        assert_eq!(p("s[1:]"), "(s[1:])");
        assert_eq!(p("s[a, b]"), "(s[a, b])");
        assert_eq!(p("s[(a, b)]"), "(s[a, b])");
        assert_eq!(p("s[()]"), "(s[()])");
        assert_eq!(p("s[a:b, c]"), "(s[a:b, c])");
        assert_eq!(p("s[a,]"), "(s[a,])");
        assert_eq!(p("(1).real"), "((1).real)");
        assert_eq!(p("f()"), "(f())");
        assert_eq!(p("f(a, b,)"), "(f(a, b))");
        assert_eq!(p("f(a)(b)[c].d"), "((((f(a))(b))[c]).d)");
        assert_eq!(p("product(x for x in s)"), "(product((x for x in s)))");
        assert_eq!(p("f((x for x in s), 1)"), "(f((x for x in s), 1))");
    }

    #[test]
    fn comprehensions() {
        assert_eq!(p("[x for x in s]"), "[x for x in s]");
        assert_eq!(p("{x for x in s if x}"), "{x for x in s if x}");
        assert_eq!(p("(x for x in s)"), "(x for x in s)");
        assert_eq!(
            p("[a * b for a, b in pairs if a if b for c in range(a)]"),
            "[(a * b) for (a, b) in pairs if a if b for c in (range(a))]"
        );
        assert_eq!(p("[a for (a, b) in s]"), "[a for (a, b) in s]");
        assert_eq!(p("[a for (a,) in s]"), "[a for (a,) in s]");
        assert_eq!(p("[a for (a) in s]"), "[a for a in s]");
        assert_eq!(
            p("[x for x in a or b if not x]"),
            "[x for x in (a or b) if (not x)]"
        );
        assert_eq!(
            p("[[y for y in x] for x in s]"),
            "[[y for y in x] for x in s]"
        );
    }

    #[test]
    fn operators_and_precedence() {
        assert_eq!(p("a + b * c"), "(a + (b * c))");
        // A chain of one level is one flat node; parentheses make a nested one.
        assert_eq!(p("a - b - c"), "(a - b - c)");
        assert_eq!(p("(a - b) - c"), "((a - b) - c)");
        assert_eq!(p("a / b // c % d"), "(a / b // c % d)");
        assert_eq!(p("a + b * c * d - e"), "(a + (b * c * d) - e)");
        assert_eq!(p("-2**2"), "(-(2 ** 2))");
        assert_eq!(p("2**-1"), "(2 ** (-1))");
        assert_eq!(p("2**3**2"), "(2 ** 3 ** 2)");
        assert_eq!(p("2**(3**2)"), "(2 ** (3 ** 2))");
        assert_eq!(p("2 ** -3 ** 2"), "(2 ** (-(3 ** 2)))");
        assert_eq!(p("a ** b ** -c ** d"), "(a ** b ** (-(c ** d)))");
        assert_eq!(p("-a * b"), "((-a) * b)");
        assert_eq!(p("+-a"), "(+(-a))");
        assert_eq!(p("a ** b * c"), "((a ** b) * c)");
        assert_eq!(p("not a == b"), "(not (a == b))");
        assert_eq!(p("not not a"), "(not (not a))");
        assert_eq!(p("a and b or c"), "((a and b) or c)");
        assert_eq!(p("a or b or c"), "(a or b or c)");
        assert_eq!(p("a and b and not c or d"), "((a and b and (not c)) or d)");
        assert_eq!(p("a or b and c"), "(a or (b and c))");
        assert_eq!(p("not a and b"), "((not a) and b)");
        assert_eq!(p("a < b + 1"), "(a < (b + 1))");
        assert_eq!(p("-n <= d < n"), "((-n) <= d < n)");
        assert_eq!(
            p("a < b <= c > d >= e == f != g"),
            "(a < b <= c > d >= e == f != g)"
        );
        assert_eq!(p("a in b"), "(a in b)");
        assert_eq!(p("a not in b"), "(a not in b)");
        assert_eq!(p("a is b"), "(a is b)");
        assert_eq!(p("a is not None"), "(a is not None)");
        assert_eq!(p("a if c else b"), "(a if c else b)");
        assert_eq!(
            p("a if b else c if d else e"),
            "(a if b else (c if d else e))"
        );
        assert_eq!(
            p("a or b if c and d else e"),
            "((a or b) if (c and d) else e)"
        );
        assert_eq!(p("(a + b) * c"), "((a + b) * c)");
        assert_eq!(p("x.shape[i] ** 2"), "(((x.shape)[i]) ** 2)");
    }

    #[test]
    fn spans() {
        let src = "(a + b) * c.shape[0]";
        let e = parse(src).unwrap();
        assert_eq!(e.span, 0..src.len());
        let ExprKind::Binary { left, rest } = &e.kind else {
            panic!("{e}")
        };
        let right = &rest[0].right;
        assert_eq!(&src[rest[0].op_span.clone()], "*");
        // Parentheses leave no node; the inner node keeps its own span.
        assert_eq!(&src[left.span.clone()], "a + b");
        assert_eq!(&src[right.span.clone()], "c.shape[0]");
        let ExprKind::Subscript { value, index } = &right.kind else {
            panic!()
        };
        assert_eq!(&src[value.span.clone()], "c.shape");
        assert_eq!(&src[index.span.clone()], "0");
        let ExprKind::Attribute { attr_span, .. } = &value.kind else {
            panic!()
        };
        assert_eq!(&src[attr_span.clone()], "shape");

        let src = "a not in  b";
        let ExprKind::Compare { rest, .. } = parse(src).unwrap().kind else {
            panic!()
        };
        assert_eq!(&src[rest[0].op_span.clone()], "not in");

        let src = "f(x for x in s)";
        let ExprKind::Call { args, .. } = parse(src).unwrap().kind else {
            panic!()
        };
        assert_eq!(&src[args[0].span.clone()], "x for x in s");
    }

    #[test]
    fn rejected_constructs_are_named() {
        rejects("lambda x: x + 1", "lambda", "lambda x: x + 1");
        rejects("1 + (lambda: 2)", "lambda", "lambda: 2");
        rejects("(y := 3) + 1", "assignment expressions (`:=`)", "y := 3");
        rejects("f(*a)", "starred arguments", "*a");
        rejects("f(**k)", "double-starred arguments", "**k");
        rejects("[*a, b]", "starred expressions", "*a");
        rejects("f(a, dim=1)", "keyword arguments", "dim=1");
        rejects("{'a': 1, 'b': 2}", "dict displays", "{'a': 1, 'b': 2}");
        rejects("{}", "dict displays", "{}");
        rejects("{**a}", "dict displays", "{**a}");
        rejects(
            "{k: v for k, v in s}",
            "dict comprehensions",
            "{k: v for k, v in s}",
        );
        rejects("f'{x}' + 1", "f-strings", "f'{x}'");
        rejects("await x", "`await` expressions", "await x");
        rejects("(yield x)", "`yield` expressions", "yield x");
        rejects("a | b", "bitwise or operator `|`", "|");
        rejects("a ^ b", "bitwise xor operator `^`", "^");
        rejects("a & b", "bitwise and operator `&`", "&");
        rejects("a << 2", "shift operator `<<`", "<<");
        rejects("a >> 2", "shift operator `>>`", ">>");
        rejects("~a", "bitwise not operator `~`", "~");
        rejects("a @ b", "matrix multiplication operator `@`", "@");
        rejects("a * b @ c", "matrix multiplication operator `@`", "@");
        rejects("...", "Ellipsis", "...");
        rejects(
            "[x async for x in s]",
            "asynchronous comprehensions",
            "async",
        );
        rejects("b'x'", "bytes literals", "b'x'");
        rejects("1j", "imaginary", "1j");
    }

    #[test]
    fn syntax_errors() {
        rejects("", "empty", "");
        rejects("   ", "empty", "   ");
        rejects(
            "a +",
            "expected an expression, found the end of the formula",
            "",
        );
        rejects("(a", "expected `)`", "");
        rejects(
            "a b",
            "expected an operator or the end of the formula, found name `b`",
            "b",
        );
        rejects("a if b", "`else`", "");
        rejects("x = 1", "assignment (`=`)", "=");
        rejects("x += 1", "augmented assignment", "+=");
        rejects("a; b", "single expression", ";");
        rejects("def", "starts a statement", "def");
        rejects("a == not b", "found keyword `not`", "not");
        rejects(
            "f(x for x in s, 1)",
            "must be parenthesised",
            "x for x in s",
        );
        rejects(
            "f(1, x for x in s)",
            "must be parenthesised",
            "x for x in s",
        );
        rejects("[x for x in a if b else c]", "found keyword `else`", "else");
        rejects("[x for (a, (b, c)) in s]", "nested tuple targets", "(");
        rejects("[x for *a in s]", "starred targets", "*");
        rejects("[x for 1 in s]", "found a number", "1");
        rejects(
            "[x for x.y in s]",
            "`in` after the comprehension target",
            ".",
        );
        rejects("x.1", "found a number", ".1");
        rejects(
            "x.if",
            "expected an attribute name after `.`, found keyword `if`",
            "if",
        );
        rejects("x[]", "expected an expression", "]");
        rejects("a $ b", "unexpected character `$`", "$");
        rejects("a + 'b", "unterminated string", "'b");
    }

    #[test]
    fn first_error_wins() {
        // The syntax error comes before the lexical one.
        rejects("a b $", "found name `b`", "b");
        // The lexical error comes first.
        rejects("$ a b", "unexpected character `$`", "$");
        rejects("[lambda: 1, a | b]", "lambda", "lambda: 1");
    }

    #[test]
    fn chains_of_any_length_are_one_node() {
        for (op, printed) in [
            ("+", "+"),
            ("-", "-"),
            ("*", "*"),
            ("//", "//"),
            ("**", "**"),
            ("<", "<"),
            ("and", "and"),
            ("or", "or"),
        ] {
            let chain = vec!["1"; 5_000].join(&format!(" {op} "));
            let e = parse(&chain).unwrap_or_else(|e| panic!("{op}: {}", e.message));
            assert_eq!(e.depth(), 2, "{op}");
            assert_eq!(e.children().len(), 5_000, "{op}");
            assert_eq!(e.span, 0..chain.len());
            let s = e.to_string();
            assert_eq!(s.matches(printed).count(), 4_999, "{op}");
        }
        // The inputs: a power chain of 4000 operands and a comparison chain of 1000
        // links.
        assert!(parse(&vec!["1"; 4_000].join(" ** ")).is_ok());
        assert!(parse(&vec!["x"; 1_001].join(" < ")).is_ok());
        // A flat sum of 100 terms or more is not "nested too deeply".
        assert!(parse(&vec!["M"; 100].join(" + ")).is_ok());
        assert!(parse(&vec!["M * 2"; 1_000].join(" + ")).is_ok());
    }

    #[test]
    fn comprehension_clauses_are_bounded() {
        let clauses = |n: usize| {
            format!(
                "[0 {}]",
                (0..n)
                    .map(|i| format!("for i{i} in s"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        };
        assert!(parse(&clauses(MAX_FOR_CLAUSES)).is_ok());
        let src = clauses(1_000);
        let e = err(&src);
        assert_eq!(
            e.message,
            "a comprehension may have at most 16 `for` clauses; this is clause 17"
        );
        let seventeenth = src.match_indices("for").nth(MAX_FOR_CLAUSES).unwrap().0;
        assert_eq!(e.span, seventeenth..seventeenth + 3);
        // Each clause is a level: clauses of nested comprehensions add up.
        let nest = |n: usize| {
            (0..n).fold("0".to_string(), |e, _| {
                format!("[{e} for a in s for b in s]")
            })
        };
        // Each level: the comprehension, plus one per clause.
        assert_eq!(parse(&nest(33)).unwrap().depth(), 1 + 33 * 3);
        assert!(err(&nest(34)).message.contains("nested too deeply"));
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}x{}", "(".repeat(10_000), ")".repeat(10_000));
        rejects(&deep, "nested too deeply", "(");
        let unary = format!("{}1", "-".repeat(10_000));
        assert!(err(&unary).message.contains("nested too deeply"));
        let nots = format!("{}1", "not ".repeat(10_000));
        assert!(err(&nots).message.contains("nested too deeply"));
        let calls = format!("f{}", "(1)".repeat(5_000));
        assert!(err(&calls).message.contains("nested too deeply"));
        // Real formulas are far below the limits.
        let ok = format!("{}x{}", "(".repeat(60), ")".repeat(60));
        assert_eq!(p(&ok), "x");
        let ok = format!("{}x{}", "[".repeat(60), "]".repeat(60));
        assert!(parse(&ok).is_ok());
        let ok = vec!["1"; 95].join(" + ");
        assert!(parse(&ok).is_ok());
        // Alternating levels nest: `1 + 1 * (1 + 1 * (...))` is as deep as it looks.
        let alternating = format!("{}1{}", "1 + 1 * (".repeat(200), ")".repeat(200));
        assert!(err(&alternating).message.contains("nested too deeply"));
    }

    #[test]
    fn utf8_is_safe() {
        let e = err("é + 1");
        assert_eq!(e.span, 0..2);
        let e = err("'é' é");
        assert_eq!(e.span, 5..7);
        assert_eq!(p("'é' + 'ü'"), "(\"é\" + \"ü\")");
    }
}
