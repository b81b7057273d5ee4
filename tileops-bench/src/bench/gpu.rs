//! CUDA-event timing of one call: the L2 flushed before it, the stream held while it is enqueued.
//!
//! One sample, in stream order:
//!
//! ```text
//! memset(flush buffer, 2 x L2)  bench_spin(hold)  [start event]  op kernels...  [end event]
//! `------- outside the timed region ------------'  `------------ timed -----------------'
//! ```
//!
//! The host measures how long it takes to enqueue everything from the spin kernel to the end
//! event. The spin kernel starts on the GPU no earlier than the host launched it and then runs for
//! `hold` ns, so when that enqueue took less than `hold`, the start event, every kernel of the op
//! and the end event were queued before the spin ended: the GPU ran them back to back and the
//! events measured kernels only, not launch latency. A sample for which that does not hold is
//! retaken with a longer hold. The hold adapts to the host: a margin over the last enqueue time,
//! decaying slowly so one slow call does not slow every later sample.
//!
//! An op whose `run` waits on the GPU (a copy to the host, a synchronisation) cannot be held: it
//! would wait for the spin kernel itself. A probe call under a long hold finds such ops at the
//! start of a case; their samples are taken without the hold and their records say so
//! (`cuda_events+l2_flush`: launch latency included).

use std::sync::Arc;
use std::time::Instant;

use tileops::cudarc::driver::sys::{self, CUdevice_attribute, CUevent_flags};
use tileops::cudarc::driver::{
    CudaEvent, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};

use tileops::kernels::{self, BENCH_UTIL};
use tileops::registry::BenchOp;
use tileops::{Device, Error, Tensor};

/// The `timing` of GPU records.
pub(super) const METHOD: &str = "cuda_events+l2_flush+spin_hold";
/// The `timing` of GPU records whose op waits on the GPU inside `run`, so the stream cannot be
/// held while it is enqueued: the events then include its launch latency.
pub(super) const METHOD_UNHELD: &str = "cuda_events+l2_flush";

/// The hold of the probe call that tells whether an op can be held: far longer than any
/// enqueue of an op that does not wait on the GPU.
const PROBE_HOLD_NS: u64 = 5_000_000;

/// The shortest hold: a few launches' worth.
const MIN_HOLD_NS: u64 = 50_000;
/// The longest hold.
const MAX_HOLD_NS: u64 = 20_000_000;
/// The hold is at least this many times the last enqueue time.
const HOLD_MARGIN: u64 = 4;
/// Times one sample is retaken when its enqueue outlasted the hold.
const MAX_RETAKES: u32 = 8;
/// The flush buffer when the driver does not report the L2 size.
const FLUSH_BYTES_UNKNOWN_L2: usize = 512 << 20;

/// The next hold: `HOLD_MARGIN` times the last enqueue, or three quarters of the previous hold if
/// that is longer, within `MIN_HOLD_NS..=MAX_HOLD_NS`.
pub(super) fn next_hold_ns(previous: u64, enqueue_ns: u64) -> u64 {
    enqueue_ns
        .saturating_mul(HOLD_MARGIN)
        .max(previous / 4 * 3)
        .clamp(MIN_HOLD_NS, MAX_HOLD_NS)
}

/// Bytes of the flush buffer for an L2 of `l2_bytes` (0: unknown): twice the L2, whole MiB.
pub(super) fn flush_bytes(l2_bytes: u64) -> usize {
    if l2_bytes == 0 {
        return FLUSH_BYTES_UNKNOWN_L2;
    }
    let mib = 1u64 << 20;
    usize::try_from((2 * l2_bytes).div_ceil(mib) * mib).unwrap_or(FLUSH_BYTES_UNKNOWN_L2)
}

/// Times calls of ops on one GPU.
pub(super) struct GpuTimer {
    stream: Arc<CudaStream>,
    flush: CudaSlice<u8>,
    spin: CudaFunction,
    start: CudaEvent,
    end: CudaEvent,
    hold_ns: u64,
    /// Whether the current case's op can be held (its `run` does not wait on the GPU).
    held: bool,
}

