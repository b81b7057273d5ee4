//! Compile-fail UI tests: each manifest mistake is a compile error located in the YAML.
//!
//! One test file per error class of `design/formula-language.md`, plus structural errors, a YAML
//! syntax error, a missing manifest, an unknown op, a missing struct field and a spec-only entry.
//! The `.stderr` snapshots are the messages a user sees. Regenerate with `TRYBUILD=overwrite`.
//!
//! A test binary of its own (`cargo test --test ui`), not a module of `it`: its one test sets a
//! variable in the process's environment for trybuild's cargo, which is sound only while no other
//! thread of the process reads or writes the environment.

#[test]
fn manifest_mistakes_are_compile_errors_located_in_the_yaml() {
    // trybuild compiles the cases in its own crate under target/; the macro resolves
    // `manifest = "..."` against this variable instead, so fixture paths stay relative here.
    // SAFETY: this test binary has a single test, so no other thread reads the environment.
    unsafe { std::env::set_var("TILEOPS_MANIFEST_BASE_DIR", env!("CARGO_MANIFEST_DIR")) };
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
