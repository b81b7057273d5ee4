//! Which of tileops's kernel entry points the emulated runs launched.
//!
//! ```text
//! cuda-emu-coverage DIR     # DIR: the CUDA_EMU_COVERAGE_DIR of the runs (launched-<pid>.txt files)
//! ```
//!
//! Prints `entry points launched: L of T` (naming the host stand-ins) and every entry that never
//! launched; exits 1 when one did not.

use std::collections::BTreeSet;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: cuda-emu-coverage DIR");
        return ExitCode::from(2);
    };
    let mut launched = BTreeSet::new();
    let listing = match std::fs::read_dir(&dir) {
        Ok(listing) => listing,
        Err(e) => {
            eprintln!(
                "cuda-emu-coverage: {}: {e}",
                std::path::Path::new(&dir).display()
            );
            return ExitCode::from(2);
        }
    };
    for file in listing.flatten() {
        if let Ok(text) = std::fs::read_to_string(file.path()) {
            launched.extend(text.lines().map(str::to_owned));
        }
    }
    // The emulator's own self-test kernels are not tileops entry points.
    let tileops: Vec<_> = cuda_emu::entries()
        .iter()
        .filter(|e| e.file != "planted.cu")
        .collect();
    let missing: Vec<_> = tileops
        .iter()
        .filter(|e| !launched.contains(e.name))
        .collect();
    let stand_ins: Vec<String> = cuda_emu::stand_ins()
        .iter()
        .map(|(name, why)| format!("{name}: {why}"))
        .collect();
    for entry in &missing {
        println!("never launched: {} ({})", entry.name, entry.file);
    }
    println!(
        "entry points launched: {} of {} ({})",
        tileops.len() - missing.len(),
        tileops.len(),
        stand_ins.join("; ")
    );
    if missing.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