impl GpuTimer {
    /// Allocates the flush buffer, compiles the spin kernel and creates the timing events.
    pub(super) fn new(device: &Device) -> Result<GpuTimer, Error> {
        let (Some(ctx), Some(stream)) = (device.cuda_context(), device.cuda_stream()) else {
            return Err(Error::NoDevice {
                reason: "GPU timing asked for on the CPU".to_owned(),
            });
        };
        let l2 = l2_bytes(device).unwrap_or(0);
        let flush_len = flush_bytes(l2);
        let flush = stream.alloc_zeros::<u8>(flush_len).map_err(|e| {
            Error::device_alloc("allocating the L2 flush buffer", flush_len, device, e)
        })?;
        let spin = kernels::load(device, &BENCH_UTIL, "bench_spin")?;
        // `new_event(None)` would create events with timing disabled.
        let event = || {
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| Error::driver("creating a timing event", e))
        };
        Ok(GpuTimer {
            stream: stream.clone(),
            flush,
            spin,
            start: event()?,
            end: event()?,
            hold_ns: 4 * MIN_HOLD_NS,
            held: true,
        })
    }

    /// The method of the current case's samples: [`METHOD`], or [`METHOD_UNHELD`] for an op
    /// whose `run` waits on the GPU (a hold would only measure itself).
    pub(super) fn method(&self) -> &'static str {
        if self.held { METHOD } else { METHOD_UNHELD }
    }

    /// Starts a case: one untimed call, waited for (kernel compile and load, first allocations),
    /// then one probe call under a long hold that tells whether the op can be held at all.
    pub(super) fn cold(&mut self, op: &dyn BenchOp, inputs: &[Tensor]) -> Result<(), Error> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| Error::driver("binding the context", e))?;
        // Nothing in tileops marks L2 lines persisting, but another library in the process might
        // have. Best effort: a GPU without persisting L2 reports the call unsupported.
        // SAFETY: a plain driver call on the bound context, no pointers.
        let _ = unsafe { sys::cuCtxResetPersistingL2Cache() };
        let outputs = op.run(inputs)?;
        self.stream
            .synchronize()
            .map_err(|e| Error::driver("waiting for the cold call", e))?;
        drop(outputs);
        let (_, enqueue_ns) = self.call(op, inputs, Some(PROBE_HOLD_NS))?;
        self.held = enqueue_ns < PROBE_HOLD_NS;
        Ok(())
    }

    /// Exercises the machinery once without an op, its reading discarded: bind the context, flush
    /// the L2, hold the stream with the spin kernel, record both events, read their interval and
    /// wait for the stream. An emulated device is checked this way instead of timed: the flush
    /// buffer, the spin kernel's compile and launch and the events are the plumbing of every GPU
    /// sample.
    pub(super) fn exercise(&mut self) -> Result<(), Error> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| Error::driver("binding the context", e))?;
        let (ms, _) = self.call(&NoOp, &[], Some(MIN_HOLD_NS))?;
        self.stream
            .synchronize()
            .map_err(|e| Error::driver("waiting for the timer's exercise", e))?;
        if !(ms.is_finite() && ms >= 0.0) {
            return Err(Error::internal(format!(
                "reading the event times: the events gave {ms} ms for an empty interval"
            )));
        }
        Ok(())
    }

    /// One timed call, ms.
    pub(super) fn sample(&mut self, op: &dyn BenchOp, inputs: &[Tensor]) -> Result<f64, Error> {
        if !self.held {
            return Ok(self.call(op, inputs, None)?.0);
        }
        let mut longest_enqueue = 0;
        for _ in 0..=MAX_RETAKES {
            let hold = self.hold_ns;
            let (ms, enqueue_ns) = self.call(op, inputs, Some(hold))?;
            self.hold_ns = next_hold_ns(hold, enqueue_ns);
            if enqueue_ns < hold {
                return Ok(ms);
            }
            longest_enqueue = longest_enqueue.max(enqueue_ns);
        }
        Err(Error::Launch {
            kernel: "bench_spin".to_owned(),
            message: format!(
                "the host took up to {:.1} µs to enqueue one call, longer than the stream could be \
                 held ({MAX_RETAKES} retakes); the sample would include launch latency",
                longest_enqueue as f64 / 1e3,
            ),
            source: None,
        })
    }

    /// One call between the events, the L2 flushed before it and, with `hold`, the stream held
    /// while it is enqueued: (event time in ms, host enqueue time in ns from the hold's launch to
    /// the end event's record).
    fn call(
        &mut self,
        op: &dyn BenchOp,
        inputs: &[Tensor],
        hold: Option<u64>,
    ) -> Result<(f64, u64), Error> {
        // Outside the timed region: every L2 line now holds flush-buffer data.
        self.stream
            .memset_zeros(&mut self.flush)
            .map_err(|e| Error::driver("flushing the L2", e))?;
        let enqueue = Instant::now();
        if let Some(hold) = hold {
            let mut launch = self.stream.launch_builder(&self.spin);
            launch.arg(&hold);
            let one = LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (1, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: bench_spin(unsigned long long ns) takes one u64 and touches no memory.
            unsafe { launch.launch(one) }.map_err(|e| Error::launch("bench_spin", e))?;
        }
        self.start
            .record(&self.stream)
            .map_err(|e| Error::driver("recording the start event", e))?;
        let outputs = op.run(inputs)?;
        self.end
            .record(&self.stream)
            .map_err(|e| Error::driver("recording the end event", e))?;
        let enqueue_ns = u64::try_from(enqueue.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let ms = self
            .start
            .elapsed_ms(&self.end)
            .map_err(|e| Error::driver("reading the event times", e))?;
        // Freed after the end event: stream-ordered, outside the timed region.
        drop(outputs);
        Ok((f64::from(ms), enqueue_ns))
    }
}

/// An op that launches nothing: the timer's exercise times an empty interval.
struct NoOp;

impl tileops::registry::RooflineModel for NoOp {
    fn op_name(&self) -> &'static str {
        "no-op"
    }

    fn roofline(&self) -> Result<tileops::Roofline, tileops::RooflineError> {
        Ok(tileops::Roofline { flops: 0, bytes: 0 })
    }
}

