//! CUDA-event timing of one call: the L2 flushed before it, the stream held while it is enqueued.
//!
//! One sample, in stream order:
//!
//! ```text
//! memset(flush, 2 x L2)  read(sweep, 2 x L2)  bench_spin(hold)  [start event]  op... [end event]
//! `-------------- outside the timed region -------------------'  `--------- timed ------------'
//! ```
//!
//! The flush ([`L2Flush`]) leaves the L2 holding flush lines only, so no input of the op is served
//! from it. The memset alone leaves up to one L2 of its lines dirty (tens of MB): a timed kernel
//! whose misses evict them pays their write-back inside its window, as much traffic again as a
//! 33 MB op moves, unless the L2 cleans them while the stream is held. The read sweep that
//! follows by default (`memset+read`) reads a second buffer of twice the L2, zeroed once when the
//! timer is made and never written again: its misses evict every line the memset left (the dirty
//! ones written back then, before the timed region), and no line it brings in is dirty. It reads
//! a buffer of its own rather than the one just zeroed because a read that hits a line the memset
//! left dirty leaves it dirty: an L2 evicting in exact LRU order would have evicted all of those
//! before the sweep reached them, but the replacement policy is not documented. The sweep is a
//! kernel (calibrate.cu's `hbm_read`, whose sums are never stored) because no driver operation
//! reads device memory without writing some: a device-to-device copy leaves its destination
//! dirty, a copy to the host takes milliseconds. `memset` alone stays selectable, so that the two
//! are compared on a GPU (scripts/gpu-check.sh); each record's `timing` names the flush.
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
//! (`cuda_events+l2_flush+read_sweep`, or `cuda_events+l2_flush` with the memset only: launch
//! latency included).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use tileops::cudarc::driver::sys::{self, CUdevice_attribute, CUevent_flags};
use tileops::cudarc::driver::{
    CudaEvent, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};

use tileops::kernels::{self, BENCH_UTIL, CALIBRATE};
use tileops::registry::BenchOp;
use tileops::{Device, Error, Tensor};

/// The `timing` of GPU records (the default flush, [`L2Flush::MemsetRead`]).
pub(super) const METHOD: &str = "cuda_events+l2_flush+read_sweep+spin_hold";
/// The `timing` of GPU records whose op waits on the GPU inside `run`, so the stream cannot be
/// held while it is enqueued: the events then include its launch latency.
pub(super) const METHOD_UNHELD: &str = "cuda_events+l2_flush+read_sweep";
/// [`METHOD`] with the memset-only flush ([`L2Flush::Memset`]): the `timing` of every GPU record
/// before the read sweep came in, and of `torch_baseline.py`'s.
pub(super) const METHOD_MEMSET: &str = "cuda_events+l2_flush+spin_hold";
/// [`METHOD_UNHELD`] with the memset-only flush.
pub(super) const METHOD_MEMSET_UNHELD: &str = "cuda_events+l2_flush";

/// How the L2 is flushed before each timed call (`bench --l2-flush`).
///
/// ```
/// use tileops_bench::bench::L2Flush;
/// assert_eq!(L2Flush::default(), L2Flush::MemsetRead);
/// assert_eq!("memset".parse::<L2Flush>(), Ok(L2Flush::Memset));
/// assert_eq!(L2Flush::MemsetRead.to_string(), "memset+read");
/// assert_eq!(L2Flush::Memset.timing(true), "cuda_events+l2_flush+spin_hold");
/// assert_eq!(L2Flush::MemsetRead.timing(true), "cuda_events+l2_flush+read_sweep+spin_hold");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum L2Flush {
    /// A memset of a buffer twice the L2: every line then holds flush data, but up to one L2 of
    /// it is dirty, and a timed kernel's misses may have to write it back.
    Memset,
    /// The memset, then a read sweep of a second buffer of twice the L2, never written: the L2 is
    /// left with clean lines only.
    #[default]
    MemsetRead,
}

impl L2Flush {
    /// Every method, the default last.
    pub const ALL: [L2Flush; 2] = [L2Flush::Memset, L2Flush::MemsetRead];

    /// The name `--l2-flush` takes: `memset`, `memset+read`.
    pub fn name(self) -> &'static str {
        match self {
            L2Flush::Memset => "memset",
            L2Flush::MemsetRead => "memset+read",
        }
    }

    /// The `timing` of a record sampled with this flush: `held` when the stream was held while
    /// the call was enqueued (launch latency hidden), else the op waits on the GPU in its call.
    pub fn timing(self, held: bool) -> &'static str {
        match (self, held) {
            (L2Flush::Memset, true) => METHOD_MEMSET,
            (L2Flush::Memset, false) => METHOD_MEMSET_UNHELD,
            (L2Flush::MemsetRead, true) => METHOD,
            (L2Flush::MemsetRead, false) => METHOD_UNHELD,
        }
    }
}

