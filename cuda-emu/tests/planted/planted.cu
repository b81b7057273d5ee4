// The emulator's self-test kernels: small kernels written to be wrong (planted_*), each of which
// the emulator must flag with a reason, and correct twins (*_ok) that must pass under every
// schedule. Compiled into the emulator like tileops's own kernel files; tests/planted.rs runs them.

// out[i] = 2 * in[i] over a grid-stride loop (correct; the crate's doc example).
extern "C" __global__ void planted_scale2(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = 2.0f * x[i];
}

__device__ __forceinline__ float planted_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Two block sums through one scratch array. Correct only with the barrier between the last read
// of the first sum and the first write of the second.
template <bool kBarrierBeforeReuse>
__device__ __forceinline__ void two_block_sums(const float* x, float* out) {
    __shared__ float scratch[32];
    const int lane = threadIdx.x & 31;
    const int warps = blockDim.x >> 5;
    float sums[2];
    for (int r = 0; r < 2; ++r) {
        float v = planted_warp_sum(x[r * blockDim.x + threadIdx.x]);
        if (lane == 0) scratch[threadIdx.x >> 5] = v;
        __syncthreads();
        v = lane < warps ? scratch[lane] : 0.0f;
        sums[r] = planted_warp_sum(v);
        if (kBarrierBeforeReuse) __syncthreads();
    }
    // Every thread reports what it computed: a thread that read a slot another warp had already
    // overwritten shows.
    out[2 * threadIdx.x] = sums[0];
    out[2 * threadIdx.x + 1] = sums[1];
}
extern "C" __global__ void planted_missing_barrier(const float* x, float* out) { two_block_sums<false>(x, out); }
extern "C" __global__ void planted_block_sums_ok(const float* x, float* out) { two_block_sums<true>(x, out); }

// Reads all 32 scratch slots although only one per warp was written.
extern "C" __global__ void planted_unwritten_shared(const float* x, float* out) {
    __shared__ float scratch[32];
    const int lane = threadIdx.x & 31;
    float v = planted_warp_sum(x[threadIdx.x]);
    if (lane == 0) scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    v = planted_warp_sum(scratch[lane]);
    if (threadIdx.x == 0) out[0] = v;
}

// y[i] = x[i] + x[i + 1]: the last thread reads one element past the end of x.
extern "C" __global__ void planted_tail_overread(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + x[i + 1];
}

// y[i + 1] = x[i]: the last thread writes one element past the end of y.
extern "C" __global__ void planted_tail_overwrite(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i + 1] = x[i];
}

// A 16-byte load from a 4-byte-aligned address.
extern "C" __global__ void planted_misaligned_load(const float* x, float* y) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(x + 1));
    y[threadIdx.x] = __uint_as_float(v.x);
}

// Half the block waits at a barrier the other half never reaches.
extern "C" __global__ void planted_divergent_barrier(float* y) {
    if (threadIdx.x < 16) __syncthreads();
    y[threadIdx.x] = 1.0f;
}

// A warp sum over width 16 that starts at offset 16: the first step is a no-op, the sum wrong.
extern "C" __global__ void planted_wrong_shuffle_width(const float* x, float* y) {
    float v = x[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o, 16);
    y[threadIdx.x] = v;
}

// A full-mask shuffle that only half the warp executes.
extern "C" __global__ void planted_shuffle_in_divergent_branch(const float* x, float* y) {
    float v = x[threadIdx.x];
    if ((threadIdx.x & 31) < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
    y[threadIdx.x] = v;
}

// Lanes swap values through shared memory; correct only with __syncwarp between the write and
// the read (independent thread scheduling: lanes of a warp are not in lock-step).
template <bool kSyncwarp>
__device__ __forceinline__ void warp_exchange(const float* x, float* y) {
    __shared__ float slots[1024];
    slots[threadIdx.x] = x[threadIdx.x];
    if (kSyncwarp) __syncwarp();
    y[threadIdx.x] = slots[threadIdx.x ^ 1];
}
extern "C" __global__ void planted_warp_exchange_no_syncwarp(const float* x, float* y) { warp_exchange<false>(x, y); }
extern "C" __global__ void planted_warp_exchange_ok(const float* x, float* y) { warp_exchange<true>(x, y); }

// Declares at most 64 threads per block.
extern "C" __global__ void __launch_bounds__(64) planted_bounded(float* y) { y[threadIdx.x] = 1.0f; }

// ---- The traffic ledger's planted checks (tests/planted.rs, `asan_traffic_*`) ------------------

// y[i] = x[2i] as 16-byte vectors: a 32-byte lane stride, so each request touches twice the
// sectors its bytes need.
extern "C" __global__ void planted_lane_stride32(const float* x, float* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    reinterpret_cast<float4*>(y)[i] = __ldg(reinterpret_cast<const float4*>(x) + 2 * i);
}
// The twin: lane-contiguous 16-byte loads.
extern "C" __global__ void planted_lane_contiguous(const float* x, float* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    reinterpret_cast<float4*>(y)[i] = __ldg(reinterpret_cast<const float4*>(x) + i);
}

// A warp stages x through shared memory at a two-word lane stride: lanes t and t + 16 share a
// bank, a 2-way conflict on the store and on the load.
template <int kStride>
__device__ __forceinline__ void staged(const float* x, float* y) {
    __shared__ float stage[64];
    const int t = threadIdx.x;
    stage[kStride * t] = x[t];
    __syncthreads();
    y[t] = 2.0f * stage[kStride * t];
}
extern "C" __global__ void planted_bank_conflict(const float* x, float* y) { staged<2>(x, y); }
extern "C" __global__ void planted_bank_conflict_free(const float* x, float* y) { staged<1>(x, y); }

// A two-pass "divide by the block's max" whose second pass reads the input again: launched as
// two kernels (max, then scale), the input crosses DRAM twice; the one-pass twin keeps its
// element in a register. Blocks of 32 threads, one element each.
__device__ __forceinline__ float planted_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
extern "C" __global__ void planted_max_pass(const float* x, float* m) {
    const float v = planted_warp_max(x[blockIdx.x * 32 + threadIdx.x]);
    if (threadIdx.x == 0) m[blockIdx.x] = v;
}
extern "C" __global__ void planted_scale_pass(const float* x, const float* m, float* y) {
    const int i = blockIdx.x * 32 + threadIdx.x;
    y[i] = x[i] / m[blockIdx.x];
}
extern "C" __global__ void planted_max_scale_one_pass(const float* x, float* y) {
    const int i = blockIdx.x * 32 + threadIdx.x;
    const float v = x[i];
    y[i] = v / planted_warp_max(v);
}
