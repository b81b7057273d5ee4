//! Building the ledger: every kernel file compiled by NVRTC for sm_90 with tileops's own
//! options ([`tileops::kernels::compile`]), its CUBIN disassembled by `nvdisasm`, each entry's
//! common path walked.
//!
//! nvdisasm is found beside the CUDA headers NVRTC uses (`<root>/include` → `<root>/bin`): the
//! pinned `nvidia-cuda-nvdisasm` wheel that `scripts/install-cuda-wheels.sh` installs.

use std::path::{Path, PathBuf};
use std::process::Command;

use tileops::kernels::{self, KernelSource, SOURCES, Target};

use super::cfg::Cfg;
use super::walk::WalkedLoop;
use super::{EntryLedger, Ledger, LedgerError, LoopLedger, LoopRole, Toolchain, sass, walk};

/// The architecture the ledger describes.
pub const ARCH: u32 = 90;

/// nvdisasm beside the toolkit's headers, and its version line.
pub fn nvdisasm() -> Result<(PathBuf, String), LedgerError> {
    let toolkit = kernels::toolkit().map_err(|e| LedgerError::Generate(e.to_string()))?;
    let path = toolkit
        .include_dir
        .parent()
        .map(|root| root.join("bin").join("nvdisasm"))
        .filter(|p| p.is_file())
        .ok_or_else(|| {
            LedgerError::Generate(format!(
                "no bin/nvdisasm beside {} (run scripts/install-cuda-wheels.sh)",
                toolkit.include_dir.display()
            ))
        })?;
    let out = Command::new(&path)
        .arg("--version")
        .output()
        .map_err(|e| LedgerError::Generate(format!("{}: {e}", path.display())))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // `Cuda compilation tools, release 13.2, V13.2.86`: the line that names the version.
    let version = text
        .lines()
        .find(|l| l.contains("release"))
        .or_else(|| text.lines().rfind(|l| !l.trim().is_empty()))
        .unwrap_or_default()
        .trim()
        .to_owned();
    Ok((path, version))
}

/// The toolchain that [`generate`] would use, without compiling anything.
pub fn toolchain() -> Result<Toolchain, LedgerError> {
    let toolkit = kernels::toolkit().map_err(|e| LedgerError::Generate(e.to_string()))?;
    let (_, version) = nvdisasm()?;
    Ok(Toolchain {
        arch: format!("sm_{ARCH}"),
        nvrtc: format!("{}.{}", toolkit.nvrtc_version.0, toolkit.nvrtc_version.1),
        nvdisasm: version,
    })
}

/// Element bytes from an entry's dtype: its last `_`-separated part that names one (`_f32`,
/// `_f16`, `_bf16`), the suffix (`relu_bf16`) or before a shape suffix
/// (`gqa_prefill_bf16_d128`, a name of that form); 4 when none does.
fn element_bytes(entry: &str) -> u32 {
    match entry
        .rsplit('_')
        .find(|part| matches!(*part, "f32" | "f16" | "bf16"))
    {
        Some("f16" | "bf16") => 2,
        _ => 4,
    }
}

/// Elements one loop iteration handles: the larger of the bytes it reads and writes in global
/// memory, over the element size. In a function with 16-byte accesses (`vector`) only those
/// count: its narrower accesses are row ends and per-row scalars, and a loop with none is a
/// per-row or per-thread loop, not a stream (0: fixed work).
pub fn elements_per_iteration(body: &super::Tally, vector: bool, element_bytes: u32) -> f64 {
    let (loads, stores) = if vector {
        (body.wide_loads * 16, body.wide_stores * 16)
    } else {
        (body.load_bytes, body.store_bytes)
    };
    f64::from(loads.max(stores)) / f64::from(element_bytes)
}

/// Each walked loop's role and elements per iteration:
/// - a loop whose accesses cover no element is [`LoopRole::Fixed`];
/// - so is a loop around a streaming loop (per row, per output: its own accesses are a row's
///   result or its first vectors, not the stream);
/// - a streaming loop right after a sibling streaming loop whose 16-byte loads and stores (all
///   loads and stores in a kernel without 16-byte accesses) are an exact multiple ≥ 2 of its
///   own is that loop's remainder ([`LoopRole::Remainder`]);
/// - the rest stream.
pub fn classify(walked: &[WalkedLoop], vector: bool, element_bytes: u32) -> Vec<LoopLedger> {
    let mut loops: Vec<LoopLedger> = walked
        .iter()
        .map(|w| {
            let elements = elements_per_iteration(&w.body, vector, element_bytes);
            LoopLedger {
                header: w.header,
                role: if elements > 0.0 {
                    LoopRole::Stream
                } else {
                    LoopRole::Fixed
                },
                elements_per_iteration: elements,
                body: w.body,
            }
        })
        .collect();
    let outer: Vec<u32> = walked
        .iter()
        .zip(&loops)
        .filter(|(_, l)| l.role == LoopRole::Stream)
        .filter_map(|(w, _)| w.parent)
        .collect();
    for l in &mut loops {
        if outer.contains(&l.header) {
            l.role = LoopRole::Fixed;
        }
    }
    let accesses = |t: &super::Tally| {
        if vector {
            (t.wide_loads, t.wide_stores)
        } else {
            (t.load_bytes, t.store_bytes)
        }
    };
    for i in 1..loops.len() {
        let (a, b) = (&loops[i - 1], &loops[i]);
        if a.role != LoopRole::Stream
            || b.role != LoopRole::Stream
            || walked[i - 1].parent != walked[i].parent
        {
            continue;
        }
        let ((al, as_), (bl, bs)) = (accesses(&a.body), accesses(&b.body));
        let k = al
            .checked_div(bl)
            .or_else(|| as_.checked_div(bs))
            .unwrap_or(0);
        if k >= 2 && al == k * bl && as_ == k * bs {
            loops[i].role = LoopRole::Remainder;
        }
    }
    loops
}

