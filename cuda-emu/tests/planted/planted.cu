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

// ---- Tensor cores: mma, ldmatrix and cp.async (tileops_mma.cuh) ---------------------------------

#include "tileops_mma.cuh"

// The bugs a tensor-core tile loop can carry, planted one at a time into the same GEMM.
enum MmaPlant {
    kMmaCorrect,
    kMmaWrongFragment,     // a[1] and a[2] swapped: rows g + 8 and columns 2t + 8 mixed up
    kMmaNoWait,            // no cp.async.wait_group before the barrier: reads copies in flight
    kMmaNoBarrier,         // no barrier between the last read of a stage and its next copies
    kMmaMisalignedRow,     // lane 3 points ldmatrix 8 bytes into its row
    kMmaRowOutsideShared,  // ldmatrix rows in global memory
    kMmaDivergent,         // half the warp skips the fragment loads and mma
};
// B in shared memory: rows of n (B^T, K contiguous: plain ldmatrix) or rows of k (.trans).
enum MmaLayout { kMmaNK, kMmaKN };

// C (64 x 64, f32) = A (64 x K, row-major) * B, K a multiple of 8, 16-bit elements (the float
// buffers hold them in pairs). B is N x K (kMmaNK) or K x N (kMmaKN) in global memory and in
// shared memory. 128 threads: warp w computes rows 16w..16w+15, all 64 columns, with eight
// m16n8k16 tiles. K is staged 32 at a time through one shared stage by cp.async (zero-filled
// past K), then read by ldmatrix: A as kALoad matrices per call (x1, x2, x4), B as kBLoad.
template <bool kBf16, int kALoad, MmaLayout kLayout, int kBLoad, MmaPlant kPlant>
__device__ __forceinline__ void mma_gemm(const float* a_words, const float* b_words, float* c, int k_total) {
    constexpr int kChunk = 32;
    __shared__ __align__(16) uint16_t sa[64 * kChunk];
    __shared__ __align__(16) uint16_t sb[64 * kChunk];
    const uint16_t* a = reinterpret_cast<const uint16_t*>(a_words);
    const uint16_t* b = reinterpret_cast<const uint16_t*>(b_words);
    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    float acc[8][4];
    for (int j = 0; j < 8; ++j)
        for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
    for (int k0 = 0; k0 < k_total; k0 += kChunk) {
        // 256 16-byte segments of A and of B per stage, two of each per thread.
        for (int s = tid; s < 256; s += 128) {
            const int row = s / 4, seg = s % 4;
            const bool valid = k0 + 8 * seg < k_total;
            cp_async_cg_16_zfill(&sa[row * kChunk + 8 * seg], valid ? a + row * k_total + k0 + 8 * seg : a, valid);
            if (kLayout == kMmaNK) {
                uint16_t* dst = &sb[row * kChunk + 8 * seg];
                if (valid) {
                    cp_async_cg_16(dst, b + row * k_total + k0 + 8 * seg);
                } else {
                    cp_async_cg_16_zfill(dst, b, false);
                }
            } else {
                const int kk = s / 8, nseg = s % 8;
                uint16_t* dst = &sb[kk * 64 + 8 * nseg];
                if (k0 + kk < k_total) {
                    cp_async_cg_16(dst, b + (k0 + kk) * 64 + 8 * nseg);
                } else {
                    cp_async_cg_16_zfill(dst, b, false);
                }
            }
        }
        cp_async_commit_group();
        if (kPlant != kMmaNoWait) cp_async_wait_group(0);
        __syncthreads();
        for (int ks = 0; ks < kChunk; ks += 16) {
            if (kPlant == kMmaDivergent && lane >= 16) break;
            uint32_t af[4];
            const uint16_t* a_tile = &sa[(16 * warp) * kChunk + ks];
            if (kALoad == 4) {
                const uint16_t* row = a_tile + (lane % 16) * kChunk + 8 * (lane / 16);
                if (kPlant == kMmaMisalignedRow && lane == 3) row += 4;
                if (kPlant == kMmaRowOutsideShared) row = a + 8 * lane;
                ldmatrix_x4(af, row);
            } else if (kALoad == 2) {
                uint32_t lo[2], hi[2];
                ldmatrix_x2(lo, a_tile + (lane % 16) * kChunk);
                ldmatrix_x2(hi, a_tile + (lane % 16) * kChunk + 8);
                af[0] = lo[0], af[1] = lo[1], af[2] = hi[0], af[3] = hi[1];
            } else {
                for (int i = 0; i < 4; ++i) {
                    uint32_t one[1];
                    ldmatrix_x1(one, a_tile + ((lane % 8) + 8 * (i % 2)) * kChunk + 8 * (i / 2));
                    af[i] = one[0];
                }
            }
            if (kPlant == kMmaWrongFragment) {
                const uint32_t t = af[1];
                af[1] = af[2];
                af[2] = t;
            }
            for (int j = 0; j < 8; j += (kBLoad == 4 ? 2 : 1)) {
                uint32_t bf[2][2];
                if (kLayout == kMmaNK) {
                    // Rows n of 8 k each: matrix m of an x4 is tile j + m / 2, k half m % 2.
                    const uint16_t* base = &sb[(8 * j + lane % 8) * kChunk + ks];
                    if (kBLoad == 4) {
                        uint32_t r[4];
                        ldmatrix_x4(r, base + (lane / 16) * 8 * kChunk + 8 * ((lane / 8) % 2));
                        bf[0][0] = r[0], bf[0][1] = r[1], bf[1][0] = r[2], bf[1][1] = r[3];
                    } else if (kBLoad == 2) {
                        ldmatrix_x2(bf[0], base + 8 * ((lane / 8) % 2));
                    } else {
                        uint32_t r0[1], r1[1];
                        ldmatrix_x1(r0, base);
                        ldmatrix_x1(r1, base + 8);
                        bf[0][0] = r0[0], bf[0][1] = r1[0];
                    }
                } else {
                    // Rows k of 64 n: transposed 8x8 blocks give the "col" B fragments.
                    const uint16_t* base = &sb[(ks + lane % 8) * 64 + 8 * j];
                    if (kBLoad == 4) {
                        uint32_t r[4];
                        ldmatrix_x4_trans(r, base + 8 * ((lane / 8) % 2) * 64 + 8 * (lane / 16));
                        bf[0][0] = r[0], bf[0][1] = r[1], bf[1][0] = r[2], bf[1][1] = r[3];
                    } else if (kBLoad == 2) {
                        ldmatrix_x2_trans(bf[0], base + 8 * ((lane / 8) % 2) * 64);
                    } else {
                        uint32_t r0[1], r1[1];
                        ldmatrix_x1_trans(r0, base);
                        ldmatrix_x1_trans(r1, base + 8 * 64);
                        bf[0][0] = r0[0], bf[0][1] = r1[0];
                    }
                }
                for (int h = 0; h < (kBLoad == 4 ? 2 : 1); ++h) {
                    if (kBf16) {
                        mma_m16n8k16_bf16(acc[j + h], af, bf[h], acc[j + h]);
                    } else {
                        mma_m16n8k16_f16(acc[j + h], af, bf[h], acc[j + h]);
                    }
                }
            }
        }
        if (kPlant != kMmaNoBarrier) __syncthreads();
    }
    const int g = lane / 4, t = lane % 4;
    for (int j = 0; j < 8; ++j) {
        float* out = c + (16 * warp + g) * 64 + 8 * j + 2 * t;
        out[0] = acc[j][0];
        out[1] = acc[j][1];
        out[8 * 64] = acc[j][2];
        out[8 * 64 + 1] = acc[j][3];
    }
}

