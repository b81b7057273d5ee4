//! The user's bench: tileops's bench CLI over every op linked into this binary, the user's
//! `scaled_residual_add` among tileops's own (`cargo run --bin bench -- --list`).

// Nothing here names the library's items, and rustc links no crate that is not named: this line
// links it, and with it the registration of its ops, which `inventory` collects at start-up.
extern crate tileops_downstream_example;

fn main() -> std::process::ExitCode {
    tileops_bench::cli::bench_main()
}
