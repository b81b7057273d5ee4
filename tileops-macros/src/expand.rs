//! Code generation: the struct, its `eval_roofline`, and its registration.
//!
//! The binding block binds only the names the formulas reference (struct fields, `elem_bytes`, fixed-rank dims)
//! and then resolves `vars` in declaration order; the arithmetic block evaluates `flops` and `bytes`. Each formula
//! is copied into plain Rust by the formula codegen; nothing parses a formula at run time.
//!
//! The binding block is flat: one `let` declares every name, then each is assigned in order. A `let` per name
//! would nest one debug-info scope per binding, and LLVM's DWARF writer recurses once per scope, so
//! an entry of a few thousand vars overflowed rustc's stack; assignments nest nothing.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use std::collections::BTreeSet;
use std::path::PathBuf;
use syn::ItemStruct;
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use tileops_manifest::diagnostic::Diagnostic;
use tileops_manifest::formula;
use tileops_manifest::manifest::{Entry, TensorDecl};
use tileops_manifest::validate::{CheckedFormula, CheckedFunc, CheckedRoofline};
use tileops_manifest::yaml::{Kind, Node};

/// Everything the expansion needs.
pub struct Expansion<'a> {
    /// The annotated struct, unchanged.
    pub item: &'a ItemStruct,
    /// Its manifest entry.
    pub entry: &'a Entry,
    /// The checked roofline.
    pub roofline: &'a CheckedRoofline,
    /// Whether to register the op.
    pub register: bool,
    /// Whether the formulas' typed parts compute on machine values (`false`: every part on the
    /// value runtime, the reference of the differential tests).
    pub typed: bool,
    /// Manifest files read, for rebuild tracking.
    pub tracked: &'a [PathBuf],
}

/// A problem found while expanding: located in the YAML and, when the Rust side has a place for it
/// (the struct's name, a field), spanned there too.
#[derive(Debug, Clone)]
pub struct Problem {
    /// What is wrong, and where in the manifest.
    pub diagnostic: Diagnostic,
    /// Where in the Rust source the compile error goes; `None` puts it at the op name.
    pub span: Option<Span>,
}

impl Problem {
    fn yaml(diagnostic: Diagnostic) -> Self {
        Problem {
            diagnostic,
            span: None,
        }
    }
}

/// `const _` items that make cargo rebuild the crate when a manifest file it read changes.
pub fn rebuild_tracking(tracked: &[PathBuf]) -> TokenStream {
    let paths = tracked.iter().map(|p| p.to_string_lossy().into_owned());
    quote! {
        const _: () = { #( const _: &[u8] = ::core::include_bytes!(#paths); )* };
    }
}

/// Generate the code, or the problems that prevent it.
pub fn expand(x: &Expansion<'_>) -> Result<TokenStream, Vec<Problem>> {
    let ident = &x.item.ident;
    let (impl_generics, ty_generics, where_clause) = x.item.generics.split_for_impl();
    let entry = x.entry;
    let op_name = entry.name.as_str();
    let body = match x.roofline {
        CheckedRoofline::Func(func) => func_body(entry, func),
        CheckedRoofline::Inline { vars, flops, bytes } => inline_body(x, vars, flops, bytes)?,
    };
    let (line, _) = entry.file.line_col(entry.offset);
    let doc = format!(
        "FLOPs and bytes of one call, from the manifest entry `{op_name}` (`{}:{line}`).\n\n{}",
        entry.file.display_path,
        formula_doc(x.roofline),
    );
    let registration = if x.register {
        registration(x).map_err(|d| d.into_iter().map(Problem::yaml).collect::<Vec<_>>())?
    } else {
        TokenStream::new()
    };
    let manifest_op = manifest_op_impl(x).map_err(|d| vec![Problem::yaml(d)])?;
    let item = x.item;
    let tracking = rebuild_tracking(x.tracked);
    Ok(quote! {
        #item

        impl #impl_generics #ident #ty_generics #where_clause {
            #[doc = #doc]
            #[allow(non_snake_case, unused_variables, unused_mut, unused_assignments, clippy::redundant_closure_call, clippy::all)]
            pub fn eval_roofline(&self) -> ::core::result::Result<::tileops::Roofline, ::tileops::RooflineError> {
                #body
            }
        }

        #manifest_op
        #registration
        #tracking
    })
}

