// Attention decode over a KV cache (flash-decoding on CUDA cores): one query token per sequence,
// q [B, H, D] against the sequence's first seqlens[b] keys and values of its cache, with grouped
// query heads (H = g * H_kv: query head h reads KV head h / g). Entry points per q dtype (f16, bf16):
//
//   gqa_decode_*            dense cache   k, v [B, S_max, H_kv, D] in q's dtype
//   gqa_decode_fp8_*        dense cache   in float8_e4m3fn, per-tensor k_scale / v_scale (f32 [1])
//   gqa_decode_paged_*      paged cache   k, v [num_pages, page_size, H_kv, D] (vLLM / FlashInfer
//                                         NHD), block_table [B, max_pages] int32, in q's dtype
//   gqa_decode_paged_fp8_*  paged cache   in float8_e4m3fn
//   gqa_decode_merge_*      the second pass of split-KV: merges the partial results
//
// Work split. One block of 128 threads per (sequence b, KV head, head tile, split): the block serves
// GT query heads of the group over the keys [split * chunk, (split + 1) * chunk) of sequence b.
// GT = 8 for a 16-bit cache and a group of more than 4 (64 f32 q values and 64 f32 accumulators per
// thread), 4 for groups of up to 4 and for an fp8 cache (whose 16 elements a lane double the
// registers per head). Each key and value is loaded ONCE per block and used for all GT heads, so a
// group of g <= GT heads reads its KV once; a larger group (g = 16 with a 16-bit cache, g >= 8 with
// fp8) has ceil(g / GT) head tiles, adjacent in the grid, that read the same KV (the second read
// mostly from L2). The host picks the number of splits so that the grid fills the GPU at any batch;
// with one split the block writes the final output directly (the one-pass path), otherwise each
// block writes its normalised partial output and log-sum-exp (f32) and gqa_decode_merge combines
// them.
//
// Inside a block: L = D / E lanes hold one key (E = 8 elements of a 16-bit cache, 16 of fp8: one
// 16-byte load per lane per key and per value), so a warp holds 32 / L keys and the block
// KG = 128 / L key groups. Each group walks its keys TK = 4 at a time, with all 2 * TK loads of a
// step issued before any is used (8 x 16 bytes in flight per thread). The scores of the GT heads are
// dot products over the L lanes (xor shuffles within the lane segment, one branch on L per step), in
// base 2: q is scaled by sm_scale * log2(e) (times k_scale for fp8) when it is loaded, so
// p = exp2(s - m) is one FADD and one MUFU.EX2. With a softcap c the score is
// c * tanh(q.k * sm_scale / c) (Gemma 2), computed as (c * log2 e) * tanh(q.k * (sm_scale / c)).
// Numerics as FlashAttention: f32 accumulation, a running max per head and step, the accumulators
// rescaled once per step. The KG groups' states are merged through shared memory at the end.
// v_scale multiplies the output.
//
// Edge cases: a sequence of length 0 (or a split past its end) gives o = 0 and lse = -inf (as
// FlashInfer); a seqlens entry is clamped to the cache's capacity (S_max, or max_pages * page_size)
// and below at 0, so a device copy that disagrees with the host plan never reads out of bounds; a
// block-table entry outside [0, num_pages) is never read through: the sequence's head outputs and
// lse come out NaN instead (the host plan refuses such a table before any launch).
//
// Launch contract (checked by the host): blockDim.x = 128; D in {64, 128, 256}; H % H_kv == 0;
// gridDim.x = B * H_kv * splits * head_tiles; every pointer 16-byte aligned; chunk a multiple of
// the keys a block takes per step (KG * TK).

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// @entry gqa_decode_{f16,bf16}: vector loads
// @entry gqa_decode_fp8_{f16,bf16}: vector loads
// @entry gqa_decode_paged_{f16,bf16}: vector loads
// @entry gqa_decode_paged_fp8_{f16,bf16}: vector loads
// @entry gqa_decode_merge_{f16,bf16}: vector loads

#include "tileops_common.cuh"
#include "tileops_fp8.cuh"

using namespace tileops;

