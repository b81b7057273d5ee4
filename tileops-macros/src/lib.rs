//! `#[roofline_op]`: the compile-time half of tileops. Use it through `tileops::roofline_op`.
//!
//! The macro is a thin entry point over separate passes, each in its own module and unit-tested on
//! strings:
//! - [`args`]: the attribute's arguments;
//! - [`load`]: finding and reading manifest files (cached per compilation);
//! - [`yaml`] and [`manifest`]: the spanned YAML tree, then entries checked structurally;
//! - [`formula`]: the formula language (parse, layer checks, codegen);
//! - [`validate`]: an entry's formulas checked against its signature;
//! - [`expand`]: `eval_roofline` and the registration;
//! - [`fallback`]: on any error, the errors plus a stub, so one mistake gives one error.
//!
//! Every problem becomes a `compile_error!` whose message starts with the YAML location; the macro
//! never panics.

use proc_macro::TokenStream;

mod args;
mod diagnostic;
mod expand;
mod fallback;
mod formula;
mod load;
mod manifest;
mod pipeline;
mod validate;
mod yaml;

/// Reads the op's manifest entry at compile time and writes `eval_roofline` into the struct.
///
/// See the `tileops` crate for the full documentation and examples.
#[proc_macro_attribute]
pub fn roofline_op(args: TokenStream, item: TokenStream) -> TokenStream {
    pipeline::roofline_op(args.into(), item.into()).into()
}
