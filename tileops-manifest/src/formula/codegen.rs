//! Formula → Rust: one checked expression becomes one Rust expression of type
//! `::tileops::roofline::Value`, to be placed where `?` returns an
//! `::tileops::roofline::EvalError` (the body of a closure returning
//! `Result<Value, EvalError>`).
//!
//! Conventions (shared with the expansion pass, which writes the binding block):
//! - a formula name `n` is the Rust local `py_n`, a `Value`, except a tensor input, whose local
//!   `py_n` is an `InputRef` (`::tileops::__private_v0_1::rt::input`);
//! - comprehension variables are `py_n` locals of the loops generated here, so they shadow like
//!   Python's;
//! - scratch locals are `__tileops_*`, never a `py_` name.
//!
//! Operands are evaluated left to right, `and`/`or`, conditionals and comparison chains
//! short-circuit, each operand of a chain is evaluated once — all as in Python. The generated code
//! calls only the runtime API of `tileops/src/roofline/CONTRACT.md`. Codegen never panics: a tree
//! the checker would have refused still yields code that compiles and returns an `EvalError`
//! where Python would raise.

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::quote;

use super::Scope;
use super::ast::{
    BinLink, BinOp, BoolOpKind, CmpOp, CompClause, CompKind, Comparator, Expr, ExprKind, Target,
    UnaryOp,
};
use super::check::{Binding, resolve};
use super::types::{Infer, IntIter, Ty, Types};

pub(crate) fn codegen(expr: &Expr, scope: &Scope) -> TokenStream {
    let code = Gen {
        scope,
        types: None,
        locals: Vec::new(),
        local_tys: Vec::new(),
        labels: 0,
    }
    .value(expr);
    with_budget(expr, code)
}

/// Like [`codegen`], with the typed names of `types`: the parts whose types are known compute on
/// machine values. Returns the expression and its Rust type: `i128` for [`Ty::Int`], `bool` for
/// [`Ty::Bool`], `Value` otherwise (a tuple of dims is given as its `Value`, never as a view).
pub(crate) fn codegen_typed(expr: &Expr, scope: &Scope, types: &Types) -> (TokenStream, Ty) {
    let mut g = Gen {
        scope,
        types: Some(types),
        locals: Vec::new(),
        local_tys: Vec::new(),
        labels: 0,
    };
    let (code, ty) = match g.ty(expr) {
        ty @ (Ty::Int | Ty::Bool) => (g.typed(expr, ty), ty),
        Ty::Dims | Ty::IntList | Ty::IntTuple | Ty::Value | Ty::None => (g.value(expr), Ty::Value),
    };
    (with_budget(expr, code), ty)
}

fn with_budget(expr: &Expr, code: TokenStream) -> TokenStream {
    if !has_comprehension(expr) {
        return code;
    }
    // Comprehensions multiply work (a loop per clause, nested ones inside each other), so a
    // formula with one runs under a work budget that every loop step and every built item
    // charges; exhausting it is an evaluation error, not a hang or an abort on allocation.
    let rt = rt();
    quote! {{
        let __tileops_budget = #rt::Budget::enter();
        #code
    }}
}

/// Whether `e` mentions any of `names` (anywhere, shadowed or not: a cautious answer).
fn reads_any(e: &Expr, names: &[&str]) -> bool {
    matches!(&e.kind, ExprKind::Name(n) if names.contains(&n.as_str()))
        || match &e.kind {
            ExprKind::Comprehension { clauses, .. } => clauses.iter().any(|c| {
                c.target
                    .names()
                    .iter()
                    .any(|t| names.contains(&t.name.as_str()))
            }),
            _ => false,
        }
        || e.children().into_iter().any(|c| reads_any(c, names))
}

/// Whether the tree holds a comprehension. The parser bounds the depth, so recursing is safe.
fn has_comprehension(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Comprehension { .. })
        || e.children().into_iter().any(has_comprehension)
}

/// `py_<name>` for a name the lexer could have produced; `None` otherwise (a hand-built tree).
pub(crate) fn py_ident(name: &str) -> Option<Ident> {
    let mut bytes = name.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    if !first_ok || !bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    // `py_` + an ASCII identifier is always a valid, non-keyword Rust identifier.
    Some(Ident::new(&format!("py_{name}"), Span::call_site()))
}

fn value_path() -> TokenStream {
    quote!(::tileops::roofline::Value)
}

fn rt() -> TokenStream {
    quote!(::tileops::__private_v0_1::rt)
}