impl fmt::Display for L2Flush {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for L2Flush {
    type Err = String;

    /// A method's [`L2Flush::name`].
    fn from_str(text: &str) -> Result<L2Flush, String> {
        L2Flush::ALL
            .into_iter()
            .find(|m| m.name() == text.trim())
            .ok_or_else(|| {
                let names: Vec<&str> = L2Flush::ALL.iter().map(|m| m.name()).collect();
                format!("unknown L2 flush `{text}` (known: {})", names.join(", "))
            })
    }
}

/// Blocks and threads of the read sweep: 65536 threads, which divide the element count of any
/// flush (and sweep) buffer ([`flush_bytes`]: whole MiB, 65536 16-byte elements each), so every thread reads
/// the same number of elements; with four 16-byte loads in flight per thread, 4 MiB in flight,
/// about what HBM3e needs at its latency.
const SWEEP_GRID: (u32, u32) = (256, 256);
/// The value the sweep's sums are compared with before being stored: the zeroed sweep buffer
/// sums to 0, so nothing is stored.
const SWEEP_NEVER: f32 = -1.0;
const _: () = assert!(
    SWEEP_NEVER != 0.0,
    "the zeroed buffer's sums must not be stored"
);
/// Bytes of the sweep's sink: one float per thread of a block.
const SWEEP_SINK_BYTES: usize = 4 * SWEEP_GRID.1 as usize;

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

/// The read sweep of [`L2Flush::MemsetRead`]: calibrate.cu's `hbm_read`, the buffer it reads
/// (the flush buffer's size, zeroed once, never written by a sample) and its sink.
struct Sweep {
    function: CudaFunction,
    buffer: CudaSlice<u8>,
    sink: CudaSlice<u8>,
}

/// Times calls of ops on one GPU.
pub(super) struct GpuTimer {
    stream: Arc<CudaStream>,
    flush: CudaSlice<u8>,
    flush_method: L2Flush,
    /// The read sweep, for [`L2Flush::MemsetRead`].
    sweep: Option<Sweep>,
    spin: CudaFunction,
    start: CudaEvent,
    end: CudaEvent,
    hold_ns: u64,
    /// Whether the current case's op can be held (its `run` does not wait on the GPU).
    held: bool,
}

impl GpuTimer {
    /// Allocates the flush buffer, compiles the spin kernel (and the read sweep, for
    /// [`L2Flush::MemsetRead`]) and creates the timing events.
    pub(super) fn new(device: &Device, flush_method: L2Flush) -> Result<GpuTimer, Error> {
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
        let sweep = match flush_method {
            L2Flush::Memset => None,
            L2Flush::MemsetRead => {
                let alloc = |what: &str, bytes: usize| {
                    stream
                        .alloc_zeros::<u8>(bytes)
                        .map_err(|e| Error::device_alloc(what, bytes, device, e))
                };
                Some(Sweep {
                    function: kernels::load(device, &CALIBRATE, "hbm_read")?,
                    buffer: alloc("allocating the read sweep's buffer", flush_len)?,
                    sink: alloc("allocating the read sweep's sink", SWEEP_SINK_BYTES)?,
                })
            }
        };
        // `new_event(None)` would create events with timing disabled.
        let event = || {
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| Error::driver("creating a timing event", e))
        };
        Ok(GpuTimer {
            stream: stream.clone(),
            flush,
            flush_method,
            sweep,
            spin,
            start: event()?,
            end: event()?,
            hold_ns: 4 * MIN_HOLD_NS,
            held: true,
        })
    }

    /// The method of the current case's samples ([`L2Flush::timing`]): held, or not for an op
    /// whose `run` waits on the GPU (a hold would only measure itself).
    pub(super) fn method(&self) -> &'static str {
        self.flush_method.timing(self.held)
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

