//! The decoder-layer example's layer, run as CI runs the tests: it must match the layer written
//! with candle's own ops, and its records must be read and priced by the repo's roofline tool.

#[path = "../examples/decoder_layer.rs"]
#[allow(dead_code)] // the example's `main` and argument parsing are not called here
mod decoder_layer;

use candle_core::{DType, Device};
use tileops_bench::records::Run;

#[test]
fn the_layer_matches_candle_and_its_records_are_priced_by_the_roofline_tool() {
    for dtype in [DType::F32, DType::BF16] {
        let outcome = decoder_layer::run_layer(&Device::Cpu, dtype, 2).expect("the layer runs");
        assert!(
            outcome.max_abs_err <= outcome.bound,
            "{dtype:?}: max abs error {} over {}",
            outcome.max_abs_err,
            outcome.bound
        );
        let ops: Vec<&str> = outcome.run.records.iter().map(|r| r.op.as_str()).collect();
        assert_eq!(
            ops,
            [
                "rms_norm",
                "gemm",
                "gemm",
                "gemm",
                "rope",
                "rope",
                "gqa_prefill",
                "gemm",
                "fused_add_rms_norm",
                "gemm",
                "silu_and_mul",
                "gemm"
            ]
        );
        for r in &outcome.run.records {
            assert!(r.flops.is_some_and(|f| f > 0), "{}: flops", r.workload);
            assert!(r.bytes.is_some_and(|b| b > 0), "{}: bytes", r.workload);
            assert_eq!(
                (r.timing.as_str(), r.samples),
                ("cpu_wall", 2),
                "{}",
                r.workload
            );
        }

        let dir = std::env::temp_dir().join(format!(
            "tileops-candle-layer-{}-{dtype:?}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("layer.json");
        outcome.run.save(&path).expect("the records save");
        assert_eq!(Run::load(&path).expect("and load back"), outcome.run);

        // The roofline tool (`cargo run --example roofline -- PATH --profile h100`), in process.
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let args = [
            path.to_str().unwrap(),
            "--profile",
            "h100",
            "--format",
            "csv",
        ];
        let status = tileops_bench::cli::roofline::run(args, &mut out, &mut err)
            .unwrap_or_else(|e| panic!("the roofline tool refused the records: {e}"));
        let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
        assert_ne!(status & 2, 2, "roofline status {status}: {err}");
        for step in ["q_proj", "attention", "post_attention_norm", "down_proj"] {
            let label = format!("decoder_layer.{step}");
            assert!(
                out.contains(&label),
                "{label} missing from the report:\n{out}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// The layer on candle's CUDA device (feature `cuda`): no candle kernel runs in it, so it runs on
/// the emulated device too. Skipped with a `SKIP:` line without a device, unless
/// `TILEOPS_REQUIRE_GPU=1`.
#[cfg(feature = "cuda")]
#[test]
fn the_layer_on_the_gpu_matches_candle() {
    let gpu = match Device::new_cuda(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            assert!(
                std::env::var("TILEOPS_REQUIRE_GPU").as_deref() != Ok("1"),
                "TILEOPS_REQUIRE_GPU=1 but there is no CUDA device: {e}"
            );
            println!("SKIP: the_layer_on_the_gpu_matches_candle: no CUDA device ({e})");
            return;
        }
    };
    for dtype in [DType::F32, DType::BF16] {
        let outcome = decoder_layer::run_layer(&gpu, dtype, 1).expect("the layer runs on the GPU");
        assert!(
            outcome.max_abs_err <= outcome.bound,
            "{dtype:?} on the GPU: max abs error {} over {}",
            outcome.max_abs_err,
            outcome.bound
        );
        assert_eq!(outcome.run.records.len(), 12);
    }
}
