//! Compiles every kernel file with NVRTC for sm_90 (H100/H200) and sm_80 (A100), on any machine:
//! no GPU needed, only the pinned NVRTC wheels (`bash scripts/install-cuda-wheels.sh`).
//!
//! Checks ptxas's report (zero spill bytes for every entry point) and the PTX (the memory-bound
//! entries read and write with 128-bit global accesses). Without NVRTC it prints `SKIP: <reason>`
//! and passes, unless `TILEOPS_REQUIRE_NVRTC=1`, which makes a missing toolkit a failure.
//! `cargo test -p tileops --test it kernel_compile -- --nocapture` shows the register table.

use std::io::Write;
use std::path::Path;

use tileops::kernels::{self, SOURCES, Target};

const ARCHS: [u32; 2] = [90, 80];

/// Prints straight to stderr, past the test harness's output capture, so a skip is always seen.
fn announce(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn toolkit_or_skip(test: &str) -> bool {
    match kernels::toolkit() {
        Ok(toolkit) => {
            println!(
                "NVRTC {}.{} ({}), headers {}",
                toolkit.nvrtc_version.0,
                toolkit.nvrtc_version.1,
                toolkit
                    .nvrtc_library
                    .as_deref()
                    .map_or("found by the dynamic linker".into(), |p| p
                        .display()
                        .to_string()),
                toolkit.include_dir.display()
            );
            true
        }
        Err(err) if std::env::var("TILEOPS_REQUIRE_NVRTC").is_ok_and(|v| v == "1") => {
            panic!("TILEOPS_REQUIRE_NVRTC=1, but NVRTC is not usable: {err}")
        }
        Err(err) => {
            announce(&format!("SKIP: {test}: {err}"));
            false
        }
    }
}

#[test]
fn every_kernel_file_is_embedded_and_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    // The build script's own listing (`tileops/build/kernel_entries.rs`).
    let Ok(files) = crate::kernel_entries::kernel_files(&dir) else {
        // A test binary copied to a GPU machine runs without the source tree.
        announce(&format!(
            "SKIP: every_kernel_file_is_embedded_and_current: {} not found",
            dir.display()
        ));
        return;
    };
    assert!(!files.is_empty(), "no .cu files in {}", dir.display());
    for path in &files {
        let source = SOURCES
            .iter()
            .find(|s| s.path == path)
            .unwrap_or_else(|| panic!("{path} is not in tileops::kernels::SOURCES (rebuild)"));
        assert!(
            path.ends_with(source.file),
            "{path}: file name {}",
            source.file
        );
        let on_disk = std::fs::read_to_string(dir.join(path)).expect("readable kernel file");
        assert_eq!(
            source.source, on_disk,
            "{path}: the embedded copy is stale (rebuild)"
        );
    }
    assert_eq!(
        files.len(),
        SOURCES.len(),
        "SOURCES lists files that are not in {}",
        dir.display()
    );
}