namespace {

constexpr int kThreads = 128;
// Keys per lane group per step: the loads of a step are all in flight together.
constexpr int kTileKeys = 4;
constexpr float kLn2 = 0.6931471805599453f;

// Marks a float8_e4m3fn cache (one byte per element).
struct Fp8E4M3 {};

// A cache element type: E elements per 16-byte vector, unpacked to f32.
template <typename C>
struct Cache {
    static constexpr bool kFp8 = false;
    static constexpr int E = Elem<C>::V;
    __device__ static __forceinline__ void unpack(const uint4& r, float (&f)[E]) { Elem<C>::unpack(r, f); }
};

template <>
struct Cache<Fp8E4M3> {
    static constexpr bool kFp8 = true;
    static constexpr int E = 16;
    // e4m3 -> f16 is exact (one cvt.rn.f16x2.e4m3x2 per pair on sm_89+), then f16 -> f32.
    __device__ static __forceinline__ void unpack(const uint4& r, float (&f)[E]) {
        const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>(w[i] >> (16 * half));
                const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
                const float2 t = __half22float2(*reinterpret_cast<const __half2*>(&raw));
                f[4 * i + 2 * half] = t.x;
                f[4 * i + 2 * half + 1] = t.y;
            }
        }
    }
};

// NaN when either is NaN, else the larger: a NaN partial (a refused page) must not be dropped.
__device__ __forceinline__ float max_keep_nan(float a, float b) { return (a != a || a > b) ? a : b; }

struct DecodeArgs {
    int batch, heads, kv_heads, dim;
    long long s_max;  // dense: keys per sequence in the cache; paged: page_size
    int max_pages, num_pages;
    int splits, chunk, head_tiles;
    float qscale;  // sm_scale * log2(e), or sm_scale / softcap
    float cap2;    // softcap * log2(e), 0 = no softcap
    int write_lse;
};

}  // namespace

// Sums each value over its aligned segment of W lanes (the lanes that hold one key).
template <int W, int GT>
__device__ __forceinline__ void lane_sums(float (&s)[GT][kTileKeys]) {
#pragma unroll
    for (int h = 0; h < GT; ++h) {
#pragma unroll
        for (int j = 0; j < kTileKeys; ++j) {
#pragma unroll
            for (int off = W >> 1; off > 0; off >>= 1) s[h][j] += __shfl_xor_sync(0xffffffffu, s[h][j], off);
        }
    }
}

// The block's shared memory, declared once by the entry point for every instantiation below.
struct DecodeShared {
    float o[kThreads * 64];  // [KG][GT][D] partial accumulators: KG * GT * D = 128 * GT * E <= 128 * 64
    float m[32 * 8];         // [KG][GT] running max (base 2); KG <= 32, GT <= 8
    float l[32 * 8];         // [KG][GT] running sum
    int bad;
};

