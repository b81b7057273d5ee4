//! The traffic ledger's gates (issue 21) on every op call of the coverage tests.
//!
//! On the emulated device with `CUDA_EMU_LEDGER` set, the emulator appends one JSON line per
//! launch to that file; in its AddressSanitizer build (scripts/emu-check.sh's pass C) each line
//! carries the launch's traffic. [`call`] runs one op call, reads the lines it added and checks
//! them with the emulator's own gate code (`cuda-emu/src/gate.rs`, included below):
//! - the unique bytes of the call within ±2% of its `eval_roofline` bytes (plus 32 B per tensor
//!   and direction for the sector rounding),
//! - every hot global access site at its ideal sectors per request,
//! - no shared-memory bank conflict at a hot site,
//!
//! unless [`EXCEPTIONS`] states why not. A failure names the op, the entry, the figure and the
//! bound; an exception that no call of its op needed by the end of its test fails too (stale).
//! Elsewhere (a GPU, the normal emulator build, no log) the gates are skipped; with
//! `TILEOPS_REQUIRE_LEDGER=1` a call without traffic fails instead.
//!
//! Calls are serialised through one lock while the log is read, and a call keeps only the lines
//! of its own thread's launches (`tid`), so the launches of concurrent tests cannot mix in.

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Mutex;

use tileops::{Device, Roofline, RooflineError};

#[path = "../../../../cuda-emu/src/gate.rs"]
#[allow(dead_code)]
mod gate;

use gate::{Bounds, Gate};

/// Gate exceptions: (ops, gate, entry prefix, reason). A row covers the findings of that gate
/// on entries starting with the prefix, in calls of those ops. Each figure quoted was counted on
/// the emulator (pass C of scripts/emu-check.sh) at the coverage tests' shapes.
const EXCEPTIONS: &[(&[&str], Gate, &str, &str)] = &[
    (
        &["fp8_quant"],
        Gate::Coalescing,
        "fp8_quant_",
        "a group whose length is not a multiple of 16 keeps its body of 16-element chunks from its \
         own 16-byte boundary of y, with its head and tail scalars between two bodies: a warp \
         over several such groups (or the loop kernel over one odd-length row) stores runs with \
         gaps, up to 1.5 sectors per ideal (f32 groups of 24; 1.03-1.10 in the loop kernel), and \
         the scalars themselves (1-4 byte accesses, hot in the coverage tests' short groups) up \
         to 8.6; every 16-byte load is at its ideal, and groups of a multiple of 16 (every \
         manifest shape) move whole sectors",
    ),
    (
        &["rope"],
        Gate::Coalescing,
        "rope_vec",
        "rotate-half reads (and writes) each half of a head at a site of its own; where half a head \
         is not a whole number of 32-byte sectors (the coverage shapes' small head_dim) each half \
         straddles sectors: 1.5 sectors per ideal",
    ),
    (
        &["qk_norm_rope_fp8"],
        Gate::Traffic,
        "qk_norm_rope_fp8",
        "the manifest charges 2 x head_dim x 4 bytes of cos/sin per token where the kernel reads \
         one [cos|sin] row of the cache (and it leaves out the positions): -11% to -23% here, \
         -3% at the manifest's prefill shape",
    ),
    (
        &["sum", "mean", "amax", "logsumexp"],
        Gate::Traffic,
        "reduce_cols",
        "the split reductions (few output columns, long reduced dim) write partials that \
         reduce_finish reads back: +11% to +28% here (+6.4% at 2048x4096 dim 0), traffic the \
         manifest does not count",
    ),
    (
        &["sum", "mean", "amax", "logsumexp"],
        Gate::Traffic,
        "reduce_runs",
        "a strided reduction read as contiguous runs writes one partial state per run, which \
         reduce_finish reads back: +6.4% here (f32 sum), traffic the manifest does not count",
    ),
    (
        &["sum", "mean", "amax", "logsumexp"],
        Gate::BankConflicts,
        "reduce_cols_vec",
        "the cols_vec kernels stage their per-thread partials as scratch[ty][tx][j] (float2) with \
         j fastest: an 8-byte store at a 32- or 64-byte lane stride, 4-8 wavefronts per ideal \
         (reduce.cu: the scratch store after the k-loop and the merge's load)",
    ),
    (
        &["sum", "mean", "amax", "logsumexp"],
        Gate::Coalescing,
        "reduce_cols_vec_split",
        "the split partials are stored at part[(column + j) * splits + split]: 8 bytes at a lane \
         stride of VW x splits x 8 bytes, 1.6-2.7 sectors per ideal",
    ),
    (
        &["sum", "mean", "amax", "logsumexp"],
        Gate::Coalescing,
        "reduce_finish",
        "each thread reads its output's own run of partials (a lane stride of splits x 8 bytes): \
         1.3-4 sectors per ideal, on a pass over partials only",
    ),
    (
        &["sum", "mean", "amax", "logsumexp"],
        Gate::Coalescing,
        "reduce_strided",
        "the strided multi-dim kernel maps lanes to reduced elements by a 64-bit div/mod per \
         element, not to contiguous runs: up to 1.5 sectors per ideal (issue 21: contiguous runs \
         with 16-byte loads)",
    ),
    (
        &["softmax"],
        Gate::Traffic,
        "softmax_partial",
        "rows too long for one block (partial + finalize) are read twice, once per launch: +50% \
         (x read twice, y written once); with x still in L2 between the launches DRAM sees less",
    ),
    (
        &["log_softmax"],
        Gate::Traffic,
        "log_softmax_partial",
        "as softmax: partial + finalize read x once each, +50%",
    ),
    (
        &["fused_add_rms_norm"],
        Gate::Traffic,
        "fused_add_rms_norm_loop",
        "rows too long for registers: the loop kernel writes the residual sum, then reads it back \
         for the normalisation: +22% here",
    ),
];

