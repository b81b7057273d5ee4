// The fused case study: for every head row (head_dim 128) of q [tokens, q_heads, 128]
// and k [tokens, k_heads, 128], in ONE kernel and one pass over the data:
//   RMS norm with a per-head_dim weight     n = x * rsqrt(mean(x^2) + eps) * w
//   NeoX RoPE at the token's position        y1 = n1 cos - n2 sin, y2 = n2 cos + n1 sin
//   fp8 e4m3 with one f32 scale per row      scale = max(amax(y) / 448, 1 / (448 * 512)),
//                                            codes = saturate_e4m3(y * (1 / scale))
// all in f32 registers: the normalized and rotated rows never leave the SM. Entry points:
// qk_norm_rope_fp8_bf16 and qk_norm_rope_fp8_f16 (the ledger counts 2-byte inputs).
//
// Layout: one block per token (grid-stride), 8 threads per head row. Thread j of a row holds the
// 16-byte vector j of x1 (elements 8j..8j+7) and vector j of x2 (64+8j..), so RoPE pairs are in
// one thread; the norm and the amax are 3-step shuffles over the 8 lanes. The 8 codes of x1 and
// the 8 of x2 are then exchanged with the neighbour lane so that each thread writes 16
// consecutive codes with one 16-byte store (even j: x1 vectors j, j+1; odd j: x2 vectors j-1, j).
//
// What one call reads: q and k once (16-byte loads), the two weights once per block (staged in
// shared memory as f32; L2 after the first block), positions once per token (one transaction), and the token's ONE [cos | sin] table
// row once per token, staged in shared memory for all q_heads + k_heads rows of the token. It
// writes the codes once and one scale per row. The manifest keeps its per-row ledger, which charges
// the lookups as 2 x head_dim floats per token (cos and sin as separate head_dim-wide tables) and
// leaves out the 8-byte positions: the kernel moves tokens x (head_dim x 4 - 8) bytes fewer than
// the ledger says (see manifest/fused.yaml).
//
// NaN: the row max propagates it (nan_max, as torch.amax), so a row holding a NaN after the norm
// and RoPE (a NaN input, which the norm spreads over its row; an inf, whose inf * 0 in the norm is
// NaN) gets scale NaN and every code NaN (0x7F). A position outside [0, max_pos) makes the token's
// rows NaN the same way (a kernel cannot report an error; the CPU path refuses such positions).
//
// Launch contract (checked by the host): blockDim.x a multiple of 32, at most 512; all pointers
// 16-byte aligned.

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// 2-byte inputs only (fused.yaml's per-row ledger counts 2-byte q and k).
// @entry qk_norm_rope_fp8_f16: vector loads, vector stores
// @entry qk_norm_rope_fp8_bf16: vector loads, vector stores

#include "tileops_common.cuh"
#include "tileops_fp8.cuh"

using namespace tileops;

namespace {

constexpr int kHeadDim = 128;
constexpr int kHalf = kHeadDim / 2;
constexpr int kLanes = 8;  // threads per head row

}  // namespace

