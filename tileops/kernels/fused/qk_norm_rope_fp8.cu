// The fused case study: for every head row (head_dim 128) of q [tokens, q_heads, 128]
// and k [tokens, k_heads, 128], in ONE kernel and one pass over the data:
//   RMS norm with a per-head_dim weight     n = x * rsqrt(mean(x^2) + eps) * w
//   NeoX RoPE at the token's position        y1 = n1 cos - n2 sin, y2 = n2 cos + n1 sin
//   fp8 e4m3 with one f32 scale per row      scale = max(amax(y) / 448, 1 / (448 * 512)),
//                                            codes = saturate_e4m3(y * (1 / scale))
// all in f32 registers: the normalized and rotated rows never leave the SM. Entry points:
// qk_norm_rope_fp8_bf16 and qk_norm_rope_fp8_f16 (the ledger counts 2-byte inputs).
//
// Layout: one block per token (grid-stride), 4 threads per head row. Thread j of a row holds the
// 16-byte vectors j and j + 4 of x1 (elements 8j..8j+7, 32+8j..) and the same vectors of x2
// (64+8j.., 96+8j..), so RoPE pairs are in one thread and consecutive lanes load consecutive
// vectors; the norm and the amax are 2-step shuffles over the 4 lanes. The norm's rstd is applied
// once, to the row's amax and to the code multiplier (y = rstd * y', y' the rotated x * w, so
// max |y| = rstd * max |y'| and codes = y' * (rstd / scale)): one multiply per element less. The
// codes are then exchanged with the neighbour lane so that each thread writes two 16-byte runs
// of 16 consecutive codes (even j: x1 and x2 vectors j, j+1; odd j: vectors j+3, j+4), the two
// lanes' runs contiguous in one store instruction.
//
// What one call reads: q and k once (16-byte loads), the two weights once per block (staged in
// shared memory as f32, k's one 16-byte quad after q's so that a phase of lanes reading both
// stays conflict-free; L2 after the first block), positions once per token (one transaction), and the token's ONE [cos | sin] table
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
constexpr int kLanes = 4;  // threads per head row
// Where k's weights start in the staged weights: q's 128 floats and one quad more, so that q and
// k columns 8j (quad 2j) fall in different bank groups (2j and 2j + 1).
constexpr int kKWeights = kHeadDim + 4;

}  // namespace

// max(m, |y|), NaN propagating (nan_max's result): one max.NaN.f32 with the magnitude as an
// operand modifier on the GPU.
__device__ __forceinline__ float abs_max(float m, float y) {
#ifdef TILEOPS_EMULATED
    return nan_max(m, fabsf(y));
#else
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(m), "f"(fabsf(y)));
    return r;
#endif
}