/// One kernel file compiled by NVRTC for `sm_<arch>` with tileops's options and its CUBIN
/// disassembled by `nvdisasm`: the functions, and what NVRTC returned (ptxas's report).
pub fn disassemble(
    source: &KernelSource,
    arch: u32,
    nvdisasm: &Path,
) -> Result<(Vec<sass::Function>, kernels::Compiled), LedgerError> {
    disassemble_text(source.file, source.source, kernels::HEADERS, arch, nvdisasm)
}

/// [`disassemble`] for a kernel file given by its text and the headers it includes (another
/// revision's sources).
pub fn disassemble_text(
    file: &'static str,
    text: &str,
    headers: &[(&str, &str)],
    arch: u32,
    nvdisasm: &Path,
) -> Result<(Vec<sass::Function>, kernels::Compiled), LedgerError> {
    let failed = |message: String| LedgerError::Generate(format!("{file}: {message}"));
    let compiled = kernels::compile_text(file, text, headers, Target::Sm(arch))
        .map_err(|e| failed(e.to_string()))?;
    let cubin = compiled
        .cubin
        .as_deref()
        .ok_or_else(|| failed("NVRTC returned no CUBIN".into()))?;
    let mut cubin_file = tempfile::Builder::new()
        .suffix(".cubin")
        .tempfile()
        .map_err(|e| failed(format!("temporary CUBIN: {e}")))?;
    std::io::Write::write_all(&mut cubin_file, cubin).map_err(|e| failed(e.to_string()))?;
    let out = Command::new(nvdisasm)
        .arg("-c")
        .arg(cubin_file.path())
        .output()
        .map_err(|e| failed(format!("{}: {e}", nvdisasm.display())))?;
    if !out.status.success() {
        return Err(failed(format!(
            "nvdisasm failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let disassembly = String::from_utf8_lossy(&out.stdout);
    let functions = sass::parse(&disassembly)?;
    Ok((functions, compiled))
}

/// The ledger of the entries `names` of one compiled kernel file.
fn entries_of(
    file: &str,
    functions: &[sass::Function],
    compiled: &kernels::Compiled,
    names: &[&str],
) -> Result<Vec<EntryLedger>, LedgerError> {
    let failed = |message: String| LedgerError::Generate(format!("{file}: {message}"));
    let usage = compiled.resource_usage();
    let mut entries = Vec::with_capacity(names.len());
    for &name in names {
        let function = functions
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| failed(format!("{name} is not in the disassembly")))?;
        let usage = usage
            .iter()
            .find(|u| u.function == name)
            .ok_or_else(|| failed(format!("no ptxas report for {name}")))?;
        let cfg = Cfg::build(function).map_err(failed)?;
        let path = walk::common_path(function, &cfg);
        let element_bytes = element_bytes(name);
        let vector = function
            .instructions
            .iter()
            .any(|i| matches!(i.global_access(), Some((_, 16))));
        let loops = classify(&path.loops, vector, element_bytes);
        entries.push(EntryLedger {
            entry: name.to_owned(),
            file: file.to_owned(),
            element_bytes,
            registers: usage.registers,
            stack_bytes: usage.stack_bytes,
            spill_bytes: usage.spill_stores + usage.spill_loads,
            static_smem: usage.shared_bytes,
            fixed: path.fixed,
            loops,
        });
    }
    Ok(entries)
}

/// The ledger of one kernel file's entries.
pub fn file_entries(
    source: &KernelSource,
    nvdisasm: &Path,
) -> Result<Vec<EntryLedger>, LedgerError> {
    let (functions, compiled) = disassemble(source, ARCH, nvdisasm)?;
    let names: Vec<&str> = source.entries.iter().map(|e| e.name).collect();
    entries_of(source.file, &functions, &compiled, &names)
}

/// The ledger of a kernel tree of another revision (its `tileops/kernels/`: `*.cuh` headers at
/// the top, `.cu` files in any directory below): every entry point ptxas reports, file by file
/// in path order. What the backtest prices: the kernels that ran on a GPU, built with today's
/// NVRTC options and walked by today's ledger.
pub fn generate_tree(root: &Path) -> Result<Ledger, LedgerError> {
    let toolchain = toolchain()?;
    let (nvdisasm, _) = nvdisasm()?;
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .map_err(|e| LedgerError::Generate(format!("{}: {e}", path.display())))
    };
    let mut headers = Vec::new();
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let listing = std::fs::read_dir(&dir)
            .map_err(|e| LedgerError::Generate(format!("{}: {e}", dir.display())))?;
        for item in listing {
            let path = item
                .map_err(|e| LedgerError::Generate(format!("{}: {e}", dir.display())))?
                .path();
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if path.is_dir() {
                stack.push(path);
            } else if name.ends_with(".cuh") && dir == root {
                headers.push((name, read(&path)?));
            } else if name.ends_with(".cu") {
                files.push(path);
            }
        }
    }
    files.sort();
    headers.sort();
    let header_refs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let mut entries = Vec::new();
    for path in &files {
        let text = read(path)?;
        // NVRTC names the program; the records name files by their base name.
        let file: &'static str = Box::leak(
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
                .into_boxed_str(),
        );
        let (functions, compiled) = disassemble_text(file, &text, &header_refs, ARCH, &nvdisasm)?;
        let names: Vec<String> = compiled
            .resource_usage()
            .into_iter()
            .map(|u| u.function)
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        entries.extend(entries_of(file, &functions, &compiled, &names)?);
    }
    Ok(Ledger { toolchain, entries })
}

