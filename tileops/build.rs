//! Makes cargo rebuild tileops when a file appears in or disappears from `manifest/`.
//!
//! `#[roofline_op]` already tracks every manifest file it reads (`include_bytes!`), so an edit
//! triggers a rebuild; a *new* family file is only noticed through the directory itself.
fn main() {
    println!("cargo:rerun-if-changed=manifest");
    println!("cargo:rerun-if-changed=build.rs");
}