// One block: (sequence, KV head, split, head tile) from blockIdx.x, head tile fastest; GT the query
// heads a block serves (compile-time: the q values and accumulators are register arrays).
template <typename T, typename C, bool kPaged, int GT>
__device__ __forceinline__ void gqa_decode_block(const T* __restrict__ q, const void* __restrict__ k_cache,
                                                 const void* __restrict__ v_cache, const int* __restrict__ seqlens,
                                                 const int* __restrict__ block_table,
                                                 const float* __restrict__ k_scale, const float* __restrict__ v_scale,
                                                 T* __restrict__ o, float* __restrict__ lse, float* __restrict__ part_o,
                                                 float* __restrict__ part_lse, const DecodeArgs& a, DecodeShared& sm) {
    constexpr int E = Cache<C>::E;
    constexpr int kBytes = Cache<C>::kFp8 ? 1 : static_cast<int>(sizeof(T));
    static_assert(GT * E <= 64 && GT <= 8, "DecodeShared's sizes");
    const int D = a.dim;
    const int L = D / E;  // lanes per key: 4..32, a power of two
    const int KG = kThreads / L;
    float* const sm_o = sm.o;
    float* const sm_m = sm.m;
    float* const sm_l = sm.l;
    int& sm_bad = sm.bad;

    long long idx = blockIdx.x;
    const int tile = static_cast<int>(idx % a.head_tiles);
    idx /= a.head_tiles;
    const int split = static_cast<int>(idx % a.splits);
    idx /= a.splits;
    const int kvh = static_cast<int>(idx % a.kv_heads);
    const int b = static_cast<int>(idx / a.kv_heads);
    const int group = a.heads / a.kv_heads;
    const int h0 = kvh * group + tile * GT;  // first query head of this block
    const int gt = min(GT, group - tile * GT);

    const int lg = threadIdx.x % L;  // lane within the key group
    const int gi = threadIdx.x / L;  // key group

    if (threadIdx.x == 0) sm_bad = 0;

    // The sequence's valid keys, clamped to the cache's capacity, and this split's share.
    const long long capacity = kPaged ? static_cast<long long>(a.max_pages) * a.s_max : a.s_max;
    const long long len = min(max(static_cast<long long>(seqlens[b]), 0LL), capacity);
    const long long k_begin = static_cast<long long>(split) * a.chunk;
    const long long k_end = min(len, k_begin + a.chunk);

    // q: this lane's E elements of each of the block's heads, pre-scaled (base 2, k_scale folded).
    float qscale = a.qscale;
    if constexpr (Cache<C>::kFp8) qscale *= __ldg(k_scale);
    float qf[GT][E];
#pragma unroll
    for (int h = 0; h < GT; ++h) {
        const T* qrow = q + (static_cast<long long>(b) * a.heads + h0 + min(h, gt - 1)) * D + lg * E;
#pragma unroll
        for (int c = 0; c < E / 8; ++c) {
            float t[8];
            Elem<T>::unpack(load16(qrow + c * 8), t);
#pragma unroll
            for (int e = 0; e < 8; ++e) qf[h][c * 8 + e] = h < gt ? t[e] * qscale : 0.0f;
        }
    }

    float m[GT], l[GT], acc[GT][E];
#pragma unroll
    for (int h = 0; h < GT; ++h) {
        m[h] = neg_inf();
        l[h] = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[h][e] = 0.0f;
    }

    const char* kc = static_cast<const char*>(k_cache);
    const char* vc = static_cast<const char*>(v_cache);
    const long long row_bytes = static_cast<long long>(D) * kBytes;
    const long long lane_bytes = static_cast<long long>(lg) * E * kBytes;
    bool bad = false;
    __syncthreads();  // sm_bad is initialised before any thread may set it

    for (long long base = k_begin; base < k_end; base += static_cast<long long>(KG) * kTileKeys) {
        uint4 kv[2][kTileKeys];
        bool valid[kTileKeys];
        // All loads of the step first.
#pragma unroll
        for (int j = 0; j < kTileKeys; ++j) {
            const long long key = base + gi * kTileKeys + j;
            valid[j] = key < k_end;
            long long row = 0;  // the key's row of the cache, in units of [H_kv, D] rows
            if (valid[j]) {
                if constexpr (kPaged) {
                    const int page = __ldg(block_table + static_cast<long long>(b) * a.max_pages + key / a.s_max);
                    if (page < 0 || page >= a.num_pages) {
                        bad = true;
                        valid[j] = false;
                    }
                    row = static_cast<long long>(page) * a.s_max + key % a.s_max;
                } else {
                    row = static_cast<long long>(b) * a.s_max + key;
                }
            }
            const long long off = (row * a.kv_heads + kvh) * row_bytes + lane_bytes;
            kv[0][j] = valid[j] ? load16(kc + off) : make_uint4(0, 0, 0, 0);
            kv[1][j] = valid[j] ? load16(vc + off) : make_uint4(0, 0, 0, 0);
        }

        // Scores, base 2: s[h][j] = (qscale * q_h) . k_j, summed over the key's L lanes.
        float s[GT][kTileKeys];
#pragma unroll
        for (int j = 0; j < kTileKeys; ++j) {
            float kf[E];
            Cache<C>::unpack(kv[0][j], kf);
#pragma unroll
            for (int h = 0; h < GT; ++h) {
                float dot = 0.0f;
#pragma unroll
                for (int e = 0; e < E; ++e) dot = fmaf(qf[h][e], kf[e], dot);
                s[h][j] = dot;
            }
        }
        // The L-lane sums: one branch on L (block-uniform) for the whole step, fully unrolled sums.
        switch (L) {
            case 4: lane_sums<4>(s); break;
            case 8: lane_sums<8>(s); break;
            case 16: lane_sums<16>(s); break;
            default: lane_sums<32>(s); break;
        }
#pragma unroll
        for (int h = 0; h < GT; ++h) {
#pragma unroll
            for (int j = 0; j < kTileKeys; ++j) {
                float dot = s[h][j];
                if (a.cap2 != 0.0f) dot = a.cap2 * tanhf(dot);
                s[h][j] = valid[j] ? dot : neg_inf();
            }
        }

        // Online softmax: one running max per head, the accumulators rescaled once per step; the
        // scores are overwritten by their weights p = exp2(s - m).
#pragma unroll
        for (int h = 0; h < GT; ++h) {
            float step_max = s[h][0];
#pragma unroll
            for (int j = 1; j < kTileKeys; ++j) step_max = fmaxf(step_max, s[h][j]);
            const float m_new = fmaxf(m[h], step_max);
            // Every key so far masked: nothing to add (and -inf - -inf would be NaN).
            const float m_use = m_new == neg_inf() ? 0.0f : m_new;
            const float corr = exp2f(m[h] - m_use);
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < kTileKeys; ++j) {
                s[h][j] = exp2f(s[h][j] - m_use);
                sum += s[h][j];
            }
            l[h] = fmaf(l[h], corr, sum);
            m[h] = m_new;
#pragma unroll
            for (int e = 0; e < E; ++e) acc[h][e] *= corr;
        }
#pragma unroll
        for (int j = 0; j < kTileKeys; ++j) {
            float vf[E];
            Cache<C>::unpack(kv[1][j], vf);
#pragma unroll
            for (int h = 0; h < GT; ++h) {
#pragma unroll
                for (int e = 0; e < E; ++e) acc[h][e] = fmaf(s[h][j], vf[e], acc[h][e]);
            }
        }
    }

    // Merge the KG groups' states through shared memory.
    if (bad) sm_bad = 1;