/// Compiles, disassembles and walks every entry of every kernel file, on up to
/// `available_parallelism` threads (NVRTC dominates: about a minute of CPU for all files).
pub fn generate() -> Result<Ledger, LedgerError> {
    let toolchain = toolchain()?;
    let (nvdisasm, _) = nvdisasm()?;
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, SOURCES.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<Result<Vec<EntryLedger>, LedgerError>>> =
        (0..SOURCES.len()).map(|_| None).collect();
    let slots = std::sync::Mutex::new(&mut results);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(source) = SOURCES.get(i) else { break };
                    let result = file_entries(source, &nvdisasm);
                    if let Ok(mut slots) = slots.lock() {
                        slots[i] = Some(result);
                    }
                }
            });
        }
    });
    let mut entries = Vec::new();
    for (source, result) in SOURCES.iter().zip(results) {
        let result = result.ok_or_else(|| {
            LedgerError::Generate(format!("{}: a worker thread stopped", source.file))
        })?;
        entries.extend(result?);
    }
    Ok(Ledger { toolchain, entries })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Tally;

    fn walked(header: u32, parent: Option<u32>, wide_loads: u32, wide_stores: u32) -> WalkedLoop {
        WalkedLoop {
            header,
            parent,
            body: Tally {
                instructions: 10,
                wide_loads,
                wide_stores,
                load_bytes: wide_loads * 16,
                store_bytes: wide_stores * 16,
                ..Tally::default()
            },
        }
    }

    /// `reduce_rows`: a row loop around a four-vector loop and its one-vector remainder, then
    /// a reduction-tree loop with no global access.
    #[test]
    fn roles_of_outer_remainder_and_tree_loops() {
        let loops = classify(
            &[
                walked(0x100, None, 0, 0),
                walked(0x200, Some(0x100), 4, 0),
                walked(0x300, Some(0x100), 1, 0),
                walked(0x400, Some(0x100), 0, 0),
            ],
            true,
            2,
        );
        let roles: Vec<LoopRole> = loops.iter().map(|l| l.role).collect();
        use LoopRole::*;
        assert_eq!(roles, [Fixed, Stream, Remainder, Fixed]);
        assert_eq!(loops[1].elements_per_iteration, 32.0);
        assert_eq!(loops[2].elements_per_iteration, 8.0);
    }

    /// softmax's passes over the same row (max: loads; sum: loads; write: loads and stores)
    /// all stream: the write pass is no multiple of the sum pass.
    #[test]
    fn passes_over_one_row_all_stream() {
        let loops = classify(
            &[
                walked(0x100, None, 1, 0),
                walked(0x200, None, 1, 0),
                walked(0x300, None, 1, 1),
            ],
            true,
            4,
        );
        assert!(loops.iter().all(|l| l.role == LoopRole::Stream));
        // A second load-only pass of the same width is no remainder either (k = 1).
        assert_eq!(loops[1].elements_per_iteration, 4.0);
    }

    #[test]
    fn element_bytes_from_the_dtype_part_of_the_name() {
        assert_eq!(element_bytes("relu_bf16"), 2);
        assert_eq!(element_bytes("softmax_rows_v4_f32"), 4);
        assert_eq!(element_bytes("gqa_prefill_f16_d64"), 2);
        assert_eq!(element_bytes("gqa_prefill_bf16_d256"), 2);
        assert_eq!(element_bytes("gqa_decode_paged_fp8_bf16"), 2);
        assert_eq!(element_bytes("reduce_finish"), 4);
    }

    #[test]
    fn elements_count_16_byte_accesses_in_vector_kernels_only() {
        let body = Tally {
            wide_loads: 2,
            wide_stores: 1,
            load_bytes: 2 * 16 + 2,
            store_bytes: 16 + 2,
            ..Tally::default()
        };
        assert_eq!(elements_per_iteration(&body, true, 2), 16.0);
        assert_eq!(elements_per_iteration(&body, false, 2), 17.0);
    }
}