impl BenchOp for NoOp {
    fn roof(&self) -> tileops::registry::RoofKey {
        tileops::registry::RoofKey::CUDA_CORE_FP32
    }

    fn random_inputs(&self, _seed: u64) -> Result<Vec<Tensor>, Error> {
        Ok(Vec::new())
    }

    fn run(&self, _inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
        Ok(Vec::new())
    }
}

/// The L2 size the driver reports, bytes: the flush buffer's size here, and the `l2_bytes` a
/// record's device says ([`crate::records::DeviceInfo`]).
pub(crate) fn l2_bytes(device: &Device) -> Option<u64> {
    let ctx = device.cuda_context()?;
    ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .ok()
        .and_then(|b| u64::try_from(b).ok())
        .filter(|&b| b > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_follows_the_host_with_a_margin_and_decays() {
        assert_eq!(next_hold_ns(200_000, 10_000), 150_000);
        assert_eq!(next_hold_ns(200_000, 100_000), 400_000);
        assert_eq!(next_hold_ns(50_000, 1_000), MIN_HOLD_NS);
        assert_eq!(next_hold_ns(MAX_HOLD_NS, u64::MAX), MAX_HOLD_NS);
        // A slow enqueue retaken with the new hold fits it.
        let enqueue = 300_000;
        assert!(enqueue < next_hold_ns(200_000, enqueue));
    }

    #[test]
    fn flush_buffer_is_twice_the_l2_in_whole_mib() {
        assert_eq!(flush_bytes(62_914_560), 120 << 20); // H200: 60 MiB
        assert_eq!(flush_bytes(50_000_000), 96 << 20); // 2 x 47.7 MiB, rounded up
        assert_eq!(flush_bytes(0), FLUSH_BYTES_UNKNOWN_L2);
        assert!(flush_bytes(1) >= 2);
    }
}
