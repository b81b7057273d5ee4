//! `#[roofline_op]`: the compile-time half of tileops. Use it through `tileops::roofline_op`.
//!
//! The macro is a thin entry point over the passes of the `tileops-manifest` library (loading,
//! the YAML model, structural checks, the formula language, validation, diagnostics). What is
//! particular to the attribute lives here, one module each:
//! - `args`: the attribute's arguments;
//! - `pipeline`: the passes in order, every error collected;
//! - `expand`: `eval_roofline` and the registration;
//! - `fallback`: on any error, the errors plus a stub, so one mistake gives one error.
//!
//! Every problem becomes a `compile_error!` whose message starts with the YAML location; the macro
//! never panics.

use proc_macro::TokenStream;

mod args;
mod expand;
mod fallback;
mod pipeline;

/// Reads the op's manifest entry at compile time and writes `eval_roofline` into the struct.
///
/// See the `tileops` crate for the full documentation and examples.
#[proc_macro_attribute]
pub fn roofline_op(args: TokenStream, item: TokenStream) -> TokenStream {
    pipeline::roofline_op(args.into(), item.into()).into()
}