#[test]
fn kernels_compile_for_sm90_and_sm80_without_spills() {
    if !toolkit_or_skip("kernels_compile_for_sm90_and_sm80_without_spills") {
        return;
    }
    let mut problems = Vec::new();
    println!(
        "{:<26} {:>5} {:>5} {:>6} {:>12} {:>11} {:>6}",
        "entry", "arch", "regs", "stack", "spill stores", "spill loads", "smem"
    );
    for source in SOURCES {
        for arch in ARCHS {
            let compiled =
                kernels::compile(source, Target::Sm(arch)).unwrap_or_else(|err| panic!("{err}"));
            assert!(
                compiled.cubin.as_ref().is_some_and(|c| !c.is_empty()),
                "{} sm_{arch}: no CUBIN",
                source.file
            );
            let usage = compiled.resource_usage();
            for entry in source.entries {
                let Some(u) = usage.iter().find(|u| u.function == entry.name) else {
                    problems.push(format!(
                        "{} sm_{arch}: no ptxas report for {}",
                        source.file, entry.name
                    ));
                    continue;
                };
                println!(
                    "{:<26} {:>5} {:>5} {:>6} {:>12} {:>11} {:>6}",
                    u.function,
                    format!("sm_{arch}"),
                    u.registers,
                    u.stack_bytes,
                    u.spill_stores,
                    u.spill_loads,
                    u.shared_bytes
                );
                if u.spill_stores != 0 || u.spill_loads != 0 {
                    problems.push(format!(
                        "{} sm_{arch}: {} spills ({} bytes stored, {} loaded)",
                        source.file, u.function, u.spill_stores, u.spill_loads
                    ));
                }
            }
            for u in &usage {
                if !source.entries.iter().any(|e| e.name == u.function) {
                    problems.push(format!(
                        "{}: entry {} has no `@entry` line in its file",
                        source.file, u.function
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let entries: usize = SOURCES.iter().map(|s| s.entries.len()).sum();
    announce(&format!(
        "kernel_compile: {} kernel files, {entries} entry points compiled for sm_90 and sm_80 by NVRTC, \
         0 spill bytes (--nocapture prints registers per entry)",
        SOURCES.len()
    ));
}

/// A kernel that calls every wrapper of `tileops_mma.cuh` once, so the header is compiled (and
/// its PTX checked) before any tileops kernel uses all of it.
const MMA_HEADER_PROBE: &str = r#"
#include "tileops_mma.cuh"
extern "C" __global__ void __launch_bounds__(32) mma_header_probe(const __nv_bfloat16* x, float* y, int valid) {
    __shared__ alignas(16) __nv_bfloat16 tile[32 * 8];
    const int lane = threadIdx.x;
    cp_async_cg_16(&tile[lane * 8], x + lane * 8);
    cp_async_commit_group();
    cp_async_cg_16_zfill(&tile[lane * 8], x + lane * 8, lane < valid);
    cp_async_commit_group();
    cp_async_wait_group(1);
    cp_async_wait_group(0);
    __syncthreads();
    uint32_t a[4], b[2], b1[1], b2[2], b4[4], a1[1];
    ldmatrix_x4(a, &tile[lane * 8]);
    ldmatrix_x2(b, &tile[(lane % 16) * 8]);
    ldmatrix_x1(a1, &tile[(lane % 8) * 8]);
    ldmatrix_x1_trans(b1, &tile[(lane % 8) * 8]);
    ldmatrix_x2_trans(b2, &tile[(lane % 16) * 8]);
    ldmatrix_x4_trans(b4, &tile[lane * 8]);
    const uint32_t bx[2] = {b[0] ^ b1[0] ^ a1[0], b[1] ^ b2[0] ^ b2[1] ^ b4[0] ^ b4[1] ^ b4[2] ^ b4[3]};
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float d[4];
    mma_m16n8k16_bf16(d, a, bx, c);
    mma_m16n8k16_f16(c, a, bx, d);
    for (int i = 0; i < 4; ++i) y[lane * 4 + i] = c[i];
}
"#;

#[test]
fn the_tensor_core_header_compiles_to_its_instructions_for_sm90_and_sm80() {
    if !toolkit_or_skip("the_tensor_core_header_compiles_to_its_instructions_for_sm90_and_sm80") {
        return;
    }
    let source = kernels::KernelSource {
        file: "mma_header_probe.cu",
        path: "mma_header_probe.cu",
        source: MMA_HEADER_PROBE,
        entries: &[],
    };
    for arch in ARCHS {
        let compiled =
            kernels::compile(&source, Target::Sm(arch)).unwrap_or_else(|err| panic!("{err}"));
        assert!(
            compiled.cubin.as_ref().is_some_and(|c| !c.is_empty()),
            "sm_{arch}: no CUBIN"
        );
        let ptx = kernels::compile(&source, Target::Compute(arch))
            .unwrap_or_else(|err| panic!("{err}"))
            .ptx
            .expect("PTX for a virtual architecture");
        for instruction in [
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
            "ldmatrix.sync.aligned.m8n8.x1.shared.b16",
            "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
            "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16",
            "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
            "cp.async.cg.shared.global",
            "cp.async.commit_group",
            "cp.async.wait_group 1",
            "cp.async.wait_group 0",
        ] {
            assert!(
                ptx.contains(instruction),
                "compute_{arch}: {instruction} missing from the PTX"
            );
        }
        // The zero-filling form carries the source size as a fourth operand.
        assert!(
            ptx.lines()
                .any(|l| l.contains("cp.async.cg.shared.global") && l.matches(',').count() == 3),
            "compute_{arch}: no cp.async with a source size"
        );
        let usage = compiled.resource_usage();
        let probe = usage
            .iter()
            .find(|u| u.function == "mma_header_probe")
            .expect("a ptxas report for the probe");
        assert_eq!(
            (probe.spill_stores, probe.spill_loads),
            (0, 0),
            "sm_{arch}: spills"
        );
    }
}

/// Whether a PTX instruction line is a 128-bit global access of `op` (`ld` or `st`):
/// `ld.global.nc.v4.u32`, `st.global.v4.f32`, `ld.global.nc.L1::no_allocate.v2.u64`, ...
fn is_wide_global(line: &str, op: &str) -> bool {
    let Some(opcode) = line.split_whitespace().find(|tok| !tok.starts_with('@')) else {
        return false;
    };
    let parts: Vec<&str> = opcode.split('.').collect();
    if parts.first() != Some(&op) || !parts.contains(&"global") {
        return false;
    }
    let ty = parts.last().copied().unwrap_or_default();
    let bits: u32 = ty
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .unwrap_or(0);
    (parts.contains(&"v4") && bits == 32)
        || (parts.contains(&"v2") && bits == 64)
        || (parts.contains(&"v8") && bits == 16)
}

/// The PTX text of each `.entry`, by name.
fn ptx_entries(ptx: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in ptx.lines() {
        if let Some(rest) = line
            .trim_start()
            .strip_prefix(".visible .entry ")
            .or_else(|| line.trim_start().strip_prefix(".entry "))
        {
            let name = rest
                .split(|c: char| c == '(' || c.is_whitespace())
                .next()
                .unwrap_or_default()
                .to_owned();
            out.push((name, String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

#[test]
fn memory_bound_kernels_issue_128_bit_global_loads_and_stores() {
    if !toolkit_or_skip("memory_bound_kernels_issue_128_bit_global_loads_and_stores") {
        return;
    }
    let mut problems = Vec::new();
    for source in SOURCES {
        for arch in ARCHS {
            // The PTX NVRTC made on the way to the CUBIN (the same text a `compute_XX` compile
            // gives, `.target sm_XX`): with TILEOPS_KERNEL_CACHE set, the compile the test above
            // made, not a second one.
            let compiled =
                kernels::compile(source, Target::Sm(arch)).unwrap_or_else(|err| panic!("{err}"));
            let ptx = compiled
                .ptx
                .expect("NVRTC keeps the PTX of a CUBIN compile");
            let version = ptx
                .lines()
                .find(|l| l.starts_with(".version"))
                .unwrap_or("?");
            println!("{} sm_{arch}: PTX {version}", source.file);
            let entries = ptx_entries(&ptx);
            for entry in source.entries {
                let Some((_, body)) = entries.iter().find(|(name, _)| name == entry.name) else {
                    problems.push(format!(
                        "{} sm_{arch}: {} missing from the PTX",
                        source.file, entry.name
                    ));
                    continue;
                };
                let loads = body.lines().filter(|l| is_wide_global(l, "ld")).count();
                let stores = body.lines().filter(|l| is_wide_global(l, "st")).count();
                println!(
                    "  {:<26} 128-bit loads {loads:>3}, stores {stores:>3}",
                    entry.name
                );
                if entry.vector_loads && loads == 0 {
                    problems.push(format!(
                        "{} sm_{arch}: {} has no 128-bit global load",
                        source.file, entry.name
                    ));
                }
                if entry.vector_stores && stores == 0 {
                    problems.push(format!(
                        "{} sm_{arch}: {} has no 128-bit global store",
                        source.file, entry.name
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn wide_access_recognition() {
    assert!(is_wide_global(
        "\tld.global.nc.v4.u32 \t{%r1, %r2, %r3, %r4}, [%rd4];",
        "ld"
    ));
    assert!(is_wide_global(
        "\t@%p1 ld.global.nc.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd4];",
        "ld"
    ));
    assert!(is_wide_global(
        "\tld.global.nc.L1::no_allocate.v2.u64 \t{%rd1, %rd2}, [%rd4];",
        "ld"
    ));
    assert!(is_wide_global(
        "\tst.global.v4.u32 \t[%rd7], {%r9, %r10, %r11, %r12};",
        "st"
    ));
    assert!(!is_wide_global("\tld.global.nc.f32 \t%f1, [%rd4];", "ld"));
    assert!(!is_wide_global(
        "\tld.shared.v4.u32 \t{%r1, %r2, %r3, %r4}, [%r5];",
        "ld"
    ));
    assert!(!is_wide_global(
        "\tst.global.v2.f32 \t[%rd7], {%f1, %f2};",
        "st"
    ));
}

/// The files of a cache directory, by name: its entries and anything else left there, but not
/// the lock files beside the entries (`<entry>.lock`, which other processes wait on), each checked
/// to belong to an entry.
fn cache_entries(dir: &Path) -> std::collections::BTreeSet<String> {
    let names: std::collections::BTreeSet<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| {
                    e.expect("a directory entry")
                        .file_name()
                        .into_string()
                        .expect("UTF-8")
                })
                .collect()
        })
        .unwrap_or_default();
    let (locks, rest): (std::collections::BTreeSet<String>, _) =
        names.into_iter().partition(|name| name.ends_with(".lock"));
    for lock in &locks {
        let entry = lock.replace(".lock", ".bin");
        assert!(
            rest.contains(&entry),
            "{lock}: a lock file without its entry {entry}"
        );
    }
    rest
}

#[test]
fn a_kernel_file_compiled_once_is_loaded_from_the_disk_cache() {
    if !toolkit_or_skip("a_kernel_file_compiled_once_is_loaded_from_the_disk_cache") {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cache = kernels::KernelCache::new(dir.path());
    // The smallest kernel file: this test compiles it twice.
    let source = SOURCES
        .iter()
        .min_by_key(|s| s.source.len())
        .expect("a kernel file");

    let sm90 = cache
        .compile(source, Target::Sm(90))
        .unwrap_or_else(|e| panic!("{e}"));
    let after_sm90 = cache_entries(dir.path());
    assert_eq!(after_sm90.len(), 1, "one entry per compile: {after_sm90:?}");
    let sm80 = cache
        .compile(source, Target::Sm(80))
        .unwrap_or_else(|e| panic!("{e}"));
    let after_sm80 = cache_entries(dir.path());
    assert_eq!(
        after_sm80.len(),
        2,
        "another target, another entry: {after_sm80:?}"
    );
    assert_ne!(sm90.cubin, sm80.cubin);

    // What the cache holds is what is returned: the sm_80 entry copied over the sm_90 one comes
    // back for sm_90, so the second compile read the disk instead of calling NVRTC.
    let sm90_entry = dir.path().join(after_sm90.iter().next().expect("one"));
    let sm80_entry = dir.path().join(
        after_sm80
            .difference(&after_sm90)
            .next()
            .expect("the sm_80 entry"),
    );
    let again = cache
        .compile(source, Target::Sm(90))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.cubin, sm90.cubin, "a hit returns the stored CUBIN");
    assert_eq!(again.log, sm90.log);
    std::fs::copy(&sm80_entry, &sm90_entry).expect("copy an entry");
    let planted = cache
        .compile(source, Target::Sm(90))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        planted.cubin, sm80.cubin,
        "the sm_90 compile did not read its entry"
    );

    // A truncated entry is a miss: compiled again and written whole.
    let bytes = std::fs::read(&sm90_entry).expect("read the entry");
    std::fs::write(&sm90_entry, &bytes[..bytes.len() / 2]).expect("truncate the entry");
    let recompiled = cache
        .compile(source, Target::Sm(90))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(recompiled.cubin, sm90.cubin, "NVRTC's own CUBIN again");
    assert_eq!(
        cache_entries(dir.path()),
        after_sm80,
        "rewritten in place, no temporary file left"
    );
    let rewritten = cache
        .compile(source, Target::Sm(90))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rewritten.cubin, sm90.cubin);
}