#pragma unroll
    for (int h = 0; h < GT; ++h) {
#pragma unroll
        for (int e = 0; e < E; ++e) sm_o[(gi * GT + h) * D + lg * E + e] = acc[h][e];
        if (lg == 0) {
            sm_m[gi * GT + h] = m[h];
            sm_l[gi * GT + h] = l[h];
        }
    }
    __syncthreads();

    const bool refused = sm_bad != 0;
    const float vs = Cache<C>::kFp8 ? __ldg(v_scale) : 1.0f;
    for (int i = threadIdx.x; i < gt * D; i += kThreads) {
        const int h = i / D;
        const int d = i % D;
        float mx = neg_inf();
        for (int g = 0; g < KG; ++g) mx = fmaxf(mx, sm_m[g * GT + h]);
        float sum = 0.0f, out = 0.0f;
        if (mx != neg_inf()) {
            for (int g = 0; g < KG; ++g) {
                const float w = exp2f(sm_m[g * GT + h] - mx);
                sum = fmaf(sm_l[g * GT + h], w, sum);
                out = fmaf(sm_o[(g * GT + h) * D + d], w, out);
            }
        }
        // sum > 0 whenever a key was seen: the largest key's own term is exp2(0) = 1.
        const float nan = __int_as_float(0x7fc00000);
        const float value = refused ? nan : (sum > 0.0f ? out / sum * vs : 0.0f);
        const float row_lse = refused ? nan : (sum > 0.0f ? mx + log2f(sum) : neg_inf());  // base 2
        const long long row = static_cast<long long>(b) * a.heads + h0 + h;
        if (a.splits == 1) {
            Elem<T>::store(o + row * D + d, value);
            if (a.write_lse && d == 0) lse[row] = row_lse * kLn2;
        } else {
            part_o[(row * a.splits + split) * D + d] = value;
            if (d == 0) part_lse[row * a.splits + split] = row_lse;
        }
    }
}

// The entry points' body: picks the head tile of the instantiation. A 16-bit cache takes 4 heads a
// block for groups of up to 4 (Llama-3.1-8B's 4: no work on idle heads) and 8 for larger groups; an
// fp8 cache (16 elements a lane, so twice the registers per head) always takes 4.
template <typename T, typename C, bool kPaged>
__device__ __forceinline__ void gqa_decode(const T* __restrict__ q, const void* __restrict__ k_cache,
                                           const void* __restrict__ v_cache, const int* __restrict__ seqlens,
                                           const int* __restrict__ block_table, const float* __restrict__ k_scale,
                                           const float* __restrict__ v_scale, T* __restrict__ o,
                                           float* __restrict__ lse, float* __restrict__ part_o,
                                           float* __restrict__ part_lse, const DecodeArgs& a) {
    __shared__ DecodeShared sm;
    if (!Cache<C>::kFp8 && a.heads / a.kv_heads > 4) {
        gqa_decode_block<T, C, kPaged, Cache<C>::kFp8 ? 4 : 8>(q, k_cache, v_cache, seqlens, block_table, k_scale,
                                                               v_scale, o, lse, part_o, part_lse, a, sm);
    } else {
        gqa_decode_block<T, C, kPaged, 4>(q, k_cache, v_cache, seqlens, block_table, k_scale, v_scale, o, lse, part_o,
                                          part_lse, a, sm);
    }
}