/// The Rust type of a typed part.
fn rust_ty(ty: Ty) -> TokenStream {
    match ty {
        Ty::Int => quote!(::core::primitive::i128),
        Ty::Bool => quote!(::core::primitive::bool),
        Ty::Dims => {
            let rt = rt();
            quote!(#rt::Dims<'_>)
        }
        Ty::IntList | Ty::IntTuple => {
            let rt = rt();
            quote!(#rt::Ints<'_>)
        }
        Ty::Value => value_path(),
        Ty::None => quote!(()),
    }
}

/// An expression that fails at run time with `message`, of the Rust type of `ty`: what a tree
/// the checker would have refused (a hand-built one) still compiles to.
fn raise_typed(ty: Ty, message: &str) -> TokenStream {
    let t = rust_ty(ty);
    let lit = Literal::string(message);
    quote! {
        ::core::result::Result::<#t, ::tileops::roofline::EvalError>::Err(
            ::tileops::roofline::EvalError::new(::std::string::String::from(#lit))
        )?
    }
}

/// An expression that fails at run time with `message`, typed as a set of ints.
fn raise_int_set(message: &str) -> TokenStream {
    let rt = rt();
    let lit = Literal::string(message);
    quote! {
        ::core::result::Result::<#rt::IntSetOf, ::tileops::roofline::EvalError>::Err(
            ::tileops::roofline::EvalError::new(::std::string::String::from(#lit))
        )?
    }
}

/// An expression that fails at run time with `message`, typed as a `Value`.
fn raise(message: &str) -> TokenStream {
    let v = value_path();
    let lit = Literal::string(message);
    quote! {
        ::core::result::Result::<#v, ::tileops::roofline::EvalError>::Err(
            ::tileops::roofline::EvalError::new(::std::string::String::from(#lit))
        )?
    }
}

fn int_literal(v: i128) -> TokenStream {
    if v == i128::MIN {
        quote!(::core::primitive::i128::MIN)
    } else if v < 0 {
        let lit = Literal::i128_suffixed(-v);
        quote!(-#lit)
    } else {
        let lit = Literal::i128_suffixed(v);
        quote!(#lit)
    }
}

/// The exact bits of a float, as a hex `u64` literal.
fn float_bits_literal(v: f64) -> TokenStream {
    let bits = v.to_bits();
    match format!("0x{bits:016x}u64").parse::<Literal>() {
        Ok(lit) => quote!(#lit),
        Err(_) => {
            let lit = Literal::u64_suffixed(bits);
            quote!(#lit)
        }
    }
}

fn binop_fn(op: BinOp) -> Ident {
    let name = match op {
        BinOp::Add => "add",
        BinOp::Sub => "sub",
        BinOp::Mul => "mul",
        BinOp::Div => "truediv",
        BinOp::FloorDiv => "floordiv",
        BinOp::Mod => "modulo",
        BinOp::Pow => "pow",
    };
    Ident::new(name, Span::call_site())
}

fn cmp_op(op: CmpOp) -> TokenStream {
    let variant = match op {
        CmpOp::Lt => "Lt",
        CmpOp::Le => "Le",
        CmpOp::Gt => "Gt",
        CmpOp::Ge => "Ge",
        CmpOp::Eq => "Eq",
        CmpOp::Ne => "Ne",
        CmpOp::In => "In",
        CmpOp::NotIn => "NotIn",
        CmpOp::Is => "Is",
        CmpOp::IsNot => "IsNot",
    };
    let variant = Ident::new(variant, Span::call_site());
    let rt = rt();
    quote!(#rt::CmpOp::#variant)
}

fn py_type(helper: &str) -> Option<TokenStream> {
    let variant = match helper {
        "int" => "Int",
        "float" => "Float",
        "bool" => "Bool",
        "tuple" => "Tuple",
        "list" => "List",
        "set" => "Set",
        _ => return None,
    };
    let variant = Ident::new(variant, Span::call_site());
    Some(quote!(::tileops::roofline::PyType::#variant))
}

struct Gen<'a> {
    scope: &'a Scope,
    /// The typed names; `None` generates every part on the value runtime.
    types: Option<&'a Types>,
    /// Comprehension variables in scope, innermost last.
    locals: Vec<String>,
    /// Their types, by position: an `i128` local for a loop over a range of ints or a shape.
    local_tys: Vec<Ty>,
    /// Labeled blocks made so far: each gets its own label, so nested ones never shadow.
    labels: usize,
}

/// The helpers that consume an iterable item by item: a lone generator argument streams into
/// them instead of being built as a list first.
const STREAMING_HELPERS: &[&str] = &["product", "sum", "min", "max", "set", "tuple", "list"];

/// The most operands (or items) one generated function evaluates. A longer chain or display is
/// cut into chunks of this many, each in a closure of its own: an unoptimised build gives every
/// temporary of a function its own stack slot, so a 5,000-term sum in one function would need a
/// stack frame of megabytes, and a chunk needs a few kilobytes.
const CHUNK: usize = 32;

/// The type of a chunk closure's result.
fn chunk_result(ok: TokenStream) -> TokenStream {
    quote!(::core::result::Result<#ok, ::tileops::roofline::EvalError>)
}

impl Gen<'_> {
    fn label(&mut self) -> syn::Lifetime {
        self.labels += 1;
        syn::Lifetime::new(&format!("'__tileops_b{}", self.labels), Span::call_site())
    }

    fn resolve(&self, name: &str) -> Binding {
        resolve(self.scope, &self.locals, name)
    }

    /// The types pass over this formula's scope, types and comprehension variables. Only
    /// called while generating typed code (`self.types` set).
    fn infer(&self) -> Infer<'_> {
        static NO_TYPES: std::sync::OnceLock<Types> = std::sync::OnceLock::new();
        Infer {
            scope: self.scope,
            types: self
                .types
                .unwrap_or_else(|| NO_TYPES.get_or_init(Types::new)),
            locals: &self.locals,
            local_tys: &self.local_tys,
        }
    }

    /// The type of `e` here; every part is a value when generating without types.
    fn ty(&self, e: &Expr) -> Ty {
        match self.types {
            Some(_) => self.infer().ty(e),
            None => Ty::Value,
        }
    }

    /// The truth of a test the types decide (never when generating without types).
    fn static_truth(&self, e: &Expr) -> Option<bool> {
        self.types?;
        self.infer().static_truth(e)
    }

    fn name_ty(&self, name: &str) -> Ty {
        self.ty(&Expr::new(ExprKind::Name(name.to_owned()), 0..0))
    }

    /// `bool(e)` as a Rust `bool`: typed parts test directly, values through `truthy`.
    fn test(&mut self, e: &Expr) -> TokenStream {
        let rt = rt();
        if let Some(truth) = self.static_truth(e) {
            return quote!(#truth);
        }
        match self.ty(e) {
            Ty::None => quote!(false),
            Ty::Bool => self.typed(e, Ty::Bool),
            Ty::Int => {
                let code = self.typed(e, Ty::Int);
                quote!((#code != 0))
            }
            ty @ (Ty::Dims | Ty::IntList | Ty::IntTuple) => {
                let code = self.typed(e, ty);
                quote!(!#code.is_empty())
            }
            Ty::Value => {
                let t = self.operand(e);
                quote!(#rt::truthy(&#t)?)
            }
        }
    }

    /// An expression of the Rust type of `ty` (`i128`, `bool`, `Dims`) for a part [`Self::ty`]
    /// gave that type. Python's order of evaluation and errors hold as on the runtime: operands
    /// left to right, each operator's error (the runtime's own functions) after its operands.
    fn typed(&mut self, e: &Expr, ty: Ty) -> TokenStream {
        let rt = rt();
        match &e.kind {
            ExprKind::Int(i) => int_literal(*i),
            ExprKind::Bool(b) => quote!(#b),
            ExprKind::Name(_) if ty == Ty::None => quote!(()),
            ExprKind::Name(name) => match py_ident(name) {
                Some(ident) => quote!(#ident),
                None => raise_typed(ty, &format!("NameError: name '{name}' is not defined")),
            },
            // A test the types decide: nothing to evaluate.
            ExprKind::Call { .. } | ExprKind::Compare { .. }
                if ty == Ty::Bool && self.static_truth(e).is_some() =>
            {
                let truth = self.static_truth(e).unwrap_or_default();
                quote!(#truth)
            }
            ExprKind::Attribute { value, attr, .. } => match self.input_local(value) {
                Some((ident, name)) => {
                    let name = Literal::string(name);
                    if attr == "shape" {
                        quote!(#ident.dims(#name)?)
                    } else {
                        quote!(#ident.rank(#name)?)
                    }
                }
                None => raise_typed(ty, "AttributeError: not a tensor input"),
            },
            ExprKind::Subscript { value, index } => {
                let base = self.typed(value, Ty::Dims);
                match &index.kind {
                    ExprKind::Slice { lower, upper, step } => {
                        let parts = [lower, upper, step];
                        let typed = parts.iter().all(|p| match p {
                            Some(p) => matches!(p.kind, ExprKind::NoneLit) || self.ty(p) == Ty::Int,
                            None => true,
                        });
                        let parts: Vec<TokenStream> = parts
                            .into_iter()
                            .map(|part| match part {
                                Some(p) if !matches!(p.kind, ExprKind::NoneLit) && typed => {
                                    let p = self.typed(p, Ty::Int);
                                    quote!(::core::option::Option::Some(#p))
                                }
                                Some(p) if !typed => {
                                    let p = self.operand(p);
                                    quote!(::core::option::Option::Some::<&::tileops::roofline::Value>(&#p))
                                }
                                _ => quote!(::core::option::Option::None),
                            })
                            .collect();
                        if typed {
                            quote!(#base.slice(#(#parts),*)?)
                        } else {
                            quote!(#base.slice_values(#(#parts),*)?)
                        }
                    }
                    _ if self.ty(index) == Ty::Int => {
                        let i = self.typed(index, Ty::Int);
                        quote!(#base.index(#i)?)
                    }
                    _ => {
                        let i = self.operand(index);
                        quote!(#base.index_value_int(&#i)?)
                    }
                }
            }
            ExprKind::Call { func, args } => {
                let helper = match &func.kind {
                    ExprKind::Name(name) => match self.resolve(name) {
                        Binding::Helper(h) => h,
                        _ => "",
                    },
                    _ => "",
                };
                match (helper, args.as_slice()) {
                    (
                        "product" | "sum" | "min" | "max",
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
                        ],
                    ) => self.int_fold(helper, elt, clauses),
                    ("product", [a]) => {
                        // A shape's dims, or a list or tuple param's ints.
                        let ty = self.ty(a);
                        let a = self.typed(a, ty);
                        quote!(#a.product()?)
                    }
                    ("sum", [a]) => {
                        let a = self.typed(a, Ty::Dims);
                        quote!(#a.sum()?)
                    }
                    ("len", [a]) if matches!(self.ty(a), Ty::Dims | Ty::IntList | Ty::IntTuple) => {
                        let ty = self.ty(a);
                        let a = self.typed(a, ty);
                        quote!(#a.len())
                    }
                    ("len", [a]) => {
                        let a = self.operand(a);
                        quote!(#rt::len_int(&#a)?)
                    }
                    ("isinstance", [a, class]) => {
                        let names = self.infer().type_names(class).unwrap_or_default();
                        let a = self.operand(a);
                        let types = names.iter().filter_map(|h| py_type(h));
                        quote!(#rt::is_instance(&#a, &[#(#types),*]))
                    }
                    ("abs", [a]) => {
                        let a = self.typed(a, Ty::Int);
                        quote!(#rt::int_abs(#a)?)
                    }
                    ("min" | "max", args) => {
                        let f = Ident::new(&format!("int_{helper}"), Span::call_site());
                        let args: Vec<TokenStream> =
                            args.iter().map(|a| self.typed(a, Ty::Int)).collect();
                        quote!(#rt::#f(&[#(#args),*]))
                    }
                    _ => raise_typed(ty, "TypeError: only helpers can be called"),
                }
            }
            ExprKind::Unary { op, operand } => match (op, ty) {
                (UnaryOp::Neg, _) => {
                    let a = self.typed(operand, Ty::Int);
                    quote!(#rt::int_neg(#a)?)
                }
                (UnaryOp::Pos, _) => self.typed(operand, Ty::Int),
                (UnaryOp::Not, _) => {
                    let a = self.test(operand);
                    quote!((!#a))
                }
            },
            ExprKind::Binary { left, rest } => {
                let int_fn = |op: BinOp| {
                    let name = match op {
                        BinOp::Add => "int_add",
                        BinOp::Sub => "int_sub",
                        BinOp::Mul => "int_mul",
                        BinOp::FloorDiv => "int_floordiv",
                        _ => "int_mod",
                    };
                    Ident::new(name, Span::call_site())
                };
                let a = self.typed(left, Ty::Int);
                let Some((first, others)) = rest.split_first() else {
                    return a;
                };
                let f = int_fn(first.op);
                let b = self.typed(&first.right, Ty::Int);
                let head = quote!(#rt::#f(#a, #b)?);
                if others.is_empty() {
                    return head;
                }
                let links: Vec<TokenStream> = others
                    .iter()
                    .map(|link| {
                        let f = int_fn(link.op);
                        let b = self.typed(&link.right, Ty::Int);
                        quote!(__tileops_acc = #rt::#f(__tileops_acc, #b)?;)
                    })
                    .collect();
                quote! {{
                    let mut __tileops_acc: ::core::primitive::i128 = #head;
                    #(#links)*
                    __tileops_acc
                }}
            }
            ExprKind::BoolOp { op, values } => {
                let values: Vec<TokenStream> =
                    values.iter().map(|v| self.typed(v, Ty::Bool)).collect();
                match op {
                    BoolOpKind::And => quote!((#(#values)&&*)),
                    BoolOpKind::Or => quote!((#(#values)||*)),
                }
            }
            ExprKind::Compare { left, rest } => {
                let Some(c) = rest.first() else {
                    return raise_typed(ty, "SyntaxError: a comparison without operators");
                };
                if let Some(presence) = self.presence_test(left, c.op, &c.right) {
                    return quote!((#presence));
                }
                if matches!(c.op, CmpOp::Is | CmpOp::IsNot) {
                    // `v is None` (either side; the literal has nothing to evaluate).
                    let v = if matches!(c.right.kind, ExprKind::NoneLit) {
                        self.operand(left)
                    } else {
                        self.operand(&c.right)
                    };
                    let not = (c.op == CmpOp::IsNot).then(|| quote!(!));
                    return quote!((#not #rt::is_none(&#v)));
                }
                if matches!(c.op, CmpOp::In | CmpOp::NotIn) {
                    let not = (c.op == CmpOp::NotIn).then(|| quote!(!));
                    let a = self.typed(left, Ty::Int);
                    if self.infer().int_display(&c.right).is_none()
                        && self.infer().range_set_args(&c.right).is_none()
                    {
                        // A set of ints, built (and charged) as the runtime builds it, or a
                        // `set(range(...))` never built.
                        let set = self.int_set(&c.right);
                        return quote!({
                            let __tileops_needle: ::core::primitive::i128 = #a;
                            #not (#set).contains(__tileops_needle)
                        });
                    }
                    if let Some(args) = self.infer().range_set_args(&c.right) {
                        // `set(range(...))`, charged and refused as if built, never built.
                        let args: Vec<TokenStream> =
                            args.iter().map(|i| self.typed(i, Ty::Int)).collect();
                        return quote!({
                            let __tileops_needle: ::core::primitive::i128 = #a;
                            #not #rt::range_set(&[#(#args),*])?.contains(__tileops_needle)
                        });
                    }
                    // An int among a display's ints: Python evaluates the display whole (left to
                    // right, after the needle), then looks. A set display is built (its items
                    // charged), a tuple or list scanned (charged as the runtime's scan is).
                    let shown = self.infer().unfold(&c.right);
                    let set = matches!(shown.kind, ExprKind::Set(_));
                    let items = self.infer().int_display(shown).unwrap_or_default();
                    let items: Vec<TokenStream> =
                        items.iter().map(|i| self.typed(i, Ty::Int)).collect();
                    let n = items.len();
                    let look = if set {
                        quote!(#rt::int_set(__tileops_items)?.contains(__tileops_needle))
                    } else {
                        quote!({
                            #rt::work(#n)?;
                            __tileops_items.contains(&__tileops_needle)
                        })
                    };
                    return quote!({
                        let __tileops_needle: ::core::primitive::i128 = #a;
                        let __tileops_items: [::core::primitive::i128; #n] = [#(#items),*];
                        #not #look
                    });
                }
                let a = self.typed(left, Ty::Int);
                let b = self.typed(&c.right, Ty::Int);
                let op = match c.op {
                    CmpOp::Lt => quote!(<),
                    CmpOp::Le => quote!(<=),
                    CmpOp::Gt => quote!(>),
                    CmpOp::Ge => quote!(>=),
                    CmpOp::Eq => quote!(==),
                    // `!=`; the types pass gives a bool only to these six.
                    _ => quote!(!=),
                };
                quote!((#a #op #b))
            }
            ExprKind::IfExp { body, test, orelse } => match self.static_truth(test) {
                Some(true) => self.typed(body, ty),
                Some(false) => self.typed(orelse, ty),
                None => {
                    let t = self.test(test);
                    let b = self.typed(body, ty);
                    let o = self.typed(orelse, ty);
                    quote!(if #t { #b } else { #o })
                }
            },
            _ => raise_typed(ty, "TypeError: an untyped expression in typed code"),
        }
    }

    /// An expression usable behind `&` as a `&Value`: a plain local for names (no clone),
    /// otherwise the owned value.
    fn operand(&mut self, e: &Expr) -> TokenStream {
        if let ExprKind::Name(name) = &e.kind
            && let Some(ident) = self.value_local(name)
        {
            return quote!(#ident);
        }
        self.value(e)
    }

    /// The `py_` local holding a name's `Value`, when the name is one (a typed name's local
    /// holds an `i128` or a `bool`).
    fn value_local(&self, name: &str) -> Option<Ident> {
        if self.types.is_some() && self.name_ty(name) != Ty::Value {
            return None;
        }
        match self.resolve(name) {
            Binding::Local | Binding::Param | Binding::Var | Binding::Dim | Binding::ElemBytes => {
                py_ident(name)
            }
            _ => None,
        }
    }

    /// An expression of type `Value` (owned).
    fn value(&mut self, e: &Expr) -> TokenStream {
        let v = value_path();
        let rt = rt();
        let ty = self.ty(e);
        if ty != Ty::Value {
            let code = self.typed(e, ty);
            return match ty {
                Ty::Int => quote!(#v::Int(#code)),
                Ty::Bool => quote!(#v::Bool(#code)),
                // Only a name is a `None` (nothing to evaluate).
                Ty::None => quote!(#v::None),
                Ty::IntList => quote!(#code.to_value(false)),
                Ty::IntTuple => quote!(#code.to_value(true)),
                Ty::Dims | Ty::Value => quote!(#code.to_value()),
            };
        }
        match &e.kind {
            ExprKind::Int(i) => {
                let lit = int_literal(*i);
                quote!(#v::Int(#lit))
            }
            ExprKind::Float(f) => {
                let bits = float_bits_literal(*f);
                quote!(#v::Float(::core::primitive::f64::from_bits(#bits)))
            }
            ExprKind::Str(s) => {
                let lit = Literal::string(s);
                quote!(#v::Str(::std::string::String::from(#lit)))
            }
            ExprKind::Bool(b) => quote!(#v::Bool(#b)),
            ExprKind::NoneLit => quote!(#v::None),
            ExprKind::Name(name) => self.name(name),
            ExprKind::Tuple(items) => {
                let items = self.vec(items);
                quote!(#v::Tuple(#items))
            }
            ExprKind::List(items) => {
                let items = self.vec(items);
                quote!(#v::List(#items))
            }
            ExprKind::Set(items) => {
                let items = self.vec(items);
                quote!(#rt::make_set(#items)?)
            }
            ExprKind::Attribute { value, attr, .. } => self.attribute(value, attr),
            ExprKind::Subscript { value, index } => self.subscript(value, index),
            ExprKind::Slice { .. } => raise("TypeError: a slice outside a subscript"),
            ExprKind::Call { func, args } => self.call(func, args),
            ExprKind::Unary { op, operand } => {
                let a = self.operand(operand);
                let f = Ident::new(
                    match op {
                        UnaryOp::Neg => "neg",
                        UnaryOp::Pos => "pos",
                        UnaryOp::Not => "not",
                    },
                    Span::call_site(),
                );
                quote!(#rt::#f(&#a)?)
            }
            ExprKind::Binary { left, rest } => self.binary(left, rest),
            ExprKind::Power(items) => self.power(items),
            ExprKind::BoolOp { op, values } => self.bool_op(*op, values),
            ExprKind::Compare { left, rest } => self.compare(left, rest),
            ExprKind::IfExp { body, test, orelse } => match self.static_truth(test) {
                Some(true) => self.value(body),
                Some(false) => self.value(orelse),
                None => {
                    let t = self.test(test);
                    let b = self.value(body);
                    let o = self.value(orelse);
                    quote!(if #t { #b } else { #o })
                }
            },
            ExprKind::Comprehension { kind, elt, clauses } => {
                self.comprehension(*kind, elt, clauses)
            }
        }
    }

    /// `a + b - c …`: one flat statement per link, evaluated in Python's order (each right
    /// operand after the links before it), so a chain of any length nests no deeper than one.
    fn binary(&mut self, left: &Expr, rest: &[BinLink]) -> TokenStream {
        let v = value_path();
        let rt = rt();
        let Some((first, others)) = rest.split_first() else {
            return self.value(left);
        };
        let a = self.operand(left);
        let b = self.operand(&first.right);
        let f = binop_fn(first.op);
        let head = quote!(#rt::#f(&#a, &#b)?);
        if others.is_empty() {
            return head;
        }
        let mut links: Vec<TokenStream> = Vec::new();
        for chunk in others.chunks(CHUNK) {
            let chunk: Vec<TokenStream> = chunk
                .iter()
                .map(|link| {
                    let f = binop_fn(link.op);
                    let b = self.operand(&link.right);
                    quote!(__tileops_acc = #rt::#f(&__tileops_acc, &#b)?;)
                })
                .collect();
            if others.len() <= CHUNK {
                links = chunk;
                break;
            }
            let ret = chunk_result(v.clone());
            links.push(quote! {
                __tileops_acc = (|mut __tileops_acc: #v| -> #ret {
                    #(#chunk)*
                    ::core::result::Result::Ok(__tileops_acc)
                })(__tileops_acc)?;
            });
        }
        quote! {{
            let mut __tileops_acc: #v = #head;
            #(#links)*
            __tileops_acc
        }}
    }

    /// `a ** b ** c …`: Python evaluates every operand left to right, then combines them from
    /// the right. The operands go into one array and a loop folds it: flat for any length.
    fn power(&mut self, items: &[Expr]) -> TokenStream {
        let v = value_path();
        let rt = rt();
        match items {
            [] => return quote!(#v::None),
            [only] => return self.value(only),
            [a, b] => {
                let a = self.operand(a);
                let b = self.operand(b);
                return quote!(#rt::pow(&#a, &#b)?);
            }
            _ => {}
        }
        let n = items.len();
        let operands = if n <= CHUNK {
            let operands = self.values(items);
            quote!([#(#operands),*])
        } else {
            self.vec(items)
        };
        quote! {{
            let __tileops_operands = #operands;
            let mut __tileops_operands =
                ::core::iter::IntoIterator::into_iter(__tileops_operands).rev();
            let mut __tileops_acc: #v = __tileops_operands.next().unwrap_or(#v::None);
            for __tileops_base in __tileops_operands {
                __tileops_acc = #rt::pow(&__tileops_base, &__tileops_acc)?;
            }
            __tileops_acc
        }}
    }

    /// `a and b and c …` / `a or b or c …`: the first operand that decides the result is the
    /// result (Python returns the operand itself, not a bool), and later operands are not
    /// evaluated. A labeled block with one flat test per operand.
    fn bool_op(&mut self, op: BoolOpKind, values: &[Expr]) -> TokenStream {
        let v = value_path();
        let rt = rt();
        let Some((last, init)) = values.split_last() else {
            return quote!(#v::None);
        };
        let Some((first, middle)) = init.split_first() else {
            return self.value(last);
        };
        let stop = match op {
            BoolOpKind::And => quote!(!#rt::truthy(&__tileops_lhs)?),
            BoolOpKind::Or => quote!(#rt::truthy(&__tileops_lhs)?),
        };
        let first = self.value(first);
        let last = self.value(last);
        if middle.is_empty() {
            return quote! {{
                let __tileops_lhs: #v = #first;
                if #stop { __tileops_lhs } else { #last }
            }};
        }
        let label = self.label();
        if middle.len() > CHUNK {
            let ret = chunk_result(quote!(::core::option::Option<#v>));
            let chunks: Vec<TokenStream> = middle
                .chunks(CHUNK)
                .map(|chunk| {
                    let tests: Vec<TokenStream> = chunk
                        .iter()
                        .map(|e| {
                            let e = self.value(e);
                            quote! {
                                let __tileops_lhs: #v = #e;
                                if #stop {
                                    return ::core::result::Result::Ok(
                                        ::core::option::Option::Some(__tileops_lhs),
                                    );
                                }
                            }
                        })
                        .collect();
                    quote! {
                        if let ::core::option::Option::Some(__tileops_lhs) = (|| -> #ret {
                            #(#tests)*
                            ::core::result::Result::Ok(::core::option::Option::None)
                        })()? {
                            break #label __tileops_lhs;
                        }
                    }
                })
                .collect();
            return quote! {
                #label: {
                    let __tileops_lhs: #v = #first;
                    if #stop { break #label __tileops_lhs; }
                    #(#chunks)*
                    #last
                }
            };
        }
        let middle: Vec<TokenStream> = middle
            .iter()
            .map(|e| {
                let e = self.value(e);
                quote! {
                    __tileops_lhs = #e;
                    if #stop { break #label __tileops_lhs; }
                }
            })
            .collect();
        quote! {
            #label: {
                let mut __tileops_lhs: #v = #first;
                if #stop { break #label __tileops_lhs; }
                #(#middle)*
                #last
            }
        }
    }

    /// A `Vec<Value>` of the items, evaluated in order: `vec![…]`, or for more than [`CHUNK`]
    /// items a vector filled by one closure per chunk.
    fn vec(&mut self, items: &[Expr]) -> TokenStream {
        let v = value_path();
        if items.len() <= CHUNK {
            let items = self.values(items);
            return quote!(::std::vec![#(#items),*]);
        }
        let n = items.len();
        let ret = chunk_result(quote!(()));
        let chunks: Vec<TokenStream> = items
            .chunks(CHUNK)
            .map(|chunk| {
                let items = self.values(chunk);
                quote! {
                    (|__tileops_items: &mut ::std::vec::Vec<#v>| -> #ret {
                        #( __tileops_items.push(#items); )*
                        ::core::result::Result::Ok(())
                    })(&mut __tileops_items)?;
                }
            })
            .collect();
        quote! {{
            let mut __tileops_items: ::std::vec::Vec<#v> = ::std::vec::Vec::with_capacity(#n);
            #(#chunks)*
            __tileops_items
        }}
    }

    fn values(&mut self, items: &[Expr]) -> Vec<TokenStream> {
        items.iter().map(|i| self.value(i)).collect()
    }

    fn name(&mut self, name: &str) -> TokenStream {
        if let Some(ident) = self.value_local(name) {
            if self.types.is_some() {
                // A param may be lent (a `Cow` of the field): clone the value it derefs to.
                let v = value_path();
                return quote!(#v::clone(&#ident));
            }
            return quote!(#ident.clone());
        }
        match self.resolve(name) {
            Binding::Helper(h) => match py_type(h) {
                Some(t) => {
                    let v = value_path();
                    quote!(#v::Type(#t))
                }
                None => raise(&format!(
                    "TypeError: the helper `{h}` is a function, not a value"
                )),
            },
            Binding::Input { .. } => raise(&format!(
                "TypeError: the tensor input `{name}` is not a value; use `{name}.shape`"
            )),
            _ => raise(&format!("NameError: name '{name}' is not defined")),
        }
    }

    fn input_local<'e>(&self, e: &'e Expr) -> Option<(Ident, &'e str)> {
        match &e.kind {
            ExprKind::Name(name) if matches!(self.resolve(name), Binding::Input { .. }) => {
                py_ident(name).map(|i| (i, name.as_str()))
            }
            _ => None,
        }
    }

    fn attribute(&mut self, value: &Expr, attr: &str) -> TokenStream {
        if let Some((ident, name)) = self.input_local(value) {
            let name = Literal::string(name);
            match attr {
                "shape" => return quote!(#ident.shape(#name)?),
                "ndim" => return quote!(#ident.ndim(#name)?),
                _ => {}
            }
        }
        raise(&format!(
            "AttributeError: `.{attr}` is only available as `.shape` / `.ndim` of a tensor input"
        ))
    }

    fn subscript(&mut self, value: &Expr, index: &Expr) -> TokenStream {
        let rt = rt();
        let v = value_path();
        let base = self.operand(value);
        match &index.kind {
            ExprKind::Slice { lower, upper, step } => {
                let parts: Vec<TokenStream> = [lower, upper, step]
                    .into_iter()
                    .map(|part| match part {
                        Some(p) => {
                            let p = self.operand(p);
                            if self.types.is_some() {
                                // A lent param (a `Cow`) coerces to `&Value` only where the
                                // type is spelled out.
                                quote!(::core::option::Option::Some::<&#v>(&#p))
                            } else {
                                quote!(::core::option::Option::Some(&#p))
                            }
                        }
                        None => quote!(::core::option::Option::None),
                    })
                    .collect();
                quote!(#rt::slice(&#base, #(#parts),*)?)
            }
            ExprKind::Tuple(items)
                if items
                    .iter()
                    .any(|i| matches!(i.kind, ExprKind::Slice { .. })) =>
            {
                raise("TypeError: a tuple of slices is not a valid index")
            }
            ExprKind::Tuple(items) => {
                let items = self.vec(items);
                quote!(#rt::subscript(&#base, &#v::Tuple(#items))?)
            }
            _ => {
                let i = self.operand(index);
                quote!(#rt::subscript(&#base, &#i)?)
            }
        }
    }

    fn call(&mut self, func: &Expr, args: &[Expr]) -> TokenStream {
        if let ExprKind::Name(name) = &func.kind
            && let Binding::Helper(h) = self.resolve(name)
        {
            if let [arg] = args
                && let ExprKind::Comprehension {
                    kind: CompKind::Generator,
                    elt,
                    clauses,
                } = &arg.kind
                && STREAMING_HELPERS.contains(&h)
            {
                let rt = rt();
                let f = Ident::new(h, Span::call_site());
                return self.collect(quote!(#rt::Collect::#f()), elt, clauses);
            }
            let f = Ident::new(h, Span::call_site());
            if let [ExprKind::Name(name)] = args.iter().map(|a| &a.kind).collect::<Vec<_>>()[..]
                && self.types.is_some()
                && let Some(ident) = self.value_local(name)
            {
                // A lone name is lent, not cloned: a list param is not copied per call.
                let v = value_path();
                return quote!(::tileops::roofline::helpers::#f(::core::slice::from_ref::<#v>(&#ident))?);
            }
            if args.len() > CHUNK {
                let args = self.vec(args);
                return quote!(::tileops::roofline::helpers::#f(&#args)?);
            }
            let args = self.values(args);
            return quote!(::tileops::roofline::helpers::#f(&[#(#args),*])?);
        }
        raise("TypeError: only helpers can be called")
    }

    /// `a OP b` → `Value::Bool(compare(..)?)`. A chain `a < b < c` evaluates each operand once,
    /// left to right, and stops at the first false link, as Python does.
    fn compare(&mut self, left: &Expr, rest: &[Comparator]) -> TokenStream {
        let v = value_path();
        let rt = rt();
        if let [c] = rest {
            if let Some(presence) = self.presence_test(left, c.op, &c.right) {
                return quote!(#v::Bool(#presence));
            }
            let a = self.operand(left);
            let b = self.operand(&c.right);
            let op = cmp_op(c.op);
            return quote!(#v::Bool(#rt::compare(#op, &#a, &#b)?));
        }
        let Some(last) = rest.last() else {
            // A comparison without operators is just its operand.
            return self.value(left);
        };
        // Two locals slide along the chain (`lhs` takes `rhs`, `rhs` the next operand), each
        // operand evaluated once and only if every link before it held: a labeled block with one
        // flat test per link.
        let label = self.label();
        let first = self.value(left);
        let (init, last_link) = rest.split_at(rest.len() - 1);
        if init.len() > CHUNK {
            // The same walk, a chunk of links per closure: each closure takes `lhs` and gives
            // back the chain's next `lhs`, or `None` at a false link.
            let ret = chunk_result(quote!(::core::option::Option<#v>));
            let chunks: Vec<TokenStream> = init
                .chunks(CHUNK)
                .map(|chunk| {
                    let links: Vec<TokenStream> = chunk
                        .iter()
                        .map(|c| {
                            let op = cmp_op(c.op);
                            let right = self.value(&c.right);
                            quote! {
                                let __tileops_rhs: #v = #right;
                                if !#rt::compare(#op, &__tileops_lhs, &__tileops_rhs)? {
                                    return ::core::result::Result::Ok(::core::option::Option::None);
                                }
                                __tileops_lhs = __tileops_rhs;
                            }
                        })
                        .collect();
                    quote! {
                        match (|mut __tileops_lhs: #v| -> #ret {
                            #(#links)*
                            ::core::result::Result::Ok(::core::option::Option::Some(__tileops_lhs))
                        })(__tileops_lhs)? {
                            ::core::option::Option::Some(__tileops_next) => __tileops_lhs = __tileops_next,
                            ::core::option::Option::None => break #label false,
                        }
                    }
                })
                .collect();
            let op = cmp_op(last.op);
            let right = self.value(&last_link[0].right);
            return quote! {
                #v::Bool(#label: {
                    let mut __tileops_lhs: #v = #first;
                    #(#chunks)*
                    #rt::compare(#op, &__tileops_lhs, &#right)?
                })
            };
        }
        let mut links = Vec::new();
        for (i, c) in init.iter().enumerate() {
            let op = cmp_op(c.op);
            if i > 0 {
                let right = self.value(&c.right);
                links.push(quote! {
                    __tileops_lhs = __tileops_rhs;
                    __tileops_rhs = #right;
                });
            } else {
                let right = self.value(&c.right);
                links.push(quote!(let mut __tileops_rhs: #v = #right;));
            }
            links.push(quote! {
                if !#rt::compare(#op, &__tileops_lhs, &__tileops_rhs)? {
                    break #label false;
                }
            });
        }
        let op = cmp_op(last.op);
        let right = self.value(&last_link[0].right);
        quote! {
            #v::Bool(#label: {
                let mut __tileops_lhs: #v = #first;
                #(#links)*
                __tileops_lhs = __tileops_rhs;
                __tileops_rhs = #right;
                #rt::compare(#op, &__tileops_lhs, &__tileops_rhs)?
            })
        }
    }

    /// `t is None` / `t is not None` (either side) on a tensor input.
    fn presence_test(&self, left: &Expr, op: CmpOp, right: &Expr) -> Option<TokenStream> {
        let negate = match op {
            CmpOp::Is => false,
            CmpOp::IsNot => true,
            _ => return None,
        };
        let (ident, _) = match (&left.kind, &right.kind) {
            (_, ExprKind::NoneLit) => self.input_local(left)?,
            (ExprKind::NoneLit, _) => self.input_local(right)?,
            _ => return None,
        };
        Some(if negate {
            quote!(!#ident.is_none())
        } else {
            quote!(#ident.is_none())
        })
    }

    /// A block that loops over the clauses, filters with `continue`, and collects the element
    /// into a list, a set, or (for a generator) a list.
    fn comprehension(&mut self, kind: CompKind, elt: &Expr, clauses: &[CompClause]) -> TokenStream {
        let rt = rt();
        let into = match kind {
            CompKind::List | CompKind::Generator => quote!(#rt::Collect::list()),
            CompKind::Set => quote!(#rt::Collect::set()),
        };
        self.collect(into, elt, clauses)
    }

    /// The loops of a comprehension, each clause's items streamed (never copied into a list),
    /// each step charged to the formula's work budget, and each element pushed into `into`
    /// (a `Collect`), which bounds the result's length and finishes it.
    fn collect(&mut self, into: TokenStream, elt: &Expr, clauses: &[CompClause]) -> TokenStream {
        let Some(body) = self.loops(
            elt,
            clauses,
            Ty::Value,
            |elt| quote!(__tileops_acc.push(#elt)?;),
        ) else {
            return raise("SyntaxError: invalid comprehension target");
        };
        quote! {{
            let mut __tileops_acc = #into;
            #body
            __tileops_acc.finish()?
        }}
    }

    /// A set of ints ([`Infer::is_int_set`]) as an `rt::IntSetOf`: a display's items, a set
    /// comprehension collected on ints (`rt::IntCollect`, the runtime's limits and charges),
    /// `set(range(...))` unbuilt, each branch of a conditional whose test is not known.
    fn int_set(&mut self, e: &Expr) -> TokenStream {
        let rt = rt();
        let e = self.infer().unfold(e);
        if let Some(args) = self.infer().range_set_args(e) {
            let args: Vec<TokenStream> = args.iter().map(|a| self.typed(a, Ty::Int)).collect();
            return quote!(#rt::IntSetOf::from(#rt::range_set(&[#(#args),*])?));
        }
        match &e.kind {
            ExprKind::Set(items) => {
                let items: Vec<TokenStream> =
                    items.iter().map(|a| self.typed(a, Ty::Int)).collect();
                let n = items.len();
                quote!(#rt::IntSetOf::from(#rt::int_set({
                    let __tileops_items: [::core::primitive::i128; #n] = [#(#items),*];
                    __tileops_items
                })?))
            }
            ExprKind::Comprehension { elt, clauses, .. } => {
                let Some(body) = self.loops(
                    elt,
                    clauses,
                    Ty::Int,
                    |elt| quote!(__tileops_set.push(#elt)?;),
                ) else {
                    return raise_int_set("SyntaxError: invalid comprehension target");
                };
                quote!({
                    let mut __tileops_set = #rt::IntCollect::new();
                    #body
                    __tileops_set.finish()?
                })
            }
            ExprKind::IfExp { body, test, orelse } => {
                let t = self.test(test);
                let b = self.int_set(body);
                let o = self.int_set(orelse);
                quote!(if #t { #b } else { #o })
            }
            _ => raise_int_set("TypeError: not a set of ints"),
        }
    }

    /// `product`/`sum`/`min`/`max(<generator of ints>)`: the same loops, folding the element
    /// into an `i128` as `Collect` folds it into a `Value`: from 1, each step a checked
    /// multiply; from 0, each a checked add (the runtime's exact int sum); the first smallest
    /// (largest) item, or `min`'s (`max`'s) `ValueError` for no item.
    fn int_fold(&mut self, helper: &str, elt: &Expr, clauses: &[CompClause]) -> TokenStream {
        let rt = rt();
        let init = match helper {
            "product" => quote!(1),
            "sum" => quote!(0),
            _ => quote!(::core::option::Option::None),
        };
        let kind = helper.to_owned();
        let fold_rt = rt.clone();
        let step = move |e: TokenStream| match kind.as_str() {
            "product" => quote!(__tileops_fold = #fold_rt::int_mul(__tileops_fold, #e)?;),
            "sum" => quote!(__tileops_fold = #fold_rt::int_add(__tileops_fold, #e)?;),
            // Replace the best only with a smaller (`min`) or larger (`max`) item: ties keep the
            // first.
            _ => {
                let better = if kind == "min" { quote!(<) } else { quote!(>) };
                quote! {
                    let __tileops_elt: ::core::primitive::i128 = #e;
                    if __tileops_fold.is_none_or(|best| __tileops_elt #better best) {
                        __tileops_fold = ::core::option::Option::Some(__tileops_elt);
                    }
                }
            }
        };
        let Some(body) = self.loops(elt, clauses, Ty::Int, step) else {
            return raise_typed(Ty::Int, "SyntaxError: invalid comprehension target");
        };
        let finish = match helper {
            "min" | "max" => {
                let name = Literal::string(helper);
                quote!(__tileops_fold.ok_or_else(|| #rt::empty_fold(#name))?)
            }
            _ => quote!(__tileops_fold),
        };
        let ty = match helper {
            "min" | "max" => quote!(::core::option::Option<::core::primitive::i128>),
            _ => quote!(::core::primitive::i128),
        };
        quote! {{
            let mut __tileops_fold: #ty = #init;
            #body
            #finish
        }}
    }

    /// The nested loops of the clauses around `push(element)`, the element generated as
    /// `elt_ty`; `None` for a target that is not an identifier. A lone name over a range of
    /// ints or over a shape is an `i128` local; a shape is iterated in place.
    fn loops(
        &mut self,
        elt: &Expr,
        clauses: &[CompClause],
        elt_ty: Ty,
        push: impl FnOnce(TokenStream) -> TokenStream,
    ) -> Option<TokenStream> {
        let rt = rt();
        let depth = self.locals.len();
        let mut loops = Vec::new();
        let mut holders: Vec<Ident> = Vec::new();
        for clause in clauses {
            let var_ty = match self.types {
                Some(_) => self.infer().loop_var_ty(&clause.target, &clause.iter),
                None => Ty::Value,
            };
            // Over ints the typed code can produce itself, the items are `i128`s; over a `range`
            // (and anything else) the runtime's iterator gives `Value`s.
            let int_iter = match var_ty {
                Ty::Int => self.infer().int_iter(&clause.iter),
                _ => None,
            };
            let source = match int_iter {
                Some(IntIter::Dims(dims)) => {
                    let dims = self.typed(dims, Ty::Dims);
                    Some(quote!(#dims.ints()))
                }
                Some(IntIter::RangeSet(args)) => {
                    let args: Vec<TokenStream> =
                        args.iter().map(|a| self.typed(a, Ty::Int)).collect();
                    Some(quote!(#rt::range_set(&[#(#args),*])?.ints()))
                }
                Some(IntIter::Display { items, set }) => {
                    let items: Vec<TokenStream> =
                        items.iter().map(|a| self.typed(a, Ty::Int)).collect();
                    let n = items.len();
                    let array = quote!({
                        let __tileops_items: [::core::primitive::i128; #n] = [#(#items),*];
                        __tileops_items
                    });
                    Some(if set {
                        quote!(#rt::int_set(#array)?.ints())
                    } else {
                        quote!(::core::iter::IntoIterator::into_iter(#array))
                    })
                }
                Some(IntIter::Ints(ints)) => {
                    let ty = self.ty(ints);
                    let ints = self.typed(ints, ty);
                    Some(quote!(#ints.ints()))
                }
                Some(IntIter::Set(set)) => {
                    let set = self.int_set(set);
                    Some(quote!((#set).ints()))
                }
                Some(IntIter::Range(args)) => {
                    let args: Vec<TokenStream> =
                        args.iter().map(|a| self.typed(a, Ty::Int)).collect();
                    Some(quote!(#rt::range_ints(&[#(#args),*])?))
                }
                None => None,
            };
            let item_is_int = source.is_some();
            let source = match source {
                Some(source) => source,
                None => {
                    let iter = self.operand(&clause.iter);
                    quote!(#rt::iter(&#iter)?)
                }
            };
            let Some(bind) = self.bind_target(&clause.target, var_ty, item_is_int) else {
                self.locals.truncate(depth);
                self.local_tys.truncate(depth);
                return None;
            };
            let mut conds = Vec::new();
            for cond in &clause.ifs {
                let invariant = match self.invariant_membership(cond, clauses) {
                    Some(found) => Some(found),
                    None => self.invariant_int_set_membership(cond, clauses),
                };
                conds.push(match invariant {
                    Some((holder, code)) => {
                        holders.push(holder);
                        code
                    }
                    None => self.test(cond),
                });
            }
            loops.push((source, bind, conds));
        }
        let elt = match elt_ty {
            Ty::Value => self.value(elt),
            ty => self.typed(elt, ty),
        };
        self.locals.truncate(depth);
        self.local_tys.truncate(depth);

        let mut body = push(elt);
        for (source, bind, conds) in loops.into_iter().rev() {
            body = quote! {
                for __tileops_item in #source {
                    #rt::step()?;
                    #bind
                    #(
                        if !#conds {
                            continue;
                        }
                    )*
                    #body
                }
            };
        }
        Some(quote! {
            #(let mut #holders = #rt::Invariant::new();)*
            #body
        })
    }

    /// `i in S` / `i not in S` as a typed filter, where `S` is a set of ints the typed code
    /// builds item by item (a set comprehension, or a conditional with one in a branch) and
    /// reads no variable of this comprehension: kept as [`Self::invariant_membership`] keeps a
    /// value's set (`Invariant<IntSetOf>`: built once, its work charged again on each use).
    fn invariant_int_set_membership(
        &mut self,
        cond: &Expr,
        clauses: &[CompClause],
    ) -> Option<(Ident, TokenStream)> {
        self.types?;
        let ExprKind::Compare { left, rest } = &cond.kind else {
            return None;
        };
        let [c] = rest.as_slice() else {
            return None;
        };
        let infer = self.infer();
        if !matches!(c.op, CmpOp::In | CmpOp::NotIn)
            || infer.ty(cond) != Ty::Bool
            || infer.ty(left) != Ty::Int
            || infer.int_display(&c.right).is_some()
            || infer.range_set_args(&c.right).is_some()
            || !infer.is_int_set(&c.right)
            || !has_comprehension(infer.unfold(&c.right))
        {
            return None;
        }
        let targets: Vec<&str> = clauses
            .iter()
            .flat_map(|c| c.target.names().iter().map(|t| t.name.as_str()))
            .collect();
        if reads_any(&c.right, &targets) {
            return None;
        }
        self.labels += 1;
        let holder = Ident::new(&format!("__tileops_inv{}", self.labels), Span::call_site());
        let a = self.typed(left, Ty::Int);
        let set = self.int_set(&c.right);
        let not = (c.op == CmpOp::NotIn).then(|| quote!(!));
        let code = quote! {{
            let __tileops_needle: ::core::primitive::i128 = #a;
            #not #holder.get(|| ::core::result::Result::Ok(#set))?.contains(__tileops_needle)
        }};
        Some((holder, code))
    }

    /// `x in E` / `x not in E` as a filter, where `E` reads no variable of this comprehension
    /// (`i not in {d % x.ndim for d in dim}` in a loop over `i`): `E` is built once per
    /// evaluation of the comprehension and kept (`Invariant`, which charges its work again on
    /// each use, so the budget and the errors are those of rebuilding it). Only in typed code,
    /// and only for an `E` that builds something (a display, a comprehension, a call, a
    /// conditional).
    fn invariant_membership(
        &mut self,
        cond: &Expr,
        clauses: &[CompClause],
    ) -> Option<(Ident, TokenStream)> {
        self.types?;
        let ExprKind::Compare { left, rest } = &cond.kind else {
            return None;
        };
        let [c] = rest.as_slice() else {
            return None;
        };
        // A typed membership (an int among a display's ints) is cheaper as it is.
        if !matches!(c.op, CmpOp::In | CmpOp::NotIn)
            || self.ty(cond) != Ty::Value
            || self.ty(&c.right) != Ty::Value
            || !matches!(
                c.right.kind,
                ExprKind::Set(_)
                    | ExprKind::List(_)
                    | ExprKind::Tuple(_)
                    | ExprKind::Comprehension { .. }
                    | ExprKind::Call { .. }
                    | ExprKind::IfExp { .. }
            )
        {
            return None;
        }
        let targets: Vec<&str> = clauses
            .iter()
            .flat_map(|c| c.target.names().iter().map(|t| t.name.as_str()))
            .collect();
        if reads_any(&c.right, &targets) {
            return None;
        }
        let rt = rt();
        self.labels += 1;
        let holder = Ident::new(&format!("__tileops_inv{}", self.labels), Span::call_site());
        let a = self.operand(left);
        let e = self.value(&c.right);
        let op = cmp_op(c.op);
        let code = quote! {
            #rt::compare(#op, &#a, #holder.get(|| ::core::result::Result::Ok(#e))?)?
        };
        Some((holder, code))
    }

    /// Binds `__tileops_item` to the target's `py_` locals and brings them into scope for the
    /// rest of the comprehension. `None` for a name that is not an identifier.
    /// An `Int` target is an `i128` local: the item itself where it is one (`item_is_int`), else the
    /// int of a range's item.
    fn bind_target(&mut self, target: &Target, ty: Ty, item_is_int: bool) -> Option<TokenStream> {
        let v = value_path();
        let rt = rt();
        let idents = target
            .names()
            .iter()
            .map(|t| py_ident(&t.name))
            .collect::<Option<Vec<Ident>>>()?;
        self.locals
            .extend(target.names().iter().map(|t| t.name.clone()));
        self.local_tys.resize(self.locals.len(), ty);
        if ty == Ty::Int
            && let Target::Name(_) = target
        {
            let item = if item_is_int {
                quote!(__tileops_item)
            } else {
                quote!(#rt::int_item(&__tileops_item)?)
            };
            return Some(quote! {
                #[allow(unused_variables)]
                let #(#idents)*: ::core::primitive::i128 = #item;
            });
        }
        Some(match target {
            Target::Name(_) => quote! {
                #[allow(unused_variables)]
                let #(#idents)* = __tileops_item;
            },
            Target::Tuple(names, _) => {
                let n = names.len();
                quote! {
                    let mut __tileops_parts = #rt::unpack(__tileops_item, #n)?.into_iter();
                    #(
                        #[allow(unused_variables)]
                        let #idents = __tileops_parts.next().unwrap_or(#v::None);
                    )*
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Layer, check, parse};
    use super::*;

    fn scope() -> Scope {
        Scope::new()
            .input("x", false)
            .input("weight", true)
            .param("dim")
            .var("M")
            .var("N")
            .dim("K")
    }

    /// Generated code for a formula that must check clean, whitespace-normalised.
    fn gen_src(src: &str, layer: Layer) -> String {
        let e = parse(src).unwrap_or_else(|e| panic!("{src:?}: {}", e.message));
        let c = check(&e, layer, &scope());
        assert!(c.errors.is_empty(), "{src:?}: {:#?}", c.errors);
        let ts = codegen(&e, &scope());
        // Every output must at least be a syntactically valid Rust expression.
        syn::parse2::<syn::Expr>(ts.clone())
            .unwrap_or_else(|err| panic!("{src:?} generated invalid Rust: {err}\n{ts}"));
        ts.to_string()
    }

    fn has(code: &str, needle: &str) {
        // Compare modulo token spacing.
        let squash = |s: &str| s.split_whitespace().collect::<String>();
        assert!(
            squash(code).contains(&squash(needle)),
            "missing {needle:?} in\n{code}"
        );
    }

    fn count(code: &str, needle: &str) -> usize {
        let squash = |s: &str| s.split_whitespace().collect::<String>();
        squash(code).matches(&squash(needle)).count()
    }

    #[test]
    fn literals() {
        let c = gen_src("42", Layer::Arithmetic);
        has(&c, "::tileops::roofline::Value::Int(42i128)");
        let c = gen_src("1.5", Layer::Arithmetic);
        has(
            &c,
            "::tileops::roofline::Value::Float(::core::primitive::f64::from_bits(0x3ff8000000000000u64))",
        );
        let c = gen_src("'tanh'", Layer::Arithmetic);
        has(
            &c,
            "::tileops::roofline::Value::Str(::std::string::String::from(\"tanh\"))",
        );
        has(
            &gen_src("True", Layer::Arithmetic),
            "::tileops::roofline::Value::Bool(true)",
        );
        has(
            &gen_src("None", Layer::Arithmetic),
            "::tileops::roofline::Value::None",
        );
    }

    #[test]
    fn float_bits_are_exact() {
        for f in [
            0.1,
            1.0e-5,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            f64::INFINITY,
        ] {
            let lit = float_bits_literal(f).to_string();
            let hex = lit.trim_start_matches("0x").trim_end_matches("u64");
            assert_eq!(u64::from_str_radix(hex, 16).map(f64::from_bits), Ok(f));
        }
    }

    #[test]
    fn names_and_operators() {
        // A chain is flat: one statement per link, in Python's order.
        let c = gen_src("4 * M * N // K", Layer::Arithmetic);
        has(
            &c,
            "{ let mut __tileops_acc: ::tileops::roofline::Value = ::tileops::__private_v0_1::rt::mul(&::tileops::roofline::Value::Int(4i128), &py_M)?; \
             __tileops_acc = ::tileops::__private_v0_1::rt::mul(&__tileops_acc, &py_N)?; \
             __tileops_acc = ::tileops::__private_v0_1::rt::floordiv(&__tileops_acc, &py_K)?; \
             __tileops_acc }",
        );
        let c = gen_src("M ** N ** K", Layer::Arithmetic);
        has(
            &c,
            "let __tileops_operands = [py_M.clone(), py_N.clone(), py_K.clone()];",
        );
        has(
            &c,
            "__tileops_acc = ::tileops::__private_v0_1::rt::pow(&__tileops_base, &__tileops_acc)?;",
        );
        let c = gen_src("M", Layer::Arithmetic);
        assert_eq!(c.replace(' ', ""), "py_M.clone()");
        for (src, f) in [
            ("M + N", "add"),
            ("M - N", "sub"),
            ("M / N", "truediv"),
            ("M // N", "floordiv"),
            ("M % N", "modulo"),
            ("M ** N", "pow"),
        ] {
            has(
                &gen_src(src, Layer::Arithmetic),
                &format!("_v0_1::rt::{f}(&py_M, &py_N)?"),
            );
        }
        has(&gen_src("-M", Layer::Arithmetic), "_v0_1::rt::neg(&py_M)?");
        has(&gen_src("+M", Layer::Arithmetic), "_v0_1::rt::pos(&py_M)?");
        has(
            &gen_src("not M", Layer::Arithmetic),
            "_v0_1::rt::not(&py_M)?",
        );
        has(
            &gen_src("elem_bytes * K * dim", Layer::Arithmetic),
            "_v0_1::rt::mul(&py_elem_bytes, &py_K)?",
        );
    }

    #[test]
    fn comparisons() {
        let c = gen_src("M < N", Layer::Arithmetic);
        has(
            &c,
            "Value::Bool(::tileops::__private_v0_1::rt::compare(::tileops::__private_v0_1::rt::CmpOp::Lt, &py_M, &py_N)?)",
        );
        for (src, op) in [
            ("M <= N", "Le"),
            ("M > N", "Gt"),
            ("M >= N", "Ge"),
            ("M == N", "Eq"),
            ("M != N", "Ne"),
            ("M in N", "In"),
            ("M not in N", "NotIn"),
            ("M is N", "Is"),
            ("M is not N", "IsNot"),
        ] {
            has(
                &gen_src(src, Layer::Arithmetic),
                &format!("CmpOp::{op}, &py_M, &py_N"),
            );
        }
        // A chain evaluates each operand once, in order, and stops at the first false link.
        let c = gen_src("-K <= dim < M + N", Layer::Arithmetic);
        has(
            &c,
            "::tileops::roofline::Value::Bool('__tileops_b1: { \
             let mut __tileops_lhs: ::tileops::roofline::Value = ::tileops::__private_v0_1::rt::neg(&py_K)?; \
             let mut __tileops_rhs: ::tileops::roofline::Value = py_dim.clone(); \
             if !::tileops::__private_v0_1::rt::compare(::tileops::__private_v0_1::rt::CmpOp::Le, &__tileops_lhs, &__tileops_rhs)? { break '__tileops_b1 false; } \
             __tileops_lhs = __tileops_rhs; \
             __tileops_rhs = ::tileops::__private_v0_1::rt::add(&py_M, &py_N)?; \
             ::tileops::__private_v0_1::rt::compare(::tileops::__private_v0_1::rt::CmpOp::Lt, &__tileops_lhs, &__tileops_rhs)? })",
        );
        assert_eq!(count(&c, "_v0_1::rt::add("), 1);
        let c = gen_src("M < N < K < dim", Layer::Arithmetic);
        assert_eq!(count(&c, "_v0_1::rt::compare("), 3);
        assert_eq!(count(&c, "break '__tileops_b1 false;"), 2);
        // Nested chains get their own labels.
        let c = gen_src("(M < N < K) < (N < K < dim) < 3", Layer::Arithmetic);
        for label in ["'__tileops_b1:", "'__tileops_b2:", "'__tileops_b3:"] {
            assert_eq!(count(&c, label), 1, "{label} in {c}");
        }
    }

    #[test]
    fn long_chains_and_displays_are_cut_into_chunks() {
        let closures = |c: &str| count(c, "->::core::result::Result<");
        for (op, join) in [
            ("+", " + "),
            ("**", " ** "),
            ("<", " < "),
            ("and", " and "),
            ("or", " or "),
        ] {
            let short = gen_src(&vec!["M"; CHUNK].join(join), Layer::Arithmetic);
            assert_eq!(closures(&short), 0, "{op}");
            // 100 operands: 99 links, or 98 between the first and the last operand.
            let long = gen_src(&vec!["M"; 100].join(join), Layer::Arithmetic);
            assert!((3..=4).contains(&closures(&long)), "{op}: {long}");
        }
        let display = gen_src(&format!("[{}]", vec!["M"; 100].join(", ")), Layer::Vars);
        assert_eq!(closures(&display), 4);
        has(&display, "::std::vec::Vec::with_capacity(100usize)");
        let call = gen_src(&format!("max({})", vec!["M"; 33].join(", ")), Layer::Vars);
        assert_eq!(closures(&call), 2);
        has(&call, "::tileops::roofline::helpers::max(&{");
    }

    #[test]
    fn tensor_inputs() {
        let c = gen_src("x.shape[-1]", Layer::Vars);
        has(
            &c,
            "::tileops::__private_v0_1::rt::subscript(&py_x.shape(\"x\")?, &::tileops::__private_v0_1::rt::neg(&::tileops::roofline::Value::Int(1i128))?)?",
        );
        has(&gen_src("x.ndim", Layer::Vars), "py_x.ndim(\"x\")?");
        has(
            &gen_src("weight is None", Layer::Vars),
            "::tileops::roofline::Value::Bool(py_weight.is_none())",
        );
        has(
            &gen_src("weight is not None", Layer::Vars),
            "::tileops::roofline::Value::Bool(!py_weight.is_none())",
        );
        has(
            &gen_src("None is not weight", Layer::Vars),
            "Value::Bool(!py_weight.is_none())",
        );
        // A param compared with None is an ordinary comparison.
        has(
            &gen_src("dim is None", Layer::Vars),
            "CmpOp::Is, &py_dim, &::tileops::roofline::Value::None",
        );
    }

    #[test]
    fn bool_ops_and_conditionals() {
        let c = gen_src("M and N", Layer::Arithmetic);
        has(
            &c,
            "let __tileops_lhs: ::tileops::roofline::Value = py_M.clone(); if !::tileops::__private_v0_1::rt::truthy(&__tileops_lhs)? { __tileops_lhs } else { py_N.clone() }",
        );
        let c = gen_src("M or N", Layer::Arithmetic);
        has(
            &c,
            "if ::tileops::__private_v0_1::rt::truthy(&__tileops_lhs)? { __tileops_lhs } else { py_N.clone() }",
        );
        let c = gen_src("M or N or K", Layer::Arithmetic);
        has(
            &c,
            "'__tileops_b1: { let mut __tileops_lhs: ::tileops::roofline::Value = py_M.clone(); \
             if ::tileops::__private_v0_1::rt::truthy(&__tileops_lhs)? { break '__tileops_b1 __tileops_lhs; } \
             __tileops_lhs = py_N.clone(); \
             if ::tileops::__private_v0_1::rt::truthy(&__tileops_lhs)? { break '__tileops_b1 __tileops_lhs; } \
             py_K.clone() }",
        );
        let c = gen_src("M and N and K and dim", Layer::Arithmetic);
        assert_eq!(
            count(
                &c,
                "if !::tileops::__private_v0_1::rt::truthy(&__tileops_lhs)? { break '__tileops_b1 __tileops_lhs; }"
            ),
            3
        );
        let c = gen_src("(5 if M else 3) * N", Layer::Arithmetic);
        has(
            &c,
            "&if ::tileops::__private_v0_1::rt::truthy(&py_M)? { ::tileops::roofline::Value::Int(5i128) } else { ::tileops::roofline::Value::Int(3i128) }",
        );
    }

    #[test]
    fn displays_helpers_and_types() {
        has(
            &gen_src("(M, N)", Layer::Vars),
            "::tileops::roofline::Value::Tuple(::std::vec![py_M.clone(), py_N.clone()])",
        );
        has(
            &gen_src("[M]", Layer::Vars),
            "::tileops::roofline::Value::List(::std::vec![py_M.clone()])",
        );
        has(
            &gen_src("{M, N}", Layer::Vars),
            "::tileops::__private_v0_1::rt::make_set(::std::vec![py_M.clone(), py_N.clone()])?",
        );
        has(
            &gen_src("()", Layer::Vars),
            "::tileops::roofline::Value::Tuple(::std::vec![])",
        );
        has(
            &gen_src("product(x.shape)", Layer::Vars),
            "::tileops::roofline::helpers::product(&[py_x.shape(\"x\")?])?",
        );
        has(
            &gen_src("ceil(M / 2)", Layer::Arithmetic),
            "::tileops::roofline::helpers::ceil(&[",
        );
        has(
            &gen_src("set()", Layer::Vars),
            "::tileops::roofline::helpers::set(&[])?",
        );
        let c = gen_src("isinstance(dim, (list, tuple))", Layer::Vars);
        has(
            &c,
            "::tileops::roofline::helpers::isinstance(&[py_dim.clone(), ::tileops::roofline::Value::Tuple(::std::vec![::tileops::roofline::Value::Type(::tileops::roofline::PyType::List), ::tileops::roofline::Value::Type(::tileops::roofline::PyType::Tuple)])])?",
        );
        for (t, v) in [
            ("int", "Int"),
            ("float", "Float"),
            ("bool", "Bool"),
            ("set", "Set"),
        ] {
            has(
                &gen_src(t, Layer::Vars),
                &format!("Value::Type(::tileops::roofline::PyType::{v})"),
            );
        }
    }

    #[test]
    fn subscripts_and_slices() {
        let c = gen_src("x.shape[:dim]", Layer::Vars);
        has(
            &c,
            "::tileops::__private_v0_1::rt::slice(&py_x.shape(\"x\")?, ::core::option::Option::None, ::core::option::Option::Some(&py_dim), ::core::option::Option::None)?",
        );
        let c = gen_src("x.shape[1:M:2]", Layer::Vars);
        has(
            &c,
            "Some(&::tileops::roofline::Value::Int(1i128)), ::core::option::Option::Some(&py_M), ::core::option::Option::Some(&::tileops::roofline::Value::Int(2i128))",
        );
        let c = gen_src("x.shape[M, N]", Layer::Vars);
        has(
            &c,
            "_v0_1::rt::subscript(&py_x.shape(\"x\")?, &::tileops::roofline::Value::Tuple(::std::vec![py_M.clone(), py_N.clone()]))?",
        );
    }

    #[test]
    fn comprehensions() {
        let c = gen_src("[i * 2 for i in range(M) if i != 1 if i]", Layer::Vars);
        // The formula runs under a work budget; the items stream into a bounded collector.
        assert!(
            c.replace(' ', "").starts_with(
                "{let__tileops_budget=::tileops::__private_v0_1::rt::Budget::enter();"
            ),
            "{c}"
        );
        has(
            &c,
            "let mut __tileops_acc = ::tileops::__private_v0_1::rt::Collect::list();",
        );
        has(
            &c,
            "for __tileops_item in ::tileops::__private_v0_1::rt::iter(&::tileops::roofline::helpers::range(&[py_M.clone()])?)? { ::tileops::__private_v0_1::rt::step()?;",
        );
        has(&c, "#[allow(unused_variables)] let py_i = __tileops_item;");
        has(
            &c,
            "if !::tileops::__private_v0_1::rt::truthy(&::tileops::roofline::Value::Bool(",
        );
        assert_eq!(count(&c, "continue;"), 2);
        has(
            &c,
            "__tileops_acc.push(::tileops::__private_v0_1::rt::mul(&py_i, &::tileops::roofline::Value::Int(2i128))?)?;",
        );
        has(&c, "__tileops_acc.finish()? }");

        let c = gen_src("{a + b for a, b in M}", Layer::Vars);
        has(
            &c,
            "let mut __tileops_parts = ::tileops::__private_v0_1::rt::unpack(__tileops_item, 2usize)?.into_iter();",
        );
        has(
            &c,
            "let py_a = __tileops_parts.next().unwrap_or(::tileops::roofline::Value::None);",
        );
        has(
            &c,
            "let py_b = __tileops_parts.next().unwrap_or(::tileops::roofline::Value::None);",
        );
        has(&c, "::tileops::__private_v0_1::rt::Collect::set()");

        // A lone generator argument of a consuming helper streams into it: no list is built.
        let c = gen_src(
            "product(x.shape[i] for i in range(x.ndim) for j in range(i))",
            Layer::Vars,
        );
        assert_eq!(count(&c, "for __tileops_item in"), 2);
        has(&c, "::tileops::__private_v0_1::rt::Collect::product()");
        assert_eq!(count(&c, "helpers::product"), 0);
        assert_eq!(count(&c, "Collect::list"), 0);
        for h in ["sum", "min", "max", "set", "tuple", "list"] {
            let c = gen_src(&format!("{h}(i for i in x.shape)"), Layer::Vars);
            has(
                &c,
                &format!("::tileops::__private_v0_1::rt::Collect::{h}()"),
            );
        }
        // Anywhere else a generator is built as a list, bounded like one.
        let c = gen_src("len(i for i in x.shape)", Layer::Vars);
        has(&c, "::tileops::roofline::helpers::len(&[{");
        has(&c, "Collect::list()");

        // A comprehension variable shadowing an input is a Value inside, an input outside.
        let c = gen_src("[x for x in x.shape]", Layer::Vars);
        has(&c, "iter(&py_x.shape(\"x\")?)?");
        has(&c, "__tileops_acc.push(py_x.clone())?;");
        let c = gen_src("[x is None for x in x.shape]", Layer::Vars);
        has(&c, "CmpOp::Is, &py_x, &::tileops::roofline::Value::None");

        // Nested comprehensions share the formula's one budget.
        let c = gen_src("[[b for b in range(a)] for a in range(3)]", Layer::Vars);
        assert_eq!(count(&c, "let mut __tileops_acc"), 2);
        assert_eq!(count(&c, "Budget::enter"), 1);
        // No comprehension, no budget.
        assert_eq!(
            count(&gen_src("product(x.shape)", Layer::Vars), "Budget"),
            0
        );
    }

    /// Typed code for a formula that must check clean, with `dim` and `M` ints.
    fn typed_src(src: &str) -> (String, Ty) {
        let e = parse(src).unwrap_or_else(|e| panic!("{src:?}: {}", e.message));
        let c = check(&e, Layer::Vars, &scope());
        assert!(c.errors.is_empty(), "{src:?}: {:#?}", c.errors);
        let types = Types::new().with("dim", Ty::Int).with("M", Ty::Int);
        let (ts, ty) = codegen_typed(&e, &scope(), &types);
        syn::parse2::<syn::Expr>(ts.clone())
            .unwrap_or_else(|err| panic!("{src:?} generated invalid Rust: {err}\n{ts}"));
        (ts.to_string(), ty)
    }

    #[test]
    fn typed_parts_compute_on_machine_values() {
        // softmax's M: no Value, no tuple; the runtime's checked int ops and the shape view.
        let (c, ty) =
            typed_src("product(x.shape[:dim % x.ndim]) * product(x.shape[dim % x.ndim + 1:])");
        assert_eq!(ty, Ty::Int);
        assert_eq!(count(&c, "Value"), 0, "{c}");
        has(&c, "_v0_1::rt::int_mod(py_dim, py_x.rank(\"x\")?)?");
        has(
            &c,
            "py_x.dims(\"x\")?.slice(::core::option::Option::None, ::core::option::Option::Some(",
        );
        has(&c, ".product()?");
        has(&c, "_v0_1::rt::int_mul(");
        let (c, ty) = typed_src("x.shape[-1]");
        assert_eq!(ty, Ty::Int);
        has(
            &c,
            "py_x.dims(\"x\")?.index(::tileops::__private_v0_1::rt::int_neg(1i128)?)?",
        );
        let (c, ty) = typed_src("(M * K + M) * elem_bytes");
        assert_eq!(ty, Ty::Int);
        has(
            &c,
            "int_add(::tileops::__private_v0_1::rt::int_mul(py_M, py_K)?, py_M)?",
        );
        let (c, ty) = typed_src("M if weight is None else K");
        assert_eq!(ty, Ty::Int);
        has(&c, "if (py_weight.is_none()) { py_M } else { py_K }");
        let (c, ty) = typed_src("M > 0 and not dim");
        assert_eq!(ty, Ty::Bool);
        has(&c, "((py_M > 0i128) && (!(py_dim != 0)))");
        // A value part reads a typed name as a Value; a shape indexed by a value builds no tuple.
        let (c, ty) = typed_src("M / 2");
        assert_eq!(ty, Ty::Value);
        has(
            &c,
            "truediv(&::tileops::roofline::Value::Int(py_M), &::tileops::roofline::Value::Int(2i128))?",
        );
        // A generator over a range of ints: an int loop variable, an int product, the same
        // budget and steps.
        let (c, ty) = typed_src("product(x.shape[i] for i in range(x.ndim) if i != dim)");
        assert_eq!(ty, Ty::Int);
        has(&c, "Budget::enter");
        has(
            &c,
            "for __tileops_item in ::tileops::__private_v0_1::rt::range_ints(&[py_x.rank(\"x\")?])? {",
        );
        has(&c, "let py_i: ::core::primitive::i128 = __tileops_item;");
        has(&c, "if !(py_i != py_dim) { continue; }");
        has(
            &c,
            "__tileops_fold = ::tileops::__private_v0_1::rt::int_mul(__tileops_fold, py_x.dims(\"x\")?.index(py_i)?)?;",
        );
        assert_eq!(count(&c, "rt::step()?"), 1);
        // Over a shape, the dims themselves, in place.
        let (c, ty) = typed_src("product(d for d in x.shape[1:])");
        assert_eq!(ty, Ty::Int);
        has(&c, "for __tileops_item in py_x.dims(\"x\")?.slice(");
        has(&c, ".ints() {");
        has(&c, "let py_d: ::core::primitive::i128 = __tileops_item;");
        // Over a value (an untyped param), the item is a value; a shape indexed by it an int.
        let (c, ty) = typed_src("product(x.shape[i] for i in N)");
        assert_eq!(ty, Ty::Int);
        has(&c, "let py_i = __tileops_item;");
        has(&c, "py_x.dims(\"x\")?.index_value_int(&py_i)?");
        let (c, ty) = typed_src("[x.shape[i] for i in N]");
        assert_eq!(ty, Ty::Value);
        has(
            &c,
            "__tileops_acc.push(::tileops::roofline::Value::Int(py_x.dims(\"x\")?.index_value_int(&py_i)?))?;",
        );
        // A filter's loop-invariant set is built once per evaluation of the comprehension.
        let (c, ty) = typed_src(
            "product(x.shape[i] for i in range(x.ndim) if i not in ({dim % x.ndim} if M else {d % x.ndim for d in N}))",
        );
        assert_eq!(ty, Ty::Int);
        assert_eq!(count(&c, "rt::Invariant::new()"), 1, "{c}");
        has(
            &c,
            "CmpOp::NotIn, &::tileops::roofline::Value::Int(py_i), __tileops_inv",
        );
        has(&c, ".get(|| ::core::result::Result::Ok(");
        // Not when the set reads the loop's variable, nor for an int among a display's ints.
        for src in [
            "[i for i in range(M) if i not in {i, 1}]",
            "[i for i in range(M) for j in N if i in [j]]",
            "[i for i in range(M) if i in (1, 2)]",
        ] {
            assert_eq!(count(&typed_src(src).0, "Invariant"), 0, "{src}");
        }
        // A tuple of dims as the whole formula is given as its Value.
        let (c, ty) = typed_src("x.shape[1:]");
        assert_eq!(ty, Ty::Value);
        has(&c, ".to_value()");
    }

    /// Typed code with `dim` of type `ty` and `M` an int.
    fn typed_with(src: &str, ty: Ty) -> (String, Ty) {
        let e = parse(src).unwrap_or_else(|e| panic!("{src:?}: {}", e.message));
        let c = check(&e, Layer::Vars, &scope());
        assert!(c.errors.is_empty(), "{src:?}: {:#?}", c.errors);
        let types = Types::new().with("dim", ty).with("M", Ty::Int);
        let (ts, ty) = codegen_typed(&e, &scope(), &types);
        syn::parse2::<syn::Expr>(ts.clone())
            .unwrap_or_else(|err| panic!("{src:?} generated invalid Rust: {err}\n{ts}"));
        (ts.to_string(), ty)
    }

    #[test]
    fn sets_of_axes_and_param_versions_compute_on_ints() {
        // TileOPs's reduction formula, in the version for a list of ints: the set comprehension
        // is collected on ints, rebuilt (and charged) per filter test as Python rebuilds it; no
        // `Value` anywhere, and the `isinstance` tests are gone.
        let reduction = "product(x.shape[i] for i in range(x.ndim) if i not in ({dim % x.ndim} if isinstance(dim, int) else {d % x.ndim for d in dim} if isinstance(dim, (list, tuple)) and len(dim) > 0 else set(range(x.ndim))))";
        let (c, ty) = typed_with(reduction, Ty::IntList);
        assert_eq!(ty, Ty::Int);
        assert_eq!(count(&c, "Value"), 0, "{c}");
        assert_eq!(count(&c, "is_instance"), 0, "{c}");
        has(
            &c,
            "let mut __tileops_set = ::tileops::__private_v0_1::rt::IntCollect::new();",
        );
        has(&c, "for __tileops_item in py_dim.ints() {");
        has(
            &c,
            "__tileops_set.push(::tileops::__private_v0_1::rt::int_mod(py_d, py_x.rank(\"x\")?)?)?;",
        );
        // `len(dim) > 0` is still tested: its branch is a `set(range(...))`, never built.
        has(&c, "if (true && (py_dim.len() > 0i128)) {");
        has(
            &c,
            "::tileops::__private_v0_1::rt::IntSetOf::from(::tileops::__private_v0_1::rt::range_set(&[py_x.rank(\"x\")?])?)",
        );
        // It reads no loop variable: built once per evaluation of the comprehension and kept,
        // its work charged again on each test.
        assert_eq!(count(&c, "rt::Invariant::new()"), 1, "{c}");
        has(
            &c,
            "! __tileops_inv1.get(|| ::core::result::Result::Ok(if (true && (py_dim.len() > 0i128)) {",
        );
        has(&c, "}))?.contains(__tileops_needle)");
        // For an int, the one-axis set display; for `None`, all the axes; each alone.
        let (c, _) = typed_with(reduction, Ty::Int);
        assert_eq!(count(&c, "Value"), 0, "{c}");
        has(
            &c,
            "! ::tileops::__private_v0_1::rt::int_set(__tileops_items)?.contains(__tileops_needle)",
        );
        assert_eq!(count(&c, "IntCollect"), 0, "{c}");
        let (c, _) = typed_with(reduction, Ty::None);
        assert_eq!(count(&c, "Value"), 0, "{c}");
        has(
            &c,
            "! ::tileops::__private_v0_1::rt::range_set(&[py_x.rank(\"x\")?])?.contains(__tileops_needle)",
        );
        assert_eq!(count(&c, "int_set"), 0, "{c}");
        // Iterating the sets: in the set's order, ascending.
        let (c, _) = typed_with(
            "product(x.shape[i] for i in ({dim % x.ndim} if isinstance(dim, int) else set(range(x.ndim))))",
            Ty::None,
        );
        has(
            &c,
            "for __tileops_item in ::tileops::__private_v0_1::rt::range_set(&[py_x.rank(\"x\")?])?.ints() {",
        );
        let (c, _) = typed_with("product(x.shape[i] for i in {dim, 0, dim})", Ty::Int);
        has(&c, "::tileops::__private_v0_1::rt::int_set({");
        has(&c, "[py_dim, 0i128, py_dim]");
        // A list or tuple of ints: `len`, `product`, truthiness and the type tests.
        let (c, ty) = typed_with("len(dim) * product(dim) if dim else M", Ty::IntTuple);
        assert_eq!(ty, Ty::Int);
        has(
            &c,
            "if !py_dim.is_empty() { ::tileops::__private_v0_1::rt::int_mul(py_dim.len(), py_dim.product()?)? } else { py_M }",
        );
        let (c, ty) = typed_with(
            "isinstance(dim, tuple) and not isinstance(dim, list)",
            Ty::IntTuple,
        );
        assert_eq!(ty, Ty::Bool);
        has(&c, "(true && (!false))");
        // Where a `Value` is needed, the list itself.
        let (c, ty) = typed_with("dim[0]", Ty::IntList);
        assert_eq!(ty, Ty::Value);
        has(&c, "py_dim.to_value(false)");
        // Scans of displays charge their items as the runtime's scan does.
        let (c, _) = typed_with("M in (1, 2)", Ty::Int);
        has(&c, "::tileops::__private_v0_1::rt::work(2usize)?;");
        // `sum`, `min`, `max` of a generator of ints fold on an int, as `product` does.
        let (c, ty) = typed_with("sum(d * 2 for d in dim) + min(d for d in dim)", Ty::IntList);
        assert_eq!(ty, Ty::Int);
        has(
            &c,
            "__tileops_fold = ::tileops::__private_v0_1::rt::int_add(__tileops_fold, ::tileops::__private_v0_1::rt::int_mul(py_d, 2i128)?)?;",
        );
        has(
            &c,
            "if __tileops_fold.is_none_or(|best| __tileops_elt < best) {",
        );
        has(
            &c,
            "__tileops_fold.ok_or_else(|| ::tileops::__private_v0_1::rt::empty_fold(\"min\"))?",
        );
        let (c, _) = typed_with("max(i for i in range(M))", Ty::Int);
        has(
            &c,
            "if __tileops_fold.is_none_or(|best| __tileops_elt > best) {",
        );
        // A `None` as a value is the literal; its tests fold.
        let (c, ty) = typed_with("dim", Ty::None);
        assert_eq!(ty, Ty::Value);
        has(&c, "::tileops::roofline::Value::None");
        let (c, ty) = typed_with("M if dim is not None else 7", Ty::None);
        assert_eq!((c.as_str(), ty), ("7i128", Ty::Int));
    }

    #[test]
    fn unchecked_trees_still_generate_code() {
        let s = scope();
        for src in [
            "x * 2",
            "x.dtype",
            "dim.real",
            "foo + 1",
            "product",
            "dim(1)",
            "x.shape()",
            "x.shape[1:2, 0]",
            "weight == None",
        ] {
            let e = parse(src).unwrap();
            let ts = codegen(&e, &s);
            syn::parse2::<syn::Expr>(ts.clone()).unwrap_or_else(|err| panic!("{src}: {err}"));
            has(&ts.to_string(), "::tileops::roofline::EvalError::new");
        }
        // Hand-built trees: a bad identifier, a slice outside a subscript, an empty chain.
        let name = Expr::new(ExprKind::Name("not an ident".into()), 0..0);
        has(&codegen(&name, &s).to_string(), "NameError");
        let slice = Expr::new(
            ExprKind::Slice {
                lower: None,
                upper: None,
                step: None,
            },
            0..0,
        );
        has(
            &codegen(&slice, &s).to_string(),
            "a slice outside a subscript",
        );
        let chain = Expr::new(
            ExprKind::Compare {
                left: Box::new(Expr::new(ExprKind::Int(i128::MIN), 0..0)),
                rest: Vec::new(),
            },
            0..0,
        );
        has(&codegen(&chain, &s).to_string(), "i128::MIN");
    }

    #[test]
    fn deepest_trees_do_not_overflow() {
        // The parser's limits keep the recursion here bounded; these sit just under them and run
        // on a test thread's 2 MiB stack.
        let scope = scope();
        let nested =
            |open: &str, close: &str, n: usize| format!("{}M{}", open.repeat(n), close.repeat(n));
        for src in [
            nested("(M + ", ")", 60),
            nested("-", "", 60),
            nested("[", "]", 60),
            nested("{", "}", 60),
            nested("f(", ")", 60),
            nested("[i for i in ", "]", 60),
            nested("product(i for i in ", ")", 45),
            nested("(M if ", " else K)", 60),
            nested("M[", "]", 60),
            vec!["M"; 99].join(" ** "),
            vec!["M"; 99].join(" + "),
            vec!["M"; 99].join(" < "),
        ] {
            let e = parse(&src).unwrap_or_else(|e| panic!("{}: {}", &src[..20], e.message));
            let _ = check(&e, Layer::Vars, &scope);
            let _ = check(&e, Layer::Arithmetic, &scope);
            let _ = codegen(&e, &scope).to_string();
            let _ = e.to_string();
        }
    }
}
