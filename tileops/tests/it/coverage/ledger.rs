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
//! Calls are serialised through one lock while the log is read, so the lines of concurrent tests
//! cannot mix (the emulator runs one launch at a time anyway).

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Mutex;

use tileops::{Device, Roofline, RooflineError};

#[path = "../../../../cuda-emu/src/gate.rs"]
#[allow(dead_code)]
mod gate;

use gate::{Bounds, Gate};

/// Gate exceptions: (op, gate, entry prefix, reason). An exception covers the findings of that
/// gate on entries starting with the prefix, in calls of that op.
const EXCEPTIONS: &[(&str, Gate, &str, &str)] = &[
    (
        "fp8_quant",
        Gate::Coalescing,
        "fp8_quant_rows",
        "each thread loads two 16-byte vectors at [base] and [base + 16]: a 32-byte lane stride, \
         half of each sector per request (issue 21, to be brought to lane-contiguous loads)",
    ),
    (
        "rope",
        Gate::BankConflicts,
        "rope_vec",
        "the cos/sin table is read from shared memory as float4 at a 32-byte lane stride: 2-way \
         bank conflicts (issue 21)",
    ),
    (
        "qk_norm_rope_fp8",
        Gate::BankConflicts,
        "qk_norm_rope_fp8",
        "the cos/sin row is read from shared memory as float4 at a 32-byte lane stride: 2-way bank \
         conflicts (issue 21)",
    ),
    (
        "qk_norm_rope_fp8",
        Gate::Traffic,
        "qk_norm_rope_fp8",
        "the manifest charges 2 x head_dim x 4 bytes of cos/sin per token where the kernel reads \
         one [cos|sin] row of the cache, and leaves out the positions",
    ),
    (
        "sum",
        Gate::Traffic,
        "reduce_",
        "a dim-0 reduction splits the rows: the partials (outputs x splits x 8 bytes) are written \
         by the split kernel and read by reduce_finish, traffic the manifest does not count",
    ),
    (
        "mean",
        Gate::Traffic,
        "reduce_",
        "as sum: the split partials, written and read once more",
    ),
];

/// The ops whose calls were measured, and the exceptions that applied: (op, gate, prefix).
struct Seen {
    measured: HashSet<String>,
    applied: HashSet<(String, Gate, String)>,
}

static LOCK: Mutex<Option<Seen>> = Mutex::new(None);

/// Runs `f`, one call of `op` whose roofline is `roofline`, and checks its launches against the
/// gates (see the module docs). Returns `f`'s result.
pub(super) fn call<T>(
    device: &Device,
    op: &str,
    roofline: Result<Roofline, RooflineError>,
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
    std::fs::File::open(&path)
        .and_then(|mut file| {
            file.seek(SeekFrom::Start(start))?;
            file.read_to_string(&mut text)
        })
        .unwrap_or_else(|e| panic!("{op}: reading the launch log {path:?}: {e}"));
    let launches: Vec<gate::LaunchRecord> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| gate::parse_line(l).unwrap_or_else(|e| panic!("{op}: the launch log: {e}: {l}")))
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
    for finding in gate::check_call(op, &launches, bytes, &Bounds::default()) {
        let excused = EXCEPTIONS.iter().find(|(o, g, prefix, _)| {
            *o == op && *g == finding.gate && finding.entry.starts_with(prefix)
        });
        match excused {
            Some((o, g, prefix, _)) => {
                seen.applied
                    .insert(((*o).to_owned(), *g, (*prefix).to_owned()));
            }
            None => failures.push(finding.to_string()),
        }
    }
    assert!(
        failures.is_empty(),
        "the traffic ledger's gates (cuda-emu/src/gate.rs; exceptions in tileops/tests/it/coverage/ledger.rs):\n{}",
        failures.join("\n")
    );
    out
}

/// At the end of a coverage test: fails on an exception of one of `ops` that none of their
/// measured calls needed (a fixed kernel leaves its exception stale: remove it). A no-op when
/// nothing was measured.
pub(super) fn no_stale_exceptions(ops: &[&str]) {
    let seen = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let Some(seen) = seen.as_ref() else {
        return;
    };
    let stale: Vec<String> = EXCEPTIONS
        .iter()
        .filter(|(op, ..)| ops.contains(op) && seen.measured.contains(*op))
        .filter(|(op, g, prefix, _)| {
            !seen
                .applied
                .contains(&((*op).to_owned(), *g, (*prefix).to_owned()))
        })
        .map(|(op, g, prefix, why)| format!("{op} {} {prefix}*: {why}", g.name()))
        .collect();
    assert!(
        stale.is_empty(),
        "traffic ledger exceptions no call needed any more (remove them from tileops/tests/it/coverage/ledger.rs):\n{}",
        stale.join("\n")
    );
}
