//! The registry and the manifest agree: every `implemented` entry of `manifest/` has a registered
//! op, every registered op has an `implemented` entry, and each registration carries the entry's
//! family and workloads.

use std::collections::BTreeMap;
use std::path::Path;
use tileops_manifest::manifest::Status;

/// `status`, `family` and workload count of every entry in `manifest/`, by op name, read with
/// the manifest library (the macro's own reader).
fn manifest_entries() -> BTreeMap<String, (String, String, usize)> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let entries =
        tileops_manifest::check::entries(repo, Path::new("manifest")).unwrap_or_else(|problems| {
            let rendered: Vec<String> = problems.iter().map(|p| p.render()).collect();
            panic!("manifest/ has problems:\n{}", rendered.join("\n"))
        });
    entries
        .into_iter()
        .map(|e| {
            let status = match e.status {
                Status::Implemented => "implemented",
                Status::SpecOnly => "spec-only",
            };
            (e.name, (status.to_owned(), e.family, e.workloads.len()))
        })
        .collect()
}

#[test]
fn implemented_entries_and_registered_ops_match_one_to_one() {
    let entries = manifest_entries();
    let registered: Vec<&str> = tileops::registry::all().iter().map(|op| op.name).collect();
    for (name, (status, _, _)) in &entries {
        if status == "implemented" {
            assert!(
                registered.contains(&name.as_str()),
                "manifest entry `{name}` is implemented but no op registers it"
            );
        }
    }
    for name in &registered {
        let status = entries.get(*name).map(|(s, _, _)| s.as_str());
        assert_eq!(
            status,
            Some("implemented"),
            "registered op `{name}` has no implemented manifest entry"
        );
    }
    assert!(
        registered.len() >= 2,
        "softmax and rms_norm at least: {registered:?}"
    );
}

#[test]
fn registrations_carry_the_manifest_data() {
    let entries = manifest_entries();
    for op in tileops::registry::all() {
        let (_, family, workloads) = &entries[op.name];
        assert_eq!(op.family, family, "{}", op.name);
        assert_eq!(op.workloads.len(), *workloads, "{}", op.name);
        assert!(
            op.manifest_file.starts_with("manifest/"),
            "{}: {}",
            op.name,
            op.manifest_file
        );
        assert!(!op.inputs.is_empty(), "{}", op.name);
        for workload in op.workloads {
            assert!(
                !workload.dtypes.is_empty(),
                "{} {}",
                op.name,
                workload.label
            );
            for input in op.inputs.iter().filter(|i| !i.optional) {
                assert!(
                    workload.shape(input.name).is_some(),
                    "{} {}: no {}_shape",
                    op.name,
                    workload.label,
                    input.name
                );
            }
        }
    }
    assert!(tileops::registry::find("softmax").is_some());
    assert!(tileops::registry::find("no_such_op").is_none());
}

#[test]
fn every_registered_case_builds_on_the_cpu_and_prices_from_eval_roofline() {
    let device = tileops::Device::cpu();
    for op in tileops::registry::all() {
        for workload in op.workloads {
            for case in workload.cases() {
                let planned = (op.build)(&device, &case)
                    .unwrap_or_else(|e| panic!("{} {}: {e}", op.name, case.name()));
                let roofline = planned
                    .roofline()
                    .unwrap_or_else(|e| panic!("{} {}: {e}", op.name, case.name()));
                assert!(
                    roofline.bytes > 0 && roofline.flops > 0,
                    "{} {}: {roofline:?}",
                    op.name,
                    case.name()
                );
                assert_eq!(planned.op_name(), op.name);
            }
        }
    }
}
