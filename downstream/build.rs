// `#[roofline_op]` tracks each manifest file it reads; this makes cargo also notice a new file.
fn main() {
    println!("cargo:rerun-if-changed=manifest");
}
