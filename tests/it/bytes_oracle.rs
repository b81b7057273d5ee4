//! The bytes oracle (TileOPs's structural defence against formula drift).
//!
//! For every registered op and every workload case, the minimum traffic of one call is recomputed
//! from the tensors the planned op declares it reads and writes — each distinct input once, each
//! output once, densely packed in its own dtype — and `eval_roofline`'s bytes must equal it.
//! The manifest's formula and the op's declared tensors are written independently, so a formula
//! that counts a table it does not read, forgets a scale tensor, or prices a staging buffer fails
//! here.
//!
//! Exceptions are listed with their reason; an exception that starts to agree fails too, so the
//! list cannot go stale.

use tileops::Device;

/// Ops whose manifest bytes are deliberately not the dense minimum, and why.
const EXCEPTIONS: &[(&str, &str)] = &[
    (
        "rope",
        "the kernel gathers only the cos/sin rows of the positions in the call (one row per token), \
         not the whole [max_pos, head_dim] table the op is given; the manifest counts those rows",
    ),
    (
        "qk_norm_rope_fp8",
        "the manifest keeps the per-row ledger of the fused case study: its lookup term 2*tokens*head_dim*4 bytes \
         is not the touched rows of the cos/sin cache, and it leaves out the positions",
    ),
];

#[test]
fn eval_roofline_bytes_equal_the_minimum_traffic_of_the_declared_tensors() {
    let device = Device::cpu();
    let mut checked = 0;
    let mut failures = Vec::new();
    for op in tileops::registry::all() {
        let exception = EXCEPTIONS.iter().find(|(name, _)| *name == op.name);
        for workload in op.workloads {
            for case in workload.cases() {
                let label = format!("{} {}", op.name, case.name());
                let planned = match (op.build)(&device, &case) {
                    Ok(planned) => planned,
                    Err(e) => {
                        failures.push(format!("{label}: cannot plan: {e}"));
                        continue;
                    }
                };
                let Some(traffic) = planned.traffic() else {
                    failures.push(format!(
                        "{label}: the op does not declare the tensors it reads and writes"
                    ));
                    continue;
                };
                let bytes = match planned.roofline() {
                    Ok(r) => r.bytes,
                    Err(e) => {
                        failures.push(format!("{label}: {e}"));
                        continue;
                    }
                };
                let minimum = match traffic.min_bytes() {
                    Ok(minimum) => minimum,
                    Err(e) => {
                        failures.push(format!("{label}: the declared tensors: {e}"));
                        continue;
                    }
                };
                match (exception, bytes == minimum) {
                    (None, false) => failures.push(format!(
                        "{label}: eval_roofline says {bytes} bytes, the declared tensors move {minimum}"
                    )),
                    (Some((_, why)), true) => failures.push(format!(
                        "{label}: listed as an exception ({why}) but its bytes equal the minimum: remove it"
                    )),
                    _ => checked += 1,
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked > 0, "no registered case");
    println!("bytes oracle: {checked} cases checked");
}
