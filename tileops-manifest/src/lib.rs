//! The tileops manifest as a library: everything `#[roofline_op]` knows about a manifest, usable
//! by other tools (the `tileops-manifest check` command, build scripts, tests).
//!
//! The passes, each in its own module and unit-tested on strings:
//! - [`load`]: finding and reading manifest files (cached per process);
//! - [`yaml`] and [`manifest`]: the spanned YAML tree, then entries checked structurally;
//! - [`formula`]: the formula language (parse, layer checks, and the Rust code a formula becomes);
//! - [`validate`]: an entry's formulas checked against its signature;
//! - [`diagnostic`]: errors located in the YAML, rendered the way rustc renders its own;
//! - [`dtypes`]: the one table of dtype names;
//! - [`check`]: every entry of a whole manifest, as the `tileops-manifest check` command runs it.
//!
//! `tileops-macros` is a thin shim over these passes (as `sqlx-macros` is over
//! `sqlx-macros-core`): it adds the attribute's arguments, the expansion into `eval_roofline`,
//! and the fallback that turns diagnostics into `compile_error!`s.

pub mod check;
pub mod diagnostic;
pub mod dtypes;
pub mod formula;
pub mod load;
pub mod manifest;
pub mod validate;
pub mod yaml;
