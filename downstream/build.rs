//! Rebuilds the crate when a family file appears in or disappears from `manifest/`: `#[roofline_op]`
//! tracks the files it reads, a new one only through the directory.
fn main() {
    println!("cargo:rerun-if-changed=manifest");
}