// The second pass of split-KV: for each (b, h) row, o = sum_s w_s o_s / sum_s w_s with
// w_s = exp2(lse_s - max lse), lse = max + log2(sum w) (returned as a natural log). Rows of D / 4
// threads (4 elements each, one 16-byte load per split), 512 / D rows per block.
template <typename T>
__device__ __forceinline__ void gqa_decode_merge(const float* __restrict__ part_o, const float* __restrict__ part_lse,
                                                 T* __restrict__ o, float* __restrict__ lse, long long rows, int dim,
                                                 int splits, int write_lse) {
    const int tpr = dim / 4;
    const long long row = static_cast<long long>(blockIdx.x) * (kThreads / tpr) + threadIdx.x / tpr;
    const int c = threadIdx.x % tpr;
    if (row >= rows) return;
    const float* pl = part_lse + row * splits;
    float mx = neg_inf();
    for (int s = 0; s < splits; ++s) mx = max_keep_nan(mx, __ldg(pl + s));
    float out[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float row_lse = neg_inf();
    if (mx != mx) {
        const float nan = __int_as_float(0x7fc00000);
        out[0] = out[1] = out[2] = out[3] = nan;
        row_lse = nan;
    } else if (mx != neg_inf()) {
        float sum = 0.0f;
        for (int s = 0; s < splits; ++s) {
            const float w = exp2f(__ldg(pl + s) - mx);
            const float4 po = __ldg(reinterpret_cast<const float4*>(part_o + (row * splits + s) * dim) + c);
            sum += w;
            out[0] = fmaf(w, po.x, out[0]);
            out[1] = fmaf(w, po.y, out[1]);
            out[2] = fmaf(w, po.z, out[2]);
            out[3] = fmaf(w, po.w, out[3]);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) out[i] /= sum;
        row_lse = mx + log2f(sum);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) Elem<T>::store(o + row * dim + c * 4 + i, out[i]);
    if (write_lse && c == 0) lse[row] = row_lse * kLn2;
}

#define TILEOPS_GQA_DECODE_ENTRY(NAME, T, C, PAGED)                                                                  \
    extern "C" __global__ void __launch_bounds__(128, 2) NAME(                                                    \
        const T* __restrict__ q, const void* __restrict__ k_cache, const void* __restrict__ v_cache,              \
        const int* __restrict__ seqlens, const int* __restrict__ block_table, const float* __restrict__ k_scale, \
        const float* __restrict__ v_scale, T* __restrict__ o, float* __restrict__ lse, float* __restrict__ part_o, \
        float* __restrict__ part_lse, int batch, int heads, int kv_heads, int dim, long long s_max, int max_pages, \
        int num_pages, int splits, int chunk, int head_tiles, float qscale, float cap2, int write_lse) {           \
        const DecodeArgs a{batch, heads,  kv_heads,   dim,    s_max, max_pages, num_pages,                      \
                           splits, chunk, head_tiles, qscale, cap2, write_lse};                                 \
        gqa_decode<T, C, PAGED>(q, k_cache, v_cache, seqlens, block_table, k_scale, v_scale, o, lse, part_o,    \
                                part_lse, a);                                                                   \
    }

#define TILEOPS_GQA_DECODE_ENTRIES(T, SUFFIX)                                                             \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_##SUFFIX, T, T, false)                                            \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_fp8_##SUFFIX, T, Fp8E4M3, false)                                  \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_paged_##SUFFIX, T, T, true)                                       \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_paged_fp8_##SUFFIX, T, Fp8E4M3, true)                             \
    extern "C" __global__ void __launch_bounds__(128) gqa_decode_merge_##SUFFIX(                          \
        const float* __restrict__ part_o, const float* __restrict__ part_lse, T* __restrict__ o,          \
        float* __restrict__ lse, long long rows, int dim, int splits, int write_lse) {                    \
        gqa_decode_merge<T>(part_o, part_lse, o, lse, rows, dim, splits, write_lse);                      \
    }

TILEOPS_GQA_DECODE_ENTRIES(__half, f16)
TILEOPS_GQA_DECODE_ENTRIES(__nv_bfloat16, bf16)