template <typename T>
__device__ __forceinline__ void qk_norm_rope_fp8(const T* __restrict__ q, const T* __restrict__ k,
                                                 const T* __restrict__ q_weight, const T* __restrict__ k_weight,
                                                 const long long* __restrict__ positions,
                                                 const float* __restrict__ cache, unsigned char* __restrict__ q_out,
                                                 unsigned char* __restrict__ k_out, float* __restrict__ q_scale,
                                                 float* __restrict__ k_scale, long long tokens, int q_heads,
                                                 int k_heads, long long max_pos, float eps) {
    using E = Elem<T>;
    static_assert(E::V == kLanes, "two-byte element types: 8 per 16-byte vector");
    constexpr int V = E::V;
    __shared__ __align__(16) float table[kHeadDim];
    // Both weights as f32, staged once per block (they are read from L2 after the first block).
    __shared__ __align__(16) float weights[2 * kHeadDim];

    const int j = threadIdx.x & (kLanes - 1);
    const int slot = threadIdx.x / kLanes;
    const int slots = blockDim.x / kLanes;
    const int rows = q_heads + k_heads;
    const int passes = (rows + slots - 1) / slots;

    for (int i = threadIdx.x; i < 2 * kHeadDim; i += blockDim.x)
        weights[i] = i < kHeadDim ? E::load(q_weight + i) : E::load(k_weight + (i - kHeadDim));

    for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
        // The first pass's row is loaded before the table is staged, so that its DRAM latency
        // overlaps the position -> table-row dependency chain.
        uint4 ra = make_uint4(0, 0, 0, 0), rb = ra;
        {
            const int r = slot;
            if (r < rows) {
                const bool is_q = r < q_heads;
                const long long row = is_q ? t * q_heads + r : t * k_heads + (r - q_heads);
                const T* src = (is_q ? q : k) + row * kHeadDim;
                ra = load16(src + j * V);
                rb = load16(src + kHalf + j * V);
            }
        }
        const long long pos = __ldg(positions + t);
        const bool ok = pos >= 0 && pos < max_pos;
        if (threadIdx.x < kHeadDim / 4) {
            const float n = __int_as_float(0x7fffffff);
            const float4* src = reinterpret_cast<const float4*>(cache + (ok ? pos : 0) * kHeadDim);
            reinterpret_cast<float4*>(table)[threadIdx.x] = ok ? __ldg(src + threadIdx.x) : make_float4(n, n, n, n);
        }
        __syncthreads();

        // Every lane runs every pass (the shuffles need whole warps); rows past the end idle.
        for (int pass = 0; pass < passes; ++pass) {
            const int r = pass * slots + slot;
            const bool active = r < rows;
            const bool is_q = r < q_heads;
            const long long row = is_q ? t * q_heads + r : t * k_heads + (r - q_heads);
            if (pass > 0 && active) {
                const T* src = (is_q ? q : k) + row * kHeadDim;
                ra = load16(src + j * V);
                rb = load16(src + kHalf + j * V);
            }
            float a[V], b[V];
            E::unpack(ra, a);
            E::unpack(rb, b);
            if (!active) {
#pragma unroll
                for (int i = 0; i < V; ++i) a[i] = b[i] = 0.0f;
            }
            float ss = 0.0f;
#pragma unroll
            for (int i = 0; i < V; ++i) ss = fmaf(b[i], b[i], fmaf(a[i], a[i], ss));
            ss = segment_sum(ss, kLanes);
            const float rstd = 1.0f / sqrtf(ss / static_cast<float>(kHeadDim) + eps);

            const float* w = weights + (is_q ? 0 : kHeadDim);
            float amax = 0.0f;
#pragma unroll
            for (int i = 0; i < V; i += 4) {
                const float4 w1 = *reinterpret_cast<const float4*>(w + j * V + i);
                const float4 w2 = *reinterpret_cast<const float4*>(w + kHalf + j * V + i);
                const float4 cv = *reinterpret_cast<const float4*>(table + j * V + i);
                const float4 sv = *reinterpret_cast<const float4*>(table + kHalf + j * V + i);
                const float wa[4] = {w1.x, w1.y, w1.z, w1.w}, wb[4] = {w2.x, w2.y, w2.z, w2.w};
                const float c[4] = {cv.x, cv.y, cv.z, cv.w}, s[4] = {sv.x, sv.y, sv.z, sv.w};
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float n1 = (a[i + e] * rstd) * wa[e];
                    const float n2 = (b[i + e] * rstd) * wb[e];
                    a[i + e] = n1 * c[e] - n2 * s[e];
                    b[i + e] = n2 * c[e] + n1 * s[e];
                    amax = nan_max(amax, nan_max(fabsf(a[i + e]), fabsf(b[i + e])));
                }
            }
            amax = segment_max(amax, kLanes);
            const float scale = fp8_scale(amax);
            const float inv = 1.0f / scale;

            const unsigned lo0 = fp8x4(a[0] * inv, a[1] * inv, a[2] * inv, a[3] * inv);
            const unsigned lo1 = fp8x4(a[4] * inv, a[5] * inv, a[6] * inv, a[7] * inv);
            const unsigned hi0 = fp8x4(b[0] * inv, b[1] * inv, b[2] * inv, b[3] * inv);
            const unsigned hi1 = fp8x4(b[4] * inv, b[5] * inv, b[6] * inv, b[7] * inv);
            const bool even = (j & 1) == 0;
            // Even lanes keep their x1 codes and need the odd neighbour's; odd lanes the reverse.
            const unsigned r0 = __shfl_xor_sync(0xffffffffu, even ? hi0 : lo0, 1);
            const unsigned r1 = __shfl_xor_sync(0xffffffffu, even ? hi1 : lo1, 1);
            if (active) {
                unsigned char* dst = (is_q ? q_out : k_out) + row * kHeadDim;
                if (even) {
                    store16(dst + j * V, make_uint4(lo0, lo1, r0, r1));
                } else {
                    store16(dst + kHalf + (j - 1) * V, make_uint4(r0, r1, hi0, hi1));
                }
                if (j == 0) (is_q ? q_scale : k_scale)[row] = scale;
            }
        }
        // The next token overwrites the table.
        __syncthreads();
    }
}

#define TILEOPS_QK_NORM_ROPE_FP8_ENTRY(T, SUFFIX)                                                                 \
    extern "C" __global__ void __launch_bounds__(512) qk_norm_rope_fp8_##SUFFIX(                                  \
        const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ q_weight,                        \
        const T* __restrict__ k_weight, const long long* __restrict__ positions, const float* __restrict__ cache, \
        unsigned char* __restrict__ q_out, unsigned char* __restrict__ k_out, float* __restrict__ q_scale,      \
        float* __restrict__ k_scale, long long tokens, int q_heads, int k_heads, long long max_pos, float eps) {  \
        qk_norm_rope_fp8<T>(q, k, q_weight, k_weight, positions, cache, q_out, k_out, q_scale, k_scale, tokens,  \
                            q_heads, k_heads, max_pos, eps);                                                      \
    }

TILEOPS_QK_NORM_ROPE_FP8_ENTRY(__half, f16)
TILEOPS_QK_NORM_ROPE_FP8_ENTRY(__nv_bfloat16, bf16)