/// `impl ManifestOp`: the entry's name, family, signature and param defaults, so the op's own
/// code states none of them again.
fn manifest_op_impl(x: &Expansion<'_>) -> Result<TokenStream, Diagnostic> {
    let entry = x.entry;
    let ident = &x.item.ident;
    let (impl_generics, ty_generics, where_clause) = x.item.generics.split_for_impl();
    let (name, family) = (&entry.name, &entry.family);
    let (inputs, outputs) = (tensor_decls(&entry.inputs), tensor_decls(&entry.outputs));
    let mut params = Vec::new();
    for p in &entry.params {
        let param = &p.name;
        let default = match &p.default {
            Some(node) => {
                let value = static_value(node).map_err(|why| {
                    Diagnostic::at(
                        &entry.file,
                        node.offset,
                        node.len,
                        format!("{}: param `{param}`: {why}", entry.name),
                    )
                })?;
                quote!(::core::option::Option::Some(#value))
            }
            None => quote!(::core::option::Option::None),
        };
        params.push(quote! { ::tileops::registry::ParamDecl::__new(#param, #default) });
    }
    // Each constant's own rustdoc names this entry (the trait's would show another op's
    // example on every op's page).
    let docs = [
        format!("The manifest entry's name: `{name}`."),
        format!("`{name}`'s family: `{family}`."),
        format!("`{name}`'s inputs, as its manifest signature declares them."),
        format!("`{name}`'s outputs, as its manifest signature declares them."),
        format!("`{name}`'s params, with the manifest's defaults."),
    ];
    let [name_doc, family_doc, inputs_doc, outputs_doc, params_doc] = &docs;
    Ok(quote! {
        impl #impl_generics ::tileops::registry::ManifestOp for #ident #ty_generics #where_clause {
            #[doc = #name_doc]
            const NAME: &'static str = #name;
            #[doc = #family_doc]
            const FAMILY: &'static str = #family;
            #[doc = #inputs_doc]
            const INPUTS: &'static [::tileops::registry::TensorDecl] = #inputs;
            #[doc = #outputs_doc]
            const OUTPUTS: &'static [::tileops::registry::TensorDecl] = #outputs;
            #[doc = #params_doc]
            const PARAMS: &'static [::tileops::registry::ParamDecl] = &[#(#params),*];
        }
    })
}

fn formula_doc(roofline: &CheckedRoofline) -> String {
    match roofline {
        CheckedRoofline::Func(func) => {
            let path = &func.path;
            let rust = quote!(#path).to_string().replace(' ', "");
            if func.dotted {
                format!(
                    "Computed by `{rust}`, which the manifest names in TileOPs's dotted form, `{}`.",
                    func.written
                )
            } else {
                format!("Computed by `{rust}`.")
            }
        }
        CheckedRoofline::Inline { vars, flops, bytes } => {
            let mut doc = String::from("```text\n");
            for (name, f) in vars {
                doc += &format!("{name} = {}\n", f.source.text);
            }
            doc += &format!(
                "flops = {}\nbytes = {}\n```",
                flops.source.text, bytes.source.text
            );
            doc
        }
    }
}

/// The body of a func-mode `eval_roofline`: the function called with `self`, written so that
/// rustc's own error, when the path does not resolve, names the manifest entry's place.
///
/// rustc resolves the path, not the macro, and its error is spanned at the attribute; what it
/// names is the module it searched. So the body imports the function's module under a name that
/// spells the place (file and line of the `func` string) and calls through it:
///
/// ```text
/// use ::tileops as __roofline_func_manifest_attention_yaml_line_45_tileops;
/// use __roofline_func_manifest_attention_yaml_line_45_tileops::perf::formulas
///     as __roofline_func_manifest_attention_yaml_line_45;
/// __roofline_func_manifest_attention_yaml_line_45::gqa_decode_roofline(self)
/// ```
///
/// A missing function is then "cannot find function `gqa_decode_roofline` in module
/// `__roofline_func_manifest_attention_yaml_line_45`", and a missing module "unresolved import
/// `__roofline_func_manifest_attention_yaml_line_45_tileops`", labelled "no `formulas` in `perf`"
/// (the root is imported first under its own such name because an import error names the import
/// that failed, while a path expression's names only the last module it reached, `perf`). Only a
/// missing root (an unknown crate or first module) reads as rustc's plain "unresolved import".
///
/// The imports are `use` items local to the body rather than a module beside the impl: a block's
/// `use` resolves a path exactly as the call itself would (relative paths, `super::`, `self::`,
/// items local to a function body), so no path is re-rooted, and the names cannot collide with
/// another op's. The module alias works whatever the prefix is (a module, a type for an
/// associated function, a trait); the last segment keeps its generic arguments, and the call sits
/// inside the (possibly generic) impl, as `f(self)` did. A path with no module to import (a bare
/// `f`, `self::f`), one through `Self`, or one whose module carries generic arguments (`use` takes
/// none) is called as written.
fn func_body(entry: &Entry, func: &CheckedFunc) -> TokenStream {
    let path = &func.path;
    let segments: Vec<&syn::PathSegment> = path.segments.iter().collect();
    let Some((last, prefix)) = segments.split_last() else {
        return quote! { #path(self) };
    };
    let first = prefix.first().map(|s| s.ident.to_string());
    let plain = prefix.is_empty()
        || prefix.iter().any(|s| !s.arguments.is_none())
        || first.as_deref() == Some("Self")
        || (first.as_deref() == Some("self") && prefix.len() == 1);
    if plain {
        return quote! { #path(self) };
    }
    // The root: what a `use` may alias on its own (a crate after `::`, `crate`, a run of `super`,
    // `self::m`, or the first name of a relative path).
    let root_len = match first.as_deref() {
        _ if path.leading_colon.is_some() => 1,
        Some("super") => prefix.iter().take_while(|s| s.ident == "super").count(),
        Some("self") => 2,
        _ => 1,
    };
    let (line, _) = entry.file.line_col(func.offset);
    let place: String = entry
        .file
        .display_path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let module = format_ident!("__roofline_func_{place}_line_{line}");
    let leading = path.leading_colon;
    let (root, rest) = prefix.split_at(root_len.min(prefix.len()));
    let import = if rest.is_empty() {
        quote! { use #leading #(#root)::* as #module; }
    } else {
        let root_name = root
            .last()
            .map_or_else(String::new, |s| s.ident.unraw().to_string());
        let root_alias = format_ident!("{module}_{root_name}");
        quote! {
            use #leading #(#root)::* as #root_alias;
            use #root_alias::#(#rest)::* as #module;
        }
    };
    quote! {
        #import
        #module::#last(self)
    }
}

/// `py_<name>`, the Rust local of a formula name. The manifest pass refuses names that are not
/// ASCII identifiers before codegen runs; this stays panic-free for any name regardless (a name it
/// cannot take is a located error, never a `format_ident!` panic).
fn py_ident(entry: &Entry, name: &str) -> Result<Ident, Problem> {
    let valid = tileops_manifest::manifest::names::is_identifier(name);
    if !valid {
        return Err(Problem::yaml(Diagnostic::at(
            &entry.file,
            entry.offset,
            entry.name.len(),
            format!(
                "{}: `{name}` is not an identifier, so it cannot be bound in Rust",
                entry.name
            ),
        )));
    }
    Ok(format_ident!("py_{}", name))
}

/// The Rust expression that evaluates one formula, with its error wrapped to name the op and
/// field, and its type: the formula's parts whose types are known compute on machine values
/// (`formula::codegen_typed`).
fn evaluate(
    op: &str,
    f: &CheckedFormula,
    types: Option<&formula::Types>,
) -> (TokenStream, formula::Ty) {
    let (code, ty) = match types {
        Some(types) => formula::codegen_typed(&f.expr, &f.scope, types),
        None => (formula::codegen(&f.expr, &f.scope), formula::Ty::Value),
    };
    let rust = match ty {
        formula::Ty::Int => quote!(::core::primitive::i128),
        formula::Ty::Bool => quote!(::core::primitive::bool),
        formula::Ty::Dims
        | formula::Ty::Value
        | formula::Ty::None
        | formula::Ty::IntList
        | formula::Ty::IntTuple => {
            quote!(::tileops::roofline::Value)
        }
    };
    let field = f.source.field.as_str();
    let text = f.source.text.as_str();
    let code = quote! {
        match (|| -> ::core::result::Result<#rust, ::tileops::roofline::EvalError> {
            ::core::result::Result::Ok(#code)
        })() {
            ::core::result::Result::Ok(value) => value,
            ::core::result::Result::Err(err) => {
                return ::core::result::Result::Err(::tileops::RooflineError::evaluation(#op, #field, #text, err));
            }
        }
    };
    (code, ty)
}

/// `flops` or `bytes` (the local `name`, of type `ty`) as a count: the runtime's `to_count` of
/// its value (`to_count_int` of an int), so a negative or oversized int is the same error on
/// either path.
fn count(name: &Ident, ty: formula::Ty) -> TokenStream {
    let rt = quote!(::tileops::__private_v0_1::rt);
    match ty {
        formula::Ty::Int => quote!(#rt::to_count_int(#name)),
        formula::Ty::Bool => quote!(#rt::to_count(&::tileops::roofline::Value::Bool(#name))),
        formula::Ty::Dims
        | formula::Ty::Value
        | formula::Ty::None
        | formula::Ty::IntList
        | formula::Ty::IntTuple => quote!(#rt::to_count(&#name)),
    }
}

/// Whether a param field is written as the formula value type (`Value`, `roofline::Value`, no
/// generic arguments): such a field can be lent to the formulas instead of cloned (the runtime
/// checks, by its `TypeId`, that it is one).
fn is_value_type(field: &syn::Field) -> bool {
    match &field.ty {
        syn::Type::Path(path) => {
            path.qself.is_none()
                && path
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "Value" && s.arguments.is_none())
        }
        _ => false,
    }
}

/// The type of a param's local: an int for a field of a Rust integer type, a bool for a `bool`
/// field, a value otherwise (a `Value`, an `Option`, a float, a str). A param that names a fixed
/// dim stays a value: its check against the shape matches on the `Value`.
fn param_ty(field: &syn::Field, names_a_dim: bool) -> formula::Ty {
    const INTS: &[&str] = &[
        "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "usize",
    ];
    let syn::Type::Path(path) = &field.ty else {
        return formula::Ty::Value;
    };
    let Some(ident) = path.path.get_ident() else {
        return formula::Ty::Value;
    };
    if names_a_dim || path.qself.is_some() {
        formula::Ty::Value
    } else if INTS.iter().any(|t| ident == t) {
        formula::Ty::Int
    } else if ident == "bool" {
        formula::Ty::Bool
    } else {
        formula::Ty::Value
    }
}

/// The struct's named fields by their names as the manifest spells them: `r#type` is `type`.
fn struct_fields(item: &ItemStruct) -> Vec<(String, &syn::Field)> {
    match &item.fields {
        syn::Fields::Named(named) => named
            .named
            .iter()
            .filter_map(|f| f.ident.as_ref().map(|i| (i.unraw().to_string(), f)))
            .collect(),
        _ => Vec::new(),
    }
}

fn find_field<'f>(fields: &[(String, &'f syn::Field)], name: &str) -> Option<&'f syn::Field> {
    fields.iter().find(|(n, _)| n == name).map(|(_, f)| *f)
}

/// `&self.<field>`, spanned at the field's type: when the type does not fit (a `u8` as a tensor
/// input), rustc's error points at the field rather than at the attribute.
fn field_ref(field: &syn::Field) -> TokenStream {
    let ident = field.ident.as_ref();
    quote_spanned! { field.ty.span() => &self.#ident }
}

/// Whether the struct's `dtype` field is a `DType` (by its written type: `DType`,
/// `tileops::DType`), the field TileOPs's `elem_bytes = self.dtype.itemsize` reads.
fn dtype_field<'f>(fields: &[(String, &'f syn::Field)]) -> Option<&'f syn::Field> {
    let (_, field) = fields.iter().find(|(name, _)| name == "dtype")?;
    match &field.ty {
        syn::Type::Path(path)
            if path.qself.is_none()
                && path
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "DType") =>
        {
            Some(field)
        }
        _ => None,
    }
}

/// The most versions of an entry's formulas [`inline_body`] generates, the general one aside:
/// each is a copy of the whole body, so the count bounds the code a param's union type adds.
const MAX_VERSIONS: usize = 4;

/// The body of `eval_roofline` for inline formulas.
///
/// A param held as a `Value` may hold any kind of value, so its parts of the formulas compute
/// on the value runtime. Where its declared `type:` admits an `int`, a `bool`, `None`, or a
/// list or tuple of ints, the body is generated once more per kind (and per combination of such
/// params, up to [`MAX_VERSIONS`]) with the param typed so; a `match` on the params' kinds
/// (`rt::param_kind`) runs the version for the values at hand, and the general body for any
/// other. Formulas are pure, so which version runs is invisible except in its speed:
/// `dim % x.ndim` is an `i128` operation when `dim` is an int, `dim if dim is not None else 0`
/// is `0` when it is `None`, and `{d % x.ndim for d in dim}` a set of ints when `dim` is a list
/// of ints.
fn inline_body(
    x: &Expansion<'_>,
    vars: &[(String, CheckedFormula)],
    flops: &CheckedFormula,
    bytes: &CheckedFormula,
) -> Result<TokenStream, Vec<Problem>> {
    let general = inline_version(x, vars, flops, bytes, &[])?;
    if !x.typed {
        return Ok(general);
    }
    let referenced = referenced_names(vars, flops, bytes);
    let fields = struct_fields(x.item);
    let all_dims = dim_names(x.entry);
    let mut specs: Vec<(&str, &syn::Field, Vec<formula::Ty>)> = Vec::new();
    let mut versions = 1usize;
    for param in &x.entry.params {
        let name = param.name.as_str();
        let Some(f) = find_field(&fields, name) else {
            continue;
        };
        let kinds = declared_kinds(param.ty.as_deref());
        if !referenced.contains(name)
            || all_dims.contains(name)
            || !is_value_type(f)
            || kinds.is_empty()
            || versions.saturating_mul(kinds.len()) > MAX_VERSIONS
        {
            continue;
        }
        versions *= kinds.len();
        specs.push((name, f, kinds));
    }
    if specs.is_empty() {
        return Ok(general);
    }
    let rt = quote!(::tileops::__private_v0_1::rt);
    let scrutinee: Vec<TokenStream> = specs
        .iter()
        .map(|(_, f, _)| {
            let access = field_ref(f);
            quote!(#rt::param_kind(#access))
        })
        .collect();
    // Every combination of the params' kinds, the first param's varying slowest.
    let mut combos: Vec<Vec<(String, formula::Ty)>> = vec![Vec::new()];
    for (name, _, kinds) in &specs {
        combos = combos
            .into_iter()
            .flat_map(|combo| {
                kinds.iter().map(move |k| {
                    let mut c = combo.clone();
                    c.push(((*name).to_owned(), *k));
                    c
                })
            })
            .collect();
    }
    let mut arms = Vec::new();
    for combo in &combos {
        let pats = combo.iter().map(|(name, ty)| {
            let bound = format_ident!("__tileops_kind_{}", name);
            match ty {
                formula::Ty::Int => quote!(#rt::ParamKind::Int(#bound)),
                formula::Ty::Bool => quote!(#rt::ParamKind::Bool(#bound)),
                formula::Ty::IntList => quote!(#rt::ParamKind::IntList(#bound)),
                formula::Ty::IntTuple => quote!(#rt::ParamKind::IntTuple(#bound)),
                _ => quote!(#rt::ParamKind::None),
            }
        });
        let body = inline_version(x, vars, flops, bytes, combo)?;
        arms.push(quote! { (#(#pats,)*) => { #body } });
    }
    Ok(quote! {
        match (#(#scrutinee,)*) {
            #(#arms)*
            _ => { #general }
        }
    })
}

/// The kinds of value of a param's declared `type:` that get a version of the formulas
/// ([`inline_body`]): its top-level alternatives `int`, `bool`, `None`, `list[int]` and
/// `tuple[int, ...]`, as types.
fn declared_kinds(ty: Option<&str>) -> Vec<formula::Ty> {
    let Some(ty) = ty else {
        return Vec::new();
    };
    let mut depth = 0i32;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in ty.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            '|' if depth == 0 => {
                parts.push(&ty[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&ty[start..]);
    let mut kinds = Vec::new();
    for part in parts {
        let kind = match part.trim() {
            "int" => formula::Ty::Int,
            "bool" => formula::Ty::Bool,
            "None" => formula::Ty::None,
            "list[int]" => formula::Ty::IntList,
            "tuple[int, ...]" => formula::Ty::IntTuple,
            _ => continue,
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds
}

/// The names the formulas read from outside the vars: a var's formula sees only the vars
/// declared before it, so a dim that a later var reuses is still read from the shape.
fn referenced_names<'f>(
    vars: &'f [(String, CheckedFormula)],
    flops: &'f CheckedFormula,
    bytes: &'f CheckedFormula,
) -> BTreeSet<&'f str> {
    let mut declared: BTreeSet<&str> = BTreeSet::new();
    let mut referenced: BTreeSet<&str> = BTreeSet::new();
    for (name, f) in vars {
        referenced.extend(
            f.names
                .iter()
                .map(String::as_str)
                .filter(|n| !declared.contains(n)),
        );
        declared.insert(name);
    }
    for f in [flops, bytes] {
        referenced.extend(
            f.names
                .iter()
                .map(String::as_str)
                .filter(|n| !declared.contains(n)),
        );
    }
    referenced
}

/// The names of the dims the entry's inputs declare.
fn dim_names(entry: &Entry) -> BTreeSet<&str> {
    entry
        .inputs
        .iter()
        .flat_map(|i| i.dims().map(|(_, d, _)| d))
        .collect()
}

/// One version of the body: `kinds` gives the params this version types (an int or bool
/// param's local is bound by the caller's `match` to `__tileops_kind_<name>`; a `None` one is
/// `()`), every other param as the struct holds it.
fn inline_version(
    x: &Expansion<'_>,
    vars: &[(String, CheckedFormula)],
    flops: &CheckedFormula,
    bytes: &CheckedFormula,
    kinds: &[(String, formula::Ty)],
) -> Result<TokenStream, Vec<Problem>> {
    let entry = x.entry;
    let op = entry.name.as_str();
    let referenced = referenced_names(vars, flops, bytes);

    let fields = struct_fields(x.item);
    let field = |name: &str| find_field(&fields, name);
    let mut problems = Vec::new();
    // Which struct fields the binding block reads, in manifest order; the missing ones are reported together.
    let mut needed: Vec<String> = Vec::new();
    let mut need = |name: &str| {
        if !needed.iter().any(|f| f == name) {
            needed.push(name.to_owned());
        }
    };
    // Every local the binding block assigns, declared by one `let` (see the module docs).
    let mut locals: Vec<Ident> = Vec::new();
    let mut declare = |ident: &Ident| {
        if !locals.contains(ident) {
            locals.push(ident.clone());
        }
    };
    let mut bindings = Vec::new();
    let py = |name: &str, problems: &mut Vec<Problem>| match py_ident(entry, name) {
        Ok(ident) => Some(ident),
        Err(problem) => {
            problems.push(problem);
            None
        }
    };

    for input in &entry.inputs {
        if !referenced.contains(input.name.as_str()) {
            continue;
        }
        need(&input.name);
        if let (Some(local), Some(f)) = (py(&input.name, &mut problems), field(&input.name)) {
            declare(&local);
            let access = field_ref(f);
            bindings.push(quote! { #local = ::tileops::__private_v0_1::rt::input(#access); });
        }
    }
    // What the formulas may compute on machine values: the typed params, then each var's type
    // in declaration order (a later var reads the earlier ones'). A var named like a dim of an
    // input stays a value: a formula before it reads the dim through the same local.
    let all_dims = dim_names(entry);
    let mut types = formula::Types::new();
    for param in &entry.params {
        if !referenced.contains(param.name.as_str()) {
            continue;
        }
        need(&param.name);
        if let (Some(local), Some(f)) = (py(&param.name, &mut problems), field(&param.name)) {
            declare(&local);
            let access = field_ref(f);
            let names_a_dim = all_dims.contains(param.name.as_str());
            if let Some((_, kind)) = kinds.iter().find(|(n, _)| *n == param.name) {
                types.names.insert(param.name.clone(), *kind);
                let bound = format_ident!("__tileops_kind_{}", param.name);
                bindings.push(match kind {
                    formula::Ty::None => quote! { #local = (); },
                    _ => quote! { #local = #bound; },
                });
                continue;
            }
            let ty = if x.typed {
                param_ty(f, names_a_dim)
            } else {
                formula::Ty::Value
            };
            let binding = match ty {
                formula::Ty::Int => {
                    types.names.insert(param.name.clone(), formula::Ty::Int);
                    quote! { #local = ::tileops::__private_v0_1::rt::int_param(#access); }
                }
                formula::Ty::Bool => {
                    types.names.insert(param.name.clone(), formula::Ty::Bool);
                    quote! { #local = *#access; }
                }
                // A param that names a dim stays owned: its check against the shape matches on
                // the `Value` itself.
                formula::Ty::Dims
                | formula::Ty::Value
                | formula::Ty::None
                | formula::Ty::IntList
                | formula::Ty::IntTuple
                    if x.typed && is_value_type(f) && !names_a_dim =>
                {
                    // Lent, not cloned: a list param is not copied per call.
                    quote! { #local = ::tileops::__private_v0_1::rt::param_value(#access); }
                }
                formula::Ty::Dims
                | formula::Ty::Value
                | formula::Ty::None
                | formula::Ty::IntList
                | formula::Ty::IntTuple => {
                    quote! { #local = ::tileops::__private_v0_1::rt::param(#access); }
                }
            };
            bindings.push(binding);
        }
    }
    let mut elem_bytes_from_input = false;
    if referenced.contains("elem_bytes") {
        let local = format_ident!("py_elem_bytes");
        declare(&local);
        if let Some(f) = dtype_field(&fields) {
            let access = field_ref(f);
            let bytes = quote_spanned! { f.ty.span() => ::tileops::DType::size_in_bytes(*#access) };
            bindings.push(if x.typed {
                quote! { #local = ::tileops::__private_v0_1::rt::extent(#bytes); }
            } else {
                quote! { #local = ::tileops::roofline::Value::from(#bytes); }
            });
        } else if let Some(first) = entry.inputs.first() {
            elem_bytes_from_input = true;
            need(&first.name);
            if let Some(f) = field(&first.name) {
                let access = field_ref(f);
                let name = first.name.as_str();
                let elem_bytes = if x.typed {
                    format_ident!("elem_bytes_int")
                } else {
                    format_ident!("elem_bytes")
                };
                bindings.push(quote! {
                    #local = match ::tileops::__private_v0_1::rt::input(#access).#elem_bytes(#name) {
                        ::core::result::Result::Ok(value) => value,
                        ::core::result::Result::Err(err) => {
                            return ::core::result::Result::Err(::tileops::RooflineError::evaluation(#op, "elem_bytes", "elem_bytes", err));
                        }
                    };
                });
            }
        } else {
            problems.push(Problem {
                diagnostic: Diagnostic::at(
                    &entry.file,
                    entry.offset,
                    entry.name.len(),
                    format!(
                        "{op}: `elem_bytes` is the byte size of the struct's `dtype: DType` field, or else of the first input's dtype; struct `{}` has no `dtype: DType` field and the signature declares no inputs",
                        x.item.ident
                    ),
                ),
                span: Some(x.item.ident.span()),
            });
        }
    }
    fixed_dims(
        x,
        &referenced,
        &fields,
        &mut need,
        &mut declare,
        &mut bindings,
        &mut problems,
    );
    if let Err(problem) = check_fields(x, &fields, &needed, elem_bytes_from_input) {
        problems.push(problem);
    }

    for (name, f) in vars {
        let Some(local) = py(name, &mut problems) else {
            continue;
        };
        declare(&local);
        let (value, ty) = evaluate(op, f, x.typed.then_some(&types));
        let value = match ty {
            formula::Ty::Int | formula::Ty::Bool if !all_dims.contains(name.as_str()) => {
                types.names.insert(name.clone(), ty);
                value
            }
            formula::Ty::Int => quote! { ::tileops::roofline::Value::Int(#value) },
            formula::Ty::Bool => quote! { ::tileops::roofline::Value::Bool(#value) },
            formula::Ty::Dims
            | formula::Ty::Value
            | formula::Ty::None
            | formula::Ty::IntList
            | formula::Ty::IntTuple => value,
        };
        bindings.push(quote! { #local = #value; });
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let declaration = if locals.is_empty() {
        TokenStream::new()
    } else {
        quote! { let (#(mut #locals,)*); }
    };
    let (flops_value, flops_ty) = evaluate(op, flops, x.typed.then_some(&types));
    let (bytes_value, bytes_ty) = evaluate(op, bytes, x.typed.then_some(&types));
    let flops_count = count(&format_ident!("flops"), flops_ty);
    let bytes_count = count(&format_ident!("bytes"), bytes_ty);
    let (flops_text, bytes_text) = (flops.source.text.as_str(), bytes.source.text.as_str());
    Ok(quote! {
        // The binding block: bind the referenced names, then resolve vars in declaration order.
        #declaration
        #(#bindings)*
        // The arithmetic block: flops and bytes.
        let flops = #flops_value;
        let bytes = #bytes_value;
        ::core::result::Result::Ok(::tileops::Roofline {
            flops: #flops_count
                .map_err(|err| ::tileops::RooflineError::evaluation(#op, "flops", #flops_text, err))?,
            bytes: #bytes_count
                .map_err(|err| ::tileops::RooflineError::evaluation(#op, "bytes", #bytes_text, err))?,
        })
    })
}

/// The referenced dims of fixed-rank inputs. Each input that declares one is read once (its rank
/// checked; an absent optional input is skipped); each dim takes its extent from the first input
/// present that declares it, and every other place that declares it must agree, or the evaluation
/// is a `RooflineError::DimMismatch` naming the dim, both places and both extents. A dim named like
/// a param binds nothing here (the param is the name's binding): each place is checked against the
/// param instead ([`dim_param_check`]).
#[allow(clippy::too_many_arguments)]
fn fixed_dims(
    x: &Expansion<'_>,
    referenced: &BTreeSet<&str>,
    fields: &[(String, &syn::Field)],
    need: &mut dyn FnMut(&str),
    declare: &mut dyn FnMut(&Ident),
    bindings: &mut Vec<TokenStream>,
    problems: &mut Vec<Problem>,
) {
    let entry = x.entry;
    let op = entry.name.as_str();
    let field = |name: &str| find_field(fields, name);
    // dim -> [(input index, axis)], in manifest order.
    let mut places: Vec<(&str, Vec<(usize, usize)>)> = Vec::new();
    for (index, input) in entry.inputs.iter().enumerate() {
        for (axis, dim, _) in input.dims() {
            if !referenced.contains(dim) {
                continue;
            }
            match places.iter_mut().find(|(d, _)| *d == dim) {
                Some((_, list)) => list.push((index, axis)),
                None => places.push((dim, vec![(index, axis)])),
            }
        }
    }
    let read: BTreeSet<usize> = places
        .iter()
        .flat_map(|(_, list)| list.iter().map(|(i, _)| *i))
        .collect();
    for &index in &read {
        let input = &entry.inputs[index];
        need(&input.name);
        let Some(f) = field(&input.name) else {
            continue;
        };
        let local = format_ident!("__tileops_dims_{}", index);
        declare(&local);
        let access = field_ref(f);
        let name = input.name.as_str();
        let rank = input.shape.as_ref().map_or(0, Vec::len);
        let label = format!("{name}.shape");
        let text = input.shape_text().unwrap_or_default();
        let skip_absent = if input.optional {
            quote! { if __tileops_input.is_none() { ::core::option::Option::None } else }
        } else {
            TokenStream::new()
        };
        bindings.push(quote! {
            #local = {
                let __tileops_input = ::tileops::__private_v0_1::rt::input(#access);
                #skip_absent {
                    if let ::core::result::Result::Err(err) = __tileops_input.fixed_dims(#name, #rank) {
                        return ::core::result::Result::Err(::tileops::RooflineError::evaluation(#op, #label, #text, err));
                    }
                    __tileops_input.spec().map(|spec| spec.shape.as_slice())
                }
            };
        });
    }
    for (dim, list) in &places {
        let local = match py_ident(entry, dim) {
            Ok(local) => local,
            Err(problem) => {
                problems.push(problem);
                continue;
            }
        };
        if list
            .iter()
            .any(|(i, _)| field(&entry.inputs[*i].name).is_none())
        {
            continue; // reported as a missing field
        }
        if entry.params.iter().any(|p| p.name == *dim) {
            // The param binds the name (bound above, from its field); the shape must agree.
            if field(dim).is_some() {
                bindings.push(dim_param_check(entry, dim, &local, list));
            }
            continue;
        }
        declare(&local);
        let sources = list.iter().map(|(index, axis)| {
            let name = entry.inputs[*index].name.as_str();
            let dims = format_ident!("__tileops_dims_{}", index);
            quote! { (#name, #axis, #dims) }
        });
        let (first_index, _) = list[0];
        let first = &entry.inputs[first_index];
        let label = format!("{}.shape", first.name);
        let text = first.shape_text().unwrap_or_default();
        let absent = format!(
            "AttributeError: 'NoneType' object has no attribute 'shape' (every input that declares dim `{dim}` is None)"
        );
        // A dim's local is an int for the typed formulas, unless a var of the same name reuses
        // the local (see `inline_body`), which makes it a value.
        let named_like_a_var = match x.roofline {
            CheckedRoofline::Inline { vars, .. } => vars.iter().any(|(name, _)| name == dim),
            CheckedRoofline::Func(_) => false,
        };
        let as_local = if named_like_a_var || !x.typed {
            quote!(::tileops::roofline::Value::from)
        } else {
            quote!(::tileops::__private_v0_1::rt::extent)
        };
        bindings.push(quote! {
            #local = {
                let mut __tileops_seen: ::core::option::Option<(&'static str, usize, usize)> = ::core::option::Option::None;
                for (input, axis, dims) in [#(#sources),*] {
                    let ::core::option::Option::Some(extent) = dims.and_then(|d: &[usize]| d.get(axis).copied()) else {
                        continue;
                    };
                    match __tileops_seen {
                        ::core::option::Option::None => __tileops_seen = ::core::option::Option::Some((input, axis, extent)),
                        ::core::option::Option::Some((first, first_axis, first_extent)) if first_extent != extent => {
                            return ::core::result::Result::Err(::tileops::RooflineError::DimMismatch {
                                op: #op,
                                dim: #dim,
                                first,
                                first_axis,
                                first_extent: first_extent as u64,
                                second: input,
                                second_axis: axis,
                                second_extent: extent as u64,
                            });
                        }
                        ::core::option::Option::Some(_) => {}
                    }
                }
                match __tileops_seen {
                    ::core::option::Option::Some((_, _, extent)) => #as_local(extent),
                    ::core::option::Option::None => {
                        return ::core::result::Result::Err(::tileops::RooflineError::evaluation(
                            #op, #label, #text, ::tileops::roofline::EvalError::new(#absent),
                        ));
                    }
                }
            };
        });
    }
}

/// The check for a dim named like a param (TileOPs's `a: [numel, k]` beside a param `k`): the
/// formulas read the param, so every input present that declares the dim must have the param's
/// value as its extent, or the evaluation is a `RooflineError::DimParamMismatch` naming the dim,
/// the input, the axis and both values. A param that is not an int (None, a float, a bool, a
/// list) can equal no extent: that is an evaluation error saying so, at the input's shape.
fn dim_param_check(
    entry: &Entry,
    dim: &str,
    param: &Ident,
    list: &[(usize, usize)],
) -> TokenStream {
    let op = entry.name.as_str();
    let sources = list.iter().map(|(index, axis)| {
        let input = &entry.inputs[*index];
        let name = input.name.as_str();
        let dims = format_ident!("__tileops_dims_{}", index);
        let label = format!("{name}.shape");
        let text = input.shape_text().unwrap_or_default();
        quote! { (#name, #axis, #dims, #label, #text) }
    });
    let not_an_int = format!(
        "TypeError: the param `{dim}` is {{}} (a {{}}), not an int, but it names the dim `{dim}` of `{{}}.shape[{{}}]`, whose extent ({{}}) it must equal"
    );
    quote! {
        for (input, axis, dims, label, text) in [#(#sources),*] {
            let ::core::option::Option::Some(extent) = dims.and_then(|d: &[usize]| d.get(axis).copied()) else {
                continue; // an absent optional input
            };
            match &#param {
                ::tileops::roofline::Value::Int(value) if *value == extent as i128 => {}
                ::tileops::roofline::Value::Int(value) => {
                    return ::core::result::Result::Err(::tileops::RooflineError::DimParamMismatch {
                        op: #op,
                        dim: #dim,
                        input,
                        axis,
                        extent: extent as u64,
                        param: *value,
                    });
                }
                other => {
                    return ::core::result::Result::Err(::tileops::RooflineError::evaluation(
                        #op, label, text,
                        ::tileops::roofline::EvalError::new(::std::format!(#not_an_int, other, other.type_name(), input, axis, extent)),
                    ));
                }
            }
        }
    }
}

/// Every name the binding block reads must be a named field of the struct. The error is located in the YAML
/// (the entry) and spanned at the struct's name.
fn check_fields(
    x: &Expansion<'_>,
    fields: &[(String, &syn::Field)],
    needed: &[String],
    elem_bytes_from_input: bool,
) -> Result<(), Problem> {
    let missing: Vec<&String> = needed
        .iter()
        .filter(|n| !fields.iter().any(|(f, _)| f == *n))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let entry = x.entry;
    let first_input = entry.inputs.first().map(|i| i.name.as_str());
    let describe = |name: &str| {
        if let Some(input) = entry.inputs.iter().find(|i| i.name == name) {
            let ty = if input.optional {
                "Option<TensorSpec>"
            } else {
                "TensorSpec"
            };
            let why = if elem_bytes_from_input && Some(name) == first_input {
                "; it also gives `elem_bytes`, which a `dtype: DType` field could give instead"
            } else {
                ""
            };
            format!("`{name}: {ty}` (input{why})")
        } else {
            format!("`{name}` (param: any type convertible into `tileops::roofline::Value`)")
        }
    };
    Err(Problem {
        diagnostic: Diagnostic::at(
            &entry.file,
            entry.offset,
            entry.name.len(),
            format!(
                "{}: struct `{}` lacks the field{} that eval_roofline reads: {}; the formulas reference {}",
                entry.name,
                x.item.ident,
                if missing.len() == 1 { "" } else { "s" },
                missing
                    .iter()
                    .map(|n| describe(n))
                    .collect::<Vec<_>>()
                    .join(", "),
                needed
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ),
        span: Some(x.item.ident.span()),
    })
}

/// `::tileops::DType::<Variant>` of a dtype name, from the manifest's dtype table (`None` for a
/// dtype tileops has no runtime type for).
fn dtype_variant(name: &str) -> Option<TokenStream> {
    let variant = tileops_manifest::dtypes::lookup(name)?.runtime_variant?;
    let variant = proc_macro2::Ident::new(variant, proc_macro2::Span::call_site());
    Some(quote!(::tileops::DType::#variant))
}

fn static_value(node: &Node) -> Result<TokenStream, String> {
    Ok(match &node.kind {
        Kind::Null => quote!(::tileops::registry::StaticValue::None),
        Kind::Bool(b) => quote!(::tileops::registry::StaticValue::Bool(#b)),
        Kind::Int(i) => quote!(::tileops::registry::StaticValue::Int(#i)),
        Kind::Float(f) => {
            let bits = f.to_bits();
            quote!(::tileops::registry::StaticValue::Float(f64::from_bits(#bits)))
        }
        Kind::Str(s) => quote!(::tileops::registry::StaticValue::Str(#s)),
        Kind::Seq(items) => {
            let items = items
                .iter()
                .map(static_value)
                .collect::<Result<Vec<_>, _>>()?;
            quote!(::tileops::registry::StaticValue::List(&[#(#items),*]))
        }
        Kind::Map(_) => return Err("a mapping cannot be a param value".to_owned()),
    })
}

fn tensor_decls(decls: &[TensorDecl]) -> TokenStream {
    let items = decls.iter().map(|t| {
        let (name, dtype, optional) = (&t.name, &t.dtype, t.optional);
        let shape = match t.shape_text() {
            Some(text) => quote!(::core::option::Option::Some(#text)),
            None => quote!(::core::option::Option::None),
        };
        quote! { ::tileops::registry::TensorDecl::__new(#name, #dtype, #shape, #optional) }
    });
    quote!(&[#(#items),*])
}

fn registration(x: &Expansion<'_>) -> Result<TokenStream, Vec<Diagnostic>> {
    let entry = x.entry;
    let ident = &x.item.ident;
    let mut errors = Vec::new();
    if !x.item.generics.params.is_empty() {
        errors.push(Diagnostic::unlocated(format!(
            "{}: a generic op struct cannot register itself; use `register = false`",
            entry.name
        )));
    }
    let mut workloads = Vec::new();
    for row in &entry.workloads {
        let mut dtypes = Vec::new();
        for d in &row.dtypes {
            match dtype_variant(d) {
                Some(v) => dtypes.push(v),
                None => errors.push(Diagnostic::at(
                    &entry.file,
                    entry.offset,
                    entry.name.len(),
                    format!(
                        "{}: workload `{}` uses dtype `{d}`, which tileops cannot run",
                        entry.name, row.label
                    ),
                )),
            }
        }
        let shapes = row
            .shapes
            .iter()
            .map(|(name, shape)| quote! { (#name, &[#(#shape),*]) });
        let mut params = Vec::new();
        // Row values first, then each declared default the row leaves out.
        let defaults = entry
            .params
            .iter()
            .filter_map(|p| p.default.as_ref().map(|d| (&p.name, d)));
        let given = row.params.iter().map(|(n, v)| (n, v));
        let mut seen = BTreeSet::new();
        for (name, node) in given.chain(defaults) {
            if !seen.insert(name.clone()) {
                continue;
            }
            match static_value(node) {
                Ok(value) => params.push(quote! { (#name, #value) }),
                Err(why) => errors.push(Diagnostic::at(
                    &entry.file,
                    node.offset,
                    node.len,
                    format!("{}: param `{name}`: {why}", entry.name),
                )),
            }
        }
        let label = &row.label;
        let skip = match &row.bench_skip_reason {
            Some(reason) => quote!(::core::option::Option::Some(#reason)),
            None => quote!(::core::option::Option::None),
        };
        workloads.push(quote! {
            ::tileops::registry::Workload::__new(
                #label,
                &[#(#dtypes),*],
                &[#(#shapes),*],
                &[#(#params),*],
                #skip,
            )
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let file = &entry.file.display_path;
    let model = roofline_model_impl(x.item, &entry.name);
    Ok(quote! {
        #model

        ::tileops::__private_v0_1::inventory::submit! {
            // The name, family and signature are those of the `ManifestOp` impl emitted beside
            // this one: stated once.
            ::tileops::registry::OpRegistration::__new::<#ident>(
                #file,
                &[#(#workloads),*],
                |device, case| {
                    let op = <#ident as ::tileops::registry::FromWorkload>::from_workload(device, case)?;
                    ::core::result::Result::Ok(::std::boxed::Box::new(op))
                },
            )
        }
    })
}

/// `impl RooflineModel`: what registration and the bench harness call.
pub fn roofline_model_impl(item: &ItemStruct, op_name: &str) -> TokenStream {
    let ident = &item.ident;
    let (impl_generics, ty_generics, where_clause) = item.generics.split_for_impl();
    quote! {
        impl #impl_generics ::tileops::registry::RooflineModel for #ident #ty_generics #where_clause {
            fn op_name(&self) -> &'static str {
                #op_name
            }
            fn roofline(&self) -> ::core::result::Result<::tileops::Roofline, ::tileops::RooflineError> {
                Self::eval_roofline(self)
            }
        }
    }
}
