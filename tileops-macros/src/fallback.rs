//! What the macro emits when it found problems: the errors, and the struct with a stub method.
//!
//! Emitting the struct and an `eval_roofline` with the right signature keeps the rest of the crate
//! compiling against them, so one manifest mistake gives one error rather than a cascade of
//! "no method named `eval_roofline`".

use crate::expand::{Problem, rebuild_tracking, roofline_model_impl};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use std::path::PathBuf;
use syn::ItemStruct;
use tileops_manifest::diagnostic::Diagnostic;

/// The compile errors (`diagnostics` at `span`, the op name; each of `problems` at its own span,
/// when it has one), the unchanged struct, and a stub `eval_roofline` (never run: the crate
/// does not compile).
pub fn fallback(
    item: &ItemStruct,
    op_name: &str,
    register: bool,
    diagnostics: &[Diagnostic],
    problems: &[Problem],
    span: Span,
    tracked: &[PathBuf],
) -> TokenStream {
    let mut errors = to_compile_errors(diagnostics, span);
    // Rust-side problems (a missing field) go where the Rust source has a place for them.
    for problem in problems {
        errors.extend(to_compile_errors(
            std::slice::from_ref(&problem.diagnostic),
            problem.span.unwrap_or(span),
        ));
    }
    let ident = &item.ident;
    let (impl_generics, ty_generics, where_clause) = item.generics.split_for_impl();
    let model = if register {
        roofline_model_impl(item, op_name)
    } else {
        TokenStream::new()
    };
    let tracking = rebuild_tracking(tracked);
    quote! {
        #errors
        #item
        impl #impl_generics #ident #ty_generics #where_clause {
            #[allow(dead_code)]
            pub fn eval_roofline(&self) -> ::core::result::Result<::tileops::Roofline, ::tileops::RooflineError> {
                ::core::unreachable!("the manifest entry did not compile")
            }
        }
        #model
        #tracking
    }
}

/// One `compile_error!` per diagnostic, at `span`.
pub fn to_compile_errors(diagnostics: &[Diagnostic], span: Span) -> TokenStream {
    diagnostics
        .iter()
        .map(|d| {
            let message = d.render();
            quote_spanned! { span => ::core::compile_error! { #message } }
        })
        .collect()
}