/// The ops whose calls were measured, and the rows of [`EXCEPTIONS`] that applied.
struct Seen {
    measured: HashSet<String>,
    applied: HashSet<usize>,
}

static LOCK: Mutex<Option<Seen>> = Mutex::new(None);

/// Runs `f`, one call of `op` whose roofline is `roofline`, and checks its launches against the
/// gates (see the module docs): the traffic gate always, the coalescing and bank-conflict gates
/// when the call's rows are `aligned` (the common path; a misaligned row's scalar head and tail
/// are judged by the traffic gate only). Returns `f`'s result.
pub(super) fn call<T>(
    device: &Device,
    op: &str,
    roofline: Result<Roofline, RooflineError>,
    aligned: bool,
    f: impl FnOnce() -> T,
) -> T {
    let path = std::env::var_os("CUDA_EMU_LEDGER").filter(|p| !p.is_empty());
    let (true, Some(path)) = (device.is_emulated(), path) else {
        return f();
    };
    let mut seen = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let start = std::fs::metadata(&path).map_or(0, |m| m.len());
    let out = f();
    let mut text = String::new();
    let read = std::fs::File::open(&path).and_then(|mut file| {
        file.seek(SeekFrom::Start(start))?;
        file.read_to_string(&mut text)
    });
    match read {
        Ok(_) => {}
        // No launch in this process yet: the emulator creates the log at the first.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("{op}: reading the launch log {path:?}: {e}"),
    }
    // Other tests of this process launch meanwhile (not all through `call`): keep the lines of
    // this thread's launches (the op runs them synchronously, on this thread).
    let tid = thread_id();
    let launches: Vec<gate::LaunchRecord> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| gate::parse_line(l).unwrap_or_else(|e| panic!("{op}: the launch log: {e}: {l}")))
        .filter(|l| l.tid.is_none() || l.tid == tid)
        .collect();
    if launches.is_empty() {
        // A host stand-in (gemm's cuBLAS) or a call that launched nothing.
        return out;
    }
    if launches.iter().any(|l| l.traffic.is_none()) {
        assert!(
            std::env::var("TILEOPS_REQUIRE_LEDGER").as_deref() != Ok("1"),
            "{op}: TILEOPS_REQUIRE_LEDGER=1 but the emulator logged no traffic for {:?} (not its \
             ASan build?)",
            launches.iter().map(|l| &l.entry).collect::<Vec<_>>()
        );
        return out;
    }
    let bytes = roofline
        .unwrap_or_else(|e| panic!("{op}: eval_roofline: {e}"))
        .bytes as f64;
    let seen = seen.get_or_insert_with(|| Seen {
        measured: HashSet::new(),
        applied: HashSet::new(),
    });
    seen.measured.insert(op.to_owned());
    let mut failures = Vec::new();
    let findings = gate::check_call(op, &launches, bytes, &Bounds::default());
    for finding in findings
        .into_iter()
        .filter(|f| aligned || f.gate == Gate::Traffic)
    {
        let excused = EXCEPTIONS.iter().position(|(ops, g, prefix, _)| {
            ops.contains(&op) && *g == finding.gate && finding.entry.starts_with(prefix)
        });
        match excused {
            Some(row) => {
                println!("LEDGER excused: {finding}");
                seen.applied.insert(row);
            }
            None => failures.push(finding.to_string()),
        }
    }
    for finding in &failures {
        println!("LEDGER {finding}");
    }
    if survey_only() {
        return out;
    }
    assert!(
        failures.is_empty(),
        "the traffic ledger's gates (cuda-emu/src/gate.rs; exceptions in tileops/tests/it/coverage/ledger.rs):\n{}",
        failures.join("\n")
    );
    out
}

/// This thread's Linux id (`/proc/thread-self` links to `<pid>/task/<tid>`), as the emulator's
/// launch log writes it.
fn thread_id() -> Option<u64> {
    std::fs::read_link("/proc/thread-self")
        .ok()?
        .file_name()?
        .to_str()?
        .parse()
        .ok()
}

/// `TILEOPS_LEDGER_SURVEY=1`: findings are printed (`LEDGER …` lines) but fail nothing, to
/// survey every kernel at once after a change.
fn survey_only() -> bool {
    std::env::var("TILEOPS_LEDGER_SURVEY").as_deref() == Ok("1")
}

/// At the end of a coverage test: fails on an exception of one of `ops` that none of their
/// measured calls needed (a fixed kernel leaves its exception stale: remove it). A no-op when
/// nothing was measured.
pub(super) fn no_stale_exceptions(ops: &[&str]) {
    let seen = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let Some(seen) = seen.as_ref().filter(|_| !survey_only()) else {
        return;
    };
    let stale: Vec<String> = EXCEPTIONS
        .iter()
        .enumerate()
        .filter(|(_, (row_ops, ..))| {
            row_ops
                .iter()
                .any(|op| ops.contains(op) && seen.measured.contains(*op))
        })
        .filter(|(row, _)| !seen.applied.contains(row))
        .map(|(_, (row_ops, g, prefix, why))| {
            format!("{} {} {prefix}*: {why}", row_ops.join("/"), g.name())
        })
        .collect();
    assert!(
        stale.is_empty(),
        "traffic ledger exceptions no call needed any more (remove them from tileops/tests/it/coverage/ledger.rs):\n{}",
        stale.join("\n")
    );
}
