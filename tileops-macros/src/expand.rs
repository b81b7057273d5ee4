//! Code generation: the struct, its `eval_roofline`, and its registration.
//!
//! Block 1 binds only the names the formulas reference (struct fields, `elem_bytes`, fixed-rank dims)
//! and then resolves `vars` in declaration order; Block 2 evaluates `flops` and `bytes`. Each formula
//! is copied into plain Rust by the formula codegen; nothing parses a formula at run time.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use std::collections::BTreeSet;
use std::path::PathBuf;
use syn::ItemStruct;
use tileops_manifest::diagnostic::Diagnostic;
use tileops_manifest::formula;
use tileops_manifest::manifest::{Entry, TensorDecl};
use tileops_manifest::validate::{CheckedFormula, CheckedRoofline};
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
    /// Manifest files read, for rebuild tracking.
    pub tracked: &'a [PathBuf],
}

/// `const _` items that make cargo rebuild the crate when a manifest file it read changes.
pub fn rebuild_tracking(tracked: &[PathBuf]) -> TokenStream {
    let paths = tracked.iter().map(|p| p.to_string_lossy().into_owned());
    quote! {
        const _: () = { #( const _: &[u8] = ::core::include_bytes!(#paths); )* };
    }
}

/// Generate the code, or the problems that prevent it.
pub fn expand(x: &Expansion<'_>) -> Result<TokenStream, Vec<Diagnostic>> {
    let ident = &x.item.ident;
    let (impl_generics, ty_generics, where_clause) = x.item.generics.split_for_impl();
    let entry = x.entry;
    let op_name = entry.name.as_str();
    let body = match x.roofline {
        CheckedRoofline::Func(path) => quote! { #path(self) },
        CheckedRoofline::Inline { vars, flops, bytes } => inline_body(x, vars, flops, bytes)?,
    };
    let (line, _) = entry.file.line_col(entry.offset);
    let doc = format!(
        "FLOPs and bytes of one call, from the manifest entry `{op_name}` (`{}:{line}`).\n\n{}",
        entry.file.display_path,
        formula_doc(x.roofline),
    );
    let registration = if x.register {
        registration(x)?
    } else {
        TokenStream::new()
    };
    let item = x.item;
    let tracking = rebuild_tracking(x.tracked);
    Ok(quote! {
        #item

        impl #impl_generics #ident #ty_generics #where_clause {
            #[doc = #doc]
            #[allow(non_snake_case, unused_variables, clippy::redundant_closure_call, clippy::all)]
            pub fn eval_roofline(&self) -> ::core::result::Result<::tileops::Roofline, ::tileops::RooflineError> {
                #body
            }
        }

        #registration
        #tracking
    })
}

fn formula_doc(roofline: &CheckedRoofline) -> String {
    match roofline {
        CheckedRoofline::Func(path) => format!(
            "Computed by `{}`.",
            quote!(#path).to_string().replace(' ', "")
        ),
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

fn py_ident(name: &str) -> syn::Ident {
    format_ident!("py_{}", name)
}

/// The Rust expression that evaluates one formula, with its error wrapped to name the op and field.
fn evaluate(op: &str, f: &CheckedFormula) -> TokenStream {
    let code = formula::codegen(&f.expr, &f.scope);
    let field = f.source.field.as_str();
    let text = f.source.text.as_str();
    quote! {
        match (|| -> ::core::result::Result<::tileops::roofline::Value, ::tileops::roofline::EvalError> {
            ::core::result::Result::Ok(#code)
        })() {
            ::core::result::Result::Ok(value) => value,
            ::core::result::Result::Err(err) => {
                return ::core::result::Result::Err(::tileops::RooflineError::evaluation(#op, #field, #text, err));
            }
        }
    }
}

fn inline_body(
    x: &Expansion<'_>,
    vars: &[(String, CheckedFormula)],
    flops: &CheckedFormula,
    bytes: &CheckedFormula,
) -> Result<TokenStream, Vec<Diagnostic>> {
    let entry = x.entry;
    let op = entry.name.as_str();
    let var_names: BTreeSet<&str> = vars.iter().map(|(n, _)| n.as_str()).collect();
    let referenced: BTreeSet<&str> = vars
        .iter()
        .map(|(_, f)| f)
        .chain([flops, bytes])
        .flat_map(|f| f.names.iter().map(String::as_str))
        .filter(|n| !var_names.contains(n))
        .collect();

    // Which struct fields Block 1 reads, in manifest order.
    let mut needed_fields: Vec<String> = Vec::new();
    let mut need = |name: &str| {
        if !needed_fields.iter().any(|f| f == name) {
            needed_fields.push(name.to_owned());
        }
    };
    let mut bindings = Vec::new();
    for input in &entry.inputs {
        if referenced.contains(input.name.as_str()) {
            need(&input.name);
            let (py, field) = (py_ident(&input.name), format_ident!("{}", input.name));
            bindings.push(quote! { let #py = ::tileops::roofline::__rt::input(&self.#field); });
        }
    }
    for param in &entry.params {
        if referenced.contains(param.name.as_str()) {
            need(&param.name);
            let (py, field) = (py_ident(&param.name), format_ident!("{}", param.name));
            bindings.push(quote! { let #py = ::tileops::roofline::__rt::param(&self.#field); });
        }
    }
    if referenced.contains("elem_bytes") {
        let Some(first) = entry.inputs.first() else {
            return Err(vec![Diagnostic::at(
                &entry.file,
                entry.offset,
                entry.name.len(),
                format!(
                    "{op}: `elem_bytes` is the byte size of the first input's dtype, but the signature declares no inputs"
                ),
            )]);
        };
        need(&first.name);
        let field = format_ident!("{}", first.name);
        let name = first.name.as_str();
        bindings.push(bind_checked(
            op,
            "elem_bytes",
            "elem_bytes",
            quote! {
                ::tileops::roofline::__rt::input(&self.#field).elem_bytes(#name)?
            },
        ));
    }
    for input in fixed_rank_inputs(&entry.inputs) {
        let dims = input.shape.as_deref().unwrap_or_default();
        if !dims.iter().any(|(d, _)| referenced.contains(d.as_str())) {
            continue;
        }
        need(&input.name);
        let field = format_ident!("{}", input.name);
        let name = input.name.as_str();
        let rank = dims.len();
        let dims_ident = format_ident!("__tileops_dims_{}", input.name);
        let shape_text = format!(
            "[{}]",
            dims.iter()
                .map(|(d, _)| d.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let field_label = format!("{name}.shape");
        bindings.push(quote! {
            let #dims_ident: ::std::vec::Vec<::tileops::roofline::Value> =
                match ::tileops::roofline::__rt::input(&self.#field).fixed_dims(#name, #rank) {
                    ::core::result::Result::Ok(dims) => dims,
                    ::core::result::Result::Err(err) => {
                        return ::core::result::Result::Err(::tileops::RooflineError::evaluation(#op, #field_label, #shape_text, err));
                    }
                };
        });
        for (index, (dim, _)) in dims.iter().enumerate() {
            if referenced.contains(dim.as_str()) {
                let py = py_ident(dim);
                bindings.push(quote! { let #py = #dims_ident[#index].clone(); });
            }
        }
    }
    check_fields(x, &needed_fields)?;

    let var_bindings = vars.iter().map(|(name, f)| {
        let py = py_ident(name);
        let value = evaluate(op, f);
        quote! { let #py: ::tileops::roofline::Value = #value; }
    });
    let (flops_value, bytes_value) = (evaluate(op, flops), evaluate(op, bytes));
    let (flops_text, bytes_text) = (flops.source.text.as_str(), bytes.source.text.as_str());
    Ok(quote! {
        // Block 1: bind the referenced names, then resolve vars in declaration order.
        #(#bindings)*
        #(#var_bindings)*
        // Block 2: the arithmetic layer.
        let flops = #flops_value;
        let bytes = #bytes_value;
        ::core::result::Result::Ok(::tileops::Roofline {
            flops: ::tileops::roofline::__rt::to_count(&flops)
                .map_err(|err| ::tileops::RooflineError::evaluation(#op, "flops", #flops_text, err))?,
            bytes: ::tileops::roofline::__rt::to_count(&bytes)
                .map_err(|err| ::tileops::RooflineError::evaluation(#op, "bytes", #bytes_text, err))?,
        })
    })
}

/// `let py_<name> = <expr>;` where the expression may fail with an `EvalError`.
fn bind_checked(op: &str, name: &str, field: &str, expr: TokenStream) -> TokenStream {
    let py = py_ident(name);
    quote! {
        let #py: ::tileops::roofline::Value = match (|| -> ::core::result::Result<::tileops::roofline::Value, ::tileops::roofline::EvalError> {
            ::core::result::Result::Ok(#expr)
        })() {
            ::core::result::Result::Ok(value) => value,
            ::core::result::Result::Err(err) => {
                return ::core::result::Result::Err(::tileops::RooflineError::evaluation(#op, #field, #field, err));
            }
        };
    }
}

fn fixed_rank_inputs(inputs: &[TensorDecl]) -> impl Iterator<Item = &TensorDecl> {
    inputs.iter().filter(|i| i.shape.is_some())
}

/// Every name Block 1 reads must be a named field of the struct.
fn check_fields(x: &Expansion<'_>, needed: &[String]) -> Result<(), Vec<Diagnostic>> {
    let fields: Vec<String> = match &x.item.fields {
        syn::Fields::Named(named) => named
            .named
            .iter()
            .filter_map(|f| f.ident.as_ref())
            .map(ToString::to_string)
            .collect(),
        _ => Vec::new(),
    };
    let missing: Vec<&String> = needed.iter().filter(|n| !fields.contains(n)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let entry = x.entry;
    let describe = |name: &str| {
        if let Some(input) = entry.inputs.iter().find(|i| i.name == name) {
            let ty = if input.optional {
                "Option<TensorSpec>"
            } else {
                "TensorSpec"
            };
            format!("`{name}: {ty}` (input)")
        } else {
            format!("`{name}` (param: any type convertible into `tileops::roofline::Value`)")
        }
    };
    Err(vec![Diagnostic::at(
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
    )])
}

fn dtype_variant(name: &str) -> Option<TokenStream> {
    let variant = match name {
        "float32" => quote!(Float32),
        "float16" => quote!(Float16),
        "bfloat16" => quote!(BFloat16),
        "float64" => quote!(Float64),
        "int8" => quote!(Int8),
        "int16" => quote!(Int16),
        "int32" => quote!(Int32),
        "int64" => quote!(Int64),
        "uint8" => quote!(UInt8),
        "bool" => quote!(Bool),
        "float8_e4m3fn" => quote!(Float8E4M3Fn),
        "float8_e5m2" => quote!(Float8E5M2),
        _ => return None,
    };
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
        let shape = match &t.shape {
            Some(dims) => {
                let text = format!("[{}]", dims.iter().map(|(d, _)| d.as_str()).collect::<Vec<_>>().join(", "));
                quote!(::core::option::Option::Some(#text))
            }
            None => quote!(::core::option::Option::None),
        };
        quote! { ::tileops::registry::TensorDecl { name: #name, dtype: #dtype, shape: #shape, optional: #optional } }
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
            ::tileops::registry::Workload {
                label: #label,
                dtypes: &[#(#dtypes),*],
                shapes: &[#(#shapes),*],
                params: &[#(#params),*],
                bench_skip_reason: #skip,
            }
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let (name, family, file) = (&entry.name, &entry.family, &entry.file.display_path);
    let (inputs, outputs) = (tensor_decls(&entry.inputs), tensor_decls(&entry.outputs));
    let model = roofline_model_impl(x.item, name);
    Ok(quote! {
        #model

        ::tileops::__private::inventory::submit! {
            ::tileops::registry::OpRegistration {
                name: #name,
                family: #family,
                manifest_file: #file,
                inputs: #inputs,
                outputs: #outputs,
                workloads: &[#(#workloads),*],
                build: |device, case| {
                    let op = <#ident as ::tileops::registry::FromWorkload>::from_workload(device, case)?;
                    ::core::result::Result::Ok(::std::boxed::Box::new(op))
                },
            }
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