template <typename T>
__device__ __forceinline__ void qk_norm_rope_fp8(const T* __restrict__ q, const T* __restrict__ k,
                                                 const T* __restrict__ q_weight, const T* __restrict__ k_weight,
                                                 const long long* __restrict__ positions,
                                                 const float* __restrict__ cache, unsigned char* __restrict__ q_out,
                                                 unsigned char* __restrict__ k_out, float* __restrict__ q_scale,
                                                 float* __restrict__ k_scale, long long tokens, int q_heads,
                                                 int k_heads, long long max_pos, float eps) {
    using E = Elem<T>;
    constexpr int V = E::V;
    static_assert(V == 8, "two-byte element types: 8 per 16-byte vector");
    __shared__ __align__(16) float table[kHeadDim];
    // Both weights as f32, staged once per block (they are read from L2 after the first block).
    __shared__ __align__(16) float weights[kKWeights + kHeadDim];
    const float4* table4 = reinterpret_cast<const float4*>(table);

    const int j = threadIdx.x & (kLanes - 1);
    const int slot = threadIdx.x / kLanes;
    const int slots = blockDim.x / kLanes;
    const int rows = q_heads + k_heads;
    const int passes = (rows + slots - 1) / slots;

    for (int i = threadIdx.x; i < 2 * kHeadDim; i += blockDim.x)
        weights[i < kHeadDim ? i : i + (kKWeights - kHeadDim)] =
            i < kHeadDim ? E::load(q_weight + i) : E::load(k_weight + (i - kHeadDim));

    for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
        const long long pos = __ldg(positions + t);
        const bool ok = pos >= 0 && pos < max_pos;
        if (threadIdx.x < kHeadDim / 4) {
            const float n = __int_as_float(0x7fffffff);
            const float4* src = reinterpret_cast<const float4*>(cache + (ok ? pos : 0) * kHeadDim);
            reinterpret_cast<float4*>(table)[threadIdx.x] = ok ? __ldg(src + threadIdx.x) : make_float4(n, n, n, n);
        }
        __syncthreads();
        // Row rr of the token is q row q_row + rr (rr < q_heads) or k row k_row + rr.
        const long long q_row = t * q_heads;
        const long long k_row = t * k_heads - q_heads;

        // Every lane runs every pass (the shuffles need whole warps); rows past the end idle.
        for (int pass = 0; pass < passes; ++pass) {
            const int rr = pass * slots + slot;
            const bool active = rr < rows;
            const bool is_q = rr < q_heads;
            const long long row = (is_q ? q_row : k_row) + rr;
            // Vector v of this lane: x1 vectors j, j + 4 (v = 0, 1), x2 vectors j, j + 4 (v = 2, 3).
            uint4 r[4];
            if (active) {
                const uint4* src = reinterpret_cast<const uint4*>((is_q ? q : k) + row * kHeadDim) + j;
#pragma unroll
                for (int v = 0; v < 4; ++v) r[v] = load16(src + 4 * v);
            } else {
#pragma unroll
                for (int v = 0; v < 4; ++v) r[v] = make_uint4(0, 0, 0, 0);
            }
            // a: x1 (vectors j, j + 4), b: x2 (the same columns of the second half).
            float a[2 * V], b[2 * V];
            {
                float f[V];
#pragma unroll
                for (int v = 0; v < 2; ++v) {
                    E::unpack(r[v], f);
#pragma unroll
                    for (int i = 0; i < V; ++i) a[v * V + i] = f[i];
                    E::unpack(r[v + 2], f);
#pragma unroll
                    for (int i = 0; i < V; ++i) b[v * V + i] = f[i];
                }
            }
            float ss = 0.0f;
#pragma unroll
            for (int i = 0; i < 2 * V; ++i) ss = fmaf(b[i], b[i], fmaf(a[i], a[i], ss));
            ss = segment_sum(ss, kLanes);
            const float rstd = rsqrtf(ss * (1.0f / kHeadDim) + eps);

            // y' = rotate(x * w): the row before the rstd factor.
            const float* w = weights + (is_q ? 0 : kKWeights);
            float amax = 0.0f;
#pragma unroll
            for (int v = 0; v < 2; ++v) {
#pragma unroll
                for (int i = 0; i < V; i += 4) {
                    const int col = 32 * v + V * j + i;
                    const float4 w1 = *reinterpret_cast<const float4*>(w + col);
                    const float4 w2 = *reinterpret_cast<const float4*>(w + kHalf + col);
                    const float4 cv = table4[col / 4];
                    const float4 sv = table4[(kHalf + col) / 4];
                    const float wa[4] = {w1.x, w1.y, w1.z, w1.w}, wb[4] = {w2.x, w2.y, w2.z, w2.w};
                    const float c[4] = {cv.x, cv.y, cv.z, cv.w}, s[4] = {sv.x, sv.y, sv.z, sv.w};
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int at = v * V + i + e;
                        const float n1 = a[at] * wa[e];
                        const float n2 = b[at] * wb[e];
                        a[at] = n1 * c[e] - n2 * s[e];
                        b[at] = n2 * c[e] + n1 * s[e];
                        amax = abs_max(abs_max(amax, a[at]), b[at]);
                    }
                }
            }
            // Over the row's 4 lanes (magnitudes: abs_max is a plain NaN-propagating max).
#pragma unroll
            for (int o = kLanes / 2; o > 0; o /= 2) amax = abs_max(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            amax *= rstd;
            // fp8_scale's floor and NaN rule; amax / 448 as a product and the multiplier as an
            // approximate quotient: both within 2 ulp, far inside the 1e-5 the scales are held to
            // and the one code step of the codes.
            const float scale = nan_max(amax * (1.0f / kFp8Max), kFp8MinScale);
            const float mult = __fdividef(rstd, scale);

            // Codes of vector v as two words each: x1 (v = 0, 1) and x2 (v = 2, 3).
            uint2 code[4];
#pragma unroll
            for (int v = 0; v < 2; ++v) {
                const float* x1 = a + v * V;
                const float* x2 = b + v * V;
                code[v] = make_uint2(fp8x4(x1[0] * mult, x1[1] * mult, x1[2] * mult, x1[3] * mult),
                                     fp8x4(x1[4] * mult, x1[5] * mult, x1[6] * mult, x1[7] * mult));
                code[v + 2] = make_uint2(fp8x4(x2[0] * mult, x2[1] * mult, x2[2] * mult, x2[3] * mult),
                                         fp8x4(x2[4] * mult, x2[5] * mult, x2[6] * mult, x2[7] * mult));
            }
            // Even j stores vectors (j, j + 1) of x1 and of x2 and needs the odd neighbour's
            // vectors j + 1 (its v = 0, 2); the odd lane stores (j + 3, j + 4) and needs the even
            // one's vectors j + 3 (its v = 1, 3).
            const bool even = (j & 1) == 0;
            const uint2 send1 = even ? code[1] : code[0];
            const uint2 send2 = even ? code[3] : code[2];
            uint2 r1, r2;
            r1.x = __shfl_xor_sync(0xffffffffu, send1.x, 1);
            r1.y = __shfl_xor_sync(0xffffffffu, send1.y, 1);
            r2.x = __shfl_xor_sync(0xffffffffu, send2.x, 1);
            r2.y = __shfl_xor_sync(0xffffffffu, send2.y, 1);
            if (active) {
                unsigned char* dst = (is_q ? q_out : k_out) + row * kHeadDim + (even ? V * j : 3 * V + V * j);
                const uint4 lo = even ? make_uint4(code[0].x, code[0].y, r1.x, r1.y)
                                      : make_uint4(r1.x, r1.y, code[1].x, code[1].y);
                const uint4 hi = even ? make_uint4(code[2].x, code[2].y, r2.x, r2.y)
                                      : make_uint4(r2.x, r2.y, code[3].x, code[3].y);
                store16(dst, lo);
                store16(dst + kHalf, hi);
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
