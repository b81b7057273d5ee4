// Helpers of the bench harness (tileops::perf::bench); not an op.
//
// bench_spin holds the stream for `ns` nanoseconds of GPU time, on one thread. The harness launches
// it just before the start event of every sample and then enqueues the start event, the op's
// kernels and the end event while it spins. When it ends, all of them are already queued, so the
// GPU runs them back to back and the events time the kernels, not the host's launch latency (which
// is several microseconds and would dominate kernels under ~10 us).

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// The bench harness's stream-holding spin kernel (`tileops::perf::bench`).
// @entry bench_spin: scalar

extern "C" __global__ void bench_spin(unsigned long long ns) {
    unsigned long long start;
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