    /// Exercises the machinery once without an op, its reading discarded: bind the context, check
    /// that the read sweep (if any) covers the flush buffer, flush the L2, hold the stream with
    /// the spin kernel, record both events, read their interval and wait for the stream. An
    /// emulated device is checked this way instead of timed: the flush buffer, the sweep, the
    /// spin kernel's compile and launch and the events are the plumbing of every GPU sample.
    pub(super) fn exercise(&mut self) -> Result<(), Error> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| Error::driver("binding the context", e))?;
        self.check_sweep()?;
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

    /// Checks that the read sweep reads the whole of its buffer: with 1.0 in the four floats of
    /// its first and of its last 16-byte element and zeros elsewhere, exactly the first and the
    /// last thread sum to 4.0, and a sweep told to store sums of 4.0 stores them at those
    /// threads' places in the sink (0 and the last of a block), and nowhere else. The buffer is
    /// zeroed again afterwards. Nothing to check for [`L2Flush::Memset`].
    fn check_sweep(&mut self) -> Result<(), Error> {
        let stream = self.stream.clone();
        let Some(sweep) = &mut self.sweep else {
            return Ok(());
        };
        let len = sweep.buffer.len();
        let fail = |what: &str, e| Error::driver(format!("checking the read sweep: {what}"), e);
        let ones: Vec<u8> = 1.0f32.to_le_bytes().repeat(4);
        for at in [0, len - 16] {
            stream
                .memcpy_htod(ones.as_slice(), &mut sweep.buffer.slice_mut(at..at + 16))
                .map_err(|e| fail("planting ones", e))?;
        }
        self.launch_sweep(4.0)?;
        let Some(sweep) = &mut self.sweep else {
            return Ok(());
        };
        let sink = stream
            .clone_dtoh(&sweep.sink)
            .map_err(|e| fail("reading the sink back", e))?;
        stream
            .memset_zeros(&mut sweep.buffer)
            .map_err(|e| fail("zeroing its buffer again", e))?;
        let stored: Vec<(usize, f32)> = sink
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .enumerate()
            .filter(|&(_, v)| v != 0.0)
            .collect();
        let last = SWEEP_GRID.1 as usize - 1;
        if stored != [(0, 4.0), (last, 4.0)] {
            return Err(Error::internal(format!(
                "the read sweep does not cover its {len}-byte buffer: with ones at its \
                 first and last 16 bytes, threads 0 and {last} of a block should have stored \
                 4.0, and the sink holds {stored:?}"
            )));
        }
        Ok(())
    }

    /// Launches the read sweep over its buffer, its per-thread sums stored only when equal to
    /// `store_if`.
    fn launch_sweep(&mut self, store_if: f32) -> Result<(), Error> {
        let Some(sweep) = &mut self.sweep else {
            return Ok(());
        };
        let elements = i64::try_from(sweep.buffer.len() / 16).unwrap_or(i64::MAX);
        let mut launch = self.stream.launch_builder(&sweep.function);
        launch
            .arg(&sweep.buffer)
            .arg(&mut sweep.sink)
            .arg(&store_if)
            .arg(&elements);
        let config = LaunchConfig {
            grid_dim: (SWEEP_GRID.0, 1, 1),
            block_dim: (SWEEP_GRID.1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: hbm_read(const float4* a, float* sink, float never, long long n) reads n
        // float4 elements of `a` (the sweep buffer holds len / 16 of them) and writes at most
        // sink[threadIdx.x], within the sink's one float per thread of a block.
        unsafe { launch.launch(config) }.map_err(|e| Error::launch("hbm_read", e))?;
        Ok(())
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
        // Outside the timed region: every L2 line now holds flush data; after the read sweep,
        // sweep data that no sample writes, so none of it is dirty.
        self.stream
            .memset_zeros(&mut self.flush)
            .map_err(|e| Error::driver("flushing the L2", e))?;
        self.launch_sweep(SWEEP_NEVER)?;
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
    fn flush_methods_parse_print_and_name_their_timing() {
        for method in L2Flush::ALL {
            assert_eq!(method.name().parse::<L2Flush>(), Ok(method));
            assert_eq!(method.to_string(), method.name());
            assert!(method.timing(true).ends_with("+spin_hold"));
            assert!(!method.timing(false).contains("spin_hold"));
            assert_eq!(
                method.timing(true).contains("read_sweep"),
                method == L2Flush::MemsetRead
            );
        }
        assert_eq!(L2Flush::default(), L2Flush::MemsetRead);
        assert_eq!(L2Flush::default().timing(true), METHOD);
        assert_eq!(L2Flush::default().timing(false), METHOD_UNHELD);
        // The memset-only strings are the ones every GPU record carried before the sweep.
        assert_eq!(
            L2Flush::Memset.timing(true),
            "cuda_events+l2_flush+spin_hold"
        );
        assert_eq!(L2Flush::Memset.timing(false), "cuda_events+l2_flush");
        let err = "memset+reed".parse::<L2Flush>().unwrap_err();
        assert_eq!(
            err,
            "unknown L2 flush `memset+reed` (known: memset, memset+read)"
        );
    }

    #[test]
    fn every_sweep_thread_reads_as_many_elements() {
        let threads = u64::from(SWEEP_GRID.0 * SWEEP_GRID.1);
        for l2 in [0, 1, 50_000_000, 62_914_560, 1 << 20] {
            let elements = flush_bytes(l2) as u64 / 16;
            assert_eq!(elements % threads, 0, "L2 of {l2} B");
        }
    }

    #[test]
    fn flush_buffer_is_twice_the_l2_in_whole_mib() {
        assert_eq!(flush_bytes(62_914_560), 120 << 20); // H200: 60 MiB
        assert_eq!(flush_bytes(50_000_000), 96 << 20); // 2 x 47.7 MiB, rounded up
        assert_eq!(flush_bytes(0), FLUSH_BYTES_UNKNOWN_L2);
        assert!(flush_bytes(1) >= 2);
    }
}