#define PLANTED_MMA(name, ...)                                                                   \
    extern "C" __global__ void __launch_bounds__(128) name(const float* a, const float* b, float* c, int k) { \
        mma_gemm<__VA_ARGS__>(a, b, c, k);                                                      \
    }
// The correct GEMMs: every ldmatrix form, both layouts, both element types.
PLANTED_MMA(planted_mma_bf16_a4_nk2_ok, true, 4, kMmaNK, 2, kMmaCorrect)
PLANTED_MMA(planted_mma_f16_a2_kn4t_ok, false, 2, kMmaKN, 4, kMmaCorrect)
PLANTED_MMA(planted_mma_bf16_a1_kn2t_ok, true, 1, kMmaKN, 2, kMmaCorrect)
PLANTED_MMA(planted_mma_f16_a4_nk4_ok, false, 4, kMmaNK, 4, kMmaCorrect)
PLANTED_MMA(planted_mma_bf16_a4_kn1t_ok, true, 4, kMmaKN, 1, kMmaCorrect)
PLANTED_MMA(planted_mma_f16_a1_nk1_ok, false, 1, kMmaNK, 1, kMmaCorrect)
// The planted bugs, each in the first GEMM.
PLANTED_MMA(planted_mma_wrong_fragment, true, 4, kMmaNK, 2, kMmaWrongFragment)
PLANTED_MMA(planted_mma_no_wait, true, 4, kMmaNK, 2, kMmaNoWait)
PLANTED_MMA(planted_mma_no_barrier, true, 4, kMmaNK, 2, kMmaNoBarrier)
PLANTED_MMA(planted_mma_misaligned_row, true, 4, kMmaNK, 2, kMmaMisalignedRow)
PLANTED_MMA(planted_mma_row_outside_shared, true, 4, kMmaNK, 2, kMmaRowOutsideShared)
PLANTED_MMA(planted_mma_divergent, true, 4, kMmaNK, 2, kMmaDivergent)

// cp.async's own operand checks: a source 8 bytes off its 16-byte alignment.
extern "C" __global__ void planted_cp_async_misaligned(const float* x, float* y) {
    __shared__ __align__(16) float stage[32 * 4];
    cp_async_cg_16(&stage[4 * threadIdx.x], x + 4 * threadIdx.x + 2);
    cp_async_commit_group();
    cp_async_wait_group(0);
    __syncthreads();
    y[threadIdx.x] = stage[4 * threadIdx.x];
}

// Each thread copies 16 bytes and reads them back without waiting, after a few switches: under
// round robin it always sees the poison; under the random schedule some copies have landed early.
extern "C" __global__ void planted_cp_async_peek(const float* x, float* y) {
    __shared__ __align__(16) float stage[64 * 4];
    const int t = threadIdx.x;
    cp_async_cg_16(&stage[4 * t], x + 4 * t);
    cp_async_commit_group();
    for (int i = 0; i < 8; ++i) __syncwarp();
    y[t] = stage[4 * t];
    cp_async_wait_group(0);
}

// cp.async into global memory (its destination must be shared).
extern "C" __global__ void planted_cp_async_to_global(const float* x, float* y) {
    cp_async_cg_16(y + 4 * threadIdx.x, x + 4 * threadIdx.x);
    cp_async_commit_group();
    cp_async_wait_group(0);
}
